"""Exact labels at scale: the exact value of every legal action of many positions.

The one labeller behind ``quarto dataset --sample``, the suites' builds (:func:`agents.suites.solve_positions`),
grading's values (:func:`experiments.evaluation.grading.exact_action_values`) and ``quarto bench network``: each
position's legal actions valued for the player to move, +1 win, 0 draw, -1 loss under perfect play, by the exact
solver (:class:`agents.solver.minimax.Solver`, ``solve(state, all_moves=True)``).

Why it is fast
--------------
* **One solver per process, for all of its positions** (:func:`agents.solver.minimax.default_solver`): its
  transposition table is kept from one position to the next, so positions that share subtrees (those of one
  stage, of one game) find them proven already; it starts from the value cache (:mod:`agents.solver.value_cache`) and
  answers from the opening book where the book covers a position.
* **Processes**: with ``jobs`` above 1, worker processes (spawned, as the tournament's) label shards of
  positions side by side, each with its own solver. The values are exact, so they do not depend on ``jobs``
  nor on which worker labels which shard: the output is the same for any ``jobs``.
* The same pool plays the games that supply the positions (:func:`agents.suites.collect_positions`).

Shards and resuming
-------------------
With a ``folder``, the positions are labelled in shards of :data:`SHARD_POSITIONS` consecutive positions, and each
shard is written to ``folder/shard-NNNNN.npy`` as soon as it is done, sealed (:mod:`agents.storage.integrity`: the
sidecar ``shard-NNNNN.npy.seal`` holds its format, its SHA-256 and the hash of the positions it labels).
``folder/labels.json`` (a sealed JSON object) names what the shards are of: the SHA-256 of the positions, the variant
and the solver's version. A later call for the same positions with the same folder reads the finished shards and labels
only the others -- after Ctrl-C or a kill, the same command continues where it stopped. A shard is used only once it
proves itself: its seal matches its bytes and its positions, and it labels exactly the legal actions of each of
them with a value; any other is labelled again, with one line on stderr that says so. A folder whose
``labels.json`` names other positions, or fails its check, is emptied of its shards first.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import multiprocessing
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any, cast

import numpy as np
from tqdm import tqdm

from agents.storage.files import remove_orphan_temporaries
from agents.storage.integrity import (
    IntegrityError,
    read_sealed,
    read_sealed_json,
    write_sealed,
    write_sealed_json,
)
from quarto_env.core import State, Variant, legal_action_mask, position_array

ILLEGAL = -2
"""The label of an illegal action (values are -1, 0, +1)."""

SHARD_POSITIONS = 64
"""Positions per shard: small, so that an interruption loses little, the progress bar over shards moves, and the
workers share the slow shards of the stages with the most empty squares (four times larger shards left one worker
alone with a 12-empty shard for minutes; docs/dataset.md gives the labelling costs)."""

LABELS_FILE = "labels.json"
"""The file of a shard folder that names the positions its shards label."""
SHARDS_KIND = "dataset label shards"
"""The ``kind`` of :data:`LABELS_FILE`'s seal (:mod:`agents.storage.integrity`)."""
SHARD_KIND = "dataset label shard"
"""The ``kind`` of a shard's seal."""
SHARDS_FORMAT = 1
"""The version of the layout of a shard folder: the manifest and the shards (int8 ``.npy``, sealed)."""


# ---------------------------------------------------------------------------------------------------------
# One position
# ---------------------------------------------------------------------------------------------------------
def action_values(variant: Variant, state: State) -> dict[int, int]:
    """``{action: value}`` for every legal action of ``state`` (not over), values for the player to move, by the
    process's solver for ``variant`` (:func:`agents.solver.minimax.default_solver`: its table, the value cache and the
    opening book are shared with every other position this process labels)."""
    from agents.solver.minimax import default_solver  # the compiled solver loads only when a position needs it

    values = cast(
        dict[int, int], default_solver(variant).solve(state, all_moves=True).action_values
    )  # all_moves fills it
    return {int(action): int(value) for action, value in values.items()}


SOLVER_VERSION = "agents.minimax.solve 1"
"""The solver whose values labels, suites and grading caches hold: change it whenever the solver could value a
position differently, and files written before are refused or solved again. Stored in those files: it names the
solver as it was first (now :func:`agents.solver.minimax.solve`), so that the files already written still load."""


def labels_row(variant: Variant, values: dict[int, int]) -> np.ndarray:
    """``(num_actions,)`` int8: ``values`` by action, :data:`ILLEGAL` for the actions it lacks."""
    row = np.full(variant.num_actions, ILLEGAL, dtype=np.int8)
    for action, value in values.items():
        row[action] = value
    return row


def values_of_row(row: np.ndarray) -> dict[int, int]:
    """The inverse of :func:`labels_row`: ``{action: value}`` of the legal actions of a row of labels."""
    return {int(action): int(row[action]) for action in np.flatnonzero(row != ILLEGAL)}


