"""The move ordering of the compiled search (:mod:`agents.solver.kernels`): the order in which a give node tries
its gives and the placements that answer them, worked out from the threats on the board.

Every placement of every safe piece is scored by the safe pieces it leaves to the placer (who gives next).
Placements leaving the fewest come first, ties to the squares in the most groups (a placement leaving none
loses at once and comes last); pieces come
in increasing order of the safe pieces their placements leave in total, after the table's best piece. Both
put the smallest subtrees first, and threats are what decide Quarto.

The orders are written into a node's working space, ``scratch[ply]`` of the search (:func:`new_scratch`): one
row per piece for its placements, then the rows named below (``GIVES`` ... ``LIVE_GROUPS``). Every function here
but :func:`new_scratch` is compiled as the search's kernels are (:func:`quarto_env.kernel.kernel`) and called from
them.
"""

from __future__ import annotations

import numpy as np

from quarto_env.core import (
    ALL_PIECES,
    ALL_SQUARES,
    NUM_PIECES,
    NUM_SQUARES,
    lowest_bit,
    popcount,
    shared_attributes,
)
from quarto_env.kernel import kernel
from quarto_env.observation import PIECES_WITH_VALUES, piece_values

# A group's ``code`` is ``ones | zeros << 4`` of its shared attributes: a byte of the same kind as a piece's
# values (quarto_env.observation.piece_values), so PIECES_WITH_VALUES[code] is the pieces that complete it.
# Rows of a node's working space (``scratch[ply]``), after the placement orders of the 16 pieces:
GIVES, ELSEWHERE, HALF_FULL, GROUPS_THROUGH, LIVE_GROUPS = (NUM_PIECES + row for row in range(5))
SCRATCH_ROWS = NUM_PIECES + 5
SCRATCH_WIDTH = 32
"""Entries in a row: one per square or piece, and in ``LIVE_GROUPS`` the count and up to 31 groups (a variant has
at most 19)."""


def new_scratch(plies: int, groups: np.ndarray) -> np.ndarray:
    """The working space of one search thread, ``plies`` nodes deep: ``scratch[ply]`` has ``SCRATCH_ROWS`` rows
    of ``SCRATCH_WIDTH`` entries. Its ``GROUPS_THROUGH`` rows hold, for each square, the number of the variant's
    ``groups`` through it, which no position changes; the search writes the others."""
    scratch = np.full((plies, SCRATCH_ROWS, SCRATCH_WIDTH), -1, dtype=np.int64)
    scratch[:, GROUPS_THROUGH, :NUM_SQUARES] = [
        sum(int(g) >> square & 1 for g in groups) for square in range(NUM_SQUARES)
    ]
    return scratch


@kernel
def list_live_groups(lanes, occupied, groups, counted, orders) -> None:
    """Fill the row ``LIVE_GROUPS`` of ``orders`` from the board, in one pass over the groups: the count, then
    ``group | code << 16`` for each group (in the order of ``groups``) that has an empty square and whose pieces
    still share a counted attribute -- ``code`` is ``ones | zeros << 4`` of
    :func:`~quarto_env.core.shared_attributes`, and every counted attribute both ways for an empty group. The
    other groups can never be won: no threat, no win comes from them.

    The row of a child node follows from this one without the board (:func:`place_in_live_groups`)."""
    live = orders[LIVE_GROUPS]
    count = 0
    for group in groups:
        if group & ~occupied == 0:
            continue
        filled = group & occupied
        ones, zeros = shared_attributes(lanes, filled, counted) if filled else (counted, counted)
        if ones | zeros:
            count += 1
            live[count] = group | (ones | zeros << 4) << 16
    live[0] = count


@kernel
def place_in_live_groups(orders, square, piece, occupied, child) -> None:
    """The row of :func:`list_live_groups` of ``child``, the node after ``piece`` was placed on ``square`` of
    ``orders``' node (``occupied``: the child's occupied squares), derived from ``orders``' row: a group through
    ``square`` keeps the attributes that ``piece`` shares with it, and leaves the list once it has none left or
    no empty square (a full group was not won: the placed piece was safe)."""
    live, child_live = orders[LIVE_GROUPS], child[LIVE_GROUPS]
    placed, keeps, empty = 1 << square, piece_values(piece), ALL_SQUARES & ~occupied
    count = 0
    for i in range(1, live[0] + 1):
        entry = live_after_placement(live[i], placed, keeps, empty)
        if entry:
            count += 1
            child_live[count] = entry
    child_live[0] = count


@kernel
def live_after_placement(entry, placed, keeps, empty) -> int:
    """A live group's entry after a placement on the square ``placed`` (a bit; 0 for none) of a piece sharing
    ``keeps`` (its :func:`~quarto_env.observation.piece_values`), ``empty`` being the squares empty then; 0 once
    the group has no shared attribute or no empty square left."""
    if entry & placed:
        entry &= ALL_SQUARES | keeps << 16
    return entry if entry >> 16 and entry & empty else 0


