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

:class:`Symmetries` applies both kinds to batches of positions and to the action distributions that go with
them (a square moves with the board, a piece with the relabelling).
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba.extending import register_jitable

from quarto_env.core import LINES, NO_PIECE, NUM_ACTIONS, NUM_SQUARES, SQUARE_BLOCKS, Variant

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


class Symmetries:
    """The symmetries of a variant as tables, to move positions and their action distributions together (the
    augmentation of AlphaZero's training).

    A symmetry is a board symmetry (``images[b][s]``: where square ``s`` goes) with a relabelling of the counted
    attributes: new attribute ``k`` is old attribute ``source[r][k]``, complemented where ``flip[r][k]``. On a
    piece that is ``pieces[r][p]``; on the attribute lanes, new lane ``k`` is old lane ``source[k]`` (xor the
    occupied squares where flipped), moved square by square. Positions come as rows of
    :func:`quarto_env.core.position_array` with nothing claimable (a claim is never searched: it is played).
    """

    def __init__(self, variant: Variant) -> None:
        self.counted = variant.counted
        self.images = np.array(symmetries_for(variant.squares), dtype=np.int64)
        counted = [k for k in range(4) if variant.counted >> k & 1]
        sources, flips = [], []
        for order in _permutations(counted):
            for flip_bits in range(1 << len(counted)):
                source = list(range(4))
                flip = [0] * 4
                for i, k in enumerate(counted):
                    source[k] = order[i]
                    flip[k] = flip_bits >> i & 1
                sources.append(source)
                flips.append(flip)
        self.sources = np.array(sources, dtype=np.int64)
        self.flips = np.array(flips, dtype=np.int64)
        self.pieces = np.array(
            [[_relabelled(p, s, f) for p in range(16)] for s, f in zip(sources, flips, strict=True)], dtype=np.int64
        )

    @property
    def count(self) -> int:
        return len(self.images) * len(self.sources)

    def apply(
        self, positions: np.ndarray, policy: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each position and distribution moved by its own random symmetry."""
        boards = rng.integers(len(self.images), size=len(positions))
        labels = rng.integers(len(self.sources), size=len(positions))
        return self.apply_chosen(positions, policy, boards, labels)

    def apply_chosen(
        self, positions: np.ndarray, policy: np.ndarray, boards: np.ndarray, labels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Position ``i`` and its distribution moved by board symmetry ``boards[i]`` and relabelling ``labels[i]``."""
        out_positions = np.empty_like(positions)
        out_policy = np.empty_like(policy)
        tables = (self.images, self.sources, self.flips, self.pieces)
        _transform(positions, policy, boards, labels, tables, out_positions, out_policy)
        return out_positions, out_policy

    def position_key(self, row: np.ndarray) -> tuple[int, int, int]:
        """The canonical form of one position (a row of :func:`quarto_env.core.position_array`, nothing claimable):
        the smallest ``(occupied, lanes, hand)`` over its images under every symmetry, the piece in hand
        included (:func:`canonical_board` covers boards alone). Two positions share it exactly when a symmetry
        maps one onto the other. ``lanes`` are the image's lanes as signed int64 with the uncounted attributes'
        lanes zeroed, ``hand`` the image's piece in hand with its uncounted attribute bits zeroed (or
        :data:`~quarto_env.core.NO_PIECE`). See :meth:`position_keys` for many positions at once."""
        occupied, lanes, hand = self.position_keys(row[None, :])[0].tolist()
        return occupied, lanes, hand

    def position_keys(self, rows: np.ndarray) -> np.ndarray:
        """``(n, 3)`` int64: the :meth:`position_key` of each row of ``rows``, compiled (tens of microseconds a
        position with standard rules, where moving a position by all 12,288 symmetries in numpy took
        milliseconds)."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        keys = np.empty((len(rows), 3), dtype=np.int64)
        tables = (self.images, self.sources, self.flips, self.pieces)
        _smallest_images(rows, tables, self.counted, keys)
        return keys


def _permutations(items: list[int]) -> list[list[int]]:
    if not items:
        return [[]]
    return [[x, *rest] for i, x in enumerate(items) for rest in _permutations(items[:i] + items[i + 1 :])]


def _relabelled(piece: int, source: list[int], flip: list[int]) -> int:
    return sum(((piece >> source[k] & 1) ^ flip[k]) << k for k in range(4))


@numba.njit(cache=True)
def _transform(positions, policy, boards, labels, tables, out_positions, out_policy):  # type: ignore[no-untyped-def]
    images, sources, flips, pieces = tables
    for i in range(len(positions)):
        image = images[boards[i]]
        r = labels[i]
        lanes, occupied, available, hand = positions[i, 0], positions[i, 1], positions[i, 2], positions[i, 3]
        new_lanes = 0
        for k in range(4):
            lane = (lanes >> (16 * sources[r, k])) & 0xFFFF
            if flips[r, k]:
                lane ^= occupied
            moved = 0
            for s in range(NUM_SQUARES):
                if lane >> s & 1:
                    moved |= 1 << image[s]
            new_lanes |= moved << (16 * k)
        new_occupied = 0
        for s in range(NUM_SQUARES):
            if occupied >> s & 1:
                new_occupied |= 1 << image[s]
        new_available = 0
        for p in range(NUM_SQUARES):
            if available >> p & 1:
                new_available |= 1 << pieces[r, p]
        out_positions[i] = positions[i]  # the player to move, and nothing claimable, won or over
        out_positions[i, 0] = new_lanes
        out_positions[i, 1] = new_occupied
        out_positions[i, 2] = new_available
        out_positions[i, 3] = pieces[r, hand] if hand != NO_PIECE else NO_PIECE
        for a in range(NUM_ACTIONS):
            target = image[a] if hand != NO_PIECE else pieces[r, a]
            out_policy[i, target] = policy[i, a]


@numba.njit(cache=True)
def _smallest_images(positions, tables, counted, keys):  # type: ignore[no-untyped-def]
    """``keys[i]`` = the smallest ``(occupied, lanes, hand)`` over the images of ``positions[i]`` under every
    board symmetry and relabelling of ``tables`` (see :meth:`Symmetries.position_key`).

    The images are those of :func:`_transform`, without building them: a board symmetry moves the occupied
    squares whatever the relabelling, so a board whose moved occupancy is already larger than the best is
    skipped whole; and moving a lane commutes with complementing it on the occupied squares, so each old lane is
    moved once per board and the relabellings only pick and complement moved lanes."""
    images, sources, flips, pieces = tables
    uncounted = 0
    for k in range(4):
        if not counted >> k & 1:
            uncounted |= 0xFFFF << (16 * k)
    for i in range(len(positions)):
        lanes, occupied, hand = positions[i, 0], positions[i, 1], positions[i, 3]
        best_occupied, best_lanes, best_hand = -1, 0, 0
        for b in range(len(images)):
            image = images[b]
            moved_occupied = 0
            for s in range(NUM_SQUARES):
                if occupied >> s & 1:
                    moved_occupied |= 1 << image[s]
            if best_occupied >= 0 and moved_occupied > best_occupied:
                continue
            moved = np.zeros(4, dtype=np.int64)
            for j in range(4):
                lane = (lanes >> (16 * j)) & 0xFFFF
                for s in range(NUM_SQUARES):
                    if lane >> s & 1:
                        moved[j] |= 1 << image[s]
            for r in range(len(sources)):
                new_lanes = 0
                for k in range(4):
                    lane = moved[sources[r, k]]
                    if flips[r, k]:
                        lane ^= moved_occupied
                    new_lanes |= lane << (16 * k)
                new_lanes &= ~uncounted
                new_hand = pieces[r, hand] & counted if hand != NO_PIECE else NO_PIECE
                if (
                    best_occupied < 0
                    or moved_occupied < best_occupied
                    or (moved_occupied == best_occupied and new_lanes < best_lanes)
                    or (moved_occupied == best_occupied and new_lanes == best_lanes and new_hand < best_hand)
                ):
                    best_occupied, best_lanes, best_hand = moved_occupied, new_lanes, new_hand
        keys[i, 0] = best_occupied
        keys[i, 1] = best_lanes
        keys[i, 2] = best_hand
