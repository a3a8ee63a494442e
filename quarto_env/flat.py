"""``quarto_v1`` with flat ``float32`` planes, the observation RLlib's action-masking modules read.

:func:`flat_env` wraps :func:`quarto_env.env` (every flag and ``reset(options={"position": ...})`` unchanged) in
:class:`FlatObservation`, a thin PettingZoo wrapper that changes only the observation::

    {"observation": int8 (channels, 16), "action_mask": int8 (num_actions,)}         # quarto_v1
    {"observations": float32 (channels * 16,), "action_mask": int8 (num_actions,)}    # flat_env

The planes are laid out channel by channel (``planes.reshape(-1)``), so ``observations.reshape(channels, 16)``
gives them back; the key is ``observations`` and the board flat because RLlib's action-masking module looks for
that key and its default encoders refuse a 2-D ``Box``. The mask stays ``int8``: PettingZoo's convention, which
``Discrete.sample(mask)`` and its ``api_test`` require (a ``float32`` mask fails them); the masking module
reads either. Turns, rewards (the loser sees -1 whether its placement
or its give lost), infos and the illegal-move policy are quarto_v1's. RLlib's ``PettingZooEnv`` steps it
unchanged: the same agent acts twice in a row (place, then give) and the first action is a give.

:func:`decode` goes the other way: the position a set of planes shows, as a :class:`quarto_env.core.State`, so
that an agent of :mod:`agents` (which acts on a ``State``) can play from an observation alone. This module
imports neither ray nor torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper

from quarto_env.core import NO_PIECE, NUM_ATTRIBUTES, NUM_SQUARES, State, Variant, from_board, is_winning_group
from quarto_env.env import env as quarto_env
from quarto_env.errors import QuartoValueError
from quarto_env.observation import OBSERVATION_KINDS, PLACING

OBSERVATIONS = "observations"
"""The key of the flat planes (RLlib's action-masking modules read this one)."""
ACTION_MASK = "action_mask"
OCCUPIED, FIRST_ATTRIBUTE, CLAIMABLE, IN_HAND = 0, 1, 9, 11
"""The raw channels :func:`decode` reads (the table is :data:`quarto_env.observation.CHANNELS`)."""
RAW_CHANNELS = OBSERVATION_KINDS["raw"].num_channels
"""The fewest channels that hold a whole position: every kind starts with the raw ones."""


class FlatObservation(BaseWrapper):
    """``quarto_v1`` seen through flat ``float32`` observations (see the module docstring)."""

    def __init__(self, env: AECEnv) -> None:
        super().__init__(env)
        inner = env.observation_space(env.possible_agents[0])
        planes = inner["observation"].shape
        self._space = spaces.Dict(
            {
                OBSERVATIONS: spaces.Box(0.0, 1.0, shape=(int(np.prod(planes)),), dtype=np.float32),
                ACTION_MASK: inner[ACTION_MASK],
            }
        )

    def observation_space(self, agent: str) -> spaces.Space:
        return self._space

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        return flatten(self.env.observe(agent))


def flat_env(**kwargs: Any) -> FlatObservation:
    """``quarto_env.env(**kwargs)`` with flat ``float32`` observations."""
    return FlatObservation(quarto_env(**kwargs))


def flatten(observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A ``quarto_v1`` observation as :class:`FlatObservation` shows it."""
    return {
        OBSERVATIONS: observation["observation"].reshape(-1).astype(np.float32),
        ACTION_MASK: observation[ACTION_MASK],
    }


def decode(variant: Variant, planes: np.ndarray) -> State:
    """The position shown by ``planes`` -- ``(channels, 16)`` or flat, any numeric type, of any observation kind --
    of a game that is not over. Who moves follows from the counts, as in :func:`quarto_env.core.from_board`;
    in the declaration variant the claimable groups are the winning groups whose squares are all marked
    claimable."""
    planes = np.asarray(planes).reshape(-1, NUM_SQUARES) > 0.5
    if planes.shape[0] < RAW_CHANNELS:
        raise QuartoValueError(
            f"planes of {planes.shape[0]} channels hold no position; at least the {RAW_CHANNELS} raw ones"
        )
    weights = 1 << np.arange(NUM_ATTRIBUTES)
    pieces = weights @ planes[FIRST_ATTRIBUTE : FIRST_ATTRIBUTE + NUM_ATTRIBUTES]
    board = np.where(planes[OCCUPIED], pieces, NO_PIECE)
    in_hand = np.flatnonzero(planes[IN_HAND])
    placing = bool(planes[PLACING, 0])
    if placing != (len(in_hand) == 1):
        raise QuartoValueError(
            f"planes show {len(in_hand)} piece(s) in hand in the {'placing' if placing else 'giving'} phase"
        )
    state = from_board(board.tolist(), int(in_hand[0]) if placing else NO_PIECE)
    marked = int(planes[CLAIMABLE] @ (1 << np.arange(NUM_SQUARES)))
    claimable = sum(
        1 << i
        for i, group in enumerate(variant.groups)
        if group & marked == group and is_winning_group(state.lanes, state.occupied, group, variant.counted)
    )
    return state._replace(claimable=claimable)
