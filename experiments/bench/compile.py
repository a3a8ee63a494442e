"""``quarto compile``: compile the project's numba kernels ahead of time, as a step of the install, so that the
first env step and the first search of every later process load machine code instead of compiling it.

Example usage::

    pip install quarto-env && quarto compile
    quarto compile --jobs 1          # in this process, one group after the other

What it compiles: every kernel that a first session meets, found by running small real workloads rather than
a list of signatures (a list would drift from the code): the AEC env's observation writer for every observation
kind (:mod:`quarto_env.fast`), :class:`~quarto_env.vector.VectorQuarto` steps with every kind and none, the
``mcts`` agent's search (:mod:`agents.tree.uct`, tactical and random playouts, standard rules and the declaration
variant), the AlphaZero search and sessions (:mod:`agents.tree.puct`: self-play with a uniform stand-in for the
network, a one-search session, position encoding, the augmenting symmetries of :mod:`quarto_env.symmetry`), and
the exact solver (:mod:`agents.solver`: an opening-book lookup and a position near the end, all its moves, and the
value cache's load into its table). Every
compiled function of the project is ``cache=True``, so each can be kept; two are not warmed, as no first session
calls them: :func:`quarto_env.fast.play_random_games` (random games for benchmarks and tests) and
:func:`quarto_env.fast.random_below` (inlined into its callers, compiled with them).

Where it goes: numba's on-disk cache, beside the sources in their ``__pycache__`` folders, or under
``NUMBA_CACHE_DIR`` when that is set (then every later process must set the same). The cache belongs to this
machine's CPU, this numba and these sources: an edit to any compiled module of the project compiles all of them
again on first use (:mod:`quarto_env.numba_cache`), and a new ``quarto compile`` fills the cache again.

``quarto compile --clear`` removes that machine code from the project's ``__pycache__`` folders instead (numba's
``.nbi`` and ``.nbc`` files; a ``NUMBA_CACHE_DIR`` of the user's is left alone): ``pip uninstall`` removes only
the files it installed, so run it first to leave nothing behind. The solver's value cache is a file of its own
(:mod:`agents.solver.value_cache`).

It is safe to run again: a second run loads every kernel and compiles nothing (about 3 s). Nothing needs it:
without it, each kernel is compiled the first time a process uses it (the first 2,000-simulation ``mcts`` move
of a fresh install then takes about 7 s instead of about 1 s).

The workloads run in two groups, each in a child process of its own (``--jobs 2``, the default; ``--jobs 1``
runs them in this process), one line per group with its seconds, then one line with the kernels compiled and
loaded and the total seconds. From an empty cache it takes about 65 s of CPU, most of it the observation
planes compiled into each kernel that writes them, split over two cores. ``quarto bench startup --compiled``
times it, and the first move after it.
"""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from experiments.options import CommandParser, add_integer_argument, refuse_unused
from quarto_env.numba_cache import PROJECT_MODULES


class Warmed(NamedTuple):
    """What one group of workloads did: its name, seconds, and its kernels' signatures compiled and loaded."""

    group: str
    seconds: float
    compiled: int
    loaded: int


# ---------------------------------------------------------------------------------------------------------
# The workloads: small real uses of each compiled path
# ---------------------------------------------------------------------------------------------------------
def warm_env() -> None:
    """A few steps of the AEC env with every observation kind, under standard rules and the squares variant (its
    groups are another type for the kernel). Numba loaded first: the env then writes with the kernel at once,
    as it does once a process has stepped for half a second (:data:`quarto_env.env.PYTHON_SECONDS`)."""
    import quarto_env
    import quarto_env.fast  # loads numba
    from quarto_env.observation import OBSERVATION_KINDS

    for kind in OBSERVATION_KINDS:
        for flags in ({}, {"squares": True}):
            env = quarto_env.env(observation=kind, **flags)
            env.reset(seed=0)
            for _ in range(3):
                observation, *_ = env.last()
                env.step(int(np.flatnonzero(observation["action_mask"])[0]))


