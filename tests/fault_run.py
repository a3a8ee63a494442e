"""A fault run: the faults and bad inputs of issue 43, each as a real ``quarto`` process (or a library call under
``python -O``) in a fresh folder, classified by what went wrong. It is a script, not a test module (pytest does
not collect it: the cases start ~100 processes, minutes in all); the tests of each behaviour live in the test
modules. Run it from the repository root::

    python tests/fault_run.py                  # every case; a table of counts, then each case that failed
    python tests/fault_run.py --repo OTHER     # the same cases against another checkout (an older commit)
    python tests/fault_run.py -k grade         # the cases whose name holds "grade"

Each case ends in one verdict, the first that applies:

- ``traceback``: a Python traceback on stderr;
- ``hang``: no answer within the case's timeout (the process group is killed);
- ``usage dump``: a refused value printed argparse's usage before its message;
- ``silent accept``: exit status 0 where the input must be refused;
- ``lost or mixed``: an earlier result changed, two writers' files mixed, a temporary file left behind, or a
  result the command computed not printed;
- ``wrong answer``: any other way of missing the expectation (a refusal of several lines, another exit status,
  a message that does not name the problem);
- ``ok``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACEBACK = "Traceback (most recent call last)"
VERDICTS = ["traceback", "hang", "usage dump", "silent accept", "lost or mixed", "wrong answer", "ok"]
TINY_TRAINING = [
    "total_steps=1024",
    "num_games=8",
    "ppo.n_steps=16",
    "ppo.batch_size=64",
    "ppo.n_epochs=1",
    "ppo.snapshot_every=256",
    "eval_every=512",
    "early_evals=[]",
    "eval_games=8",
    "checkpoint_every=512",
    "final_eval_games=8",
    "eval_opponents=[random,greedy]",
    "grade_positions=0",
]
"""A training of a few seconds, as tests/conftest.py's (sectioned keys)."""
POSITION = "6.e2....d8..9..1 5"
ILLEGAL_LABEL = -2
"""agents.labels.ILLEGAL: the label of a masked action in a dataset shard."""


@dataclasses.dataclass
class Result:
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@dataclasses.dataclass
class Context:
    """What a case runs with: the checkout under test and the case's own empty folder."""

    repo: Path
    folder: Path
    environment: dict[str, str]

    def quarto(self, *argv: str, timeout: float = 120, stdin: str | None = None) -> Result:
        return self.python("-m", "experiments.cli", *argv, timeout=timeout, stdin=stdin)

    def python(self, *argv: str, timeout: float = 120, stdin: str | None = None) -> Result:
        process = self.start(sys.executable, *argv, stdin=stdin)
        return finish(process, timeout, stdin)

    def start(self, *argv: str, stdin: str | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            list(argv),
            cwd=self.folder,
            env=self.environment,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: a hang is killed with its children
        )

    def start_quarto(self, *argv: str) -> subprocess.Popen[str]:
        return self.start(sys.executable, "-m", "experiments.cli", *argv)

    def tiny_run(self, name: str = "run") -> Path:
        """A finished tiny training in the case's folder (copied from a cache: trained once per fault run)."""
        cached = self.environment["FAULT_RUN_CACHE"]
        source = Path(cached) / "tiny_run"
        if not (source / "checkpoints" / "final.zip").exists():
            shutil.rmtree(source, ignore_errors=True)
            result = self.quarto("train", *TINY_TRAINING, "--out", str(source), "--no-progress", timeout=600)
            if result.returncode != 0:
                raise RuntimeError(f"the tiny training failed:\n{result.stderr[-2000:]}")
        shutil.copytree(source, self.folder / name)
        return self.folder / name


def finish(process: subprocess.Popen[str], timeout: float, stdin: str | None = None) -> Result:
    try:
        stdout, stderr = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return Result(None, stdout, stderr)
    return Result(process.returncode, stdout, stderr)


def snapshot(path: Path) -> dict[str, str]:
    """Every file under ``path`` (or ``path`` itself) with a hash of its bytes; temporary files included."""
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    if not path.exists():
        return {}
    return {
        str(file.relative_to(path)): hashlib.sha256(file.read_bytes()).hexdigest()
        for file in sorted(path.rglob("*"))
        if file.is_file() and file.name != ".lock"
    }


