"""The compiled negamax alpha-beta search behind the minimax agent and the exact solver.

Plies and nodes
---------------
A **ply** is one action: a placement or a give (a declaration is never searched: it is taken at the root,
see :mod:`agents.minimax`). A full turn -- place the piece in hand, then give one -- is two plies. The search
recurses on **give nodes**: the player to move gives a piece, the opponent places it (both plies inline in
one call), and the opponent becomes the giver of the child node. A position with a piece in hand is searched
by :func:`search_root`, which tries each placement and continues at the give node that follows. Every
give node visited counts as one **node**, except those with one or two empty squares in a search to the end:
their parent solves them inline (a safe last piece draws; see :func:`_last_two`). Near the end, from
``endgame_empties`` empty squares (default 6), a search to the end continues in the leaner :func:`endgame`.

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

Move ordering
-------------
Every placement of every safe piece is scored by the safe pieces it leaves to the placer (who gives next).
Placements leaving the fewest come first, ties to the squares in the most groups (a placement leaving none
loses at once and comes last); pieces come
in increasing order of the safe pieces their placements leave in total, after the table's best piece. Both
put the smallest subtrees first, and threats are what decide Quarto.

Transposition table and symmetries
----------------------------------
Give nodes with at least ``table_empties`` empty squares are stored in a transposition table with lower and
upper bounds, the remaining depth they were searched to and the best piece. It is a ``(size, 2)`` int64 array in
two-entry buckets; a row is two words::

    INFO   = key occupancy (18 bits, flags included) << 40 | empty squares << 32 | lower, upper, depth, best piece
    VERIFY = key lanes ^ scramble(INFO)

Several threads share one table without locks (``--jobs``): a thread may read a row while another writes it,
and see one word of each entry. Such a torn row fails the check ``VERIFY ^ scramble(INFO) == key lanes``
(``scramble`` is a 64-bit multiplicative hash), so it is a miss, never a wrong bound -- the classic lockless
table of chess programs (Hyatt and Mann, 2002).
A give node is determined by its board alone (the available pieces are those not on it). Near the root, where a
subtree is large, the key is the board's canonical form under every symmetry of the game
(:func:`quarto_env.symmetry.canonical_board`); deeper, where computing it costs more than it saves, the key is
the board itself (its counted lanes). Both keys identify a position up to equal value, and a flag keeps
the two kinds apart.

Numba
-----
Every function here is compiled with ``cache=True``: a second process loads the machine code from
``__pycache__`` instead of compiling again, until a compiled module of the project changes
(:mod:`quarto_env.numba_cache`). The search releases the GIL (``nogil=True``), so that threads
search in parallel and a Python thread can stop a search from outside (:mod:`agents.interrupts`).

Lanes are int64 inside (the rules core's 64-bit lanes seen as
two's complement; see :func:`quarto_env.core.signed_lanes`). The search is one self-recursive function:
numba's on-disk cache does not support mutually recursive ones.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

from agents import interrupts
from agents.files import atomic_write
from quarto_env.checks import one_line
from quarto_env.core import (
    ALL_ATTRIBUTES,
    ALL_PIECES,
    ALL_SQUARES,
    NUM_ATTRIBUTES,
    NUM_PIECES,
    NUM_SQUARES,
    PIECES_WITH_ATTRIBUTE,
    RulesError,
    State,
    Variant,
    compiled_fields,
    lowest_bit,
    pieces_sharing,
    place_lanes,
    popcount,
    shared_attributes,
    winning_pieces,
    winning_squares,
)
from quarto_env.errors import QuartoValueError
from quarto_env.symmetry import LANE_MASK, byte_tables, canonical_board

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

# Transposition table layout: one row per entry.
VERIFY, INFO = 0, 1
KEY_SHIFT = 40
EMPTIES_SHIFT = 32
DATA_MASK = (1 << EMPTIES_SHIFT) - 1
ENTRY_BYTES = 16
USED_FLAG = 1 << 17
"""Set in the stored occupancy of every entry, so that an all-zero row (a fresh table) matches no key."""
CANONICAL_FLAG = 1 << 16
"""Set in the stored occupancy of an entry keyed by a canonical form."""
MIN_TABLE_BITS, MAX_TABLE_BITS = 10, 30
DEFAULT_TABLE_BITS = 21
"""2**21 entries (32 MiB)."""
# settings array slots
CANONICAL_EMPTIES = 0
DRAW_TEST_EMPTIES = 1
TABLE_EMPTIES = 2
GIVE_ORDER_EMPTIES = 3
ENDGAME_EMPTIES = 4
DEFAULT_CANONICAL_EMPTIES = 9
"""Give nodes with at least this many empty squares are keyed by their canonical form."""
DEFAULT_DRAW_TEST_EMPTIES = 10
"""Give nodes with at most this many empty squares are tested for a certain draw."""
DEFAULT_TABLE_EMPTIES = 6
"""Give nodes with fewer empty squares are not stored: they are cheaper to search again than to look up."""
DEFAULT_GIVE_ORDER_EMPTIES = 6
"""Give nodes with at least this many empty squares order their pieces (see :func:`_order_gives`)."""
DEFAULT_ENDGAME_EMPTIES = 6
"""Give nodes with at most this many empty squares, in a search to the end, are searched by :func:`endgame`."""


def new_table(bits: int = DEFAULT_TABLE_BITS) -> np.ndarray:
    """An empty transposition table of ``2**bits`` entries (zeros: the memory is only touched when used)."""
    return np.zeros((1 << bits, 2), dtype=np.int64)


def table_bits_for(megabytes: float) -> int:
    """The largest table (in bits of its entry count) that fits in ``megabytes`` MiB."""
    entries = int(megabytes * 2**20) // ENTRY_BYTES
    if entries < 1 << MIN_TABLE_BITS:
        smallest = (1 << MIN_TABLE_BITS) * ENTRY_BYTES / 2**20
        raise ValueError(f"a table needs at least {smallest:g} MiB, got {megabytes:g}")
    return min(entries.bit_length() - 1, MAX_TABLE_BITS)


@dataclasses.dataclass(frozen=True)
class AlphaBetaResult:
    """What one call of :meth:`Search.run` found."""

    score: int
    """Fail-soft score for the side to move (see :func:`negamax_give`); meaningless when ``aborted``."""
    best_action: int
    """The best action found at the root: a square when placing, a piece when giving."""
    nodes: int
    """Give nodes visited, by every thread."""
    aborted: bool
    """Whether the deadline stopped the search before it finished."""


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a search (see :mod:`agents.interrupts`); what it had found is lost."""


