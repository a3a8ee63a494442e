"""``quarto bench startup``: whole-process seconds to the first env step and to the first MCTS move, warm and
cold, beside quartors'.

Example usage::

    quarto bench startup --runs 5
    quarto bench startup --runs 5 --peer-python /path/to/python3.13     # a Python with quartors installed

Each run is a new Python process, timed from outside from its start to its exit. Ours:

- **first env step** (:data:`FIRST_STEP`): import ``quarto_env``, make ``quarto_env.env()``, reset, one step;
- **first MCTS move** (:data:`FIRST_SEARCH`): import the ``mcts`` agent and play the opening (a give) with
  ``--sims`` simulations.

**Warm**: numba's on-disk cache as a first run left it (what every later process of a machine finds). **Cold**:
every run with an empty cache of its own (``NUMBA_CACHE_DIR`` a new temporary folder), as after a fresh install:
whatever the process compiles, it compiles. **Compiled** (``--compiled``): the first move with numba's cache as
``quarto compile`` (:mod:`experiments.bench.compile`, the install's last step) left it in an empty folder, the
compilation timed once first (a line of its own). Either way Python's bytecode cache is as a first run left it (a
``PYTHONDONTWRITEBYTECODE`` in the environment is dropped): pip writes it at install.

The peer: `quartors <https://pypi.org/project/quartors/>`_ (Rust, Python >= 3.13), its first step (import, the
opening, its first legal action applied, the observation encoded: :data:`PEER_FIRST_STEP`) and its first search
of ``--peer-sims`` simulations from the opening (:data:`PEER_FIRST_SEARCH`; its machine code ships compiled, so
it has no cold row). It runs under ``--peer-python``, by default this Python or a ``python3.13`` on the
``PATH`` if one imports quartors. All rows are measured in alternation, one run of each per round.

**Floors** (``--floors``): each Python starting and exiting, and our first step's imports from other projects
alone (:data:`DEPENDENCY_IMPORTS`: numpy, Gymnasium and PettingZoo, which a PettingZoo env cannot do without),
with the ratio of that last row to quartors' first step: how far below the peer our start-up could go at best.

The figures are medians (with the fastest and the slowest run) of the wall-clock seconds and of the CPU seconds
(user + system) that the process and its children used, which a busy machine inflates less; the machine's load
average is printed before and after, and the ratios ours / quartors of the medians last.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from agents.specs import MAX_UCT_SIMULATIONS
from experiments.options import CommandParser, add_integer_argument

FIRST_STEP = """
import numpy as np
import quarto_env

env = quarto_env.env()
env.reset(seed=0)
observation, *_ = env.last()
env.step(int(np.flatnonzero(observation["action_mask"])[0]))
"""
"""Our first env step."""
FIRST_SEARCH = """
from agents.tree.uct import UCTAgent
from quarto_env.core import INITIAL_STATE

UCTAgent(seed=0, sims={sims}).act(INITIAL_STATE)
"""
"""Our first MCTS move: the opening's give."""
PEER_FIRST_STEP = """
import quartors

state = quartors.State.initial()
state = state.apply(state.legal_actions()[0])
quartors.encode_states([state])
"""
"""quartors' first step: it has no env object; its state, one action and the observation of the next."""
PEER_FIRST_SEARCH = """
import quartors

search = quartors.Mcts(quartors.MctsConfig(simulations={sims}), quartors.RolloutEvaluator())
search.search(quartors.State.initial(), seed=0).select_action(temperature=0.0, seed=0)
"""
"""quartors' first search: the opening's turn (a give)."""
DEPENDENCY_IMPORTS = """
import numpy
import gymnasium
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers
"""
"""What our first step imports from other projects (``quarto_env.env``'s imports): the floor under our start-up
that this code cannot lower (``--floors``)."""
NOTHING = "pass"
"""A Python that starts and exits: the floor under either side (``--floors``)."""
COMPILE = """
from experiments.cli import main

main(["compile"])
"""
"""``quarto compile``, as the README's install runs it."""
OUR_SIMS = 2000
"""Our ``mcts`` agent's simulations per decision ..."""
PEER_SIMS = 3200
"""... and quartors' per turn that lose value in the same share of turns (``quarto bench mcts --strength``)."""
MAX_RUNS = 100
PEER_MISSING = (
    "quartors: no Python here imports it; for its rows, pass --peer-python PYTHON, a Python >= 3.13 with "
    "`pip install quartors`"
)
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder of this code's packages: the timed processes import them from here, as this process does."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of the table: a script, the Python that runs it, and whether numba's cache starts empty."""

    name: str
    python: str
    script: str
    cold: bool = False
    numba_cache: str | None = None
    """The row's own numba cache folder (``NUMBA_CACHE_DIR``), filled before its runs; ``None``: as it is."""


