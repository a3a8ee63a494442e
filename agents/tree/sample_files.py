"""Self-play samples as a dataset: versioned, sharded files, published atomically, read back as minibatches.

A dataset is a folder::

    DIR/manifest.json      what the rows are, their versions and fields, and one seal per shard
    DIR/shard-00000.npz    rows of every field: an .npz of plain arrays (np.load(..., allow_pickle=False))
    DIR/shard-00001.npz    ...

The manifest is a sealed JSON object (:mod:`agents.storage.integrity`: its kind, format and SHA-256): ``versions``
(``format``, the layout's version :data:`SAMPLES_FORMAT`; ``engine``, the package's version; ``observation``,
the planes' kind, channels and :func:`observation_version`), the rule ``variant``, the ``fields`` (each one's
dtype and the shape of one row) and ``shards``, each a seal of its file (name, rows, bytes, SHA-256).

- **Writing** (:class:`SampleWriter`): one writer a folder, under the lock every writer of this project takes
  (:func:`agents.storage.files.hold_lock`): a second writer, in another process or in this one, is refused in one line
  naming the first. Rows gather until a shard is full (or :meth:`SampleWriter.close`); the shard is written whole
  (an atomic write: a temporary file, then one rename), then the manifest that names it replaces the last one
  (another). A reader sees the dataset as of one manifest, never half a shard; a writer killed in between leaves
  a shard no manifest names, which the next writer overwrites, and temporary files, which it removes. A writer
  given a folder with a dataset appends to it, if the dataset's whole header is the writer's: format, engine,
  observation kind, channels and version, variant and fields (:class:`quarto_env.errors.DatasetError` otherwise).
- **Reading** (:class:`SampleDataset`): opening reads the manifest and refuses, in one line, a dataset of another
  format, engine or observation version, or whose manifest, sealed or not, is not the structure a writer makes
  (:class:`quarto_env.errors.DatasetError`, as for every failure here); :meth:`SampleDataset.minibatches` streams
  shuffled minibatches a shard at a time, each shard checked against its seal as it is read;
  :meth:`SampleDataset.validate` checks every shard deeply: its seal, its arrays' names, dtypes and shapes, and
  what the rows say (legal masks, policies, values, observations re-encoded from the positions).
- **Files refused unread**: a manifest or shard that is not a regular file (a named pipe would block the reader,
  a device such as ``/dev/zero`` never end), a link out of the folder, or a file over its bound
  (:data:`MAX_MANIFEST_BYTES`; a shard: the bytes its seal names, at most :data:`MAX_SHARD_BYTES`). A damaged
  ``.npz`` is one line (:func:`read_npz`), whatever byte is wrong.

The fields (``n`` rows; :class:`agents.tree.selfplay.Samples`):

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
(:mod:`experiments.training.dataset`, which reads it with :func:`read_npz` too); their rows could be shards of this
container under another schema.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import math
import os
import stat
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import quarto_env
from agents.storage.files import (
    InUseError,
    OutputPathError,
    atomic_write_bytes,
    hold_lock,
    named_path,
    output_folder,
    read_file_bytes,
    remove_orphan_temporaries,
)
from agents.storage.integrity import (
    ARCHIVE_DAMAGE,
    IntegrityError,
    check_seal,
    make_seal,
    unsealed_json,
    write_sealed_json,
)
from agents.tree.puct import encode_positions
from agents.tree.selfplay import Samples
from quarto_env.core import (
    INITIAL_STATE,
    NUM_ACTIONS,
    NUM_FIELDS,
    Variant,
    checked_variant,
    legal_actions,
    position_array,
    step,
)
from quarto_env.errors import CallOrderError, DatasetError
from quarto_env.observation import ObservationKind, observation_kind

SAMPLES_FORMAT = 1
"""The version of the dataset's layout (the manifest's fields and the shards' arrays)."""
MANIFEST = "manifest.json"
MANIFEST_KIND = "self-play samples"
SHARD_KIND = "self-play samples shard"
LOCK_FILE = ".lock"
"""The file in the folder that its writer keeps locked (:func:`agents.storage.files.hold_lock`)."""
DEFAULT_SHARD_ROWS = 65_536
MAX_SHARD_ROWS = 1 << 20
"""The most rows a shard: its arrays are under :data:`MAX_SHARD_BYTES` uncompressed, with the widest planes."""
MAX_SHARD_BYTES = 1 << 30
"""The most bytes a shard's seal may name (a shard file is refused unread unless it is its seal's size)."""
MAX_MANIFEST_BYTES = 1 << 26
"""The most bytes of a manifest: about 300,000 shards."""
POLICY_SUM_TOLERANCE = 1e-4
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


