"""The rules of Quarto in pure JAX: the transition, the legal actions and every observation plane, on arrays.

A second implementation of :mod:`quarto_env.core` and :mod:`quarto_env.observation`, written for ``jit`` and
``vmap`` on any device: no Python branch on a value, no host round-trip, fixed shapes. It is checked against the
compiled core move for move (``quarto bench jax --check``), which stays the ground truth.

Encoding
--------
A position is a handful of ``int32`` arrays:

- ``board``: 16 entries, the piece on each square or ``-1`` (squares row by row, ``4 * row + col``);
- ``hand``: the piece to be placed, or ``-1`` when the next action is a give;
- ``available``: a 16-bit mask of the pieces that can still be given;
- ``claimable``: in the declaration variant, a mask over the group indices of the groups completed by the last
  placement (:attr:`quarto_env.core.Variant.groups` order).

The core packs the board into 64-bit attribute lanes; JAX runs in 32 bits by default, so here each square holds
its piece's **values**: a byte with bit ``k`` set when the piece's attribute ``k`` is 1 and bit ``4 + k`` when it
is 0 (:func:`quarto_env.observation.piece_values`). Worked example: piece ``5`` (tall, light, square, solid) has
values ``0b1010_0101``; piece ``7`` (tall, dark, square, solid) ``0b1000_0111``. What pieces share is the AND of
their bytes: ``0b1000_0101`` (tall, square, solid). An empty square counts as ``0xFF`` in that AND, so the AND
over a group is what its pieces share, however many there are; masked by the counted attributes' bits, a full
group wins when it is not zero -- the win test is that one expression.

Threats, the planes' one source
-------------------------------
For every empty square, ``threes`` are the values shared by the pieces of a group of three whose empty square it
is (a piece with one of them wins there) and ``pairs`` those of a group of two through it. Every derived plane
is read off them, as in :mod:`quarto_env.observation`: a piece is safe to give when it has none of the values
threatened anywhere; after a quiet placement of ``q`` on ``s``, the values threatened are those threatened at the
other squares, plus ``pairs[s] & values(q)`` (the groups of two that ``q`` turns into groups of three).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from quarto_env.core import DECLARE, NUM_PIECES, NUM_SQUARES, PIECES_WITH_ATTRIBUTE, Variant
from quarto_env.observation import OBSERVATION_KINDS, PIECES_WITH_VALUES, piece_values

ALL = 0xFFFF
NO_PIECE = -1
NO_WINNER = -1

VALUES = np.array([piece_values(p) for p in range(NUM_PIECES)], dtype=np.int32)
"""``VALUES[p]``: the values byte of piece ``p``."""
PIECES_WITH = np.asarray(PIECES_WITH_VALUES, dtype=np.int32)
"""``PIECES_WITH[values]``: the 16-bit mask of pieces with at least one of ``values``."""
BIT = np.int32(1) << np.arange(16, dtype=np.int32)
"""``BIT[i]`` is ``1 << i``."""
OTHER_SQUARES = ~np.eye(NUM_SQUARES, dtype=bool)
"""``OTHER_SQUARES[s, t]``: ``t`` is not ``s``."""
PIECE_ATTRIBUTES = np.array([[p >> k & 1 for p in range(NUM_PIECES)] for k in range(4)], dtype=bool)
"""``PIECE_ATTRIBUTES[k, p]``: piece ``p`` has attribute ``k`` (a constant plane of the observation)."""
assert all(int((PIECE_ATTRIBUTES[k] * BIT).sum()) == PIECES_WITH_ATTRIBUTE[k] for k in range(4))


@dataclasses.dataclass(frozen=True)
class Tables:
    """A variant's tables, built once per env: numpy constants that ``jit`` folds in."""

    group_squares: np.ndarray
    """``(groups, 4)``: the squares of each group."""
    group_has: np.ndarray
    """``(groups, 16)`` bool: square ``s`` is in group ``g``."""
    counted_values: int
    """The values bytes' bits of the counted attributes (both bits of each counted attribute)."""
    declaration: bool
    false_declaration_loses: bool
    num_actions: int

    @classmethod
    def of(cls, variant: Variant) -> Tables:
        groups = variant.groups
        squares = np.array([[s for s in range(NUM_SQUARES) if g >> s & 1] for g in groups], dtype=np.int32)
        has = np.array([[bool(g >> s & 1) for s in range(NUM_SQUARES)] for g in groups])
        counted = variant.counted | variant.counted << 4
        return cls(squares, has, counted, variant.declaration, variant.false_declaration == "lose",
                   variant.num_actions)  # fmt: skip


