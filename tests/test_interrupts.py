"""Ctrl-C during a long compiled search: ``quarto tournament``, ``quarto grade`` and ``quarto play`` run as real
processes, get SIGINT while their search runs for a minute or more, and stop with status 130 and a message
(:mod:`agents.interrupts` stops the search within milliseconds); and ``quarto sweep`` while its trial trains.
SIGTERM does the same, with status 143: a grade keeps its solved values, a tournament its games, a training its
``latest.zip``, and none leaves a lock or a staging folder. Each test prints the seconds from the signal to the
message and to the exit (run with ``-s`` to see them; the exit adds the interpreter's shutdown, about 0.3 s once
numba is loaded); only a hang guard bounds them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from experiments.evaluation.grading import PositionValues, sample_decisions
from quarto_env.core import STANDARD, Variant

BOOKLESS = Variant.make(declaration=True)
"""Rules that no opening book covers (:func:`agents.solver.book.shipped_book`): the solver solves their early positions
live, for minutes, which is what these tests interrupt. Standard rules answer them from the book at once."""

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT = 120.0
"""Seconds a command may take to print the line that shows it started (a cold numba cache compiles first)."""
SEARCH_WAIT = 3.0
"""Seconds between that line and the signal: the command is then deep inside its search."""
EXIT_TIMEOUT = 60.0
"""Hang guard: seconds the command may take to stop after the signal."""


@pytest.fixture(scope="module", autouse=True)
def compiled_search() -> None:
    """Load (or compile and cache) the compiled search once, so that the commands start in a second or two."""
    from agents.solver.minimax import MinimaxAgent

    MinimaxAgent(STANDARD, time=1.0)


class Output:
    """All that one pipe of a process writes, read by a thread (so the pipe never fills), with a wait for
    some text (progress bars end their lines with ``\\r``: reading lines would not do)."""

    def __init__(self, pipe: int) -> None:
        self.text = ""
        self.closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: int) -> None:
        while chunk := os.read(pipe, 4096):
            with self._changed:
                self.text += chunk.decode("utf-8", errors="replace")
                self._changed.notify_all()
        with self._changed:
            self.closed = True
            self._changed.notify_all()

    def wait_for(self, marker: str, timeout: float) -> bool:
        """Whether ``marker`` is written within ``timeout`` seconds (waiting no longer once the pipe closes)."""
        with self._changed:
            self._changed.wait_for(lambda: marker in self.text or self.closed, timeout)
            return marker in self.text

    def close(self) -> str:
        """Everything written, once the process has closed the pipe."""
        self._thread.join(10)
        return self.text


def default_sigint() -> None:
    """Run in the child before it starts: SIGINT back to its default. A process started in the background by a
    non-interactive shell (a CI script's ``cmd &``) ignores SIGINT, its children inherit that, and Python then
    installs no handler: the signal would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""The exit status after each signal: 128 and its number, as a shell reports a process the signal stopped."""
SIGNALS, SIGNAL_NAMES = [signal.SIGINT, signal.SIGTERM], ["SIGINT", "SIGTERM"]


def interrupt(
    args: list[str],
    marker: str,
    stream: str = "stdout",
    said: str = "stderr",
    group: bool = False,
    sent: signal.Signals = signal.SIGINT,
) -> tuple[str, str]:
    """Run ``quarto ARGS``, wait for ``marker`` on ``stream`` and then :data:`SEARCH_WAIT` seconds, send
    ``sent`` (with ``group``, to its whole process group, as a terminal's Ctrl-C or a service manager's stop
    does), and check that it says "interrupted" on ``said`` and exits with the signal's :data:`STATUS`; returns
    its ``(stdout, stderr)``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # each line shows at once, not when the pipe buffer fills
    process = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=group,
        preexec_fn=default_sigint,
    )
    assert process.stdin and process.stdout and process.stderr
    outputs = {"stdout": Output(process.stdout.fileno()), "stderr": Output(process.stderr.fileno())}
    try:
        process.stdin.close()
        started = outputs[stream].wait_for(marker, STARTUP_TIMEOUT)
        assert started, f"no {marker!r} on {stream}: {outputs['stdout'].text}{outputs['stderr'].text}"
        time.sleep(SEARCH_WAIT)
        assert process.poll() is None, "the command ended before the signal: its search was not long"
        if group:
            os.killpg(process.pid, sent)
        else:
            process.send_signal(sent)
        signalled = time.perf_counter()
        outputs[said].wait_for("interrupted", EXIT_TIMEOUT)
        message = time.perf_counter() - signalled
        status = process.wait(EXIT_TIMEOUT)
        stopped = time.perf_counter() - signalled
        print(f"\nquarto {args[0]}: message {message:.3f} s, exit {status} {stopped:.3f} s after {sent.name}", end=" ")
    finally:
        process.kill()
        process.wait()
    stdout, stderr = outputs["stdout"].close(), outputs["stderr"].close()
    assert status == STATUS[sent], f"{stdout}\n{stderr}"
    assert "Traceback" not in stderr, stderr
    return stdout, stderr


