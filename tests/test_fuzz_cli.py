"""Fuzz test of the ``quarto`` command line: generated bad values for every subcommand's
options, agent specs, rule-variant flags, paths, game records and ``quarto train`` overrides. Each case must
end with

- no Python traceback on stderr,
- no hang: an answer within its timeout,
- a non-zero exit status,
- and one line that names the problem: stderr's last non-empty line (the listing of agent kinds may follow a
  bad spec's message) mentions the option, field or value at fault. argparse's usage may come before it only
  for a command line of the wrong shape (:data:`SYNTAX_ERRORS`), never for a value.

Every case sets the rest of the command small (two games, a few positions, 64 learner steps), so that a bad
value that slips through ends in seconds, as a failure, instead of running a tournament or a training.

Most cases run in a forked copy of this test process, with the commands' modules already imported: a case
costs a fork (tens of milliseconds) instead of an interpreter's start-up (one or two seconds with torch and
numba), and a case that hangs is killed at its timeout, with all it started. A sample runs as real ``python -m
experiments.cli`` processes (the larger sweep is marked slow). The values are listed by hand or drawn by a
seeded ``random.Random``, so every run runs the same cases; one hypothesis test throws free text at the
numeric options. Each case runs in a fresh temporary folder; nothing is written in the checkout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from quarto_env.extras import missing_module

REPO = Path(__file__).resolve().parent.parent
AS_ROOT = os.geteuid() == 0
TRACEBACK = "Traceback (most recent call last)"
RNG = random.Random(9)  # seeded: the same cases in every run

# ---------------------------------------------------------------------------------------------------------
# Places: files and folders the cases name, as <tokens> replaced at run time
# ---------------------------------------------------------------------------------------------------------
UNWRITABLE = "/proc/quarto-fuzz"
"""A place where nothing can be created, by root either."""
LONG_NAME = "a" * 300
"""A file or folder name longer than any file system takes (255 bytes), relative to the case's folder."""
POSITION = "6.e2....d8..9..1 5"
"""A position ``quarto solve`` answers in a fraction of a second."""
STANDARD_VARIANT = {"attributes": ["height", "colour", "shape", "top"], "squares": False, "declaration": False}
STANDARD_VARIANT |= {"false_declaration": "lose"}
GAME = {
    "variant": STANDARD_VARIANT,
    "seats": ["random", "greedy"],
    "actions": [7, 13, 3, 7, 12, 1, 4, 15, 0, 5, 13, 2, 14, 8, 1, 14, 5, 12],
    "winner": 1,
    "end": "win",
    "positions": ["................ -", "................ 7", ".............7.. -", ".............7.. 3"],
}
"""A recorded game (random against greedy, greedy wins), as ``quarto tournament`` writes it."""

MALFORMED_RECORDS: dict[str, str] = {
    "not-json": "{not json",
    "list": "[1, 2]",
    "number": "5",
    "string": '"a game"',
    "null": "null",
    "no-actions": json.dumps({k: v for k, v in GAME.items() if k != "actions"}),
}
"""Lines of ``games.jsonl`` that are no game record; more below, as one field of a good record changed."""
BAD_FIELDS: list[tuple[str, object]] = [
    ("variant", []),
    ("variant", "standard"),
    ("variant", None),
    ("variant", {"attributes": "bogus"}),
    ("variant", {"squares": "yes"}),
    ("variant", {"bogus": 1}),
    ("seats", []),
    ("seats", ["random"]),
    ("seats", None),
    ("seats", 5),
    ("seats", "ab"),
    ("actions", "abc"),
    ("actions", None),
    ("actions", [99]),
    ("actions", [-1]),
    ("actions", ["a"]),
    ("actions", [1.5]),
    ("actions", [10**30]),
    ("actions", [True, 3]),
    ("winner", 5),
    ("winner", "x"),
    ("end", 5),
    ("end", "forfeit"),  # forfeit by player 1 -- who won the game on the board
    ("opening", [99]),
    ("opening", "ab"),
    ("opening", 5),
    ("opening", [[1]]),
    ("positions", "abc"),
    ("positions", [5]),
    ("positions", 5),
]
for _field, _value in BAD_FIELDS:
    MALFORMED_RECORDS[f"{_field}={json.dumps(_value)}"] = json.dumps({**GAME, _field: _value})
MALFORMED_RECORDS["forfeit-without-winner"] = json.dumps({**GAME, "end": "forfeit", "winner": None})
MALFORMED_RECORDS["forfeit-winner-2"] = json.dumps({**GAME, "end": "forfeit", "winner": 2})


def make_places(root: Path) -> dict[str, str]:
    """Create the files and folders the cases name; returns ``{token: path}``."""
    places = {"<proc>": UNWRITABLE, "<missing>": str(root / "missing" / "nothing"), "<long>": LONG_NAME}

    def put(token: str, name: str, content: bytes | str) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        places[token] = str(path)

    put("<file>", "file.txt", "a regular file\n")
    put("<binary>", "binary.bin", bytes(range(256)) * 8 + b"\x00\xff\xfe")
    put("<empty>", "empty.txt", b"")
    put("<game>", "games.jsonl", json.dumps(GAME) + "\n")
    put("<junk-zip>", "junk.zip", b"PK\x03\x04 not a zip at all" * 10)
    put("<cache-list>", "cache-list.json", "[]\n")
    put("<cache-shape>", "cache-shape.json", json.dumps({"variant": STANDARD_VARIANT, "positions": []}))
    put("<cache-key>", "cache-key.json", json.dumps({"variant": STANDARD_VARIANT, "positions": {"1,2": {"0": 1}}}))
    put("<cache-values>", "cache-values.json", json.dumps({"variant": STANDARD_VARIANT, "positions": {"x": 5}}))
    other = {**STANDARD_VARIANT, "squares": True}
    put("<cache-other>", "cache-other.json", json.dumps({"variant": other, "positions": {}}))
    put("<yaml-list>", "list.yaml", "- 1\n- 2\n")
    put("<yaml-bad>", "bad.yaml", "seed: [1,\n")
    put("<yaml-unknown>", "unknown.yaml", "bogus_key: 1\n")
    put("<yaml-nan>", "nan.yaml", "learning_rate: .nan\n")
    put("<run-junk>/config.yaml", "run-junk/config.yaml", bytes(range(256)))
    put("<run-list>/config.yaml", "run-list/config.yaml", "- 1\n")
    places["<run-junk>"] = str(root / "run-junk")
    places["<run-list>"] = str(root / "run-list")
    (root / "folder").mkdir()
    places["<folder>"] = str(root / "folder")
    with zipfile.ZipFile(root / "other.zip", "w") as archive:  # a zip, but no checkpoint
        archive.writestr("data", "x")
    places["<other-zip>"] = str(root / "other.zip")
    os.mkfifo(root / "pipe")
    places["<fifo>"] = str(root / "pipe")
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(root / "run" / "tb")) as writer:  # a training run's curves, for quarto plot
        writer.add_scalar("eval/random/score", 0.5, 1)
    places["<run>"] = str(root / "run")
    if not AS_ROOT:
        (root / "locked").mkdir()
        (root / "locked").chmod(0o500)
        places["<locked>"] = str(root / "locked")
    for number, (name, line) in enumerate(MALFORMED_RECORDS.items()):
        put(f"<record:{name}>", f"records/{number:02d}.jsonl", line + "\n")
    return places


# ---------------------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    """One bad command line; ``names`` are words of which the message must hold one."""

    label: str
    argv: tuple[str, ...]
    names: tuple[str, ...]
    expect: str = "refuse"
    """``refuse``: a non-zero exit and the message; ``message``: a message (a warning will do, and the command
    may go on); ``survive``: an edge value that may be accepted, but without a traceback or a hang."""
    timeout: float = 20.0
    status: int | None = None
    """The exit status the case must end with, where it is pinned (2: a usage error); else any non-zero one."""

    def __str__(self) -> str:
        return self.label


