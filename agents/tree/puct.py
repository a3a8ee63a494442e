"""AlphaZero's search: a policy-value network guiding a batched Monte-Carlo tree search (PUCT).

The search
----------
Each simulation walks down the tree from the root, choosing at every node the action with the highest PUCT
score (Silver et al. 2017)::

    Q(s, a) + c_puct * P(s, a) * sqrt(N(s) + 1) / (1 + N(s, a))

where ``P`` is the network's prior, ``N`` counts visits and ``Q`` is the mean value of the action for the player
who takes it (an unvisited action borrows the network's value of ``s``: "first-play urgency"). At the first
node not yet evaluated, the network gives its priors and value in one forward pass; the value is then backed up
along the path. Quarto's turn is "place, then give" by the same player, so the value changes sign only where
the player to move changes, never by depth.

The search uses the exact one-ply rules shortcuts that the minimax uses, and nothing deeper:

* a player who can place the piece in hand to complete a group wins: that node is a terminal win;
* a player gives only *safe* pieces (none of which wins at once for the opponent); a giver without a safe
  piece has lost: that node is a terminal loss;
* a declaration is made exactly when a group can be claimed (the declaration variant).

So the network is only ever asked about positions with a real choice, which are also the only positions it is
trained on (:mod:`experiments.training.alphazero`).

Two roots
---------
The PUCT root (the default) chooses the first action of each simulation by the score above, like every other
node, and the move played is the most visited action. The Gumbel root (:class:`GumbelRoot`; Danihelka et al.
2022, "Policy improvement by planning with Gumbel") forces the first action of each simulation instead, by
*sequential halving*: it draws Gumbel noise ``g(a)`` (``g = 0`` for deterministic play), keeps the top ``k``
candidates by ``g + log P``, and spends the budget in ``ceil(log2 k)`` phases; in each phase every surviving
action gets ``floor(sims / (phases * survivors))`` more visits (at least 1), then the better half survives by
``g + log P + sigma(Q)``, with ``sigma(Q) = (c_visit + max_b N(b)) * c_scale * (Q + 1) / 2`` (phases go on
with the last two while budget is left: :func:`halving_phases`). The move played is the survivor with the best
score among the most visited (:attr:`PUCTResult.chosen`). Below the root, both roots search by PUCT.

Either way a root's *completed Q* (:meth:`PUCTResult.completed_q`) is the mean backed-up value of each
visited candidate and the root value for the others, and the *completed-Q policy target*
(:meth:`PUCTResult.improved_policy`) is ``softmax(log P + beta * completed Q)`` over the candidates: unlike
the visit distribution, it moves away from the prior even when the simulations are few.

Batching
--------
:class:`PUCTSearch` searches many games side by side. Each *round* selects one leaf per game with a compiled
kernel (over the rules core's ``apply_action``, ``winning_squares`` and ``winning_pieces``), writes the leaves'
observation planes with the kernel the env uses, evaluates all of them in one forward pass, and expands and
backs up with a second kernel. A game's tree lives in flat arrays of ``sims + 2`` nodes by 16 actions.

The search knows the game only through the rules core's compiled functions and an evaluator (planes ->
logits, values). :meth:`PUCTSearch.rounds` is the search itself, a generator that hands out each round's
leaves and takes their evaluation back; :meth:`PUCTSearch.run` drives it with the search's ``evaluator``, and
the sessions of :mod:`agents.tree.sessions` (self-play, two-model matches, one search) drive it with any caller's
network: :class:`agents.alphazero.AlphaZeroAgent` plays on them one game at a time, training and evaluation
(:mod:`experiments.training.alphazero`) many games at once.
"""

from __future__ import annotations

import math
import time as clock
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
from numba.extending import register_jitable

