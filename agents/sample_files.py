"""Self-play samples as a dataset: versioned, sharded files, published atomically, read back as minibatches.

A dataset is a folder::

    DIR/manifest.json      what the rows are, their versions and fields, and one seal per shard
    DIR/shard-00000.npz    rows of every field: an .npz of plain arrays (np.load(..., allow_pickle=False))
    DIR/shard-00001.npz    ...

The manifest is a sealed JSON object (:mod:`agents.integrity`: its kind, format and SHA-256): ``versions``
(``format``, the layout's version :data:`SAMPLES_FORMAT`; ``engine``, the package's version; ``observation``,
the planes' kind, channels and :func:`observation_version`), the rule ``variant``, the ``fields`` (each one's
dtype and the shape of one row) and ``shards``, each a seal of its file (name, rows, bytes, SHA-256).

- **Writing** (:class:`SampleWriter`): rows gather until a shard is full (or :meth:`SampleWriter.close`); the shard
  is written whole (an atomic write), then the manifest that names it replaces the last one (another). A reader
  sees the dataset as of one manifest, never half a shard; a writer killed in between leaves a shard no manifest
  names, which the next writer overwrites. A writer given a folder with a dataset appends to it.
- **Reading** (:class:`SampleDataset`): opening reads the manifest and refuses, in one line, a dataset of another
  format, engine or observation version (:class:`quarto_env.errors.DatasetError`, as for every failure here);
  :meth:`SampleDataset.minibatches` streams shuffled minibatches a shard at a time, each shard checked against its
  seal as it is read; :meth:`SampleDataset.validate` checks every shard deeply: its seal, its arrays' names, dtypes
  and shapes, and what the rows say (legal masks, policies, values, observations re-encoded from the positions).

The fields (``n`` rows; :class:`agents.sessions.Samples`):

=================  ======================  ======================================================================
``observations``   ``(n, channels, 16)``   int8: the planes of the dataset's observation kind
``legal``          ``(n, 16)``             bool: the actions the search considered (the policy's support)
``positions``      ``(n, NUM_FIELDS)``     int64: the position, a row of :func:`quarto_env.core.position_array`
``policy``         ``(n, 16)``             float32: the improved policy of the search (sums to 1 over ``legal``)
``value``          ``(n,)``                float32: the game's outcome for the player to move (+1, 0, -1)
``root_value``     ``(n,)``                float32: the search's value of the position for the player to move
``game``           ``(n,)``                int64: the session's number of the game
``ply``            ``(n,)``                int64: actions played before the position
``model_version``  ``(n,)``                int64: the version of the model that searched it
=================  ======================  ======================================================================

``quarto dataset``'s solved positions are a single ``.npz`` with a header of their own
(:mod:`experiments.training.dataset`); their rows could be shards of this container under another schema.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import quarto_env
from agents.files import atomic_write_bytes, output_folder
from agents.integrity import IntegrityError, check_seal, make_seal, read_sealed_json, write_sealed_json
from agents.puct import encode_positions
from agents.sessions import Samples
from quarto_env.core import INITIAL_STATE, NUM_ACTIONS, NUM_FIELDS, Variant, legal_actions, position_array, step
from quarto_env.errors import DatasetError
from quarto_env.observation import ObservationKind, observation_kind

SAMPLES_FORMAT = 1
"""The version of the dataset's layout (the manifest's fields and the shards' arrays)."""
MANIFEST = "manifest.json"
MANIFEST_KIND = "self-play samples"
SHARD_KIND = "self-play samples shard"
DEFAULT_SHARD_ROWS = 65_536
VALUE_TOLERANCE = 1e-4
"""How far a policy row may sum from 1 (float32 rounding)."""


def sample_fields(kind: ObservationKind) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each field's dtype (numpy's ``dtype.str``) and the shape of one row, for observations of ``kind``."""
    return {
        "observations": (np.dtype(np.int8).str, kind.shape),
        "legal": (np.dtype(np.bool_).str, (NUM_ACTIONS,)),
        "positions": (np.dtype(np.int64).str, (NUM_FIELDS,)),
        "policy": (np.dtype(np.float32).str, (NUM_ACTIONS,)),
        "value": (np.dtype(np.float32).str, ()),
        "root_value": (np.dtype(np.float32).str, ()),
        "game": (np.dtype(np.int64).str, ()),
        "ply": (np.dtype(np.int64).str, ()),
        "model_version": (np.dtype(np.int64).str, ()),
    }


# ---------------------------------------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------------------------------------
def engine_version() -> str:
    """The installed package's version (``quarto_env.__version__``)."""
    return str(quarto_env.__version__)