def bit_or(values: jax.Array, axis: int) -> jax.Array:
    """The bitwise OR of ``values`` along ``axis``."""
    return jax.lax.reduce(values, jnp.int32(0), jax.lax.bitwise_or, (axis,))


def mask_of(flags: jax.Array) -> jax.Array:
    """The booleans ``flags`` (16 in the last axis) as a 16-bit mask."""
    return jnp.sum(jnp.where(flags, BIT, 0), axis=-1)


def values_of(pieces: jax.Array) -> jax.Array:
    """The values byte of each of ``pieces``; ``0xFF`` for ``-1`` (no piece): the identity of what pieces share.
    Arithmetic rather than a table: a gather per game costs more than these three operations on a CPU."""
    return jnp.where(pieces >= 0, pieces | (~pieces & 0xF) << 4, 0xFF)


def pieces_with(values: jax.Array) -> jax.Array:
    """The 16-bit mask of the pieces with at least one of ``values`` (bytes, any shape): ``PIECES_WITH[values]``
    without a gather."""
    return mask_of((jnp.asarray(VALUES) & values[..., None]) != 0)


def flags_of(mask: jax.Array) -> jax.Array:
    """The 16-bit ``mask`` as 16 booleans."""
    return (mask & BIT) != 0


def popcount(mask: jax.Array) -> jax.Array:
    return jax.lax.population_count(mask)