def temporaries(path: Path) -> list[str]:
    root = path if path.is_dir() else path.parent
    return [str(p) for p in root.rglob("*") if ".tmp" in p.name or p.name.endswith(".staging")]


# ---------------------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------------------
def crashed(result: Result) -> str:
    """``hang`` or ``traceback`` where the process did either, else ``""``: the first verdicts of every case."""
    if result.returncode is None:
        return "hang"
    return "traceback" if TRACEBACK in result.stderr else ""


def refused_in_one_line(result: Result, *fragments: str) -> str:
    """The verdict on a value the command must refuse: status 2, one line naming the problem, no usage."""
    if broken := crashed(result):
        return broken
    if result.returncode == 0:
        return "silent accept"
    if "usage:" in result.stderr:
        return "usage dump"
    text = result.stderr.lower()
    if result.returncode != 2 or len(result.lines) != 1 or not all(f.lower() in text for f in fragments):
        return "wrong answer"
    return "ok"


def refused_as_syntax(result: Result, *fragments: str) -> str:
    """The verdict on a syntax error (an unknown or abbreviated flag): status 2, the usage allowed."""
    if broken := crashed(result):
        return broken
    if result.returncode == 0:
        return "silent accept"
    text = result.stderr.lower()
    if result.returncode != 2 or not all(f.lower() in text for f in fragments):
        return "wrong answer"
    return "ok"


def succeeded(result: Result, *fragments: str) -> str:
    if broken := crashed(result):
        return broken
    text = (result.stdout + result.stderr).lower()
    if result.returncode != 0 or not all(f.lower() in text for f in fragments):
        return "wrong answer"
    return "ok"


def unchanged(before: dict[str, str], path: Path, verdict: str) -> str:
    """``verdict``, unless the files under ``path`` changed or a temporary file was left behind."""
    if verdict in ("traceback", "hang", "silent accept"):
        return verdict
    if snapshot(path) != before or temporaries(path):
        return "lost or mixed"
    return verdict


# ---------------------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------------------
CASES: dict[str, Callable[[Context], str]] = {}


def case(name: str) -> Callable[[Callable[[Context], str]], Callable[[Context], str]]:
    def register(function: Callable[[Context], str]) -> Callable[[Context], str]:
        CASES[name] = function
        return function

    return register