# ---------------------------------------------------------------------------------------------------------
# Many positions
# ---------------------------------------------------------------------------------------------------------
def label_positions(
    variant: Variant,
    states: Sequence[State],
    jobs: int = 1,
    progress: bool = False,
    folder: Path | None = None,
    pool: Pool | None = None,
) -> np.ndarray:
    """``(len(states), num_actions)`` int8: row ``i`` holds the exact value of each legal action of ``states[i]``
    (:func:`action_values`) and :data:`ILLEGAL` elsewhere; the same for every ``jobs``.

    ``jobs`` above 1 labels shards in that many worker processes (``pool``, when given, is used instead of
    starting one: :func:`worker_pool`). ``folder`` keeps each finished shard there and reads back those an
    earlier call for the same positions finished (module docstring). ``progress``: a bar on stderr, counting
    positions. ``KeyboardInterrupt`` stops the workers; the shards written so far stay in ``folder``."""
    labels = np.full((len(states), variant.num_actions), ILLEGAL, dtype=np.int8)
    starts = range(0, len(states), SHARD_POSITIONS)
    shards = [range(start, min(start + SHARD_POSITIONS, len(states))) for start in starts]
    done = _finished_shards(variant, states, folder, labels) if folder is not None else set()
    pending = [(index, shard) for index, shard in enumerate(shards) if index not in done]
    finished = len(states) - sum(len(shard) for _, shard in pending)
    with tqdm(
        total=len(states), initial=finished, desc="labelling", unit="pos", disable=not progress, leave=False
    ) as bar:
        for index, shard_labels in _labelled_shards(variant, states, pending, jobs, pool, bar):
            labels[shards[index].start : shards[index].stop] = shard_labels
            if folder is not None:
                _save_shard(folder, index, shard_labels, [states[i] for i in shards[index]])
    return labels


def _labelled_shards(
    variant: Variant,
    states: Sequence[State],
    pending: list[tuple[int, range]],
    jobs: int,
    pool: Pool | None,
    bar: tqdm,
) -> Iterator[tuple[int, np.ndarray]]:
    """``(shard index, its labels)`` for each shard of ``pending``: in this process for one job (the bar moves
    position by position), else in worker processes in the order they finish (the bar moves shard by shard)."""
    if jobs <= 1 and pool is None:
        for index, shard in pending:
            rows = []
            for i in shard:
                rows.append(labels_row(variant, action_values(variant, states[i])))
                bar.update(1)
            yield index, np.array(rows, dtype=np.int8).reshape(len(shard), variant.num_actions)
        return
    tasks = [(index, variant, [states[i] for i in shard]) for index, shard in pending]
    with contextlib.ExitStack() as stack:
        workers = pool if pool is not None else stack.enter_context(worker_pool(min(jobs, max(len(tasks), 1))))
        for index, shard_labels in workers.imap_unordered(_label_shard, tasks):
            bar.update(len(shard_labels))
            yield index, shard_labels


def _label_shard(task: tuple[int, Variant, list[State]]) -> tuple[int, np.ndarray]:
    """A worker's job: the labels of one shard."""
    index, variant, states = task
    rows = [labels_row(variant, action_values(variant, state)) for state in states]
    return index, np.array(rows, dtype=np.int8).reshape(len(states), variant.num_actions)


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[Pool]:
    """A pool of ``jobs`` spawned worker processes that ignore Ctrl-C (the parent's to handle: leaving the block
    by an exception terminates them wherever they are). Spawned, not forked, as the tournament's: workers start
    clean, with no inherited threads (the progress bar's, :mod:`agents.interrupts`'). They are started with SIGINT
    ignored, which a new Python process keeps: a terminal's Ctrl-C reaches the whole process group, and a worker
    still importing would print a traceback."""
    context = multiprocessing.get_context("spawn")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        pool = context.Pool(jobs, initializer=_init_worker)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        yield pool
    except BaseException:
        pool.terminate()
        raise
    else:
        pool.close()
    finally:
        pool.join()


def _init_worker() -> None:
    # One thread per worker process: the workers already fill the cores.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[name] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---------------------------------------------------------------------------------------------------------
# Shard folders
# ---------------------------------------------------------------------------------------------------------
def positions_digest(states: Sequence[State]) -> str:
    """SHA-256 of the positions, in order (their rows of :func:`quarto_env.core.position_array`)."""
    rows = np.ascontiguousarray(position_array(states), dtype=np.int64)
    return hashlib.sha256(rows.tobytes()).hexdigest()


def _labels_manifest(variant: Variant, states: Sequence[State]) -> dict[str, Any]:
    return {
        "solver": SOLVER_VERSION,
        "variant": variant.to_dict(),
        "positions": len(states),
        "positions_sha256": positions_digest(states),
        "shard_positions": SHARD_POSITIONS,
    }


def shard_path(folder: Path, index: int) -> Path:
    """The file of shard ``index`` in ``folder`` (sealed by its sidecar, :func:`agents.storage.integrity.seal_path`)."""
    return folder / f"shard-{index:05d}.npy"


