"""The compiled negamax alpha-beta search behind the minimax agent and the exact solver; Python runs it
through :class:`agents.solver.alphabeta.AlphaBetaSearch`.

Plies and nodes
---------------
A **ply** is one action: a placement or a give (a declaration is never searched: it is taken at the root,
see :mod:`agents.solver.minimax`). A full turn -- place the piece in hand, then give one -- is two plies. The search
recurses on **give nodes**: the player to move gives a piece, the opponent places it (both plies inline in
one call), and the opponent becomes the giver of the child node. A position with a piece in hand is searched
by :func:`search_root`, which tries each placement and continues at the give node that follows. Every
give node visited counts as one **node**, except those with one or two empty squares in a search to the end:
their parent solves them inline (a safe last piece draws; a node with three empty squares is solved from one
pass over its live groups, see :func:`_last_three`). Near the end, from ``endgame_empties`` empty squares
(default 6), a search to the end continues in the leaner :func:`endgame`, which reads a list of the groups that
can still be won, each node's derived from its parent's (:func:`~agents.solver.ordering.list_live_groups`),
rather than the board.

Scores
------
Scores are integers for the side to move: ``WIN`` (a proven win), ``-WIN`` (a proven loss), ``0`` at a full
board (a draw), and ``+-EVAL`` from the evaluation at the horizon of a depth-limited search. A score of
``+-WIN`` is always proven, whatever the depth.

**Evaluation at the horizon** (:func:`evaluate`): the parity of the *safe* pieces -- those the side to move
could give without letting the receiver win at once. If no placement changed the threats, the players would
give safe pieces in turn and the one left without a safe piece to give would lose; so an odd count is
``+EVAL`` for the player who gives next, an even count ``-EVAL``. Both kinds of node are scored that way,
since at a placement node the side to move also gives next.

Rules shortcuts, all exact: a piece in hand with a winning square wins (``WIN``); a giver with no safe piece
loses (``-WIN``); only safe pieces are searched (an unsafe give loses at once, worse than any alternative); a
safe last piece is a draw (``0``); and a board on which no group can still be won
(:func:`can_still_be_won`) is a draw.

The moves are searched in the order of :mod:`agents.solver.ordering`, and give nodes are stored in the
transposition table of :mod:`agents.solver.table`.

Numba
-----
Every function here (and those of :mod:`agents.solver.ordering` and :mod:`agents.solver.table` it calls) is
compiled by :func:`quarto_env.kernel.kernel`: without numba's reference counting, which the search does not need
(it allocates nothing; docs/solver.md has what the counting cost), and with ``cache=True``: a second process loads
the machine code from ``__pycache__`` instead of compiling again, until a compiled module of the project changes
(:mod:`quarto_env.numba_cache`). The search releases the GIL
(``nogil=True``), so that threads search in parallel and a Python thread can stop a search from outside
(:mod:`agents.interrupts`).

Lanes are int64 inside (the rules core's 64-bit lanes seen as
two's complement; see :func:`quarto_env.core.signed_lanes`). The search is one self-recursive function:
numba's on-disk cache does not support mutually recursive ones.
"""

from __future__ import annotations

import numba
import numpy as np

from agents.solver.ordering import (
    GIVES,
    LIVE_GROUPS,
    describe_threats,
    list_live_groups,
    list_pieces,
    live_after_placement,
    order_gives,
    order_placements,
    place_in_live_groups,
    winning_pieces_after,
)
from agents.solver.table import (
    CANONICAL_FLAG,
    INFO,
    USED_FLAG,
    board_hash,
    counted_lanes,
    pack_data,
    probe_table,
    store_entry,
    unpack_data,
)
from quarto_env.core import (
    ALL_PIECES,
    ALL_SQUARES,
    NUM_ATTRIBUTES,
    NUM_SQUARES,
    PIECES_WITH_ATTRIBUTE,
    lowest_bit,
    place_lanes,
    popcount,
    shared_attributes,
    winning_pieces,
    winning_squares,
)
from quarto_env.kernel import kernel
from quarto_env.observation import piece_values
from quarto_env.symmetry import canonical_board

