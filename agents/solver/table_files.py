"""A transposition table outside the search: saved to a file and loaded back (the state of a long proof), and
its proven entries as arrays (for :mod:`agents.solver.value_cache`).

The table's layout is in :mod:`agents.solver.table`.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from agents.solver.kernels import EXACT_DEPTH
from agents.solver.table import (
    CANONICAL_FLAG,
    EMPTIES_SHIFT,
    INFO,
    KEY_SHIFT,
    entries_from_rows,
    pack_data,
    store_entries,
    unpack_data,
)
from agents.storage.files import atomic_write
from quarto_env.checks import one_line
from quarto_env.core import Variant
from quarto_env.errors import TableFileError

TABLE_FILE_FORMAT = 1
"""Version of the layout :func:`save_table` writes; bump it when a stored entry could mean something else."""


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
    """The data of entries searched to the end of the game: :func:`agents.solver.table.pack_data`, on arrays."""
    return pack_data.py_func(lower, upper, EXACT_DEPTH, best_piece)


def unpack_bounds(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(lower, upper, depth, best_piece)`` of entries' data: :func:`agents.solver.table.unpack_data`, on
    arrays."""
    return unpack_data.py_func(data)
