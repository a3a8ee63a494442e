"""Issue 9 for play, replay, solve and the benchmarks: every numeric option is finite and within its range, output
files are checked before any work, the rule-variant flags are parsed by one function in every command, and the
``quarto`` entry point ends quietly when its reader goes away or on Ctrl-C. Each bad value is a usage error:
exit status 2, and stderr's last line names the option and what is allowed. No case starts any work."""

from __future__ import annotations

import argparse
import errno
import io
import re
from pathlib import Path
from typing import Any

import pytest

from experiments import cli, options
from experiments.arena import grade, play, solve, tournament
from experiments.bench import solver as bench_solver
from quarto_env.core import Variant

BAD_NUMBERS = [
    (["replay", "games.jsonl", "--delay", "nan"], "argument --delay: delay must be a finite number >= 0.01"),
    (["replay", "games.jsonl", "--delay=-inf"], "argument --delay: delay must be a finite number"),
    (["replay", "games.jsonl", "--game", "-3"], "argument --game: game must be an integer >= 0"),
    (["play", "--opponent", "random", "--seed", "1e400"], "argument --seed: seed must be an integer >= 0"),
    (["bench", "mcts", "--games", "0"], "argument --games: games must be an integer >= 2 and <= 100000, got 0"),
    (["bench", "mcts", "--games", "nan"], "argument --games: games must be an integer >= 2"),
    (["bench", "mcts", "--turn-ms", "0"], "argument --turn-ms: turn-ms must be an integer >= 1"),
    (["bench", "mcts", "--seed", "-1"], "argument --seed: seed must be an integer >= 0"),
    (["bench", "solver", "--empties", "8", "17"], "argument --empties: empties must be an integer >= 1 and <= 16"),
    (["bench", "solver", "--positions", "0"], "argument --positions: positions must be an integer >= 1"),
    (["bench", "solver", "--seed", "-1"], "argument --seed: seed must be an integer >= 0"),
    (["bench", "solver", "--depths", "0"], "argument --depths: depth must be an integer >= 1 and <= 32"),
    (["bench", "solver", "--openings", "0"], "argument --openings: openings must be an integer >= 1"),
    (["bench", "solver", "--budgets", "nan"], "argument --budgets: budget must be a finite number > 0"),
    (["bench", "solver", "--budgets", "inf"], "argument --budgets: budget must be a finite number > 0 and <= 600"),
    (["bench", "solver", "--budgets", "0"], "argument --budgets: budget must be a finite number > 0"),
    (["bench", "solver", "--budget-moves", "7"], "argument --budget-moves: budget-moves must be an integer >= 1"),
    (["bench", "env", "--seconds", "nan"], "argument --seconds: seconds must be a finite number > 0"),
    (["bench", "env", "--seconds", "inf"], "argument --seconds: seconds must be a finite number > 0 and <= 3600"),
    (["bench", "env", "--rounds", "0"], "argument --rounds: rounds must be an integer >= 1"),
    (["bench", "env", "--seed", "-1"], "argument --seed: seed must be an integer >= 0"),
    (["bench", "train", "--steps", "0"], "argument --steps: steps must be an integer >= 1"),
    (["bench", "vector", "--batches", "0"], "argument --batches: batches must be an integer >= 1 and <= 65536"),
    (["bench", "vector", "--batches", "64", "1e9"], "argument --batches: batches must be an integer >= 1 and <= 65536"),
    (["bench", "vector", "--rounds", "0"], "argument --rounds: rounds must be an integer >= 1 and <= 1000"),
    (["bench", "vector", "--seconds", "nan"], "argument --seconds: seconds must be a finite number > 0"),
    (["bench", "vector", "--seed", "-1"], "argument --seed: seed must be an integer >= 0"),
    (["bench", "vector", "--observations", "pixels"], "argument --observations: invalid choice: 'pixels'"),
    (["bench", "vector", "--threads", "0"], "argument --threads: threads must be an integer >= 1 and <= 256"),
    (["bench", "train", "--steps", "inf"], "argument --steps: steps must be an integer >= 1"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_NUMBERS, ids=[" ".join(argv) for argv, _ in BAD_NUMBERS])
def test_a_bad_number_is_a_one_line_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_usage_error(argv, message, capsys)


BAD_OUTPUTS = [
    (["bench", "solver", "--out", "<tmp>"], "quarto bench solver: --out '<tmp>' is a folder; name a file"),
    (["bench", "solver", "--out", "/dev/null"], "--out '/dev/null' is not a regular file"),
    (["bench", "env", "--out", "/proc/quarto-test/env.json"], "quarto bench env: --out '/proc/quarto-test"),
    (["bench", "train", "--profile", "<tmp>"], "quarto bench train: --profile '<tmp>' is a folder"),
    (["bench", "env", "--output", "/proc/env.json"], "--out '/proc/env.json' cannot be written"),  # the old name
    (["bench", "solver", "--out", "/sys/solver.json"], "--out '/sys/solver.json' cannot be written"),
    (["bench", "train", "--profile", "/proc/train.prof"], "--profile '/proc/train.prof' cannot be written"),
    (["bench", "solver", "--out", f"<tmp>/{'a' * 300}.json"], "is too long for the file system"),
    (["bench", "vector", "--out", "<tmp>"], "quarto bench vector: --out '<tmp>' is a folder; name a file"),
    (["bench", "vector", "--out", "/proc/vector.json"], "--out '/proc/vector.json' cannot be written"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_OUTPUTS, ids=[" ".join(argv[:3]) for argv, _ in BAD_OUTPUTS])
def test_a_bad_output_file_is_refused_before_any_work(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [arg.replace("<tmp>", str(tmp_path)) for arg in argv]
    assert_usage_error(argv, message.replace("<tmp>", str(tmp_path)), capsys)


def test_a_command_line_refused_after_its_output_path_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output path is checked once, when the output is claimed, not as the command line is read: a command
    line refused for another option leaves no folder made for its output."""
    out = tmp_path / "new" / "solver.json"
    argv = ["bench", "solver", "--out", str(out), "--empties", "17"]
    assert_usage_error(argv, "argument --empties: empties must be an integer >= 1 and <= 16", capsys)
    assert list(tmp_path.iterdir()) == []


def test_a_benchmark_write_that_fails_late_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The path passed the check, then the disk filled up: the figures are printed, the file is not written."""

    def disk_full(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bench_solver, "atomic_write_text", disk_full)
    out = tmp_path / "solver.json"
    argv = ["bench", "solver", "--empties", "4", "--positions", "1", "--depths", "1", "--openings", "1", "--games", "0"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--budgets", "0.01", "--budget-moves", "1", "--skip-startup", "--out", str(out)])
    assert exit_info.value.code == 1  # not the command line's fault
    captured = capsys.readouterr()
    assert "minimax seconds per move" in captured.out and "Traceback" not in captured.err
    message = (
        f"quarto bench solver: --out '{out}': writing '{out}' failed (No space left on device); nothing was written"
    )
    assert captured.err.strip() == message and not out.exists()


# ---------------------------------------------------------------------------------------------------------
# The rule-variant flags: one parser for every command
# ---------------------------------------------------------------------------------------------------------
VARIANT_COMMANDS = {
    "play": ["play", "--opponent", "random"],
    "solve": ["solve", "6.e2....d8..9..1 5"],
    "bench solver": ["bench", "solver"],
    "tournament": ["tournament", "random", "greedy"],
    "grade": ["grade", "random"],
    "suite": ["suite"],  # listing the shipped suites: the flags are checked even where they name nothing
}


@pytest.mark.parametrize("command", VARIANT_COMMANDS.values(), ids=VARIANT_COMMANDS.keys())
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--false-declaration", "penalty"], "false_declaration='penalty' needs declaration=True"),
        (["--attributes", "colour,weight"], "argument --attributes: unknown attribute(s) ['weight']"),
        (["--attributes", "5"], "argument --attributes: attributes count must be 1-4, got 5"),
        (["--attributes", "colour,colour,shape"], "attribute listed twice in ['colour', 'colour', 'shape']"),
    ],
    ids=["penalty without declaration", "unknown", "count 5", "twice"],
)
def test_every_command_refuses_a_bad_variant_in_one_line(
    command: list[str], flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_usage_error([*command, *flags], message, capsys)


@pytest.mark.parametrize("build_parser", [solve.build_parser, bench_solver.build_parser])
@pytest.mark.parametrize(
    ("flags", "variant"),
    [
        ([], Variant()),
        (["--attributes", "colour", "shape"], Variant.make(attributes=("colour", "shape"))),
        (["--attributes", "shape,colour"], Variant.make(attributes=("colour", "shape"))),
        (["--attributes", "top", "colour,height"], Variant.make(attributes=("height", "colour", "top"))),
        (["--attributes", "2", "--squares"], Variant.make(attributes=2, squares=True)),
        (
            ["--declaration", "--false-declaration", "penalty"],
            Variant.make(declaration=True, false_declaration="penalty"),
        ),
    ],
)
def test_both_spellings_of_attributes_name_the_same_variant(
    build_parser: object, flags: list[str], variant: Variant
) -> None:
    assert callable(build_parser)
    parser: argparse.ArgumentParser = build_parser()
    positional = {"play": ["--opponent", "random"], "solve": ["6.e2....d8..9..1 5"]}.get(parser.prog.split()[-1], [])
    args = parser.parse_args([*positional, *flags])
    assert options.variant_from_args(parser, args) == variant


@pytest.mark.parametrize("build_parser", [play.build_parser, tournament.build_parser, grade.build_parser])
def test_commands_with_agent_lists_take_attributes_as_one_word(build_parser: object) -> None:
    assert callable(build_parser)
    parser: argparse.ArgumentParser = build_parser()
    args = parser.parse_args(["--attributes", "shape,colour", *AGENT_ARGUMENTS[parser.prog.split()[-1]]])
    assert options.variant_from_args(parser, args) == Variant.make(attributes=("colour", "shape"))
    assert parser.parse_args(["--attributes", "2", *AGENT_ARGUMENTS[parser.prog.split()[-1]]]).attributes == "2"


AGENT_ARGUMENTS = {"play": ["--opponent", "random"], "tournament": ["random", "greedy"], "grade": ["random"]}
"""What each command needs besides the variant: its agents come after the options."""


# ---------------------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "last_line"),
    [
        (["nosuch"], "quarto: unknown command 'nosuch'"),
        (["trian"], "quarto: unknown command 'trian'; did you mean 'train'?"),
        (["bench", "nosuch"], "quarto bench: unknown benchmark 'nosuch'"),
        (["bench", "evn"], "quarto bench: unknown benchmark 'evn'; did you mean 'env'?"),
        (["bench"], "quarto bench: name the benchmark to run"),
    ],
)
def test_an_unknown_command_is_named_on_the_last_line(
    argv: list[str], last_line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == last_line


def test_ctrl_c_ends_a_command_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(argv: list[str]) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(solve, "main", interrupted)
    assert cli.main(["solve", "-"]) == 130
    assert capsys.readouterr().err.strip() == "quarto solve: interrupted"


def assert_usage_error(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``quarto ARGV`` exits with status 2, and stderr is one line, the message, without the usage."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], captured.err


# ---------------------------------------------------------------------------------------------------------
# quarto bench train's table; "did you mean" for agent kinds and options
# ---------------------------------------------------------------------------------------------------------
def _table_text(table: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def test_bench_train_without_the_reference_shows_a_dash_not_nan() -> None:
    from experiments.bench.train import results_table

    row = {"steps": 64.0, "seconds": 2.0, "steps_per_s": 32.0, "rollout_share": 0.75}
    alone = _table_text(results_table({"config": row}, 64, []))
    assert "nan" not in alone.lower() and re.search(r"│\s+25%\s+│\s+-\s+│", alone), alone
    reference = {**row, "steps_per_s": 16.0}
    assert "2.00" in _table_text(results_table({"config": row, "reference": reference}, 64, []))


@pytest.mark.parametrize(
    ("spec", "hint"),
    [
        ("minimx", "; did you mean 'minimax'?"),
        ("mcst:sims=5", "; did you mean 'mcts'?"),
        ("minimax:dpth=2", "; did you mean 'depth'?"),
        ("alphazero", "the kinds are random"),  # nothing near: the list alone
    ],
)
def test_a_mistyped_agent_kind_or_option_gets_the_nearest_name(spec: str, hint: str) -> None:
    from agents.specs import SpecError, parse_spec

    with pytest.raises(SpecError) as refusal:
        parse_spec(spec)
    message = str(refusal.value)
    assert message.endswith(hint) if "did you mean" in hint else hint in message and "did you mean" not in message