WIN = 100
"""Score of a proven win for the side to move."""
EVAL = 1
"""Size of a heuristic score at the horizon; far below ``WIN`` so that no evaluation is mistaken for a proof."""
INFINITY = WIN + 1
"""Beyond every score: the widest window is ``(-INFINITY, INFINITY)``."""
EXACT_DEPTH = 2 * NUM_SQUARES + 1
"""A remaining depth that reaches the end of every game: results searched to it are exact."""

# stats array slots
NODES = 0
ABORTED = 1
BEST_ACTION = 2
PROBES = 3
"""Table lookups..."""
HITS = 4
"""... and how many found their key."""
PATH_MOVES = 5
"""``stats[PATH_MOVES + 2 * ply]``: moves searched so far at the node of the current path at ``ply``, and
``stats[PATH_MOVES + 2 * ply + 1]``: its moves in all (at a give node a move is a give and the placement that
answers it), for the first ``PATH_PLIES`` plies: how far a long search has come."""
PATH_PLIES = 4
STATS_SIZE = PATH_MOVES + 2 * PATH_PLIES

BUSY_SLOTS = 4096
"""With several threads, ``shared[1:]`` holds marks of the boards being searched (see :func:`negamax_give`)..."""
BUSY_EMPTIES = 8
"""... those with at least this many empty squares."""

# settings array slots
CANONICAL_EMPTIES = 0
DRAW_TEST_EMPTIES = 1
TABLE_EMPTIES = 2
GIVE_ORDER_EMPTIES = 3
ENDGAME_EMPTIES = 4


@kernel
def evaluate(safe: int) -> int:
    """The horizon score for the side to move, who gives next and has the ``safe`` mask of safe pieces."""
    return EVAL if popcount(safe) & 1 else -EVAL


_ARRANGEMENTS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))
"""The six ways to put three pieces on three squares: arrangement ``n`` puts, on each square in increasing order,
the piece of that index among the three in increasing order."""
_HOLDING = np.array(
    [[sum(1 << n for n, order in enumerate(_ARRANGEMENTS) if order[i] == j) for j in range(3)] for i in range(3)],
    dtype=np.int64,
)
"""``_HOLDING[i, j]``: the arrangements (a bit each) that put piece ``j`` on square ``i``."""
_HOLDING_ANY = np.array(
    [[sum(int(_HOLDING[i, j]) for j in range(3) if pieces >> j & 1) for pieces in range(8)] for i in range(3)],
    dtype=np.int64,
)
"""``_HOLDING_ANY[i, pieces]``: the arrangements that put one of ``pieces`` (a bit for each index) on square ``i``."""
_DECIDING_SQUARE = np.array([-1, 0, 1, 2, 2, 1, 0, -1], dtype=np.int64)
"""``_DECIDING_SQUARE[m]``: the square whose piece decides a group with the open squares ``m`` (a subset of the three
with one or two squares): the one square, or the one left out."""
_THROUGH = [sum(1 << 8 * m for m in range(8) if m >> i & 1) for i in range(3)]
"""``_THROUGH[i]``: the subsets of the three squares that hold square ``i``, a byte each (see :func:`_last_three`)."""


def _completes(square: int, first: int) -> int:
    """The subsets (a byte each) whose groups a piece on ``square`` completes once ``first`` is filled too."""
    return 1 << 8 * (1 << square) | 1 << 8 * (1 << square | 1 << first)


def _play_masks(given: int, first: int) -> list[int]:
    """The masks of ``wins`` (see :func:`_last_three`) that decide the game once the piece of index ``given`` is
    placed on the square of index ``first``: the receiver then gives ``q`` or ``r`` (the two other pieces in
    increasing order) and the giver places it on the ``second`` or the ``third`` square left. Arrangement ``x``
    puts ``q`` on the second square and ``r`` on the third, ``y`` the other way round. Returns, for ``q`` then
    ``r``: where it wins at once (given, it is not safe), and where the last piece wins after it went on the
    second square, then on the third."""
    q, r = (p for p in range(3) if p != given)
    second, third = (square for square in range(3) if square != first)

    def arrangement(on_second: int) -> int:
        order = [0, 0, 0]
        order[first], order[second], order[third] = given, on_second, 3 - given - on_second
        return _ARRANGEMENTS.index(tuple(order))

    x, y = arrangement(q), arrangement(r)
    return [
        _completes(second, first) << x | _completes(third, first) << y,
        _THROUGH[third] << x,
        _THROUGH[second] << y,
        _completes(second, first) << y | _completes(third, first) << x,
        _THROUGH[third] << y,
        _THROUGH[second] << x,
    ]


