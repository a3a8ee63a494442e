"""Issue 43 item 3, every bad input one line: a value or range error of any option is one line, ``PROG: argument
--x: problem``, without the usage (which stays for unknown options and missing arguments); an invalid choice lists
the allowed ones; no option is taken by an abbreviation; an empty item in a list is refused, in the commands and
in the library; every count has an upper bound, in its message and in ``--help``; ``quarto train``'s overrides
go anywhere on the command line; a named pipe, a device or a folder given as an input file is refused before it
is read; the messages of config keys say what is allowed. The commands run in this process (``cli.main``)."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import quarto_env
from agents.specs import DEFAULT_PUCT_SIMULATIONS
from experiments import cli, options
from experiments.training import train as train_command
from experiments.training.config import SECTIONS, ConfigError, TrainConfig, describe_fields
from experiments.training.config_checks import field_ranges
from experiments.training.config_file import load_config
from experiments.training.dataset import load_dataset
from quarto_env.core import RulesError, Variant
from tests.test_cli_grammar import COMMAND_LINES, IDS, parser_of

POSITION = "6.e2....d8..9..1 5"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``quarto ARGV`` in this process: its exit status, stdout and stderr."""
    try:
        status = cli.main(argv)
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_line(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``quarto ARGV`` exits with status 2 and one line on stderr, ``quarto COMMAND: ...`` holding ``fragment``,
    without the usage; returns the line."""
    status, out, err = run(argv, capsys)
    lines = err.strip().splitlines()
    assert status == 2 and out == "", (status, out, err)
    assert len(lines) == 1 and "usage:" not in err, err
    assert lines[0].startswith(f"quarto {argv[0]}") and fragment in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------------------------------------
# Value errors: one line, no usage, nothing written
# ---------------------------------------------------------------------------------------------------------
VALUE_ERRORS = [
    (["evaluate", "run", "--checkpoint", "bogus"], "argument --checkpoint: must be best, final, latest or step_N"),
    (["dataset", "--sample", "0"], "argument --sample: sample must be an integer >= 1 and <= 100000, got 0"),
    (["dataset", "--sample", "4", "--seed", "4294967296"], "argument --seed: seed must be an integer >= 0 and <="),
    (["dataset", "--sample", "4", "--symmetries", "12288"], "symmetries must be an integer >= 0 and <= 12287"),
    (["dataset", "--sample", "4", "--observation", "pixels"], "argument --observation: invalid choice: 'pixels' (cho"),
    (["dataset", "--sample", "4", "--jobs", "0"], "argument --jobs: jobs must be an integer >= 1 and <= 64, got 0"),
    (["tournament", "random", "greedy", "--jobs", "0"], "argument --jobs: jobs must be an integer >= 1 and <= 64"),
    (["tournament", "random", "greedy", "--jobs", "65"], "argument --jobs: jobs must be an integer >= 1 and <= 64"),
    (["tournament", "random", "greedy", "--prior-draws", "1e6"], "prior-draws must be a finite number > 0 and <="),
    (["tournament", "random", "greedy", "--mode", "league"], "invalid choice: 'league' (choose from 'round-robin', "),
    (["tournament", "random", "greedy", "--attributes", ","], "argument --attributes: attributes ',': item 1 is emp"),
    (["tournament", "random", "greedy", "--attributes", "colour,,shape"], "attributes 'colour,,shape': item 2 is"),
    (["grade", "random", "--attributes", "colour,"], "attributes 'colour,': item 2 is empty; allowed: names from"),
    (["play", "--opponent", "random", "--attributes", "+shape"], "item 1 is empty"),
    (["solve", POSITION, "--attributes", "colour", ""], "argument --attributes: attributes '': item 1 is empty"),
    (["solve", POSITION, "--checkpoint-every", "86401"], "checkpoint-every must be a finite number >= 1 and <= 86400"),
    (["grade", "random", "--positions", "0"], "argument --positions: positions must be an integer >= 1 and <="),
    (["bench", "mcts", "--games", "100001"], "argument --games: games must be an integer >= 2 and <= 100000"),
    (["bench", "mcts", "--turn-ms", "60001"], "argument --turn-ms: turn-ms must be an integer >= 1 and <= 60000"),
    (["bench", "solver", "--positions", "10001"], "positions must be an integer >= 1 and <= 10000, got 10001"),
    (["bench", "solver", "--openings", "10001"], "openings must be an integer >= 1 and <= 10000, got 10001"),
    (["bench", "env", "--rounds", "1001"], "argument --rounds: rounds must be an integer >= 1 and <= 1000"),
    (["bench", "train", "--steps", "1e11"], "argument --steps: steps must be an integer >= 1 and <= 10000000000"),
    (["sweep", "configs/default.yaml", "--max-concurrent", "1025"], "max-concurrent must be an integer >= 0 and <="),
    (["replay", "games.jsonl", "--delay", "0"], "argument --delay: delay must be a finite number >= 0.01 and <= 60"),
    (["train", "--device", "tpu"], "argument --device: invalid choice: 'tpu' (choose from 'auto', 'cpu', 'cuda')"),
    (["train", "total_steps=1e100"], "config field total_steps must be an integer >= 1 and <= 10000000000, got"),
    (["train", "ppo.n_epochs=1001"], "config field ppo.n_epochs must be an integer >= 1 and <= 1000, got 1001"),
    (["train", "max_snapshots=1001"], "config field ppo.max_snapshots must be an integer >= 1 and <= 1000"),
    (["train", "eval_every=1e11"], "config field eval_every must be an integer >= 1 and <= 10000000000"),
    (["train", "early_evals=[0, 100000000000]"], "early_evals must list learner steps >= 0 in increasing order"),
    (["train", "variant.attributes=colour,,shape"], "attributes 'colour,,shape': item 2 is empty"),
]
"""Value errors of every kind of option, each with a fragment of its one line; "--out <tmp>/out" is added."""


@pytest.mark.parametrize(("argv", "fragment"), VALUE_ERRORS, ids=[" ".join(argv) for argv, _ in VALUE_ERRORS])
def test_a_value_error_is_one_line_without_the_usage_and_writes_nothing(
    argv: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    writes = {"dataset": "data.npz", "tournament": "t", "grade": "g", "train": "run", "sweep": "s"}
    out = tmp_path / writes.get(argv[0], "out")
    extra = ["--out", str(out)] if argv[0] in writes else []
    assert_one_line([*argv, *extra], fragment, capsys)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even an empty folder


def test_an_unknown_option_or_a_missing_argument_still_shows_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, problem in [
        (["dataset", "--sample", "4", "--out", "d.npz", "--nosuch"], "unrecognized arguments: --nosuch"),
        (["dataset", "--sample", "4"], "one of the arguments --out --check is required"),
        (["grade", "random", "--positions"], "argument --positions: expected one argument"),
    ]:
        status, _, err = run(argv, capsys)
        assert status == 2 and err.startswith(f"usage: quarto {argv[0]}") and problem in err, err


# ---------------------------------------------------------------------------------------------------------
# No abbreviations
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["tournament", "--resum", "runs/x"],
        ["train", "--resum", "runs/x"],
        ["dataset", "--samp", "4", "--out", "d.npz"],
        ["grade", "random", "--pos", "4"],
        ["bench", "mcts", "--gam", "5"],
    ],
    ids=" ".join,
)
def test_an_abbreviated_option_is_not_taken(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(argv, capsys)
    abbreviation = next(word for word in argv if word.startswith("--"))
    assert status == 2 and f"unrecognized arguments: {abbreviation}" in err, err


UNBOUNDED = {("replay", "--game")}
"""Number options without an upper bound of their own: ``replay --game`` is an index into the file, checked
against the games it holds."""


@pytest.mark.parametrize("words", COMMAND_LINES, ids=IDS)
def test_every_parser_refuses_abbreviations_and_bounds_and_shows_every_number(
    words: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parser, _ = parser_of(words, capsys, monkeypatch)
    assert parser.allow_abbrev is False
    formatter = parser._get_formatter()
    for action in parser._actions:
        if not isinstance(action.type, options.NumberArgument):
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        if (words[-1], name) not in UNBOUNDED:
            assert action.type.limits.get("maximum") is not None, f"quarto {' '.join(words)} {name} has no bound"
        assert action.type.allowed in formatter._get_help_string(action), name  # the range, in --help


def test_help_states_the_range_and_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["tournament", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "at most the number of cores (default: all cores) (an integer >= 1 and <= 64)" in text  # --jobs
    assert "(an integer >= 100 and <= 100000; default: 1000)" in text  # --bootstrap


def test_every_count_of_the_training_config_has_an_upper_bound_stated_in_help_config() -> None:
    for kind in (TrainConfig, *SECTIONS.values()):
        for name, allowed in field_ranges(kind).items():
            assert allowed.maximum is not None or name in {"clip_range", "max_grad_norm"}, name  # no counts
    assert "total_steps (int, default 1500000, range >= 1 and <= 10,000,000,000)" in describe_fields()
    assert "ppo.n_epochs (int, default 4, range >= 1 and <= 1,000)" in describe_fields()


# ---------------------------------------------------------------------------------------------------------
# Empty items in lists, in the library
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("attributes", "item"), [("colour,,shape", 2), ("colour,", 2), (",", 1), ("", 1)])
def test_the_library_refuses_an_empty_attribute_name(attributes: str, item: int) -> None:
    message = rf"attributes '{attributes}': item {item} is empty; allowed: names from height, colour, shape, top"
    with pytest.raises(RulesError, match=message):
        quarto_env.env(attributes=attributes)
    with pytest.raises(RulesError, match=message):
        Variant.make(attributes=attributes)
    with pytest.raises(RulesError, match="item 2 is empty"):
        Variant.make(attributes=["colour", ""])
    assert Variant.make(attributes="colour+shape") == Variant.make(attributes=["shape", "colour"])


# ---------------------------------------------------------------------------------------------------------
# quarto train: overrides anywhere; messages that say what is allowed
# ---------------------------------------------------------------------------------------------------------
def test_overrides_are_taken_before_between_and_after_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = train_command.parse_args(["total_steps=64", "--out", str(tmp_path / "X"), "seed=1", "--no-progress"])
    assert args.overrides == ["total_steps=64", "seed=1"] and args.out == tmp_path / "X" and args.no_progress
    line = assert_one_line(["train", "total_steps=0", "--out", str(tmp_path / "X"), "seed=1"], "total_steps", capsys)
    assert "must be an integer >= 1" in line and not (tmp_path / "X").exists()


def test_a_dotted_key_is_answered_with_the_real_rule() -> None:
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) foo.bar; allowed: common fields: algorithm, "):
        load_config(None, ["foo.bar=1"])
    rule = r"a dotted key is SECTION.FIELD \(ppo.n_steps=..., alphazero.network_design=..., rllib.num_env_runners"
    with pytest.raises(ConfigError, match=rf"seed takes no dotted key; {rule}"):
        load_config(None, ["seed.x=1"])
    with pytest.raises(ConfigError, match=r"ppo.n_steps takes no dotted key"):
        load_config(None, ["ppo.n_steps.x=1"])
    for dotted in ["ppo.n_steps=32", "alphazero.sims=8", "rllib.num_env_runners=1", "variant.squares=true"]:
        load_config(None, [dotted])  # the rule's own examples work


def test_the_unknown_key_message_lists_common_fields_and_sections() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(None, ["totl_steps=1"])
    message = str(error.value)
    assert "; allowed: common fields: algorithm, backend, name, seed," in message
    assert "; section ppo: n_steps, batch_size," in message and "; section rllib: num_env_runners," in message
    assert message.endswith("did you mean 'total_steps'?")


# ---------------------------------------------------------------------------------------------------------
# Input files that are no regular file: refused before they are read
# ---------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def unblocked(fifo: Path) -> Iterator[list[bool]]:
    """While the block runs, a watchdog that opens ``fifo`` for writing whenever a reader waits on it (and closes it
    at once, so the reader sees an empty file): a command that opens the pipe carries on instead of hanging the
    test, and the list it yields says whether any did."""
    opened: list[bool] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # succeeds only while a reader waits
            except OSError as error:
                if error.errno != errno.ENXIO:
                    raise
            else:
                opened.append(True)

    watchdog = threading.Thread(target=watch, daemon=True)
    watchdog.start()
    try:
        yield opened
    finally:
        stop.set()
        watchdog.join()


READERS = [
    ["replay", "<fifo>", "--no-pause"],
    ["replay", "<fifo>", "--html", "<tmp>/page.html"],
    ["plot", "<fifo>", "--probe", "--out", "<tmp>/probe.png"],
    ["evaluate", "<fifo>"],
    ["tournament", "random", "ppo:<fifo>", "--out", "<tmp>/t"],
    ["suite", "<fifo>"],
    ["dataset", "--suite", "<fifo>", "--out", "<tmp>/data.npz"],
    ["train", "--config", "<fifo>", "--out", "<tmp>/run"],
    ["bench", "train", "--config", "<fifo>"],
    ["sweep", "<fifo>", "--seeds", "0"],
    ["train", "--resume", "<tmp>/run"],  # its config.yaml is the pipe
    ["tournament", "--resume", "<tmp>/arena"],  # its config.json is the pipe
]


@pytest.mark.parametrize("argv", READERS, ids=" ".join)
def test_a_named_pipe_given_as_an_input_is_refused_before_it_is_read(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for folder, name in [("run", "config.yaml"), ("arena", "config.json")]:
        (tmp_path / folder).mkdir()
        os.mkfifo(tmp_path / folder / name)
    argv = [word.replace("<fifo>", str(fifo)).replace("<tmp>", str(tmp_path)) for word in argv]
    before = sorted(tmp_path.rglob("*"))
    with (
        unblocked(fifo) as opened,
        unblocked(tmp_path / "run" / "config.yaml"),
        unblocked(tmp_path / "arena" / "config.json"),
    ):
        line = assert_one_line(argv, "is not a regular file (a named pipe or a device); name a file", capsys)
    assert not opened, "the command opened the pipe"
    assert sorted(tmp_path.rglob("*")) == before, line  # nothing written


@pytest.mark.parametrize(("path", "problem"), [("/dev/zero", "is not a regular file"), ("<tmp>", "is a folder")])
def test_a_device_or_a_folder_given_as_an_input_is_refused(
    path: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = path.replace("<tmp>", str(tmp_path))
    assert_one_line(["replay", path, "--no-pause"], f"games file {path!r} {problem}", capsys)
    assert_one_line(
        ["train", "--config", path, "--out", str(tmp_path / "run")], f"config file {path!r} {problem}", capsys
    )
    assert not (tmp_path / "run").exists()


def test_the_library_refuses_a_pipe_as_a_dataset(tmp_path: Path) -> None:
    fifo = tmp_path / "data.npz"
    os.mkfifo(fifo)
    with unblocked(fifo) as opened, pytest.raises(ValueError, match="is not a regular file"):
        load_dataset(fifo)
    assert not opened


# ---------------------------------------------------------------------------------------------------------
# quarto plot: runs without curves, probe records of another shape
# ---------------------------------------------------------------------------------------------------------
def test_plot_refuses_a_run_without_evaluation_curves_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run stopped before its first evaluation has TensorBoard events but no ``eval/`` curve (matplotlib's
    gridspec raised on zero columns); random bytes as an event file read the same."""
    from torch.utils.tensorboard import SummaryWriter

    early, damaged = tmp_path / "early", tmp_path / "damaged"
    writer = SummaryWriter(str(early / "tb"))
    writer.add_scalar("train/loss", 1.0, 1)
    writer.close()
    (damaged / "tb").mkdir(parents=True)
    (damaged / "tb" / "events.out.tfevents.1.host").write_bytes(os.urandom(300))
    for run_dir in (early, damaged):
        out = tmp_path / f"{run_dir.name}.png"
        assert_one_line(["plot", str(run_dir), "--out", str(out)], "has no evaluation curves in its tb/ yet", capsys)
        assert not out.exists()


@pytest.mark.parametrize(
    "record",
    [
        '{"protocol": 5, "results": 5}',
        '{"protocol": {}, "results": []}',
        '{"protocol": {"settings": {}}, "results": [1]}',
    ],
)
def test_plot_probe_refuses_a_record_of_another_shape_in_one_line(
    record: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = tmp_path / "record.json", tmp_path / "probe.png"
    path.write_text(record)
    assert_one_line(["plot", "--probe", str(path), "--out", str(out)], "is not a probe record", capsys)
    assert not out.exists()


# ---------------------------------------------------------------------------------------------------------
# Options that would do nothing: refused, not ignored
# ---------------------------------------------------------------------------------------------------------
UNUSED_OPTIONS = [
    (["replay", "games.jsonl", "--jobs", str(options.all_cores() % options.MAX_JOBS + 1)], "--jobs is used only with"),
    (["suite", "standard-v1", "--out", "<tmp>/s.jsonl"], "--out is used only with --build"),
    (["suite", "standard-v1", "--games", "5"], "--games is used only with --build"),
    (["solve", POSITION, "--checkpoint-every", "5"], "--checkpoint-every is used only with --resume"),
]


@pytest.mark.parametrize(("argv", "fragment"), UNUSED_OPTIONS, ids=[" ".join(a) for a, _ in UNUSED_OPTIONS])
def test_an_option_that_would_do_nothing_is_refused_in_one_line(
    argv: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [arg.replace("<tmp>", str(tmp_path)) for arg in argv]
    assert_one_line(argv, fragment, capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sims", ["5", str(DEFAULT_PUCT_SIMULATIONS)])  # the default's value named is refused too
def test_evaluate_refuses_sims_for_a_ppo_checkpoint(
    sims: str, tiny_run: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_line(
        ["evaluate", str(tiny_run[0]), "--sims", sims], "--sims is used only with alphazero checkpoints", capsys
    )


def test_plot_writes_the_format_its_suffix_names_and_refuses_one_it_cannot(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    svg = tmp_path / "curves.svg"
    assert run(["plot", str(tiny_run[0]), "--out", str(svg)], capsys)[0] == 0
    assert b"<svg" in svg.read_bytes()[:500]
    assert_one_line(["plot", str(tiny_run[0]), "--out", str(tmp_path / "c.docx")], "matplotlib writes no .docx", capsys)
    assert not (tmp_path / "c.docx").exists()