from agents.tree.choices import DEFAULT_C_PUCT
from agents.tree.gumbel_root import GumbelRoot, SequentialHalving, completed_q, root_values
from quarto_env.checks import checked_number
from quarto_env.core import (
    ALL_SQUARES,
    DECLARE,
    FIELD_TO_MOVE,
    NO_PIECE,
    NUM_ACTIONS,
    NUM_FIELDS,
    Variant,
    apply_action,
    checked_variant,
    lowest_bit,
    popcount,
    position_fields,
    winning_pieces,
    winning_squares,
)
from quarto_env.errors import QuartoTypeError, QuartoValueError
from quarto_env.kernel import kernel
from quarto_env.observation import ObservationKind, encode_observation, observation_kind
from quarto_env.vector import GameBatch

MAX_DEPTH = 40
"""Longest path from a root: a game has at most 32 actions."""
NO_NODE = -1


Evaluator = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
"""Planes ``(n, channels, 16)`` int8 -> (logits ``(n, >= 16)``, values ``(n,)``), float32."""
Rounds = Generator[np.ndarray, tuple[np.ndarray, np.ndarray], "PUCTResult"]
"""A search in progress (:meth:`PUCTSearch.rounds`): it yields each round's leaf planes, is sent their
``(logits, values)`` and returns the :class:`PUCTResult`."""


@register_jitable
def candidates(lanes: int, occupied: int, available: int, hand: int, groups: Any, counted: int) -> tuple:
    """The actions the search considers, or the position's exact value when the one-ply shortcuts decide it.

    Returns ``(mask, terminal, value)``: ``terminal`` is true when a placement wins (``value`` 1 for the player to
    move), when a giver has no safe piece (``value`` -1) or when the board is full (0). Otherwise ``mask`` holds
    the empty squares (placing) or the safe pieces (giving).
    """
    if hand != NO_PIECE:
        if winning_squares(lanes, occupied, hand, groups, counted):
            return 0, True, 1.0
        return ALL_SQUARES & ~occupied, False, 0.0
    if occupied == ALL_SQUARES:
        return 0, True, 0.0
    safe = available & ~winning_pieces(lanes, occupied, groups, counted)
    if safe == 0:
        return 0, True, -1.0
    return safe, False, 0.0


@register_jitable
def forced_action(
    lanes: int, occupied: int, available: int, hand: int, claimable: int, groups: Any, counted: int
) -> tuple:
    """``(action, mask)``: the action the shortcuts dictate (a claim, a winning square, the only safe piece or
    square, or -- lost anyway -- the lowest piece), or ``-1`` and the mask of candidates when it takes a search."""
    if claimable:
        return DECLARE, 0
    mask, terminal, value = candidates(lanes, occupied, available, hand, groups, counted)
    if terminal:
        if value > 0:
            return lowest_bit(winning_squares(lanes, occupied, hand, groups, counted)), 0
        return lowest_bit(available), 0
    if popcount(mask) == 1:
        return lowest_bit(mask), mask
    return -1, mask