SMALL_GAMES = ("--games", "2", "--jobs", "1", "--bootstrap", "100", "--no-progress")
TOURNAMENT = ("tournament", "random", "greedy", *SMALL_GAMES, "--out", "<out>/t")
Argv = tuple[str, ...]
GRADE: Argv = ("grade", "random", "--positions", "2", "--max-empty", "3", "--min-empty", "1", "--no-progress")
GRADE += ("--out", "<out>/g")
PLAY = ("play", "--opponent", "random", "--first", "you", "--seed", "1")  # stdin is empty: the game ends at once
REPLAY = ("replay", "<game>", "--no-pause")
SOLVE = ("solve", POSITION)
BOOK = ("book", "--root", "40f.7....9d..3.b -", "--min-empty", "6", "--out", "<out>/book.npz")
SUITE = ("suite", "standard-v9", "--build", "--games", "2", "--per-stage", "1", "--out", "<out>/suite.jsonl")
DATASET: Argv = ("dataset", "--sample", "2", "--games", "4", "--min-empty", "4", "--max-empty", "5", "--no-progress")
DATASET += ("--out", "<out>/data.npz")
BENCH_ENV = ("bench", "env", "--seconds", "0.01", "--rounds", "1")
BENCH_MCTS = ("bench", "mcts", "--games", "2", "--turn-ms", "5", "--grade", "0")
BENCH_STARTUP = ("bench", "startup", "--runs", "1")
COMPILE = ("compile", "--jobs", "1")
BENCH_AZ = ("bench", "az", "--games", "2", "--sims", "2", "--seconds", "0.1", "--width", "8")
BENCH_NETWORK = ("bench", "network", "--positions", "12", "--max-empty", "8", "--epochs", "1", "--width", "8")
BENCH_SOLVER: Argv = ("bench", "solver", "--empties", "4", "--positions", "1", "--depths", "1", "--openings", "1")
BENCH_SOLVER += ("--budgets", "0.01", "--budget-moves", "1", "--skip-startup", "--games", "0")
BENCH_VECTOR: Argv = ("bench", "vector", "--batches", "1", "4", "--observations", "none", "raw", "--no-pgx")
BENCH_VECTOR += ("--seconds", "0.01", "--rounds", "1")
PLANES_POSITIONS = {"integer": True, "minimum": 1, "maximum": 1 << 22}
BENCH_PLANES = ("bench", "planes", "--positions", "64", "--rounds", "1", "--seconds", "0.001", "--observations", "raw")
BENCH_JAX = ("bench", "jax", "--check", "2", "--batch", "2", "--planes", "raw", "--variants", "standard")
TINY_TRAINING = (
    "total_steps=64",
    "num_games=2",
    "n_steps=32",
    "batch_size=64",
    "n_epochs=1",
    "snapshot_every=64",
    "max_snapshots=2",
    "eval_every=64",
    "eval_games=2",
    "checkpoint_every=64",
    "final_eval_games=2",
    "eval_opponents=[random]",
    "opponents={snapshots: 0.5, random: 0.5}",
)
# The options come first: KEY=VALUE overrides are one positional list, which must not be split by an option
SWEEP = ("sweep", "configs/default.yaml", "--seeds", "0", "--out", "<out>/s")  # refused before Ray starts
SWEEP_REPO_CONFIG = ("sweep", str(REPO / "configs" / "default.yaml"), "--seeds", "0")  # past the config check
BENCH_TRAIN = ("bench", "train", "--steps", "64", "--no-reference", *TINY_TRAINING[1:4], "max_snapshots=2")
TRAIN = ("train", "--out", "<out>/run", *TINY_TRAINING)
PLOT = ("plot", "<run>", "--out", "<out>/curves.png")
TRAIN_TIMEOUT = 60.0
BENCH_TIMEOUT = 40.0

BASELINES: dict[str, tuple[tuple[str, ...], float]] = {
    "tournament": (TOURNAMENT, 60),
    "grade": (GRADE, 60),
    "play": (PLAY, 30),
    "replay": (REPLAY, 30),
    "replay --gif": ((*REPLAY, "--gif", "<out>/game.gif", "--frames", "<out>/frames"), 60),
    "solve": (SOLVE, 60),
    "book": (BOOK, 60),
    "suite": (SUITE, 90),
    "dataset": (DATASET, 60),
    "bench env": (BENCH_ENV, 120),
    "bench mcts": (BENCH_MCTS, 120),
    "bench startup": (BENCH_STARTUP, 120),
    "bench az": (BENCH_AZ, 120),
    "bench network": (BENCH_NETWORK, 120),
    "bench solver": (BENCH_SOLVER, 120),
    "bench vector": (BENCH_VECTOR, 120),
    "bench planes": (BENCH_PLANES, 120),
    "bench jax": (BENCH_JAX, 120),
    "bench train": (BENCH_TRAIN, 180),
    "train": (TRAIN, 180),
    "plot": (PLOT, 60),
}
"""The small, good command lines the cases change one thing of: each must succeed as it is. ``compile``'s runs
in tests/test_compile.py, in the test's own process (here a forked child would compile every kernel and throw
the machine code away)."""
SLOW_BASELINES = {"bench env", "bench solver", "bench train", "train"}

ALWAYS_BAD = ["nan", "NaN", "inf", "-inf", "Infinity", "", " ", "abc", "1e", "0x10", "1,5", "∞", "½", "²", "1 2"]
"""Text that is no number for any option (``²`` passes ``str.isdigit`` but not ``int``)."""


def bad_numbers(
    *,
    integer: bool,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    draws: int = 2,
) -> list[str]:
    """Values outside what an option allows: every one that breaks its range, and ``draws`` from ALWAYS_BAD."""
    values = RNG.sample(ALWAYS_BAD, draws)
    if minimum is not None:
        values.append(f"{minimum - 1:g}")
    if above is not None:
        values += [f"{above:g}", f"{above - 1:g}"]
    if maximum is not None:
        above_maximum = str(maximum + 1) if isinstance(maximum, int) else f"{maximum + 1:g}"  # 1e+06 is 10**6 itself
        values += [above_maximum, "1e308", str(10**30)]
    if integer:
        values.append("2.5")
    return list(dict.fromkeys(values))


def option_cases(
    command: str, base: tuple[str, ...], option: str, values: list[str], timeout: float = 20.0
) -> Iterator[Case]:
    """``base`` with ``option=value`` for each value (the ``=`` form, so ``-inf`` is read as a value)."""
    for value in values:
        names = (option.lstrip("-"), value) if len(value) >= 3 else (option.lstrip("-"),)
        yield Case(f"{command} {option}={value!r}", (*base, f"{option}={value}"), names, timeout=timeout)