def main(argv: list[str]) -> int:
    """Time the rows in alternating rounds and print one line per row, then the ratios to the peer's."""
    parser = CommandParser(prog="quarto bench startup", description=__doc__.split("\n\n")[0])
    add_integer_argument(parser, "--runs", 5, "processes timed for each row", fewest=1, most=MAX_RUNS)
    add_integer_argument(
        parser, "--sims", OUR_SIMS, "our MCTS simulations for the first move", fewest=1, most=MAX_UCT_SIMULATIONS
    )
    add_integer_argument(
        parser,
        "--peer-sims",
        PEER_SIMS,
        "quartors' simulations for its first search",
        fewest=1,
        most=MAX_UCT_SIMULATIONS,
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="time `quarto compile` in an empty cache once, then add the row of the first MCTS move after it",
    )
    parser.add_argument(
        "--floors",
        action="store_true",
        help="also time each Python starting alone and our dependencies' imports alone, the floors under the rows",
    )
    parser.add_argument(
        "--peer-python",
        help="a Python that imports quartors (default: this one, else python3.13 on the PATH, if either does)",
    )
    args = parser.parse_args(argv)
    peer = args.peer_python or find_peer_python()
    if args.peer_python and not imports_quartors(args.peer_python):
        parser.error(f"--peer-python {args.peer_python!r} is not a Python that imports quartors")
    with tempfile.TemporaryDirectory() as compiled:
        rows = table_rows(args.sims, args.peer_sims, peer, compiled if args.compiled else None, args.floors)
        return _time_rows(args, rows)


def _time_rows(args: argparse.Namespace, rows: list[Row]) -> int:
    """Time ``rows`` as :func:`main` says, and print the table."""
    print(f"a new process each run, {args.runs} per row, in alternation; load average {load_average()}")
    environment = child_environment(os.environ)
    for cache in sorted({row.numba_cache for row in rows if row.numba_cache}):
        wall, cpu = time_process(Row("quarto compile", sys.executable, COMPILE, numba_cache=cache), environment)
        print(f"quarto compile, from an empty cache: wall {wall:.2f} s, cpu {cpu:.2f} s")
    print(f"{'':<40}{'wall s (min-max)':>22}{'cpu s (min-max)':>22}")
    for row in rows:
        if not row.cold and not row.numba_cache:
            time_process(row, environment)  # fills numba's and Python's caches for the warm runs
    runs: dict[str, list[tuple[float, float]]] = {row.name: [] for row in rows}
    for _ in range(args.runs):
        for row in rows:
            runs[row.name].append(time_process(row, environment))
    for row in rows:
        print(_line(row.name, runs[row.name]))
    if not any(row.name.startswith("quartors") for row in rows):
        print(PEER_MISSING)
    print(f"load average after: {load_average()}")
    ratio(runs, "first env step, warm", "first step")
    ratio(runs, "first MCTS move, warm", "first search")
    ratio(runs, "first MCTS move, cold", "first search")
    ratio(runs, "first MCTS move, compiled", "first search")
    ratio(runs, "our dependencies' imports alone", "first step")
    return 0