VALUE_ERRORS: list[tuple[str, list[str], list[str]]] = [
    # (name, argv, fragments the one line must hold)
    ("grade --positions 0", ["grade", "random", "--positions", "0"], ["--positions"]),
    ("grade --positions huge", ["grade", "random", "--positions", "1000000000000"], ["--positions"]),
    ("grade --seed 2**32", ["grade", "random", "--seed", "4294967296"], ["--seed"]),
    ("grade --seed -1", ["grade", "random", "--seed", "-1"], ["--seed"]),
    ("grade --perfect-games odd", ["grade", "random", "--perfect-games", "3"], ["perfect"]),
    ("grade --max-empty 99", ["grade", "random", "--max-empty", "99"], ["max-empty"]),
    ("grade --attributes ,", ["grade", "random", "--attributes", ","], ["attribute"]),
    ("grade --attributes colour,,shape", ["grade", "random", "--attributes", "colour,,shape"], ["attribute"]),
    ("grade --attributes colour,", ["grade", "random", "--attributes", "colour,"], ["attribute"]),
    ("grade --attributes 7", ["grade", "random", "--attributes", "7"], ["attribute"]),
    ("grade bad spec", ["grade", "minimax:depth=-1"], ["depth"]),
    ("tournament --jobs 0", ["tournament", "random", "greedy", "--jobs", "0"], ["--jobs"]),
    ("tournament --games 0", ["tournament", "random", "greedy", "--games", "0"], ["--games"]),
    ("tournament --games huge", ["tournament", "random", "greedy", "--games", "10000000000"], ["--games"]),
    ("tournament --time-limit -1", ["tournament", "random", "greedy", "--time-limit", "-1"], ["time-limit"]),
    ("tournament --mode bad choice", ["tournament", "random", "greedy", "--mode", "swiss"], ["--mode"]),
    ("tournament --bootstrap huge", ["tournament", "random", "greedy", "--bootstrap", "200000"], ["bootstrap"]),
    ("solve --jobs 0", ["solve", "--jobs", "0", POSITION], ["--jobs"]),
    ("solve --table-mb -1", ["solve", "--table-mb", "-1", POSITION], ["table-mb"]),
    ("solve bad position", ["solve", "xyz"], ["xyz"]),
    ("dataset --sample 0", ["dataset", "--sample", "0", "--out", "d.npz"], ["--sample"]),
    ("dataset --jobs 0", ["dataset", "--sample", "5", "--jobs", "0", "--out", "d.npz"], ["--jobs"]),
    (
        "dataset --symmetries huge",
        ["dataset", "--sample", "5", "--symmetries", "99999", "--out", "d.npz"],
        ["symmetries"],
    ),
    ("dataset --observation bad", ["dataset", "--sample", "5", "--observation", "pixels", "--out", "d.npz"], ["obs"]),
    ("suite --per-stage 0", ["suite", "x-v1", "--build", "--per-stage", "0", "--out", "s.jsonl"], ["per-stage"]),
    ("book --min-empty 99", ["book", "--min-empty", "99", "--out", "b.npz"], ["min-empty"]),
    ("evaluate --games 0", ["evaluate", "random", "--games", "0"], ["--games"]),
    ("bench mcts --sims 0", ["bench", "mcts", "--sims", "0"], ["--sims"]),
    ("bench network --positions 0", ["bench", "network", "--positions", "0"], ["--positions"]),
    ("replay --delay 0", ["replay", "games.jsonl", "--delay", "0", "--gif", "g.gif"], ["delay"]),
    ("train total_steps=1e100", ["train", "total_steps=1e100", "--out", "t"], ["total_steps"]),
    ("train total_steps=-5", ["train", "total_steps=-5", "--out", "t"], ["total_steps"]),
    ("train num_games=10**9", ["train", "num_games=1000000000", "--out", "t"], ["num_games"]),
    ("train unknown key", ["train", "learnign_rate=1", "--out", "t"], ["learnign_rate"]),
    ("train foo.bar=1", ["train", "foo.bar=1", "--out", "t"], ["foo.bar", "section ppo"]),
    ("train --config missing", ["train", "--config", "nothing.yaml", "--out", "t"], ["nothing.yaml"]),
]


def _value_case(argv: list[str], fragments: list[str]) -> Callable[[Context], str]:
    def run(context: Context) -> str:
        result = context.quarto(*argv, timeout=60)
        verdict = refused_in_one_line(result, *fragments)
        written = [p.name for p in context.folder.iterdir() if p.name not in ("games.jsonl",)]
        if verdict == "ok" and written:
            return "lost or mixed"  # a refusal writes nothing
        return verdict

    return run


for _name, _argv, _fragments in VALUE_ERRORS:
    case(f"value: {_name}")(_value_case(_argv, _fragments))


@case("syntax: --resum is no abbreviation of --resume")
def _abbreviation(context: Context) -> str:
    run = context.tiny_run()
    before = snapshot(run)
    return unchanged(before, run, refused_as_syntax(context.quarto("train", "--resum", str(run)), "--resum"))


@case("syntax: grade --posit is no abbreviation of --positions")
def _abbreviation_grade(context: Context) -> str:
    return refused_as_syntax(context.quarto("grade", "random", "--posit", "5", "--out", "g"), "--posit")


@case("override after an option: train total_steps=0 --out X seed=1")
def _late_override(context: Context) -> str:
    # total_steps=0 is out of range: the refusal must be about it, not about the grammar of the command line.
    return refused_in_one_line(context.quarto("train", "total_steps=0", "--out", "x", "seed=1"), "total_steps")


@case("library: quarto_env.env(attributes='colour,,shape')")
def _library_attributes(context: Context) -> str:
    return _library(context, "quarto_env.env(attributes='colour,,shape')", "attribute")


# ---- results replaced -------------------------------------------------------------------------------------
def _grade(context: Context, agent: str, out: str, *extra: str) -> Result:
    return context.quarto(
        "grade", agent, "--positions", "10", "--max-empty", "6", "--out", out, "--no-progress", *extra
    )


@case("replace: grade into a folder that holds a grade")
def _grade_replace(context: Context) -> str:
    if _grade(context, "random", "g").returncode != 0:
        return "wrong answer"
    before = snapshot(context.folder / "g")
    return unchanged(before, context.folder / "g", refused_in_one_line(_grade(context, "greedy", "g"), "--overwrite"))