def warm_vector() -> None:
    """Resets and random steps of :class:`~quarto_env.vector.VectorQuarto` with every observation kind and none
    (and on two threads, with the sampler's: one parallel kernel serves every kind), the planes of every kind from a
    :class:`~quarto_env.vector.GameBatch` (as training's batched games), and steps of the Gymnasium vector env
    (:class:`~quarto_env.vector_env.QuartoVectorVsAgent`) on one thread and two."""
    from quarto_env.core import STANDARD
    from quarto_env.observation import OBSERVATION_KINDS
    from quarto_env.vector import GameBatch, RandomLegalActions, VectorQuarto
    from quarto_env.vector_env import QuartoVectorVsAgent

    for name, threads in [*((name, 1) for name in (*OBSERVATION_KINDS, None)), (None, 2)]:
        envs = VectorQuarto(4, observation=name, seed=0, threads=threads)
        draw = RandomLegalActions(envs.num_envs, seed=0, threads=threads)
        _, info = envs.reset()
        for _ in range(3):
            *_, info = envs.step(draw(info["action_mask"]))
    batch = GameBatch(STANDARD, 4)
    for kind in OBSERVATION_KINDS.values():
        batch.observe(np.arange(4), kind)
    for threads in (1, 2):  # the Gymnasium vector env's own kernels, and its planes on threads
        vector_env = QuartoVectorVsAgent(4, observation="parity", threads=threads)
        _, info = vector_env.reset(seed=0)
        vector_env.step(np.argmax(info["action_mask"], axis=1))


def warm_uct() -> None:
    """A few simulations of the ``mcts`` agent from the opening: both playouts, standard rules and declaration."""
    from agents.tree.choices import PLAYOUTS
    from agents.tree.uct import UCTAgent
    from quarto_env.core import INITIAL_STATE, STANDARD, Variant

    for variant in (STANDARD, Variant.make(declaration=True)):
        for playout in PLAYOUTS:
            UCTAgent(variant, seed=0, sims=16, playout=playout).act(INITIAL_STATE)


def warm_alphazero() -> None:
    """A self-play game and a one-search session on a uniform stand-in for the network, and their samples'
    planes and symmetries, as training uses them."""
    from agents.tree.puct import PUCTSearch
    from agents.tree.sessions import PUCTOptions, PUCTSession, SelfPlaySession
    from quarto_env.core import INITIAL_STATE, STANDARD, position_array
    from quarto_env.observation import DEFAULT_OBSERVATION, OBSERVATION_KINDS
    from quarto_env.symmetry import Symmetries

    options = PUCTOptions(simulations=4)
    session = SelfPlaySession(1, options, seed=0).run(_uniform_evaluation)
    samples = session.samples()
    samples.observations  # noqa: B018  # encodes the samples' positions
    symmetries = Symmetries(samples.variant)
    symmetries.apply(samples.positions, samples.policy, np.random.default_rng(0))
    symmetries.position_keys(samples.positions)
    search = PUCTSearch(STANDARD, OBSERVATION_KINDS[DEFAULT_OBSERVATION], None, max_games=1, max_sims=4)
    PUCTSession(search, position_array([INITIAL_STATE]), sims=4).run(_uniform_evaluation)


def _uniform_evaluation(batch: object) -> tuple[np.ndarray, np.ndarray]:
    """Equal logits and a zero value for every leaf: the network's place, without a network."""
    leaves = len(batch.observations)  # type: ignore[attr-defined]
    return np.zeros((leaves, 16), dtype=np.float32), np.zeros(leaves, dtype=np.float32)


def warm_solver() -> None:
    """The solver on the opening (a lookup in the shipped opening book, where there is one) and on a position near
    the end (the search, its ordering and table), every move's value; without the value cache, which would keep
    the values on disk."""
    from agents.solver.book import shipped_book
    from agents.solver.minimax import Solver
    from quarto_env.core import INITIAL_STATE, STANDARD, legal_actions, step

    solver = Solver(STANDARD, book=shipped_book(STANDARD))
    if solver.book_covers(INITIAL_STATE):  # else a proof of the whole game: minutes
        solver.solve(INITIAL_STATE)
    state, rng = INITIAL_STATE, np.random.default_rng(0)
    while bin(state.occupied).count("1") < 9 or state.hand < 0:
        if state.over:
            state, rng = INITIAL_STATE, np.random.default_rng(int(rng.integers(2**31)))
        state = step(STANDARD, state, int(rng.choice(legal_actions(STANDARD, state))))
    solver.solve(state, all_moves=True)
    # The value cache's load into a solver's table (agents.solver.value_cache), which a grade meets once the cache
    # holds values: no workload of a fresh machine reaches it, so its kernel is warmed on no entries.
    from agents.solver.table import new_table, store_entries

    store_entries(new_table(4), np.zeros((0, 4), dtype=np.int64))


