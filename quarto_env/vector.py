"""Many Quarto games side by side in flat arrays, stepped and observed by compiled kernels.

:class:`GameBatch` is the engine of self-play training: it holds ``N`` games as one array per field of
:class:`quarto_env.core.State`, and applies actions, computes legal-action masks and writes observation
planes for any subset of the games in one call. The kernels call the rules core's ``register_jitable``
functions (``apply_action``, ``legal_mask``, ``winning_pieces``, ...) and the observation kernel of
:mod:`quarto_env.observation`, so the batched games follow exactly the rules of :func:`quarto_env.core.step`.

Observation kinds
-----------------
``raw``
    the 17 planes of :mod:`quarto_env.observation`.
``tactical``
    those plus the two 1-ply planes: where the piece in hand wins (17), which gives lose at once (18).
``lookahead``
    those plus two planes one turn deeper, also computed by the rules core:

    ====  ======  ===================================================================================
    ch.   over    meaning
    ====  ======  ===================================================================================
    19    squares placing: putting the piece in hand here does not win and leaves only pieces that let
                  the opponent win at once -- the placer must then hand over a win (a *trap* for oneself)
    20    pieces  giving: this piece cannot win at once, yet wherever the receiver places it, every piece
                  left lets the giver win at once -- the receiver is *trapped*
    ====  ======  ===================================================================================

    ``greedy`` play sees one ply; these planes let a learner avoid and set the traps that decide most
    games between 1-ply players (see the README's comparison of observation kinds).
``parity``
    those plus two planes on the count of *safe* pieces (pieces that cannot win at once) after an action.
    When no placement changes the threats, players give safe pieces in turn and the one left without one
    loses, so an odd count is good for the player who gives next (the horizon evaluation of
    ``minimax``, :mod:`agents.search`):

    ====  ======  ===================================================================================
    21    squares placing: putting the piece in hand here (without winning) leaves an odd number of safe
                  pieces for the placer to give
    22    pieces  giving: this piece is safe, and wherever the receiver places it, the receiver is left an
                  even number of safe pieces (zero included: channel 20 is then set too)
    ====  ======  ===================================================================================

All planes are ``int8`` of shape ``(channels, 16)``; squares and pieces are interchangeable slots, which the
``slots`` policy of :mod:`agents.ppo` exploits.
"""

from __future__ import annotations

import numba
import numpy as np

from quarto_env.core import (
    ALL_SQUARES,
    DECLARE,
    NO_PIECE,
    NO_WINNER,
    NUM_SQUARES,
    IllegalActionError,
    State,
    Variant,
    apply_action,
    legal_mask,
    place_lanes,
    signed_lanes,
    winning_groups_through,
    winning_pieces,
)
from quarto_env.observation import NUM_RAW_CHANNELS, NUM_TACTICAL_CHANNELS, encode_observation

OBSERVATION_KINDS = ("raw", "tactical", "lookahead", "parity")
"""The observation kinds a :class:`GameBatch` can write, from the least to the most derived."""
NUM_LOOKAHEAD_CHANNELS = NUM_TACTICAL_CHANNELS + 2
SELF_TRAP_CHANNEL = NUM_TACTICAL_CHANNELS
"""Lookahead plane over squares: placing here forces the placer to hand over a win."""
TRAP_GIVE_CHANNEL = NUM_TACTICAL_CHANNELS + 1
"""Lookahead plane over pieces: giving this piece forces the receiver to hand over a win."""
NUM_PARITY_CHANNELS = NUM_LOOKAHEAD_CHANNELS + 2
ODD_SAFE_CHANNEL = NUM_LOOKAHEAD_CHANNELS
"""Parity plane over squares: placing here leaves an odd number of safe pieces to give."""
EVEN_GIVE_CHANNEL = NUM_LOOKAHEAD_CHANNELS + 1
"""Parity plane over pieces: wherever the receiver places this piece, it keeps an even number of safe pieces."""


def num_observation_channels(kind: str) -> int:
    """Number of planes of observation ``kind``."""
    check_observation_kind(kind)
    return {
        "raw": NUM_RAW_CHANNELS,
        "tactical": NUM_TACTICAL_CHANNELS,
        "lookahead": NUM_LOOKAHEAD_CHANNELS,
        "parity": NUM_PARITY_CHANNELS,
    }[kind]


