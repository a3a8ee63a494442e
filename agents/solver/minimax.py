"""The minimax agent, the exact solver as a function (:func:`solve`) and as an agent.

All three run the compiled negamax of :mod:`agents.solver.kernels` (where plies, nodes and scores are defined) and
share its rules shortcuts. On top of it, this module handles the declaration variant, which the search never
sees: a player who can declare does so at once -- it wins, and waiting could only hand the claim to the
opponent or let the group die. A false declaration never helps (it loses, or under the ``penalty`` policy
changes nothing), so it is never chosen.

Example::

    from agents.solver.minimax import solve
    from quarto_env.notation import parse_position

    solve(parse_position("6.e2....d8..9..1 5")).value    # 0: a draw with perfect play
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from time import perf_counter

import numpy as np

from agents.base import Agent
from agents.solver.alphabeta import AlphaBetaSearch
from agents.solver.book import OpeningBook, shipped_book
from agents.solver.kernels import EXACT_DEPTH, HITS, NODES, PROBES, WIN
from agents.solver.value_cache import ValueCache, default_cache
from quarto_env.checks import checked_number
from quarto_env.core import (
    ALL_SQUARES,
    DECLARE,
    NO_WINNER,
    STANDARD,
    RulesError,
    State,
    Variant,
    bits,
    legal_actions,
    lowest_bit,
    safe_gives,
    step,
    useful_action_mask,
    winning_squares_for,
)
from quarto_env.notation import format_position

# ---------------------------------------------------------------------------------------------------------
# The exact solver
# ---------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class SolveResult:
    """The exact value of a position under perfect play, and the actions that keep it."""

    value: int
    """+1 win, 0 draw, -1 loss, for the side to move."""
    best_actions: list[int] | None
    """Every action that keeps ``value``, in the env's action space for the current phase: squares when placing,
    pieces when giving, 16 (``DECLARE``) to declare. In a lost position every legal action loses, and all are
    listed (a false declaration excepted). ``None`` when solved with ``value_only``."""
    action_values: dict[int, int] | None
    """With ``all_moves``: the value, for the side to move, of each legal action; otherwise ``None``."""
    nodes: int
    """Give nodes searched, over every search this answer took."""
    table_hit_rate: float | None
    """Share of the transposition-table lookups of those searches that found their position (``None``: no
    lookup)."""
    seconds: float
    """Wall time of the call."""

    def to_dict(self) -> dict:
        """Plain data for one JSON line (``action_values`` keys become strings in JSON)."""
        return dataclasses.asdict(self)


class Solver:
    """The exact solver for one rule variant. It keeps its transposition table between calls, so solving many
    positions of one game (or nearby ones) in one process gets faster; :meth:`clear` forgets it.

    ``cache``: a :class:`~agents.solver.value_cache.ValueCache` whose values are loaded into the table now, and which
    gets the new exact values of every solve that took more than ``HARVEST_SECONDS``.

    ``book``: an :class:`~agents.solver.book.OpeningBook` that answers, without search, for every position it covers
    (:meth:`~agents.solver.book.OpeningBook.covers`): the early game, where the search would take minutes.

    ``checkpoint``: called every ``checkpoint_every`` seconds of searching, at a moment when no search is
    running, so that it may save :attr:`table` (``quarto solve --resume``). A search is stopped for it and
    started again: what it had proven is in the table, so it picks up where it was.
    """

    def __init__(
        self,
        variant: Variant = STANDARD,
        cache: ValueCache | None = None,
        checkpoint: Callable[[], None] | None = None,
        checkpoint_every: float = 60.0,
        book: OpeningBook | None = None,
        **search_options: int,
    ) -> None:
        """``search_options``: keyword arguments of :class:`agents.solver.alphabeta.AlphaBetaSearch` (table size, jobs,
        thresholds)."""
        self.variant = variant
        self.book = book
        self.search = AlphaBetaSearch(variant, **search_options)
        self.cache = cache
        if cache is not None:
            cache.load_into(self.search.table)
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.nodes = 0
        """Give nodes searched by this solver so far."""
        self.probes = 0
        self.hits = 0
        """Table lookups by this solver so far, and how many found their position."""
        self.task = ""
        """What the solver is doing now, in words, for progress reports."""
        self._proven_best = -1

    @property
    def table(self) -> np.ndarray:
        """The transposition table (see :mod:`agents.solver.table`)."""
        return self.search.table

    def running_counts(self) -> dict[str, int]:
        """``nodes``, ``probes`` and ``hits`` so far, the running search included (safe to call from another
        thread)."""
        now = self.search.progress()
        return {name: getattr(self, name) + now[name] for name in ("nodes", "probes", "hits")}

    def clear(self) -> None:
        """Empty the transposition table (for timings that do not depend on earlier calls)."""
        self.search.clear()

    def solve(self, state: State, all_moves: bool = False, value_only: bool = False) -> SolveResult:
        """See :func:`solve`."""
        if state.over:
            raise RulesError(f"position {format_position(state)} is over: there is nothing to solve")
        start = perf_counter()
        if self.book_covers(state):
            return self._solve_from_book(state, all_moves, value_only, start)
        nodes_before, probes_before, hits_before = self.nodes, self.probes, self.hits
        value = self.value(state)
        proven_best = self._proven_best  # the action with which the search proved the value
        actions = bits(useful_action_mask(self.variant, state))
        action_values: dict[int, int] | None = None
        best: list[int] | None = None
        if all_moves:
            action_values = {}
            for i, action in enumerate(legal_actions(self.variant, state)):
                self.task = f"action values: {i} done"
                action_values[action] = self._action_value(state, action, value)
            best = [a for a in actions if action_values[a] == value]
        elif not value_only:
            best = []
            for i, action in enumerate(actions):
                self.task = f"best actions: {i} of {len(actions)} checked"
                if action == proven_best or self._keeps(state, action, value):
                    best.append(action)
        self.task = ""
        self._harvest_if_slow(start)
        probes = self.probes - probes_before
        hit_rate = (self.hits - hits_before) / probes if probes else None
        return SolveResult(value, best, action_values, self.nodes - nodes_before, hit_rate, perf_counter() - start)

    def random_best_action(self, state: State, rng: np.random.Generator) -> tuple[int, int]:
        """``(value, action)``: the exact value of ``state`` (not over) and an action drawn uniformly at random
        among those that keep it. It is the first action that keeps the value in a random order of them all (as
        uniform as drawing from the full list), so one or two null-window searches usually follow the value's,
        where listing every best action (:meth:`solve`) takes one per action."""
        start = perf_counter()
        if self.book_covers(state):
            answer = self._solve_from_book(state, False, False, start)
            return answer.value, int(rng.choice(answer.best_actions or []))
        value = self.value(state)
        proven_best = self._proven_best  # the searches of _keeps change it
        actions = [int(a) for a in rng.permutation(bits(useful_action_mask(self.variant, state)))]
        chosen = next(a for a in actions if a == proven_best or self._keeps(state, a, value))
        self._harvest_if_slow(start)
        return value, chosen

    def book_covers(self, state: State) -> bool:
        """Whether the book gives every action's value of ``state`` (no search needed)."""
        return self.book is not None and self.book.covers(state)

    def _book_knows(self, state: State) -> bool:
        """Whether the book gives ``state``'s value."""
        return self.book is not None and self.book.knows(state)

    def _solve_from_book(self, state: State, all_moves: bool, value_only: bool, start: float) -> SolveResult:
        values = self.book.action_values(state)  # type: ignore[union-attr]
        value = max(values.values())
        best = None if value_only else sorted(a for a, v in values.items() if v == value)
        return SolveResult(value, best, values if all_moves else None, 0, None, perf_counter() - start)

    def _harvest_if_slow(self, start: float) -> None:
        """Give the cache the table's proven values if the call that began at ``start`` took a while."""
        if self.cache is not None and perf_counter() - start > HARVEST_SECONDS:
            self.cache.harvest(self.search.table)

    def value(self, state: State) -> int:
        """The exact value (+1, 0, -1) of ``state`` (not over) for the side to move.

        Two null-window searches: "is it a win?", then, if not, "is it at least a draw?" (12% fewer nodes than
        one search with the full window, on 10 seeded 12-empty positions).
        """
        self._proven_best = DECLARE if state.claimable else -1
        if state.claimable:
            return 1
        if self._book_knows(state):
            return self.book.value(state)  # type: ignore[union-attr]
        self.task = "value: is it a win?"
        if self._score_at_least(state, WIN):
            return 1
        self.task = "value: is it at least a draw?"
        return 0 if self._score_at_least(state, 0) else -1

    def _score_at_least(self, state: State, bound: int) -> bool:
        """Whether the exact score of ``state`` is at least ``bound``: one null-window search (in stretches of
        ``checkpoint_every`` seconds when there is a checkpoint). When it is, the search's best action reaches it
        (kept in ``_proven_best``)."""
        while True:
            deadline = perf_counter() + self.checkpoint_every if self.checkpoint else math.inf
            try:
                result = self.search.run(state, EXACT_DEPTH, alpha=bound - 1, beta=bound, deadline=deadline)
            finally:  # move the search's counts into the solver's
                counts = self.search.progress()
                self.search.stats[:, [NODES, PROBES, HITS]] = 0
                self.nodes += counts["nodes"]
                self.probes += counts["probes"]
                self.hits += counts["hits"]
            if not result.aborted:
                break
            if self.checkpoint is None:  # only a checkpoint's deadline ends an exact search early
                raise RuntimeError("an exact search stopped early with no checkpoint to call: a bug in the solver")
            self.checkpoint()
        if result.score >= bound:
            self._proven_best = result.best_action
        return result.score >= bound

    def _action_value(self, state: State, action: int, value: int) -> int:
        """The exact value of ``action`` for the side to move of ``state`` (whose value is ``value``).

        No action is worth more than its position, so only the null-window searches that tell apart the values
        up to ``value`` run: none when the position is lost, one when it is drawn (where the child's own
        :meth:`value` would first ask whether it is a win, in vain), at most two when it is won."""
        child = step(self.variant, state, action)
        if child == state:  # a false declaration ignored under the "penalty" policy: nothing changed
            return value
        if child.over:
            return 0 if child.winner == NO_WINNER else (1 if child.winner == state.to_move else -1)
        if child.claimable or self._book_knows(child):  # answered without search
            child_value = self.value(child)
            return child_value if child.to_move == state.to_move else -child_value
        for candidate in range(value, -1, -1):  # value, then lower values but a loss; below them all: a loss
            if self._keeps(state, action, candidate):
                return candidate
        return -1

    def _keeps(self, state: State, action: int, value: int) -> bool:
        """Whether ``action`` keeps ``value``: one null-window search instead of an exact value."""
        if value == -1:
            return True
        child = step(self.variant, state, action)
        if child.over or child.claimable or self._book_knows(child):
            return self._action_value(state, action, value) >= value
        if child.to_move == state.to_move:
            return self._score_at_least(child, value * WIN)
        return not self._score_at_least(child, -value * WIN + 1)