_PLAYS = np.array([[_play_masks(given, first) for first in range(3)] for given in range(3)], dtype=np.int64)
"""``_PLAYS[given, first]``: :func:`_play_masks`, a table."""


@kernel
def _last_three(occupied, available, safe, live, placed, keeps) -> int:
    """The exact score, for the giver, of a give node with three empty squares (``safe``: the giver's safe
    pieces, not none), from one pass over its live groups: those of ``live`` (a row of
    :func:`~agents.solver.ordering.list_live_groups`) after the placement of a piece sharing ``keeps`` on the
    square ``placed`` (see :func:`~agents.solver.ordering.live_after_placement`): the parent's row and its last
    placement, or the node's own row and 0, 0.

    Once the three pieces are on the three squares -- in one of six arrangements -- a group whose open squares
    are the subset ``m`` of the three wins when the pieces on it and those put on ``m`` share a counted
    attribute. One pass over the groups records, for each subset ``m``, the arrangements under which a group with
    those open squares wins (bit ``8 * m + n`` of ``wins`` for arrangement ``n``). The rest of the game follows
    from those bits: the giver gives a safe piece; the receiver places it (it wins nowhere) and must give one of
    the two others that wins on neither square left, or lose; the giver places that one (it wins nowhere), and
    the last piece, placed by the receiver, wins when a group through the last square wins (those completed
    before did not). The masks of ``wins`` that decide each give and first placement come from ``_PLAYS``.
    """
    empty = ALL_SQUARES & ~occupied
    a = lowest_bit(empty)
    b = lowest_bit(empty & (empty - 1))
    c = lowest_bit(empty & (empty - 1) & ~(1 << b))
    p0 = lowest_bit(available)
    p1 = lowest_bit(available & (available - 1))
    p2 = lowest_bit(available & (available - 1) & ~(1 << p1))
    # What a group's code keeps once these pieces are on it (their values): each piece alone, each pair (named
    # by the piece left out), all three.
    k0, k1, k2 = piece_values(p0), piece_values(p1), piece_values(p2)
    wins = 0
    for g in range(1, live[0] + 1):
        entry = live_after_placement(live[g], placed, keeps, empty)
        if entry == 0:
            continue
        open_squares, code = entry & empty, entry >> 16
        subset = (open_squares >> a & 1) | (open_squares >> b & 1) << 1 | (open_squares >> c & 1) << 2
        if subset == 7:
            arrangements = 0x3F if code & k0 & k1 & k2 else 0
        else:
            if subset == 1 or subset == 2 or subset == 4:  # one square: the piece on it decides
                winners = (code & k0 != 0) | (code & k1 != 0) << 1 | (code & k2 != 0) << 2
            else:  # two squares: the piece left for the third decides which two they hold
                winners = (code & k1 & k2 != 0) | (code & k0 & k2 != 0) << 1 | (code & k0 & k1 != 0) << 2
            arrangements = _HOLDING_ANY[_DECIDING_SQUARE[subset], winners]
        wins |= arrangements << 8 * subset
    best = -WIN
    safe_indices = (safe >> p0 & 1) | (safe >> p1 & 1) << 1 | (safe >> p2 & 1) << 2
    for given in range(3):
        if not safe_indices >> given & 1:
            continue
        worst = WIN
        for first in range(3):  # the receiver places the given piece on square ``first``
            q_wins, q_last_second, q_last_third, r_wins, r_last_second, r_last_third = _PLAYS[given, first]
            q_safe, r_safe = not wins & q_wins, not wins & r_wins
            if not (q_safe or r_safe):
                score = WIN  # the receiver has no safe piece to give
            elif (q_safe and wins & q_last_second and wins & q_last_third) or (
                r_safe and wins & r_last_second and wins & r_last_third
            ):
                score = -WIN  # the receiver gives a piece whose last piece wins wherever it is placed
            else:
                score = 0
            worst = min(worst, score)
            if worst == -WIN:
                break
        best = max(best, worst)
        if best == WIN:
            break
    return best