@functools.cache
def _observation_version(kind_name: str, variant: Variant) -> str:
    kind = observation_kind(kind_name)
    planes, masks = encode_positions(_reference_positions(variant), kind, variant)
    digest = hashlib.sha256(" ".join(channel.name for channel in kind.channels).encode())
    digest.update(planes.tobytes())
    digest.update(masks.tobytes())
    return digest.hexdigest()[:16]


def observation_version(kind: ObservationKind, variant: Variant) -> str:
    """A fingerprint of the planes of ``kind``: the SHA-256 (16 hex digits) of its channels' names and of its
    planes of a fixed set of positions of ``variant``. It changes exactly when the encoding does, so a dataset
    written with other planes than this code's is refused, whatever the version numbers say."""
    return _observation_version(kind.name, variant)


def _reference_positions(variant: Variant, games: int = 8) -> np.ndarray:
    """The positions of ``games`` games whose actions follow a fixed rule (no random generator, whose stream
    may change between numpy versions): the fingerprint's inputs."""
    states = []
    for game in range(games):
        state, ply = INITIAL_STATE, 0
        while not state.over:
            states.append(state)
            actions = legal_actions(variant, state)
            state = step(variant, state, actions[(5 * ply + 3 * game) % len(actions)])
            ply += 1
    return position_array(states)


def sample_versions(kind: ObservationKind, variant: Variant) -> dict[str, Any]:
    """The versions a dataset of ``kind`` observations under ``variant`` records, and a reader asks for."""
    observation = {"kind": kind.name, "channels": kind.num_channels, "version": observation_version(kind, variant)}
    return {"format": SAMPLES_FORMAT, "engine": engine_version(), "observation": observation}


def _check_versions(found: object, expected: dict[str, Any], where: str) -> None:
    """:class:`DatasetError`, one line naming each version that differs, unless ``found`` is ``expected``."""
    found = found if isinstance(found, dict) else {}
    differ = [
        f"{key} {json.dumps(found.get(key))} (this code: {json.dumps(value)})"
        for key, value in expected.items()
        if found.get(key) != value
    ]
    if differ:
        raise DatasetError(f"{where} was written with another {', '.join(differ)}: refused; write it again")