def check_observation_kind(kind: str) -> None:
    """Raise ``ValueError`` naming the allowed kinds if ``kind`` is not one."""
    if kind not in OBSERVATION_KINDS:
        raise ValueError(f"unknown observation kind {kind!r}; allowed: {', '.join(OBSERVATION_KINDS)}")


class GameBatch:
    """``num_games`` independent games of one rule variant, as arrays (one entry per game).

    Every method takes ``games``, an integer array of game indices, and acts on those games only.
    """

    def __init__(self, variant: Variant, num_games: int) -> None:
        if num_games < 1:
            raise ValueError(f"num_games must be >= 1, got {num_games}")
        self.variant = variant
        self.num_games = num_games
        self.num_actions = variant.num_actions
        self._groups = np.array(variant.groups, dtype=np.int64)
        self._false_declaration_loses = variant.false_declaration == "lose"
        self.lanes = np.zeros(num_games, dtype=np.int64)
        self.occupied = np.zeros(num_games, dtype=np.int64)
        self.available = np.zeros(num_games, dtype=np.int64)
        self.hand = np.zeros(num_games, dtype=np.int64)
        self.to_move = np.zeros(num_games, dtype=np.int64)
        self.claimable = np.zeros(num_games, dtype=np.int64)
        self.winner = np.zeros(num_games, dtype=np.int64)
        self.over = np.zeros(num_games, dtype=np.bool_)
        self.reset(self.all_games)

    @property
    def all_games(self) -> np.ndarray:
        """The indices of every game."""
        return np.arange(self.num_games)

    def reset(self, games: np.ndarray) -> None:
        """Put ``games`` back to the opening position."""
        self.set_state(games, State())

    def set_state(self, games: np.ndarray, state: State) -> None:
        """Put ``games`` in ``state``."""
        state = state._replace(lanes=signed_lanes(state.lanes))  # the arrays are signed 64-bit
        for name, value in zip(State._fields, state, strict=True):
            getattr(self, name)[games] = value

    def state(self, game: int) -> State:
        """Game ``game`` as a rules-core :class:`State`."""
        return State(
            lanes=int(self.lanes[game]) & (1 << 64) - 1,
            occupied=int(self.occupied[game]),
            available=int(self.available[game]),
            hand=int(self.hand[game]),
            to_move=int(self.to_move[game]),
            claimable=int(self.claimable[game]),
            winner=int(self.winner[game]),
            over=bool(self.over[game]),
        )

    @classmethod
    def from_states(cls, variant: Variant, states: list[State]) -> GameBatch:
        """A batch holding ``states``, game ``i`` in ``states[i]``."""
        batch = cls(variant, len(states))
        for game, state in enumerate(states):
            batch.set_state(np.array([game]), state)
        return batch

    def action_masks(self, games: np.ndarray, false_declarations: bool = True) -> np.ndarray:
        """Legal actions of ``games`` as a boolean array of shape ``(len(games), num_actions)``.

        ``false_declarations=False`` leaves the declaration out where nothing can be claimed: it is legal, but
        it either loses or changes nothing, so learners are not offered it (see :mod:`experiments.selfplay`).
        """
        masks = np.zeros((len(games), self.num_actions), dtype=np.bool_)
        _legal_masks(masks, games, self.occupied, self.available, self.hand, self.over, self.variant.declaration)
        if self.variant.declaration and not false_declarations:
            masks[:, DECLARE] &= self.claimable[games] != 0
        return masks

    def step(self, games: np.ndarray, actions: np.ndarray) -> None:
        """Apply ``actions[i]`` to game ``games[i]``; raises :class:`IllegalActionError` naming an illegal one."""
        games = np.asarray(games, dtype=np.int64)
        actions = np.asarray(actions, dtype=np.int64)
        masks = self.action_masks(games)
        in_range = (actions >= 0) & (actions < self.num_actions)
        legal = in_range & masks[np.arange(len(games)), np.where(in_range, actions, 0)]
        if not legal.all():
            i = int(np.argmin(legal))
            allowed = np.flatnonzero(masks[i]).tolist()
            raise IllegalActionError(f"game {games[i]}: action {actions[i]} is not legal; legal actions: {allowed}")
        _apply_actions(
            games,
            actions,
            self.lanes,
            self.occupied,
            self.available,
            self.hand,
            self.to_move,
            self.claimable,
            self.winner,
            self.over,
            self._groups,
            self.variant.counted,
            self.variant.declaration,
            self._false_declaration_loses,
        )

    def observe(self, games: np.ndarray, kind: str) -> np.ndarray:
        """Observation planes of ``games``: ``int8`` of shape ``(len(games), channels, 16)``."""
        out = np.zeros((len(games), num_observation_channels(kind), NUM_SQUARES), dtype=np.int8)
        _observe(
            out,
            games,
            self.lanes,
            self.occupied,
            self.available,
            self.hand,
            self.claimable,
            self._groups,
            self.variant.counted,
        )
        return out

    def returns(self, games: np.ndarray, players: np.ndarray) -> np.ndarray:
        """Final reward of ``players[i]`` in game ``games[i]``: +1 win, -1 loss, 0 draw or still playing."""
        winner = self.winner[games]
        return np.where(winner == NO_WINNER, 0.0, np.where(winner == players, 1.0, -1.0)).astype(np.float32)