# ---------------------------------------------------------------------------------------------------------
# Groups and threats
# ---------------------------------------------------------------------------------------------------------
def groups_of(tables: Tables, values: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(shared, count)`` per group: the counted values its pieces share, and how many pieces it holds."""
    has = jnp.asarray(tables.group_has)
    shared = jax.lax.reduce(jnp.where(has, values[None, :], 0xFF), jnp.int32(0xFF), jax.lax.bitwise_and, (1,))
    count = jnp.sum(has & (values != 0xFF)[None, :], axis=1)
    return shared & tables.counted_values, count


def threats(tables: Tables, values: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(threes, pairs)``: per square, the values of the groups of three it completes and of the groups of two
    through it (0 on occupied squares)."""
    shared, count = groups_of(tables, values)
    empty_in = jnp.asarray(tables.group_has) & (values == 0xFF)[None, :]  # (groups, 16)
    threes = bit_or(jnp.where(empty_in & (count == 3)[:, None], shared[:, None], 0), 0)
    pairs = bit_or(jnp.where(empty_in & (count == 2)[:, None], shared[:, None], 0), 0)
    return threes, pairs


def winning_groups(tables: Tables, values: jax.Array) -> jax.Array:
    """The mask over group indices of the full groups whose pieces share a counted value."""
    shared, count = groups_of(tables, values)
    won = (count == 4) & (shared != 0)
    return jnp.sum(jnp.where(won, jnp.int32(1) << jnp.arange(won.shape[0], dtype=jnp.int32), 0))


def give_planes(tables: Tables, values: jax.Array, available: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(trap_give, even_give)`` of a position where a piece is to be given, as piece masks: the safe pieces
    after which, wherever the receiver puts them, no piece (an even number of pieces) left is safe."""
    threes, pairs = threats(tables, values)
    threatened = bit_or(threes, 0)
    kept = bit_or(jnp.where(OTHER_SQUARES, threes[None, :], 0), 1)  # (16,): threatened at another square
    safe = available & ~pieces_with(threatened)
    after = kept[:, None] | (pairs[:, None] & jnp.asarray(VALUES)[None, :])  # (square, piece)
    safe_after = available & ~jnp.asarray(BIT)[None, :] & ~pieces_with(after)
    empty = (values == 0xFF)[:, None]
    trap = jnp.all(~empty | (safe_after == 0), axis=0)
    even = jnp.all(~empty | (popcount(safe_after) % 2 == 0), axis=0)
    enough = popcount(available) >= 2  # a piece is left to give after this one
    return jnp.where(enough, safe & mask_of(trap), 0), jnp.where(enough, safe & mask_of(even), 0)


# ---------------------------------------------------------------------------------------------------------
# Observation planes
# ---------------------------------------------------------------------------------------------------------
def planes(tables: Tables, level: int, board: jax.Array, hand: jax.Array, available: jax.Array,
           claimable: jax.Array) -> jax.Array:  # fmt: skip
    """The observation planes up to ``level`` (:attr:`quarto_env.observation.ObservationKind.level`, static), as
    a bool ``(channels, 16)`` array equal to :func:`quarto_env.observation.observe`'s."""
    values = values_of(board)
    occupied = board >= 0
    placing = hand >= 0
    attributes = jnp.where(occupied[None, :], (jnp.maximum(board, 0)[None, :] >> jnp.arange(4)[:, None]) & 1, -1)
    num_groups = tables.group_has.shape[0]
    claimed_groups = (claimable >> jnp.arange(num_groups, dtype=jnp.int32)) & 1 != 0
    claimed = jnp.any(claimed_groups[:, None] & jnp.asarray(tables.group_has), 0)
    rows = [
        occupied,
        *(attributes == 1),
        *(attributes == 0),
        claimed,
        flags_of(available),
        jnp.arange(NUM_PIECES) == hand,
        *jnp.asarray(PIECE_ATTRIBUTES),
        jnp.broadcast_to(placing, (NUM_SQUARES,)),
    ]
    if level >= 1:
        rows += derived_planes(tables, level, values, hand, available)
    out = jnp.stack(rows)
    num_channels = [kind.num_channels for kind in OBSERVATION_KINDS.values()][level]
    return out[:num_channels]


def derived_planes(tables: Tables, level: int, values: jax.Array, hand: jax.Array, available: jax.Array) -> list:
    """The planes from ``square_wins`` on, to the kind of ``level``: each pair is a square plane (set only when
    placing) and a piece plane (set only when giving)."""
    placing = hand >= 0
    hand_values = values_of(hand)
    threes, pairs = threats(tables, values)
    threatened = bit_or(threes, 0)
    empty = values == 0xFF
    wins_here = empty & ((threes & hand_values) != 0)
    safe = available & ~pieces_with(threatened)

    def when_placing(squares: jax.Array) -> jax.Array:
        return squares & placing

    def when_giving(pieces: jax.Array) -> jax.Array:
        return flags_of(pieces) & ~placing

    rows = [when_placing(wins_here), when_giving(pieces_with(threatened) & available)]
    if level < 2:
        return rows
    # After placing the piece in hand on a quiet square: the values threatened then, and the safe pieces left.
    quiet = empty & ~wins_here & (available != 0)
    kept = bit_or(jnp.where(OTHER_SQUARES, threes[None, :], 0), 1)
    safe_after = available & ~pieces_with(kept | (pairs & hand_values))
    trap_give, even_give = give_planes(tables, values, available)
    rows += [when_placing(quiet & (safe_after == 0)), when_giving(trap_give)]
    if level >= 3:
        rows += [when_placing(quiet & (popcount(safe_after) % 2 == 1)), when_giving(even_give)]
    if level >= 4:
        rows += tempo_planes(tables, values, hand, available, quiet, safe, when_placing, when_giving)
    return rows


def tempo_planes(tables, values, hand, available, quiet, safe, when_placing, when_giving) -> list:  # type: ignore[no-untyped-def]
    """``sets_trap``, ``sets_even``, ``allows_trap``, ``allows_even``: the give planes of every position one
    placement on, of the piece in hand (placing) or of each safe piece (giving), on each empty square."""

    def after_placing(piece: jax.Array, square: jax.Array) -> tuple[jax.Array, jax.Array]:
        left = available & ~(jnp.int32(1) << piece)  # the piece in hand is not in available: nothing removed
        return give_planes(tables, jnp.where(jnp.arange(NUM_SQUARES) == square, values_of(piece), values), left)

    pieces = jnp.where(hand >= 0, hand, jnp.arange(NUM_PIECES))  # (16,): the hand 16 times, or every piece
    traps, evens = jax.vmap(jax.vmap(after_placing, (None, 0)), (0, None))(pieces, jnp.arange(NUM_SQUARES))
    sets_trap, sets_even = quiet & (traps[0] != 0), quiet & (evens[0] != 0)  # row 0: the piece in hand
    empty = values == 0xFF
    can_place = (available & ~BIT) != 0  # (16,): a piece is left to give after this one
    settable = empty[None, :] & can_place[:, None]
    allows_trap = mask_of(jnp.any(settable & (traps != 0), 1)) & safe
    allows_even = mask_of(jnp.any(settable & (evens != 0), 1)) & safe
    return [when_placing(sets_trap), when_placing(sets_even), when_giving(allows_trap), when_giving(allows_even)]


# ---------------------------------------------------------------------------------------------------------
# The transition
# ---------------------------------------------------------------------------------------------------------
def legal_actions(tables: Tables, board: jax.Array, hand: jax.Array, available: jax.Array, over: jax.Array,
                  declared_falsely: jax.Array) -> jax.Array:  # fmt: skip
    """The bool mask of legal actions: the empty squares when placing, the available pieces when giving, and the
    declaration (except right after an ignored false one); nothing once the game is over."""
    moves = jnp.where(hand >= 0, board < 0, flags_of(available))
    if tables.declaration:
        moves = jnp.append(moves, ~declared_falsely)
    return moves & ~over


def play(tables: Tables, board, hand, available, to_move, claimable, action):  # type: ignore[no-untyped-def]
    """The legal ``action`` played: ``(board, hand, available, to_move, claimable, winner, over, declared_falsely)``
    after it, ``winner`` a core player (0 gives first) or ``NO_WINNER``. As :func:`quarto_env.core.apply_action`."""
    giving = hand < 0
    square = jnp.clip(action, 0, NUM_SQUARES - 1)
    placed = jnp.where(giving | (jnp.arange(NUM_SQUARES) != square), board, hand)
    won = jnp.where(giving, 0, winning_groups_through(tables, placed, square))
    full = jnp.all(placed >= 0)
    if tables.declaration:
        new_claimable = jnp.where(giving, claimable, won)
        winner = jnp.int32(NO_WINNER)
        over = ~giving & full & (won == 0)
    else:
        new_claimable = claimable
        winner = jnp.where(won != 0, to_move, NO_WINNER)
        over = ~giving & (full | (won != 0))
    result = (
        placed,
        jnp.where(giving, action, NO_PIECE),
        jnp.where(giving, available & ~(jnp.int32(1) << square), available),
        jnp.where(giving, 1 - to_move, to_move),
        new_claimable,
        winner,
        over,
        jnp.bool_(False),
    )
    if not tables.declaration:
        return result
    true_claim = claimable != 0
    declared = (
        board,
        hand,
        available,
        to_move,
        jnp.where(true_claim, 0, claimable),
        jnp.where(true_claim, to_move, jnp.where(tables.false_declaration_loses, 1 - to_move, NO_WINNER)),
        true_claim | tables.false_declaration_loses,
        ~true_claim & (not tables.false_declaration_loses),
    )
    return jax.tree.map(lambda a, b: jnp.where(action == DECLARE, a, b), declared, result)


def winning_groups_through(tables: Tables, board: jax.Array, square: jax.Array) -> jax.Array:
    """The mask over group indices of the winning groups that hold ``square``."""
    has = jnp.asarray(tables.group_has)
    through = jnp.any(has & (jnp.arange(NUM_SQUARES) == square)[None, :], axis=1)
    through = jnp.sum(jnp.where(through, 1 << jnp.arange(len(has)), 0))
    return winning_groups(tables, values_of(board)) & through
