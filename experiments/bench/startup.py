"""``quarto bench startup``: whole-process seconds to import ``quarto_env`` and take the first env step.

Example usage::

    quarto bench startup --runs 5

Each run is a new Python process that imports ``quarto_env``, makes ``quarto_env.env()``, resets it and takes one
step (:data:`FIRST_STEP`), timed from outside from its start to its exit. **Warm**: numba's on-disk cache as it is,
after one run that fills it (what every later process of a machine finds). **Cold**: every run with an empty cache
of its own (``NUMBA_CACHE_DIR`` a new temporary folder), as on a fresh machine: whatever the first step compiles,
it compiles. The figures are medians (with the fastest and the slowest run) of the wall-clock seconds and of the
CPU seconds (user + system) that the process and its children used, which a busy machine inflates less; the
machine's load average is printed beside them.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from experiments.options import CommandParser, add_integer_argument

FIRST_STEP = """
import numpy as np
import quarto_env

env = quarto_env.env()
env.reset(seed=0)
observation, *_ = env.last()
env.step(int(np.flatnonzero(observation["action_mask"])[0]))
"""
"""What each timed process runs."""
MAX_RUNS = 100


def main(argv: list[str]) -> int:
    """Time the runs and print one row for warm processes, one for cold."""
    parser = CommandParser(prog="quarto bench startup", description=__doc__.split("\n")[0])
    add_integer_argument(parser, "--runs", 5, "processes timed for each row", fewest=1, most=MAX_RUNS)
    args = parser.parse_args(argv)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"import quarto_env, quarto_env.env(), reset, one step: a new process each run; load average {load}")
    print(f"{'':<32}{'wall s (min-max)':>24}{'cpu s (min-max)':>24}")
    time_process(os.environ)  # fills the cache for the warm runs
    warm = [time_process(os.environ) for _ in range(args.runs)]
    print(_row("warm (numba's cache as it is)", warm))
    cold = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(time_process({**os.environ, "NUMBA_CACHE_DIR": cache}))
    print(_row("cold (an empty numba cache)", cold))
    return 0


def time_process(environment: os._Environ[str] | dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the process and its children) of one run of :data:`FIRST_STEP`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", FIRST_STEP], env=environment, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _row(name: str, runs: list[tuple[float, float]]) -> str:
    cells = []
    for values in zip(*runs, strict=True):
        cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
    return f"{name:<32}{cells[0]:>24}{cells[1]:>24}"