# ---------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------
class SampleWriter:
    """Writes samples (:class:`agents.sessions.Samples`, or their :meth:`~agents.sessions.Samples.arrays`) to the
    dataset folder ``folder``, ``shard_rows`` rows a shard, each shard published with the manifest that names it
    (see the module). A folder that holds a dataset is appended to, if its versions, variant and observation kind
    are this writer's (:class:`DatasetError` otherwise). Use it as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        folder: str | Path,
        observation: str | ObservationKind,
        variant: Variant,
        shard_rows: int = DEFAULT_SHARD_ROWS,
    ) -> None:
        if not (isinstance(shard_rows, int) and shard_rows >= 1):
            raise DatasetError(f"shard_rows must be an integer >= 1, got {shard_rows!r}")
        self.folder = output_folder(folder, "the dataset folder")
        self.kind = observation_kind(observation)
        self.variant = variant
        self.shard_rows = shard_rows
        self.fields = sample_fields(self.kind)
        self.manifest: dict[str, Any] = {
            "dataset": MANIFEST_KIND,
            "versions": sample_versions(self.kind, variant),
            "variant": variant.to_dict(),
            "fields": {name: {"dtype": dtype, "shape": list(shape)} for name, (dtype, shape) in self.fields.items()},
            "shards": [],
            "rows": 0,
        }
        if (self.folder / MANIFEST).exists():
            existing = SampleDataset(self.folder)  # checks its seal and versions
            if existing.manifest["variant"] != self.manifest["variant"]:
                raise DatasetError(f"{self.folder} holds samples of another rule variant: write them elsewhere")
            self.manifest = existing.manifest
        self._pending: list[dict[str, np.ndarray]] = []
        self._pending_rows = 0

    def write(self, samples: Samples | dict[str, np.ndarray]) -> None:
        """Add rows; every full shard is published at once."""
        arrays = samples.arrays() if isinstance(samples, Samples) else samples
        rows = _check_arrays(arrays, self.fields, "the samples written")
        if rows:
            self._pending.append(arrays)
            self._pending_rows += rows
        while self._pending_rows >= self.shard_rows:
            self._publish(self.shard_rows)

    def close(self) -> Path:
        """Publish the rows left (a last, smaller shard), and the manifest even with no rows; the folder."""
        if self._pending_rows or not (self.folder / MANIFEST).exists():
            self._publish(self._pending_rows)
        return self.folder

    def __enter__(self) -> SampleWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:  # a failed block publishes nothing more: what was published stays whole
            self.close()

    def _publish(self, rows: int) -> None:
        if rows:
            joined = {name: np.concatenate([part[name] for part in self._pending]) for name in self.fields}
            shard = {name: array[:rows] for name, array in joined.items()}
            rest = {name: array[rows:] for name, array in joined.items()}
            self._pending, self._pending_rows = ([rest] if len(rest["value"]) else []), len(rest["value"])
            name = f"shard-{len(self.manifest['shards']):05d}.npz"
            buffer = io.BytesIO()
            np.savez_compressed(buffer, **shard)  # type: ignore[arg-type]
            payload = buffer.getvalue()
            atomic_write_bytes(self.folder / name, payload)
            self.manifest["shards"].append(make_seal(SHARD_KIND, SAMPLES_FORMAT, payload, name=name, rows=rows))
            self.manifest["rows"] += rows
        write_sealed_json(self.folder / MANIFEST, self.manifest, MANIFEST_KIND, SAMPLES_FORMAT)


# ---------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------
class SampleDataset:
    """The self-play samples in the dataset folder ``folder``: its manifest read, proved and its versions checked
    against this code's (:class:`DatasetError` in one line otherwise)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        where = str(self.folder)
        try:
            self.manifest = read_sealed_json(self.folder / MANIFEST, MANIFEST_KIND, SAMPLES_FORMAT)
        except FileNotFoundError:
            raise DatasetError(f"no dataset at {where}: it has no {MANIFEST}") from None
        except (OSError, IntegrityError) as error:
            raise DatasetError(f"{where}: {error}") from None
        try:
            self.variant = Variant.make(**self.manifest["variant"])
            self.kind = observation_kind(self.manifest["versions"]["observation"]["kind"])
            self.shards: list[dict[str, Any]] = list(self.manifest["shards"])
        except (KeyError, TypeError, ValueError) as error:
            raise DatasetError(f"{where}: its manifest lacks or garbles {error}") from None
        _check_versions(self.manifest.get("versions"), sample_versions(self.kind, self.variant), where)
        self.fields = sample_fields(self.kind)

    @property
    def rows(self) -> int:
        """Samples in the dataset."""
        return sum(int(shard["rows"]) for shard in self.shards)

    def read_shard(self, index: int) -> dict[str, np.ndarray]:
        """Shard ``index``'s arrays, once its bytes match its seal and its arrays the fields."""
        seal = self.shards[index]
        where = f"{self.folder}: shard {index} ({seal.get('name')})"
        try:
            payload = (self.folder / str(seal["name"])).read_bytes()
            check_seal(seal, SHARD_KIND, SAMPLES_FORMAT, payload, where, rows=seal["rows"])
            with np.load(io.BytesIO(payload), allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, KeyError) as error:
            raise DatasetError(f"{where} cannot be read: {error}") from None
        except IntegrityError as error:
            raise DatasetError(str(error)) from None
        except (ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
            raise DatasetError(f"{where} is no .npz of plain arrays ({error})") from None
        if _check_arrays(arrays, self.fields, where) != seal["rows"]:
            raise DatasetError(f"{where} holds another number of rows than its seal says, {seal['rows']}")
        return arrays

    def validate(self) -> dict[str, int]:
        """Check every shard: its seal, its arrays, and its rows -- a legal action at least, policies that sum to 1
        over the legal actions and nowhere else, outcomes of +1, 0 or -1, root values within [-1, 1], and
        observations and legal masks equal to those the positions give now. :class:`DatasetError` names the first
        failure; returns the shards and rows checked."""
        for index in range(len(self.shards)):
            _check_rows(self.read_shard(index), self.kind, self.variant, f"{self.folder}: shard {index}")
        return {"shards": len(self.shards), "rows": self.rows}

    def minibatches(
        self,
        batch_size: int,
        fields: Sequence[str] | None = None,
        shuffle: bool = True,
        seed: int | np.random.Generator | None = None,
        drop_last: bool = False,
    ) -> Iterator[dict[str, np.ndarray]]:
        """Minibatches of ``batch_size`` rows (``fields``: those fields alone), one shard in memory at a time (plus
        the rows left from the last): with ``shuffle``, the shards in a random order and the rows of each shuffled
        with those left over. The last, smaller batch comes too unless ``drop_last``."""
        names = list(self.fields if fields is None else fields)
        unknown = [name for name in names if name not in self.fields]
        if unknown or not (isinstance(batch_size, int) and batch_size >= 1):
            raise DatasetError(f"minibatches of {batch_size!r} rows of {names}: the fields are {list(self.fields)}")
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(self.shards)) if shuffle else np.arange(len(self.shards))
        left = {name: np.zeros((0, *self.fields[name][1]), self.fields[name][0]) for name in names}
        for index in order:
            shard = self.read_shard(int(index))
            arrays = {name: np.concatenate([left[name], shard[name]]) for name in names}
            count = len(arrays[names[0]])
            rows = rng.permutation(count) if shuffle else np.arange(count)
            whole = count - count % batch_size
            for start in range(0, whole, batch_size):
                yield {name: array[rows[start : start + batch_size]] for name, array in arrays.items()}
            left = {name: array[rows[whole:]] for name, array in arrays.items()}
        if len(left[names[0]]) and not drop_last:
            yield left


