"""Issue 34 item 6, one grammar for every ``quarto`` command: ``--help`` shows the defaults and no markup; the
usage only for syntax errors, a refusal after parsing is one line; ``--out`` (old spellings kept) and
``--no-progress`` wherever they apply; ``quarto train`` prints nothing before a refusal and the resume command on
Ctrl-C; a run folder means its final checkpoint, said on stderr; ``quarto --version``; the ``bench`` line."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from experiments import cli, options

COMMAND_LINES = [[name] for name, (module, _) in cli.COMMANDS.items() if module is not None] + [
    ["bench", name] for name in cli.BENCHMARKS
]
"""Every command, as the words that name it."""
IDS = [" ".join(words) for words in COMMAND_LINES]


def parser_of(words: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The parser that ``quarto WORDS --help`` printed (caught as the command builds it), and the help text."""
    built: list[argparse.ArgumentParser] = []
    original = options.CommandParser.__init__

    def recording(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(options.CommandParser, "__init__", recording)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*words, "--help"])
    assert exit_info.value.code == 0
    assert built, f"quarto {' '.join(words)} builds no CommandParser"
    return built[-1], capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------
# 8. --help: defaults shown, no markup
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("words", COMMAND_LINES, ids=IDS)
def test_every_help_shows_the_defaults_and_no_markup(
    words: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parser, text = parser_of(words, capsys, monkeypatch)
    assert "`" not in text and ":func:" not in text and ":data:" not in text, text
    formatter = parser._get_formatter()
    assert isinstance(formatter, options.DefaultsHelpFormatter)
    for action in parser._actions:
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS, []):
            assert "default" in formatter._get_help_string(action).lower(), action.option_strings


def test_the_formatter_appends_the_default_unless_the_help_gives_it() -> None:
    parser = options.CommandParser(prog="quarto test")
    parser.add_argument("--games", type=int, default=4, help="games per pair")
    parser.add_argument("--opponents", nargs="+", default=["random", "greedy"], help="agents")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0: the first)")
    parser.add_argument("--out", default=None, help="output file")
    text = parser.format_help()
    assert "games per pair (default: 4)" in text
    assert "agents (default: random greedy)" in text
    assert text.count("default") == 3  # --seed's own, once; --out has none to show


# ---------------------------------------------------------------------------------------------------------
# 3. The usage for syntax errors only; a refusal is one line
# ---------------------------------------------------------------------------------------------------------
REFUSALS = [
    (["tournament", "random", "nosuch"], "unknown agent kind 'nosuch'"),
    (["tournament", "random", "greedy", "--games", "3"], "--games must be an even number"),
    (["grade", "nosuch"], "unknown agent kind 'nosuch'"),
    (["plot", "<tmp>/no-run", "--out", "<tmp>/curves.png"], "is not a training run folder"),
    (["play", "--opponent", "nosuch"], "unknown agent kind 'nosuch'"),
    (["suite", "--build"], "--build needs the suite's NAME"),
    (["book", "--declaration"], "the book covers the rules without --declaration"),
    (["bench", "az", "--games", "2", "4", "--workers", "2"], "--games takes one number with --workers"),
    (["evaluate", "<tmp>/missing.zip"], "missing.zip"),
    (["train", "--out", "<tmp>/run", "total_steps=abc"], "total_steps"),
    (["replay", "<tmp>/missing.jsonl"], "missing.jsonl"),
    (["tournament", "ppo:<tmp>,checkpoint=bogus", "random"], "must be best, final, latest or step_N"),
]