HARVEST_SECONDS = 0.2
"""A solve that took longer adds its exact values to the solver's cache; faster ones are cheaper to redo than
to keep."""

_default_solvers: dict[Variant, Solver] = {}


def default_solver(variant: Variant) -> Solver:
    """The solver that :func:`solve` uses for ``variant``, created on first use and kept for the process. It uses
    the value cache of :func:`agents.solver.value_cache.default_cache` and the variant's shipped opening book
    (:func:`agents.solver.book.shipped_book`), where there is one."""
    if variant not in _default_solvers:
        _default_solvers[variant] = Solver(variant, cache=default_cache(variant), book=shipped_book(variant))
    return _default_solvers[variant]


def solve(state: State, variant: Variant = STANDARD, all_moves: bool = False) -> SolveResult:
    """The exact value of ``state`` for the side to move under perfect play, its best actions, and with
    ``all_moves`` the value of every legal action.

    Raises :class:`~quarto_env.core.RulesError` for a position that is over. Calls for one variant share a
    transposition table within the process, and values proven once are kept across runs
    (:mod:`agents.solver.value_cache`). Practical up to about 12 empty squares (about a second each in
    the benchmark, ``quarto bench solver``).
    """
    return default_solver(variant).solve(state, all_moves)


# ---------------------------------------------------------------------------------------------------------
# Agents
# ---------------------------------------------------------------------------------------------------------
TIME_SAFETY = 0.9
"""Share of a move's time budget given to the search; the rest covers Python overhead and the wake-up of the
deadline's timer thread."""
TIME_RESERVE = 0.0005
"""Seconds kept back from every budget, for the call's fixed cost."""
DEFAULT_DEPTH = 2
"""Plies searched by ``minimax`` without a depth or a time budget."""
SMALL_TABLE_MAX_DEPTH = 6
SMALL_TABLE_BITS = 16
"""Minimax at a fixed depth up to ``SMALL_TABLE_MAX_DEPTH`` plies uses a table of ``2**16`` entries (1 MiB: an
entry is 16 bytes) instead of the default ``2**21`` of :mod:`agents.solver.table` (32 MiB)."""


