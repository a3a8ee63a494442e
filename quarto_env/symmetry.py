"""The symmetries of Quarto: facts of the game that keep a position's value.

Two kinds of transformation map a position to one of equal value:

* **Board symmetries** -- permutations of the 16 squares that map every group onto a group. They are found by
  search over square permutations (:func:`board_symmetries`), not typed in: 32 for the 10 standard lines
  (rotations, reflections, swapping the two middle rows and columns, turning the board "inside out"), and 8
  when the 2x2 blocks count too (the rotations and reflections).
* **Piece relabellings** -- permuting the *counted* attributes among themselves and complementing any of them
  (4! * 2**4 = 384 when all four count). The win test ``(a & b & c & d) | (~a & ~b & ~c & ~d)`` over the counted
  attributes is blind to both.

On the attribute lanes of the rules core (one 16-bit square mask per attribute) a relabelling is simply a
permutation of the counted lanes, with lane ``k`` replaced by ``lane_k ^ occupied`` where attribute ``k`` is
complemented. That makes an exact normal form under all relabellings cheap: replace each counted lane by the
smaller of ``lane`` and ``lane ^ occupied``, then sort the lanes. :func:`canonical_board` takes the smallest such
form over the board symmetries too, so two positions have the same canonical form exactly when a symmetry maps
one onto the other.

Attributes that do not count (the beginners' variant) never decide a game: pieces that agree on the counted
attributes are interchangeable, so the canonical form drops the other lanes altogether.
"""

from __future__ import annotations

import functools

import numpy as np
from numba.extending import register_jitable

from quarto_env.core import LINES, NUM_SQUARES, SQUARE_BLOCKS

LANE_MASK = (1 << NUM_SQUARES) - 1


@functools.cache
def board_symmetries(groups: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Every permutation of the squares that maps each group in ``groups`` (16-bit masks) onto a group.

    A permutation is a tuple ``image`` with ``image[s]`` the square that square ``s`` moves to. The identity
    comes first. Found by depth-first search, assigning the images of squares 0, 1, ... in turn and pruning
    as soon as the assigned part of some group can no longer lie inside one group.
    """
    group_set = frozenset(groups)
    image = [0] * NUM_SQUARES
    found: list[tuple[int, ...]] = []

    def partial_image(group: int, assigned: int) -> int:
        return sum(1 << image[s] for s in range(assigned) if group >> s & 1)

    def consistent(assigned: int) -> bool:
        newest = assigned - 1  # only the groups through the square just assigned can have become inconsistent
        for group in groups:
            if not group >> newest & 1:
                continue
            mapped = partial_image(group, assigned)
            if group >> assigned == 0:  # every square of the group is assigned: it must map onto a group
                if mapped not in group_set:
                    return False
            elif not any(mapped & ~target == 0 for target in groups):
                return False
        return True

    def extend(square: int, used: int) -> None:
        if square == NUM_SQUARES:
            found.append(tuple(image))
            return
        for target in range(NUM_SQUARES):
            if not used >> target & 1:
                image[square] = target
                if consistent(square + 1):
                    extend(square + 1, used | 1 << target)

    extend(0, 0)
    return tuple(found)


def symmetries_for(squares: bool) -> tuple[tuple[int, ...], ...]:
    """The board symmetries of the variant: 32 for the standard lines, 8 with the 2x2 blocks."""
    return board_symmetries(LINES + SQUARE_BLOCKS if squares else LINES)


def map_squares(mask: int, image: tuple[int, ...]) -> int:
    """The square mask ``mask`` moved by the permutation ``image``."""
    return sum(1 << image[s] for s in range(NUM_SQUARES) if mask >> s & 1)


@functools.cache
def byte_tables(squares: bool) -> tuple[np.ndarray, np.ndarray]:
    """Lookup tables for moving square masks fast in compiled code: ``low[t, b]`` and ``high[t, b]`` are the
    images under symmetry ``t`` of the squares in byte ``b`` of the low (squares 0-7) and high (8-15) halves,
    so symmetry ``t`` maps ``mask`` to ``low[t, mask & 255] | high[t, mask >> 8]``."""
    images = symmetries_for(squares)
    low = np.array([[map_squares(b, image) for b in range(256)] for image in images], dtype=np.int64)
    high = np.array([[map_squares(b << 8, image) for b in range(256)] for image in images], dtype=np.int64)
    low.flags.writeable = False
    high.flags.writeable = False
    return low, high


@register_jitable
def _apply(low, high, t: int, mask: int) -> int:
    return low[t, mask & 0xFF] | high[t, (mask >> 8) & 0xFF]


@register_jitable
def canonical_board(lanes: int, occupied: int, counted: int, low, high) -> tuple[int, int]:
    """The canonical form ``(occupied, packed_lanes)`` of a board under the board symmetries in ``low, high``
    (see :func:`byte_tables`) and every relabelling of the counted attributes.

    ``packed_lanes`` holds the four normalised lanes (uncounted ones zero) sorted, smallest in the low 16 bits;
    every normalised lane is below ``2**15`` (it never contains the highest occupied square), so the packed
    value is a non-negative int64. Forms are compared by ``occupied`` first, then by ``packed_lanes``.
    """
    lane0 = _counted_lane(lanes, counted, 0)
    lane1 = _counted_lane(lanes, counted, 1)
    lane2 = _counted_lane(lanes, counted, 2)
    lane3 = _counted_lane(lanes, counted, 3)
    best_occupied = LANE_MASK + 1
    best_packed = 0
    for t in range(low.shape[0]):
        moved_occupied = _apply(low, high, t, occupied)
        if moved_occupied > best_occupied:
            continue
        a = _normalised(_apply(low, high, t, lane0), moved_occupied)
        b = _normalised(_apply(low, high, t, lane1), moved_occupied)
        c = _normalised(_apply(low, high, t, lane2), moved_occupied)
        d = _normalised(_apply(low, high, t, lane3), moved_occupied)
        # A sorting network for four values.
        a, b = min(a, b), max(a, b)
        c, d = min(c, d), max(c, d)
        a, c = min(a, c), max(a, c)
        b, d = min(b, d), max(b, d)
        b, c = min(b, c), max(b, c)
        packed = a | b << 16 | c << 32 | d << 48
        if moved_occupied < best_occupied or packed < best_packed:
            best_occupied = moved_occupied
            best_packed = packed
    return best_occupied, best_packed


@register_jitable
def _counted_lane(lanes: int, counted: int, k: int) -> int:
    """Lane ``k`` as a 16-bit square mask, or 0 when attribute ``k`` does not count."""
    return (lanes >> (16 * k)) & LANE_MASK if counted >> k & 1 else 0


@register_jitable
def _normalised(lane: int, occupied: int) -> int:
    """The lane or its complement on the occupied squares, whichever is smaller."""
    return min(lane, lane ^ occupied)


def canonical_position(lanes: int, occupied: int, counted: int, squares: bool) -> tuple[int, int]:
    """:func:`canonical_board` from Python, for a board given by its (unsigned) lanes and occupied mask."""
    low, high = byte_tables(squares)
    return canonical_board(lanes, occupied, counted, low, high)