class PUCTSearch:
    """PUCT search over up to ``max_games`` positions at once, guided by ``evaluator``, with a PUCT or a Gumbel
    root (:meth:`run`).

    :param variant: the rules.
    :param kind: the observation kind the evaluator reads (:func:`quarto_env.observation.observation_kind`).
    :param evaluator: planes -> (logits, values), e.g. :meth:`agents.networks.policy_value.PolicyValueNetwork.evaluate`,
    for
        :meth:`run`; ``None`` for a search driven from outside, round by round (:meth:`rounds`).
    :param max_games: the most positions searched together.
    :param max_sims: the most simulations per search (the trees are allocated for it).
    :param c_puct: the exploration constant.
    """

    def __init__(
        self,
        variant: Variant,
        kind: ObservationKind,
        evaluator: Evaluator | None,
        max_games: int,
        max_sims: int,
        c_puct: float = DEFAULT_C_PUCT,
    ) -> None:
        self.variant = checked_variant(variant)
        self.kind = observation_kind(kind)
        if evaluator is not None and not callable(evaluator):
            raise QuartoTypeError(f"evaluator must be a callable (planes -> logits, values) or None, got {evaluator!r}")
        self.evaluator = evaluator
        self.c_puct = checked_number(c_puct, "c_puct", above=0)
        self.max_games = int(checked_number(max_games, "max_games", minimum=1, integer=True))
        self.max_sims = int(checked_number(max_sims, "max_sims", minimum=0, integer=True))
        nodes = self.max_sims + 2
        self.positions = np.zeros((self.max_games, nodes, NUM_FIELDS), dtype=np.int64)
        """Per node: its position (a row of :func:`quarto_env.core.position_array`)."""
        self.mask = np.zeros((self.max_games, nodes), dtype=np.int64)
        self.terminal = np.zeros((self.max_games, nodes), dtype=np.bool_)
        self.expanded = np.zeros((self.max_games, nodes), dtype=np.bool_)
        self.value = np.zeros((self.max_games, nodes), dtype=np.float32)
        """The exact value of a terminal node, else the network's value, for the node's player to move."""
        self.child = np.full((self.max_games, nodes, NUM_ACTIONS), NO_NODE, dtype=np.int32)
        self.visits = np.zeros((self.max_games, nodes, NUM_ACTIONS), dtype=np.int32)
        self.value_sum = np.zeros((self.max_games, nodes, NUM_ACTIONS), dtype=np.float32)
        self.prior = np.zeros((self.max_games, nodes, NUM_ACTIONS), dtype=np.float32)
        self.num_nodes = np.zeros(self.max_games, dtype=np.int32)
        self.tree = (
            self.positions,
            self.mask,
            self.terminal,
            self.expanded,
            self.value,
            self.child,
            self.visits,
            self.value_sum,
            self.prior,
            self.num_nodes,
        )
        """Every game's tree, as the kernels take it: one tuple of the arrays above, in this order."""
        self.path = np.zeros((self.max_games, MAX_DEPTH, 2), dtype=np.int32)
        self.leaf = np.zeros(self.max_games, dtype=np.int32)
        self.leaf_games = np.zeros(self.max_games, dtype=np.int64)
        self.no_forced_root = np.full(self.max_games, -1, dtype=np.int32)
        """The PUCT root's forced root actions: none (-1)."""
        self.planes = np.zeros((self.max_games, *self.kind.shape), dtype=np.int8)
        self.tree_seconds = 0.0
        """Time in the tree kernels (selection with the observation planes, expansion, backup), cumulated."""
        self.network_seconds = 0.0
        """Time in the evaluator, cumulated."""
        self.simulations = 0
        """Simulations run, cumulated: one per game per round (a root's first evaluation included)."""
        self.evaluations = 0
        """Positions the evaluator was asked about, cumulated (a simulation ending on a terminal node asks none)."""

    @staticmethod
    def bytes_per_game(kind: ObservationKind, max_sims: int) -> int:
        """Bytes of the arrays above per game, for trees of ``max_sims`` simulations: what a caller checks against
        the machine's memory before it asks for many games (:mod:`agents.tree.sessions`)."""
        node = NUM_FIELDS * 8 + 8 + 1 + 1 + 4 + NUM_ACTIONS * (4 + 4 + 4 + 4)  # positions .. prior
        game = 4 + MAX_DEPTH * 2 * 4 + 4 + 8 + 4 + kind.shape[0] * kind.shape[1]  # num_nodes .. planes
        return (max_sims + 2) * node + game

    def run(self, roots: np.ndarray, sims: int, *options: Any, **named_options: Any) -> PUCTResult:
        """The search of :meth:`rounds` (its options: ``noise``, ``seconds``, ``gumbel``), every round's leaves
        evaluated by the search's ``evaluator``."""
        if self.evaluator is None:
            raise QuartoValueError("this search has no evaluator: drive its rounds() with one (agents.tree.sessions)")
        return drive(self.rounds(roots, sims, *options, **named_options), self.evaluator)

    def rounds(
        self,
        roots: np.ndarray,
        sims: int,
        noise: tuple[float, float, np.random.Generator] | None = None,
        seconds: float = 0.0,
        gumbel: GumbelRoot | None = None,
    ) -> Rounds:
        """Search the positions ``roots`` (``(n, NUM_FIELDS)``, as :func:`quarto_env.core.position_array` or
        :attr:`GameBatch.positions` give them; each with a real choice, see :func:`forced_action`) for ``sims``
        simulations each (at most ``max_sims``), stopping early when ``seconds`` is above 0 and that time has
        passed (after at least one simulation), evaluated by the caller: a generator that yields each round's leaf
        planes (``(leaves, channels, 16)`` int8, a view valid until the next round; :meth:`leaf_masks` and
        :meth:`leaf_positions` say more of them) and is sent their ``(logits, values)``; it returns the
        :class:`PUCTResult`. A round whose simulations all end on terminal nodes yields nothing.

        ``noise = (alpha, fraction, rng)`` mixes Dirichlet(alpha) noise into the root priors (self-play, PUCT root).
        ``gumbel`` searches with the Gumbel root instead (its phases planned for ``sims``), whose choice is
        :attr:`PUCTResult.chosen`."""
        n = len(roots)
        if not 1 <= n <= self.max_games:
            raise QuartoValueError(f"searches 1 to {self.max_games} positions at once, got {n}")
        if gumbel is not None and noise is not None:
            raise QuartoValueError("the Gumbel root draws its own noise: give noise=None with gumbel, or no gumbel")
        sims = min(sims, self.max_sims)
        start = clock.perf_counter()
        _reset_roots(roots, self.tree, self.variant.group_array, self.variant.counted)
        yield from self._round(n, self.no_forced_root)  # the roots' priors and values
        prior = self.prior[:n, 0].copy()
        if noise is not None:
            self._add_noise(n, *noise)
        visits, value_sum, network_value = self.visits[:n, 0], self.value_sum[:n, 0], self.value[:n, 0]
        halving = None if gumbel is None else SequentialHalving(prior, gumbel, sims)
        done = 0
        while done < sims and not (seconds and done and clock.perf_counter() - start >= seconds):
            if halving is None:
                yield from self._round(n, self.no_forced_root)
            else:
                yield from self._round(n, halving.forced(done))
                halving.after(done, visits, value_sum, network_value)
            done += 1
        return PUCTResult(
            visits=visits.copy(),
            root_value=root_values(visits, value_sum, network_value),
            prior=prior,
            network_value=network_value.copy(),
            sims=done,
            value_sum=value_sum.copy(),
            chosen=None if halving is None else halving.chosen(visits, value_sum, network_value),
        )

    def leaf_masks(self, leaves: int) -> np.ndarray:
        """``(leaves, 16)`` bool: the candidate actions (:func:`candidates`) of the current round's leaves."""
        games = self.leaf_games[:leaves]
        bits = self.mask[games, self.leaf[games]]
        return (bits[:, None] >> np.arange(NUM_ACTIONS) & 1).astype(np.bool_)

    def leaf_positions(self, leaves: int) -> np.ndarray:
        """``(leaves, NUM_FIELDS)`` int64: the positions of the current round's leaves (rows of
        :func:`quarto_env.core.position_array`); their roots are :attr:`leaf_games`."""
        games = self.leaf_games[:leaves]
        return self.positions[games, self.leaf[games]]

    def _round(self, n: int, forced_root: np.ndarray) -> Generator[np.ndarray, tuple[np.ndarray, np.ndarray], None]:
        """One simulation in every game, whose root action is ``forced_root`` (-1: PUCT's): select leaves, hand
        them out for one evaluation, expand and back up."""
        tick = clock.perf_counter()
        self.simulations += n
        leaves = _select(
            n,
            self.tree,
            self.path,
            self.leaf,
            self.leaf_games,
            self.planes,
            self.kind.level,
            self.c_puct,
            forced_root,
            self.variant.group_array,
            self.variant.counted,
        )
        tock = clock.perf_counter()
        if leaves:
            logits, values = yield self.planes[:leaves]
            self.evaluations += leaves
            tack = clock.perf_counter()
            _expand(
                leaves,
                np.ascontiguousarray(logits, dtype=np.float32),
                np.ascontiguousarray(values, dtype=np.float32),
                self.leaf_games,
                self.leaf,
                self.tree,
                self.path,
            )
            self.network_seconds += tack - tock
            self.tree_seconds += clock.perf_counter() - tack
        self.tree_seconds += tock - tick

    def _add_noise(self, n: int, alpha: float, fraction: float, rng: np.random.Generator) -> None:
        for g in range(n):
            actions = np.flatnonzero((int(self.mask[g, 0]) >> np.arange(NUM_ACTIONS)) & 1)
            noise = rng.dirichlet(np.full(len(actions), alpha))
            self.prior[g, 0, actions] = (1 - fraction) * self.prior[g, 0, actions] + fraction * noise