@pytest.mark.parametrize(
    ("jobs", "group", "sent"),
    [(1, False, signal.SIGINT), (2, False, signal.SIGINT), (2, True, signal.SIGINT), (2, True, signal.SIGTERM)],
    ids=["1-job", "2-jobs", "2-jobs-group", "2-jobs-group-SIGTERM"],
)
def test_tournament_stops_inside_a_move(tmp_path: Path, jobs: int, group: bool, sent: signal.Signals) -> None:
    """A minute-long minimax move, played in this process or in a worker (which gets the signal too with
    ``group``), stops at once; the message says how to finish the tournament, and the folder stays for it,
    unlocked."""
    out = tmp_path / "run"
    args = ["tournament", "minimax:time=60", "random", "--games", "2", "--jobs", str(jobs), "--out", str(out)]
    _, stderr = interrupt([*args, "--no-progress"], marker="games between", group=group, sent=sent)
    assert f"interrupted: `quarto tournament --resume {out}`" in stderr
    assert (out / "games.jsonl").is_file() and leftovers(tmp_path) == []


def leftovers(folder: Path) -> list[str]:
    """The locks, staging folders and temporary files under ``folder``."""
    return [str(path) for path in folder.rglob("*") if path.name.endswith((".lock", ".staging")) or ".tmp" in path.name]


@pytest.mark.slow
@pytest.mark.parametrize("sent", SIGNALS, ids=SIGNAL_NAMES)
def test_training_saves_its_latest_checkpoint(tmp_path: Path, sent: signal.Signals) -> None:
    """Stopped while it trains, ``quarto train`` saves ``latest.zip`` and says how to go on from it; the run
    folder is left unlocked."""
    out = tmp_path / "run"
    args = ["train", "total_steps=10000000", "num_games=8", "n_steps=16", "batch_size=64", "eval_every=100000000"]
    _, stderr = interrupt([*args, "early_evals=[]", "--out", str(out), "--no-progress"], "TensorBoard", sent=sent)
    assert f"continue it with: quarto train --resume {out}" in stderr
    assert (out / "checkpoints" / "latest.zip").is_file() and leftovers(tmp_path) == []


def slow_second_position(max_seed: int = 200) -> int:
    """A seed whose two sampled positions (:data:`BOOKLESS` rules) are a quick one (at most 8 empty squares) and
    then one the solver needs minutes or more for (at least 15)."""
    for seed in range(max_seed):
        first, second = sample_decisions(BOOKLESS, 2, seed, max_empty=16)
        if first.num_empty <= 8 and second.num_empty >= 15:
            return seed
    raise AssertionError(f"no such seed below {max_seed}")