def _finished_shards(variant: Variant, states: Sequence[State], folder: Path, labels: np.ndarray) -> set[int]:
    """The indices of the shards of ``folder`` that label ``states`` and prove it (:func:`_read_shard`), their
    rows copied into ``labels``; each other shard found is labelled again, and said so. A folder made for other
    positions, by another version, or whose manifest fails its check (or none yet) gets this call's
    ``labels.json`` and loses its shards."""
    manifest = _labels_manifest(variant, states)
    manifest_path = folder / LABELS_FILE
    try:
        same = read_sealed_json(manifest_path, SHARDS_KIND, SHARDS_FORMAT) == manifest
        reason = "it labels other positions"
    except FileNotFoundError:
        same, reason = False, ""
    except (OSError, IntegrityError) as error:
        same, reason = False, str(error)
    if not same:
        _start_afresh(folder, manifest, reason)
        return set()
    done = set()
    for index, start in enumerate(range(0, len(states), SHARD_POSITIONS)):
        shard = states[start : start + SHARD_POSITIONS]
        rows = _read_shard(variant, shard_path(folder, index), shard)
        if rows is not None:
            labels[start : start + len(rows)] = rows
            done.add(index)
    return done


def _start_afresh(folder: Path, manifest: dict[str, Any], reason: str) -> None:
    """Empty ``folder`` of its shards and write ``manifest``; with shards to drop, say why (``reason``)."""
    folder.mkdir(parents=True, exist_ok=True)
    old = _shard_files(folder)
    for path in old:
        path.unlink()
    if old and reason:
        _say(f"{folder / LABELS_FILE}: {reason}; its shards are dropped and every position is labelled again")
    write_sealed_json(folder / LABELS_FILE, manifest, SHARDS_KIND, SHARDS_FORMAT)


def _shard_files(folder: Path) -> list[Path]:
    """The shards of ``folder`` and their seals (and the unsealed shards of older versions)."""
    return sorted(folder.glob("shard-*"))


def _read_shard(variant: Variant, path: Path, states: Sequence[State]) -> np.ndarray | None:
    """The labels of ``states`` in ``path`` once they prove themselves: its seal matches its bytes and these
    positions, and it is an int8 array that labels the legal actions of each position with a value (-1, 0, +1)
    and nothing else :data:`ILLEGAL`. ``None`` when it was never written, or (said in one line) when it fails:
    then it is labelled again."""
    try:
        payload = read_sealed(path, SHARD_KIND, SHARDS_FORMAT, positions_sha256=positions_digest(states))
    except FileNotFoundError:
        return None
    except (OSError, IntegrityError) as error:
        return _redone(str(error), len(states))
    try:
        rows = np.load(io.BytesIO(payload), allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return _redone(f"{path} is no array of labels", len(states))
    shape = (len(states), variant.num_actions)
    if rows.dtype != np.int8 or rows.shape != shape or not _labels_fit(variant, states, rows):
        return _redone(f"{path} does not label the legal actions of its positions", len(states))
    return rows


def _labels_fit(variant: Variant, states: Sequence[State], rows: np.ndarray) -> bool:
    """Whether each row labels exactly the legal actions of its position with a value, -1, 0 or +1."""
    actions = np.arange(variant.num_actions)
    legal = np.array([(legal_action_mask(variant, state) >> actions) & 1 == 1 for state in states], dtype=bool)
    return bool(rows_label_legal_actions(legal.reshape(rows.shape), rows).all())


def rows_label_legal_actions(legal: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row of labels (``rows``, ``(n, A)``): whether it labels exactly its ``legal`` actions (``(n, A)`` bool)
    with a value, -1, 0 or +1, and every other action :data:`ILLEGAL`."""
    return np.asarray(np.where(legal, np.isin(rows, (-1, 0, 1)), rows == ILLEGAL).all(axis=1))


def _redone(reason: str, count: int) -> np.ndarray | None:
    """Say that a shard of ``count`` positions is labelled again, and why; ``None``, its rows: none."""
    _say(f"{reason}; labelling its {count} positions again")
    return None


def _say(message: str) -> None:
    """One line on stderr, above a progress bar if one shows."""
    tqdm.write(message, file=sys.stderr)


def _save_shard(folder: Path, index: int, rows: np.ndarray, states: Sequence[State]) -> None:
    """Write shard ``index`` (``rows``, the labels of ``states``) sealed, with the hash of its positions."""
    buffer = io.BytesIO()
    np.save(buffer, rows, allow_pickle=False)
    digest = positions_digest(states)
    write_sealed(shard_path(folder, index), SHARD_KIND, SHARDS_FORMAT, buffer.getvalue(), positions_sha256=digest)


def remove_shard_folder(folder: Path) -> None:
    """Delete what :func:`label_positions` wrote to ``folder`` (its shards, their seals and ``labels.json``, and
    the half-written files of an earlier run killed mid-write), and the folder itself once it is empty; files of
    anyone else stay, and so does the folder then. The caller holds the folder: nothing else writes into it."""
    for path in [*_shard_files(folder), folder / LABELS_FILE]:
        path.unlink(missing_ok=True)
    remove_orphan_temporaries(folder)
    with contextlib.suppress(OSError):
        folder.rmdir()