@kernel
def can_still_be_won(lanes, occupied, available, groups, counted) -> bool:
    """Whether some group could still be completed as a winning group with the ``available`` pieces.

    A group that is not full can be won only through a counted attribute value that all its pieces share, and
    only if enough available pieces have that value to fill its empty squares. When no group passes this
    test, every continuation is a draw.
    """
    for group in groups:
        filled = group & occupied
        if filled == group:
            continue
        needed = popcount(group & ~occupied)
        if filled:
            ones, zeros = shared_attributes(lanes, filled, counted)
        else:
            ones, zeros = counted, counted
        for k in range(NUM_ATTRIBUTES):
            with_value = available & PIECES_WITH_ATTRIBUTE[k]
            if ones >> k & 1 and popcount(with_value) >= needed:
                return True
            if zeros >> k & 1 and popcount(available & ~with_value) >= needed:
                return True
    return False


@kernel
def _busy_mark(shared, lanes: int, occupied: int) -> tuple[int, np.int64]:
    """``(slot, tag)``: where in ``shared`` a board (not canonical) is marked as being searched, and the
    non-zero tag that marks it."""
    mixed = board_hash(lanes, occupied)
    tag = (mixed ^ (mixed >> 31)) | 1
    return 1 + (tag >> 1 & (shared.shape[0] - 2)), tag


@kernel
def _mark_busy(shared, lanes: int, occupied: int) -> int:
    """Mark the board as being searched by this thread; returns its slot in ``shared``."""
    slot, tag = _busy_mark(shared, lanes, occupied)
    shared[slot] = tag
    return slot


@kernel
def _is_busy(shared, lanes: int, occupied: int) -> bool:
    """Whether a thread marked the board as being searched (a mark may be stale or overwritten: a hint only)."""
    slot, tag = _busy_mark(shared, lanes, occupied)
    return shared[slot] == tag


# Explicit signatures: one compiled version of each search function, whatever the variant (the groups are an
# array) or the constants a caller passes. A recursive function cached with several versions crashes numba.
_INT = numba.types.int64
_VECTOR = numba.types.Array(_INT, 1, "C")
_MATRIX = numba.types.Array(_INT, 2, "C")
_CONST_VECTOR = numba.types.Array(_INT, 1, "C", readonly=True)
_CONST_MATRIX = numba.types.Array(_INT, 2, "C", readonly=True)
_SCRATCH = numba.types.Array(_INT, 3, "C")
_CONTEXT = (
    _CONST_VECTOR,
    _INT,
    _CONST_MATRIX,
    _CONST_MATRIX,
    _VECTOR,
    _MATRIX,
    _SCRATCH,
    _VECTOR,
    _INT,
    _VECTOR,
)
"""The types of the arguments shared by both search functions: groups, counted, low, high, settings, table,
scratch, stats, ply, shared."""


@kernel
def _placements_of_four(occupied, available, piece, floor, orders, stats) -> int:
    """The score, for the giver, of giving ``piece`` at a node with four empty squares (``available``: the pieces
    left after it): the worst over the receiver's placements, each child read by :func:`_last_three` from this
    node's live groups (no row of its own), stopping once it is at or below ``floor``. Counts the children in
    ``stats``.

    The placements go in the order of the squares: at this depth, ordering them by the safe pieces they leave
    (:func:`~agents.solver.ordering.order_placements`) cost more time than the children it saved (docs/solver.md).
    """
    keeps = piece_values(piece)
    score = WIN  # a placement leaving the receiver no safe piece to give loses for the receiver
    squares = ALL_SQUARES & ~occupied
    while squares and score > floor:
        square = lowest_bit(squares)
        squares &= squares - 1
        safe_next = available & ~winning_pieces_after(piece, square, orders)
        if safe_next:
            stats[NODES] += 1
            reply = _last_three(occupied | 1 << square, available, safe_next, orders[LIVE_GROUPS], 1 << square, keeps)
            score = min(score, -reply)
    return score


