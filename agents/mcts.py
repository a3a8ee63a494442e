"""Monte-Carlo tree search: UCT (Kocsis & Szepesvári 2006) with uniformly random playouts.

A search baseline that needs no evaluation function: from the root, each simulation

1. **selects** children by the UCB1 rule ``mean + c * sqrt(ln N_parent / n_child)`` while every action of a
   node has been tried,
2. **expands** one untried action (chosen at random),
3. **plays out** the rest of the game at random from the new node,
4. **backs up** the result: +1 / 0 / -1 for the player who chose each node's action.

The move played is the root's most visited action. Quarto's turns are "place, then give" by the same
player, so players do not simply alternate along a path: each node remembers who chose its action, and
nothing else in the search assumes alternation. The tree only calls the rules core (``step``,
``legal_actions``, ``State.winner``), so it works unchanged for every variant.

The playout
-----------
Playouts are the hot loop, so they run compiled (:func:`quarto_env.fast.random_playout`), every move through the core's
jitable transition ``apply_action`` -- the same code that ``core.step`` runs. The playout
policy is uniform over squares and pieces and, in the declaration variant, declares exactly when something
is claimable: a random false declaration would only add noise (it loses at once under the "lose" policy),
and a missed claim would make playouts undervalue wins. The *tree* still considers every legal action,
declarations included -- under the ``lose`` policy a false declaration is searched like any move and simply
scores -1 -- so the agent never declares unless its search chose to. (Under the ``penalty`` policy a false
declaration changes nothing in the game, so the tree leaves it out; see ``_tree_actions``.)

``quarto bench mcts`` measures simulations per second, compiled playouts against the same search with
playouts through the Python ``step``.
"""

from __future__ import annotations

import dataclasses
import math
import time as clock

import numba
import numpy as np

from agents.base import Agent
from quarto_env.core import (
    DECLARE,
    INITIAL_STATE,
    NO_WINNER,
    STANDARD,
    State,
    Variant,
    bits,
    legal_actions,
    step,
    useful_action_mask,
)
from quarto_env.fast import RECORD_LENGTH, playout_from

DEFAULT_EXPLORATION = 1.0
"""UCB1's ``c``. The textbook sqrt(2) is for rewards in [0, 1]; with results in [-1, 1] the same bonus is
2 * sqrt(2), and practice usually explores less. A short check (1000 simulations, 30 games each against
minimax:depth=2, ``quarto tournament ... --mode vs-field``) scored c = 0.5 / 0.7 / 1.0 / 1.4 at 0.48 / 0.65 /
0.58 / 0.72 with 95% intervals of about +-0.17: no value clearly better, so 1.0 stays."""


