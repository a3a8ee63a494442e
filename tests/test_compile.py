"""``quarto compile`` (issue 52 item 4): after it, a new process's first env step and first MCTS move compile
nothing of the project; its options are refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
"""The folder of the packages under test: the child processes import them from here."""

FIRST_SESSION = """
import json

from numba.core import event

compiled = []


class Recorder(event.Listener):
    def on_start(self, started):
        function = started.data["dispatcher"].py_func
        if function.__module__.split(".")[0] in ("quarto_env", "agents", "experiments"):
            compiled.append(f"{function.__module__}.{function.__qualname__}")

    def on_end(self, ended):
        pass


event.register("numba:compile", Recorder())

import numpy as np
import quarto_env
from agents.tree.uct import UCTAgent
from quarto_env.core import INITIAL_STATE

env = quarto_env.env()  # numba is loaded: the env writes its observations with the compiled kernel
env.reset(seed=0)
observation, *_ = env.last()
env.step(int(np.flatnonzero(observation["action_mask"])[0]))
UCTAgent(seed=0, sims=50).act(INITIAL_STATE)
print(json.dumps(compiled))
"""
"""A user's first session: an env step and a 50-simulation ``mcts`` move; prints the project's functions that
numba compiled on the way (none when the cache had them)."""


def run_python(arguments: list[str], cache: Path) -> str:
    """Run this Python with ``arguments`` in a new process with numba's cache in ``cache``; its output."""
    environment = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, *arguments], env=environment, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


WARM_FIRST_SESSION = "from experiments.bench.compile import warm_env, warm_uct; warm_env(); warm_uct()"
"""The two workloads of ``quarto compile`` that a first session's env step and ``mcts`` move need (the whole
command compiles for a minute of CPU; the others warm other kernels, in the same way)."""


@pytest.mark.slow
def test_after_the_compile_workloads_a_first_session_compiles_nothing(tmp_path: Path) -> None:
    compiled, empty = tmp_path / "compiled", tmp_path / "empty"
    run_python(["-c", WARM_FIRST_SESSION], compiled)
    assert json.loads(run_python(["-c", FIRST_SESSION], compiled)) == []
    # The control: in an empty cache the same session compiles the search (the recorder sees compilations).
    assert "agents.tree.uct.run_simulations" in json.loads(run_python(["-c", FIRST_SESSION], empty))


def test_quarto_compile_runs_every_workload_and_prints_a_line_per_group(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.bench import compile as command

    ran: list[str] = []
    names = sorted(work.__name__ for works in command.GROUPS.values() for work in works)
    groups = {name: tuple(_recorder(ran, work.__name__) for work in works) for name, works in command.GROUPS.items()}
    monkeypatch.setattr(command, "GROUPS", groups)
    assert command.main(["--jobs", "1"]) == 0
    *lines, total = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == list(groups)
    assert total.startswith("kernels compiled: ")
    assert sorted(ran) == names != []
    assert {"warm_env", "warm_uct"} <= set(ran)  # what the slow test above relies on


def _recorder(ran: list[str], name: str) -> Callable[[], None]:
    def record() -> None:
        ran.append(name)

    return record


@pytest.mark.parametrize("jobs", ["0", "3", "two"])
def test_quarto_compile_refuses_a_bad_jobs_in_one_line(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.bench.compile import main

    with pytest.raises(SystemExit) as exit_:
        main(["--jobs", jobs])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("quarto compile:") and "\n" not in error and "--jobs" in error, error