@kernel(_INT(_INT, _INT, _INT, _INT, _INT, _SCRATCH, _INT, _VECTOR))
def endgame(occupied, available, safe, alpha, beta, scratch, ply, stats) -> int:
    """The exact score, for the giver, of a give node with 3 to ``endgame_empties`` empty squares (``safe``: the
    giver's safe pieces, not none), fail-soft within ``(alpha, beta)``: :func:`negamax_give` without what
    costs more than it saves this close to the end -- the table, the ordering of the gives, the draw test, the
    stop flag (such a subtree has tens of nodes on average, so the search above checks it again soon) and the
    progress counts. Counts its nodes in ``stats``. Searching a few more nodes this way is faster (docs/solver.md
    has the figures, and the thresholds tried). A node with three empty squares returns its exact score from
    :func:`_last_three`.

    The board is not read: only the node's live groups, which the caller wrote into ``scratch[ply]``
    (:func:`~agents.solver.ordering.list_live_groups`, or :func:`~agents.solver.ordering.place_in_live_groups`
    from the parent's), as this function does for its children."""
    stats[NODES] += 1
    empties = NUM_SQUARES - popcount(occupied)
    orders = scratch[ply]
    if empties == 3:
        return _last_three(occupied, available, safe, orders[LIVE_GROUPS], 0, 0)
    describe_threats(occupied, orders)
    best = -INFINITY
    while safe:
        piece = lowest_bit(safe)
        safe &= safe - 1
        after_give = available & ~(1 << piece)
        floor = max(alpha, best)
        if empties == 4:
            score = _placements_of_four(occupied, after_give, piece, floor, orders, stats)
        else:
            score = WIN  # a placement leaving the receiver no safe piece to give loses for the receiver
            order = orders[piece]
            order_placements(occupied, after_give, piece, orders, order)
            for i in range(empties):
                if score <= floor:
                    break
                square, safe_next = order[i] & 0xFF, order[i] >> 8 & ALL_PIECES
                if safe_next:
                    placed = occupied | 1 << square
                    place_in_live_groups(orders, square, piece, placed, scratch[ply + 1])
                    reply = endgame(placed, after_give, safe_next, -min(beta, score), -floor, scratch, ply + 1, stats)
                    score = min(score, -reply)
        if score > best:
            best = score
            if best >= beta:
                break
    return best


