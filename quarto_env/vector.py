"""Many Quarto games side by side in flat arrays, stepped and observed by compiled kernels.

:class:`GameBatch` is the engine of self-play training: it holds ``N`` games as one array per field of
:class:`quarto_env.core.State`, and applies actions, computes legal-action masks and writes observation
planes for any subset of the games in one call. The kernels call the rules core's ``register_jitable``
functions (``apply_action``, ``legal_mask``, ``winning_pieces``, ...) and the observation kernel of
:mod:`quarto_env.observation`, so the batched games follow exactly the rules of :func:`quarto_env.core.step`.

Observations
------------
:meth:`GameBatch.observe` writes the planes of any kind of :mod:`quarto_env.observation` with the same kernel
as the env, so training sees exactly what ``quarto_env.env(observation=kind)`` shows.

All planes are ``int8`` of shape ``(channels, 16)``; squares and pieces are interchangeable slots, which the
``slots`` policy of :mod:`agents.ppo` exploits.
"""

from __future__ import annotations

import numba
import numpy as np

from quarto_env.core import (
    NO_WINNER,
    IllegalActionError,
    State,
    Variant,
    apply_action,
    compiled_fields,
    legal_mask,
    useful_mask,
)
from quarto_env.observation import encode_observation, observation_kind


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
        for name, value in zip(State._fields, compiled_fields(state), strict=True):  # the arrays are signed 64-bit
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
        it either loses or changes nothing, so learners are not offered it (see :mod:`experiments.training.selfplay`).
        """
        masks = np.zeros((len(games), self.num_actions), dtype=np.bool_)
        _action_masks(
            masks,
            games,
            self.occupied,
            self.available,
            self.hand,
            self.claimable,
            self.over,
            self.variant.declaration,
            false_declarations,
        )
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
            self.variant.group_array,
            self.variant.counted,
            self.variant.declaration,
            self._false_declaration_loses,
        )

    def observe(self, games: np.ndarray, kind: str) -> np.ndarray:
        """Observation planes of ``games`` (:mod:`quarto_env.observation`): ``int8`` of shape
        ``(len(games), channels, 16)``."""
        found = observation_kind(kind)
        out = np.zeros((len(games), *found.shape), dtype=np.int8)
        _observe(
            out,
            found.level,
            games,
            self.lanes,
            self.occupied,
            self.available,
            self.hand,
            self.to_move,
            self.claimable,
            self.winner,
            self.over,
            self.variant.group_array,
            self.variant.counted,
        )
        return out

    def returns(self, games: np.ndarray, players: np.ndarray) -> np.ndarray:
        """Final reward of ``players[i]`` in game ``games[i]``: +1 win, -1 loss, 0 draw or still playing."""
        winner = self.winner[games]
        return np.where(winner == NO_WINNER, 0.0, np.where(winner == players, 1.0, -1.0)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@numba.njit(cache=True)
def _action_masks(masks, games, occupied, available, hand, claimable, over, declaration, false_declarations):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        g = games[i]
        if false_declarations:
            bits = legal_mask(occupied[g], available[g], hand[g], over[g], declaration)
        else:
            bits = useful_mask(occupied[g], available[g], hand[g], claimable[g], over[g], declaration)
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
def _observe(out, level, games, lanes, occupied, available, hand, to_move, claimable, winner, over, groups, counted):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        g = games[i]
        encode_observation(
            out[i],
            level,
            lanes[g],
            occupied[g],
            available[g],
            hand[g],
            to_move[g],
            claimable[g],
            winner[g],
            over[g],
            groups,
            counted,
        )
