"""Monte-Carlo tree search: UCT (Kocsis & Szepesvári 2006) with tactical playouts, and proven values on demand.

A search baseline that needs no evaluation function: from the root, each simulation

1. **selects** children by the UCB1 rule ``mean + c * sqrt(ln N_parent / n_child)`` while every action of a
   node has been tried, stopping at a node whose value is proven,
2. **expands** one untried action (chosen at random),
3. **plays out** the rest of the game from the new node (a proven node: its value, no playout),
4. **backs up** the result: +1 / 0 / -1 for the player who chose each node's action; and, MCTS-Solver
   (Winands, Björnsson & Saito 2008) with draws, when the new node ends the game, the values its end proves:
   a node is won for its mover as soon as one child is, else known once all its children are (``prove``, off by
   default: it made no measured difference at equal time against quartors).

The move played is the root's most visited action; with ``prove``, a proven win if the root has one, never a proven
loss while another action is not one, and a search stops once the root's value is proven. Quarto's turns are "place,
then give" by the same player, so players do not simply alternate along a path: each simulation records who chose
each action of its path, and nothing else in the search assumes alternation. The tree only calls the rules core
(``apply_action``, ``legal_mask``, ``useful_mask``), so it works unchanged for every variant.

The playout
-----------
The playout (``playout="tactical"``, :func:`tactical_playout`) plays one-ply tactics: a placement wins when the
piece in hand can, a give hands over no piece that lets the receiver win while a safe one is left, and the rest is
uniform. It costs about 1.5 uniform playouts (``playout="random"``, :func:`quarto_env.fast.random_playout`) at the
opening, about one late in the game, and tells far more: a uniform give loses at once in most middle-game positions,
so a uniform playout's result says little about the move searched (docs/arena.md measures both). Either declares, in
the declaration variant, exactly when something is claimable: a random false declaration would only add noise (it
loses at once under the "lose" policy), and a missed claim would make playouts undervalue wins. The *tree* still
considers every legal action, declarations included -- under the ``lose`` policy a false declaration is searched
like any move and simply scores -1 -- so the agent never declares unless its search chose to. (Under the ``penalty``
policy a false declaration changes nothing in the game, so the tree leaves it out; see :func:`searched_actions`.)

Compiled
--------
The whole search runs compiled, one call per move (:func:`run_simulations`): the tree lives in preallocated arrays
(:class:`UCTTree`), a simulation replays its path's actions from the root through the core's jitable transition
``apply_action`` -- the same code that ``core.step`` runs -- and so do the playouts. Its random draws (expansion
order, playouts) come from the tree's own generator (:func:`quarto_env.fast.random_below`), seeded once per move
from the agent's: a seed gives the same games.

``quarto bench mcts`` plays it against quartors, a compiled peer, at equal wall time per turn.
"""

from __future__ import annotations

import dataclasses
import math
import time as clock

import numpy as np
from numba.extending import register_jitable

from agents.base import Agent
from agents.tree.choices import DEFAULT_PLAYOUT, DEFAULT_UCT_SIMULATIONS, PLAYOUTS, simulations_per_move
from quarto_env.core import (
    ALL_SQUARES,
    DECLARE,
    FIELD_OVER,
    FIELD_TO_MOVE,
    FIELD_WINNER,
    MAX_GAME_LENGTH,
    NO_PIECE,
    NO_WINNER,
    NUM_FIELDS,
    STANDARD,
    State,
    Variant,
    apply_action,
    compiled_fields,
    legal_mask,
    lowest_bit,
    position_fields,
    step_position,
    useful_mask,
    winning_pieces,
    winning_squares,
)
from quarto_env.errors import QuartoValueError
from quarto_env.fast import RECORD_LENGTH, new_generator, random_member, random_playout
from quarto_env.kernel import kernel