def _graded_agents(folder: Path) -> list[str]:
    """The agents a grade folder's ``grade.json`` holds results of ([] when it holds none)."""
    try:
        return [row["agent"] for row in json.loads((folder / "grade.json").read_text())]
    except (OSError, ValueError, KeyError, TypeError):
        return []


@case("replace: grade --overwrite replaces the earlier grade")
def _grade_overwrite(context: Context) -> str:
    if _grade(context, "random", "g").returncode != 0:
        return "wrong answer"
    verdict = succeeded(_grade(context, "greedy", "g", "--overwrite"))
    return verdict if _graded_agents(context.folder / "g") == ["greedy"] else "lost or mixed"


GAME = {
    "variant": {"attributes": ["height", "colour", "shape", "top"], "squares": False, "declaration": False},
    "seats": ["random", "greedy"],
    "actions": [7, 13, 3, 7, 12, 1, 4, 15, 0, 5, 13, 2, 14, 8, 1, 14, 5, 12],
    "winner": 1,
    "end": "win",
}
"""A recorded game (random against greedy, greedy wins), as ``quarto tournament`` writes it."""


def _games_file(context: Context) -> Path:
    path = context.folder / "games.jsonl"
    path.write_text(json.dumps(GAME) + "\n")
    return path


@case("replace: replay --html onto an existing page")
def _replay_html_replace(context: Context) -> str:
    games = _games_file(context)
    page = context.folder / "page.html"
    page.write_text("<p>mine</p>")
    before = snapshot(page)
    return unchanged(
        before, page, refused_in_one_line(context.quarto("replay", str(games), "--html", "page.html"), "--overwrite")
    )


@case("replace: dataset onto an existing file")
def _dataset_replace(context: Context) -> str:
    data = context.folder / "d.npz"
    data.write_bytes(b"earlier result")
    before = snapshot(data)
    result = context.quarto("dataset", "--sample", "3", "--max-empty", "5", "--out", "d.npz", "--no-progress")
    return unchanged(before, data, refused_in_one_line(result, "--overwrite"))


@case("replace: bench network --json onto an existing record")
def _bench_json_replace(context: Context) -> str:
    record = context.folder / "r.json"
    record.write_text('{"earlier": true}')
    before = snapshot(record)
    result = context.quarto("bench", "network", "--positions", "40", "--epochs", "1", "--json", "r.json")
    return unchanged(before, record, refused_in_one_line(result, "--overwrite"))


@case("replace: tournament into a folder that holds one")
def _tournament_replace(context: Context) -> str:
    argv = ["tournament", "random", "greedy", "--games", "2", "--out", "t", "--no-progress"]
    if context.quarto(*argv).returncode != 0:
        return "wrong answer"
    before = snapshot(context.folder / "t")
    return unchanged(before, context.folder / "t", refused_in_one_line(context.quarto(*argv), "--overwrite"))


@case("replace: plot onto an existing picture")
def _plot_replace(context: Context) -> str:
    run = context.tiny_run()
    picture = context.folder / "p.png"
    picture.write_bytes(b"earlier picture")
    before = snapshot(picture)
    return unchanged(
        before, picture, refused_in_one_line(context.quarto("plot", str(run), "--out", "p.png"), "--overwrite")
    )


# ---- two writers --------------------------------------------------------------------------------------------
@case("concurrent: two grades into one folder")
def _two_grades(context: Context) -> str:
    argv = ["--positions", "60", "--max-empty", "8", "--out", "g", "--no-progress"]
    first = context.start_quarto("grade", "random", *argv)
    time.sleep(0.3)
    second = context.start_quarto("grade", "greedy", *argv)
    results = [finish(first, 300), finish(second, 300)]
    if any(r.returncode is None for r in results):
        return "hang"
    if any(TRACEBACK in r.stderr for r in results):
        return "traceback"
    codes = sorted(r.returncode for r in results)
    if codes != [0, 2]:
        return "lost or mixed" if codes == [0, 0] else "wrong answer"
    folder = context.folder / "g"
    command = (folder / "command.txt").read_text() if (folder / "command.txt").exists() else ""
    graded = _graded_agents(folder)
    # One writer's files only: the command line and the results name the same agent.
    return "ok" if len(graded) == 1 and f"grade {graded[0]} " in command else "lost or mixed"


