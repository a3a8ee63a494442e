"""Exact values kept across runs: a SQLite file of proven positions, keyed by canonical board.

The solver's transposition table (:mod:`agents.solver.table`) keys the give nodes with many empty squares by their
canonical form under every symmetry of the game, and an entry searched to the end of the game holds proven
bounds on the value of every position of that class (exact where they meet). :class:`ValueCache` keeps such
entries: a
:class:`~agents.solver.minimax.Solver` loads the file's entries for its variant into its table when it starts, and
:meth:`ValueCache.harvest` adds the new ones after each solve. So grading, tournaments and solver agents start
from what earlier runs proved, and a position solved once is not solved again.

The file is ``$QUARTO_CACHE_DIR/values.sqlite`` (default ``~/.cache/quarto``; ``QUARTO_CACHE_DIR=off`` turns the
cache off). SQLite makes concurrent writers from several processes safe. Each row names its variant and the
layout version of the table entries: rows of another version are never read. A row holds numbers only, never
pickled data, and is checked as it is read (:func:`sound_rows`): a damaged one is ignored, in one line on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
from pathlib import Path

import numpy as np

from agents.solver.kernels import WIN
from agents.solver.table import CANONICAL_FLAG, USED_FLAG, entries_from_rows, store_entries
from agents.solver.table_files import TABLE_FILE_FORMAT, pack_bounds, proven_rows, unpack_bounds
from quarto_env.core import NUM_SQUARES, Variant
from quarto_env.symmetry import LANE_MASK

CACHE_ENV = "QUARTO_CACHE_DIR"
"""Environment variable naming the cache folder; ``off`` turns the cache off."""
MIN_EMPTIES = 10
"""Positions with fewer empty squares are not kept: the solver proves them in milliseconds."""
LOADED_SHARE = 4
"""At most a quarter of a table is filled from the cache (with the positions with the most empty squares)."""

_SCHEMA = """CREATE TABLE IF NOT EXISTS positions (
    variant TEXT NOT NULL, version INTEGER NOT NULL, key_occupied INTEGER NOT NULL, key_lanes INTEGER NOT NULL,
    empties INTEGER NOT NULL, lower INTEGER NOT NULL, upper INTEGER NOT NULL, best_piece INTEGER NOT NULL,
    PRIMARY KEY (variant, version, key_occupied, key_lanes))"""
_INSERT = """INSERT INTO positions VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT DO UPDATE SET lower = max(lower, excluded.lower), upper = min(upper, excluded.upper)"""


def sound_rows(columns: np.ndarray) -> np.ndarray:
    """Which rows ``(key_occupied, key_lanes, empties, lower, upper, best_piece)`` could have been harvested: a
    used, canonical key whose board has ``empties`` empty squares (at least :data:`MIN_EMPTIES`), four lanes of
    piece attributes on the board's squares only, and proven bounds (each a win, a draw or a loss, the lower no
    higher than the upper) with a piece or none. A row that fails was damaged or written by hand: loading it
    could make the solver's answers wrong."""
    key_occupied, key_lanes, empties, lower, upper, best_piece = columns.T
    board = key_occupied & LANE_MASK
    filled = sum(board >> square & 1 for square in range(NUM_SQUARES))
    flags = USED_FLAG | CANONICAL_FLAG
    lanes_on_board = np.all([(key_lanes >> (NUM_SQUARES * k) & LANE_MASK & ~board) == 0 for k in range(4)], axis=0)
    proven = (-WIN, 0, WIN)
    return (
        (key_occupied & ~LANE_MASK == flags)
        & (filled == NUM_SQUARES - empties)
        & (empties >= MIN_EMPTIES)
        & lanes_on_board
        & np.isin(lower, proven)
        & np.isin(upper, proven)
        & (lower <= upper)
        & (best_piece >= -1)
        & (best_piece < NUM_SQUARES)
    )


def default_cache_path() -> Path | None:
    """Where the cache lives, or ``None`` when ``QUARTO_CACHE_DIR=off``."""
    folder = os.environ.get(CACHE_ENV, "")
    if folder.lower() == "off":
        return None
    return Path(folder or Path.home() / ".cache" / "quarto") / "values.sqlite"


class ValueCache:
    """The exact values of one rule variant in a SQLite file (see the module docstring)."""

    def __init__(self, variant: Variant, path: str | Path) -> None:
        self.path = Path(path)
        self.unwritable = False
        """Whether a harvest failed (said once, on stderr)."""
        self.variant_key = json.dumps(variant.to_dict(), sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as connection:
            connection.execute(_SCHEMA)

    def _connect(self) -> contextlib.closing[sqlite3.Connection]:
        return contextlib.closing(sqlite3.connect(self.path, timeout=60))

    def __len__(self) -> int:
        with self._connect() as connection:
            query = "SELECT COUNT(*) FROM positions WHERE variant = ? AND version = ?"
            (count,) = connection.execute(query, (self.variant_key, TABLE_FILE_FORMAT)).fetchone()
        return int(count)

    def load_into(self, table: np.ndarray) -> int:
        """Store the cached values into ``table``; returns how many."""
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT key_occupied, key_lanes, empties, lower, upper, best_piece FROM positions "
                "WHERE variant = ? AND version = ? "
                "ORDER BY empties DESC LIMIT ?",
                (self.variant_key, TABLE_FILE_FORMAT, len(table) // LOADED_SHARE),
            ).fetchall()
        if not rows:
            return 0
        columns = np.array(rows, dtype=np.int64)
        sound = sound_rows(columns)
        if not sound.all():
            print(
                f"{self.path}: {np.count_nonzero(~sound)} damaged row(s) ignored (not proven bounds of a canonical "
                "position); delete the file to start the cache afresh",
                file=sys.stderr,
            )
            columns = columns[sound]
        lower, upper, best_piece = columns[:, 3], columns[:, 4], columns[:, 5]
        store_entries(table, np.stack([*columns[:, :3].T, pack_bounds(lower, upper, best_piece)], axis=1))
        return len(columns)

    def harvest(self, table: np.ndarray) -> int:
        """Add the proven bounds in ``table`` of positions with at least ``MIN_EMPTIES`` empty squares (a position
        already cached keeps the tighter bounds of both); returns how many the table offered."""
        entries = entries_from_rows(proven_rows(table, MIN_EMPTIES))
        if len(entries) == 0:
            return 0
        lower, upper, _, best_piece = unpack_bounds(entries[:, 3])
        rows = [
            (self.variant_key, TABLE_FILE_FORMAT, *map(int, entry[:3]), int(low), int(high), int(best))
            for entry, low, high, best in zip(entries, lower, upper, best_piece, strict=True)
        ]
        try:
            with self._connect() as connection, connection:
                connection.executemany(_INSERT, rows)
        except sqlite3.OperationalError as error:  # a full disk, a file-size limit: the cache is a help, not a result
            if not self.unwritable:
                print(f"{self.path}: the values found are not cached ({error})", file=sys.stderr)
            self.unwritable = True
            return 0
        return len(entries)


def default_cache(variant: Variant) -> ValueCache | None:
    """The cache at :func:`default_cache_path`, or ``None`` when it is off or cannot be opened (a read-only home:
    the solver then simply works without it)."""
    path = default_cache_path()
    if path is None:
        return None
    try:
        return ValueCache(variant, path)
    except (OSError, sqlite3.Error):
        return None