def number_option_cases() -> Iterator[Case]:
    """Every numeric option of every subcommand, with values outside its range."""
    table: list[tuple[str, tuple[str, ...], str, dict, float]] = [
        ("tournament", TOURNAMENT, "--games", {"integer": True, "minimum": 2}, 20),
        ("tournament", TOURNAMENT, "--seed", {"integer": True, "minimum": 0}, 20),
        ("tournament", TOURNAMENT, "--opening-plies", {"integer": True, "minimum": 0, "maximum": 7}, 20),
        ("tournament", TOURNAMENT, "--time-limit", {"integer": False, "above": 0}, 20),
        ("tournament", TOURNAMENT, "--jobs", {"integer": True, "minimum": 1, "maximum": 64}, 20),
        ("tournament", TOURNAMENT, "--bootstrap", {"integer": True, "minimum": 100, "maximum": 100_000}, 20),
        ("tournament", TOURNAMENT, "--prior-draws", {"integer": False, "above": 0, "maximum": 100_000}, 20),
        ("grade", GRADE, "--positions", {"integer": True, "minimum": 1}, 30),
        ("grade", GRADE, "--seed", {"integer": True, "minimum": 0}, 30),
        ("grade", GRADE, "--max-empty", {"integer": True, "minimum": 1, "maximum": 16}, 30),
        ("grade", GRADE, "--min-empty", {"integer": True, "minimum": 1, "maximum": 16}, 30),
        ("play", PLAY, "--seed", {"integer": True, "minimum": 0}, 20),
        ("replay", REPLAY, "--game", {"integer": True, "minimum": 0}, 20),
        ("replay", REPLAY, "--delay", {"integer": False, "above": 0}, 20),
        ("bench env", BENCH_ENV, "--seconds", {"integer": False, "above": 0}, BENCH_TIMEOUT),
        ("bench env", BENCH_ENV, "--rounds", {"integer": True, "minimum": 1, "maximum": 1000}, BENCH_TIMEOUT),
        ("bench env", BENCH_ENV, "--seed", {"integer": True, "minimum": 0}, BENCH_TIMEOUT),
        ("bench mcts", BENCH_MCTS, "--games", {"integer": True, "minimum": 2, "maximum": 10**5}, BENCH_TIMEOUT),
        ("bench mcts", BENCH_MCTS, "--turn-ms", {"integer": True, "minimum": 1, "maximum": 60_000}, BENCH_TIMEOUT),
        ("bench mcts", BENCH_MCTS, "--seed", {"integer": True, "minimum": 0}, BENCH_TIMEOUT),
        ("bench mcts", BENCH_MCTS, "--grade", {"integer": True, "minimum": 0, "maximum": 1000}, BENCH_TIMEOUT),
        ("bench startup", BENCH_STARTUP, "--runs", {"integer": True, "minimum": 1, "maximum": 100}, BENCH_TIMEOUT),
        ("compile", COMPILE, "--jobs", {"integer": True, "minimum": 1, "maximum": 2}, 20),
        ("bench az", BENCH_AZ, "--games", {"integer": True, "minimum": 1, "maximum": 4096}, BENCH_TIMEOUT),
        ("bench az", BENCH_AZ, "--sims", {"integer": True, "minimum": 1, "maximum": 10_000}, BENCH_TIMEOUT),
        ("bench az", BENCH_AZ, "--seconds", {"integer": False, "above": 0, "maximum": 3600}, BENCH_TIMEOUT),
        ("bench az", BENCH_AZ, "--width", {"integer": True, "minimum": 1, "maximum": 1024}, BENCH_TIMEOUT),
        ("bench network", BENCH_NETWORK, "--positions", {"integer": True, "minimum": 4}, BENCH_TIMEOUT),
        ("bench network", BENCH_NETWORK, "--epochs", {"integer": True, "minimum": 1, "maximum": 10_000}, BENCH_TIMEOUT),
        ("bench network", BENCH_NETWORK, "--test-share", {"integer": False, "above": 0, "maximum": 0.9}, BENCH_TIMEOUT),
        ("bench network", BENCH_NETWORK, "--lr", {"integer": False, "above": 0, "maximum": 1}, BENCH_TIMEOUT),
        ("bench solver", BENCH_SOLVER, "--positions", {"integer": True, "minimum": 1, "maximum": 10**4}, BENCH_TIMEOUT),
        ("bench solver", BENCH_SOLVER, "--seed", {"integer": True, "minimum": 0}, BENCH_TIMEOUT),
        ("bench solver", BENCH_SOLVER, "--openings", {"integer": True, "minimum": 1, "maximum": 10**4}, BENCH_TIMEOUT),
        ("bench solver", BENCH_SOLVER, "--budget-moves", {"integer": True, "minimum": 1}, BENCH_TIMEOUT),
        ("bench solver", BENCH_SOLVER, "--jobs", {"integer": True, "minimum": 1, "maximum": 64}, BENCH_TIMEOUT),
        ("bench solver", BENCH_SOLVER, "--table-mb", {"integer": False, "minimum": 1, "maximum": 16384}, BENCH_TIMEOUT),
        ("solve", SOLVE, "--jobs", {"integer": True, "minimum": 1, "maximum": 64}, 60),
        ("solve", SOLVE, "--table-mb", {"integer": False, "minimum": 1, "maximum": 16384}, 60),
        (
            "solve",
            (*SOLVE, "--resume", "<out>/t.npz"),
            "--checkpoint-every",
            {"integer": False, "minimum": 1, "maximum": 86_400},
            60,
        ),
        ("book", BOOK, "--min-empty", {"integer": True, "minimum": 1, "maximum": 16}, 30),
        ("suite", SUITE, "--per-stage", {"integer": True, "minimum": 1, "maximum": 10_000}, 30),
        ("suite", SUITE, "--games", {"integer": True, "minimum": 1, "maximum": 100_000}, 30),
        ("suite", SUITE, "--seed", {"integer": True, "minimum": 0}, 30),
        ("dataset", DATASET, "--sample", {"integer": True, "minimum": 1, "maximum": 100_000}, 30),
        ("dataset", DATASET, "--games", {"integer": True, "minimum": 1, "maximum": 200_000}, 30),
        ("dataset", DATASET, "--min-empty", {"integer": True, "minimum": 2, "maximum": 16}, 30),
        ("dataset", DATASET, "--max-empty", {"integer": True, "minimum": 2, "maximum": 16}, 30),
        ("dataset", DATASET, "--symmetries", {"integer": True, "minimum": 0, "maximum": 12_287}, 30),
        ("dataset", DATASET, "--seed", {"integer": True, "minimum": 0}, 30),
        ("bench solver", BENCH_SOLVER, "--games", {"integer": True, "minimum": 0, "maximum": 1000}, BENCH_TIMEOUT),
        ("bench vector", BENCH_VECTOR, "--batches", {"integer": True, "minimum": 1, "maximum": 65_536}, BENCH_TIMEOUT),
        ("bench vector", BENCH_VECTOR, "--seconds", {"integer": False, "above": 0, "maximum": 3600}, BENCH_TIMEOUT),
        ("bench vector", BENCH_VECTOR, "--rounds", {"integer": True, "minimum": 1, "maximum": 1000}, BENCH_TIMEOUT),
        ("bench vector", BENCH_VECTOR, "--seed", {"integer": True, "minimum": 0}, BENCH_TIMEOUT),
        ("bench planes", BENCH_PLANES, "--positions", PLANES_POSITIONS, BENCH_TIMEOUT),
        ("bench planes", BENCH_PLANES, "--seconds", {"integer": False, "above": 0, "maximum": 3600}, BENCH_TIMEOUT),
        ("bench planes", BENCH_PLANES, "--rounds", {"integer": True, "minimum": 1, "maximum": 1000}, BENCH_TIMEOUT),
        ("bench jax", BENCH_JAX, "--check", {"integer": True, "minimum": 1, "maximum": 10_000_000}, BENCH_TIMEOUT),
        ("bench jax", BENCH_JAX, "--batch", {"integer": True, "minimum": 1, "maximum": 65_536}, BENCH_TIMEOUT),
        ("book", BOOK, "--jobs", {"integer": True, "minimum": 1, "maximum": 64}, 30),
        ("book", BOOK, "--table-mb", {"integer": False, "minimum": 1, "maximum": 16384}, 30),
        ("book", BOOK, "--checkpoint-every", {"integer": False, "above": 0, "maximum": 86_400}, 30),
        ("bench train", BENCH_TRAIN, "--steps", {"integer": True, "minimum": 1, "maximum": 10**10}, TRAIN_TIMEOUT),
        ("sweep", SWEEP, "--max-concurrent", {"integer": True, "minimum": 0, "maximum": 1024}, 30),
        ("sweep", SWEEP, "--cpus-per-trial", {"integer": False, "above": 0, "maximum": 1024}, 30),
    ]
    for command, base, option, allowed, timeout in table:
        yield from option_cases(command, base, option, bad_numbers(**allowed), timeout)
    # the list options of bench solver: one bad value after a good one
    for option, allowed in [
        ("--empties", {"integer": True, "minimum": 1, "maximum": 16}),
        ("--depths", {"integer": True, "minimum": 1, "maximum": 32}),
        ("--budgets", {"integer": False, "above": 0, "maximum": 86400}),
    ]:
        for value in bad_numbers(**allowed, draws=2):  # type: ignore[arg-type]
            if value.startswith("-") and not re.fullmatch(r"-\d+|-\d*\.\d+", value):
                continue  # argparse would take it for an option, not a value of the list
            if value == "":
                continue  # its own case below, with the status pinned
            names = (option.lstrip("-"), value) if len(value) >= 3 else (option.lstrip("-"),)
            good = {"--empties": "4", "--depths": "1", "--budgets": "0.01"}[option]
            argv = (*BENCH_SOLVER, option, good, value)
            yield Case(f"bench solver {option} {good} {value!r}", argv, names, timeout=BENCH_TIMEOUT)
    yield Case("tournament --games=3 (odd)", (*TOURNAMENT, "--games=3"), ("games",))
    yield Case("grade --min-empty above --max-empty", (*GRADE, "--min-empty=3", "--max-empty=2"), ("empty",))