@case("concurrent: two datasets into one file")
def _two_datasets(context: Context) -> str:
    argv = ["--sample", "30", "--max-empty", "8", "--out", "d.npz", "--no-progress"]
    first = context.start_quarto("dataset", *argv, "--seed", "1")
    time.sleep(0.3)
    second = context.start_quarto("dataset", *argv, "--seed", "2")
    results = [finish(first, 300), finish(second, 300)]
    if any(r.returncode is None for r in results):
        return "hang"
    if any(TRACEBACK in r.stderr for r in results):
        return "traceback"
    codes = sorted(r.returncode for r in results)
    return "ok" if codes == [0, 2] else ("lost or mixed" if codes == [0, 0] else "wrong answer")


@case("concurrent: tournament --resume while the tournament runs")
def _resume_running_tournament(context: Context) -> str:
    running = context.start_quarto(
        "tournament", "mcts:sims=2000", "random", "--games", "40", "--out", "t", "--no-progress"
    )
    deadline = time.time() + 60
    while time.time() < deadline and not (context.folder / "t").exists():
        time.sleep(0.2)
    time.sleep(2)
    result = context.quarto("tournament", "--resume", "t", timeout=120)
    os.killpg(running.pid, signal.SIGKILL)
    finish(running, 10)
    return refused_in_one_line(result, "t")


# ---- resumable state ----------------------------------------------------------------------------------------
@case("resume: altered dataset shard after kill -9")
def _altered_shard(context: Context) -> str:
    argv = ["dataset", "--sample", "40", "--min-empty", "6", "--max-empty", "9", "--out", "d.npz", "--no-progress"]
    process = context.start_quarto(*argv)
    parts = context.folder / "d.npz.parts"
    deadline = time.time() + 240
    while time.time() < deadline and not list(parts.glob("shard-*.npy")):
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    finish(process, 10)
    shards = sorted(parts.glob("shard-*.npy"))
    if not shards:
        return "harness error: no shard to alter"
    _swap_wins_and_losses(shards[0])
    result = context.quarto(*argv, timeout=300)
    if broken := crashed(result):
        return broken
    if result.returncode == 0 and not any(w in result.stderr.lower() for w in ("redo", "redone", "checksum", "again")):
        return "silent accept"  # the altered shard was used without a word
    return "ok" if result.returncode in (0, 2) else "wrong answer"


def _swap_wins_and_losses(shard: Path) -> None:
    """Negate every label of a shard but the masked actions', and make its first masked action a win: the file
    stays a well-formed array of the same shape and type."""
    import numpy as np

    labels = np.load(shard, allow_pickle=False)
    masked = labels == ILLEGAL_LABEL
    altered = np.where(masked, labels, -labels).astype(labels.dtype)
    altered[np.unravel_index(int(np.argmax(masked)), labels.shape)] = 1
    np.save(shard, altered, allow_pickle=False)


@case("resume: truncated latest.zip with intact step_*.zip")
def _truncated_latest(context: Context) -> str:
    run = context.tiny_run()
    latest = run / "checkpoints" / "latest.zip"
    latest.write_bytes(latest.read_bytes()[:1000])
    result = context.quarto("train", "--resume", str(run), "total_steps=1536", "--no-progress", timeout=600)
    verdict = succeeded(result)
    named = any(name in result.stderr for name in ("step_", "final.zip", "best.zip"))  # the intact one it took
    return verdict if verdict != "ok" or named else "wrong answer"


@case("resume: total_steps below the steps done")
def _resume_below(context: Context) -> str:
    run = context.tiny_run()
    before = snapshot(run)
    result = context.quarto("train", "--resume", str(run), "total_steps=1", "--no-progress")
    return unchanged(before, run, refused_in_one_line(result, "total_steps"))