class MinimaxAgent(Agent):
    """Negamax alpha-beta to a depth in plies (one placement or one give each), with the evaluation of
    :mod:`agents.solver.kernels` at the horizon, or iterative deepening under a time budget per move.

    * ``depth=N`` (``time=0``): search ``N`` plies.
    * ``time=S``: search 1, 2, 3, ... plies until ``S`` seconds (wall clock, Python included) would be
      exceeded, and play the best action of the deepest search that finished -- up to ``depth`` plies when
      ``depth`` is set too, or to the end of the game. It always answers within ``S``: the search checks the
      stop flag that a timer thread sets at the deadline, and abandons an unfinished iteration.
    * neither: ``depth=2``.

    Any depth at least the plies left in the game is an exact search. The agent takes a win when it sees one,
    declares as soon as it may (its own group, or one the opponent missed) and never declares falsely. It is
    deterministic given the position. After each ``act``: ``last_nodes``, ``last_depth`` (plies of the deepest
    finished search), ``last_score`` (see :mod:`agents.solver.kernels`), ``last_seconds``.
    """

    def __init__(self, variant: Variant = STANDARD, seed: int | None = None, depth: int = 0, time: float = 0.0):
        super().__init__(variant, seed)
        # Deeper than the end of every game is the same search. (Specs stop at agents.specs.MAX_DEPTH: a move
        # searched deeper from an early position takes minutes to hours.)
        checked_number(depth, "minimax depth", minimum=0, maximum=EXACT_DEPTH, integer=True)
        checked_number(time, "minimax time", minimum=0)
        self.time_budget = time
        self.max_depth = depth or (EXACT_DEPTH if time else DEFAULT_DEPTH)
        # A shallow fixed-depth search stores few positions: a small table keeps many agents cheap in memory.
        shallow = not time and self.max_depth <= SMALL_TABLE_MAX_DEPTH
        self.search = AlphaBetaSearch(variant, table_bits=SMALL_TABLE_BITS) if shallow else AlphaBetaSearch(variant)
        self.last_nodes = 0
        self.last_depth = 0
        self.last_score = 0
        self.last_seconds = 0.0
        self._warm_up()

    def _warm_up(self) -> None:
        """Run every part of the search once now (the first calls into compiled code cost milliseconds), so that
        the first move's budget does not pay for it."""
        far_future = perf_counter() + 3600.0  # a finite deadline, so that the deadline's timer runs too
        for start in (State(), step(self.variant, State(), 0)):  # a give and a placement
            for depth in range(1, 6):  # odd and even depths take different paths
                self.search.run(start, depth, deadline=far_future)
        self.search.clear()

    def act(self, state: State) -> int:
        start = perf_counter()
        deadline = start + self.time_budget * TIME_SAFETY - TIME_RESERVE if self.time_budget else math.inf
        self.last_nodes, self.last_depth, self.last_score = 0, 0, 0
        action = DECLARE if state.claimable else self._deepening(state, deadline)
        self.last_seconds = perf_counter() - start
        return action

    def _deepening(self, state: State, deadline: float) -> int:
        """The best action of the deepest search that finishes before ``deadline``."""
        plies_left = 2 * state.num_empty - (1 if state.placing else 0)
        action = _tactical_action(self.variant, state)  # the answer if not even one ply can finish in time
        depth = self.max_depth if deadline == math.inf else 1
        while True:
            result = self.search.run(state, min(depth, plies_left), deadline=deadline)
            self.last_nodes += result.nodes
            if result.aborted:
                break
            action, self.last_depth, self.last_score = result.best_action, min(depth, plies_left), result.score
            if depth >= min(self.max_depth, plies_left) or abs(result.score) == WIN:
                break
            depth += 1
        return action