DEFAULT_EXPLORATION = 1.0
"""UCB1's ``c``. The textbook sqrt(2) is for rewards in [0, 1]; with results in [-1, 1] the same bonus is
2 * sqrt(2), and practice usually explores less. A short check (1000 simulations, 30 games each against
minimax:depth=2, ``quarto tournament ... --mode vs-field``) scored c = 0.5 / 0.7 / 1.0 / 1.4 at 0.48 / 0.65 /
0.58 / 0.72 with 95% intervals of about +-0.17: no value clearly better, so 1.0 stays."""


class UCTAgent(Agent):
    """UCT with tactical (or random) playouts, and proven values on demand, on a budget of simulations or seconds.

    :param sims: simulations per move (:data:`~agents.tree.choices.DEFAULT_UCT_SIMULATIONS` when ``None``; not
        with ``time``; fewer once the root's value is proven).
    :param time: seconds per move; when > 0 it replaces the simulation budget (at least one simulation; less time
        once the root's value is proven).
    :param c: the exploration constant of UCB1.
    :param playout: ``tactical`` or ``random`` (:data:`PLAYOUTS`).
    :param prove: back proven values up the tree (MCTS-Solver); ``False`` (the default): plain UCT. Measured
        against quartors at equal time it made no difference beyond the noise of 200 games (docs/arena.md).
    """

    def __init__(
        self,
        variant: Variant = STANDARD,
        seed: int | None = None,
        sims: int | None = None,
        time: float = 0.0,
        c: float = DEFAULT_EXPLORATION,
        playout: str = DEFAULT_PLAYOUT,
        prove: bool = False,
    ) -> None:
        super().__init__(variant, seed)
        if time < 0:
            raise QuartoValueError(f"time must be >= 0 seconds, got {time}")
        sims = simulations_per_move(sims, time, DEFAULT_UCT_SIMULATIONS)
        if sims < 1:
            raise QuartoValueError(f"sims must be >= 1, got {sims}")
        if playout not in PLAYOUTS:
            raise QuartoValueError(f"playout must be one of {', '.join(PLAYOUTS)}, got {playout!r}")
        self.sims = sims
        self.time = time
        self.c = c
        self.playout = playout
        self.prove = prove
        self.last_search: UCTStats | None = None
        """Statistics of the latest ``act`` call (``None`` after a forced action: no search)."""
        self._search_tree: UCTTree | None = None

    def act(self, state: State) -> int:
        """The root's most visited action after the search (with ``prove``: a proven win, else the most visited action
        that is not a proven loss); a forced action (the only one searched) at once."""
        # One seed per move from the agent's generator: a fixed seed gives the same searches.
        seed = int(self.rng.integers(2**31))
        start = clock.perf_counter()
        tree = self._tree()
        tree.start(state, self.variant, seed)
        while True:
            tree.simulate(self.sims if not self.time else TIMED_CHUNK, self.c, self.playout == "tactical", self.prove)
            if not self.time or tree.sims == 0 or tree.solved or clock.perf_counter() - start >= self.time:
                break
            tree.reserve(TIMED_CHUNK)
        action, visits, total = tree.best
        searched = tree.sims > 0
        self.last_search = (
            UCTStats(tree.sims, clock.perf_counter() - start, visits, total / visits) if searched else None
        )
        return action

    def _tree(self) -> UCTTree:
        """The agent's tree, allocated at its first move and reused: room for ``sims`` simulations (one node each),
        or for the first chunk under a time budget (it grows as the search goes on)."""
        if self._search_tree is None:
            self._search_tree = UCTTree(self.sims + 1 if not self.time else TIMED_CHUNK + 1)
        return self._search_tree


TIMED_CHUNK = 256
"""Simulations between two looks at the clock under a time budget: about a millisecond of search."""


@dataclasses.dataclass(frozen=True)
class UCTStats:
    """What one search did."""

    sims: int
    seconds: float
    visits: int
    """Visits of the chosen action."""
    value: float
    """Mean playout result of the chosen action for the player to move, in [-1, 1]."""