@kernel
def describe_threats(occupied, orders) -> None:
    """Describe, for each empty square ``s``, how a placement on ``s`` changes the winning pieces, from the live
    groups of ``orders`` (:func:`list_live_groups`); in rows of ``orders``:

    * ``ELSEWHERE[s]``: the pieces that complete a group not through ``s`` -- the part of
      :func:`~quarto_env.core.winning_pieces` that a placement on ``s`` leaves unchanged;
    * ``HALF_FULL[s]``: ``ones | zeros << 4``, the counted attributes that the two pieces of some group through
      ``s`` with one other empty square share. A placement on ``s`` turns such a group into a threat exactly for
      the attributes the placed piece shares too; since ``PIECES_WITH_VALUES`` of a union of attributes is the
      union of theirs, one code serves all such groups.

    A group through ``s`` with three pieces becomes full: it holds no threat after a placement on ``s``. The
    entries of occupied squares are left as they were."""
    live, elsewhere, half_full = orders[LIVE_GROUPS], orders[ELSEWHERE], orders[HALF_FULL]
    empty = ALL_SQUARES & ~occupied
    squares = empty  # only the empty squares' entries are read: clear those
    while squares:
        square = lowest_bit(squares)
        squares &= squares - 1
        elsewhere[square], half_full[square] = 0, 0
    for i in range(1, live[0] + 1):
        group, code = live[i] & ALL_SQUARES, live[i] >> 16
        open_squares = group & empty
        filled = popcount(group & occupied)
        if filled == 3:
            others = empty & ~group
            while others:
                elsewhere[lowest_bit(others)] |= PIECES_WITH_VALUES[code]
                others &= others - 1
        elif filled == 2:
            while open_squares:
                square = lowest_bit(open_squares)
                open_squares &= open_squares - 1
                half_full[square] |= code


@kernel
def winning_pieces_after(piece, square, orders) -> int:
    """``winning_pieces`` of the board after ``piece`` is placed on ``square``, from the rows of
    :func:`describe_threats`."""
    return orders[ELSEWHERE, square] | PIECES_WITH_VALUES[orders[HALF_FULL, square] & piece_values(piece)]


@kernel
def order_placements(occupied, available, piece, orders, order) -> int:
    """Fill ``order`` with the empty squares for ``piece`` in the order to search them; returns their count
    (``orders``: a node's working space, filled by :func:`describe_threats`).

    Each entry is ``priority << 24 | safe << 8 | square``, where ``safe`` is the mask of pieces the placer can
    give safely afterwards. Placements leaving the fewest safe pieces come first: they make the smallest
    subtrees (the next give has the fewest choices) and are often the strongest, since they create threats.
    Placements leaving none lose at once and come last. Ties go to the squares in the most groups (the
    diagonals' squares in the standard game), where a piece makes or blocks the most threats. Both save many
    nodes (docs/baselines.md gives how many).
    """
    count = 0
    empty = ALL_SQUARES & ~occupied
    while empty:
        square = lowest_bit(empty)
        empty &= empty - 1
        safe = available & ~winning_pieces_after(piece, square, orders)
        priority = (NUM_PIECES + 1 - popcount(safe)) * 32 + orders[GROUPS_THROUGH, square] if safe else 0
        entry = priority << 24 | safe << 8 | square
        _insert_descending(order, count, entry)
        count += 1
    return count


@kernel
def _insert_descending(buffer, count, entry) -> None:
    """Insert ``entry`` into ``buffer[:count]``, kept sorted largest first (one step of an insertion sort)."""
    i = count
    while i > 0 and buffer[i - 1] < entry:
        buffer[i] = buffer[i - 1]
        i -= 1
    buffer[i] = entry


@kernel
def list_pieces(pieces, hint, out) -> int:
    """Fill ``out`` with the ``pieces`` to give, ``hint`` first, the others in index order; returns their count
    (used at the horizon, where no placement is searched)."""
    count = 0
    if hint >= 0 and pieces >> hint & 1:
        out[0] = hint
        count = 1
        pieces &= ~(1 << hint)
    while pieces:
        out[count] = lowest_bit(pieces)
        pieces &= pieces - 1
        count += 1
    return count


@kernel
def order_gives(occupied, available, safe, hint, orders) -> int:
    """Order the gives and the placements that answer them; returns the number of safe pieces (``orders``: a
    node's working space, filled by :func:`describe_threats`).

    Row ``GIVES`` of ``orders`` gets the safe pieces in the order to try them (entries ``priority << 8 |
    piece``): the table's best piece ``hint`` first, then the pieces whose placements leave the receiver the
    fewest safe pieces in total -- the smallest subtrees, and the hardest for the receiver. Row ``p`` gets the
    placements of piece ``p`` (see :func:`order_placements`).
    (docs/baselines.md gives the measured effect of the move ordering.)
    """
    count = 0
    pieces = safe
    out = orders[GIVES]
    while pieces:
        piece = lowest_bit(pieces)
        pieces &= pieces - 1
        n = order_placements(occupied, available & ~(1 << piece), piece, orders, orders[piece])
        total = 0
        for i in range(n):
            total += popcount(orders[piece, i] >> 8 & ALL_PIECES)
        priority = 1 << 20 if piece == hint else (1 << 12) - total
        entry = priority << 8 | piece
        _insert_descending(out, count, entry)
        count += 1
    return count
