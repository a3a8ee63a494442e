"""A transposition table outside the search: saved to a file and loaded back (the state of a long proof), and
its proven entries as arrays (for :mod:`agents.solver.value_cache`).

A table file is sealed (:mod:`agents.storage.integrity`): its header holds the SHA-256 of the header and the rows,
so a file whose rows were edited -- each row's check word recomputed, or rows of random numbers -- is refused
as surely as a torn one, and so is a file of an older version, which has no seal.

The table's layout is in :mod:`agents.solver.table`.
"""

from __future__ import annotations

import json
import os
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
from agents.storage.integrity import ARCHIVE_DAMAGE, SEAL_KEY, canonical_json, check_seal, make_seal
from quarto_env.checks import one_line
from quarto_env.core import Variant
from quarto_env.errors import IntegrityError, TableFileError

TABLE_FILE_FORMAT = 1
"""Version of the layout :func:`save_table` writes; bump it when a stored entry could mean something else."""
TABLE_FILE_KIND = "saved transposition table"
"""The ``kind`` of a table file's seal (:mod:`agents.storage.integrity`)."""


def save_table(path: str | Path, table: np.ndarray, variant: Variant, note: dict | None = None) -> int:
    """Write the used rows of ``table`` to ``path`` (an ``.npz`` file, atomically) with the variant and ``note``,
    sealed (:func:`_sealed_header`); returns the number of entries written. Every stored bound holds for any
    position of the variant, so the file can seed the proof of any of them (:func:`load_table`)."""
    rows = table[np.flatnonzero(table[:, INFO])]
    body = {"format": TABLE_FILE_FORMAT, "variant": variant.to_dict(), "entries": len(rows), **(note or {})}
    header = _sealed_header(body, rows)

    def write(temporary: Path) -> None:
        with open(temporary, "wb") as handle:
            np.savez(handle, header=np.array(json.dumps(header)), rows=rows)
            handle.flush()
            os.fsync(handle.fileno())

    atomic_write(path, write)
    return len(rows)


def read_table_header(path: str | Path) -> dict:
    """The header of a saved table, without its seal; raises :class:`TableFileError` for a file that is not one,
    or whose seal does not prove it (:func:`load_table`)."""
    return _read_table_file(path)[0]


def load_table(path: str | Path, table: np.ndarray, variant: Variant) -> dict:
    """Store the entries saved in ``path`` into ``table`` (of any size) and return the file's header. Raises
    :class:`TableFileError` for a file that is missing, damaged, unsealed (written by an older version), altered,
    of another format or of another variant. The file is read as plain arrays: nothing in it is unpickled."""
    header, rows = _read_table_file(path)
    if header["variant"] != variant.to_dict():
        raise TableFileError(f"{path} holds a table of the variant {header['variant']}, not {variant.to_dict()}")
    store_entries(table, entries_from_rows(rows))
    return header


def _sealed_header(body: dict, rows: np.ndarray) -> dict:
    """``body`` with the seal of the whole file under :data:`~agents.storage.integrity.SEAL_KEY`: an edited row
    with its check word recomputed still fails the check, unlike the table's own per-row check."""
    return {**body, SEAL_KEY: make_seal(TABLE_FILE_KIND, TABLE_FILE_FORMAT, _sealed_bytes(body, rows))}


def _sealed_bytes(body: dict, rows: np.ndarray) -> bytes:
    """What a table file's seal covers: its header but the seal, then its rows (little-endian, whatever the
    machine)."""
    return canonical_json(body) + np.ascontiguousarray(rows, dtype="<i8").tobytes()


def _read_table_file(path: str | Path) -> tuple[dict, np.ndarray]:
    """The header (without its seal) and the rows of a saved table, once its seal proves them."""
    try:
        # Opened here: np.load leaves a file it opened itself open when it is no zip (a ResourceWarning).
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            rows = data["rows"]
    except FileNotFoundError:
        raise TableFileError(f"{path}: no such file") from None
    except ARCHIVE_DAMAGE as error:
        raise TableFileError(f"{path} is not a saved table ({one_line(error)})") from None
    if not isinstance(header, dict) or "variant" not in header:
        raise TableFileError(f"{path} is not a saved table of format {TABLE_FILE_FORMAT}")
    if rows.dtype != np.int64 or rows.ndim != 2 or rows.shape[1] != 2:
        raise TableFileError(f"{path}: its rows are {rows.dtype} {rows.shape}, not int64 (n, 2)")
    body = {key: value for key, value in header.items() if key != SEAL_KEY}
    try:
        check_seal(header.get(SEAL_KEY), TABLE_FILE_KIND, TABLE_FILE_FORMAT, _sealed_bytes(body, rows), str(path))
    except IntegrityError as error:
        raise TableFileError(str(error)) from None
    return body, rows


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