TRAIN_INT_FIELDS = {
    "total_steps": 1,
    "num_games": 1,
    "n_steps": 1,
    "batch_size": 2,  # a minibatch of one sample has no standard deviation to normalise advantages by
    "n_epochs": 1,
    "snapshot_every": 1,
    "max_snapshots": 1,
    "eval_every": 1,
    "eval_games": 1,
    "final_eval_games": 1,
    "checkpoint_every": 1,
    "torch_threads": 1,
    "seed": 0,
    "grade_positions": 0,
    "sample_games": 0,
}
"""``quarto train``'s integer fields and their least value."""
TRAIN_COUNT_MAXIMA = {
    "total_steps": 10**10,
    "snapshot_every": 10**10,
    "eval_every": 10**10,
    "checkpoint_every": 10**10,
    "n_epochs": 1000,
    "max_snapshots": 1000,
    "grade_positions": 100_000,
    "batch_size": 2**20,
}
"""The upper bounds of ``quarto train``'s counts that had none (``total_steps=1e100`` trained for ever)."""
TRAIN_FLOAT_FIELDS: dict[str, tuple[float | None, float | None, float | None]] = {
    "learning_rate": (None, 0, None),  # minimum, above, maximum
    "gamma": (None, 0, 1),
    "gae_lambda": (0, None, 1),
    "clip_range": (None, 0, None),
    "ent_coef": (0, None, None),
    "vf_coef": (0, None, None),
    "max_grad_norm": (0, None, None),
}
YAML_NOT_NUMBERS = [".nan", ".NaN", ".inf", "-.inf", "nan", "inf", "abc", "''", "[]", "{}", "true", "null", "∞"]


def train_override_cases() -> Iterator[Case]:
    """``quarto train KEY=VALUE`` with values no field allows, unknown keys and malformed overrides."""

    def case(label: str, overrides: tuple[str, ...], names: tuple[str, ...]) -> Case:
        return Case(f"train {label}", (*TRAIN, *overrides), names, timeout=TRAIN_TIMEOUT)

    for field, least in TRAIN_INT_FIELDS.items():
        values = [*RNG.sample(YAML_NOT_NUMBERS, 2), str(least - 1), "1.5"]
        values += [str(TRAIN_COUNT_MAXIMA[field] + 1), "1e100"] if field in TRAIN_COUNT_MAXIMA else []
        for value in dict.fromkeys(values):
            yield case(f"{field}={value}", (f"{field}={value}",), (field,))
    for field, (minimum, above, maximum) in TRAIN_FLOAT_FIELDS.items():
        values = [*RNG.sample(YAML_NOT_NUMBERS, 2), ".inf", "-.inf", ".nan"]
        values += [f"{b:g}" for b in (above,) if b is not None]
        values += [f"{b - 0.5:g}" for b in (minimum,) if b is not None]
        values += [f"{b + 0.5:g}" for b in (maximum,) if b is not None]
        values += ["1e308"] if field == "learning_rate" else []  # the example
        for value in dict.fromkeys(values):
            yield case(f"{field}={value}", (f"{field}={value}",), (field,))
    yield case("seed=99999999999999999999", ("seed=99999999999999999999",), ("seed",))
    yield case("seed=2**64", (f"seed={2**64}",), ("seed",))
    for override, names in [
        ("bogus=1", ("bogus",)),
        ("Seed=1", ("seed",)),
        ("learning_rate", ("learning_rate",)),
        ("=1", ("=1", "override")),
        ("learning_rate=", ("learning_rate",)),
        ("a.b=1", ("a.b",)),
        ("variant..squares=true", ("variant",)),
        ("learning_rate=[1, 2", ("learning_rate",)),
        ("opponents.random=.inf", ("opponents", "random")),
        ("opponents.random=-1", ("opponents", "random")),
        ("opponents.random=.nan", ("opponents", "random")),
        ("opponents={}", ("opponents",)),
        ("opponents={random: 0}", ("opponents",)),
        ("opponents=[random]", ("opponents",)),
        ("opponents.snapshots=.inf", ("opponents", "snapshots")),
        ("eval_opponents=[]", ("eval_opponents",)),
        ("eval_opponents=random", ("eval_opponents",)),
        ("eval_opponents=[5]", ("eval_opponents",)),
        ("eval_opponents=[ppo:/missing.zip]", ("eval_opponents", "missing")),
        ("net_arch=[]", ("net_arch",)),
        ("net_arch=[0]", ("net_arch",)),
        ("net_arch=[.inf]", ("net_arch",)),
        ("net_arch=[1e308]", ("net_arch",)),
        ("net_arch=32", ("net_arch",)),
        ("observation=bogus", ("observation",)),
        ("policy=bogus", ("policy",)),
        ("lr_schedule=bogus", ("lr_schedule",)),
        ("name=", ("name",)),
        ("name=a/b", ("name",)),
        ("variant=5", ("variant",)),
        ("variant.attributes=0", ("variant", "attributes")),
        ("variant.attributes=5", ("variant", "attributes")),
        ("variant.attributes=size", ("variant", "attributes", "size")),
        ("variant.squares=maybe", ("variant", "squares")),
        ("variant.false_declaration=penalty", ("variant", "declaration")),
        ("variant.bogus=1", ("variant", "bogus")),
    ]:
        yield case(override, (override,), names)
    # a NUL byte reaches the run name through YAML's escapes; no --out: the default folder is named after it
    nul = ("train", *TINY_TRAINING, 'name="a\\0b"')
    yield Case("train name='a\\0b' (a NUL byte)", nul, ("name",), timeout=TRAIN_TIMEOUT)


BAD_SPECS: dict[str, tuple[str, ...]] = {
    "": ("spec", "kind"),
    " ": ("spec", "kind"),
    ":": ("spec", "kind"),
    "::": ("spec", "kind"),
    ",": ("spec", "kind"),
    "foo": ("foo",),
    "Random": ("random",),
    "rándom": ("rándom", "spec"),
    "🤖": ("🤖", "spec"),
    "random\u200b": ("random", "spec"),
    "random:x=1": ("x=1", "option"),
    "greedy:depth=2": ("depth", "option"),
    "minimax:foo=1": ("foo",),
    "minimax:depth": ("depth",),
    "minimax:depth=": ("depth",),
    "minimax:depth=0": ("depth",),
    "minimax:depth=-1": ("depth",),
    "minimax:depth=2.5": ("depth",),
    "minimax:depth=nan": ("depth",),
    "minimax:depth=abc": ("depth",),
    "minimax:depth=²": ("depth",),
    "minimax:time=nan": ("time",),
    "minimax:time=inf": ("time",),
    "minimax:time=-inf": ("time",),
    "minimax:time=0": ("time",),
    "minimax:time=-1": ("time",),
    "minimax:time=1e308": ("time",),
    "minimax:time=": ("time",),
    "minimax:depth=2,time=nan": ("time",),
    "minimax:depth=2,depth=x": ("depth",),
    "solver:empties=99": ("empties",),
    "solver:empties=0": ("empties",),
    "solver:empties=17": ("empties",),
    "solver:empties=8.5": ("empties",),
    "solver:time=nan": ("time",),
    "solver:time=inf": ("time",),
    "solver:depth=0": ("depth",),
    "solver:empties=8,time=-inf": ("time",),
    "mcts:time=inf": ("time",),
    "mcts:time=nan": ("time",),
    "mcts:sims=0": ("sims",),
    "mcts:sims=-5": ("sims",),
    "mcts:sims=nan": ("sims",),
    "mcts:sims=2.5": ("sims",),
    "mcts:c=0": ("c=", "c must"),
    "mcts:c=-1": ("c=", "c must"),
    "mcts:c=nan": ("c=", "c must"),
    "mcts:c=inf": ("c=", "c must"),
    "mcts:sims=100,c=nan": ("c=", "c must"),
    "mcts:sims=10,sims": ("sims",),
    "ppo": ("ppo", "checkpoint"),
    "ppo:": ("ppo", "checkpoint"),
    "ppo:/missing.zip": ("missing",),
    "ppo:/missing.zip,deterministic=false": ("missing",),
    "ppo:deterministic=maybe": ("deterministic", "maybe"),
    "ppo:path=/missing.zip,deterministic=maybe": ("deterministic", "maybe", "missing"),
    "ppo:<junk-zip>,deterministic=maybe": ("deterministic", "maybe", "junk"),
    "ppo:<junk-zip>": ("junk.zip", "checkpoint"),
    "ppo:<other-zip>": ("other.zip", "checkpoint"),
    "ppo:<binary>": ("binary.bin", "checkpoint"),
    "ppo:<empty>": ("empty.txt", "checkpoint"),
    "ppo:<folder>": ("folder", "checkpoint"),
    "ppo:/dev/null": ("/dev/null", "checkpoint"),
    "ppo:<file>/x.zip": ("x.zip", "checkpoint"),
    "az": ("az", "checkpoint"),
    "az:": ("az", "checkpoint"),
    "az:/missing.zip": ("missing",),
    "az:/missing.zip,sims=-1": ("sims",),
    "az:sims=nan": ("sims",),
    "az:/missing.zip,time=inf": ("time",),
    "az:/missing.zip,temperature=-1": ("temperature",),
    "az:/missing.zip,c=0": ("c=", "c must"),
    "az:<junk-zip>": ("junk.zip", "checkpoint"),
    "az:<other-zip>": ("other.zip", "checkpoint"),
    "az:<folder>": ("folder", "checkpoint"),
    "az:/dev/null": ("/dev/null", "checkpoint"),
}
"""Agent specs no command may accept, and words of which the message must hold one."""
HANGING_SPECS = ["minimax:time=nan", "minimax:time=inf", "solver:time=nan", "mcts:time=inf", "mcts:time=nan"]
"""Specs that would never answer a move if accepted: each one goes into a game."""