def _field_table(kind: ObservationKind) -> dict[str, dict[str, Any]]:
    """The manifest's ``fields``: each field's dtype and row shape, for observations of ``kind``."""
    return {name: {"dtype": dtype, "shape": list(shape)} for name, (dtype, shape) in sample_fields(kind).items()}


def shard_name(index: int) -> str:
    """The file of shard ``index``: ``shard-00003.npz``."""
    return f"shard-{index:05d}.npz"


# ---------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------
class SampleWriter:
    """Writes samples (:class:`agents.tree.selfplay.Samples`, or their :meth:`~agents.tree.selfplay.Samples.arrays`) to
    the dataset folder ``folder``, ``shard_rows`` rows a shard, each shard published with the manifest that names it
    (see the module). It holds the folder's lock from its creation to :meth:`close`: a second writer of the folder
    is refused meanwhile (:class:`DatasetError` naming the first). A folder that holds a dataset is appended to, if
    its whole header -- format, engine, observation kind, channels and version, variant and fields -- is this
    writer's (:class:`DatasetError` naming what differs otherwise). Use it as a context manager, or call
    :meth:`close`."""

    def __init__(
        self,
        folder: str | Path,
        observation: str | ObservationKind,
        variant: Variant | Mapping[str, Any] | None,
        shard_rows: int = DEFAULT_SHARD_ROWS,
    ) -> None:
        if not (isinstance(shard_rows, int) and 1 <= shard_rows <= MAX_SHARD_ROWS):
            raise DatasetError(f"shard_rows must be an integer from 1 to {MAX_SHARD_ROWS:,}, got {shard_rows!r}")
        self.kind = observation_kind(observation)
        variant = checked_variant(variant)  # as a session takes it: a Variant, a mapping of its flags, or None
        try:
            self.folder = output_folder(folder, "the dataset folder")
        except OutputPathError as error:
            raise DatasetError(str(error)) from None
        self.variant = variant
        self.shard_rows = shard_rows
        self.fields = sample_fields(self.kind)
        self.manifest: dict[str, Any] = {
            "dataset": MANIFEST_KIND,
            "versions": sample_versions(self.kind, variant),
            "variant": variant.to_dict(),
            "fields": _field_table(self.kind),
            "shards": [],
            "rows": 0,
        }
        self._pending: list[dict[str, np.ndarray]] = []
        self._pending_rows = 0
        self._lock: contextlib.ExitStack | None = contextlib.ExitStack()
        self._lock.enter_context(_writers_lock(self.folder))
        try:
            remove_orphan_temporaries(self.folder)  # a killed writer's; no other writes here while we hold the lock
            if os.path.lexists(self.folder / MANIFEST):
                self.manifest = self._appended_manifest()
        except BaseException:
            self._release()
            raise

    def _appended_manifest(self) -> dict[str, Any]:
        """The manifest of the dataset in the folder, once its whole header is this writer's."""
        existing = SampleDataset(self.folder)  # its seal, structure and versions checked
        differ = _header_differences(existing.manifest, self.manifest)
        if differ:
            raise DatasetError(
                f"{self.folder} holds samples of {differ}: append only samples of the same header, or write these "
                "to another folder"
            )
        return existing.manifest

    def write(self, samples: Samples | dict[str, np.ndarray]) -> None:
        """Add rows; every full shard is published at once."""
        self._check_open()
        arrays = samples.arrays() if isinstance(samples, Samples) else samples
        rows = _check_arrays(arrays, self.fields, "the samples written")
        if rows:
            self._pending.append(arrays)
            self._pending_rows += rows
        while self._pending_rows >= self.shard_rows:
            self._publish(self.shard_rows)

    def close(self) -> Path:
        """Publish the rows left (a last, smaller shard), and the manifest even with no rows, then let the folder
        go (its lock); the folder. Closing a closed writer does nothing."""
        if self._lock is None:
            return self.folder
        try:
            if self._pending_rows or not (self.folder / MANIFEST).exists():
                self._publish(self._pending_rows)
        finally:
            self._release()
        return self.folder

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _check_open(self) -> None:
        if self._lock is None:
            raise CallOrderError(f"the writer of {self.folder} is closed: make a new SampleWriter to append")

    def __enter__(self) -> SampleWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:  # a failed block publishes nothing more: what was published stays whole
            self._release()

    def _publish(self, rows: int) -> None:
        if rows:
            joined = {name: np.concatenate([part[name] for part in self._pending]) for name in self.fields}
            shard = {name: array[:rows] for name, array in joined.items()}
            rest = {name: array[rows:] for name, array in joined.items()}
            self._pending, self._pending_rows = ([rest] if len(rest["value"]) else []), len(rest["value"])
            name = shard_name(len(self.manifest["shards"]))
            buffer = io.BytesIO()
            np.savez_compressed(buffer, **shard)  # type: ignore[arg-type]
            payload = buffer.getvalue()
            atomic_write_bytes(self.folder / name, payload)
            self.manifest["shards"].append(make_seal(SHARD_KIND, SAMPLES_FORMAT, payload, name=name, rows=rows))
            self.manifest["rows"] += rows
        write_sealed_json(self.folder / MANIFEST, self.manifest, MANIFEST_KIND, SAMPLES_FORMAT)