def drive(rounds: Rounds, evaluator: Evaluator) -> PUCTResult:
    """Run the search ``rounds`` (:meth:`PUCTSearch.rounds`) to its end, each round's leaves evaluated by
    ``evaluator``; its result."""
    try:
        planes = next(rounds)
        while True:
            planes = rounds.send(evaluator(planes))
    except StopIteration as finished:
        result: PUCTResult = finished.value
        return result


class PUCTResult:
    """What a search found for each root: visit counts, backed-up values, the network's priors."""

    def __init__(
        self,
        visits: np.ndarray,
        root_value: np.ndarray,
        prior: np.ndarray,
        network_value: np.ndarray,
        sims: int,
        value_sum: np.ndarray | None = None,
        chosen: np.ndarray | None = None,
    ) -> None:
        self.visits = visits
        """``(n, 16)`` visits of each root action."""
        self.root_value = root_value
        """``(n,)`` mean value of the simulations for the root's player to move (the network's value of the root
        when no simulation ran)."""
        self.prior = prior
        """``(n, 16)`` the network's priors at the root (before any noise): positive exactly on the candidates."""
        self.network_value = network_value
        self.sims = sims
        self.value_sum = np.zeros_like(visits, dtype=np.float32) if value_sum is None else value_sum
        """``(n, 16)`` the sum of the values backed up through each root action, for the root's player."""
        self.chosen = chosen
        """``(n,)`` the Gumbel root's choice (the survivor of the best score), or ``None`` under the PUCT root."""

    def completed_q(self) -> np.ndarray:
        """``(n, 16)`` the value of each candidate action for the root's player: the mean backed-up value of a
        visited action, the root value for an unvisited one (Gumbel MuZero's completed Q); 0 outside the
        candidates."""
        return completed_q(self.visits, self.value_sum, self.root_value, self.prior)

    def improved_policy(self, beta: float) -> np.ndarray:
        """``(n, 16)`` the completed-Q policy target, ``softmax(log prior + beta * completed Q)`` over the
        candidates (rows sum to 1, 0 elsewhere): the prior moved towards the actions the search values most, by
        how much ``beta`` says (0: the prior itself)."""
        candidates = self.prior > 0
        logits = np.where(
            candidates, np.log(np.where(candidates, self.prior, 1.0)) + beta * self.completed_q(), -np.inf
        )
        weights = np.exp(logits - logits.max(1, keepdims=True))
        return (weights / weights.sum(1, keepdims=True)).astype(np.float32)

    def policy(self) -> np.ndarray:
        """The visit distribution (the ``visits`` policy target of training); the prior at a root that no
        simulation visited (a search of 0 simulations evaluates its roots alone)."""
        total = self.visits.sum(1, keepdims=True)
        return np.where(total > 0, self.visits / np.maximum(total, 1), self.prior)

    def best(self) -> np.ndarray:
        """The action to play at each root: the Gumbel root's :attr:`chosen`, else the most visited action (ties: the
        higher prior)."""
        if self.chosen is not None:
            return self.chosen
        return np.argmax(self.visits + self.prior * 0.5, axis=1)