@pytest.mark.parametrize(("argv", "message"), REFUSALS, ids=[" ".join(argv[:2]) for argv, _ in REFUSALS])
def test_a_refusal_is_one_line_without_the_usage(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [word.replace("<tmp>", str(tmp_path)) for word in argv]
    try:
        status = cli.main(argv)
    except SystemExit as stop:
        status = stop.code
    assert status == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "usage:" not in captured.err, captured.err
    assert lines[0].startswith(f"quarto {argv[0]}") and message in lines[0], lines[0]
    assert not (tmp_path / "run").exists()  # nothing written


def test_a_syntax_error_still_shows_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["tournament", "random", "greedy", "--nosuch"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: quarto tournament") and "unrecognized arguments: --nosuch" in err


# ---------------------------------------------------------------------------------------------------------
# 1. --out, with the old spellings; 2. --no-progress
# ---------------------------------------------------------------------------------------------------------
WRITERS = [
    ["train"],
    ["sweep"],
    ["plot"],
    ["tournament"],
    ["grade"],
    ["book"],
    ["suite"],
    ["dataset"],
    ["play"],
    ["bench", "env"],
    ["bench", "solver"],
    ["bench", "vector"],
]
"""The commands that write an output file or folder."""
SHOWING_PROGRESS = [["train"], ["evaluate"], ["play"], ["tournament"], ["grade"], ["solve"], ["book"], ["suite"]]
SHOWING_PROGRESS += [["dataset"]]
"""The commands that show progress on stderr (play shows none, and takes the flag all the same)."""


@pytest.mark.parametrize("words", WRITERS, ids=[" ".join(w) for w in WRITERS])
def test_every_output_is_named_out(
    words: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parser, _ = parser_of(words, capsys, monkeypatch)
    outs = [action for action in parser._actions if action.dest == "out"]
    assert len(outs) == 1 and outs[0].option_strings[0] == "--out"


@pytest.mark.parametrize("words", SHOWING_PROGRESS, ids=[" ".join(w) for w in SHOWING_PROGRESS])
def test_every_command_showing_progress_takes_no_progress(
    words: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parser, _ = parser_of(words, capsys, monkeypatch)
    assert "--no-progress" in parser._option_string_actions


OLD_SPELLINGS = [
    (["bench", "env", "--output", "<tmp>"], "quarto bench env: --out '"),
    (["plot", "<tmp>/no-run", "-o", "<tmp>/c.png"], "is not a training run folder"),
    (["plot", "<tmp>/no-run", "--output", "<tmp>/c.png"], "is not a training run folder"),
    (["play", "--opponent", "random", "--save", "<tmp>"], "--out"),
]


@pytest.mark.parametrize(("argv", "message"), OLD_SPELLINGS, ids=[" ".join(a[:3]) for a, _ in OLD_SPELLINGS])
def test_the_old_output_spellings_are_still_taken(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [word.replace("<tmp>", str(tmp_path)) for word in argv]
    with pytest.raises(SystemExit):
        cli.main(argv)
    err = capsys.readouterr().err
    assert "unrecognized" not in err and message in err.strip().splitlines()[-1]


def test_train_takes_run_dir_as_out() -> None:
    from experiments.training import train

    assert train.parse_args(["--run-dir", "x"]).out == train.parse_args(["--out", "x"]).out == Path("x")


# ---------------------------------------------------------------------------------------------------------
# 4. train: nothing printed before a refusal; 5. Ctrl-C names the resume command
# ---------------------------------------------------------------------------------------------------------
def test_train_prints_nothing_before_a_refused_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.training import train

    argv = ["--out", str(tmp_path / "run"), "eval_opponents=[random,ppo:/nonexistent/x.zip]"]
    assert train.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "run folder" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1 and "x.zip" in captured.err


def test_train_prints_nothing_before_refusing_a_folder_with_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.training import train

    (tmp_path / "config.yaml").write_text("name: other\n")
    assert train.main(["--out", str(tmp_path), "total_steps=64"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "already holds a run" in captured.err


@pytest.mark.parametrize("checkpointed", [True, False])
def test_ctrl_c_in_train_closes_the_bar_then_names_the_resume_command(
    checkpointed: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend interrupted inside its bar: the bar is closed (a closed tqdm is disabled) before the message,
    which is the last thing printed, and the status is 130."""
    from experiments.training import run, train

    bars = []

    def start(config: Any, run_dir: Path, resume: bool) -> None:
        return None

    def interrupted_run(config: Any, run_dir: Path, state: Any) -> Path:
        if checkpointed:
            (run_dir / "checkpoints").mkdir()
            (run_dir / "checkpoints" / "latest.zip").write_bytes(b"")
        with run.progress_bar(0, 100, "step") as bar:
            bars.append(bar)
            bar.update(10)
            raise KeyboardInterrupt

    backend = types.ModuleType("fake_backend")
    backend.start, backend.run = start, interrupted_run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_backend", backend)
    monkeypatch.setitem(train.BACKENDS, ("ppo", "sb3"), "fake_backend")
    run_dir = tmp_path / "run"
    assert train.main(["--out", str(run_dir), "eval_opponents=[random]", "grade_positions=0"]) == 130
    assert bars and bars[0].disable  # closed before the message
    last = capsys.readouterr().err.strip().splitlines()[-1]
    if checkpointed:  # an empty latest.zip: no checkpoint a resume can take, and the line says so
        assert last.startswith("quarto train: interrupted; it cannot be resumed (checkpoint ")
    else:  # the story of tests/test_first_hour.py
        story = f"it has no checkpoint yet: quarto train --resume {run_dir} starts it from step 0"
        assert last == f"quarto train: interrupted; {story}"


def test_no_progress_hides_the_training_bar() -> None:
    from experiments.training import run

    with run.hidden_progress():
        assert run.progress_bar(0, 10, "step").disable
    assert not run.progress_bar(0, 10, "step").disable


# ---------------------------------------------------------------------------------------------------------
# 7. --version; 9. the bench line
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([flag]) == 0
    assert capsys.readouterr().out == f"quarto-env {importlib.metadata.version('quarto-env')}\n"


def test_version_without_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    import quarto_env

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert quarto_env.__version__ == quarto_env.UNKNOWN_VERSION


def test_the_bench_line_names_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("bench "))
    assert all(name in line for name in cli.BENCHMARKS), line