def spec_cases() -> Iterator[Case]:
    """Bad specs everywhere a command takes one: all of them as ``play``'s opponent (built, never asked to
    move), a seeded sample in tournaments, grades and training runs, where they would play."""
    specs = list(BAD_SPECS)
    for spec in specs:
        yield Case(f"play --opponent {spec!r}", (*PLAY, f"--opponent={spec}"), BAD_SPECS[spec])
    time_limited = ("--time-limit", "2")
    argv: Argv
    for spec in dict.fromkeys([*HANGING_SPECS, *RNG.sample(specs, 8)]):
        argv = ("tournament", "random", spec, *SMALL_GAMES, *time_limited, "--out", "<out>/t")
        yield Case(f"tournament random {spec!r}", argv, BAD_SPECS[spec])
    for spec in RNG.sample(specs, 4):
        argv = (*TOURNAMENT, "--mode", "vs-field", f"--field={spec}")
        yield Case(f"tournament --field {spec!r}", argv, BAD_SPECS[spec])
    for spec in RNG.sample(specs, 3):
        yield Case(f"tournament --anchor {spec!r}", (*TOURNAMENT, f"--anchor={spec}"), (*BAD_SPECS[spec], "anchor"))
    for spec in dict.fromkeys([*HANGING_SPECS[:2], *RNG.sample(specs, 5)]):
        argv = ("grade", spec, *GRADE[2:])
        yield Case(f"grade {spec!r}", argv, BAD_SPECS[spec], timeout=30)
    for spec in RNG.sample([s for s in specs if "," not in s and s.strip()], 4):  # --sources splits at commas
        yield Case(f"grade --sources {spec!r}", (*GRADE, f"--sources=random,{spec}"), BAD_SPECS[spec], timeout=30)
    for spec in RNG.sample([s for s in specs if s.strip() and not set(s) & set(":,")], 3):
        names = (*BAD_SPECS[spec], "opponents")
        yield Case(f"train opponents.{spec}=0.5", (*TRAIN, f"opponents.{spec}=0.5"), names, timeout=TRAIN_TIMEOUT)
    for spec in dict.fromkeys([HANGING_SPECS[0], *RNG.sample(specs, 3)]):
        value = json.dumps([spec])
        names = (*BAD_SPECS[spec], "opponents")
        yield Case(f"train eval_opponents={value}", (*TRAIN, f"eval_opponents={value}"), names, timeout=TRAIN_TIMEOUT)
    twice = ("tournament", "random", "greedy", "random", *SMALL_GAMES, "--out", "<out>/t")
    yield Case("tournament spec listed twice", twice, ("random", "twice"))
    yield Case("tournament one agent", ("tournament", "random", *SMALL_GAMES), ("agent",))


BAD_ATTRIBUTES = ["0", "5", "-1", "size", "colour,size", "nan", "1.5", "²", ""]


def variant_cases() -> Iterator[Case]:
    """Bad rule-variant flags for every command that takes them."""
    names: Argv
    for command, base in [("tournament", TOURNAMENT), ("grade", GRADE), ("play", PLAY)]:
        for value in BAD_ATTRIBUTES:
            names = ("attribute", value) if len(value) >= 3 else ("attribute",)
            yield Case(f"{command} --attributes={value!r}", (*base, f"--attributes={value}"), names, timeout=30)
        penalty = ("--false-declaration", "penalty")
        yield Case(f"{command} --false-declaration penalty", (*base, *penalty), ("declaration",), timeout=30)
    for command, base in [("solve", SOLVE), ("bench solver", BENCH_SOLVER)]:
        for values in [["0"], ["5"], ["-1"], ["size"], ["colour", "size"], ["²"], ["colour", "1"], ["nan"]]:
            names = ("attribute", *(v for v in values if len(v) >= 3))
            yield Case(f"{command} --attributes {' '.join(values)}", (*base, "--attributes", *values), names)
    penalty = ("--false-declaration", "penalty")
    yield Case("solve --false-declaration penalty", (*SOLVE, *penalty), ("declaration",))