# ---------------------------------------------------------------------------------------------------------
# The kernels. ``tree`` is :attr:`PUCTSearch.tree`; ``g`` a game, ``node`` a node of its tree.
# ---------------------------------------------------------------------------------------------------------
@kernel
def _reset_roots(roots, tree, groups, counted):  # type: ignore[no-untyped-def]
    num_nodes = tree[9]
    for g in range(len(roots)):
        _new_node(g, 0, position_fields(roots[g]), tree, groups, counted)
        num_nodes[g] = 1


@register_jitable
def _new_node(g, node, fields, tree, groups, counted):  # type: ignore[no-untyped-def]
    positions, mask, terminal, expanded, value, child, visits, value_sum, _, _ = tree
    lanes, occupied, available, hand, to_move, claimable, winner, over = fields
    positions[g, node, 0], positions[g, node, 1], positions[g, node, 2], positions[g, node, 3] = (
        lanes,
        occupied,
        available,
        hand,
    )
    positions[g, node, 4], positions[g, node, 5], positions[g, node, 6], positions[g, node, 7] = (
        to_move,
        claimable,
        winner,
        over,
    )
    if over:  # only a full board ends a game inside the tree: wins are caught one ply earlier
        mask[g, node], terminal[g, node], value[g, node] = 0, True, 0.0
    else:
        mask[g, node], terminal[g, node], value[g, node] = candidates(lanes, occupied, available, hand, groups, counted)
    expanded[g, node] = False
    for a in range(NUM_ACTIONS):
        child[g, node, a] = NO_NODE
        visits[g, node, a] = 0
        value_sum[g, node, a] = 0.0


