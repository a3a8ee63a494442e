"""Many Quarto games side by side in one array, stepped and observed by compiled kernels.

:class:`GameBatch` is the engine of self-play training: it holds ``N`` games as one ``(N, 8)`` array, a row of
the fields of :class:`quarto_env.core.State` per game (:func:`quarto_env.core.position_array`), and applies
actions, computes legal-action masks and writes observation planes for any subset of the games in one call.
The kernels call the rules core's ``register_jitable`` functions (``apply_action``, ``legal_mask``, ...) and
the observation kernel of :mod:`quarto_env.observation`, so the batched games follow exactly the rules of
:func:`quarto_env.core.step`.

Observations
------------
:meth:`GameBatch.observe` writes the planes of any kind of :mod:`quarto_env.observation` with the same kernel
as the env, so training sees exactly what ``quarto_env.env(observation=kind)`` shows.

All planes are ``int8`` of shape ``(channels, 16)``; squares and pieces are interchangeable slots, which the
``slots`` network of :mod:`agents.networks` exploits.
"""

from __future__ import annotations

import numba
import numpy as np

from quarto_env.core import (
    FIELD_AVAILABLE,
    FIELD_CLAIMABLE,
    FIELD_HAND,
    FIELD_LANES,
    FIELD_OCCUPIED,
    FIELD_OVER,
    FIELD_TO_MOVE,
    FIELD_WINNER,
    NO_WINNER,
    NUM_FIELDS,
    IllegalActionError,
    State,
    Variant,
    compiled_fields,
    legal_mask,
    position_fields,
    step_position,
    useful_mask,
)
from quarto_env.observation import ObservationKind, encode_observation


class GameBatch:
    """``num_games`` independent games of one rule variant, as one array (a row per game).

    :attr:`positions` is the ``(num_games, NUM_FIELDS)`` array of :func:`quarto_env.core.position_array`; the
    field properties (``lanes``, ``hand``, ``winner``, ``over``, ...) are its columns. Every method takes
    ``games``, an integer array of game indices, and acts on those games only.
    """

    def __init__(self, variant: Variant, num_games: int) -> None:
        if num_games < 1:
            raise ValueError(f"num_games must be >= 1, got {num_games}")
        self.variant = variant
        self.num_games = num_games
        self.num_actions = variant.num_actions
        self.positions = np.zeros((num_games, NUM_FIELDS), dtype=np.int64)
        self.reset(self.all_games)

    lanes = property(lambda self: self.positions[:, FIELD_LANES])
    occupied = property(lambda self: self.positions[:, FIELD_OCCUPIED])
    available = property(lambda self: self.positions[:, FIELD_AVAILABLE])
    hand = property(lambda self: self.positions[:, FIELD_HAND])
    to_move = property(lambda self: self.positions[:, FIELD_TO_MOVE])
    claimable = property(lambda self: self.positions[:, FIELD_CLAIMABLE])
    winner = property(lambda self: self.positions[:, FIELD_WINNER])
    over = property(lambda self: self.positions[:, FIELD_OVER] != 0, doc="Whether each game has ended (a copy).")

    @property
    def all_games(self) -> np.ndarray:
        """The indices of every game."""
        return np.arange(self.num_games)

    def reset(self, games: np.ndarray) -> None:
        """Put ``games`` back to the opening position."""
        self.set_state(games, State())

    def set_state(self, games: np.ndarray, state: State) -> None:
        """Put ``games`` in ``state``."""
        self.positions[games] = compiled_fields(state)  # the array is signed 64-bit, as compiled_fields' lanes

    def state(self, game: int) -> State:
        """Game ``game`` as a rules-core :class:`State`."""
        lanes, occupied, available, hand, to_move, claimable, winner, over = (int(v) for v in self.positions[game])
        return State(lanes & (1 << 64) - 1, occupied, available, hand, to_move, claimable, winner, bool(over))

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
        _action_masks(masks, games, self.positions, self.variant.declaration, false_declarations)
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
        _apply_actions(games, actions, self.positions, self.variant.compiled)

    def observe(self, games: np.ndarray, kind: ObservationKind) -> np.ndarray:
        """Observation planes of ``kind`` (:func:`quarto_env.observation.observation_kind`) for ``games``: ``int8``
        of shape ``(len(games), channels, 16)``."""
        out = np.zeros((len(games), *kind.shape), dtype=np.int8)
        _observe(out, kind.level, games, self.positions, self.variant.group_array, self.variant.counted)
        return out

    def returns(self, games: np.ndarray, players: np.ndarray) -> np.ndarray:
        """Final reward of ``players[i]`` in game ``games[i]``: +1 win, -1 loss, 0 draw or still playing."""
        winner = self.winner[games]
        return np.where(winner == NO_WINNER, 0.0, np.where(winner == players, 1.0, -1.0)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@numba.njit(cache=True)
def _action_masks(masks, games, positions, declaration, false_declarations):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        _, occupied, available, hand, _, claimable, _, over = position_fields(positions[games[i]])
        if false_declarations:
            bits = legal_mask(occupied, available, hand, over, declaration)
        else:
            bits = useful_mask(occupied, available, hand, claimable, over, declaration)
        for a in range(masks.shape[1]):
            masks[i, a] = bits >> a & 1


@numba.njit(cache=True)
def _apply_actions(games, actions, positions, rules):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        step_position(positions[games[i]], actions[i], rules)


@numba.njit(cache=True)
def _observe(out, level, games, positions, groups, counted):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        encode_observation(out[i], level, *position_fields(positions[games[i]]), groups, counted)
