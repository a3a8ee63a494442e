"""The transposition table of the compiled search (:mod:`agents.solver.kernels`): its layout, its keys, and the
compiled probe and store.

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

Saving a table to a file and reading its proven entries are in :mod:`agents.solver.table_files`. Every
function here but :func:`new_table` and :func:`table_bits_for` is compiled with numba, ``cache=True``; those the
search calls as its kernels are (:func:`quarto_env.kernel.kernel`).
"""

from __future__ import annotations

import numba
import numpy as np

from quarto_env.core import NUM_ATTRIBUTES
from quarto_env.errors import QuartoValueError
from quarto_env.kernel import kernel
from quarto_env.symmetry import LANE_MASK

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


def new_table(bits: int = DEFAULT_TABLE_BITS) -> np.ndarray:
    """An empty transposition table of ``2**bits`` entries (zeros: the memory is only touched when used)."""
    return np.zeros((1 << bits, 2), dtype=np.int64)


def table_bits_for(megabytes: float) -> int:
    """The largest table (in bits of its entry count) that fits in ``megabytes`` MiB."""
    entries = int(megabytes * 2**20) // ENTRY_BYTES
    if entries < 1 << MIN_TABLE_BITS:
        smallest = (1 << MIN_TABLE_BITS) * ENTRY_BYTES / 2**20
        raise QuartoValueError(f"a table needs at least {smallest:g} MiB, got {megabytes:g}")
    return min(entries.bit_length() - 1, MAX_TABLE_BITS)


@kernel
def counted_lanes(lanes: int, counted: int) -> int:
    """The lanes with the attributes that do not count cleared: they never decide a game."""
    kept = 0
    for k in range(NUM_ATTRIBUTES):
        if counted >> k & 1:
            kept |= lanes & (LANE_MASK << (16 * k))
    return kept


# The hashes multiply in unsigned 64-bit words, which wrap as written. Numba marks signed arithmetic as never
# overflowing (LLVM's ``nsw``), so a signed product that wraps, as a hash's does, is undefined in compiled code:
# LLVM may fold it on that assumption. The values are the same bits as the signed products'.
_LANES_FACTOR = np.uint64(0x9E3779B97F4A7C15)
_OCCUPIED_FACTOR = np.uint64(0x27D4EB2F165667C5)
_INFO_FACTOR = np.uint64(0xBF58476D1CE4E5B9)


@kernel
def board_hash(lanes: int, occupied: int) -> np.int64:
    """A multiplicative hash of a board, for the table's buckets and the busy marks."""
    return np.int64(np.uint64(lanes) * _LANES_FACTOR + np.uint64(occupied) * _OCCUPIED_FACTOR)


@kernel
def _bucket(table, key_occupied: int, key_lanes: int) -> int:
    """The first row of the key's two-entry bucket: the hash, folded."""
    mixed = board_hash(key_lanes, key_occupied)
    return (mixed ^ (mixed >> 29)) & (table.shape[0] - 2)


@kernel
def _scramble(info: int) -> np.int64:
    """A 64-bit hash of a row's ``INFO`` word, for its ``VERIFY`` word."""
    mixed = np.int64(np.uint64(info) * _INFO_FACTOR)
    return mixed ^ (mixed >> 31)


@kernel
def probe_table(table, key_occupied: int, key_lanes: int) -> int:
    """The row holding the key, or -1."""
    row = _bucket(table, key_occupied, key_lanes)
    for candidate in range(row, row + 2):
        info = table[candidate, INFO]
        if info >> KEY_SHIFT == key_occupied and table[candidate, VERIFY] ^ _scramble(info) == key_lanes:
            return candidate
    return -1


@kernel
def _write(table, row: int, key_occupied: int, key_lanes: int, empties: int, data: int) -> None:
    info = key_occupied << KEY_SHIFT | empties << EMPTIES_SHIFT | data
    table[row, INFO] = info
    table[row, VERIFY] = key_lanes ^ _scramble(info)


@kernel
def store_entry(table, key_occupied: int, key_lanes: int, empties: int, data: int) -> None:
    """Store an entry. An entry already stored for the key at the same depth keeps its bounds: both hold, so the
    new entry gets the tighter of each. Otherwise a bucket's first row keeps the entry with the most empty
    squares (the costliest to search again), its second row the latest of the others."""
    row = probe_table(table, key_occupied, key_lanes)
    if row >= 0:
        old_lower, old_upper, old_depth, _ = unpack_data(table[row, INFO])
        lower, upper, depth, best_piece = unpack_data(data)
        if old_depth == depth:
            data = pack_data(max(lower, old_lower), min(upper, old_upper), depth, best_piece)
    else:
        row = _bucket(table, key_occupied, key_lanes)
        if table[row, INFO] >> EMPTIES_SHIFT & 0xFF > empties:
            row += 1
    _write(table, row, key_occupied, key_lanes, empties, data)


@kernel
def pack_data(lower, upper, depth, best_piece):  # type: ignore[no-untyped-def]
    return (lower + 128) | (upper + 128) << 8 | depth << 16 | (best_piece + 1) << 24


@kernel
def unpack_data(data):  # type: ignore[no-untyped-def]
    """``(lower, upper, depth, best_piece)`` of a table entry's data (or, through ``py_func``, of an array of
    them: the two are untyped for that)."""
    return (data & 0xFF) - 128, (data >> 8 & 0xFF) - 128, data >> 16 & 0xFF, (data >> 24 & 0xFF) - 1


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


@kernel
def store_entries(table, entries) -> None:  # type: ignore[no-untyped-def]
    """Store entries ``(key_occupied, key_lanes, empties, data)`` into ``table`` (of any size)."""
    for i in range(entries.shape[0]):
        store_entry(table, entries[i, 0], entries[i, 1], entries[i, 2], entries[i, 3])