class Search:
    """The compiled search for one rule variant, with its own transposition table (kept between calls, so
    that later searches reuse what earlier ones proved).

    ``table_bits``: the table has ``2**table_bits`` entries of 16 bytes (:func:`table_bits_for` converts a size
    in MiB). ``jobs``: threads that search each position together, sharing the table ("lazy SMP": every thread
    searches the whole tree, leaving for later the placements whose subtrees another thread is searching --
    the deferral of ABDADA -- and what one thread proves, the others find in the table; the first to finish
    answers). The other options are thresholds on
    the empty squares of a give node, tuned on the benchmark sample (``quarto bench solver``); every setting
    gives the same exact values:

    * ``canonical_empties``: at least this many -- keyed by the canonical form under the game's symmetries
      (17 turns the symmetries off);
    * ``draw_test_empties``: at most this many -- tested for a certain draw (-1 turns the test off);
    * ``table_empties``: at least this many -- stored in the transposition table;
    * ``give_order_empties``: at least this many -- all pieces ordered before the first is tried;
    * ``endgame_empties``: at most this many, in a search to the end -- searched by :func:`endgame` (2 turns it
      off).

    Ctrl-C stops a running search within milliseconds and raises :class:`SearchInterrupted` (a
    ``KeyboardInterrupt``). :meth:`progress` may be called from another thread while a search runs.
    """

    def __init__(
        self,
        variant: Variant,
        table_bits: int = DEFAULT_TABLE_BITS,
        canonical_empties: int = DEFAULT_CANONICAL_EMPTIES,
        draw_test_empties: int = DEFAULT_DRAW_TEST_EMPTIES,
        table_empties: int = DEFAULT_TABLE_EMPTIES,
        give_order_empties: int = DEFAULT_GIVE_ORDER_EMPTIES,
        endgame_empties: int = DEFAULT_ENDGAME_EMPTIES,
        jobs: int = 1,
    ) -> None:
        if not MIN_TABLE_BITS <= table_bits <= MAX_TABLE_BITS:
            raise ValueError(f"table_bits must be {MIN_TABLE_BITS}-{MAX_TABLE_BITS}, got {table_bits}")
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.variant = variant
        self.jobs = jobs
        self.settings = np.array(
            [canonical_empties, draw_test_empties, table_empties, give_order_empties, endgame_empties], dtype=np.int64
        )
        self.scratch = np.full((jobs, EXACT_DEPTH + 2, SCRATCH_ROWS, NUM_SQUARES), -1, dtype=np.int64)
        self.table = new_table(table_bits)
        self.stats = np.zeros((jobs, STATS_SIZE), dtype=np.int64)
        """One row of stats per thread, for the latest search."""
        self.shared = np.zeros(1 + BUSY_SLOTS if jobs > 1 else 1, dtype=np.int64)
        """What the threads of a search share: ``shared[0]`` is the stop flag (non-zero: every thread stops;
        ``STOPPED_BY_*``); with several threads, the marks of the boards being searched follow."""
        self._low, self._high = byte_tables(variant.squares)
        self._groups = variant.group_array
        interrupts.install()

    def clear(self) -> None:
        """Forget everything stored in the transposition table."""
        self.table[:] = 0

    def progress(self) -> dict[str, int]:
        """Counts of the running (or latest) search, summed over its threads: ``nodes``, ``probes``, ``hits``."""
        totals = self.stats.sum(axis=0)
        return {"nodes": int(totals[NODES]), "probes": int(totals[PROBES]), "hits": int(totals[HITS])}

    def path(self) -> list[tuple[int, int]]:
        """``(searched, total)`` moves at the first plies of the first thread's current path (see
        ``PATH_MOVES``), down to the first node not reached yet."""
        pairs = []
        for ply in range(PATH_PLIES):
            searched, total = self.stats[0, PATH_MOVES + 2 * ply : PATH_MOVES + 2 * ply + 2]
            if total == 0:
                break
            pairs.append((int(searched), int(total)))
        return pairs

    def run(
        self,
        state: State,
        depth: int = EXACT_DEPTH,
        alpha: int = -INFINITY,
        beta: int = INFINITY,
        deadline: float = math.inf,
    ) -> AlphaBetaResult:
        """Search ``state`` (not over, nothing claimable) ``depth`` plies deep within ``(alpha, beta)``, stopping
        when ``time.perf_counter()`` passes ``deadline`` (a watcher thread sets the stop flag then: see
        :func:`agents.interrupts.deadline`); raises :class:`SearchInterrupted` on Ctrl-C."""
        if state.over or state.claimable:
            raise RulesError("the search takes a position that is not over and has nothing to declare")
        if depth < 1:
            raise ValueError(f"depth must be at least 1 ply, got {depth}")
        self.stats[:] = 0
        self.stats[:, BEST_ACTION] = -1
        self.shared[:] = 0
        fields = compiled_fields(state)
        scores = [0] * self.jobs
        finished = [False] * self.jobs

        def search(thread: int) -> None:
            scores[thread] = search_root(
                *fields, alpha, beta, depth,
                self._groups, self.variant.counted, self._low, self._high, self.settings, self.table,
                self.scratch[thread], self.stats[thread], 0, self.shared,
            )  # fmt: skip
            finished[thread] = not self.stats[thread, ABORTED]
            if finished[thread]:
                self.shared[0] = interrupts.STOPPED_BY_ANOTHER_THREAD

        with interrupts.stopping(self.shared), interrupts.deadline(self.shared, deadline):
            if self.jobs == 1:
                search(0)
            else:
                _run_threads(search, self.jobs, self.shared)
        if self.shared[0] == interrupts.STOPPED_BY_CTRL_C and not any(finished):
            raise SearchInterrupted
        answer = finished.index(True) if any(finished) else 0
        return AlphaBetaResult(
            int(scores[answer]),
            int(self.stats[answer, BEST_ACTION]),
            int(self.stats[:, NODES].sum()),
            not finished[answer],
        )


