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
import contextlib
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
"""agents.solver.labels.ILLEGAL: the label of a masked action in a dataset shard."""


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

    def start(
        self,
        *argv: str,
        stdin: str | None = None,
        environment: dict[str, str] | None = None,
        before_exec: Callable[[], None] | None = None,
    ) -> subprocess.Popen[str]:
        """``argv`` in the case's folder, with the fault run's environment (or ``environment``), ``before_exec``
        run in the child before it starts (a resource limit)."""
        return subprocess.Popen(
            list(argv),
            cwd=self.folder,
            env=self.environment if environment is None else environment,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: a hang is killed with its children
            preexec_fn=_with_sigint_as_in_a_terminal(before_exec),
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
def _with_sigint_as_in_a_terminal(before_exec: Callable[[], None] | None) -> Callable[[], None]:
    """What a case's child runs before it starts: SIGINT back to its default, then ``before_exec``. A fault run
    started in the background (``&``, ``nohup``) ignores SIGINT, every child inherits that, and Python then
    installs no KeyboardInterrupt at all: the Ctrl-C cases would test nothing (they failed as "lost" and
    "traceback" from a background run only)."""

    def setup() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if before_exec is not None:
            before_exec()

    return setup


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
    ("bench mcts --games 0", ["bench", "mcts", "--games", "0"], ["--games"]),
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
    running = context.start_quarto(  # long enough to be still playing when the resume comes (40 took 2.5 s)
        "tournament", "mcts:sims=2000", "random", "--games", "1000", "--out", "t", "--no-progress"
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
    # 400 samples, not 40: on a fast machine 40 were labelled, and their shards merged, between two looks of the
    # loop below, which then had no shard to alter (docs/results.md, the sixth sitting).
    argv = ["dataset", "--sample", "400", "--min-empty", "6", "--max-empty", "9", "--out", "d.npz", "--no-progress"]
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


# === issue 50: sessions ===
SESSION_PRELUDE = textwrap.dedent("""
    import os, signal, threading
    import numpy as np
    import quarto_env
    from agents.tree.puct import PUCTSearch
    from agents.tree.sessions import ArenaSession, PUCTOptions, PUCTSession, SelfPlaySession
    from quarto_env.core import INITIAL_STATE, STANDARD, position_array
    from quarto_env.observation import observation_kind
    FEW = PUCTOptions(simulations=4)
    def uniform(batch):
        return np.zeros((len(batch), 16), np.float32), np.zeros(len(batch), np.float32)
    def started(games=2, **options):  # a session whose batch 0 was evaluated: the faults come at batch 1
        session = SelfPlaySession(games, FEW, seed=0, **options)
        session.submit(*uniform(session.pending()))
        return session
    def finishes(session, games=2):  # whether the session, after the fault, plays every game to its end
        return len(session.run(uniform).games) == games
    class TensorNeedingGrad:  # what torch's tensor of a forward pass without inference_mode does in numpy
        def __array__(self, *args, **kwargs):
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy()")
""")


def _session_refusal(context: Context, statement: str, fragments: str | tuple[str, ...], after: str = "True") -> str:
    """Run ``statement`` (one line, after :data:`SESSION_PRELUDE`, under ``python -O``): it must raise a
    ``QuartoError`` of one line holding ``fragments`` -- any other exception is the traceback a user would see --
    and then ``after``, an expression, must be true: the session lost nothing and goes on."""
    program = SESSION_PRELUDE + textwrap.dedent(f"""
        try:
            {statement}
        except quarto_env.QuartoError as error:
            print("refused", str(error).count(chr(10)), str(error).replace(chr(10), " "), sep="|")
        else:
            print("accepted")
        try:
            print("after", bool({after}), sep="|")
        except Exception as error:
            print("after", type(error).__name__, error, sep="|")
    """)
    result = context.python("-O", "-c", program, timeout=120)
    if broken := crashed(result):
        return broken
    lines = result.stdout.splitlines()
    if "accepted" in lines:
        return "silent accept"
    refusal = next((line.split("|", 2) for line in lines if line.startswith("refused|")), None)
    wanted = (fragments,) if isinstance(fragments, str) else fragments
    if refusal is None or refusal[1] != "0" or not all(f.lower() in refusal[2].lower() for f in wanted):
        return "wrong answer"
    return "ok" if "after|True" in lines else "lost or mixed"


def _session_outcome(context: Context, program: str, *expected: str) -> str:
    """Run ``program`` (after :data:`SESSION_PRELUDE`): its last line of output must be one of ``expected``; a
    line starting ``lost`` is a session that lost games or evaluations without saying so."""
    result = context.python("-O", "-c", SESSION_PRELUDE + textwrap.dedent(program), timeout=240)
    if broken := crashed(result):
        return broken
    last = (result.stdout.strip().splitlines() or [""])[-1]
    if last.startswith("lost"):
        return "lost or mixed"
    return "ok" if last in expected else "wrong answer"


SESSION_EVALUATOR_FAULTS: list[tuple[str, str, str]] = [
    # (the evaluator's fault, the evaluator, a fragment of the one line); the batch is named, and stays pending
    ("returns None", "lambda batch: None", "got None"),
    ("returns a 3-tuple", "lambda batch: (*uniform(batch), 0.0)", "tuple of 3"),
    ("raises", "lambda batch: 1 / 0", "raised ZeroDivisionError"),
    ("returns a dict", "lambda batch: dict(zip(('logits', 'values'), uniform(batch)))", "got a dict"),
    ("returns the logits alone", "lambda batch: uniform(batch)[0]", "pair (logits, values)"),
    ("returns (values, logits)", "lambda batch: uniform(batch)[::-1]", "logits must have shape"),
    ("returns values (n, 1)", "lambda batch: (uniform(batch)[0], uniform(batch)[1][:, None])", "values must have"),
    ("returns integer logits", "lambda batch: (np.zeros((len(batch), 16), int), uniform(batch)[1])", "int64"),
    ("returns NaN values", "lambda batch: (uniform(batch)[0], np.full(len(batch), np.nan))", "finite"),
    ("returns values of 3", "lambda batch: (uniform(batch)[0], np.full(len(batch), 3.0))", "[-1, 1]"),
    ("returns 17 logits", "lambda batch: (np.zeros((len(batch), 17)), uniform(batch)[1])", "(2, 16)"),
    ("returns a tensor needing grad", "lambda batch: (TensorNeedingGrad(), uniform(batch)[1])", "detach"),
    ("returns ragged lists", "lambda batch: ([[0.0] * 16, [0.0]], [0.0, 0.0])", "no array"),
    ("returns -inf at every action", "lambda batch: (np.full((len(batch), 16), -np.inf), uniform(batch)[1])", "leaf"),
]
for _fault, _evaluator, _fragment in SESSION_EVALUATOR_FAULTS:
    case(f"session: an evaluator that {_fault}")(
        lambda context, e=_evaluator, f=_fragment: _session_refusal(
            context, f"session = started(); session.run({e})", ("batch 1 (model 0, 2 leaves): ", f), "finishes(session)"
        )
    )


@case("session: play_round with an evaluator that returns None")
def _session_play_round(context: Context) -> str:
    statement = "session = started(None, parallel=2, records=False); session.play_round(lambda batch: None)"
    return _session_refusal(
        context, statement, "batch 1 (model 0, 2 leaves)", "session.play_round(uniform) is not None"
    )


@case("session: model 1's evaluator fails in a match")
def _session_arena_model(context: Context) -> str:
    statement = "arena = ArenaSession(1, FEW, seed=0); arena.run(uniform, lambda batch: None)"
    return _session_refusal(context, statement, "(model 1,", "arena.run(uniform, uniform).summary()['games'] == 2")


@case("session: float16 evaluations are taken")
def _session_float16(context: Context) -> str:
    program = """
        half = lambda batch: tuple(a.astype(np.float16) for a in uniform(batch))
        print(len(SelfPlaySession(2, FEW, seed=0).run(half).games))
    """
    return _session_outcome(context, program, "2")


SESSION_ORDER_FAULTS: list[tuple[str, str, str, str]] = [
    # (name, statement, fragment, what must hold after: nothing was applied to a batch the caller did not see)
    (
        "submit twice for one batch",
        "session = SelfPlaySession(2, FEW, seed=0); batch = session.pending(); session.submit(*uniform(batch)); "
        "session.submit(*uniform(batch))",
        "batch 0 is submitted already",
        "session.pending().index == 1 and session.batches == 2 and finishes(session)",
    ),
    (
        "submit before pending",
        "session = SelfPlaySession(2, FEW, seed=0); session.submit(np.zeros((2, 16)), np.zeros(2))",
        "call pending() first",
        "session.batches == 0 and finishes(session)",
    ),
    (
        "submit after done played on to a batch not handed out",
        "session = started(); session.done; session.submit(*uniform(session.search.planes[:2]))",
        "batch 0 is submitted already",
        "session.pending().index == 1 and finishes(session)",
    ),
    (
        "submit with a stale batch",
        "session = SelfPlaySession(2, FEW, seed=0); old = session.pending(); session.submit(*uniform(old)); "
        "session.pending(); session.submit(*uniform(old), batch=old)",
        "the evaluation is for batch 0",
        "session.pending().index == 1 and finishes(session)",
    ),
    (
        "submit with another session's batch",
        "session, other = started(), started(); session.pending(); "
        "session.submit(*uniform(other.pending()), batch=other.pending())",
        "another session",
        "finishes(session) and finishes(other)",
    ),
    (
        "submit with a batch named by a string",
        "session = started(); batch = session.pending(); session.submit(*uniform(batch), batch='1')",
        "batch must be the LeafBatch",
        "finishes(session)",
    ),
    (
        "submit after the end",
        "session = SelfPlaySession(1, FEW, seed=0).run(uniform); session.submit(np.zeros((1, 16)), np.zeros(1))",
        "submitted already",
        "len(session.games) == 1",
    ),
    ("pending after the end", "SelfPlaySession(1, FEW, seed=0).run(uniform).pending()", "done", "True"),
]
for _name, _statement, _fragment, _after in SESSION_ORDER_FAULTS:
    case(f"session: {_name}")(lambda context, s=_statement, f=_fragment, a=_after: _session_refusal(context, s, f, a))


@case("session: Ctrl-C inside the search")
def _session_interrupt_in_search(context: Context) -> str:
    # A real SIGINT, raised while the search plays a move: the session must go on or refuse to, never end quietly.
    program = """
        session = SelfPlaySession(64, FEW, seed=0, parallel=16)
        step, calls = session._step, []
        def interrupted(slots, actions):
            calls.append(1)
            if len(calls) == 5:
                signal.raise_signal(signal.SIGINT)
            step(slots, actions)
        session._step = interrupted
        try:
            session.run(uniform)
        except KeyboardInterrupt:
            pass
        session._step = step
        try:
            done = session.done
        except quarto_env.CallOrderError as error:
            print("refused" if "cannot go on" in str(error) else error)
        else:
            print(f"lost: done with {session.finished} of 64 games" if done else "resumed" * finishes(session, 64))
    """
    return _session_outcome(context, program, "refused")


@case("session: an exception inside the search")
def _session_error_in_search(context: Context) -> str:
    program = """
        session = SelfPlaySession(8, FEW, seed=0, parallel=4)
        def broken(slots, actions):
            raise MemoryError("the trees")
        session._step = broken
        try:
            session.run(uniform)
        except MemoryError:
            pass
        try:
            print(f"lost: done is {session.done}, {session.finished} of 8 games")
        except quarto_env.CallOrderError as error:
            print("refused" if "MemoryError" in str(error) else error)
    """
    return _session_outcome(context, program, "refused")


@case("session: Ctrl-C at five moments of a run")
def _session_interrupt_timed(context: Context) -> str:
    # Real SIGINTs from a timer, wherever they land (the evaluator, the search, the session's own code): each run
    # must then go on to its end, or refuse to go on.
    program = """
        SelfPlaySession(2, FEW, seed=0).run(uniform)  # the kernels compiled first
        outcomes = []
        for delay in (0.02, 0.05, 0.1, 0.15, 0.25):
            session = SelfPlaySession(400, PUCTOptions(simulations=16), seed=0, parallel=40)
            timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            try:
                session.run(uniform)
                timer.join()  # on a fast machine the run may end first: the interrupt then lands here
            except KeyboardInterrupt:
                timer.join()
            try:
                outcomes.append("resumed" if finishes(session, 400) else f"lost {session.finished}")
            except quarto_env.CallOrderError:
                outcomes.append("refused")
        print(*sorted(set(outcomes)))
    """
    # Where the interrupts land depends on the machine's speed and load: both outcomes, or either alone, is right.
    return _session_outcome(context, program, "refused resumed", "refused", "resumed")


@case("session: Ctrl-C in the evaluator, then run again")
def _session_interrupt_in_evaluator(context: Context) -> str:
    program = """
        def interrupted(batch):
            if batch.index == 3:
                signal.raise_signal(signal.SIGINT)
            return uniform(batch)
        session = SelfPlaySession(4, FEW, seed=0)
        try:
            session.run(interrupted)
        except KeyboardInterrupt:
            pass
        print(session.pending().index, finishes(session, 4))
    """
    return _session_outcome(context, program, "3 True")


SESSION_ARGUMENTS: list[tuple[str, str, str]] = [
    # (name, statement, fragment)
    ("model_version='v2'", "started().model_version = 'v2'", "model_version must be an integer"),
    ("model_version=-1", "started().model_version = -1", "model_version must be an integer >= 0"),
    ("model_version=1.5", "started().model_version = 1.5", "model_version"),
    ("variant='squares'", "SelfPlaySession(2, FEW, variant='squares')", "a mapping of its flags"),
    ("variant={'squarez': True}", "SelfPlaySession(2, FEW, variant={'squarez': True})", "its flags: attributes"),
    ("variant={'squares': 'yes'}", "SelfPlaySession(2, FEW, variant={'squares': 'yes'})", "not a valid rule variant"),
    ("arena variant=7", "ArenaSession(1, FEW, variant=7)", "variant must be a Variant"),
    ("SelfPlaySession(10**12)", "SelfPlaySession(10**12)", "num_games"),
    ("parallel=10**12", "SelfPlaySession(None, FEW, parallel=10**12)", "parallel must be an integer >= 1 and <="),
    ("simulations=10**9", "SelfPlaySession(4, PUCTOptions(simulations=10**9))", "fewer simulations"),
    ("ArenaSession(10**12)", "ArenaSession(10**12, FEW)", "num_pairs must be an integer >= 1 and <="),
    ("num_games=None without parallel", "SelfPlaySession(None, FEW)", "needs parallel"),
    ("options as a dict", "SelfPlaySession(2, {'simulations': 8})", "PUCTOptions"),
    ("seed='abc'", "SelfPlaySession(2, FEW, seed='abc')", "seed must be an integer >= 0, a numpy Generator"),
    ("seed=-1", "SelfPlaySession(2, FEW, seed=-1)", "seed must be an integer >= 0"),
    ("names='ab'", "ArenaSession(1, FEW, names='ab')", "names must be a pair of strings"),
    ("records='no'", "SelfPlaySession(2, FEW, records='no')", "records must be True or False"),
    ("run with a non-callable", "SelfPlaySession(2, FEW).run('my_network')", "evaluator 0 must be callable"),
    ("a match with one evaluator", "ArenaSession(1, FEW).run(uniform)", "takes 2 evaluator"),
    (
        "PUCTSession with float roots",
        "PUCTSession(PUCTSearch(STANDARD, observation_kind('raw'), None, 1, 8), np.zeros((1, 8)), 8)",
        "roots must be integer rows",
    ),
    (
        "PUCTSession with more roots than its trees",
        "PUCTSession(PUCTSearch(STANDARD, observation_kind('raw'), None, 1, 8), "
        "position_array([INITIAL_STATE] * 3), 8).run(uniform)",
        "the number of roots must be an integer >= 1 and <= 1, got 3",
    ),
    (
        "PUCTSession with an unknown option",
        "PUCTSession(PUCTSearch(STANDARD, observation_kind('raw'), None, 1, 8), "
        "position_array([INITIAL_STATE]), 8, temperature=1)",
        "temperature",
    ),
]
for _name, _statement, _fragment in SESSION_ARGUMENTS:
    case(f"session: {_name}")(lambda context, s=_statement, f=_fragment: _session_refusal(context, s, f))


@case("session: variant={'squares': True} plays the squares rules")
def _session_variant_mapping(context: Context) -> str:
    program = """
        session = SelfPlaySession(1, FEW, seed=0, variant={"squares": True}).run(uniform)
        arena = ArenaSession(1, FEW, seed=0, variant={"attributes": 3})
        print(session.samples().variant.describe(), arena.variant.describe())
    """
    return _session_outcome(context, program, "squares attributes=height+colour+shape")


# === issue 50: sample datasets and damaged files ===
# ---- samples: one writer a folder, the whole header, files refused unread, damaged .npz in one line -------------
MAKE_SAMPLES = textwrap.dedent("""
    import sys
    import numpy as np
    from agents.tree.puct import encode_positions
    from agents.tree.sample_files import SampleWriter
    from agents.tree.sessions import Samples
    from quarto_env.core import INITIAL_STATE, Variant, legal_actions, position_array, step
    from quarto_env.observation import observation_kind
    folder, kind, variant = sys.argv[1], observation_kind(sys.argv[2]), Variant.make(squares=sys.argv[3] == "squares")
    rng, states = np.random.default_rng(0), []
    for _ in range(2):
        state = INITIAL_STATE
        while not state.over:
            states.append(state)
            state = step(variant, state, int(rng.choice(legal_actions(variant, state))))
    positions = position_array(states)
    searched = encode_positions(positions, kind, variant)[1].any(1)
    positions = positions[searched]
    legal = encode_positions(positions, kind, variant)[1]
    n, zeros = len(positions), np.zeros(len(positions), np.float32)
    policy = (legal / legal.sum(1, keepdims=True)).astype(np.float32)
    ints = np.zeros(n, np.int64)
    samples = Samples(positions, policy, zeros, zeros, ints, np.arange(n, dtype=np.int64), ints, kind, variant)
    with SampleWriter(folder, kind, variant, shard_rows=16) as writer:
        writer.write(samples)
""")
"""A dataset of self-play samples in ``argv[1]``, observation ``argv[2]``, rules ``argv[3]`` (``standard`` or
``squares``): the searched positions of two seeded random games, a uniform policy, shards of 16 rows."""
SAMPLES_MANIFEST_KIND, SHARD_KIND = "self-play samples", "self-play samples shard"


def _samples(context: Context, name: str = "data", kind: str = "tactical", rules: str = "standard") -> Path:
    result = context.python("-c", MAKE_SAMPLES, name, kind, rules)
    if result.returncode != 0:
        raise RuntimeError(f"the samples could not be made:\n{result.stderr[-2000:]}")
    return context.folder / name


def _seal(payload: bytes, kind: str, **meta: object) -> dict[str, object]:
    """agents.storage.integrity's seal of ``payload``, made here: what a hand that edits a file can make too."""
    return {"kind": kind, "format": 1, "bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest(), **meta}


def _reseal(folder: Path, edit: Callable[[dict], None]) -> None:
    """The manifest of ``folder`` edited by ``edit`` (its body) under a fresh seal: an edit no checksum sees."""
    body = json.loads((folder / "manifest.json").read_text())
    body.pop("seal")
    edit(body)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    (folder / "manifest.json").write_text(json.dumps({**body, "seal": _seal(canonical, SAMPLES_MANIFEST_KIND)}))


def _new_shard(folder: Path, payload: bytes, index: int = 0) -> None:
    """Shard ``index`` replaced by ``payload``, its seal made afresh: only reading the .npz can tell."""

    def edit(body: dict) -> None:
        seal = body["shards"][index]
        (folder / seal["name"]).write_bytes(payload)
        body["shards"][index] = _seal(payload, SHARD_KIND, name=seal["name"], rows=seal["rows"])

    _reseal(folder, edit)


def _check_refused(result: Result, *fragments: str) -> str:
    """The verdict on ``quarto dataset --check`` of a bad dataset: status 1, one line naming the problem, no
    numpy advice."""
    if broken := crashed(result):
        return broken
    if result.returncode == 0:
        return "silent accept"
    text = result.stderr.lower()
    if result.returncode != 1 or len(result.lines) != 1 or "allow_pickle" in text:
        return "wrong answer"
    return "ok" if all(f.lower() in text for f in fragments) else "wrong answer"


def _check(context: Context, path: str, timeout: float = 120) -> Result:
    """``quarto dataset --check PATH``; its timeout long enough for numba to compile what a change left uncached on
    a loaded machine (a pipe that hangs the reader hangs it for ever)."""
    return context.quarto("dataset", "--check", path, timeout=timeout)


def _limited(context: Context, argv: list[str], memory: int, timeout: float = 120) -> Result:
    """A ``quarto`` process whose address space is bounded (RLIMIT_AS): a reader that reads without end, or a
    command that builds an alias bomb, fails fast instead of taking the machine's memory."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return finish(context.start(sys.executable, "-m", "experiments.cli", *argv, before_exec=limit), timeout)


SAMPLES_LIBRARY = (
    "from agents.tree.sample_files import SampleDataset, SampleWriter; from quarto_env.core import STANDARD"
)


@case("samples: two SampleWriters on one folder in one process")
def _samples_two_writers_one_process(context: Context) -> str:
    statement = (
        f"{SAMPLES_LIBRARY}; first = SampleWriter('data', 'tactical', STANDARD); "
        "second = SampleWriter('data', 'tactical', STANDARD)"
    )
    return _library(context, statement, "in use by another writer in this process")


@case("samples: a second SampleWriter in another process")
def _samples_two_writers_two_processes(context: Context) -> str:
    holder = context.start(
        sys.executable,
        "-c",
        f"{SAMPLES_LIBRARY}; import time; w = SampleWriter('data', 'tactical', STANDARD); print('held', flush=True); "
        "time.sleep(60)",
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "held":
            return "harness error: the first writer did not start"
        verdict = _library(context, f"{SAMPLES_LIBRARY}; SampleWriter('data', 'tactical', STANDARD)", "in use by")
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        finish(holder, 10)
    return verdict if verdict != "ok" or not (context.folder / "data" / "manifest.json").exists() else "lost or mixed"


def _samples_other_observation(context: Context, dataset: str, writer: str) -> str:
    """A writer for the ``writer`` observation appends to a ``dataset`` one: refused, the dataset unchanged."""
    folder = _samples(context, kind=dataset)
    before = snapshot(folder)
    verdict = _library(context, f"{SAMPLES_LIBRARY}; SampleWriter('data', {writer!r}, STANDARD).close()", "observation")
    return unchanged(before, folder, verdict)


for _dataset, _writer in (("tempo", "raw"), ("raw", "tempo")):
    case(f"samples: a {_writer} writer appends to a {_dataset} dataset")(
        lambda context, d=_dataset, w=_writer: _samples_other_observation(context, d, w)
    )


@case("samples: the example's --dataset onto a tempo dataset")
def _samples_example_into_tempo(context: Context) -> str:
    folder = _samples(context, kind="tempo")
    before = snapshot(folder)
    example = str(context.repo / "docs" / "examples" / "external_inference.py")
    result = context.python(example, "--games", "1", "--pairs", "1", "--sims", "2", "--dataset", "data", timeout=300)
    if broken := crashed(result):
        return broken
    if result.returncode == 0:
        return "silent accept"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    verdict = "ok" if len(lines) == 1 and "observation" in lines[0] else "wrong answer"
    return unchanged(before, folder, verdict)


@case("samples: a writer after a killed writer removes its temporary file")
def _samples_killed_writers_temporary(context: Context) -> str:
    folder = _samples(context)
    orphan = folder / ".shard-00005.npz.abcd1234.tmp.npz"
    orphan.write_bytes(b"half a shard")
    _samples(context)  # appends
    return "lost or mixed" if orphan.exists() else "ok"


@case("samples: SampleWriter(shard_rows=10**12)")
def _samples_huge_shards(context: Context) -> str:
    return _library(context, f"{SAMPLES_LIBRARY}; SampleWriter('d', 'raw', STANDARD, shard_rows=10**12)", "shard_rows")


@case("samples: write after close")
def _samples_write_after_close(context: Context) -> str:
    _samples(context)
    statement = (
        f"{SAMPLES_LIBRARY}; w = SampleWriter('data', 'tactical', STANDARD); w.close(); "
        "w.write(SampleDataset('data').read_shard(0))"
    )
    return _library(context, statement, "closed")


@case("samples: SampleDataset('') and SampleWriter('')")
def _samples_empty_folder(context: Context) -> str:
    verdicts = [
        _library(context, f"{SAMPLES_LIBRARY}; SampleDataset('')", "empty path"),
        _library(context, f"{SAMPLES_LIBRARY}; SampleWriter('', 'raw', STANDARD)", "empty path"),
    ]
    verdict = next((v for v in verdicts if v != "ok"), "ok")
    return "lost or mixed" if verdict == "ok" and list(context.folder.iterdir()) else verdict


def _fifo_in(context: Context, name: str, folder: Path) -> None:
    (folder / name).unlink()
    os.mkfifo(folder / name)


@case("samples: dataset --check a folder whose manifest is a named pipe")
def _samples_fifo_manifest(context: Context) -> str:
    _fifo_in(context, "manifest.json", _samples(context))
    return _check_refused(_check(context, "data"), "not a regular file")


@case("samples: dataset --check a folder whose shard is a named pipe")
def _samples_fifo_shard(context: Context) -> str:
    _fifo_in(context, "shard-00001.npz", _samples(context))
    return _check_refused(_check(context, "data"), "shard 1", "not a regular file")


@case("samples: dataset --check a shard linked to /dev/zero")
def _samples_dev_zero(context: Context) -> str:
    folder = _samples(context)
    (folder / "shard-00000.npz").unlink()
    (folder / "shard-00000.npz").symlink_to("/dev/zero")
    return _check_refused(_limited(context, ["dataset", "--check", "data"], 4 << 30), "link out of the folder")


@case("samples: dataset --check a shard linked out of the folder")
def _samples_link_out(context: Context) -> str:
    folder = _samples(context)
    (folder / "shard-00000.npz").rename(context.folder / "elsewhere.npz")  # the same bytes: its seal passes
    (folder / "shard-00000.npz").symlink_to(context.folder / "elsewhere.npz")
    return _check_refused(_check(context, "data"), "link out of the folder")


@case("samples: dataset --check a shard grown to a sparse 1 GiB")
def _samples_sparse_shard(context: Context) -> str:
    folder = _samples(context)
    with open(folder / "shard-00001.npz", "ab") as handle:
        handle.truncate(1 << 30)
    return _check_refused(_limited(context, ["dataset", "--check", "data"], 4 << 30), "refused unread")


def _resealed_case(edit: Callable[[dict], None], *fragments: str) -> Callable[[Context], str]:
    def run(context: Context) -> str:
        _reseal(_samples(context), edit)
        return _check_refused(_check(context, "data"), *fragments)

    return run


for _name, _edit, _fragments in [
    ('"shards": "none"', lambda body: body.update(shards="none"), ["shards", "none"]),
    ("shards that are a mapping", lambda body: body.update(shards=dict(enumerate(body["shards"]))), ["shards"]),
    ("a shard of 2**40 bytes", lambda body: body["shards"][0].update(bytes=1 << 40), ["shard 0", "bytes"]),
    ("rows that are not its shards'", lambda body: body.update(rows=10**9), ["rows"]),
    ("no fields", lambda body: body.update(fields={}), ["fields"]),
]:
    case(f"samples: dataset --check a re-sealed manifest with {_name}")(_resealed_case(_edit, *_fragments))


@case("samples: dataset --check a re-sealed manifest naming a shard out of the folder")
def _samples_name_out(context: Context) -> str:
    folder = _samples(context)
    shutil.copy(folder / "shard-00000.npz", context.folder / "elsewhere.npz")  # the same bytes: its seal passes
    _reseal(folder, lambda body: body["shards"][0].update(name="../elsewhere.npz"))
    return _check_refused(_check(context, "data"), "shard 0", "shard-00000.npz")


@case("samples: dataset --check a shard of Python objects under a fresh seal")
def _samples_object_shard(context: Context) -> str:
    folder = _samples(context)
    program = (
        "import io, sys, numpy as np; d = dict(np.load(sys.argv[1])); d['value'] = np.array([object()] * "
        "len(d['value']), dtype=object); b = io.BytesIO(); np.savez(b, **d); sys.stdout.buffer.write(b.getvalue())"
    )
    made = subprocess.run(
        [sys.executable, "-c", program, str(folder / "shard-00000.npz")], capture_output=True, check=True
    )
    _new_shard(folder, made.stdout)
    return _check_refused(_check(context, "data"), "objects")


def _central_directory_case(offset: int) -> Callable[[Context], str]:
    def run(context: Context) -> str:
        folder = _samples(context)
        payload = bytearray((folder / "shard-00000.npz").read_bytes())
        payload[payload.rfind(b"PK\x01\x02") + offset] ^= 0x7F
        _new_shard(folder, bytes(payload))
        return _check_refused(_check(context, "data"), "shard 0", "damaged")

    return run


for _offset, _field in [(6, "version needed"), (8, "flags"), (10, "compression method")]:
    case(f"samples: dataset --check a shard whose central directory's {_field} changed")(
        _central_directory_case(_offset)
    )


SHARD_SWEEP = textwrap.dedent("""
    import hashlib, json, sys, traceback
    from pathlib import Path
    from agents.tree.sample_files import SampleDataset
    from quarto_env.errors import DatasetError
    folder = Path(sys.argv[1])
    manifest = json.loads((folder / "manifest.json").read_text())
    original, shard = (folder / "shard-00000.npz").read_bytes(), manifest["shards"][0]
    tracebacks, unclear = 0, 0
    for offset in range(len(original)):
        payload = bytearray(original)
        payload[offset] ^= 0xFF
        (folder / "shard-00000.npz").write_bytes(payload)
        body = {k: v for k, v in manifest.items() if k != "seal"}
        body["shards"][0] = {**shard, "bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        seal = {"kind": "self-play samples", "format": 1, "bytes": len(canonical),
                "sha256": hashlib.sha256(canonical).hexdigest()}
        (folder / "manifest.json").write_text(json.dumps({**body, "seal": seal}))
        try:
            SampleDataset(folder).validate()
        except DatasetError as error:
            unclear += "\\n" in str(error) or "allow_pickle" in str(error)
        except Exception:
            tracebacks += 1
    print(len(original), tracebacks, unclear)
""")


def _sweep_verdict(result: Result) -> str:
    if result.returncode is None:
        return "hang"
    try:
        _, tracebacks, unclear = map(int, result.stdout.split())
    except ValueError:
        return "traceback"
    return "traceback" if tracebacks else "wrong answer" if unclear else "ok"


@case("samples: a byte-flip sweep of a shard under fresh seals")
def _samples_shard_sweep(context: Context) -> str:
    return _sweep_verdict(context.python("-c", SHARD_SWEEP, str(_samples(context)), timeout=600))


DATASET_SWEEP = textwrap.dedent("""
    import sys
    from pathlib import Path
    from agents.suites import load_suite
    from experiments.training import dataset
    from quarto_env.core import STANDARD
    from quarto_env.errors import DatasetError
    solved = [p for p in load_suite("standard-v1").positions if p.empty <= 5][:6]
    path, flipped = Path("d.npz"), Path("flipped.npz")
    dataset.save_dataset(path, dataset.dataset_arrays(STANDARD, solved, "raw"), {"observation": "raw", "actions": 16})
    original = path.read_bytes()
    tracebacks, unclear = 0, 0
    for offset in range(len(original)):
        payload = bytearray(original)
        payload[offset] ^= 0xFF
        flipped.write_bytes(payload)
        try:
            dataset.check_dataset(flipped)
        except DatasetError as error:
            unclear += "\\n" in str(error) or "allow_pickle" in str(error)
        except Exception:
            tracebacks += 1
    print(len(original), tracebacks, unclear)
""")


@case("samples: a byte-flip sweep of a quarto dataset file")
def _samples_dataset_sweep(context: Context) -> str:
    return _sweep_verdict(context.python("-c", DATASET_SWEEP, timeout=600))


def _dataset_file(context: Context) -> Path:
    argv = ["dataset", "--min-empty", "4", "--max-empty", "4", "--observation", "raw", "--out", "d.npz"]
    if context.quarto(*argv, "--no-progress").returncode != 0:
        raise RuntimeError("the dataset file could not be made")
    return context.folder / "d.npz"


@case("samples: dataset --check a dataset file whose compression method changed")
def _samples_dataset_file_method(context: Context) -> str:
    path = _dataset_file(context)
    payload = bytearray(path.read_bytes())
    payload[payload.rfind(b"PK\x01\x02") + 10] ^= 0x7F
    path.write_bytes(payload)
    return _check_refused(_check(context, "d.npz"), "damaged")


@case("samples: dataset --check a text file named .npz")
def _samples_text_npz(context: Context) -> str:
    (context.folder / "d.npz").write_text("not a dataset\n")
    return _check_refused(_check(context, "d.npz"), "damaged")


@case("samples: dataset --check a dataset file re-hashed with a flat action_mask")
def _samples_rehashed_shapes(context: Context) -> str:
    _dataset_file(context)
    program = textwrap.dedent("""
        from experiments.training import dataset
        arrays, header = dataset.load_dataset("d.npz")
        arrays["action_mask"] = arrays["action_mask"].reshape(-1)
        kept = {k: v for k, v in header.items() if k not in ("format", "count", "sha256")}
        dataset.save_dataset("d.npz", arrays, kept)
    """)
    if context.python("-c", program).returncode != 0:
        return "harness error: the file could not be re-hashed"
    return _check_refused(_check(context, "d.npz"), "action_mask")


@case("samples: dataset --check ''")
def _samples_check_empty(context: Context) -> str:
    return refused_in_one_line(_check(context, ""), "empty path")


# === issue 50: signals, leftovers and bounds ===
# ---- output: empty paths, a killed writer's leftovers, --overwrite onto a link, a file-size limit ------------------
for _name, _argv in [
    ("grade --out ''", ["grade", "random", "--positions", "2", "--max-empty", "4", "--out", ""]),
    ("tournament --out ''", ["tournament", "random", "greedy", "--games", "2", "--out", ""]),
    ("train --out ''", ["train", *TINY_TRAINING, "--out", ""]),
    ("train --config ''", ["train", "--config", "", "--out", "t"]),
    ("tournament --resume ''", ["tournament", "--resume", ""]),
    ("dataset --out ''", ["dataset", "--min-empty", "4", "--max-empty", "4", "--out", ""]),
    ("replay --html ''", ["replay", "games.jsonl", "--html", ""]),
    ("plot ''", ["plot", "", "--out", "p.png"]),
    ("book --out ''", ["book", "--out", ""]),
]:
    case(f"output: {_name} is refused as empty")(lambda context, argv=_argv: _empty_path(context, argv))


def _empty_path(context: Context, argv: list[str]) -> str:
    """``argv`` names an empty path: refused in one line as empty, and nothing written into the current folder
    (which ``Path("")`` is)."""
    games = _games_file(context)
    verdict = refused_in_one_line(context.quarto(*argv, timeout=120), "empty path")
    if verdict in ("traceback", "hang", "silent accept"):
        return verdict
    return "lost or mixed" if [p.name for p in context.folder.iterdir()] != [games.name] else verdict


@case("output: dataset --suite '' is no suite")
def _output_empty_suite(context: Context) -> str:
    result = context.quarto("dataset", "--suite", "", "--out", "d.npz", "--no-progress")
    verdict = refused_in_one_line(result, "suite ''")
    return verdict if verdict != "ok" or not (context.folder / "d.npz").exists() else "lost or mixed"


@case("output: a grade killed by kill -9 while staged, then the same grade")
def _output_killed_staging(context: Context) -> str:
    argv = ["grade", "random", "--positions", "400", "--max-empty", "9", "--out", "g", "--no-progress"]
    process = context.start_quarto(*argv)
    deadline = time.time() + 120
    while time.time() < deadline and not list(context.folder.glob(".g.*.staging")):
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)
    finish(process, 10)
    if not list(context.folder.glob(".g.*.staging")):
        return "harness error: no staging folder to leave"
    argv[3] = "20"
    verdict = succeeded(context.quarto(*argv, timeout=300))
    left = [p.name for p in context.folder.iterdir() if p.name.startswith(".")]
    return verdict if verdict != "ok" or not left else "lost or mixed"


@case("output: a dataset after a killed one's temporary file")
def _output_killed_temporary(context: Context) -> str:
    orphan = context.folder / ".d.npz.abcd1234.tmp.npz"  # what kill -9 mid-write leaves
    orphan.write_bytes(b"half a dataset")
    result = context.quarto("dataset", "--min-empty", "4", "--max-empty", "4", "--out", "d.npz", "--no-progress")
    verdict = succeeded(result)
    return verdict if verdict != "ok" or not orphan.exists() else "lost or mixed"


@case("output: a grade after one killed between its two renames")
def _output_killed_aside(context: Context) -> str:
    aside = context.folder / ".g.0a1b2c3d.replaced"  # the earlier result moved aside; g not yet replaced
    aside.mkdir()
    (aside / "grade.md").write_text("the earlier grade")
    result = context.quarto("grade", "random", "--positions", "2", "--max-empty", "4", "--out", "g", "--no-progress")
    if broken := crashed(result):
        return broken
    restored = (context.folder / "g" / "grade.md").exists() and (context.folder / "g" / "grade.md").read_text()
    if restored != "the earlier grade" or aside.exists():
        return "lost or mixed"
    return refused_in_one_line(result, "--overwrite")


def _linked_output(context: Context, target: str) -> str:
    real, out = context.folder / "real", context.folder / "g"
    if target == "result":
        real.mkdir()
        (real / "grade.md").write_text("kept")
    elif target == "empty":
        real.mkdir()
    out.symlink_to(real)
    before = snapshot(real)
    argv = ["grade", "random", "--positions", "2", "--max-empty", "4", "--out", "g", "--overwrite", "--no-progress"]
    verdict = succeeded(context.quarto(*argv))
    if verdict != "ok":
        return verdict
    left = [p.name for p in context.folder.iterdir() if p.name.startswith(".")]
    whole = out.is_dir() and not out.is_symlink() and (out / "grade.md").exists()
    return "ok" if whole and not left and snapshot(real) == before else "lost or mixed"


for _target, _words in [
    ("result", "a link to a result"),
    ("empty", "a link to an empty folder"),
    ("nothing", "a dangling link"),
]:
    case(f"output: grade --overwrite onto {_words}")(lambda context, target=_target: _linked_output(context, target))


def _under_file_size_limit(context: Context, argv: list[str], limit: int, timeout: float = 300) -> Result:
    """A ``quarto`` process whose files may not grow past ``limit`` bytes (RLIMIT_FSIZE), ``SIGXFSZ`` ignored: a
    write past it fails with EFBIG, as on a file system with a file-size limit."""
    import resource

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    environment = dict(context.environment, PYTHONDONTWRITEBYTECODE="1", QUARTO_CACHE_DIR="off")
    command = [sys.executable, "-m", "experiments.cli", *argv]
    return finish(context.start(*command, environment=environment, before_exec=limited), timeout)


def _file_size_limit(context: Context, argv: list[str], out: str, limit: int = 300) -> str:
    _games_file(context)
    # Once without the limit, elsewhere: numba's cache is then warm. (Its own save of a function compiled afresh
    # fails under the limit inside numba, a case of its own that this one does not test.)
    warm = Path(tempfile.mkdtemp(dir=context.folder.parent))
    shutil.copy(context.folder / "games.jsonl", warm)
    command = [sys.executable, "-m", "experiments.cli", *argv]
    subprocess.run(command, cwd=warm, env=context.environment, capture_output=True, timeout=300, check=False)
    shutil.rmtree(warm, ignore_errors=True)
    result = _under_file_size_limit(context, argv, limit)
    if broken := crashed(result):
        return broken
    if result.returncode == 0:
        return "silent accept"
    if result.returncode != 1 or len(result.lines) != 1 or "file too large" not in result.stderr.lower():
        return "wrong answer"
    return "lost or mixed" if temporaries(context.folder / out) else "ok"


for _name, _argv, _out in [
    ("dataset", ["dataset", "--min-empty", "4", "--max-empty", "4", "--no-progress", "--out", "d.npz"], "d.npz"),
    ("grade", ["grade", "random", "--positions", "2", "--max-empty", "4", "--no-progress", "--out", "g"], "g"),
    ("tournament", ["tournament", "random", "greedy", "--games", "4", "--no-progress", "--out", "t"], "t"),
    ("replay --html", ["replay", "games.jsonl", "--html", "h.html"], "h.html"),
    ("train", ["train", *TINY_TRAINING, "--no-progress", "--out", "run"], "run"),
]:
    case(f"output: {_name} under a file-size limit (EFBIG)")(
        lambda context, argv=_argv, out=_out: _file_size_limit(context, argv, out, 20_000 if "train" in argv else 300)
    )


# ---- checkpoints, signals and bounds: zip damage anywhere, SIGTERM as Ctrl-C, spec and YAML bounds -----------
ZIP_VERSION_NEEDED, ZIP_FLAGS, ZIP_COMPRESSION = 6, 8, 10
"""Offsets of three 2-byte fields in a zip's central-directory record, where no checksum looks."""


def _zip_field(path: Path, field: int, value: int, record: int = 0) -> None:
    """Set a 2-byte ``field`` of the archive's own central-directory record number ``record`` (torch's entries are
    zips too: their directories are left alone)."""
    import struct
    import zipfile

    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        offset = archive.start_dir
    for _ in range(record):
        names, extra, comment = struct.unpack_from("<HHH", data, offset + 28)
        offset += 46 + names + extra + comment
    struct.pack_into("<H", data, offset + field, value)
    path.write_bytes(bytes(data))


ZIP_DAMAGE: dict[str, Callable[[Path], None]] = {
    "its version needed to extract changed": lambda path: _zip_field(path, ZIP_VERSION_NEEDED, 99),
    "its compression method changed": lambda path: _zip_field(path, ZIP_COMPRESSION, 99),
    "its encryption flag set": lambda path: _zip_field(path, ZIP_FLAGS, 1),
    "LZMA named for an entry stored plain": lambda path: _zip_field(path, ZIP_COMPRESSION, 14, record=1),
}
"""One or two bytes of a checkpoint's central directory that zipfile reports otherwise than as ``BadZipFile``."""


def _resume_damaged(context: Context, damage: Callable[[Path], None], everywhere: bool = False) -> str:
    """A run killed after its checkpoint at step 512 (latest.zip there too), its latest.zip (``everywhere``: every
    checkpoint) damaged: the resume goes on from the intact step_*.zip and names it, or, none left, refuses in one
    line."""
    run = context.tiny_run()
    checkpoints = run / "checkpoints"
    for left in ("step_000001024.zip", "final.zip", "best.zip"):
        (checkpoints / left).unlink()
    (run / "final_eval.json").unlink()
    for checkpoint in checkpoints.glob("*.zip") if everywhere else [checkpoints / "latest.zip"]:
        damage(checkpoint)
    result = context.quarto("train", "--resume", str(run), "total_steps=1536", "--no-progress", timeout=600)
    if everywhere:
        return refused_in_one_line(result, "latest.zip", "no intact checkpoint")
    verdict = succeeded(result)
    return (
        verdict if verdict != "ok" or "from step_000000512.zip, the newest intact" in result.stderr else "wrong answer"
    )


for _words, _damage in ZIP_DAMAGE.items():
    case(f"checkpoint: train --resume, latest.zip with {_words}")(
        lambda context, damage=_damage: _resume_damaged(context, damage)
    )
case("checkpoint: train --resume, every checkpoint with its version needed changed")(
    lambda context: _resume_damaged(context, ZIP_DAMAGE["its version needed to extract changed"], everywhere=True)
)


def _load_damaged(context: Context, argv: list[str], damage: str) -> str:
    """``quarto ARGV`` with ``CKPT`` a copy of the tiny run's final.zip whose central directory has ``damage``:
    refused in one line that names the file, and nothing written."""
    checkpoint = context.folder / "final.zip"
    shutil.copy(context.tiny_run("source") / "checkpoints" / "final.zip", checkpoint)
    shutil.rmtree(context.folder / "source")
    ZIP_DAMAGE[damage](checkpoint)
    argv = [word.replace("CKPT", str(checkpoint)) for word in argv]
    verdict = refused_in_one_line(context.quarto(*argv, timeout=300), str(checkpoint), "corrupt")
    written = [path.name for path in context.folder.iterdir() if path.name != "final.zip"]
    return "lost or mixed" if verdict == "ok" and written else verdict


for _name, _argv, _damage in [
    ("evaluate FILE", ["evaluate", "CKPT", "--games", "2"], "its version needed to extract changed"),
    ("evaluate FILE", ["evaluate", "CKPT", "--games", "2"], "its compression method changed"),
    (
        "tournament ppo:FILE",
        ["tournament", "ppo:CKPT", "random", "--games", "2", "--out", "t"],
        "its version needed to extract changed",
    ),
    (
        "tournament --jobs 2 ppo:FILE",
        ["tournament", "random", "ppo:CKPT", "--games", "4", "--jobs", "2", "--out", "t"],
        "its compression method changed",
    ),
    ("grade ppo:FILE", ["grade", "ppo:CKPT", "--out", "g"], "its version needed to extract changed"),
    ("play --opponent ppo:FILE", ["play", "--opponent", "ppo:CKPT"], "its version needed to extract changed"),
    ("grade az:FILE", ["grade", "az:CKPT", "--out", "g"], "its version needed to extract changed"),
    ("grade rllib:FILE", ["grade", "rllib:CKPT", "--out", "g"], "its encryption flag set"),
    ("evaluate FILE", ["evaluate", "CKPT", "--games", "2"], "LZMA named for an entry stored plain"),
    ("tournament ppo:FILE", ["tournament", "ppo:CKPT", "greedy", "--out", "t"], "its encryption flag set"),
]:
    case(f"checkpoint: {_name}, {_damage}")(
        lambda context, argv=_argv, damage=_damage: _load_damaged(context, argv, damage)
    )


CHECKPOINT_SWEEP = textwrap.dedent("""
    import struct, sys, zipfile
    from pathlib import Path
    from agents.networks.checkpoints import (
        CheckpointError, CheckpointHeader, read_metadata, read_weights, write_checkpoint
    )
    from quarto_env.core import Variant
    mask, source = int(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None
    if source is None:  # a small valid checkpoint: its metadata, one entry of weights, its seal
        import torch
        source = Path("small.zip")
        header = CheckpointHeader(Variant.make(), "tempo", 0)
        write_checkpoint(source, "alphazero", header, {}, {"network.pth": {"weight": torch.arange(4.0)}})
        offsets = range(source.stat().st_size)
        def load(path):
            read_metadata(path)
            read_weights(path, "network.pth")
    else:  # a trained checkpoint: every byte of its local headers, central directory and its end
        from agents.ppo import load_policy as load
        data = source.read_bytes()
        with zipfile.ZipFile(source) as archive:
            infos, start = archive.infolist(), archive.start_dir
        offsets = set(range(start, len(data)))
        for info in infos:
            names, extra = struct.unpack_from("<HH", data, info.header_offset + 26)
            offsets.update(range(info.header_offset, info.header_offset + 30 + names + extra))
        offsets = sorted(offsets)
    data, target, crashes = source.read_bytes(), Path("flipped.zip"), []
    for offset in offsets:
        flipped = bytearray(data)
        flipped[offset] ^= mask
        target.write_bytes(bytes(flipped))
        try:
            load(target)
        except CheckpointError:
            pass
        except Exception as error:
            crashes.append(f"byte {offset}: {type(error).__name__}: {error}")
    print(f"{len(crashes)} of {len(offsets)} loads raised another error than CheckpointError", *crashes[:3], sep="\\n")
""")
"""Flip one byte at a time (xor the mask) of a checkpoint and load it: the count of loads that raised anything but a
``CheckpointError``, each a traceback in a command."""


def _checkpoint_sweep(context: Context, mask: int, trained: bool) -> str:
    argv = [str(context.tiny_run("source") / "checkpoints" / "final.zip")] if trained else []
    result = context.python("-c", CHECKPOINT_SWEEP, str(mask), *argv, timeout=900)
    if result.returncode is None:
        return "hang"
    if result.returncode != 0 or "loads raised" not in result.stdout:
        return "harness error: " + result.stderr[-300:]
    return "ok" if result.stdout.startswith("0 of ") else "traceback"


case("checkpoint: byte-flip sweep of a small checkpoint, every byte inverted")(
    lambda context: _checkpoint_sweep(context, 0xFF, trained=False)
)
case("checkpoint: byte-flip sweep of a small checkpoint, every byte's lowest bit")(
    lambda context: _checkpoint_sweep(context, 0x01, trained=False)
)
case("checkpoint: byte-flip sweep of a trained checkpoint's zip headers, load_policy")(
    lambda context: _checkpoint_sweep(context, 0xFF, trained=True)
)


GRADE_SLOW_SECOND = ["grade", "random", "--positions", "2", "--max-empty", "16", "--seed", "22", "--declaration"]
"""A grade whose first sampled position solves at once and whose second takes minutes (seed 22 under the
declaration rules, which no opening book covers: tests/test_interrupts.py's ``slow_second_position``)."""


def _signalled(
    context: Context,
    argv: list[str],
    marker: str | Callable[[], bool],
    sent: int,
    group: bool = False,
    wait: float = 3.0,
) -> Result:
    """``quarto ARGV``, sent ``sent`` (with ``group``, to its whole process group, as a service manager does)
    ``wait`` seconds after ``marker`` shows on its stdout or stderr (or, a function, once it answers true); its
    result (status ``None``: it did not end within a minute of the signal, or the marker never came)."""
    import threading

    environment = dict(context.environment, PYTHONUNBUFFERED="1", QUARTO_CACHE_DIR=str(context.folder / ".values"))
    process = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", *argv],
        cwd=context.folder,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_with_sigint_as_in_a_terminal(None),
    )
    assert process.stdout is not None and process.stderr is not None
    texts = {"out": b"", "err": b""}

    def read(name: str, pipe: int) -> None:
        while chunk := os.read(pipe, 4096):
            texts[name] += chunk

    pipes = {"out": process.stdout.fileno(), "err": process.stderr.fileno()}
    readers = [threading.Thread(target=read, args=item, daemon=True) for item in pipes.items()]
    for reader in readers:
        reader.start()
    ready = marker if callable(marker) else lambda: marker.encode() in texts["out"] + texts["err"]
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None and not ready():
        time.sleep(0.1)
    time.sleep(wait)
    status: int | None = None
    if process.poll() is None and ready():
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile: its status tells
            if group:
                os.killpg(process.pid, sent)
            else:
                process.send_signal(sent)
        try:
            status = process.wait(60)
        except subprocess.TimeoutExpired:
            status = None
    if status is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for reader in readers:
        reader.join(10)
    return Result(status, texts["out"].decode(errors="replace"), texts["err"].decode(errors="replace"))


def _leftovers(folder: Path) -> list[str]:
    """The locks, staging folders and temporary files a writer left under ``folder``."""
    return [str(p) for p in folder.rglob("*") if p.name.endswith((".lock", ".staging")) or ".tmp" in p.name]


def _stopped(result: Result, folder: Path, *said: str) -> str:
    """The verdict on a command stopped by SIGTERM: status 143, its message, and no lock or staging folder left."""
    if result.returncode is None:
        return "hang"
    if TRACEBACK in result.stderr:
        return "traceback"
    if result.returncode < 0 or _leftovers(folder):
        return "lost or mixed"  # killed as it stood: what Ctrl-C saves is lost, a lock or staging folder left
    text = (result.stdout + result.stderr).lower()
    return "ok" if result.returncode == 143 and all(s.lower() in text for s in said) else "wrong answer"


def _grade_signalled(context: Context, group: bool, cache: bool) -> str:
    cached = ["--cache", "values.json"] if cache else []
    result = _signalled(context, [*GRADE_SLOW_SECOND, *cached, "--out", "g"], "1/2", signal.SIGTERM, group)
    kept = "values so far are kept in --cache" if cache else "--cache FILE would keep"
    verdict = _stopped(result, context.folder, "interrupted after valuing 1 of 2 positions", kept)
    if verdict != "ok" or not cache:
        return verdict
    try:
        positions = json.loads((context.folder / "values.json").read_text())["positions"]
    except (OSError, ValueError, KeyError, TypeError):
        return "lost or mixed"
    return "ok" if len(positions) == 1 else "lost or mixed"


case("signal: SIGTERM during grade --cache keeps the values solved (the issue's example)")(
    lambda context: _grade_signalled(context, group=False, cache=True)
)
case("signal: SIGTERM to grade --cache's process group")(
    lambda context: _grade_signalled(context, group=True, cache=True)
)
case("signal: SIGTERM during grade without --cache")(
    lambda context: _grade_signalled(context, group=False, cache=False)
)


def _tournament_signalled(context: Context, jobs: int, group: bool) -> str:
    # Games of a few seconds each, whatever the load: the signal comes after the first, long before the last.
    argv = ["tournament", "mcts:time=0.5", "random", "--games", "8", "--jobs", str(jobs), "--out", "t"]
    result = _signalled(context, [*argv, "--no-progress"], "games between", signal.SIGTERM, group, wait=8.0)
    verdict = _stopped(result, context.folder, "quarto tournament --resume")
    if verdict != "ok":
        return verdict
    played = (context.folder / "t" / "games.jsonl").read_text().count("\n")
    if played == 0:
        return "harness error: no game played before the signal"
    resumed = context.quarto("tournament", "--resume", "t", "--no-progress", timeout=600)
    verdict = succeeded(resumed, f"{played} of 8 games already played")
    return verdict if verdict != "ok" or (context.folder / "t" / "ratings.md").exists() else "lost or mixed"


case("signal: SIGTERM during a tournament keeps its games; --resume finishes it")(
    lambda context: _tournament_signalled(context, jobs=1, group=False)
)
case("signal: SIGTERM to a tournament's process group, --jobs 2")(
    lambda context: _tournament_signalled(context, jobs=2, group=True)
)


def _train_signalled(context: Context, group: bool) -> str:
    argv = ["train", "total_steps=100000000", "num_games=8", "n_steps=16", "batch_size=64", "eval_every=1000000000"]
    result = _signalled(
        context, [*argv, "early_evals=[]", "--out", "run", "--no-progress"], "TensorBoard", signal.SIGTERM, group
    )
    verdict = _stopped(result, context.folder, "quarto train --resume")
    latest = context.folder / "run" / "checkpoints" / "latest.zip"
    if verdict != "ok":
        return verdict
    if not latest.is_file():
        return "lost or mixed"  # Ctrl-C saves latest.zip
    import zipfile

    with zipfile.ZipFile(latest) as archive:
        steps = json.loads(archive.read("quarto.json"))["num_timesteps"]
    resumed = context.quarto(
        "train", "--resume", "run", f"total_steps={steps + 256}", "final_eval_games=2", "--no-progress", timeout=600
    )
    return succeeded(resumed, "final checkpoint")


case("signal: SIGTERM during train saves latest.zip; --resume goes on")(
    lambda context: _train_signalled(context, False)
)
case("signal: SIGTERM to train's process group")(lambda context: _train_signalled(context, True))


@case("signal: SIGTERM during play while the agent thinks")
def _play_signalled(context: Context) -> str:
    argv = ["play", "--opponent", "minimax:time=60", "--first", "agent", "--declaration"]
    result = _signalled(context, argv, "the agent gives first", signal.SIGTERM)
    return _stopped(result, context.folder, "game abandoned")


@case("signal: SIGTERM during evaluate")
def _evaluate_signalled(context: Context) -> str:
    checkpoint = context.tiny_run() / "checkpoints" / "final.zip"
    argv = ["evaluate", str(checkpoint), "--opponents", "minimax:time=5", "--games", "8"]
    started = time.time()
    result = _signalled(context, argv, lambda: time.time() > started + 20, signal.SIGTERM, wait=0.0)
    return _stopped(result, context.folder, "quarto evaluate: interrupted")


@case("signal: SIGTERM during solve --resume saves its table")
def _solve_signalled(context: Context) -> str:
    argv = ["solve", "--declaration", "--table-mb", "16", "--resume", "table.npz", "................ -"]
    result = _signalled(context, argv, "quarto solve:", signal.SIGTERM, wait=1.0)
    verdict = _stopped(result, context.folder, "interrupted after", "run the same command to resume")
    return verdict if verdict != "ok" or (context.folder / "table.npz").is_file() else "lost or mixed"


@case("signal: SIGTERM during dataset keeps its labelled shards")
def _dataset_signalled(context: Context) -> str:
    argv = ["dataset", "--sample", "600", "--min-empty", "6", "--max-empty", "10", "--out", "d.npz", "--no-progress"]
    parts = context.folder / "d.npz.parts"
    result = _signalled(context, argv, lambda: any(parts.glob("shard-*.npy")), signal.SIGTERM, wait=0.5)
    verdict = _stopped(result, context.folder, "finished shard(s) of labels are kept")
    return verdict if verdict != "ok" or any(parts.glob("shard-*.npy")) else "lost or mixed"


@case("signal: SIGTERM during book saves the boards solved")
def _book_signalled(context: Context) -> str:
    argv = ["book", "--out", "b.npz", "--checkpoint-every", "3600"]  # no save but the signal's
    result = _signalled(context, argv, "to solve", signal.SIGTERM, wait=5.0)
    verdict = _stopped(result, context.folder, "boards saved to b.npz.partial.npz")
    return verdict if verdict != "ok" or (context.folder / "b.npz.partial.npz").is_file() else "lost or mixed"


# ---- bounds ----
for _name, _argv, _fragment in [
    ("grade minimax:depth=1000000 (the issue's example)", ["grade", "minimax:depth=1000000", "--out", "g"], "<= 16"),
    (
        "tournament random minimax:depth=1000000",
        ["tournament", "random", "minimax:depth=1000000", "--out", "t"],
        "<= 16",
    ),
    ("play --opponent solver:depth=99999", ["play", "--opponent", "solver:depth=99999"], "<= 16"),
    (
        "tournament mcts:c=1e308 random",
        ["tournament", "mcts:c=1e308", "random", "--games", "2", "--out", "t"],
        "<= 100",
    ),
    (
        "train eval_opponents=[minimax:depth=1000000]",
        ["train", *TINY_TRAINING, "eval_opponents=[minimax:depth=1000000]", "--out", "t"],
        "<= 16",
    ),
]:
    case(f"bound: {_name}")(lambda context, argv=_argv, fragment=_fragment: _bound_refused(context, argv, fragment))


def _bound_refused(context: Context, argv: list[str], fragment: str) -> str:
    """Refused in one line naming the allowed range, within a minute (before any work), and nothing written."""
    verdict = refused_in_one_line(context.quarto(*argv, timeout=60), fragment)
    return "lost or mixed" if verdict == "ok" and list(context.folder.iterdir()) else verdict


@case("bound: train with a training opponent minimax:depth=1000000")
def _bound_training_opponent(context: Context) -> str:
    argv = ["train", *TINY_TRAINING, "ppo.opponents.minimax:depth=1000000=0.5", "--out", "t"]
    return _bound_refused(context, argv, "<= 16")


@case("bound: evaluate --opponents minimax:depth=33")
def _bound_evaluate(context: Context) -> str:
    checkpoint = context.tiny_run() / "checkpoints" / "final.zip"
    result = context.quarto("evaluate", str(checkpoint), "--opponents", "minimax:depth=33", "--games", "2", timeout=60)
    return refused_in_one_line(result, "<= 16")


case("bound: library MinimaxAgent(depth=10**6)")(
    lambda context: _library(context, "from agents.solver.minimax import MinimaxAgent; MinimaxAgent(depth=10**6)", "33")
)


def _alias_bomb(levels: int = 10, width: int = 9) -> str:
    """YAML of ``levels`` anchors, each ``width`` aliases of the one before: ``width ** levels`` values."""
    items = ["&a0 [" + ", ".join(["colour"] * width) + "]"]
    items += [f"&a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]" for level in range(1, levels)]
    return "[" + ", ".join(items) + "]"


@case("bound: train --config with an alias bomb under variant.attributes (the issue's example)")
def _bound_bomb_file(context: Context) -> str:
    (context.folder / "bomb.yaml").write_text(f"variant:\n  attributes: {_alias_bomb()}\n")
    result = _limited(context, ["train", "--config", "bomb.yaml", "--out", "t"], 4 << 30, timeout=90)
    return refused_in_one_line(result, "bomb.yaml", "aliases")


@case("bound: train override with an alias bomb")
def _bound_bomb_override(context: Context) -> str:
    result = _limited(context, ["train", f"variant={{attributes: {_alias_bomb()}}}", "--out", "t"], 4 << 30, timeout=90)
    return refused_in_one_line(result, "override", "aliases")


@case("bound: train override with an alias inside its own anchor")
def _bound_alias_loop(context: Context) -> str:
    result = _limited(context, ["train", "variant.attributes=&a [*a]", "--out", "t"], 4 << 30, timeout=90)
    return refused_in_one_line(result, "override", "aliases")


@case("bound: train --resume of a run whose config.yaml is an alias bomb")
def _bound_bomb_resume(context: Context) -> str:
    run = context.tiny_run()
    (run / "config.yaml").write_text(f"variant:\n  attributes: {_alias_bomb()}\n")
    before = snapshot(run)
    result = _limited(context, ["train", "--resume", str(run)], 4 << 30, timeout=90)
    return unchanged(before, run, refused_in_one_line(result, "config.yaml", "aliases"))


@case("bound: train --config of 2 MB")
def _bound_big_config(context: Context) -> str:
    (context.folder / "big.yaml").write_text("# a comment\n" * 200_000)
    result = context.quarto("train", "--config", "big.yaml", *TINY_TRAINING, "--out", "t", timeout=300)
    return refused_in_one_line(result, "big.yaml", "bytes")


for _call in ("env.step(0)", "env.observe('player_0')", "env.render()"):
    case(f"bound: library -O {_call} before reset()")(
        lambda context, call=_call: _library(context, f"env = quarto_env.env(render_mode='ansi'); {call}", "reset()")
    )


# === issue 50: the first hour ===
# The same Ctrl-C at every point of a run: one story (exit 130, its last line), which the next command keeps.
INTERRUPTED_AT = textwrap.dedent("""
    import os, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # started in the background, SIGINT would be ignored
    WHERE, AT = sys.argv.pop(1), int(sys.argv.pop(1))
    fired, calls = [], []

    def ctrl_c_before(owner, name, when=lambda *args, **kwargs: True, group=False):
        original = getattr(owner, name)

        def patched(*args, **kwargs):
            if not fired and when(*args, **kwargs):
                fired.append(name)
                if group:  # to the whole process group, as a terminal's Ctrl-C: worker processes too
                    os.killpg(os.getpgrp(), signal.SIGINT)
                else:
                    os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT: Python raises it at the next bytecode
            return original(*args, **kwargs)

        setattr(owner, name, patched)

    def at_step(callback):
        return callback.num_timesteps >= AT

    def at_round(*args):
        calls.append(1)
        return len(calls) == AT

    if WHERE == "start-up":
        from experiments.training import run
        ctrl_c_before(run, "announce_run")
    elif WHERE == "config.yaml":
        from experiments.training import train
        ctrl_c_before(train, "record_command")
    elif WHERE == "ppo step":
        from experiments.training import sb3_ppo
        ctrl_c_before(sb3_ppo.TrainingCallback, "_on_step", at_step)
    elif WHERE == "evaluation":
        from experiments.evaluation import log
        ctrl_c_before(log.EvaluationLog, "evaluate")
    elif WHERE == "az round":
        from experiments.training import alphazero
        ctrl_c_before(alphazero, "play_rounds", at_round)
    elif WHERE == "graded game":  # once the first game is graded, the workers still at others
        from tqdm import tqdm
        ctrl_c_before(tqdm, "update", group=True)
    elif WHERE == "twice":  # Ctrl-C at a step, and again while latest.zip is being written
        from experiments.training import run, sb3_ppo
        ctrl_c_before(sb3_ppo.TrainingCallback, "_on_step", at_step)
        save_latest = run.Checkpoints.save_latest

        def saved_under_ctrl_c(self):
            os.kill(os.getpid(), signal.SIGINT)
            return save_latest(self)

        run.Checkpoints.save_latest = saved_under_ctrl_c
    from experiments.cli import main
    sys.exit(main(sys.argv[1:]))
""")
"""A ``quarto`` process that sends itself SIGINT at a chosen point (the first argument; the second is a step or a
round where that applies), as Ctrl-C would arrive there; ``none``: at no point (the case sends it)."""
NEWCOMER_PPO = [*TINY_TRAINING, "total_steps=100000", "checkpoint_every=100000", "eval_every=100000"]
"""A tiny PPO run whose first scheduled checkpoint lies far past the interrupts, as the default config's does."""
PPO_ROLLOUT = 8 * 16
"""TINY_TRAINING's num_games * n_steps: Ctrl-C loses the rollout it stops, at most."""


def _newcomer_az(context: Context, *overrides: str) -> list[str]:
    """A tiny alphazero run (rounds of 16 positions), its first checkpoint far away unless ``overrides`` say."""
    return [
        "--config",
        str(context.repo / "configs" / "alphazero.yaml"),
        "total_steps=100000",
        "num_games=16",
        "alphazero.sims=8",
        "net_arch=[8]",
        "alphazero.buffer_size=2000",
        "alphazero.batch_size=32",
        "eval_every=100000",
        "early_evals=[]",
        "eval_games=4",
        "alphazero.eval_sims=4",
        "final_eval_games=4",
        "eval_opponents=[random]",
        "grade_positions=0",
        "checkpoint_every=100000",
        *overrides,
    ]


def _interrupted_train(context: Context, where: str, at: int, argv: list[str]) -> Result:
    return context.python("-c", INTERRUPTED_AT, where, str(at), "train", *argv, "--no-progress", timeout=600)


def _story_kept(context: Context, result: Result, argv: list[str], run: str = "run", at_least: int = 0) -> str:
    """The verdict on an interrupted ``quarto train ARGV``: exit 130 and a last line that tells the story -- the run
    had not started (then the same command must start it) or ``--resume`` continues it from a step (at least
    ``at_least``, the step Ctrl-C came at; then the same command is refused naming ``--resume``, and the resume
    must go on from that step) -- with no temporary file left."""
    import re

    if broken := crashed(result):
        return broken
    story = result.lines[-1] if result.lines else ""
    if result.returncode != 130 or not story.startswith("quarto train: interrupted; "):
        return "wrong answer"
    if temporaries(context.folder / run):
        return "lost or mixed"
    if story.endswith("nothing was written; the same command starts it"):  # (its run made short)
        started = context.quarto("train", *argv, "total_steps=256", "--no-progress", timeout=600)
        return "ok" if started.returncode == 0 else "lost or mixed"
    told = re.search(r"holds it at step ([\d,]+): continue it with: quarto train --resume (\S+)$", story)
    afresh = re.search(r"no checkpoint yet: quarto train --resume (\S+) starts it from step 0$", story)
    if not (told or afresh) or (told or afresh).groups()[-1] != run:  # type: ignore[union-attr]
        return "wrong answer"
    step = int(told.group(1).replace(",", "")) if told else 0
    if step < at_least:
        return "lost or mixed"  # the steps since the last checkpoint are lost
    again = context.quarto("train", *argv, "--no-progress", timeout=600)
    if again.returncode != 2 or f"--resume {run} continues it" not in again.stderr:
        return "wrong answer"  # the same command must tell the same story
    resumed = context.quarto("train", "--resume", run, f"total_steps={step + 256}", "--no-progress", timeout=600)
    if broken := crashed(resumed):
        return broken
    expected = f"resuming {run} at step {step:,}" if step else f"resuming {run} from step 0" if afresh else ""
    return "ok" if resumed.returncode == 0 and expected in resumed.stdout else "lost or mixed"


for _where, _at, _name, _extra in [
    ("start-up", 0, "during start-up, before the run folder is written (ppo)", []),
    ("config.yaml", 0, "after config.yaml, before command.txt and any checkpoint (ppo)", []),
    ("ppo step", 0, "at step 0 (ppo)", []),
    ("evaluation", 0, "in the evaluation at step 0 (ppo)", ["early_evals=[0]"]),
    ("ppo step", 700, "mid-run after the first checkpoint (ppo)", ["checkpoint_every=512"]),
    ("twice", 300, "then again while latest.zip is written (ppo)", []),
]:
    case(f"newcomer: Ctrl-C {_name}")(
        lambda context, where=_where, at=_at, extra=_extra: _story_kept(
            context,
            _interrupted_train(context, where, at, [*NEWCOMER_PPO, *extra, "--out", "run"]),
            [*NEWCOMER_PPO, *extra, "--out", "run"],
            at_least=max(at - PPO_ROLLOUT, 0),
        )
    )


for _where, _at, _name, _extra in [
    ("start-up", 0, "during start-up (alphazero)", []),
    ("az round", 1, "at step 0 (alphazero)", []),
    ("az round", 4, "mid-run before the first checkpoint (alphazero)", []),
    ("az round", 5, "mid-run after the first checkpoint (alphazero)", ["checkpoint_every=32"]),
]:
    case(f"newcomer: Ctrl-C {_name}")(
        lambda context, where=_where, at=_at, extra=_extra: _story_kept(
            context,
            _interrupted_train(context, where, at, [*_newcomer_az(context, *extra), "--out", "run"]),
            [*_newcomer_az(context, *extra), "--out", "run"],
            at_least=16 * (at - 1),  # the rounds stored before the one Ctrl-C stopped
        )
    )


@case("newcomer: a real Ctrl-C to the process group mid-run, before the first checkpoint (ppo)")
def _newcomer_real_ctrl_c(context: Context) -> str:
    argv = [*NEWCOMER_PPO, "--out", "run"]
    process = context.start(sys.executable, "-c", INTERRUPTED_AT, "none", "0", "train", *argv, "--no-progress")
    deadline = time.time() + 300
    while time.time() < deadline and not (context.folder / "run" / "tb").exists():
        time.sleep(0.2)
    time.sleep(3)  # somewhere in the first rollouts
    os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C does
    return _story_kept(context, finish(process, 300), argv)


@case("newcomer: Ctrl-C in a resumed run, before its next checkpoint (ppo)")
def _newcomer_resumed(context: Context) -> str:
    run = context.tiny_run()  # finished at step 1,024
    overrides = ["total_steps=100000", "checkpoint_every=100000", "eval_every=100000"]
    result = _interrupted_train(context, "ppo step", 1400, ["--resume", run.name, *overrides])
    return _story_kept(context, result, [*TINY_TRAINING, "--out", "run"], at_least=1400 - PPO_ROLLOUT)


@case("newcomer: --resume of a run killed (kill -9) before its first checkpoint (ppo)")
def _newcomer_killed(context: Context) -> str:
    process = context.start_quarto("train", *NEWCOMER_PPO, "--out", "run", "--no-progress")
    deadline = time.time() + 300
    while time.time() < deadline and not (context.folder / "run" / "tb").exists():
        time.sleep(0.2)
    time.sleep(2)
    os.killpg(process.pid, signal.SIGKILL)
    finish(process, 10)
    result = context.quarto("train", "--resume", "run", "total_steps=256", "--no-progress", timeout=600)
    return succeeded(result, "resuming run from step 0")


# ---- quarto replay --html --grade ---------------------------------------------------------------------------
def _newcomer_games(context: Context, games: int = 6) -> str:
    """A games file of ``games`` games from a tournament of the baselines (its ``games.jsonl``)."""
    argv = ["tournament", "random", "greedy", "--games", str(games), "--jobs", "1", "--out", "t", "--no-progress"]
    result = context.quarto(*argv, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"the tournament failed:\n{result.stderr[-2000:]}")
    return "t/games.jsonl"


@case("newcomer: replay --html --grade shows its progress on stderr")
def _newcomer_replay_progress(context: Context) -> str:
    result = context.quarto("replay", _newcomer_games(context), "--html", "p.html", "--grade", timeout=600)
    verdict = succeeded(result, "written to p.html with the solver's verdicts")
    return verdict if verdict != "ok" or "grading" in result.stderr else "wrong answer"


@case("newcomer: replay --grade on 2 worker processes writes the page of 1")
def _newcomer_replay_jobs(context: Context) -> str:
    games = _newcomer_games(context)
    pages = []
    for jobs in ("1", "2"):
        result = context.quarto("replay", games, "--html", f"{jobs}.html", "--grade", "--jobs", jobs, timeout=600)
        if (verdict := succeeded(result)) != "ok":
            return verdict
        pages.append((context.folder / f"{jobs}.html").read_text())
    return "ok" if pages[0] == pages[1] else "wrong answer"


@case("newcomer: replay --grade --jobs 0")
def _newcomer_replay_jobs_zero(context: Context) -> str:
    (context.folder / "games.jsonl").write_text("")
    result = context.quarto("replay", "games.jsonl", "--html", "p.html", "--grade", "--jobs", "0", timeout=600)
    return refused_in_one_line(result, "--jobs")


@case("newcomer: Ctrl-C during replay --grade on 2 worker processes")
def _newcomer_replay_ctrl_c(context: Context) -> str:
    games = _newcomer_games(context, 20)
    argv = ["replay", games, "--html", "p.html", "--grade", "--jobs", "2", "--no-progress"]
    process = context.start(sys.executable, "-c", INTERRUPTED_AT, "graded game", "0", *argv)
    result = finish(process, 600)
    if broken := crashed(result):
        return broken
    if not _group_gone(process.pid, 10):
        return "hang"  # a worker outlived its parent
    if (context.folder / "p.html").exists() or temporaries(context.folder):
        return "lost or mixed"
    return "ok" if result.returncode == 130 and len(result.lines) == 1 else "wrong answer"


def _group_gone(group: int, seconds: float) -> bool:
    """Whether every process of the process group ``group`` is gone within ``seconds`` (multiprocessing's resource
    tracker leaves a moment after its parent)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


# ---- quarto evaluate: agent specs, every spec checked first ------------------------------------------------
@case("newcomer: evaluate ppo:RUN, the spec training prints")
def _newcomer_evaluate_spec(context: Context) -> str:
    context.tiny_run()
    result = context.quarto("evaluate", "ppo:run", "--games", "4", "--opponents", "random", timeout=600)
    return succeeded(result, "argmax", "random")


@case("newcomer: evaluate az:RUN of a ppo run")
def _newcomer_evaluate_kind(context: Context) -> str:
    context.tiny_run()
    result = context.quarto("evaluate", "az:run", "--games", "4", timeout=600)
    return refused_in_one_line(result, "ppo network", "ppo:")


@case("newcomer: evaluate ppo:RUN,checkpoint=final --checkpoint best")
def _newcomer_evaluate_two_names(context: Context) -> str:
    context.tiny_run()
    argv = ["evaluate", "ppo:run,checkpoint=final", "--checkpoint", "best", "--games", "4"]
    result = context.quarto(*argv, timeout=600)
    return refused_in_one_line(result, "checkpoint=final", "--checkpoint best")


@case("newcomer: evaluate greedy (an agent with no checkpoint)")
def _newcomer_evaluate_baseline(context: Context) -> str:
    result = context.quarto("evaluate", "greedy", "--games", "4", timeout=600)
    return refused_in_one_line(result, "greedy", "plays no checkpoint")


@case("newcomer: evaluate a damaged checkpoint against a mistyped opponent")
def _newcomer_evaluate_typo_first(context: Context) -> str:
    (context.folder / "final.zip").write_bytes(b"PK\x03\x04 not a checkpoint")
    result = context.quarto("evaluate", "final.zip", "--opponents", "random", "greedyy", "--games", "4", timeout=600)
    verdict = refused_in_one_line(result, "greedyy", "did you mean 'greedy'")
    return verdict if verdict != "ok" or "final.zip" not in result.stderr else "wrong answer"


# === issue 50: trained agents ===


@case("pretrained: grade ppo:pretrained --squares (none shipped for squares)")
def _pretrained_unshipped(context: Context) -> str:
    result = context.quarto("grade", "ppo:pretrained", "--squares", "--positions", "5")
    return refused_in_one_line(result, "no ppo network is shipped for squares", "az:pretrained")


@case("pretrained: rllib:pretrained (none shipped)")
def _pretrained_rllib(context: Context) -> str:
    return refused_in_one_line(context.quarto("grade", "rllib:pretrained", "--positions", "5"), "no rllib network")


@case("pretrained: az:pretrained plays the squares network under --squares")
def _pretrained_squares(context: Context) -> str:
    result = context.quarto("grade", "az:pretrained,sims=8", "--squares", "--positions", "5")
    return succeeded(result, "az:pretrained")


@case("pretrained: ppo:pretrained plays with no training")
def _pretrained_ppo(context: Context) -> str:
    return succeeded(context.quarto("grade", "ppo:pretrained", "--positions", "5"), "ppo:pretrained")


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