# ---- late failures ------------------------------------------------------------------------------------------
FAILING_WRITES = textwrap.dedent("""
    import builtins, os, sys
    FAIL = sys.argv.pop(1)

    def refused(path):
        if os.path.basename(os.fspath(path)).lstrip(".").startswith(FAIL):
            raise PermissionError(13, "Permission denied", os.fspath(path))

    def opened(file, mode="r", *args, _open=builtins.open, **kwargs):
        if any(letter in mode for letter in "wax+") and not isinstance(file, int):
            refused(file)
        return _open(file, mode, *args, **kwargs)

    def moved(source, target, *args, _move, **kwargs):
        refused(target)
        return _move(source, target, *args, **kwargs)

    builtins.open = opened
    os.replace = lambda s, t, *a, _m=os.replace, **k: moved(s, t, *a, _move=_m, **k)
    os.rename = lambda s, t, *a, _m=os.rename, **k: moved(s, t, *a, _move=_m, **k)
    from experiments.cli import main
    sys.exit(main(sys.argv[1:]))
""")
"""A ``quarto`` process in which every write of a file whose name starts with the first argument fails as a folder
made read-only mid-run would make it fail (``PermissionError``), late: after the work is done."""


def _late_failure(context: Context, fail: str, argv: list[str], out: str, printed: str) -> str:
    result = context.python("-c", FAILING_WRITES, fail, *argv, timeout=600)
    if broken := crashed(result):
        return broken
    if result.returncode == 0:
        return "silent accept"
    if printed.lower() not in result.stdout.lower() or temporaries(context.folder / out):
        return "lost or mixed"  # what was computed is lost, or a temporary file stays
    return "ok" if fail in result.stderr else "wrong answer"


@case("late failure: grade whose grade.md cannot be written")
def _grade_md_fails(context: Context) -> str:
    argv = ["grade", "random", "--positions", "10", "--max-empty", "6", "--out", "g", "--no-progress"]
    verdict = _late_failure(context, "grade.md", argv, "g", "value")
    folder = context.folder / "g"
    if verdict == "ok" and folder.exists() and not (folder / "grade.json").exists():
        return "lost or mixed"  # a half folder
    return verdict


@case("late failure: tournament whose ratings cannot be written")
def _ratings_fail(context: Context) -> str:
    argv = ["tournament", "random", "greedy", "--games", "2", "--out", "t", "--no-progress"]
    return _late_failure(context, "ratings.md", argv, "t", "random")


@case("late failure: dataset whose file cannot be written")
def _dataset_fails(context: Context) -> str:
    argv = ["dataset", "--sample", "3", "--max-empty", "5", "--out", "d.npz", "--no-progress"]
    return _late_failure(context, "d.npz", argv, ".", "")


@case("late failure: train whose final checkpoint cannot be written")
def _train_fails(context: Context) -> str:
    argv = ["train", *TINY_TRAINING, "--out", "run", "--no-progress"]
    return _late_failure(context, "final.zip", argv, "run", "")


# ---- input files that are not regular files -----------------------------------------------------------------
def _fifo(context: Context) -> str:
    os.mkfifo(context.folder / "pipe")
    return "pipe"


@case("pipe: replay a named pipe")
def _replay_pipe(context: Context) -> str:
    return refused_in_one_line(context.quarto("replay", _fifo(context), "--no-pause", timeout=20), "pipe")


@case("pipe: tournament --resume a named pipe")
def _tournament_pipe(context: Context) -> str:
    return refused_in_one_line(context.quarto("tournament", "--resume", _fifo(context), timeout=20), "pipe")


@case("pipe: train --config a named pipe")
def _config_pipe(context: Context) -> str:
    return refused_in_one_line(context.quarto("train", "--config", _fifo(context), "--out", "t", timeout=20), "pipe")


@case("pipe: grade --cache a named pipe")
def _cache_pipe(context: Context) -> str:
    return refused_in_one_line(
        context.quarto("grade", "random", "--cache", _fifo(context), "--out", "g", timeout=20), "pipe"
    )


@case("pipe: dataset --suite a named pipe")
def _suite_pipe(context: Context) -> str:
    argv = ["dataset", "--suite", _fifo(context), "--out", "d.npz"]
    return refused_in_one_line(context.quarto(*argv, timeout=20), "pipe")


@case("folder: replay a folder")
def _replay_folder(context: Context) -> str:
    (context.folder / "games").mkdir()
    return refused_in_one_line(context.quarto("replay", "games", "--no-pause", timeout=20), "folder")