def _check_arrays(arrays: dict[str, np.ndarray], fields: dict[str, tuple[str, tuple[int, ...]]], where: str) -> int:
    """The rows of ``arrays`` once they are exactly ``fields``, with their dtypes and row shapes and one count of
    rows; :class:`DatasetError` naming ``where`` otherwise."""
    if sorted(arrays) != sorted(fields):
        raise DatasetError(f"{where} has the arrays {sorted(arrays)}; a dataset's are {sorted(fields)}")
    rows = len(arrays["value"])
    for name, (dtype, shape) in fields.items():
        array = arrays[name]
        if array.dtype.str != dtype or array.shape != (rows, *shape):
            raise DatasetError(f"{where}: {name} is {array.dtype.str} {array.shape}; expected {dtype} {(rows, *shape)}")
    return rows


def _check_rows(arrays: dict[str, np.ndarray], kind: ObservationKind, variant: Variant, where: str) -> None:
    """What a shard's rows must say (:meth:`SampleDataset.validate`); :class:`DatasetError` for the first row that
    does not."""
    legal, policy = arrays["legal"], arrays["policy"]
    planes, masks = encode_positions(arrays["positions"], kind, variant)
    checks = (
        ("has no legal action", ~legal.any(1)),
        ("has a policy below 0 or outside its legal actions", ((policy < 0) | (policy != 0) & ~legal).any(1)),
        ("has a policy that does not sum to 1", np.abs(policy.sum(1) - 1) > VALUE_TOLERANCE),
        ("has a value other than +1, 0 or -1", ~np.isin(arrays["value"], (-1.0, 0.0, 1.0))),
        ("has a root value outside [-1, 1]", ~(np.abs(arrays["root_value"]) <= 1)),
        ("has other observations than its position gives", (planes != arrays["observations"]).any((1, 2))),
        ("has other legal actions than its position gives", (masks != legal).any(1)),
    )
    for problem, bad in checks:
        rows = np.flatnonzero(bad)
        if len(rows):
            raise DatasetError(f"{where}: row {int(rows[0])} {problem}")