@pytest.mark.parametrize("sent", SIGNALS, ids=SIGNAL_NAMES)
def test_grade_keeps_the_values_solved_before_ctrl_c(tmp_path: Path, sent: signal.Signals) -> None:
    """Interrupted while solving its second position, ``quarto grade`` says it valued one of two and leaves the
    first one's values in ``--cache``, where the next run finds them; of its output folder, neither a lock nor a
    staging folder is left."""
    seed = slow_second_position()
    cache = tmp_path / "values.json"
    args = ["grade", "random", "--positions", "2", "--max-empty", "16", "--seed", str(seed), "--declaration"]
    # "1/2": the bar shows the first position valued (under load, "solving" alone came before it was)
    _, stderr = interrupt([*args, "--cache", str(cache), "--out", str(tmp_path / "run")], "1/2", "stderr", sent=sent)
    assert "quarto grade: interrupted after valuing 1 of 2 positions" in stderr
    assert f"values so far are kept in --cache {cache}" in stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["values.json"]
    assert len(json.loads(cache.read_text())["positions"]) == 1
    values = PositionValues(BOOKLESS, cache)
    assert values.discarded is None
    first, second = sample_decisions(BOOKLESS, 2, seed, max_empty=16)
    assert first in values and second not in values


def test_grade_without_cache(tmp_path: Path) -> None:
    """Without ``--cache`` the message says how to keep the values next time."""
    args = ["grade", "random", "--positions", "1", "--min-empty", "15", "--max-empty", "16", "--declaration"]
    _, stderr = interrupt([*args, "--out", str(tmp_path / "run")], "solving", "stderr")
    assert "quarto grade: interrupted after valuing 0 of 1 positions" in stderr
    assert "--cache FILE would keep" in stderr


@pytest.mark.parametrize("opponent", ["minimax:time=60", "solver:empties=16"])
def test_play_stops_while_the_agent_thinks(tmp_path: Path, opponent: str) -> None:
    """The agent gives the first piece and thinks for a minute (or solves the whole game, under rules without an
    opening book): Ctrl-C abandons the game at once."""
    args = ["play", "--opponent", opponent, "--first", "agent", "--declaration"]
    stdout, _ = interrupt(args, "the agent gives first", said="stdout")
    assert "interrupted -- game abandoned." in stdout


@pytest.mark.ray
@pytest.mark.slow
def test_an_interrupted_sweep_says_one_line_and_writes_no_empty_results(tmp_path: Path) -> None:
    """Ctrl-C while the only trial trains, to the sweep's whole process group as a terminal sends it (Ray's
    processes too): one line of ours, how to resume, none of Tune's hints, and no results files (no trial
    finished). (Sent to the sweep alone it gave the same; that case left the suite for time.)"""
    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    args = ["sweep", "configs/rllib.yaml", "--seeds", "0", "--out", str(out), "--set", "total_steps=10000000"]
    _, stderr = interrupt(args, marker="Trial seed=0 started", group=True)
    ours = [line for line in stderr.splitlines() if line.startswith("quarto sweep")]
    assert ours == [
        f"quarto sweep: interrupted with 1 trial(s) unfinished; `quarto sweep --resume {out}` finishes them"
    ]
    assert "Tuner.restore" not in stderr and "Error" not in stderr, stderr
    assert (out / "sweep.json").exists()
    assert not [name for name in ("results.csv", "results.md", "curves.csv", "curves.png") if (out / name).exists()]


def test_a_sigterm_while_a_checkpoint_is_saved_waits_for_the_save() -> None:
    """``quarto train`` holds Ctrl-C while it saves ``latest.zip`` at an interrupt; a SIGTERM that Python handles
    (``quarto`` makes it Ctrl-C) is held the same, and raised once the save is done."""
    from experiments.training.run import interrupts_held

    def interrupt(number: int, frame: object) -> None:
        raise KeyboardInterrupt

    saved = False
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts_held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # Python runs the handler here, between two bytecodes
            saved = True
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert saved