class SolverAgent(Agent):
    """Perfect play: an action that keeps the exact value of the position, chosen at random (seeded) among all
    such actions. Exact wherever the variant's opening book covers the position
    (:func:`agents.solver.book.shipped_book`), and from ``empties`` empty squares on, or from the book's ``min_empty``
    when that is more (docs/solver.md gives the time per move): with a shipped book, exact from the first move. Without
    one, earlier positions are too large to solve, and it plays iterative-deepening minimax with ``time`` seconds per
    move -- or, with ``depth`` set, minimax to that many plies, which makes its games reproducible whatever the
    machine's speed. After each ``act``: ``last_value`` (the exact value, or ``None`` before the exact phase),
    ``last_nodes``, ``last_depth`` (plies searched; ``EXACT_DEPTH`` when solved), ``last_seconds``."""

    def __init__(
        self,
        variant: Variant = STANDARD,
        seed: int | None = None,
        empties: int = 12,
        time: float = 1.0,
        depth: int = 0,
    ):
        super().__init__(variant, seed)
        self.solver = Solver(variant, cache=default_cache(variant), book=shipped_book(variant))
        book = self.solver.book
        self.empties = max(empties, book.min_empty) if book else empties
        """Exact (solved live) from this many empty squares on: the book's positions at its bottom are as cheap to
        solve as those at ``empties``, by the book's construction."""
        self.fallback = MinimaxAgent(variant, seed, depth=depth) if depth else MinimaxAgent(variant, seed, time=time)
        self.last_value: int | None = None
        self.last_nodes = 0
        self.last_depth = 0
        self.last_seconds = 0.0

    def act(self, state: State) -> int:
        start = perf_counter()
        if state.num_empty > self.empties and not state.claimable and not self.solver.book_covers(state):
            action = self.fallback.act(state)
            self.last_value, self.last_nodes, self.last_depth = None, self.fallback.last_nodes, self.fallback.last_depth
        else:
            nodes = self.solver.nodes
            self.last_value, action = self.solver.random_best_action(state, self.rng)
            self.last_nodes, self.last_depth = self.solver.nodes - nodes, EXACT_DEPTH
        self.last_seconds = perf_counter() - start
        return action


def _tactical_action(variant: Variant, state: State) -> int:
    """A sound answer that needs no search: a winning square or the first empty one; a safe piece or the first
    available one."""
    if state.placing:
        wins = winning_squares_for(variant, state, state.hand)
        return lowest_bit(wins or ALL_SQUARES & ~state.occupied)
    return lowest_bit(safe_gives(variant, state) or state.available)