# ---- the library -------------------------------------------------------------------------------------------
def _library(context: Context, statement: str, fragment: str) -> str:
    """Run ``statement`` under ``python -O``: it must raise a ``quarto_env.QuartoError`` whose message holds
    ``fragment``."""
    program = textwrap.dedent(f"""
        import sys, quarto_env
        from quarto_env.vector import VectorQuarto
        base = getattr(quarto_env, "QuartoError", None)
        try:
            {statement}
        except Exception as error:
            ours = base is not None and isinstance(error, base)
            print(type(error).__name__, ours, str(error).replace(chr(10), " "), sep="|")
        else:
            print("no error")
    """)
    result = context.python("-O", "-c", program, timeout=120)
    if result.returncode is None:
        return "hang"
    line = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if line == "no error":
        return "silent accept"
    _, ours, message = [*line.split("|", 2), "", "", ""][:3]
    if ours != "True" or fragment.lower() not in message.lower():
        return "wrong answer"
    return "ok"


def _played(actions: str) -> str:
    return f"env = quarto_env.env(); env.reset(seed=0); {actions}"


for _statement, _fragment in [
    (_played("env.step(999)"), "999"),
    (_played("env.step(16)"), "16"),
    (_played("env.step(None)"), "None"),
    (_played("env.step('a')"), "a"),
    (_played("[env.step(a) for a in (0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8)]; env.last()"), "over"),
    (_played("env.reset(options='position')"), "options"),
    ("VectorQuarto(10**9)", "bytes"),
    ("VectorQuarto(0)", "0"),
]:
    case(f"library -O: {_statement.split('; ')[-1]}")(
        lambda context, s=_statement, f=_fragment: _library(context, s, f)
    )


@case("library: an illegal move's infos say how the game ended")
def _illegal_infos(context: Context) -> str:
    program = textwrap.dedent("""
        import quarto_env
        env = quarto_env.env(); env.reset(seed=0)
        env.step(0)          # player 0 gives piece 0
        env.step(5)          # player 1 places it on square 5
        env.step(0)          # and gives piece 0 again: in range, but masked (an illegal move)
        print(sorted((agent, info.get("winner"), info.get("outcome")) for agent, info in env.infos.items()))
    """)
    result = context.python("-O", "-c", program)
    if result.returncode is None:
        return "hang"
    if TRACEBACK in result.stderr:
        return "wrong answer"
    infos = result.stdout.strip()
    return "ok" if infos and "-1" not in infos and ", 0)" not in infos else "wrong answer"


# ---- the core install's arena --------------------------------------------------------------------------------
@case("core install: tournament without matplotlib")
def _tournament_without_matplotlib(context: Context) -> str:
    program = (
        "import sys; sys.modules['matplotlib'] = None; from experiments.cli import main; "
        "sys.exit(main(['tournament', 'random', 'greedy', '--games', '2', '--out', 't', '--no-progress']))"
    )
    result = context.python("-c", program)
    return succeeded(result, "rating")


# ---------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to run (default: this one)")
    parser.add_argument("-k", default="", help="run only the cases whose name holds this text")
    parser.add_argument("--json", type=Path, help="also write every case's verdict here")
    args = parser.parse_args(argv)
    names = [name for name in CASES if args.k in name]
    cache = Path(tempfile.mkdtemp(prefix="fault-run-"))
    environment = dict(os.environ, PYTHONPATH=str(args.repo.resolve()), FAULT_RUN_CACHE=str(cache))
    environment.update(QUARTO_CACHE_DIR=str(cache / "values"), MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    verdicts: dict[str, str] = {}
    for name in names:
        folder = Path(tempfile.mkdtemp(prefix="case-", dir=cache))
        started = time.time()
        try:
            verdicts[name] = CASES[name](Context(args.repo.resolve(), folder, environment))
        except Exception as error:  # the harness itself: counted apart, never as the command's fault
            verdicts[name] = f"harness error: {type(error).__name__}: {error}"
        print(f"{verdicts[name]:>14}  {name}  ({time.time() - started:.0f} s)", flush=True)
    counts = Counter(verdicts.values())
    print("\n" + " | ".join(f"{verdict}: {counts.get(verdict, 0)}" for verdict in VERDICTS), f"| cases: {len(names)}")
    if args.json:
        args.json.write_text(json.dumps(verdicts, indent=1))
    shutil.rmtree(cache, ignore_errors=True)
    return 0 if counts.get("ok", 0) == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