@kernel(_INT(_INT, _INT, _INT, _INT, _INT, _INT, _INT, *_CONTEXT), nogil=True)
def negamax_give(
    lanes, occupied, available, safe, alpha, beta, depth, groups, counted, low, high, settings, table, scratch,
    stats, ply, shared,
):  # fmt: skip
    """Score of the give node ``(lanes, occupied, available)`` for the player about to give (``safe``: the mask
    of available pieces that do not let the receiver win at once, or -1 to compute it), searched to
    ``depth`` more plies, fail-soft within the window ``(alpha, beta)`` (``alpha < beta``):

    * if the true score ``v`` lies strictly inside the window, returns ``v``;
    * if ``v <= alpha``, returns an upper bound ``u`` of it with ``v <= u <= alpha``;
    * if ``v >= beta``, returns a lower bound ``l`` of it with ``beta <= l <= v``.

    The "true score" is the depth-limited negamax score with :func:`evaluate` at the horizon; it is the exact
    game value (``WIN``, ``0`` or ``-WIN``) once ``depth`` reaches the end of the game. ``groups`` and
    ``counted`` are the variant's groups and counted attributes; boards with at least
    ``settings[CANONICAL_EMPTIES]`` empty squares are keyed by their canonical form under the symmetries in
    ``low, high``, and those with at most ``settings[DRAW_TEST_EMPTIES]`` are tested for a certain draw
    (:func:`can_still_be_won`). Counts nodes, table probes and hits in
    ``stats``; once the stop flag ``shared[0]`` is set (Ctrl-C, a deadline, another thread done), it sets
    ``stats[ABORTED]`` and returns a meaningless 0 (storing nothing from then on). At the root (``ply`` 0) it
    always searches (a stored bound would not name a move) and writes the best piece to ``stats[BEST_ACTION]``.
    It counts the moves searched at the first plies of the current path (``PATH_MOVES``). With several
    threads (``shared`` longer than the flag), it marks the boards it is searching, and leaves for last the
    placements (but the first) whose boards another thread has marked.
    """
    root = ply == 0
    stats[NODES] += 1
    empties = NUM_SQUARES - popcount(occupied)
    if shared[0]:  # one load per node: cheap next to the rest of the node
        stats[ABORTED] = 1
    if stats[ABORTED]:
        return 0
    if available == 0:  # the board is full: a draw
        return 0
    if safe < 0:
        safe = available & ~winning_pieces(lanes, occupied, groups, counted)
    if root:  # a first answer, for the returns below that search no piece
        stats[BEST_ACTION] = lowest_bit(safe if safe else available)
    if safe == 0:  # every piece lets the receiver win
        return -WIN
    if empties == 1:  # the last piece is safe: it fills the board without a win
        return 0
    if depth >= 2 * empties:  # the search reaches the end of the game: its result is exact
        depth = EXACT_DEPTH
    if depth == 0:
        return evaluate(safe)
    if empties <= settings[DRAW_TEST_EMPTIES] and not can_still_be_won(lanes, occupied, available, groups, counted):
        return 0

    # Transposition table: a stored bound may settle the node or narrow the window; its best piece goes first.
    stored = empties >= settings[TABLE_EMPTIES]
    key_occupied, key_lanes, row = 0, 0, -1
    if stored:
        if empties >= settings[CANONICAL_EMPTIES]:
            key_occupied, key_lanes = canonical_board(lanes, occupied, counted, low, high)
            key_occupied |= CANONICAL_FLAG | USED_FLAG
        else:
            key_occupied, key_lanes = occupied | USED_FLAG, counted_lanes(lanes, counted)
        row = probe_table(table, key_occupied, key_lanes)
        stats[PROBES] += 1
    hint = -1
    if row >= 0:
        stats[HITS] += 1
        lower, upper, stored_depth, hint = unpack_data(table[row, INFO])
        # A proven win or loss holds at any depth. The root always searches, to name its best piece.
        if (stored_depth >= depth or lower == WIN or upper == -WIN) and not root:
            if lower >= beta or lower == upper:
                return lower
            if upper <= alpha:
                return upper
            alpha, beta = max(alpha, lower), min(beta, upper)
    original_alpha, original_beta = alpha, beta

    best, best_piece = -INFINITY, -1
    orders = scratch[ply]
    # Ordering the gives costs every placement of every piece: worth it only for large subtrees. Below that,
    # the placements of a piece are ordered when it is tried.
    if depth >= 2:  # placements are searched: their threats, and the live groups the endgame starts from
        list_live_groups(lanes, occupied, groups, counted, orders)
        describe_threats(occupied, orders)
    gives_ordered = depth >= 2 and empties >= settings[GIVE_ORDER_EMPTIES]
    if gives_ordered:
        num_pieces = order_gives(occupied, available, safe, hint, orders)
    else:
        num_pieces = list_pieces(safe, hint, orders[GIVES])
    busy_slot = _mark_busy(shared, lanes, occupied) if shared.shape[0] > 1 and empties >= BUSY_EMPTIES else -1
    on_path = ply < PATH_PLIES
    if on_path:
        stats[PATH_MOVES + 2 * ply], stats[PATH_MOVES + 2 * ply + 1] = 0, num_pieces * empties
    for j in range(num_pieces):
        piece = orders[GIVES, j] & 0xFF
        # The receiver places ``piece``; its best placement is the minimum, for the giver, over the squares.
        after_give = available & ~(1 << piece)
        floor = max(alpha, best)  # the giver already has this much: a placement holding it there refutes
        score = INFINITY
        if depth == 1:  # the horizon falls after the give: score the receiver's position, who gives next
            score = -evaluate(safe & ~(1 << piece))
        else:
            order = orders[piece]
            if not gives_ordered:
                order_placements(occupied, after_give, piece, orders, order)
            # With several threads, a placement whose subtree another thread is searching now waits for a second
            # pass: by then that thread may have stored its value.
            may_defer = shared.shape[0] > 1 and empties - 1 >= BUSY_EMPTIES
            deferred = 0
            for second_pass in range(2 if may_defer else 1):
                for i in range(empties):
                    if score <= floor:
                        break
                    if second_pass and not deferred >> i & 1:
                        continue
                    square, safe_next = order[i] & 0xFF, order[i] >> 8 & ALL_PIECES
                    placed = occupied | 1 << square  # not full: a node with one empty square returned above
                    if safe_next == 0:
                        reply = -WIN  # the receiver has no safe piece left to give
                    elif empties == 2:
                        reply = 0  # the receiver's last piece is safe: it fills the board without a win
                    elif 3 < empties <= settings[ENDGAME_EMPTIES] + 1 and depth >= 2 * empties:  # exact child
                        place_in_live_groups(orders, square, piece, placed, scratch[ply + 1])
                        reply = endgame(
                            placed, after_give, safe_next, -min(beta, score), -floor, scratch, ply + 1, stats
                        )
                    else:
                        placed_lanes = place_lanes(lanes, piece, square)
                        if may_defer and i > 0 and not second_pass and _is_busy(shared, placed_lanes, placed):
                            deferred |= 1 << i
                            continue
                        reply = negamax_give(
                            placed_lanes, placed, after_give, safe_next, -min(beta, score), -floor, depth - 2,
                            groups, counted, low, high, settings, table, scratch, stats, ply + 1, shared,
                        )  # fmt: skip
                        if stats[ABORTED]:
                            return 0
                    score = min(score, -reply)
                    if on_path:
                        stats[PATH_MOVES + 2 * ply] += 1
        if on_path:  # the placements after a refutation count as searched
            stats[PATH_MOVES + 2 * ply] = (j + 1) * empties
        if score > best:
            best, best_piece = score, piece
            if best >= beta:
                break

    if busy_slot >= 0:
        shared[busy_slot] = 0
    if root:
        stats[BEST_ACTION] = best_piece
    if stored:
        lower = best if best > original_alpha else -WIN
        upper = best if best < original_beta else WIN
        store_entry(table, key_occupied, key_lanes, empties, pack_data(lower, upper, depth, best_piece))
    return best