# ---------------------------------------------------------------------------------------------------------
# The tree, compiled
# ---------------------------------------------------------------------------------------------------------
UNTRIED, FIRST_CHILD, NEXT_SIBLING, ACTION, VISITS, PROVEN = range(6)
"""The columns of a tree's ``links`` (int32, one row per node, the root at row 0): the actions not expanded yet
(a bit mask), the latest expanded child and the next older sibling (-1: none), the action leading to the
node (-1 at the root), its visits, and its proven value (:data:`UNPROVEN`, or +1 / 0 / -1 for the player
who chose its action: won, drawn or lost under perfect play; :func:`_prove_up`). Each node's position is a row
of the tree's ``positions`` (:func:`~quarto_env.core.position_array`'s form): made once, when the node is
expanded, where replaying the path's actions would judge every placement on it again at every simulation."""
NUM_LINKS = 6
UNPROVEN = 2
"""``links[node, PROVEN]`` while the node's value under perfect play is not known."""
MAX_PATH = 2 * MAX_GAME_LENGTH
"""Room for the nodes of one path from the root: at most one per action of a game, declarations included."""


class UCTTree:
    """A search tree in preallocated arrays, grown by :func:`run_simulations` one node per simulation, and reused
    from one search to the next."""

    def __init__(self, capacity: int) -> None:
        self.links = np.empty((capacity, NUM_LINKS), dtype=np.int32)
        self.positions = np.empty((capacity, NUM_FIELDS), dtype=np.int64)
        self.totals = np.empty(capacity, dtype=np.float64)
        """Sum of the playout results of each node for the player who chose its action."""
        self.size = 0
        """Nodes in use."""
        self.sims = 0
        """Simulations run by the current search."""
        self.best: tuple[int, int, float] = (-1, 0, 0.0)
        """``(action, visits, total)`` of the root's most visited child (ties to the higher total)."""
        self._scratch = np.empty((3, MAX_PATH + RECORD_LENGTH), dtype=np.int64)
        self._generator = new_generator(0)
        self._rules: tuple = ()
        self._seed = 0

    def start(self, state: State, variant: Variant, seed: int) -> None:
        """Start a new search of ``state`` (not over) under ``variant``, its random draws seeded with ``seed``."""
        self.size, self.sims = 0, 0
        self.positions[0] = compiled_fields(state)
        self._rules, self._seed = variant.compiled, seed

    def simulate(self, count: int, c: float, tactical: bool = False, prove: bool = False) -> None:
        """Run ``count`` more simulations -- none when the root has a single action to search: :attr:`best` is
        that action then, with no visits. The tree must have room for ``count`` more nodes."""
        self.size, done, *best = run_simulations(
            self.links, self.positions, self.totals, self.size, count, self._rules, c, tactical, prove, self._scratch,
            self._generator, self._seed,
        )  # fmt: skip
        self.best = (int(best[0]), int(best[1]), float(best[2]))
        self.sims += done

    @property
    def solved(self) -> bool:
        """Whether the root's value under perfect play is proven: more simulations would change nothing."""
        return bool(self.size > 0 and self.links[0, PROVEN] != UNPROVEN)

    def reserve(self, count: int) -> None:
        """Make room for ``count`` more nodes (doubling the arrays when they are full)."""
        if self.size + count <= len(self.links):
            return
        capacity = max(2 * len(self.links), self.size + count)
        grown = []
        for array in (self.links, self.positions, self.totals):
            bigger = np.empty((capacity, *array.shape[1:]), dtype=array.dtype)
            bigger[: self.size] = array[: self.size]
            grown.append(bigger)
        self.links, self.positions, self.totals = grown


@register_jitable
def searched_actions(occupied, available, hand, to_move, claimable, winner, over, declaration, loses):  # type: ignore[no-untyped-def]
    """The actions the tree searches: every legal one, except a false declaration under the ``penalty`` policy
    (``loses`` false) -- it leaves the position unchanged (a pass, costing only the environment's penalty
    reward), so it can never be better than a real move, and searching it would only repeat the same node."""
    if declaration and not loses:
        return useful_mask(occupied, available, hand, claimable, over, declaration)
    return legal_mask(occupied, available, hand, over, declaration)