GROUPS: dict[str, tuple[Callable[[], None], ...]] = {
    "vector env, mcts and solver": (warm_vector, warm_uct, warm_solver),
    "env and alphazero": (warm_env, warm_alphazero),
}
"""The workloads in two groups of about equal time. No kernel is in both (the observation encoder and the
batched games' steps are in the second alone): two processes saving one kernel's cache at once could pair one's
index with the other's machine code."""


# ---------------------------------------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------------------------------------
def main(argv: list[str]) -> int:
    """Run the groups of workloads (in ``--jobs`` processes) and print a line per group, then the totals."""
    parser = CommandParser(prog="quarto compile", description=__doc__.split("\n\n")[0])
    add_integer_argument(
        parser, "--jobs", len(GROUPS), "processes running the groups (1: this one)", fewest=1, most=len(GROUPS)
    )
    parser.add_argument(
        "--clear", action="store_true", help="remove the compiled kernels from the project's folders, compile nothing"
    )
    args = parser.parse_args(argv)
    if args.clear:
        refuse_unused(parser, args, "a compile, not --clear", "--jobs")
        removed = clear_cache()
        print(f"removed {len(removed)} cache files of numba from the project's __pycache__ folders")
        return 0
    start = time.perf_counter()
    results = []
    for warmed in _warm_groups(args.jobs):
        print(f"{warmed.group}: {warmed.seconds:.1f} s")
        results.append(warmed)
    compiled, loaded = sum(r.compiled for r in results), sum(r.loaded for r in results)
    print(f"kernels compiled: {compiled}, loaded: {loaded}; {time.perf_counter() - start:.1f} s")
    return 0


NUMBA_CACHE_FILES = ("*.nbi", "*.nbc")
"""Numba's cache files: an index per source file and the machine code of each compiled signature."""


PACKAGES_ROOT = Path(__file__).resolve().parents[2]
"""The folder that holds the project's packages: the checkout, or ``site-packages``."""


def clear_cache(root: Path = PACKAGES_ROOT) -> list[Path]:
    """Remove numba's cache files from the ``__pycache__`` folders of the project's packages under ``root``; the
    files removed."""
    removed = []
    for package in PROJECT_MODULES:
        folder = root / package
        for pattern in NUMBA_CACHE_FILES:
            for path in folder.glob(f"**/__pycache__/{pattern}"):
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def _warm_groups(jobs: int) -> list[Warmed]:
    """The groups run here (``jobs`` 1) or in ``jobs`` fresh child processes, in the order they finish."""
    if jobs == 1:
        return [warm_group(name) for name in GROUPS]
    # Fresh processes ("spawn"), not forks: each starts with numba's state as a user's process does.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [pool.submit(warm_group, name) for name in GROUPS]
        return [future.result() for future in concurrent.futures.as_completed(futures)]


def warm_group(name: str) -> Warmed:
    """Run the workloads of group ``name``; its seconds and the signatures its kernels compiled and loaded."""
    start = time.perf_counter()
    for workload in GROUPS[name]:
        workload()
    compiled, loaded = cache_counts()
    return Warmed(name, time.perf_counter() - start, compiled, loaded)


def cache_counts() -> tuple[int, int]:
    """The signatures that the project's kernels (its ``cache=True`` compiled functions) compiled in this process
    (numba's cache misses) and loaded from the cache (hits). Functions compiled into a kernel from a cached file
    are not counted: they were not needed."""
    from numba.core.dispatcher import Dispatcher

    compiled = loaded = 0
    for dispatcher in project_dispatchers(gc.get_objects(), Dispatcher):
        stats = dispatcher.stats  # type: ignore[attr-defined]
        if stats.cache_path is not None:  # not a ``@jitable`` function compiled inside a kernel
            compiled += sum(stats.cache_misses.values())
            loaded += sum(stats.cache_hits.values())
    return compiled, loaded


def project_dispatchers(objects: list[object], dispatcher_type: type) -> list[object]:
    """Those of ``objects`` that are numba dispatchers of a function of the project."""
    return [
        item
        for item in objects
        if isinstance(item, dispatcher_type)
        and getattr(item, "py_func", None) is not None
        and item.py_func.__module__.split(".")[0] in PROJECT_MODULES  # type: ignore[attr-defined]
    ]