class MCTSAgent(Agent):
    """UCT with random playouts, on a budget of simulations or of seconds per move.

    :param sims: simulations per move (used when ``time`` is 0).
    :param time: seconds per move; when > 0 it replaces the simulation budget (at least one simulation).
    :param c: the exploration constant of UCB1.
    :param playout: ``"compiled"`` (numba, the default) or ``"python"`` (through ``core.step``; a slower
        reference that the benchmark and the tests compare against).
    """

    def __init__(
        self,
        variant: Variant = STANDARD,
        seed: int | None = None,
        sims: int = 2000,
        time: float = 0.0,
        c: float = DEFAULT_EXPLORATION,
        playout: str = "compiled",
    ) -> None:
        super().__init__(variant, seed)
        if sims < 1:
            raise ValueError(f"sims must be >= 1, got {sims}")
        if time < 0:
            raise ValueError(f"time must be >= 0 seconds, got {time}")
        if playout not in PLAYOUTS:
            raise ValueError(f"unknown playout {playout!r}; allowed: {', '.join(PLAYOUTS)}")
        self.sims = sims
        self.time = time
        self.c = c
        self.playout = playout
        self._record = np.empty(PLAYOUT_RECORD_LENGTH, dtype=np.int64)
        if playout == "compiled":
            self._playout(INITIAL_STATE)  # load (or compile) the playout now, not inside a timed move
        self.last_search: SearchStats | None = None
        """Statistics of the latest ``act`` call."""

    def act(self, state: State) -> int:
        """The most visited root action after the search."""
        actions = self._tree_actions(state)
        if len(actions) == 1:
            return actions[0]
        root = _Node(state, NO_WINNER, -1, self._shuffled(actions))
        if self.playout == "compiled":
            # One seed per move from the agent's generator keeps searches reproducible under a fixed seed,
            # whatever else in the process draws from numba's generator between moves.
            seed_playouts(int(self.rng.integers(2**31)))
        start = clock.perf_counter()
        sims = 0
        while sims == 0 or self._budget_left(sims, start):
            self._simulate(root)
            sims += 1
        best = max(root.children, key=lambda child: (child.visits, child.total))
        self.last_search = SearchStats(sims, clock.perf_counter() - start, best.visits, best.total / best.visits)
        return best.action

    def _budget_left(self, sims: int, start: float) -> bool:
        if self.time:
            return clock.perf_counter() - start < self.time
        return sims < self.sims

    def _tree_actions(self, state: State) -> list[int]:
        """The actions the tree searches: every legal one, except a false declaration under the ``penalty``
        policy -- it leaves the position unchanged (a pass, costing only the environment's penalty reward),
        so it can never be better than a real move, and searching it would only repeat the same node."""
        if self.variant.false_declaration == "penalty":
            return bits(useful_action_mask(self.variant, state))
        return legal_actions(self.variant, state)

    def _simulate(self, root: _Node) -> None:
        """One selection-expansion-playout-backup pass."""
        node = root
        path = [root]
        while not node.untried and node.children:
            node = node.best_child(self.c)
            path.append(node)
        if node.untried:
            action = node.untried.pop()
            child_state = step(self.variant, node.state, action)
            child = _Node(child_state, node.state.to_move, action, self._shuffled(self._tree_actions(child_state)))
            node.children.append(child)
            node = child
            path.append(node)
        winner = node.state.winner if node.state.over else self._playout(node.state)
        for visited in path:
            visited.visits += 1
            if winner != NO_WINNER:
                visited.total += 1.0 if winner == visited.mover else -1.0

    def _shuffled(self, actions: list[int]) -> list[int]:
        """``actions`` in random order: expansion pops from the end, so ties never favour low numbers."""
        order = self.rng.permutation(len(actions))
        return [actions[i] for i in order]

    def _playout(self, state: State) -> int:
        """The winner of a random playout from ``state`` (not over), or ``NO_WINNER`` for a draw."""
        if self.playout == "python":
            return python_playout(self.variant, state, self.rng)
        return playout_from(self.variant, state, self._record)[0]


@dataclasses.dataclass(frozen=True)
class SearchStats:
    """What one search did."""

    sims: int
    seconds: float
    visits: int
    """Visits of the chosen action."""
    value: float
    """Mean playout result of the chosen action for the player to move, in [-1, 1]."""


class _Node:
    """A node of the search tree. ``total`` sums the playout results for ``mover``, the player who chose the
    action leading here (``NO_WINNER`` at the root, whose totals are never read)."""

    __slots__ = ("action", "children", "mover", "state", "total", "untried", "visits")

    def __init__(self, state: State, mover: int, action: int, untried: list[int]) -> None:
        self.state = state
        self.mover = mover
        self.action = action
        """The action that led here (-1 at the root)."""
        self.untried = untried
        """Actions not yet expanded, popped from the end."""
        self.children: list[_Node] = []
        self.visits = 0
        self.total = 0.0

    def best_child(self, c: float) -> _Node:
        """The child with the highest UCB1 score (every child has been visited)."""
        log_visits = math.log(self.visits)
        return max(
            self.children,
            key=lambda child: child.total / child.visits + c * math.sqrt(log_visits / child.visits),
        )


# ---------------------------------------------------------------------------------------------------------
# Playouts
# ---------------------------------------------------------------------------------------------------------
PLAYOUT_RECORD_LENGTH = RECORD_LENGTH
"""Room for the actions of any playout: at most 16 gives, 16 placements and a declaration, then ``-1``."""


@numba.njit(cache=True)
def seed_playouts(seed: int) -> None:
    """Seed numba's generator, which the compiled playouts draw from."""
    np.random.seed(seed)


def python_playout(variant: Variant, state: State, rng: np.random.Generator) -> int:
    """The same playout policy through ``core.step``: the reference for the compiled one."""
    while not state.over:
        if state.claimable:
            action = DECLARE
        else:
            choices = bits(useful_action_mask(variant, state))
            action = choices[rng.integers(len(choices))]
        state = step(variant, state, action)
    return state.winner


PLAYOUTS = ("compiled", "python")
