"""The search behind the minimax agent and the exact solver, as Python runs it: :class:`AlphaBetaSearch` holds a rule
variant's transposition table and settings, runs the compiled search on a position in one thread or several,
and stops it on Ctrl-C or at a deadline.

The compiled search is split by job:

* :mod:`agents.solver.kernels` -- the negamax alpha-beta kernels (where plies, nodes and scores are defined);
* :mod:`agents.solver.ordering` -- the order in which they try the moves;
* :mod:`agents.solver.table` -- the transposition table: its layout, its keys, the probe and the store;
* :mod:`agents.solver.table_files` -- a table saved to a file and loaded back (the state of a long proof).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable

import numpy as np

from agents import interrupts
from agents.solver.kernels import (
    ABORTED,
    BEST_ACTION,
    BUSY_SLOTS,
    EXACT_DEPTH,
    HITS,
    INFINITY,
    NODES,
    PATH_MOVES,
    PATH_PLIES,
    PROBES,
    STATS_SIZE,
    search_root,
)
from agents.solver.ordering import new_scratch
from agents.solver.table import DEFAULT_TABLE_BITS, MAX_TABLE_BITS, MIN_TABLE_BITS, new_table
from quarto_env.core import RulesError, State, Variant, compiled_fields
from quarto_env.errors import QuartoValueError
from quarto_env.symmetry import byte_tables

DEFAULT_CANONICAL_EMPTIES = 9
"""Give nodes with at least this many empty squares are keyed by their canonical form."""
DEFAULT_DRAW_TEST_EMPTIES = 10
"""Give nodes with at most this many empty squares are tested for a certain draw."""
DEFAULT_TABLE_EMPTIES = 6
"""Give nodes with fewer empty squares are not stored: they are cheaper to search again than to look up."""
DEFAULT_GIVE_ORDER_EMPTIES = 6
"""Give nodes with at least this many empty squares order their pieces (see
:func:`agents.solver.ordering.order_gives`)."""
DEFAULT_ENDGAME_EMPTIES = 6
"""Give nodes with at most this many empty squares, in a search to the end, are searched by
:func:`agents.solver.kernels.endgame`."""


@dataclasses.dataclass(frozen=True)
class AlphaBetaResult:
    """What one call of :meth:`AlphaBetaSearch.run` found."""

    score: int
    """Fail-soft score for the side to move (see :func:`agents.solver.kernels.negamax_give`); meaningless when
    ``aborted``."""
    best_action: int
    """The best action found at the root: a square when placing, a piece when giving."""
    nodes: int
    """Give nodes visited, by every thread."""
    aborted: bool
    """Whether the deadline stopped the search before it finished."""


class AlphaBetaInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a search (see :mod:`agents.interrupts`); what it had found is lost."""