def _run_threads(target: Callable[[int], None], count: int, stop: np.ndarray) -> None:
    """Run ``target(0)``, ..., ``target(count - 1)`` in threads and wait for all. Waiting in short steps keeps
    this thread able to take Ctrl-C, which stops them all."""
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.05)
    except KeyboardInterrupt:
        stop[0] = interrupts.STOPPED_BY_CTRL_C
        for thread in threads:
            thread.join()
        raise SearchInterrupted from None


# ---------------------------------------------------------------------------------------------------------
# Evaluation at the horizon, move ordering, the draw test
# ---------------------------------------------------------------------------------------------------------
@numba.njit(cache=True)
def evaluate(safe: int) -> int:
    """The horizon score for the side to move, who gives next and has the ``safe`` mask of safe pieces."""
    return EVAL if popcount(safe) & 1 else -EVAL


SHARING = np.array([pieces_sharing(code & 0xF, code >> 4) for code in range(256)], dtype=np.int64)
"""``SHARING[ones | zeros << 4]``: the pieces with attribute 1 for some bit of ``ones`` or 0 for some of ``zeros``
(:func:`~quarto_env.core.pieces_sharing` as a table)."""
# Rows of a node's working space (``scratch[ply]``), after the placement orders of the 16 pieces:
GIVES, ELSEWHERE, HALF_FULL, GROUPS_THROUGH = NUM_PIECES, NUM_PIECES + 1, NUM_PIECES + 2, NUM_PIECES + 3
SCRATCH_ROWS = NUM_PIECES + 4


