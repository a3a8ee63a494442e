"""The README stays true: every ``quarto ...`` command line in it parses at least as far as ``--help`` with every
flag it names, its Python example runs, and it stays a door (at most ~150 lines, no commit hashes)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from experiments import cli

README = Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text()


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", TEXT, re.S)


def quarto_lines() -> list[str]:
    """Every command line of the README's shell blocks that runs ``quarto``, comments dropped; a ``quarto``
    after ``&&`` counts too."""
    found = []
    for block in code_blocks("bash"):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words[:1] == ["quarto"]:
                    found.append(shlex.join(words))
    return found


def command_prefix(words: list[str]) -> list[str]:
    """``quarto bench env ...`` -> ``["bench", "env"]``; ``quarto train ...`` -> ``["train"]``."""
    return words[:2] if words[0] == "bench" else words[:1]


def help_text(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        status = cli.main([*argv, "--help"])
        raise SystemExit(status)
    assert exited.value.code in (0, None), argv
    return out.getvalue()


def test_the_readme_names_quarto_commands() -> None:
    assert len(quarto_lines()) >= 5  # the parser found them


@pytest.mark.parametrize("line", quarto_lines())
def test_every_quarto_line_parses_as_far_as_help(line: str) -> None:
    words = shlex.split(line)[1:]
    prefix = command_prefix(words)
    assert prefix[0] in cli.COMMANDS, line
    text = help_text(prefix)
    for flag in (word.partition("=")[0] for word in words if word.startswith("--")):
        assert re.search(rf"{re.escape(flag)}\b", text), f"{flag} is not an option of quarto {' '.join(prefix)}"


def test_every_command_in_the_table_exists() -> None:
    table = TEXT.split("## Commands", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`quarto (\w+)`", table)
    assert set(named) == set(cli.COMMANDS)


def test_the_readme_is_a_door() -> None:
    assert len(TEXT.splitlines()) <= 150
    assert not re.search(r"\b(commit|load) `?[0-9a-f]{7}\b|\bload \d", TEXT), (
        "figures with commits or loads go to docs/"
    )


def test_the_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (example,) = code_blocks("python")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(example, "README.md", "exec"), {})
    board = out.getvalue()
    assert board.count("\n") >= 4  # the final board, drawn as text


ROOT = README.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    """The targets of ``page``'s markdown links that point into the repository (web links and anchors dropped),
    without their ``#anchor``; links inside code are text, not links."""
    text = re.sub(r"```.*?```|`[^`\n]*`", "", page.read_text(), flags=re.S)
    targets = (target.partition("#")[0] for target in LINK.findall(text))
    return [target for target in targets if target and not re.match(r"[a-z]+:", target)]


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_every_link_names_a_file_in_the_repository(page: Path) -> None:
    missing = [target for target in relative_links(page) if not (page.parent / target).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to files that are not in the repository: {missing}"


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    reached, todo = {README}, [README]
    while todo:
        page = todo.pop()
        for target in relative_links(page):
            linked = (page.parent / target).resolve()
            if linked.suffix == ".md" and linked.exists() and linked not in reached:
                reached.add(linked)
                todo.append(linked)
    unreached = [page.name for page in pages() if page not in reached]
    assert not unreached, f"docs pages that no link from the README leads to: {unreached}"


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_every_source_file_a_page_names_is_in_the_repository(page: Path) -> None:
    named = re.findall(r"`((?:agents|configs|docs|experiments|quarto_env|tests)/[\w./-]+\.\w+)`", page.read_text())
    missing = sorted({path for path in named if not (ROOT / path).exists()})
    assert not missing, f"{page.relative_to(ROOT)} names files that are not in the repository: {missing}"


COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b(?!\.\.\.)")
"""A short or full git commit hash: seven or more hex digits, letters and digits both (an ID cut with ``...`` is
not one)."""


@pytest.mark.parametrize("page", [page for page in pages() if page.name != "results.md"], ids=lambda page: page.name)
def test_only_results_md_names_commits(page: Path) -> None:
    found = COMMIT_HASH.findall(page.read_text())
    assert not found, f"{page.relative_to(ROOT)} names commits {found}: give the date; results.md names the code"