@contextlib.contextmanager
def _writers_lock(folder: Path) -> Iterator[None]:
    """The folder's lock (:data:`LOCK_FILE`), held by one writer at a time; :class:`DatasetError` naming the
    holder otherwise."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(hold_lock(folder / LOCK_FILE, f"the dataset folder {str(folder)!r}"))
        except (InUseError, OutputPathError) as error:
            raise DatasetError(str(error)) from None
        yield


def _header_differences(found: dict[str, Any], mine: dict[str, Any]) -> str:
    """What differs between two manifests' headers, in words (empty if nothing): the format, engine, observation
    kind and variant that differ; only if none does, the facts that follow from them (:data:`_DERIVED`)."""
    ours, theirs = _header_facts(found), _header_facts(mine)
    differ = [what for what in ours if ours[what] != theirs[what]]
    shown = [what for what in differ if what not in _DERIVED] or differ
    return "; ".join(f"{what} {ours[what]}, not this writer's {theirs[what]}" for what in shown)


_DERIVED = ("observation version", "fields")
"""Facts of a header that follow from others: the observation's version from its kind and the variant, the
fields from the kind."""


def _header_facts(manifest: dict[str, Any]) -> dict[str, str]:
    """The header of ``manifest`` (checked by :class:`SampleDataset`) in words: what an appended shard must share,
    the facts that follow from others last."""
    versions, observation = manifest["versions"], manifest["versions"]["observation"]
    fields = ", ".join(f"{name} {field['dtype']} {tuple(field['shape'])}" for name, field in manifest["fields"].items())
    return {
        "format": str(versions["format"]),
        "engine": str(versions["engine"]),
        "observation": f"{observation['kind']} ({observation['channels']} channels)",
        "variant": Variant.make(**manifest["variant"]).describe(),
        "observation version": str(observation["version"]),
        "fields": f"[{fields}]",
    }


# ---------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------
class SampleDataset:
    """The self-play samples in the dataset folder ``folder``: its manifest read (a regular file in the folder,
    within :data:`MAX_MANIFEST_BYTES`), proved by its seal, its structure checked as a writer makes it, and its
    versions checked against this code's (:class:`DatasetError` in one line otherwise)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = named_path(folder, "the dataset folder", DatasetError)
        where = str(self.folder)
        if not os.path.lexists(self.folder / MANIFEST):
            raise DatasetError(f"no dataset at {where}: it has no {MANIFEST}")
        payload = _member_bytes(self.folder, MANIFEST, "the manifest", MAX_MANIFEST_BYTES)
        try:
            self.manifest = unsealed_json(json.loads(payload), MANIFEST_KIND, SAMPLES_FORMAT, f"{where}/{MANIFEST}")
        except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, nested too deep
            if isinstance(error, IntegrityError):
                raise DatasetError(f"{where}: {error}") from None
            raise DatasetError(f"{where}: {MANIFEST} is not JSON: damaged, or no dataset's") from None
        try:
            self.variant = Variant.make(**self.manifest["variant"])
            self.kind = observation_kind(self.manifest["versions"]["observation"]["kind"])
        except (KeyError, TypeError, ValueError) as error:
            raise DatasetError(f"{where}: its manifest lacks or garbles {_shortened(error)}") from None
        _check_versions(self.manifest.get("versions"), sample_versions(self.kind, self.variant), where)
        _check_structure(self.manifest, self.kind, where)
        self.fields = sample_fields(self.kind)
        self.shards: list[dict[str, Any]] = list(self.manifest["shards"])

    @property
    def rows(self) -> int:
        """Samples in the dataset."""
        return sum(int(shard["rows"]) for shard in self.shards)

    def read_shard(self, index: int) -> dict[str, np.ndarray]:
        """Shard ``index``'s arrays, once its bytes match its seal and its arrays the fields."""
        seal = self.shards[index]
        where = f"{self.folder}: shard {index} ({seal['name']})"
        payload = _member_bytes(self.folder, seal["name"], f"shard {index}", seal["bytes"], exact=True)
        try:
            check_seal(seal, SHARD_KIND, SAMPLES_FORMAT, payload, where, rows=seal["rows"])
        except IntegrityError as error:
            raise DatasetError(str(error)) from None
        arrays = read_npz(payload, where, _arrays_bytes(self.fields, seal["rows"]))
        if _check_arrays(arrays, self.fields, where) != seal["rows"]:
            raise DatasetError(f"{where} holds another number of rows than its seal says, {seal['rows']}")
        return arrays

    def validate(self) -> dict[str, int]:
        """Check every shard: first that each is a regular file in the folder of its seal's size (before any is
        read), then its seal, its arrays, and its rows -- a legal action at least, policies that sum to 1 over the
        legal actions and nowhere else, outcomes of +1, 0 or -1, root values within [-1, 1], and observations and
        legal masks equal to those the positions give now. :class:`DatasetError` names the first failure; returns
        the shards and rows checked."""
        for index, seal in enumerate(self.shards):
            _member_path(self.folder, seal["name"], f"shard {index}", seal["bytes"], exact=True)
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


