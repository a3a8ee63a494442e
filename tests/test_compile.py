"""``quarto compile`` (issue 52 item 4): after it, a new process's first env step and first MCTS move compile
nothing of the project; its options are refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


@pytest.mark.slow
def test_after_quarto_compile_a_first_session_compiles_nothing(tmp_path: Path) -> None:
    compiled, empty = tmp_path / "compiled", tmp_path / "empty"
    report = run_python(["-m", "experiments.cli", "compile", "--jobs", "1"], compiled)
    *groups, total = report.splitlines()
    assert len(groups) == 2 and total.startswith("kernels compiled: ") and ", loaded: 0;" in total, report
    assert json.loads(run_python(["-c", FIRST_SESSION], compiled)) == []
    # The control: in an empty cache the same session compiles the search (the recorder sees compilations).
    assert "agents.tree.uct.run_simulations" in json.loads(run_python(["-c", FIRST_SESSION], empty))
    again = run_python(["-m", "experiments.cli", "compile", "--jobs", "1"], compiled)
    assert again.splitlines()[-1].startswith("kernels compiled: 0, "), again  # a second run loads them all


@pytest.mark.parametrize("jobs", ["0", "3", "two"])
def test_quarto_compile_refuses_a_bad_jobs_in_one_line(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.bench.compile import main

    with pytest.raises(SystemExit) as exit_:
        main(["--jobs", jobs])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("quarto compile:") and "\n" not in error and "--jobs" in error, error