class AlphaBetaSearch:
    """The compiled search for one rule variant, with its own transposition table (kept between calls, so
    that later searches reuse what earlier ones proved).

    ``table_bits``: the table has ``2**table_bits`` entries of 16 bytes
    (:func:`agents.solver.table.table_bits_for` converts a size in MiB). ``jobs``: threads that search each
    position together, sharing the table ("lazy SMP": every thread searches the whole tree, leaving for later
    the placements whose subtrees another thread is searching -- the deferral of ABDADA -- and what one thread
    proves, the others find in the table; the first to finish answers). The other options are thresholds on
    the empty squares of a give node, tuned on the benchmark sample (``quarto bench solver``); every setting
    gives the same exact values:

    * ``canonical_empties``: at least this many -- keyed by the canonical form under the game's symmetries
      (17 turns the symmetries off);
    * ``draw_test_empties``: at most this many -- tested for a certain draw (-1 turns the test off);
    * ``table_empties``: at least this many -- stored in the transposition table;
    * ``give_order_empties``: at least this many -- all pieces ordered before the first is tried;
    * ``endgame_empties``: at most this many, in a search to the end -- searched by
      :func:`agents.solver.kernels.endgame` (2 turns it off).

    Ctrl-C stops a running search within milliseconds and raises :class:`AlphaBetaInterrupted` (a
    ``KeyboardInterrupt``). :meth:`progress` may be called from another thread while a search runs.
    """

    def __init__(
        self,
        variant: Variant,
        table_bits: int = DEFAULT_TABLE_BITS,
        canonical_empties: int = DEFAULT_CANONICAL_EMPTIES,
        draw_test_empties: int = DEFAULT_DRAW_TEST_EMPTIES,
        table_empties: int = DEFAULT_TABLE_EMPTIES,
        give_order_empties: int = DEFAULT_GIVE_ORDER_EMPTIES,
        endgame_empties: int = DEFAULT_ENDGAME_EMPTIES,
        jobs: int = 1,
    ) -> None:
        if not MIN_TABLE_BITS <= table_bits <= MAX_TABLE_BITS:
            raise QuartoValueError(f"table_bits must be {MIN_TABLE_BITS}-{MAX_TABLE_BITS}, got {table_bits}")
        if jobs < 1:
            raise QuartoValueError(f"jobs must be at least 1, got {jobs}")
        self.variant = variant
        self.jobs = jobs
        self.settings = np.array(
            [canonical_empties, draw_test_empties, table_empties, give_order_empties, endgame_empties], dtype=np.int64
        )
        self.scratch = np.stack([new_scratch(EXACT_DEPTH + 2, variant.group_array) for _ in range(jobs)])
        self.table = new_table(table_bits)
        self.stats = np.zeros((jobs, STATS_SIZE), dtype=np.int64)
        """One row of stats per thread, for the latest search."""
        self.shared = np.zeros(1 + BUSY_SLOTS if jobs > 1 else 1, dtype=np.int64)
        """What the threads of a search share: ``shared[0]`` is the stop flag (non-zero: every thread stops;
        ``STOPPED_BY_*``); with several threads, the marks of the boards being searched follow."""
        self._low, self._high = byte_tables(variant.squares)
        self._groups = variant.group_array
        interrupts.install()

    def clear(self) -> None:
        """Forget everything stored in the transposition table."""
        self.table[:] = 0

    def progress(self) -> dict[str, int]:
        """Counts of the running (or latest) search, summed over its threads: ``nodes``, ``probes``, ``hits``."""
        totals = self.stats.sum(axis=0)
        return {"nodes": int(totals[NODES]), "probes": int(totals[PROBES]), "hits": int(totals[HITS])}

    def path(self) -> list[tuple[int, int]]:
        """``(searched, total)`` moves at the first plies of the first thread's current path (see
        ``PATH_MOVES``), down to the first node not reached yet."""
        pairs = []
        for ply in range(PATH_PLIES):
            searched, total = self.stats[0, PATH_MOVES + 2 * ply : PATH_MOVES + 2 * ply + 2]
            if total == 0:
                break
            pairs.append((int(searched), int(total)))
        return pairs

    def run(
        self,
        state: State,
        depth: int = EXACT_DEPTH,
        alpha: int = -INFINITY,
        beta: int = INFINITY,
        deadline: float = math.inf,
    ) -> AlphaBetaResult:
        """Search ``state`` (not over, nothing claimable) ``depth`` plies deep within ``(alpha, beta)``, stopping
        when ``time.perf_counter()`` passes ``deadline`` (a watcher thread sets the stop flag then: see
        :func:`agents.interrupts.deadline`); raises :class:`AlphaBetaInterrupted` on Ctrl-C."""
        if state.over or state.claimable:
            raise RulesError("the search takes a position that is not over and has nothing to declare")
        if depth < 1:
            raise QuartoValueError(f"depth must be at least 1 ply, got {depth}")
        self.stats[:] = 0
        self.stats[:, BEST_ACTION] = -1
        self.shared[:] = 0
        fields = compiled_fields(state)
        scores = [0] * self.jobs
        finished = [False] * self.jobs

        def search(thread: int) -> None:
            scores[thread] = search_root(
                *fields, alpha, beta, depth,
                self._groups, self.variant.counted, self._low, self._high, self.settings, self.table,
                self.scratch[thread], self.stats[thread], 0, self.shared,
            )  # fmt: skip
            finished[thread] = not self.stats[thread, ABORTED]
            if finished[thread]:
                self.shared[0] = interrupts.STOPPED_BY_ANOTHER_THREAD

        with interrupts.stopping(self.shared), interrupts.deadline(self.shared, deadline):
            if self.jobs == 1:
                search(0)
            else:
                _run_threads(search, self.jobs, self.shared)
        if self.shared[0] == interrupts.STOPPED_BY_CTRL_C and not any(finished):
            raise AlphaBetaInterrupted
        answer = finished.index(True) if any(finished) else 0
        return AlphaBetaResult(
            int(scores[answer]),
            int(self.stats[answer, BEST_ACTION]),
            int(self.stats[:, NODES].sum()),
            not finished[answer],
        )


def _run_threads(target: Callable[[int], None], count: int, stop: np.ndarray) -> None:
    """Run ``target(0)``, ..., ``target(count - 1)`` in threads and wait for all. Waiting in short steps keeps
    this thread able to take Ctrl-C, which stops them all."""
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.05)
    except KeyboardInterrupt:
        stop[0] = interrupts.STOPPED_BY_CTRL_C
        for thread in threads:
            thread.join()
        raise AlphaBetaInterrupted from None