def observe_state(variant: Variant, state: State, kind: str) -> np.ndarray:
    """The observation planes of one position, ``int8`` of shape ``(channels, 16)`` (as a batch would give)."""
    batch = GameBatch.from_states(variant, [state])
    return batch.observe(batch.all_games, kind)[0]


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@numba.njit(cache=True)
def _legal_masks(masks, games, occupied, available, hand, over, declaration):
    for i in range(len(games)):
        g = games[i]
        bits = legal_mask(occupied[g], available[g], hand[g], over[g], declaration)
        for a in range(masks.shape[1]):
            masks[i, a] = bits >> a & 1


@numba.njit(cache=True)
def _apply_actions(
    games,
    actions,
    lanes,
    occupied,
    available,
    hand,
    to_move,
    claimable,
    winner,
    over,
    groups,
    counted,
    declaration,
    false_declaration_loses,
):
    for i in range(len(games)):
        g = games[i]
        (lanes[g], occupied[g], available[g], hand[g], to_move[g], claimable[g], winner[g], over[g]) = apply_action(
            lanes[g],
            occupied[g],
            available[g],
            hand[g],
            to_move[g],
            claimable[g],
            actions[i],
            groups,
            counted,
            declaration,
            false_declaration_loses,
        )


@numba.njit(cache=True)
def _observe(out, games, lanes, occupied, available, hand, claimable, groups, counted):
    for i in range(len(games)):
        g = games[i]
        encode_observation(out[i], lanes[g], occupied[g], available[g], hand[g], claimable[g], groups, counted)
        if out.shape[1] > NUM_TACTICAL_CHANNELS:
            _write_lookahead(out[i], lanes[g], occupied[g], available[g], hand[g], groups, counted)


@numba.njit(cache=True)
def _write_lookahead(out, lanes, occupied, available, hand, groups, counted):
    with_parity = out.shape[0] > NUM_LOOKAHEAD_CHANNELS
    empty = ALL_SQUARES & ~occupied
    if hand != NO_PIECE:
        for s in range(NUM_SQUARES):
            if empty >> s & 1 and available:
                after = place_lanes(lanes, hand, s)
                filled = occupied | 1 << s
                if not winning_groups_through(after, filled, s, groups, counted):
                    safe_after = available & ~winning_pieces(after, filled, groups, counted)
                    out[SELF_TRAP_CHANNEL, s] = safe_after == 0
                    if with_parity:
                        out[ODD_SAFE_CHANNEL, s] = _count_bits(safe_after) & 1
        return
    safe = available & ~winning_pieces(lanes, occupied, groups, counted)
    for p in range(NUM_SQUARES):
        left = available & ~(1 << p)
        if not (safe >> p & 1) or left == 0:
            continue
        trapped = True
        even_everywhere = True
        for s in range(NUM_SQUARES):
            if empty >> s & 1:
                filled = occupied | 1 << s
                safe_after = left & ~winning_pieces(place_lanes(lanes, p, s), filled, groups, counted)
                if safe_after:
                    trapped = False
                    even_everywhere = even_everywhere and _count_bits(safe_after) % 2 == 0
                if not trapped and not (with_parity and even_everywhere):
                    break
        out[TRAP_GIVE_CHANNEL, p] = trapped
        if with_parity:
            out[EVEN_GIVE_CHANNEL, p] = even_everywhere


@numba.njit(cache=True)
def _count_bits(mask):
    count = 0
    while mask:
        mask &= mask - 1
        count += 1
    return count