@kernel
def run_simulations(links, positions, totals, size, count, rules, c, tactical, prove, scratch, generator, seed):  # type: ignore[no-untyped-def]
    """Run ``count`` selection-expansion-playout-backup passes on the tree ``links, positions, totals`` of ``size``
    nodes under ``rules`` (:attr:`Variant.compiled`), drawing from ``generator``
    (:func:`~quarto_env.fast.new_generator`). ``size`` 0 starts a new tree from the position in ``positions[0]``:
    it seeds the generator with ``seed`` and makes that row the root, and runs no simulation if the root has one
    action to search. ``c``: UCB1's constant; ``tactical``: :func:`tactical_playout` rather than
    :func:`~quarto_env.fast.random_playout`; ``prove``: prove values (:func:`_prove_up`). ``scratch``:
    ``(3, MAX_PATH + RECORD_LENGTH)`` int64, the path, its movers and the playout's record. Stops early once the
    root is proven. Returns ``(new size, simulations run, best action, its visits, its total)``: the root's child
    proven won, else the most visited one not proven lost, ties to the higher total (the single action, with no
    visits, when there was nothing to search)."""
    path, movers, record = scratch[0], scratch[1], scratch[2]
    declaration, loses = rules[2], rules[3]
    if size == 0:
        generator[0] = seed
        untried = searched_actions(*position_fields(positions[0])[1:], declaration, loses)
        links[0, UNTRIED], links[0, FIRST_CHILD], links[0, NEXT_SIBLING], links[0, ACTION] = untried, -1, -1, -1
        links[0, VISITS], links[0, PROVEN] = 0, UNPROVEN
        totals[0] = 0.0
        size = 1
        if untried & (untried - 1) == 0:
            return size, 0, lowest_bit(untried), 0, 0.0
    done = 0
    while done < count and links[0, PROVEN] == UNPROVEN:
        done += 1
        node, depth = 0, 0
        path[0] = 0
        # Selection: down the UCB1 children while every action of the node has been tried, to a proven node at most.
        while links[node, UNTRIED] == 0 and links[node, FIRST_CHILD] >= 0 and links[node, PROVEN] == UNPROVEN:
            parent = node
            node = _best_child(links, totals, node, c)
            depth += 1
            path[depth], movers[depth] = node, positions[parent, FIELD_TO_MOVE]
        # Expansion: one untried action, at random.
        untried = links[node, UNTRIED]
        if untried and links[node, PROVEN] == UNPROVEN:
            action = random_member(untried, generator)
            links[node, UNTRIED] = untried & ~(1 << action)
            depth += 1
            path[depth], movers[depth] = size, positions[node, FIELD_TO_MOVE]
            for field in range(NUM_FIELDS):  # a row assignment would compile numba's error message: 3 s cold
                positions[size, field] = positions[node, field]
            step_position(positions[size], action, rules)
            links[size, UNTRIED] = searched_actions(*position_fields(positions[size])[1:], declaration, loses)
            links[size, FIRST_CHILD], links[size, NEXT_SIBLING] = -1, links[node, FIRST_CHILD]
            links[size, ACTION], links[size, VISITS], links[size, PROVEN] = action, 0, UNPROVEN
            totals[size] = 0.0
            links[node, FIRST_CHILD] = size
            node = size
            size += 1
        fields = position_fields(positions[node])
        if links[node, PROVEN] != UNPROVEN:
            winner = _winner_of(links[node, PROVEN], movers[depth])
        elif fields[FIELD_OVER]:
            winner = fields[FIELD_WINNER]
            if prove:
                links[node, PROVEN] = 0 if winner == NO_WINNER else (1 if winner == movers[depth] else -1)
                _prove_up(links, path, movers, depth)
        elif tactical:
            winner = tactical_playout(fields, rules, generator)
        else:
            winner = random_playout(fields, rules, record, generator)[0]
        # Backup: +1 / 0 / -1 for the player who chose each node's action.
        links[0, VISITS] += 1
        for d in range(1, depth + 1):
            links[path[d], VISITS] += 1
            if winner != NO_WINNER:
                totals[path[d]] += 1.0 if winner == movers[d] else -1.0
    # The best child: a proven win first, a proven loss last, else the most visited, ties to the higher total.
    best, best_rank, best_visits, best_total = -1, -1, -1, -math.inf
    child = links[0, FIRST_CHILD]
    while child >= 0:
        proven, visits, total = links[child, PROVEN], links[child, VISITS], totals[child]
        rank = 2 if proven == 1 else 0 if proven == -1 else 1
        if (rank, visits, total) > (best_rank, best_visits, best_total):
            best, best_rank, best_visits, best_total = child, rank, visits, total
        child = links[child, NEXT_SIBLING]
    return size, done, links[best, ACTION], best_visits, best_total