def path_cases() -> Iterator[Case]:
    """Paths: a file where a folder is wanted and the reverse, devices, a path under a regular file, places
    nothing can be created, missing or binary inputs, and files of the wrong shape."""
    folders = ["<file>", "/dev/null", "<file>/sub", "<proc>/out"]  # for an output folder
    files = ["<folder>", "<fifo>", "<file>/sub.out", "<proc>/out.json"]  # for an output file; a FIFO, not
    # /dev/null: a writer that replaces its target atomically would replace /dev/null itself, run as root
    if not AS_ROOT:
        folders.append("<locked>/out")
        files.append("<locked>/out.json")
    # Folders that exist and, to root, pass the permission bits, yet take no file; and names too long. Each must
    # be a usage error before any work (the check makes a file there), not an OSError when the work is done.
    folders += ["/sys/quarto-fuzz", "<long>"]
    files += ["/proc/quarto-fuzz.json", "/sys/quarto-fuzz.json", "<long>.json"]

    def cases(
        command: str, base: tuple[str, ...], option: str, paths: list[str], timeout: float = 20
    ) -> Iterator[Case]:
        for path in paths:
            # the classes the write check (it makes a file) turned into usage errors: their exit status is pinned
            status = 2 if path.startswith(("/sys/", "/proc/quarto-fuzz.", "<long>")) else None
            names = (option.lstrip("-"), path)
            yield Case(f"{command} {option} {path}", (*base, option, path), names, timeout=timeout, status=status)

    yield from cases("tournament", TOURNAMENT, "--out", folders)
    yield from cases("tournament", ("tournament",), "--resume", ["/sys/", "<long>"])  # a folder it writes into
    yield from cases("grade", GRADE, "--out", folders, 30)
    caches = ["<folder>", "<file>/sub.json", "<proc>/cache.json", "/sys/quarto-fuzz.json", "<long>.json"]
    yield from cases("grade", GRADE, "--cache", caches, 30)
    # a cache of the wrong shape may be refused, or solved again with a warning; each case has its own copy,
    # since a grade that goes on writes the cache
    argv: Argv
    for name in ["binary", "cache-list", "cache-shape", "cache-key", "cache-values", "cache-other"]:
        argv = (*GRADE, "--cache", f"<copy:{name}>")
        yield Case(f"grade --cache <{name}>", argv, ("cache", f"<copy:{name}>"), "message", 30)
    yield from cases("play", PLAY, "--out", [*files, "<out>/existing.jsonl"])
    yield from cases("replay", REPLAY, "--gif", [p.replace(".json", ".gif") for p in files])
    yield from cases("replay", REPLAY, "--frames", folders)
    yield from cases("bench env", BENCH_ENV, "--out", files, BENCH_TIMEOUT)
    solver_outs = ["<folder>", "<file>/sub.json", "/proc/quarto-fuzz.json", "<long>.json"]
    yield from cases("bench solver", BENCH_SOLVER, "--out", solver_outs, BENCH_TIMEOUT)
    yield from cases("bench vector", BENCH_VECTOR, "--out", solver_outs, BENCH_TIMEOUT)
    yield from cases("solve", SOLVE, "--resume", ["<folder>", "/proc/quarto-fuzz.npz", "<long>.npz"])
    yield from cases("book", BOOK[:5], "--out", ["<folder>", "/proc/quarto-fuzz.npz", "<long>.npz"], 30)
    for root in ["nonsense", "40f.7....9d..3.b 5", "f" * 16 + " -"]:  # not a position, a place node, a bad board
        yield Case(f"book --root {root!r}", (*BOOK[:1], "--root", root, *BOOK[3:]), ("root",), timeout=30, status=2)
    yield Case("book --root without --out", BOOK[:5], ("--out",), timeout=30, status=2)
    dataset_outs = ["<folder>", "<fifo>", "/proc/quarto-fuzz.npz", "<long>.npz"]
    yield from cases("dataset", DATASET[:-2], "--out", dataset_outs, 30)
    for suite in ["<missing>", "<binary>", "<file>", "nosuch-v1"]:
        argv = ("dataset", "--suite", suite, "--out", "<out>/data.npz")
        yield Case(f"dataset --suite {suite}", argv, ("suite", suite), timeout=30, status=2)
    yield Case("dataset --observation pixels", (*DATASET, "--observation", "pixels"), ("pixels",), status=2)
    if importlib.util.find_spec("ray") is not None:  # without Ray a sweep stops at that, before its folder
        yield from cases("sweep", SWEEP_REPO_CONFIG, "--out", ["/sys/quarto-fuzz", "<long>"], 30)
    yield from cases("plot", PLOT[:2], "--out", ["<folder>", "/proc/quarto-fuzz.png", "<long>.png"])
    for path in ["<missing>", "<folder>", "<binary>", "<yaml-list>", "<yaml-bad>", "<yaml-unknown>", "<yaml-nan>"]:
        argv = (*BENCH_TRAIN, "--config", path)
        yield Case(f"bench train --config {path}", argv, ("config", path), timeout=TRAIN_TIMEOUT)
        yield Case(f"train --config {path}", (*TRAIN, "--config", path), ("config", path), timeout=TRAIN_TIMEOUT)
    profiles = ["<folder>", "<file>/sub.prof", "/proc/quarto-fuzz.prof", "<long>.prof"]
    yield from cases("bench train", BENCH_TRAIN, "--profile", profiles, TRAIN_TIMEOUT)
    yield from cases("train", TRAIN, "--out", folders, TRAIN_TIMEOUT)
    for path in ["<missing>", "<file>", "<folder>", "/dev/null", "<copy:run-junk>", "<copy:run-list>"]:
        argv = ("train", "--resume", path)
        yield Case(f"train --resume {path}", argv, ("resume", "run", path), timeout=TRAIN_TIMEOUT)
    # the input of replay: no file, a folder, a device, not text, no line, not a record
    for path in ["<missing>", "<folder>", "/dev/null", "<binary>", "<empty>", "<file>", "<proc>/games.jsonl"]:
        yield Case(f"replay {path}", ("replay", path, "--no-pause"), (path, "record", "game"))
    for name in MALFORMED_RECORDS:
        yield Case(f"replay record {name}", ("replay", f"<record:{name}>", "--no-pause"), ("line 1", "record"))


def list_item_cases() -> Iterator[Case]:
    """An empty item in every option that takes a comma list or several values: named in a usage error, not
    skipped, nor passed on to a library (``grade --sources ,`` once reached numpy's ``choice``)."""
    for value in ["", ",", "random,,greedy"]:
        yield Case(f"grade --sources={value!r}", (*GRADE, f"--sources={value}"), ("sources",), timeout=30, status=2)
    # --attributes: one parser for every command (test_cli_hardening), in its one-word and several-word forms
    yield Case("tournament --attributes=','", (*TOURNAMENT, "--attributes=,"), ("attribute",), status=2)
    yield Case("solve --attributes colour ''", (*SOLVE, "--attributes", "colour", ""), ("attribute",), status=2)
    agents = ("tournament", "random", "", "greedy", *SMALL_GAMES, "--out", "<out>/t")
    yield Case("tournament random '' greedy", agents, ("spec",), status=2)
    yield Case("grade random ''", ("grade", "random", "", *GRADE[2:]), ("spec",), timeout=30, status=2)
    for option, good in [("--empties", "4"), ("--depths", "1"), ("--budgets", "0.01")]:
        argv = (*BENCH_SOLVER, option, good, "")
        yield Case(f"bench solver {option} {good} ''", argv, (option.lstrip("-"),), timeout=BENCH_TIMEOUT, status=2)
    yield Case("bench az --games 2 ''", (*BENCH_AZ, "--games", "2", ""), ("games",), timeout=BENCH_TIMEOUT, status=2)
    argv = (*BENCH_VECTOR, "--batches", "1", "")
    yield Case("bench vector --batches 1 ''", argv, ("batches",), timeout=BENCH_TIMEOUT, status=2)
    yield Case("evaluate --sims 1 ''", ("evaluate", "<missing>", "--sims", "1", ""), ("sims",), status=2)
    yield Case("sweep --seeds 0 ''", (*SWEEP_REPO_CONFIG, "", "--out", "<out>/s"), ("seeds",), timeout=30, status=2)
    yield Case("bench train ''", (*BENCH_TRAIN, ""), ("override",), timeout=TRAIN_TIMEOUT, status=2)
    yield Case("train ''", (*TRAIN, ""), ("override",), timeout=TRAIN_TIMEOUT, status=2)
    empty_spec = "eval_opponents=[random, '']"
    yield Case(f"train {empty_spec}", (*TRAIN, empty_spec), ("eval_opponents",), timeout=TRAIN_TIMEOUT, status=2)


def other_cases() -> Iterator[Case]:
    """The top-level command and positional arguments."""
    yield Case("quarto nosuch", ("nosuch",), ("nosuch",))
    yield Case("quarto ''", ("",), ("unknown",))
    yield Case("quarto bench nosuch", ("bench", "nosuch"), ("nosuch",))
    yield Case("quarto bench", ("bench",), ("bench", "benchmark"))
    for kinds in [("pixels",), ("none", "pixels"), ("",)]:
        argv = (*BENCH_VECTOR, "--observations", *kinds)
        yield Case(f"bench vector --observations {kinds}", argv, ("observations",), timeout=BENCH_TIMEOUT, status=2)
    for position in ["", "zzz", "🤖", "................ 5 extra", "\x7f" * 20]:
        yield Case(f"solve {position!r}", ("solve", position), ("position", "solve"))
    yield Case("tournament --mode vs-field without --field", (*TOURNAMENT, "--mode", "vs-field"), ("field",))
    yield Case("tournament --field without vs-field", (*TOURNAMENT, "--field", "random"), ("field",))
    for path in ["<missing>", "<junk-zip>", "<folder>", "/dev/null"]:
        yield Case(f"evaluate {path}", ("evaluate", path), ("checkpoint", path))