@kernel
def _select(  # type: ignore[no-untyped-def]
    n, tree, path, leaf, leaf_games, planes, level, c_puct, forced_root, groups, counted
):
    """Walk down every game's tree to a node to evaluate (written to ``planes``; returns how many) or to a
    terminal node (backed up at once); the first action of game ``g`` is ``forced_root[g]`` unless it is -1."""
    positions, _, terminal, expanded, value, child, _, _, _, num_nodes = tree
    leaves = 0
    for g in range(n):
        node = 0
        depth = 0
        while True:
            if terminal[g, node]:
                _backup(g, depth, positions[g, node, FIELD_TO_MOVE], value[g, node], tree, path)
                break
            if not expanded[g, node]:
                leaf[g] = node
                path[g, depth, 0] = -1  # marks the path's end for _expand
                leaf_games[leaves] = g
                encode_observation(planes[leaves], level, *position_fields(positions[g, node]), groups, counted)
                leaves += 1
                break
            action = forced_root[g] if depth == 0 and forced_root[g] >= 0 else _puct_choice(g, node, tree, c_puct)
            path[g, depth, 0] = node
            path[g, depth, 1] = action
            depth += 1
            nxt = child[g, node, action]
            if nxt == NO_NODE:
                nxt = num_nodes[g]
                num_nodes[g] += 1
                # No declaration inside the tree: claims are played before a search (forced_action).
                after = apply_action(*position_fields(positions[g, node])[:6], action, groups, counted, False, True)
                _new_node(g, nxt, after, tree, groups, counted)
                child[g, node, action] = nxt
            node = nxt
    return leaves


