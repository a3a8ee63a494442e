"""Compiled helpers of the environment: one call that writes an observation, and random play for benchmarks
and tests.

Everything here goes through the rules core's ``@jitable`` functions (``legal_mask``,
``apply_action``), so compiled games follow exactly the rules of :func:`quarto_env.core.step`.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np

from quarto_env.core import (
    DECLARE,
    INITIAL_STATE,
    MAX_GAME_LENGTH,
    State,
    Variant,
    apply_action,
    compiled_fields,
    count_bits,
    legal_mask,
    set_bit_number,
    useful_mask,
)
from quarto_env.errors import QuartoValueError
from quarto_env.observation import encode_observation

RECORD_LENGTH = MAX_GAME_LENGTH + 2
"""Room for the actions of one game -- 16 gives, 16 placements, one declaration -- and the ``-1`` after them."""


@numba.njit(cache=True)
def write_observation(planes, mask, level, fields, groups, counted, declaration, acting):  # type: ignore[no-untyped-def]
    """Fill one observation in a single compiled call: the planes of :mod:`quarto_env.observation` up to
    ``level`` into ``planes`` (every one written), and into ``mask`` (``int8``, one entry per action) the
    legal actions when ``acting``, else zeros. The position comes whole, as :func:`~quarto_env.core.compiled_fields`."""
    encode_observation(planes, level, *fields, groups, counted)
    _, occupied, available, hand, _, _, _, over = fields
    legal = legal_mask(occupied, available, hand, over, declaration) if acting else 0
    for action in range(mask.shape[0]):
        mask[action] = (legal >> action) & 1


# ---------------------------------------------------------------------------------------------------------
# Random draws: SplitMix64 (Steele, Lea & Flood 2014), its state one uint64 that the caller holds
# ---------------------------------------------------------------------------------------------------------
GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX_1, MIX_2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def new_generator(seed: int) -> np.ndarray:
    """The state of a generator for :func:`random_below` and the playouts: any seed in ``0 .. 2**64 - 1``."""
    return np.array([seed], dtype=np.uint64)


@numba.njit(cache=True, inline="always")
def next_word(states, i):  # type: ignore[no-untyped-def]
    """The next random 64-bit word of the stream whose state is ``states[i]`` (a uint64 array), advancing it:
    SplitMix64, a handful of instructions and no thread-local state, where numba's ``np.random`` costs a few
    dozen. Unsigned throughout: numba's signed products may not wrap."""
    states[i] += GOLDEN_GAMMA
    z = states[i]
    z = (z ^ (z >> np.uint64(30))) * MIX_1
    z = (z ^ (z >> np.uint64(27))) * MIX_2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def random_below(states, i, count):  # type: ignore[no-untyped-def]
    """A random integer in ``0 .. count - 1`` (``count`` from 1 to ``2**32``), advancing the stream ``states[i]``
    (:func:`next_word`), by the multiply-shift range reduction of Lemire (2019): the high 32 bits times ``count``,
    over ``2**32``. Its bias, under ``count / 2**32``, is below 4e-9 for the 17 actions of a position."""
    z = next_word(states, i)
    return np.int64(((z >> np.uint64(32)) * np.uint64(count)) >> np.uint64(32))


@numba.njit(cache=True)
def random_member(mask, generator):  # type: ignore[no-untyped-def]
    """A uniformly random set bit of the non-zero action ``mask``, drawn from ``generator`` (a stream of one)."""
    return set_bit_number(mask, random_below(generator, 0, count_bits(mask)))


@numba.njit(cache=True)
def random_playout(fields, rules, record, generator):  # type: ignore[no-untyped-def]
    """Play a game that is not over to its end at random; returns ``(winner, number of actions played)``.

    Uniform over the legal actions, except that a declaration is played exactly when something can be
    claimed (a false one would end the game, or repeat forever under the penalty policy). ``fields`` is the
    position (:func:`~quarto_env.core.compiled_fields`), ``rules`` its variant (:attr:`Variant.compiled`); every
    move goes through the core's ``apply_action``. ``record`` (a row of ``RECORD_LENGTH`` integers) receives the
    actions, then ``-1``, so that a test can replay them. Draws from ``generator`` (:func:`new_generator`).
    """
    lanes, occupied, available, hand, to_move, claimable, winner, over = fields
    declaration = rules[2]
    length = 0
    while not over:
        if claimable != 0:
            action = DECLARE
        else:
            action = random_member(useful_mask(occupied, available, hand, claimable, over, declaration), generator)
        record[length] = action
        length += 1
        lanes, occupied, available, hand, to_move, claimable, winner, over = apply_action(
            lanes, occupied, available, hand, to_move, claimable, action, *rules
        )
    record[length] = -1
    return winner, length


def playout_from(variant: Variant, state: State, record: np.ndarray, seed: int) -> tuple[int, int]:
    """:func:`random_playout` from ``state`` (not over) under ``variant``, its generator seeded with ``seed``:
    ``(winner, actions played)``."""
    winner, length = random_playout(compiled_fields(state), variant.compiled, record, new_generator(seed))
    return int(winner), int(length)


@numba.njit(cache=True)
def play_random_games(rules, seed, actions, winners):  # type: ignore[no-untyped-def]
    """Play ``len(winners)`` :func:`random_playout` games from the opening position. Returns the number of
    actions played. ``actions[g]`` (a row of ``RECORD_LENGTH``) receives game ``g``'s actions followed by
    ``-1``, and ``winners[g]`` its winner (0, 1, or ``NO_WINNER``)."""
    generator = np.full(1, seed, dtype=np.uint64)
    total = 0
    start = INITIAL_STATE
    for game in range(len(winners)):
        winner, length = random_playout(
            (
                start.lanes,
                start.occupied,
                start.available,
                start.hand,
                start.to_move,
                start.claimable,
                start.winner,
                start.over,
            ),
            rules,
            actions[game],
            generator,
        )
        winners[game] = winner
        total += length
    return total


@dataclasses.dataclass(frozen=True)
class RandomGames:
    """The record of :func:`random_games`."""

    actions: np.ndarray
    """``(num_games, RECORD_LENGTH)`` int8: each game's actions, then ``-1`` to the end of the row."""
    winners: np.ndarray
    """``(num_games,)`` int8: 0, 1, or ``NO_WINNER`` for a draw."""
    num_actions: int
    """Actions played in all the games together."""


def random_games(variant: Variant, num_games: int, seed: int) -> RandomGames:
    """Play ``num_games`` random games of ``variant`` in one compiled, single-threaded call."""
    if num_games < 1:
        raise QuartoValueError(f"num_games must be >= 1, got {num_games}")
    actions = np.full((num_games, RECORD_LENGTH), -1, dtype=np.int8)
    winners = np.empty(num_games, dtype=np.int8)
    total = play_random_games(variant.compiled, seed, actions, winners)
    return RandomGames(actions, winners, int(total))