def table_rows(
    sims: int, peer_sims: int, peer: str | None, compiled: str | None = None, floors: bool = False
) -> list[Row]:
    """Ours, warm and cold, after ``quarto compile`` into the folder ``compiled`` if given, and the peer's where
    ``peer`` names its Python, in the order they are timed; with ``floors``, then each Python alone and our
    dependencies' imports alone."""
    search = FIRST_SEARCH.format(sims=sims)
    rows = [
        Row("first env step, warm", sys.executable, FIRST_STEP),
        Row("first env step, cold", sys.executable, FIRST_STEP, cold=True),
        Row(f"first MCTS move, warm ({sims:,} sims)", sys.executable, search),
        Row(f"first MCTS move, cold ({sims:,} sims)", sys.executable, search, cold=True),
    ]
    if compiled is not None:
        rows.append(Row(f"first MCTS move, compiled ({sims:,} sims)", sys.executable, search, numba_cache=compiled))
    if peer is not None:
        peer_search = PEER_FIRST_SEARCH.format(sims=peer_sims)
        rows += [
            Row("quartors first step", peer, PEER_FIRST_STEP),
            Row(f"quartors first search ({peer_sims:,} sims)", peer, peer_search),
        ]
    if floors:
        rows += [Row("our Python alone", sys.executable, NOTHING)]
        rows += [Row("our dependencies' imports alone", sys.executable, DEPENDENCY_IMPORTS)]
        rows += [Row("quartors' Python alone", peer, NOTHING)] if peer is not None else []
    return rows


def find_peer_python() -> str | None:
    """This Python if it imports quartors, else ``python3.13`` on the ``PATH`` if that one does, else ``None``."""
    for python in (sys.executable, shutil.which("python3.13")):
        if python is not None and imports_quartors(python):
            return python
    return None


def imports_quartors(python: str) -> bool:
    """Whether ``python`` runs and imports quartors."""
    try:
        done = subprocess.run([python, "-c", "import quartors"], capture_output=True, timeout=60, check=False)
    except OSError:
        return False
    return done.returncode == 0


def child_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The timed processes' environment: ``environment`` with this code's packages first on ``PYTHONPATH``, and
    Python's bytecode cache written (as a user's Python does)."""
    child = {key: value for key, value in environment.items() if key != "PYTHONDONTWRITEBYTECODE"}
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [PROJECT_ROOT, environment.get("PYTHONPATH")]))
    return child


def time_process(row: Row, environment: Mapping[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the process and its children) of one run of ``row``'s script; a cold
    row's run with an empty numba cache of its own, a row with a cache folder in that one."""
    with tempfile.TemporaryDirectory() as cache:
        if row.cold or row.numba_cache:
            environment = {**environment, "NUMBA_CACHE_DIR": row.numba_cache or cache}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        # In a neutral folder: ``-c`` puts the working folder first on sys.path, before PYTHONPATH.
        subprocess.run([row.python, "-c", row.script], env=environment, check=True, cwd=tempfile.gettempdir())
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ratio(runs: dict[str, list[tuple[float, float]]], ours: str, theirs: str) -> None:
    """Print the ratios of the medians, wall and CPU, of our row that starts ``ours`` to quartors' that starts
    ``theirs``, where both were timed."""
    mine = [times for name, times in runs.items() if name.startswith(ours)]
    peer = [times for name, times in runs.items() if name.startswith(f"quartors {theirs}")]
    if mine and peer:
        (our_wall, our_cpu), (their_wall, their_cpu) = _medians(mine[0]), _medians(peer[0])
        print(f"ours / quartors: {ours} / {theirs}: wall {our_wall / their_wall:.2f}, cpu {our_cpu / their_cpu:.2f}")


def _medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The median wall and CPU seconds of ``runs`` (a tiny floor: a process takes some)."""
    return max(statistics.median(wall for wall, _ in runs), 1e-9), max(statistics.median(cpu for _, cpu in runs), 1e-9)


def load_average() -> str:
    """The 1, 5 and 15-minute load averages."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def _line(name: str, runs: list[tuple[float, float]]) -> str:
    cells = []
    for values in zip(*runs, strict=True):
        cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
    return f"{name:<40}{cells[0]:>22}{cells[1]:>22}"
