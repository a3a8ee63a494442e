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