def edge_cases() -> Iterator[Case]:
    """Values a command may take or refuse, but that must not crash it: seeds beyond numpy's ranges, huge but
    finite numbers, more jobs than cores (which the issue wants capped, with a warning)."""
    huge = str(10**30)
    seeded: list[tuple[str, Argv]] = [("tournament", TOURNAMENT), ("grade", GRADE), ("play", PLAY)]
    seeded += [("bench env", BENCH_ENV), ("bench mcts", BENCH_MCTS), ("bench solver", BENCH_SOLVER)]
    seeded += [("bench vector", BENCH_VECTOR), ("bench planes", BENCH_PLANES)]
    for command, base in seeded:
        for value in [str(2**32), str(2**64), huge]:
            argv = (*base, f"--seed={value}")
            yield Case(f"{command} --seed={value} (may be accepted)", argv, ("seed",), "survive", BENCH_TIMEOUT)
    mcts = "mcts:sims=5,c=1e308"
    for label, argv in [
        ("tournament --prior-draws=1e308", (*TOURNAMENT, "--prior-draws=1e308")),
        (f"tournament --jobs={huge}", (*TOURNAMENT, f"--jobs={huge}")),
        (f"tournament random {mcts!r}", ("tournament", "random", mcts, *SMALL_GAMES, "--out", "<out>/t")),
        (f"play --opponent {mcts!r}", (*PLAY, f"--opponent={mcts}")),
    ]:
        yield Case(f"{label} (may be accepted)", argv, (), "survive", 60)
    yield Case(f"replay --game={huge}", (*REPLAY, f"--game={huge}"), ("game",))


FORK_CASES = [
    *number_option_cases(),
    *train_override_cases(),
    *spec_cases(),
    *variant_cases(),
    *path_cases(),
    *list_item_cases(),
    *other_cases(),
    *edge_cases(),
]

PROCESS_CASES = [
    Case(
        "tournament minimax:time=nan",
        ("tournament", "random", "minimax:time=nan", *SMALL_GAMES, "--time-limit", "2", "--out", "<out>/t"),
        ("time",),
        timeout=30,
    ),
    Case("tournament --time-limit nan", (*TOURNAMENT, "--time-limit=nan"), ("time-limit", "time_limit")),
    Case("tournament --prior-draws inf", (*TOURNAMENT, "--prior-draws=inf"), ("prior-draws", "prior_draws")),
    Case("grade --max-empty 17", (*GRADE, "--max-empty=17"), ("max-empty", "max_empty")),
    Case("play mcts:time=inf", (*PLAY, "--opponent=mcts:time=inf"), ("time",)),
    Case("replay --delay nan", (*REPLAY, "--delay=nan"), ("delay",)),
    Case("replay <binary>", ("replay", "<binary>"), ("<binary>",)),
    Case("solve --attributes ²", (*SOLVE, "--attributes", "²"), ("attribute",)),
    Case("bench mcts --games 0", (*BENCH_MCTS, "--games=0"), ("games",), timeout=BENCH_TIMEOUT),
    Case("train learning_rate=.inf", (*TRAIN, "learning_rate=.inf"), ("learning_rate",), timeout=TRAIN_TIMEOUT),
    Case("train --config <binary>", (*TRAIN, "--config", "<binary>"), ("config", "<binary>"), timeout=TRAIN_TIMEOUT),
]
"""Run as real processes in every run: one or more per subcommand, the issue's own examples first."""


OPEN_GAPS: dict[str, str] = {}
"""Commands whose cases are known to fail today, by the reason: expected failures, strictly, so that a fix shows."""


def with_open_gaps(cases: list[Case]) -> list[object]:
    """``cases``, those of :data:`OPEN_GAPS`' commands marked as expected failures."""
    return [
        pytest.param(c, marks=pytest.mark.xfail(reason=OPEN_GAPS[c.argv[0]], strict=True))
        if c.argv[0] in OPEN_GAPS
        else c
        for c in cases
    ]


def _slow_process_cases() -> list[Case]:
    chosen = {str(c) for c in PROCESS_CASES}
    pool = [c for c in FORK_CASES if str(c) not in chosen and c.expect != "survive" and c.argv[0] not in OPEN_GAPS]
    by_command: dict[str, list[Case]] = {}
    for case in pool:
        by_command.setdefault(case.argv[0], []).append(case)
    sample = [case for cases in by_command.values() for case in RNG.sample(cases, min(3, len(cases)))]
    rest = [c for c in pool if c not in sample]
    return [c for c in sample + RNG.sample(rest, 8) if "\x00" not in "".join(c.argv)]


SLOW_PROCESS_CASES = _slow_process_cases()


# ---------------------------------------------------------------------------------------------------------
# Running a case and judging its end
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Outcome:
    status: int | None
    """The exit status; None when the case was killed at its timeout."""
    stderr: str
    seconds: float


def run_forked(argv: list[str], folder: Path, timeout: float) -> Outcome:
    """``quarto ARGV`` in a forked copy of this process, in ``folder``, with empty stdin; killed (with all it
    started) after ``timeout`` seconds."""
    from experiments import cli

    stderr_path = folder.with_name(folder.name + ".stderr")
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.setpgid(0, 0)
            os.chdir(folder)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
            sys.stdin = io.StringIO("")
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- the process ends with os._exit
            sys.stderr = open(  # noqa: SIM115
                2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
            )
            status = _exit_status(cli.main, argv)
            sys.stderr.flush()
        finally:
            os._exit(status & 0xFF)
    with contextlib.suppress(OSError):  # the child may have done it first
        os.setpgid(pid, pid)
    deadline = start + timeout
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return Outcome(None, _read(stderr_path), time.monotonic() - start)
        time.sleep(0.002)
    return Outcome(os.waitstatus_to_exitcode(wait_status), _read(stderr_path), time.monotonic() - start)