@numba.njit(cache=True)
def _threats(lanes, occupied, groups, counted, orders) -> None:
    """Describe, for each empty square ``s``, how a placement on ``s`` changes the winning pieces; in rows of
    ``orders``:

    * ``ELSEWHERE[s]``: the pieces that complete a group not through ``s`` -- the part of
      :func:`~quarto_env.core.winning_pieces` that a placement on ``s`` leaves unchanged;
    * ``HALF_FULL[s]``: one byte ``ones | zeros << 4`` per group through ``s`` with two pieces and one other
      empty square, the counted attributes its two pieces share (groups sharing none are left out). A placement
      on ``s`` turns such a group into a threat exactly for the attributes the placed piece shares too;
    * ``GROUPS_THROUGH[s]``: the number of groups through ``s``.

    A group through ``s`` with three pieces becomes full: it holds no threat after a placement on ``s``."""
    elsewhere, half_full, through = orders[ELSEWHERE], orders[HALF_FULL], orders[GROUPS_THROUGH]
    empty = ALL_SQUARES & ~occupied
    for square in range(NUM_SQUARES):
        elsewhere[square], half_full[square], through[square] = 0, 0, 0
    for group in groups:
        open_squares = group & ~occupied
        filled = popcount(group & occupied)
        code = 0
        if filled == 2 or filled == 3:
            ones, zeros = shared_attributes(lanes, group & occupied, counted)
            code = ones | zeros << 4
        if filled == 3 and code:
            others = empty & ~group
            while others:
                elsewhere[lowest_bit(others)] |= SHARING[code]
                others &= others - 1
        while open_squares:
            square = lowest_bit(open_squares)
            open_squares &= open_squares - 1
            through[square] += 1
            if filled == 2 and code:
                half_full[square] = half_full[square] << 8 | code


@numba.njit(cache=True)
def _winning_pieces_after(piece, square, orders) -> int:
    """``winning_pieces`` of the board after ``piece`` is placed on ``square``, from the rows of :func:`_threats`."""
    pieces = orders[ELSEWHERE, square]
    codes = orders[HALF_FULL, square]
    while codes:
        code = codes & 0xFF
        codes >>= 8
        pieces |= SHARING[(code & piece) | (code >> 4 & ~piece & 0xF) << 4]
    return pieces