_POSITION = (_INT, _INT, _INT, _INT, _INT, _INT, _INT, numba.types.boolean)
"""The types of a position's fields, as :func:`quarto_env.core.compiled_fields` hands them over."""


@kernel(_INT(*_POSITION, _INT, _INT, _INT, *_CONTEXT), nogil=True)
def search_root(
    lanes, occupied, available, hand, to_move, claimable, winner, over, alpha, beta, depth, groups, counted, low,
    high, settings, table, scratch, stats, ply, shared,
):  # fmt: skip
    """Score of any position that is not over, for the side to move, with the contract of :func:`negamax_give`;
    the best action (a square when ``hand`` is a piece, else a piece) goes to ``stats[BEST_ACTION]``.

    With a piece in hand it places it on each empty square in turn -- a winning square scores ``WIN`` at once
    -- and continues at the give node that follows, with the same player to move. ``ply`` is 0 from Python:
    an integer argument rather than a constant, so that numba compiles (and caches) one version.
    """
    if hand < 0:
        return negamax_give(
            lanes, occupied, available, -1, alpha, beta, depth, groups, counted, low, high, settings, table,
            scratch, stats, ply, shared,
        )  # fmt: skip
    wins = winning_squares(lanes, occupied, hand, groups, counted)
    if wins:
        stats[BEST_ACTION] = lowest_bit(wins)
        return WIN
    best = -INFINITY
    empty = ALL_SQUARES & ~occupied
    stats[PATH_MOVES], stats[PATH_MOVES + 1] = 0, popcount(empty)
    while empty:
        square = lowest_bit(empty)
        empty &= empty - 1
        placed = occupied | 1 << square
        if placed == ALL_SQUARES:
            score = 0
        elif depth <= 1:  # the horizon falls after the placement; the same player gives next
            safe = available & ~winning_pieces(place_lanes(lanes, hand, square), placed, groups, counted)
            score = evaluate(safe) if safe else -WIN
        else:
            score = negamax_give(
                place_lanes(lanes, hand, square), placed, available, -1, max(alpha, best), beta, depth - 1, groups,
                counted, low, high, settings, table, scratch, stats, ply + 1, shared,
            )  # fmt: skip
        if stats[ABORTED]:
            return 0
        stats[PATH_MOVES] += 1
        if score > best:
            best = score
            stats[BEST_ACTION] = square
            if best >= beta:
                break
    return best