def _exit_status(main, argv: list[str]) -> int:  # type: ignore[no-untyped-def]
    """What ``sys.exit(main(argv))`` would make the exit status, a traceback printed as the interpreter does."""
    try:
        return int(main(argv) or 0)
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def run_process(argv: list[str], folder: Path, timeout: float) -> Outcome:
    """``python -m experiments.cli ARGV`` in ``folder`` (this checkout's code first on the path), empty stdin;
    killed, with all it started, after ``timeout`` seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", *argv],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, err = process.communicate()
        return Outcome(None, err.decode(errors="replace"), time.monotonic() - start)
    return Outcome(process.returncode, err.decode(errors="replace"), time.monotonic() - start)


def message_line(stderr: str) -> str | None:
    """The line that should name the problem: stderr's last non-empty line, once a trailing listing of the
    agent kinds (help that follows a bad spec's message) is set aside; None if that is a usage line."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    if "agent kinds:" in lines:
        start = len(lines) - 1 - lines[::-1].index("agent kinds:")
        if all(line[:1].isspace() for line in lines[start + 1 :]):
            lines = lines[:start]
    if not lines or lines[-1].startswith("usage:") or lines[-1][:1].isspace():
        return None
    return lines[-1]


def verdict(case: Case, outcome: Outcome) -> str | None:
    """None if ``outcome`` is what ``case`` requires; else the failure, its category first."""
    tail = "\n".join(outcome.stderr.strip().splitlines()[-6:])
    if outcome.status is None:
        return f"[hang] no end within {case.timeout:g} s; stderr ends:\n{tail}"
    if TRACEBACK in outcome.stderr:
        return f"[traceback] exit {outcome.status}; stderr ends:\n{tail}"
    if outcome.status < 0:
        return f"[crash] killed by signal {-outcome.status}; stderr ends:\n{tail}"
    if case.expect == "survive":
        return None
    if outcome.status == 0 and case.expect == "refuse":
        return f"[exit 0] accepted in {outcome.seconds:.1f} s; stderr ends:\n{tail}"
    if case.status is not None and outcome.status != case.status:
        return f"[exit {outcome.status}] instead of {case.status}; stderr ends:\n{tail}"
    line = message_line(outcome.stderr)
    if line is None or not any(name.lower() in line.lower() for name in case.names):
        wanted = " or ".join(repr(n) for n in case.names)
        return f"[not one line] exit {outcome.status}; the last line should name {wanted}; stderr ends:\n{tail}"
    if "usage:" in outcome.stderr and not any(words in line for words in SYNTAX_ERRORS):
        return f"[usage] a value error buries its line under the usage; stderr ends:\n{tail}"
    return None


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("places")
    yield make_places(root)
    if (root / "locked").exists():
        (root / "locked").chmod(0o700)  # so that pytest can remove it


@pytest.fixture(scope="module")
def case_folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cases")


@pytest.fixture(scope="module")
def commands_loaded() -> None:
    """Import every command's modules once, here, so that each forked case starts at once -- and check that
    they are this checkout's (``python -m pytest`` from the checkout puts it first on the path)."""
    import experiments

    if not Path(experiments.__file__).resolve().is_relative_to(REPO):
        pytest.fail(f"experiments imported from {experiments.__file__}, not {REPO}: run python -m pytest there")
    for module in [
        "experiments.cli",
        *(f"experiments.arena.{name}" for name in ("tournament", "grade", "play", "replay", "solve", "book")),
        "experiments.training.train",
        "experiments.training.sb3_ppo",  # the backend train imports when a run starts
        *(f"experiments.bench.{name}" for name in ("env", "uct", "solver", "train", "vector")),
        "agents.simple",
        "agents.solver.minimax",
        "agents.tree.uct",
        "agents.ppo",
        "PIL.Image",
    ]:
        importlib.import_module(module)


def prepared(case: Case, places: dict[str, str], root: Path, index: int) -> tuple[Case, list[str], Path]:
    """The case with its places filled in (in its command line and the names its message may give), its
    command line, and its fresh folder (which holds an ``existing.jsonl``, for the refuse-to-overwrite cases)."""
    folder = root / f"case{index:04d}"
    folder.mkdir()
    (folder / "existing.jsonl").write_text(json.dumps(GAME) + "\n")
    tokens = {**places, "<out>": str(folder)}
    for name in re.findall(r"<copy:([\w-]+)>", " ".join(case.argv)):  # inputs a command may change
        source = Path(places[f"<{name}>"])
        copy = folder / source.name
        if source.is_dir():
            shutil.copytree(source, copy)
        else:
            shutil.copyfile(source, copy)
        tokens[f"<copy:{name}>"] = str(copy)

    def filled(text: str) -> str:
        for token in sorted(tokens, key=len, reverse=True):  # "<run-junk>/config.yaml" before "<run-junk>"
            text = text.replace(token, tokens[token])
        return text

    argv = [filled(arg) for arg in case.argv]
    case = dataclasses.replace(case, names=tuple(filled(name) for name in case.names))
    assert not re.search(r"<[a-z][\w:-]*>", " ".join(argv)), f"a place is missing: {argv}"
    return case, argv, folder


MISBUILT = ("unrecognized arguments", "expected one argument", "expected at least one argument")
"""argparse's answers to a command line whose shape is wrong: a case that gets one tests nothing."""
SYNTAX_ERRORS = (*MISBUILT, "the following arguments are required", "not allowed with argument", "unknown command")
SYNTAX_ERRORS += ("unknown benchmark", "name the benchmark")
"""The problems that the usage comes with: a command line of the wrong shape. A value the command cannot use is one
line without it."""


def check(case: Case, outcome: Outcome, argv: list[str]) -> None:
    line = message_line(outcome.stderr) or ""
    assert not any(words in line for words in MISBUILT), f"the case is built wrong: {line}\n{shlex.join(argv)}"
    failure = verdict(case, outcome)
    if failure:
        pytest.fail(f"{failure}\ncommand: quarto {shlex.join(argv)}", pytrace=False)


_counter = iter(range(10**6))


# ---------------------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked cases need os.fork")
@pytest.mark.parametrize("case", with_open_gaps(FORK_CASES), ids=str)
def test_bad_input_is_refused_with_a_message(
    case: Case, places: dict[str, str], case_folders: Path, commands_loaded: None
) -> None:
    case, argv, folder = prepared(case, places, case_folders, next(_counter))
    check(case, run_forked(argv, folder, case.timeout), argv)


@pytest.mark.parametrize("case", PROCESS_CASES, ids=str)
def test_bad_input_is_refused_by_the_quarto_process(case: Case, places: dict[str, str], case_folders: Path) -> None:
    case, argv, folder = prepared(case, places, case_folders, next(_counter))
    check(case, run_process(argv, folder, case.timeout + 10), argv)  # + the process's start-up


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_PROCESS_CASES, ids=str)
def test_more_bad_input_is_refused_by_the_quarto_process(
    case: Case, places: dict[str, str], case_folders: Path
) -> None:
    case, argv, folder = prepared(case, places, case_folders, next(_counter))
    check(case, run_process(argv, folder, case.timeout + 10), argv)


NUMBER_OPTIONS = [
    (TOURNAMENT, "--games"),
    (TOURNAMENT, "--opening-plies"),
    (TOURNAMENT, "--time-limit"),
    (TOURNAMENT, "--prior-draws"),
    (TOURNAMENT, "--bootstrap"),
    (GRADE, "--max-empty"),
    (GRADE, "--positions"),
    (REPLAY, "--delay"),
    (REPLAY, "--game"),
    (BENCH_ENV, "--seconds"),
    (BENCH_MCTS, "--games"),
]


@st.composite
def not_a_number(draw: st.DrawFn) -> str:
    """Text that no numeric option may accept: no number at all, or not a finite one."""
    kind = draw(st.sampled_from(["text", "special", "float-syntax"]))
    if kind == "special":
        sign = draw(st.sampled_from(["", "-", "+"]))
        word = draw(st.sampled_from(["nan", "inf", "infinity", "NaN", "Inf", "INFINITY"]))
        return sign + word + draw(st.sampled_from(["", " "]))
    if kind == "float-syntax":
        return f"{draw(st.integers(1, 9))}e{draw(st.integers(309, 10**6))}"  # overflows to infinity
    text = draw(st.text(min_size=0, max_size=12).filter(lambda t: "\x00" not in t))
    try:
        float(text)
    except ValueError:
        return text
    return text + "x"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked cases need os.fork")
@settings(
    max_examples=60,
    deadline=None,
    database=None,  # nothing written in the checkout
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failing case may take its whole timeout
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(option=st.sampled_from(NUMBER_OPTIONS), value=not_a_number())
def test_generated_text_at_numeric_options_is_refused(
    option: tuple[tuple[str, ...], str], value: str, places: dict[str, str], case_folders: Path, commands_loaded: None
) -> None:
    base, name = option
    names = (name.lstrip("-"), value.strip()) if len(value.strip()) >= 3 else (name.lstrip("-"),)
    case = Case(f"{base[0]} {name}={value!r}", (*base, f"{name}={value}"), names, timeout=40)
    case, argv, folder = prepared(case, places, case_folders, next(_counter))
    check(case, run_forked(argv, folder, case.timeout), argv)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked cases need os.fork")
@pytest.mark.parametrize(
    "command",
    [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_BASELINES else c for c in BASELINES],
)
def test_the_small_command_lines_the_cases_change_succeed(
    command: str, places: dict[str, str], case_folders: Path, commands_loaded: None
) -> None:
    """The control: each case's command line, with its one bad value left out, runs to the end."""
    if command == "bench jax" and missing_module("jax") is not None:
        pytest.skip("bench jax runs with the jax extra only (its bad values are refused without it, as tested)")
    base, timeout = BASELINES[command]
    case = Case(command, base, ())
    case, argv, folder = prepared(case, places, case_folders, next(_counter))
    # JAX runs threads of its own: a fork of a worker that has run JAX before can deadlock in the child (it hung
    # for the whole timeout), so bench jax, which runs JAX, gets a fresh process.
    run = run_process if command == "bench jax" else run_forked
    outcome = run(argv, folder, timeout)
    assert outcome.status == 0, f"quarto {shlex.join(argv)}: exit {outcome.status}\n{outcome.stderr[-3000:]}"


def test_the_fuzz_cases_cover_every_subcommand() -> None:
    from experiments.cli import BENCHMARKS, COMMANDS

    covered = {" ".join(c.argv[:2]) if c.argv[0] == "bench" else c.argv[0] for c in FORK_CASES}
    assert set(COMMANDS) - {"bench"} <= covered
    assert {f"bench {name}" for name in BENCHMARKS} <= covered
    assert len({str(c) for c in FORK_CASES}) == len(FORK_CASES), "two cases with the same label"