@register_jitable
def _winner_of(proven, mover):  # type: ignore[no-untyped-def]
    """The winner of the game from a node of proven value ``proven`` for ``mover``, who chose its action."""
    if proven == 0:
        return NO_WINNER
    return mover if proven == 1 else 1 - mover


@register_jitable
def _prove_up(links, path, movers, depth):  # type: ignore[no-untyped-def]
    """MCTS-Solver (Winands, Björnsson & Saito 2008), with draws: the node at ``path[depth]`` was just proven;
    prove the ancestors it decides. A parent is won for its mover as soon as one child is (its mover chose the
    child), and otherwise known once every action has been tried and every child is proven: the best of them.
    Movers need not alternate: a value turns sign only where the mover changes."""
    while depth >= 1:
        parent, value = path[depth - 1], links[path[depth], PROVEN]
        if value != 1:
            if links[parent, UNTRIED] != 0:
                return
            child = links[parent, FIRST_CHILD]
            while child >= 0:
                if links[child, PROVEN] == UNPROVEN:
                    return
                value = max(value, links[child, PROVEN])
                child = links[child, NEXT_SIBLING]
        depth -= 1
        same_mover = depth == 0 or movers[depth] == movers[depth + 1]  # the root's value: for its player to move
        links[parent, PROVEN] = value if same_mover else -value


@kernel
def tactical_playout(fields, rules, generator):  # type: ignore[no-untyped-def]
    """Play a game that is not over to its end with one-ply tactics; returns the winner (``NO_WINNER``: a draw).

    A placement completes a group when the piece in hand can (on a random one of those squares), else goes on a
    random empty square; a give is a random piece that no empty square lets the receiver win with, while there
    is one; a declaration is played exactly when something can be claimed. ``fields`` and ``rules`` as
    :func:`~quarto_env.fast.random_playout` takes them; every move goes through the core's ``apply_action``."""
    lanes, occupied, available, hand, to_move, claimable, winner, over = fields
    groups, counted = rules[0], rules[1]
    while not over:
        if claimable != 0:
            action = DECLARE
        elif hand != NO_PIECE:
            wins = winning_squares(lanes, occupied, hand, groups, counted)
            action = random_member(wins if wins else ALL_SQUARES & ~occupied, generator)
        else:
            safe = available & ~winning_pieces(lanes, occupied, groups, counted)
            action = random_member(safe if safe else available, generator)
        lanes, occupied, available, hand, to_move, claimable, winner, over = apply_action(
            lanes, occupied, available, hand, to_move, claimable, action, *rules
        )
    return winner


@kernel
def _best_child(links, totals, node, c):  # type: ignore[no-untyped-def]
    """The child of ``node`` with the highest UCB1 score (every child has been visited)."""
    log_visits = math.log(links[node, VISITS])
    best, best_score = -1, -math.inf
    child = links[node, FIRST_CHILD]
    while child >= 0:
        visits = links[child, VISITS]
        score = totals[child] / visits + c * math.sqrt(log_visits / visits)
        if score > best_score:
            best, best_score = child, score
        child = links[child, NEXT_SIBLING]
    return best
