"""The rules of Quarto in pure JAX: the transition, the legal actions and every observation plane, on arrays.

A second implementation of :mod:`quarto_env.core` and :mod:`quarto_env.observation`, written for ``jit`` and
``vmap`` on any device: no Python branch on a value, no host round-trip, fixed shapes, no gather. It is checked
against the compiled core move for move (``quarto bench jax --check``), which stays the ground truth.

Encoding
--------
The board is the core's *attribute lanes*, split into four ``int32`` numbers because JAX computes in 32 bits by
default: ``lanes[k]`` has bit ``s`` set when square ``s`` holds a piece whose attribute ``k`` is 1, and
``occupied`` has bit ``s`` set when square ``s`` holds any piece (the core packs the four lanes into one 64-bit
integer, :mod:`quarto_env.core`). The rest of a position is ``hand`` (the piece to place, ``-1`` when the next
action is a give), ``available`` (the 16-bit mask of pieces that can be given) and, in the declaration variant,
``claimable`` (a mask over the group indices of :attr:`quarto_env.core.Variant.groups`).

What a group's pieces share is a *values* byte: bit ``k`` when every piece on it has attribute ``k`` at 1, bit
``4 + k`` when every piece has it at 0. For a group mask ``g`` with its pieces ``on = g & occupied``, lane ``k``
gives both at once: ``lanes[k] & on`` is ``on`` (all 1) or ``0`` (all 0). Worked example: tall light square solid
piece 5 on square 0 and tall dark square solid piece 7 on square 1, group ``0b0011``: lane 0 (tall) ``& on`` is
``0b11`` (all tall), lane 1 (dark) ``0b10`` (neither), lane 2 (square) ``0b11``, lane 3 (hollow) ``0`` (all
solid): values ``0b1000_0101``. A full group wins when its values, masked by the counted attributes, are not
zero: the win test is that one expression, over every group at once.

Threats, the planes' one source
-------------------------------
A group of three threatens its empty square with its values (a piece with one of them wins there); a group of two
threatens to become one. Every derived plane is read off these, as in :mod:`quarto_env.observation`: a piece is
safe to give when it has none of the values threatened anywhere; after a quiet placement of ``q`` on ``s``, the
values threatened are those threatened at the other squares, plus those of the groups of two through ``s`` that
``q`` shares (the groups of three it makes).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from quarto_env.core import DECLARE, NUM_ATTRIBUTES, NUM_PIECES, NUM_SQUARES, PIECES_WITH_ATTRIBUTE, Variant
from quarto_env.observation import piece_values

NO_PIECE = -1
NO_WINNER = -1
ALL = 0xFFFF

VALUES = np.array([piece_values(p) for p in range(NUM_PIECES)], dtype=np.int32)
"""``VALUES[p]``: the values byte of piece ``p`` alone."""
BIT = np.int32(1) << np.arange(16, dtype=np.int32)
"""``BIT[i]`` is ``1 << i``."""
ATTRIBUTE = np.arange(NUM_ATTRIBUTES, dtype=np.int32)
OTHER_SQUARES = ~np.eye(NUM_SQUARES, dtype=bool)
"""``OTHER_SQUARES[s, t]``: ``t`` is not ``s``."""


@dataclasses.dataclass(frozen=True)
class Tables:
    """A variant as the functions below take it, built once per env: numpy constants that ``jit`` folds in."""

    groups: np.ndarray
    """``(groups,)`` int32: each group's 16-bit square mask, in :attr:`quarto_env.core.Variant.groups` order."""
    group_has: np.ndarray
    """``(groups, 16)`` bool: square ``s`` is in group ``g``."""
    counted_values: int
    """The values bits of the counted attributes (both bits of each)."""
    declaration: bool
    false_declaration_loses: bool

    @classmethod
    def of(cls, variant: Variant) -> Tables:
        groups = np.array(variant.groups, dtype=np.int32)
        has = (groups[:, None] & BIT[None, :]) != 0
        counted = variant.counted | variant.counted << 4
        return cls(groups, has, counted, variant.declaration, variant.false_declaration == "lose")