@numba.njit(cache=True)
def _order_placements(occupied, available, piece, orders, order) -> int:
    """Fill ``order`` with the empty squares for ``piece`` in the order to search them; returns their count
    (``orders``: a node's working space, filled by :func:`_threats`).

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
        safe = available & ~_winning_pieces_after(piece, square, orders)
        priority = (NUM_PIECES + 1 - popcount(safe)) * 32 + orders[GROUPS_THROUGH, square] if safe else 0
        entry = priority << 24 | safe << 8 | square
        _insert_descending(order, count, entry)
        count += 1
    return count


@numba.njit(cache=True)
def _insert_descending(buffer, count, entry) -> None:
    """Insert ``entry`` into ``buffer[:count]``, kept sorted largest first (one step of an insertion sort)."""
    i = count
    while i > 0 and buffer[i - 1] < entry:
        buffer[i] = buffer[i - 1]
        i -= 1
    buffer[i] = entry


@numba.njit(cache=True)
def _list_pieces(pieces, hint, out) -> int:
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


@numba.njit(cache=True)
def _order_gives(lanes, occupied, available, safe, hint, groups, counted, orders) -> int:
    """Order the gives and the placements that answer them; returns the number of safe pieces.

    Row ``GIVES`` of ``orders`` gets the safe pieces in the order to try them (entries ``priority << 8 |
    piece``): the table's best piece ``hint`` first, then the pieces whose placements leave the receiver the
    fewest safe pieces in total -- the smallest subtrees, and the hardest for the receiver. Row ``p`` gets the
    placements of piece ``p`` (see :func:`_order_placements`); the rows of :func:`_threats` are filled too.
    (docs/baselines.md gives the measured effect of the move ordering.)
    """
    count = 0
    pieces = safe
    out = orders[GIVES]
    _threats(lanes, occupied, groups, counted, orders)
    while pieces:
        piece = lowest_bit(pieces)
        pieces &= pieces - 1
        n = _order_placements(occupied, available & ~(1 << piece), piece, orders, orders[piece])
        total = 0
        for i in range(n):
            total += popcount(orders[piece, i] >> 8 & ALL_PIECES)
        priority = 1 << 20 if piece == hint else (1 << 12) - total
        entry = priority << 8 | piece
        _insert_descending(out, count, entry)
        count += 1
    return count


@numba.njit(cache=True)
def _last_two(lanes, occupied, available, safe, groups, counted) -> int:
    """The exact score, for the giver, of a give node with two empty squares ``a`` and ``b`` and two pieces
    (``safe``: the giver's safe pieces among them, not none). The receiver places the given piece ``g`` on one
    square and must give the last piece ``l``, which goes on the other: the receiver loses (``WIN``) if ``l``
    wins both ways, and draws (``0``) otherwise. ``l`` on ``b`` wins after ``g`` on ``a`` when it completes

    * a group through ``b`` and not ``a``: one already full but for ``b``, so ``l`` is in ``threats[b]``, the
      pieces that complete one of those; or
    * a group through both: its two pieces, ``g`` and ``l`` share an attribute -- which does not depend on
      the arrangement, nor on which of the two pieces is given.
    """
    empty = ALL_SQUARES & ~occupied
    first, second = lowest_bit(available), lowest_bit(available & (available - 1))
    a = lowest_bit(empty)
    threats_a, threats_b = 0, 0
    for group in groups:
        open_squares = group & empty
        if open_squares == 0:
            continue
        ones, zeros = shared_attributes(lanes, group & occupied, counted)
        if open_squares == empty:  # through both squares
            if ones & first & second or zeros & ~first & ~second & ALL_ATTRIBUTES:
                return WIN
        elif open_squares >> a & 1:
            threats_a |= SHARING[ones | zeros << 4]
        else:
            threats_b |= SHARING[ones | zeros << 4]
    while safe:
        piece = lowest_bit(safe)
        safe &= safe - 1
        last = first if piece == second else second
        if (threats_a & threats_b) >> last & 1:
            return WIN
    return 0


@numba.njit(cache=True)
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


# ---------------------------------------------------------------------------------------------------------
# Small compiled helpers
# ---------------------------------------------------------------------------------------------------------
@numba.njit(cache=True)
def _counted_lanes(lanes: int, counted: int) -> int:
    """The lanes with the attributes that do not count cleared: they never decide a game."""
    kept = 0
    for k in range(NUM_ATTRIBUTES):
        if counted >> k & 1:
            kept |= lanes & (LANE_MASK << (16 * k))
    return kept


@numba.njit(cache=True)
def _mix(lanes: int, occupied: int) -> int:
    """A multiplicative hash of a board, for the table's buckets and the busy marks."""
    return lanes * -7046029254386353131 + occupied * 0x27D4EB2F165667C5


@numba.njit(cache=True)
def _bucket(table, key_occupied: int, key_lanes: int) -> int:
    """The first row of the key's two-entry bucket: the hash, folded."""
    mixed = _mix(key_lanes, key_occupied)
    return (mixed ^ (mixed >> 29)) & (table.shape[0] - 2)


@numba.njit(cache=True)
def _busy_mark(shared, lanes: int, occupied: int) -> tuple[int, int]:
    """``(slot, tag)``: where in ``shared`` a board (not canonical) is marked as being searched, and the
    non-zero tag that marks it."""
    mixed = _mix(lanes, occupied)
    tag = (mixed ^ (mixed >> 31)) | 1
    return 1 + (tag >> 1 & (shared.shape[0] - 2)), tag


@numba.njit(cache=True)
def _mark_busy(shared, lanes: int, occupied: int) -> int:
    """Mark the board as being searched by this thread; returns its slot in ``shared``."""
    slot, tag = _busy_mark(shared, lanes, occupied)
    shared[slot] = tag
    return slot


@numba.njit(cache=True)
def _is_busy(shared, lanes: int, occupied: int) -> bool:
    """Whether a thread marked the board as being searched (a mark may be stale or overwritten: a hint only)."""
    slot, tag = _busy_mark(shared, lanes, occupied)
    return shared[slot] == tag


@numba.njit(cache=True)
def _scramble(info: int) -> int:
    """A 64-bit hash of a row's ``INFO`` word, for its ``VERIFY`` word."""
    mixed = info * -4658895280553007687
    return mixed ^ (mixed >> 31)


@numba.njit(cache=True)
def _probe(table, key_occupied: int, key_lanes: int) -> int:
    """The row holding the key, or -1."""
    row = _bucket(table, key_occupied, key_lanes)
    for candidate in range(row, row + 2):
        info = table[candidate, INFO]
        if info >> KEY_SHIFT == key_occupied and table[candidate, VERIFY] ^ _scramble(info) == key_lanes:
            return candidate
    return -1


@numba.njit(cache=True)
def _write(table, row: int, key_occupied: int, key_lanes: int, empties: int, data: int) -> None:
    info = key_occupied << KEY_SHIFT | empties << EMPTIES_SHIFT | data
    table[row, INFO] = info
    table[row, VERIFY] = key_lanes ^ _scramble(info)


@numba.njit(cache=True)
def _store(table, key_occupied: int, key_lanes: int, empties: int, data: int) -> None:
    """Store an entry. An entry already stored for the key at the same depth keeps its bounds: both hold, so the
    new entry gets the tighter of each. Otherwise a bucket's first row keeps the entry with the most empty
    squares (the costliest to search again), its second row the latest of the others."""
    row = _probe(table, key_occupied, key_lanes)
    if row >= 0:
        old_lower, old_upper, old_depth, _ = _unpack(table[row, INFO])
        lower, upper, depth, best_piece = _unpack(data)
        if old_depth == depth:
            data = _pack(max(lower, old_lower), min(upper, old_upper), depth, best_piece)
    else:
        row = _bucket(table, key_occupied, key_lanes)
        if table[row, INFO] >> EMPTIES_SHIFT & 0xFF > empties:
            row += 1
    _write(table, row, key_occupied, key_lanes, empties, data)


@numba.njit(cache=True)
def _pack(lower, upper, depth, best_piece):  # type: ignore[no-untyped-def]
    return (lower + 128) | (upper + 128) << 8 | depth << 16 | (best_piece + 1) << 24


@numba.njit(cache=True)
def _unpack(data):  # type: ignore[no-untyped-def]
    """``(lower, upper, depth, best_piece)`` of a table entry's data (or, through ``py_func``, of an array of
    them: the two are untyped for that)."""
    return (data & 0xFF) - 128, (data >> 8 & 0xFF) - 128, data >> 16 & 0xFF, (data >> 24 & 0xFF) - 1


# ---------------------------------------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------------------------------------
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


@numba.njit(_INT(_INT, _INT, _INT, _INT, _INT, _INT, _CONST_VECTOR, _INT, _SCRATCH, _INT, _VECTOR), cache=True)
def endgame(lanes, occupied, available, safe, alpha, beta, groups, counted, scratch, ply, stats) -> int:
    """The exact score, for the giver, of a give node with 3 to ``endgame_empties`` empty squares (``safe``: the
    giver's safe pieces, not none), fail-soft within ``(alpha, beta)``: :func:`negamax_give` without what
    costs more than it saves this close to the end -- the table, the ordering of the gives, the draw test, the
    stop flag (such a subtree has tens of nodes on average, so the search above checks it again soon) and the
    progress counts. Counts its nodes in ``stats``. Searching a few more nodes this way is faster (docs/solver.md
    has the figures, and the thresholds tried)."""
    stats[NODES] += 1
    empties = NUM_SQUARES - popcount(occupied)
    orders = scratch[ply]
    _threats(lanes, occupied, groups, counted, orders)
    best = -INFINITY
    while safe:
        piece = lowest_bit(safe)
        safe &= safe - 1
        after_give = available & ~(1 << piece)
        floor = max(alpha, best)
        score = WIN  # a placement leaving the receiver no safe piece to give loses for the receiver
        order = orders[piece]
        _order_placements(occupied, after_give, piece, orders, order)
        for i in range(empties):
            if score <= floor:
                break
            square, safe_next = order[i] & 0xFF, order[i] >> 8 & ALL_PIECES
            if safe_next:
                placed_lanes, placed = place_lanes(lanes, piece, square), occupied | 1 << square
                if empties == 3:
                    reply = _last_two(placed_lanes, placed, after_give, safe_next, groups, counted)
                else:
                    reply = endgame(
                        placed_lanes, placed, after_give, safe_next, -min(beta, score), -floor, groups, counted,
                        scratch, ply + 1, stats,
                    )  # fmt: skip
                score = min(score, -reply)
        if score > best:
            best = score
            if best >= beta:
                break
    return best


@numba.njit(_INT(_INT, _INT, _INT, _INT, _INT, _INT, _INT, *_CONTEXT), cache=True, nogil=True)
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
            key_occupied, key_lanes = occupied | USED_FLAG, _counted_lanes(lanes, counted)
        row = _probe(table, key_occupied, key_lanes)
        stats[PROBES] += 1
    hint = -1
    if row >= 0:
        stats[HITS] += 1
        lower, upper, stored_depth, hint = _unpack(table[row, INFO])
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
    gives_ordered = depth >= 2 and empties >= settings[GIVE_ORDER_EMPTIES]
    if gives_ordered:
        num_pieces = _order_gives(lanes, occupied, available, safe, hint, groups, counted, orders)
    else:
        num_pieces = _list_pieces(safe, hint, orders[GIVES])
        if depth >= 2:
            _threats(lanes, occupied, groups, counted, orders)
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
                _order_placements(occupied, after_give, piece, orders, order)
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
                        reply = endgame(
                            place_lanes(lanes, piece, square), placed, after_give, safe_next, -min(beta, score),
                            -floor, groups, counted, scratch, ply + 1, stats,
                        )  # fmt: skip
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
        _store(table, key_occupied, key_lanes, empties, _pack(lower, upper, depth, best_piece))
    return best


_POSITION = (_INT, _INT, _INT, _INT, _INT, _INT, _INT, numba.types.boolean)
"""The types of a position's fields, as :func:`quarto_env.core.compiled_fields` hands them over."""


@numba.njit(_INT(*_POSITION, _INT, _INT, _INT, *_CONTEXT), cache=True, nogil=True)
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


# ---------------------------------------------------------------------------------------------------------
# Saving a table: the state of a long proof
# ---------------------------------------------------------------------------------------------------------
TABLE_FILE_FORMAT = 1
"""Version of the layout :func:`save_table` writes; bump it when a stored entry could mean something else."""


class TableFileError(QuartoValueError):
    """A saved table that cannot be used: missing, damaged, another format or another rule variant."""


def save_table(path: str | Path, table: np.ndarray, variant: Variant, note: dict | None = None) -> int:
    """Write the used rows of ``table`` to ``path`` (an ``.npz`` file, atomically) with the variant and ``note``;
    returns the number of entries written. Every stored bound holds for any position of the variant, so the
    file can seed the proof of any of them (:func:`load_table`)."""
    rows = table[np.flatnonzero(table[:, INFO])]
    header = {"format": TABLE_FILE_FORMAT, "variant": variant.to_dict(), "entries": len(rows), **(note or {})}

    def write(temporary: Path) -> None:
        with open(temporary, "wb") as handle:
            np.savez(handle, header=np.array(json.dumps(header)), rows=rows)
            handle.flush()
            os.fsync(handle.fileno())

    atomic_write(path, write)
    return len(rows)


def read_table_header(path: str | Path) -> dict:
    """The header of a saved table; raises :class:`TableFileError` for a file that is not one."""
    return _read_table_file(path, rows=False)[0]


def load_table(path: str | Path, table: np.ndarray, variant: Variant) -> dict:
    """Store the entries saved in ``path`` into ``table`` (of any size) and return the file's header. Raises
    :class:`TableFileError` for a file that is missing, damaged, of another format or of another variant. The
    file is read as plain arrays: nothing in it is unpickled."""
    header, rows = _read_table_file(path, rows=True)
    if header["variant"] != variant.to_dict():
        raise TableFileError(f"{path} holds a table of the variant {header['variant']}, not {variant.to_dict()}")
    store_entries(table, entries_from_rows(rows))
    return header


def _read_table_file(path: str | Path, rows: bool) -> tuple[dict, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            saved = data["rows"] if rows else np.zeros((0, 2), dtype=np.int64)
    except FileNotFoundError:
        raise TableFileError(f"{path}: no such file") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as error:
        raise TableFileError(f"{path} is not a saved table ({one_line(error)})") from None
    if not isinstance(header, dict) or header.get("format") != TABLE_FILE_FORMAT or "variant" not in header:
        raise TableFileError(f"{path} is not a saved table of format {TABLE_FILE_FORMAT}")
    if saved.dtype != np.int64 or saved.ndim != 2 or saved.shape[1] != 2:
        raise TableFileError(f"{path}: its rows are {saved.dtype} {saved.shape}, not int64 (n, 2)")
    return header, saved


def proven_rows(table: np.ndarray, min_empties: int) -> np.ndarray:
    """The rows of ``table`` holding proven bounds (searched to the end of the game) of canonical positions
    with at least ``min_empties`` empty squares."""
    info = table[:, INFO]
    canonical = (info >> KEY_SHIFT) & CANONICAL_FLAG != 0
    depth = unpack_bounds(info)[2]
    wanted = canonical & (depth == EXACT_DEPTH) & ((info >> EMPTIES_SHIFT & 0xFF) >= min_empties)
    return table[np.flatnonzero(wanted)]


def pack_bounds(lower: np.ndarray, upper: np.ndarray, best_piece: np.ndarray) -> np.ndarray:
    """The data of entries searched to the end of the game: :func:`_pack`, on arrays."""
    return _pack.py_func(lower, upper, EXACT_DEPTH, best_piece)


def unpack_bounds(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(lower, upper, depth, best_piece)`` of entries' data: :func:`_unpack`, on arrays."""
    return _unpack.py_func(data)


@numba.njit(cache=True)
def entries_from_rows(rows):  # type: ignore[no-untyped-def]
    """Table rows as entries ``(key_occupied, key_lanes, empties, data)``, one per row; rows that are not in use
    or fail their check (damaged) are dropped."""
    entries = np.empty((rows.shape[0], 4), dtype=np.int64)
    count = 0
    for i in range(rows.shape[0]):
        info = rows[i, INFO]
        key_occupied = info >> KEY_SHIFT
        if key_occupied & USED_FLAG == 0:
            continue
        entries[count, 0] = key_occupied
        entries[count, 1] = rows[i, VERIFY] ^ _scramble(info)
        entries[count, 2] = info >> EMPTIES_SHIFT & 0xFF
        entries[count, 3] = info & DATA_MASK
        count += 1
    return entries[:count]


@numba.njit(cache=True)
def store_entries(table, entries) -> None:  # type: ignore[no-untyped-def]
    """Store entries ``(key_occupied, key_lanes, empties, data)`` into ``table`` (of any size)."""
    for i in range(entries.shape[0]):
        _store(table, entries[i, 0], entries[i, 1], entries[i, 2], entries[i, 3])