@register_jitable
def _puct_choice(g, node, tree, c_puct):  # type: ignore[no-untyped-def]
    _, mask, _, _, value, _, visits, value_sum, prior, _ = tree
    total = 0
    for a in range(NUM_ACTIONS):
        total += visits[g, node, a]
    scale = c_puct * math.sqrt(total + 1)
    first_play = value[g, node]  # an unvisited action is first valued as the position itself
    best = -1
    best_score = -np.inf
    for a in range(NUM_ACTIONS):
        if mask[g, node] >> a & 1:
            count = visits[g, node, a]
            q = value_sum[g, node, a] / count if count else first_play
            score = q + scale * prior[g, node, a] / (1 + count)
            if score > best_score:
                best, best_score = a, score
    return best


@register_jitable
def _backup(g, depth, to_move, leaf_value, tree, path):  # type: ignore[no-untyped-def]
    """Add ``leaf_value`` (for player ``to_move``) to the ``depth`` edges of game ``g``'s path, each for the player
    who chose it."""
    positions, _, _, _, _, _, visits, value_sum, _, _ = tree
    for k in range(depth):
        node = path[g, k, 0]
        action = path[g, k, 1]
        visits[g, node, action] += 1
        value_sum[g, node, action] += leaf_value if positions[g, node, FIELD_TO_MOVE] == to_move else -leaf_value


@kernel
def _expand(leaves, logits, values, leaf_games, leaf, tree, path):  # type: ignore[no-untyped-def]
    positions, mask, _, expanded, value, _, _, _, prior, _ = tree
    for i in range(leaves):
        g = leaf_games[i]
        node = leaf[g]
        candidates_mask = mask[g, node]
        top = -np.inf
        for a in range(NUM_ACTIONS):
            if candidates_mask >> a & 1 and logits[i, a] > top:
                top = logits[i, a]
        total = 0.0
        for a in range(NUM_ACTIONS):
            weight = math.exp(logits[i, a] - top) if candidates_mask >> a & 1 else 0.0
            prior[g, node, a] = weight
            total += weight
        for a in range(NUM_ACTIONS):
            prior[g, node, a] /= total
        expanded[g, node] = True
        value[g, node] = values[i]
        depth = 0
        while path[g, depth, 0] != -1:
            depth += 1
        _backup(g, depth, positions[g, node, FIELD_TO_MOVE], values[i], tree, path)


# ---------------------------------------------------------------------------------------------------------
# Batches of positions outside the tree: the shortcuts of many games, and training's planes
# ---------------------------------------------------------------------------------------------------------
def forced_actions(batch: GameBatch, games: np.ndarray) -> np.ndarray:
    """For each of ``games``, the action the rules shortcuts dictate, or -1 where a search is needed."""
    out = np.empty(len(games), dtype=np.int64)
    _forced_actions(games, batch.positions, batch.variant.group_array, batch.variant.counted, out)
    return out


@kernel
def _forced_actions(games, positions, groups, counted, out):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        lanes, occupied, available, hand, _, claimable, _, _ = position_fields(positions[games[i]])
        out[i] = forced_action(lanes, occupied, available, hand, claimable, groups, counted)[0]


def encode_positions(positions: np.ndarray, kind: ObservationKind, variant: Variant) -> tuple[np.ndarray, np.ndarray]:
    """The ``kind`` planes (``int8``) and the candidate masks (``bool``, those of :func:`candidates`) of
    ``positions`` (``(n, NUM_FIELDS)``), as the search sees them: what the network trains on."""
    planes = np.empty((len(positions), *kind.shape), dtype=np.int8)
    masks = np.empty((len(positions), NUM_ACTIONS), dtype=np.bool_)
    _encode(positions, planes, masks, kind.level, variant.group_array, variant.counted)
    return planes, masks


@kernel
def _encode(positions, out, masks, level, groups, counted):  # type: ignore[no-untyped-def]
    for i in range(len(positions)):
        fields = position_fields(positions[i])
        encode_observation(out[i], level, *fields, groups, counted)
        mask = candidates(fields[0], fields[1], fields[2], fields[3], groups, counted)[0]
        for a in range(NUM_ACTIONS):
            masks[i, a] = mask >> a & 1