# ---------------------------------------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------------------------------------
def bit_or(values: jax.Array, axis: int) -> jax.Array:
    """The bitwise OR of ``values`` along ``axis``."""
    return jax.lax.reduce(values, jnp.int32(0), jax.lax.bitwise_or, (axis,))


def mask_of(flags: jax.Array) -> jax.Array:
    """The booleans ``flags`` (16 in the last axis) as a 16-bit mask."""
    return jnp.sum(jnp.where(flags, BIT, 0), axis=-1)


def flags_of(mask: jax.Array) -> jax.Array:
    """The 16-bit ``mask`` (any shape) as 16 booleans in a new last axis."""
    return (mask[..., None] & BIT) != 0


def popcount(mask: jax.Array) -> jax.Array:
    return jax.lax.population_count(mask)


def values_of(piece: jax.Array) -> jax.Array:
    """The values byte of ``piece`` (arithmetic rather than a table: a gather costs more than this on a CPU)."""
    return piece | (~piece & 0xF) << 4


def pieces_with(values: jax.Array) -> jax.Array:
    """The 16-bit mask of the pieces with at least one of ``values`` (bytes, any shape)."""
    return mask_of((jnp.asarray(VALUES) & values[..., None]) != 0)


def placed(lanes: jax.Array, occupied: jax.Array, piece: jax.Array, square: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(lanes, occupied)`` with ``piece`` put on the empty ``square``."""
    return lanes | ((piece >> jnp.asarray(ATTRIBUTE)) & 1) << square, occupied | 1 << square


# ---------------------------------------------------------------------------------------------------------
# Groups and threats
# ---------------------------------------------------------------------------------------------------------
def groups_of(tables: Tables, lanes: jax.Array, occupied: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(shared, count, empty)`` per group: the counted values its pieces share, how many it holds, and the mask
    of its empty squares."""
    groups = jnp.asarray(tables.groups)
    on = groups & occupied
    in_lanes = lanes[:, None] & on[None, :]  # (attributes, groups)
    attribute = jnp.asarray(ATTRIBUTE)[:, None]
    ones = jnp.where(in_lanes == on[None, :], 1 << attribute, 0)
    zeros = jnp.where(in_lanes == 0, 16 << attribute, 0)
    shared = jnp.sum(ones | zeros, axis=0) & tables.counted_values
    return shared, popcount(on), groups & ~occupied


def threats_by_square(tables: Tables, shared: jax.Array, count: jax.Array, empty: jax.Array,
                      size: int) -> jax.Array:  # fmt: skip
    """Per square, the values of the groups of ``size`` pieces with that square empty (0 on occupied squares)."""
    empty_here = (empty[:, None] & BIT[None, :]) != 0  # (groups, 16)
    return bit_or(jnp.where(empty_here & (count == size)[:, None], shared[:, None], 0), 0)


def winning_groups_through(tables: Tables, lanes: jax.Array, occupied: jax.Array, square: jax.Array) -> jax.Array:
    """The mask over group indices of the full groups through ``square`` whose pieces share a counted value."""
    shared, count, _ = groups_of(tables, lanes, occupied)
    won = (count == 4) & (shared != 0) & ((jnp.asarray(tables.groups) >> square) & 1 != 0)
    return jnp.sum(jnp.where(won, 1 << jnp.arange(len(tables.groups), dtype=jnp.int32), 0))


def give_planes(tables: Tables, lanes: jax.Array, occupied: jax.Array,
                available: jax.Array) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """``(trap_give, even_give)`` of a position where a piece is to be given, as piece masks: the safe pieces
    after which, wherever the receiver puts them, no piece (an even number of pieces) left is safe."""
    shared, count, empty = groups_of(tables, lanes, occupied)
    threes = threats_by_square(tables, shared, count, empty, 3)
    pairs = threats_by_square(tables, shared, count, empty, 2)
    kept = bit_or(jnp.where(OTHER_SQUARES, threes[None, :], 0), 1)  # (16,): threatened at another square
    safe = available & ~pieces_with(bit_or(threes, 0))
    after = kept[:, None] | (pairs[:, None] & jnp.asarray(VALUES)[None, :])  # (square, piece)
    safe_after = available & ~jnp.asarray(BIT)[None, :] & ~pieces_with(after)
    empty_square = ~flags_of(occupied)[:, None]
    trap = jnp.all(~empty_square | (safe_after == 0), axis=0)
    even = jnp.all(~empty_square | (popcount(safe_after) % 2 == 0), axis=0)
    enough = popcount(available) >= 2  # a piece is left to give after this one
    return jnp.where(enough, safe & mask_of(trap), 0), jnp.where(enough, safe & mask_of(even), 0)


# ---------------------------------------------------------------------------------------------------------
# Observation planes
# ---------------------------------------------------------------------------------------------------------
def planes(tables: Tables, level: int, lanes: jax.Array, occupied: jax.Array, hand: jax.Array,
           available: jax.Array, claimable: jax.Array) -> jax.Array:  # fmt: skip
    """The observation planes up to ``level`` (:attr:`quarto_env.observation.ObservationKind.level`, static), as
    a bool ``(channels, 16)`` array equal to :func:`quarto_env.observation.observe`'s. Every plane is worked out as
    a 16-bit mask, as the compiled kernel does, and the masks become planes in one operation at the end."""
    if tables.declaration:
        claimed_groups = (claimable >> jnp.arange(len(tables.groups), dtype=jnp.int32)) & 1 != 0
        claimed = bit_or(jnp.where(claimed_groups, jnp.asarray(tables.groups), 0), 0)
    else:  # nothing is ever claimable
        claimed = jnp.int32(0)
    masks = [
        occupied,
        *(lanes & occupied),
        *(~lanes & occupied),
        claimed,
        available,
        jnp.where(hand >= 0, 1 << jnp.maximum(hand, 0), 0),
        *PIECES_WITH_ATTRIBUTE,
        jnp.where(hand >= 0, ALL, 0),
    ]
    if level >= 1:
        masks += derived_planes(tables, level, lanes, occupied, hand, available)
    return flags_of(jnp.stack([jnp.asarray(mask, dtype=jnp.int32) for mask in masks]))


def derived_planes(tables: Tables, level: int, lanes: jax.Array, occupied: jax.Array, hand: jax.Array,
                   available: jax.Array) -> list[jax.Array]:  # fmt: skip
    """The masks of the planes from ``square_wins`` on, to the kind of ``level``: pairs of a square plane (set only
    when placing) and a piece plane (set only when giving)."""
    placing = hand >= 0
    hand_values = values_of(hand)
    shared, count, empty = groups_of(tables, lanes, occupied)
    three = count == 3
    threatened = bit_or(jnp.where(three, shared, 0), 0)
    wins_here = bit_or(jnp.where(three & ((shared & hand_values) != 0), empty, 0), 0)
    safe = available & ~pieces_with(threatened)

    def when_placing(squares: jax.Array) -> jax.Array:
        return jnp.where(placing, squares, 0)

    def when_giving(pieces: jax.Array) -> jax.Array:
        return jnp.where(placing, 0, pieces)

    masks = [when_placing(wins_here), when_giving(available & ~safe)]
    if level < 2:
        return masks
    # After placing the piece in hand on a quiet square: the values threatened then, and the safe pieces left.
    quiet = jnp.where(available != 0, ALL & ~occupied & ~wins_here, 0)
    threes = threats_by_square(tables, shared, count, empty, 3)
    pairs = threats_by_square(tables, shared, count, empty, 2)
    kept = bit_or(jnp.where(OTHER_SQUARES, threes[None, :], 0), 1)
    safe_after = available & ~pieces_with(kept | (pairs & hand_values))  # (16,): per square
    trap_give, even_give = give_planes(tables, lanes, occupied, available)
    masks += [when_placing(quiet & mask_of(safe_after == 0)), when_giving(trap_give)]
    if level >= 3:
        masks += [when_placing(quiet & mask_of(popcount(safe_after) % 2 == 1)), when_giving(even_give)]
    if level >= 4:
        sets_trap, sets_even, allows_trap, allows_even = tempo_planes(tables, lanes, occupied, hand, available, safe)
        masks += [when_placing(quiet & sets_trap), when_placing(quiet & sets_even)]
        masks += [when_giving(allows_trap), when_giving(allows_even)]
    return masks


def tempo_planes(tables: Tables, lanes: jax.Array, occupied: jax.Array, hand: jax.Array, available: jax.Array,
                 safe: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:  # fmt: skip
    """``(sets_trap, sets_even, allows_trap, allows_even)`` before their phase is applied: the give planes of
    every position one placement on -- of the piece in hand (placing), or of each safe piece (giving), on each
    empty square -- reduced to the squares (pieces) after which one is not empty."""

    def after_placing(piece: jax.Array, square: jax.Array) -> tuple[jax.Array, jax.Array]:
        left = available & ~(1 << piece)  # the piece in hand is not in available: nothing removed
        return give_planes(tables, *placed(lanes, occupied, piece, square), left)

    pieces = jnp.where(hand >= 0, hand, jnp.arange(NUM_PIECES))  # (16,): the hand 16 times, or every piece
    traps, evens = jax.vmap(jax.vmap(after_placing, (None, 0)), (0, None))(pieces, jnp.arange(NUM_SQUARES))
    can_place = ~flags_of(occupied)[None, :] & ((available & ~BIT) != 0)[:, None]  # a piece is left after it
    allows_trap = mask_of(jnp.any(can_place & (traps != 0), 1)) & safe
    allows_even = mask_of(jnp.any(can_place & (evens != 0), 1)) & safe
    return mask_of(traps[0] != 0), mask_of(evens[0] != 0), allows_trap, allows_even  # row 0: the piece in hand


# ---------------------------------------------------------------------------------------------------------
# The transition
# ---------------------------------------------------------------------------------------------------------
def legal_actions(tables: Tables, occupied: jax.Array, hand: jax.Array, available: jax.Array, over: jax.Array,
                  declared_falsely: jax.Array) -> jax.Array:  # fmt: skip
    """The bool mask of legal actions: the empty squares when placing, the available pieces when giving, and the
    declaration (except right after an ignored false one); nothing once the game is over."""
    moves = flags_of(jnp.where(hand >= 0, ALL & ~occupied, available))
    if tables.declaration:
        moves = jnp.append(moves, ~declared_falsely)
    return moves & ~over


def play(tables: Tables, lanes, occupied, hand, available, to_move, claimable, action):  # type: ignore[no-untyped-def]
    """The legal ``action`` played: ``(lanes, occupied, hand, available, to_move, claimable, winner, over,
    declared_falsely)`` after it, ``winner`` a core player (0 gives first) or ``NO_WINNER``. As
    :func:`quarto_env.core.apply_action`."""
    giving = hand < 0
    square = jnp.clip(action, 0, NUM_SQUARES - 1)
    new_lanes, new_occupied = placed(lanes, occupied, jnp.maximum(hand, 0), square)
    won = jnp.where(giving, 0, winning_groups_through(tables, new_lanes, new_occupied, square))
    full = new_occupied == ALL
    if tables.declaration:
        new_claimable = jnp.where(giving, claimable, won)
        winner = jnp.int32(NO_WINNER)
        over = ~giving & full & (won == 0)
    else:
        new_claimable = claimable
        winner = jnp.where(won != 0, to_move, NO_WINNER)
        over = ~giving & (full | (won != 0))
    result = (
        jnp.where(giving, lanes, new_lanes),
        jnp.where(giving, occupied, new_occupied),
        jnp.where(giving, action, NO_PIECE),
        jnp.where(giving, available & ~(1 << square), available),
        jnp.where(giving, 1 - to_move, to_move),
        new_claimable,
        winner,
        over,
        jnp.bool_(False),
    )
    if not tables.declaration:
        return result
    true_claim = claimable != 0
    loses = tables.false_declaration_loses
    declared = (
        lanes,
        occupied,
        hand,
        available,
        to_move,
        jnp.where(true_claim, 0, claimable),
        jnp.where(true_claim, to_move, (1 - to_move) if loses else NO_WINNER),
        true_claim | loses,
        ~true_claim & (not loses),
    )
    return jax.tree.map(lambda a, b: jnp.where(action == DECLARE, a, b), declared, result)
