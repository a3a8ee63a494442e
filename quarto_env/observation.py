"""The observation planes of ``quarto_v0``, computed by one compiled kernel for the environment and for the
batched training environment alike.

An observation is an ``int8`` array of shape ``(channels, 16)``: each channel is a plane over the 16 squares
(square channels) or over the 16 pieces (piece channels). Quarto is impartial -- no piece belongs to a
player -- so the acting player's view needs no flipping: it is the position plus the phase.

====  ========  ================================================================================
ch.   over      meaning
====  ========  ================================================================================
0     squares   the square is occupied
1-4   squares   the piece on it has attribute k = 1 (height tall, colour dark, shape square, top hollow)
5-8   squares   the piece on it has attribute k = 0 (short, light, round, solid)
9     squares   the square lies in a group that can be declared now (declaration variant; else 0)
10    pieces    the piece can be given (neither on the board nor in hand)
11    pieces    the piece is in hand, to be placed
12-15 pieces    the piece has attribute k = 1 (constant: lets a network share weights across pieces)
16    all       1 when the next action places the piece in hand, 0 when it gives (or declares)
17    squares   *tactical only*: placing the piece in hand here completes a winning group
18    pieces    *tactical only*: giving this (available) piece lets the receiver win at once
====  ========  ================================================================================

``tactical`` planes are the 1-ply facts a player needs to "take the win" and "not hand over a winning piece";
an agent can compute them itself, but learns far faster when they are given (see the README's curves).
They are computed by the rules core, for every variant.
"""

from __future__ import annotations

import numba
import numpy as np

from quarto_env.core import (
    NO_PIECE,
    NUM_ATTRIBUTES,
    NUM_SQUARES,
    State,
    Variant,
    signed_lanes,
    winning_pieces,
    winning_squares,
)

NUM_RAW_CHANNELS = 17
NUM_TACTICAL_CHANNELS = 19
CHANNEL_NAMES = (
    "occupied",
    *(f"square_{v}" for v in ("tall", "dark", "square", "hollow")),
    *(f"square_{v}" for v in ("short", "light", "round", "solid")),
    "claimable",
    "available",
    "in_hand",
    *(f"piece_{v}" for v in ("tall", "dark", "square", "hollow")),
    "placing",
    "square_wins",
    "piece_loses",
)
"""A name for each channel, in order."""


def num_channels(tactical: bool) -> int:
    """Number of observation channels."""
    return NUM_TACTICAL_CHANNELS if tactical else NUM_RAW_CHANNELS


@numba.njit(cache=True)
def encode_observation(out, lanes, occupied, available, hand, claimable, groups, counted):
    """Write the planes of one position into ``out`` (shape ``(17 or 19, 16)``, zeroed by the caller).

    The tactical planes are written when ``out`` has room for them.
    """
    for s in range(NUM_SQUARES):
        if occupied >> s & 1:
            out[0, s] = 1
            for k in range(NUM_ATTRIBUTES):
                bit = (lanes >> (16 * k + s)) & 1
                out[1 + k, s] = bit
                out[5 + k, s] = 1 - bit
    for i in range(len(groups)):
        if claimable >> i & 1:
            for s in range(NUM_SQUARES):
                if groups[i] >> s & 1:
                    out[9, s] = 1
    for p in range(NUM_SQUARES):
        out[10, p] = available >> p & 1
        for k in range(NUM_ATTRIBUTES):
            out[12 + k, p] = p >> k & 1
    if hand != NO_PIECE:
        out[11, hand] = 1
        out[16, :] = 1
    if out.shape[0] > NUM_RAW_CHANNELS:
        if hand != NO_PIECE:
            wins = winning_squares(lanes, occupied, hand, groups, counted)
            for s in range(NUM_SQUARES):
                out[17, s] = wins >> s & 1
        else:
            losing = winning_pieces(lanes, occupied, groups, counted) & available
            for p in range(NUM_SQUARES):
                out[18, p] = losing >> p & 1


def observe(variant: Variant, state: State, tactical: bool = False) -> np.ndarray:
    """The observation planes of ``state`` as a new ``int8`` array of shape ``(channels, 16)``."""
    out = np.zeros((num_channels(tactical), NUM_SQUARES), dtype=np.int8)
    encode_observation(
        out,
        signed_lanes(state.lanes),
        state.occupied,
        state.available,
        state.hand,
        state.claimable,
        variant.groups,
        variant.counted,
    )
    return out
