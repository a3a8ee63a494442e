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

RECORDER = """
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
"""
"""The head of a script that records the project's functions numba compiles (none when the cache has them)."""

FIRST_SESSION = """
import numpy as np
import quarto_env
from agents.tree.uct import UCTAgent
from quarto_env.core import INITIAL_STATE

env = quarto_env.env()  # numba is loaded: the env writes its observations with the compiled kernel
env.reset(seed=0)
observation, *_ = env.last()
env.step(int(np.flatnonzero(observation["action_mask"])[0]))
UCTAgent(seed=0, sims=50).act(INITIAL_STATE)
"""
"""A user's first session: an env step and a 50-simulation ``mcts`` move."""

WARM_FIRST_SESSION = "from experiments.bench.compile import warm_env, warm_uct\nwarm_env()\nwarm_uct()\n"
"""The two workloads of ``quarto compile`` that a first session's env step and ``mcts`` move need (the whole
command compiles for a minute of CPU; the others warm other kernels, in the same way)."""

PRINT_COMPILED = "print(json.dumps(compiled))\n"


def compiled_by(script: str, cache: Path) -> list[str]:
    """The project's functions that numba compiled running ``script`` in a new process, its cache in ``cache``."""
    environment = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", RECORDER + script + PRINT_COMPILED],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_after_the_compile_workloads_a_first_session_compiles_nothing(tmp_path: Path) -> None:
    # The control: from an empty cache the workloads compile the search (the recorder sees compilations).
    assert "agents.tree.uct.run_simulations" in compiled_by(WARM_FIRST_SESSION, tmp_path)
    assert compiled_by(FIRST_SESSION, tmp_path) == []


def test_quarto_compile_runs_its_workloads_for_real(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole command, in this process. Not marked slow: it takes seconds where the kernels are in numba's
    cache. A fresh clone's suite starts with the slow tests, which compile most of them; run among those, this
    test would compile them all first."""
    from experiments.bench.compile import GROUPS, main
    from experiments.training.run import COMPILING

    assert main(["--jobs", "1"]) == 0
    # A training test earlier in this worker listens for compiles: its notice may come first (never in quarto
    # compile's own process, which starts no run).
    *lines, total = [line for line in capsys.readouterr().out.splitlines() if line != COMPILING]
    assert [line.split(":")[0] for line in lines] == list(GROUPS)
    compiled, loaded = (int(part.split(": ")[1]) for part in total.split(";")[0].split(", "))
    assert compiled + loaded > 0


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


def test_clear_removes_numba_cache_files_of_the_project_only(tmp_path: Path) -> None:
    """What ``quarto compile --clear`` removes before ``pip uninstall``: numba's files in the project's folders."""
    from experiments.bench.compile import clear_cache

    kept = [
        tmp_path / "agents" / "__pycache__" / "kernels.cpython-311.pyc",
        tmp_path / "numpy" / "__pycache__" / "a.nbi",
    ]
    cached = [tmp_path / "agents" / "solver" / "__pycache__" / "kernels.search-1.py311.nbi",
              tmp_path / "quarto_env" / "__pycache__" / "fast.random-2.py311.1.nbc"]  # fmt: skip
    for path in kept + cached:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    assert sorted(clear_cache(tmp_path)) == sorted(cached)
    assert all(path.exists() for path in kept) and not any(path.exists() for path in cached)