# ---------------------------------------------------------------------------------------------------------
# Checks before reading: the files, the manifest's structure
# ---------------------------------------------------------------------------------------------------------
def _member_path(folder: Path, name: str, what: str, size: int, exact: bool = False) -> Path:
    """``folder / name`` once it is a file to read, by its metadata alone: :class:`DatasetError` naming ``what`` if
    it is missing, a link out of ``folder``, not a regular file (a named pipe would block the reader, a device
    never end), or over ``size`` bytes (with ``exact``, of another size than ``size``, its seal's)."""
    path, where = folder / name, f"{folder}: {what} ({name})"
    real, inside = os.path.realpath(path), os.path.realpath(folder)
    if os.path.commonpath([real, inside]) != inside:
        raise DatasetError(f"{where} is a link out of the folder, to {real!r}: refused unread")
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise DatasetError(f"{where} is missing") from None
    except OSError as error:
        raise DatasetError(f"{where} cannot be read: {error.strerror or error}") from None
    if not stat.S_ISREG(status.st_mode):
        raise DatasetError(f"{where} is not a regular file (a folder, a named pipe or a device): refused unread")
    if exact and status.st_size != size:
        raise DatasetError(f"{where} holds {status.st_size:,} bytes, not the {size:,} of its seal: refused unread")
    if status.st_size > size:
        raise DatasetError(f"{where} holds {status.st_size:,} bytes, more than the {size:,} it may: refused unread")
    return path


def _member_bytes(folder: Path, name: str, what: str, size: int, exact: bool = False) -> bytes:
    """The bytes of ``folder / name``, once :func:`_member_path` passes; read without waiting on a pipe and
    within ``size`` bytes even if the file changes meanwhile."""
    path = _member_path(folder, name, what, size, exact)
    return read_file_bytes(path, f"{folder}: {what}", size, DatasetError)


def _check_structure(manifest: dict[str, Any], kind: ObservationKind, where: str) -> None:
    """:class:`DatasetError` unless ``manifest`` (its seal proved) is what a writer makes: a seal may be made
    afresh over anything, so a reader trusts no field it has not checked."""
    problem = _structure_problem(manifest, kind)
    if problem:
        raise DatasetError(f"{where}: its manifest is sealed but malformed: {problem}")


def _structure_problem(manifest: dict[str, Any], kind: ObservationKind) -> str | None:
    if manifest.get("dataset") != MANIFEST_KIND:
        return f"its dataset is {_shown(manifest.get('dataset'))}, not {json.dumps(MANIFEST_KIND)}"
    if manifest.get("fields") != _field_table(kind):
        return f"its fields are not those of samples of {kind.name} planes"
    shards = manifest.get("shards")
    if not isinstance(shards, list):
        return f"its shards are {_shown(shards)}, not a list of shard seals"
    for index, seal in enumerate(shards):
        if not isinstance(seal, dict) or seal.get("name") != shard_name(index):
            return f"shard {index} is {_shown(seal)}, not the seal of {shard_name(index)}"
        for key, most in (("rows", MAX_SHARD_ROWS), ("bytes", MAX_SHARD_BYTES)):
            value = seal.get(key)
            if type(value) is not int or not 1 <= value <= most:
                return f"shard {index} has {_shown(value)} {key}, not an integer from 1 to {most:,}"
    total = sum(seal["rows"] for seal in shards)
    if manifest.get("rows") != total:
        return f"its rows are {_shown(manifest.get('rows'))}, where its shards hold {total:,}"
    return None


def _shown(value: object) -> str:
    """``value`` as JSON, cut to 60 characters: a message's quote of whatever a file holds."""
    return _shortened(json.dumps(value, default=repr))


def _shortened(text: object) -> str:
    text = str(text)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------------------------------------
# .npz files, read strictly
# ---------------------------------------------------------------------------------------------------------


def read_npz(payload: bytes, where: str, most_bytes: int) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` file ``payload``, read strictly, without pickle and without numpy's advice:
    every entry an ``.npy`` array of plain values (no Python objects), whose header's dtype and shape match its
    bytes exactly, and whose sizes sum to at most ``most_bytes``, checked before any entry is unpacked. Anything
    else -- a damaged or altered archive, whatever byte of it -- is :class:`DatasetError`, one line naming
    ``where``. For datasets of this module and of ``quarto dataset``, and any ``.npz`` that may be damaged."""
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            entries = archive.infolist()
            names = [entry.filename for entry in entries]
            if len(set(names)) != len(names) or not all(name.endswith(".npy") for name in names):
                raise DatasetError(f"{where} is no .npz of arrays: its entries are {_shown(names)}")
            declared = sum(entry.file_size for entry in entries)
            if declared > most_bytes:
                raise DatasetError(f"{where} declares {declared:,} bytes of arrays, more than {most_bytes:,}: refused")
            return {entry.filename[: -len(".npy")]: _npy_array(archive.read(entry), where) for entry in entries}
    except DatasetError:
        raise
    except ARCHIVE_DAMAGE as error:
        reason = _shortened(str(error).splitlines()[0] if str(error) else type(error).__name__)
        raise DatasetError(f"{where} is damaged: no .npz of plain arrays ({reason})") from None


def _npy_array(data: bytes, where: str) -> np.ndarray:
    """The array of the ``.npy`` bytes ``data``: its header read by numpy's own parser, its bytes taken only when
    they are exactly the header's dtype and shape (numpy would allocate the header's size first, whatever it says)."""
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    else:
        raise ValueError(f"an .npy version {version} this code does not read")
    if dtype.hasobject:
        raise DatasetError(f"{where} holds Python objects, not plain arrays: refused (reading them would need pickle)")
    count, offset = math.prod(shape), stream.tell()
    if dtype.itemsize == 0 or count * dtype.itemsize != len(data) - offset:
        raise ValueError(f"an array header ({dtype.str} {shape}) that its bytes do not fill")
    array = np.frombuffer(data, dtype=dtype, count=count, offset=offset) if count else np.empty(0, dtype)
    return array.reshape(shape, order="F" if fortran else "C").copy()


def _arrays_bytes(fields: dict[str, tuple[str, tuple[int, ...]]], rows: int) -> int:
    """The bytes of ``rows`` rows of ``fields`` as ``.npy`` entries: their data, and a bound on each header."""
    return sum(rows * np.dtype(dtype).itemsize * math.prod(shape) + 4096 for dtype, shape in fields.values())


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
        ("has a policy that does not sum to 1", np.abs(policy.sum(1) - 1) > POLICY_SUM_TOLERANCE),
        ("has an outcome other than +1, 0 or -1", ~np.isin(arrays["value"], (-1.0, 0.0, 1.0))),
        ("has a root value outside [-1, 1]", ~(np.abs(arrays["root_value"]) <= 1)),
        ("has other observations than its position gives", (planes != arrays["observations"]).any((1, 2))),
        ("has other legal actions than its position gives", (masks != legal).any(1)),
    )
    for problem, bad in checks:
        rows = np.flatnonzero(bad)
        if len(rows):
            raise DatasetError(f"{where}: row {int(rows[0])} {problem}")
