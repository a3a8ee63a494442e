"""The project's checkpoint format, one for every training algorithm (MaskablePPO, AlphaZero, RLlib's PPO).

A checkpoint is a ``.zip`` with one entry every algorithm shares, ``quarto.json``: the metadata (format,
``algorithm``, rule variant, observation kind, ``env_kwargs`` -- the keyword arguments of ``quarto_env.env``
that rebuild its rules and observation --, learner steps, the training config, library versions and, when
``quarto train`` wrote it, the code's version: ``versions["code"]``, the commit and whether tracked files
differed from it, which :func:`recording_code_version` hands down; older checkpoints lack it and load the
same). Its other entries are the algorithm's weights, each written with ``torch.save`` and read back by
:func:`read_weights` with ``weights_only=True``. A MaskablePPO checkpoint is stable-baselines3's own zip with
``quarto.json`` added (:mod:`agents.ppo`); the others are written whole by :func:`write_checkpoint`. Every
write is atomic (a temporary file, then ``os.replace``), so a run killed mid-write never leaves a torn file.

Since format 3 a checkpoint is sealed (:mod:`agents.storage.integrity`): its last entry, ``seal.json``, holds the
SHA-256 of every other entry, and every reader checks them before it uses any (:func:`read_metadata`), so an entry
damaged or altered after the write -- even into well-formed data -- is refused as surely as a truncated file
(:class:`DamagedCheckpointError`; ``quarto train --resume`` then goes on from the newest intact checkpoint).
Checkpoints of formats 1 and 2, written before, have no seal: they load as before, checked by their zip CRCs.

Checkpoints are device-free: their tensors are saved from CPU copies (:func:`saved_bytes`) and read onto the CPU,
whatever device the network trained on; the loaders then move the network to the device asked for
(:func:`agents.networks.policy_value.resolve_device`).

A run folder (or its ``checkpoints/`` folder) stands for one of its checkpoints, the same for every agent kind
(:func:`checkpoint_path`): its ``final.zip``, or ``latest.zip`` while it trains; another by name
(``checkpoint=best``: the network of the best evaluation score, ``latest``, ``step_N``). The file taken is said
in one line on stderr.

Checkpoints are read as data by every command of this project, never unpickled. Every failure is a
:class:`CheckpointError` naming the file and the problem: missing, corrupt or truncated, an entry that is not
plain weights, a format this version does not read (it reads formats 1 and 2), another algorithm's
checkpoint (naming the agent kind that plays it), or a different rule variant; a checkpoint that is damaged
(truncated, corrupt, or its entries not those its seal proves) is a :class:`DamagedCheckpointError`.

This module needs torch (to read weights) but no RL library: loading an ``az:`` or ``rllib:`` checkpoint does
not import stable-baselines3 or ray.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import io
import json
import multiprocessing
import pickle
import platform
import re
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

import torch as th

from agents.storage.files import atomic_write_bytes, input_file
from agents.storage.integrity import (
    ARCHIVE_DAMAGE,
    SEAL_ENTRY,
    IntegrityError,
    archive_seal,
    check_archive,
    is_sealed,
)
from quarto_env.checks import checked_number, one_line
from quarto_env.core import Variant
from quarto_env.errors import CheckpointError, DamagedCheckpointError, QuartoValueError
from quarto_env.observation import observation_kind

CHECKPOINT_FORMAT = 3
"""The format :func:`save_checkpoint` writes: sealed (``seal.json``, :mod:`agents.storage.integrity`). Formats 1 (which
had no ``env_kwargs``) and 2 (no seal) are read too."""


READABLE_FORMATS = (1, 2, CHECKPOINT_FORMAT)
SEALED_FORMATS = (CHECKPOINT_FORMAT,)
"""The formats whose checkpoints carry a seal: one of these without it is damaged."""


METADATA_ENTRY = "quarto.json"


AGENT_KINDS_OF_ALGORITHMS = {"ppo": "ppo", "alphazero": "az", "rllib-ppo": "rllib"}
"""The agent kind that plays a checkpoint of each training algorithm (``algorithm`` in ``quarto.json``)."""


def check_algorithm(path: str | Path, metadata: dict[str, Any], expected: str) -> None:
    """Refuse a checkpoint of another training algorithm than ``expected``, naming the agent kind that plays it
    (checkpoints written before the ``algorithm`` entry are ``ppo``)."""
    found = metadata.get("algorithm", "ppo")
    if found != expected:
        kind = AGENT_KINDS_OF_ALGORITHMS.get(str(found))
        hint = f": play it with {kind}:PATH" if kind else ""
        raise CheckpointError(f"checkpoint {str(path)!r} holds a {found} network, not a {expected} one{hint}")


DEFAULT_BACKEND = "torch"
"""The backend of a checkpoint that names none in its ``quarto.json``: every one written before ``backend: jax``."""
BACKEND_READERS = {"torch": "the torch backend", "jax": "backend jax (the jax extra)"}
"""What reads the networks of each backend's checkpoints."""


def checkpoint_backend(metadata: dict[str, Any]) -> str:
    """The framework whose network a checkpoint holds: ``jax`` when its ``quarto.json`` says ``backend: jax``,
    else :data:`DEFAULT_BACKEND` (the torch networks of every other backend: ``sb3``, ``rllib``, ``torch``, or
    none recorded)."""
    return "jax" if metadata.get("backend") == "jax" else DEFAULT_BACKEND


def check_backend(path: str | Path, metadata: dict[str, Any], expected: str) -> None:
    """Refuse, in one line, a checkpoint whose network is another framework's than ``expected`` (a JAX network
    loaded by the torch backend, or the reverse): ``az:PATH`` plays either, only its own backend resumes it."""
    found = checkpoint_backend(metadata)
    if found != expected:
        reader = BACKEND_READERS.get(found, f"backend {found}")
        raise CheckpointError(
            f"checkpoint {str(path)!r} holds a {found} network, not a {expected} one: {reader} resumes it "
            "(az:PATH plays either)"
        )


_code_version: dict[str, Any] | None = None
"""What :func:`recording_code_version` is recording now, if anything."""


@contextlib.contextmanager
def recording_code_version(version: dict[str, Any]) -> Iterator[None]:
    """Within the block, every checkpoint this process writes records ``version`` as ``versions["code"]`` in its
    ``quarto.json``. ``quarto train`` holds it around a run with the ``experiments.run_folder.code_version`` of
    its start (the code a process runs is the code it imported); this floor cannot look it up itself."""
    global _code_version
    outer, _code_version = _code_version, dict(version)
    try:
        yield
    finally:
        _code_version = outer


def library_versions() -> dict[str, Any]:
    """Versions of the libraries a checkpoint depends on, and the code's (:func:`recording_code_version`)."""
    versions: dict[str, Any] = {"python": platform.python_version()}
    for name in ("quarto-env", "torch", "stable_baselines3", "sb3_contrib", "numpy", "gymnasium"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "unknown"
    if _code_version is not None:
        versions["code"] = dict(_code_version)
    return versions


def env_kwargs_for(variant: Variant, observation: str) -> dict[str, Any]:
    """The keyword arguments of ``quarto_env.env`` that play ``variant`` with ``observation`` planes."""
    return {**variant.to_dict(), "observation": observation}


@dataclasses.dataclass(frozen=True)
class CheckpointHeader:
    """What the metadata of every checkpoint begins with, whatever wrote it: the rules the network was trained
    for, the observation kind it reads and the learner steps it has."""

    variant: Variant
    observation: str
    steps: int

    def fields(self) -> dict[str, Any]:
        """The header as metadata entries: ``num_timesteps``, ``variant``, ``observation`` and ``env_kwargs``."""
        return {
            "num_timesteps": int(self.steps),
            "variant": self.variant.to_dict(),
            "observation": self.observation,
            "env_kwargs": env_kwargs_for(self.variant, self.observation),
        }


def write_checkpoint(
    path: str | Path, algorithm: str, header: CheckpointHeader, metadata: dict[str, Any], entries: dict[str, Any]
) -> None:
    """Write a checkpoint of the project's own format (the ``az`` and ``rllib`` ones) atomically to the zip
    ``path``: :data:`METADATA_ENTRY` (format, ``algorithm``, steps, rules, observation, ``env_kwargs``, library
    versions, then ``metadata``) and ``entries``, each ``bytes`` as they are or tensors and plain data saved
    with ``torch.save`` (:func:`read_weights` reads them back as data)."""
    full = {
        "format": CHECKPOINT_FORMAT,
        "algorithm": algorithm,
        **header.fields(),
        "versions": library_versions(),
        **metadata,
    }
    data = {name: entry if isinstance(entry, bytes) else saved_bytes(entry) for name, entry in entries.items()}
    metadata_entry = json.dumps(full, indent=2, default=str).encode()
    atomic_write_bytes(Path(path), checkpoint_bytes({METADATA_ENTRY: metadata_entry, **data}))


def checkpoint_bytes(entries: dict[str, bytes]) -> bytes:
    """The zip of ``entries``, in their order, sealed: its last entry the checksums of the others
    (:func:`agents.storage.integrity.archive_seal`; a seal among ``entries`` is replaced)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            if name != SEAL_ENTRY:
                archive.writestr(name, data)
        archive.writestr(SEAL_ENTRY, archive_seal(entries))
    return buffer.getvalue()


def saved_bytes(obj: Any) -> bytes:
    """``obj`` (tensors, numbers, strings and containers of them) as ``torch.save`` writes it, every tensor
    copied to the CPU first: a checkpoint never names the device it was trained on."""
    buffer = io.BytesIO()
    th.save(on_cpu(obj), buffer)
    return buffer.getvalue()


def on_cpu(obj: Any) -> Any:
    """``obj`` with every tensor in it (in dicts, lists and tuples too) on the CPU."""
    if isinstance(obj, th.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        copy = type(obj)((key, on_cpu(value)) for key, value in obj.items())
        if hasattr(obj, "_metadata"):  # a module's state_dict: the layers' versions, which loading reads
            copy._metadata = obj._metadata  # type: ignore[attr-defined]
        return copy
    if isinstance(obj, list | tuple):
        return type(obj)(on_cpu(value) for value in obj)
    return obj


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of the checkpoint at ``path``, with ``env_kwargs`` derived from its variant and observation
    (so that they always agree), once every entry is proved whole (its seal, or for formats 1 and 2 the zip's
    CRCs); :class:`CheckpointError` if it is missing, of another format, or its ``quarto.json`` is not a mapping
    with a valid variant, observation kind and step count, :class:`DamagedCheckpointError` if it is corrupt,
    truncated or altered."""
    path = input_file(path, "checkpoint", CheckpointError)
    metadata, sealed = _read_metadata_entry(path)
    if not isinstance(metadata, dict):
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {METADATA_ENTRY} holds {type(metadata).__name__} data, not a mapping of fields"
        )
    found = metadata.get("format")
    if isinstance(found, bool) or found not in READABLE_FORMATS:
        readable = f"{', '.join(map(str, READABLE_FORMATS[:-1]))} and {READABLE_FORMATS[-1]}"
        raise CheckpointError(f"checkpoint {str(path)!r} has format {found!r}; this version reads formats {readable}")
    if found in SEALED_FORMATS and not sealed:
        raise DamagedCheckpointError(
            f"checkpoint {str(path)!r} has no {SEAL_ENTRY}, which format {found} writes: its entries were changed "
            "after it was written"
        )
    missing = [key for key in ("variant", "observation", "num_timesteps") if key not in metadata]
    if missing or not isinstance(metadata["variant"], dict):
        problem = f"it lacks {', '.join(missing)}" if missing else f"variant {metadata['variant']!r} is no mapping"
        raise CheckpointError(f"checkpoint {str(path)!r} has invalid metadata in {METADATA_ENTRY}: {problem}")
    try:
        variant = Variant.make(**metadata["variant"])
        observation = observation_kind(metadata["observation"]).name
        checked_number(metadata["num_timesteps"], "num_timesteps", minimum=0, integer=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has invalid metadata in {METADATA_ENTRY}: {one_line(exc)}"
        ) from exc
    metadata["env_kwargs"] = env_kwargs_for(variant, observation)  # format 1 did not store them
    return metadata


def _read_metadata_entry(path: Path) -> tuple[Any, bool]:
    """The parsed JSON of the checkpoint's ``quarto.json``, whatever its shape, once every entry is proved whole
    (by the seal, or the CRCs of an archive without one); and whether the archive is sealed."""
    where = f"checkpoint {str(path)!r}"
    try:
        with zipfile.ZipFile(path) as archive:
            # A truncated checkpoint can still look like a zip: the torch archive inside it has a directory too.
            if METADATA_ENTRY not in archive.namelist():
                raise DamagedCheckpointError(
                    f"{where} is corrupt or truncated, or was not written by quarto train: it has no {METADATA_ENTRY}"
                )
            sealed = is_sealed(archive)
            if sealed:
                check_archive(archive, where)
            elif (damaged := archive.testzip()) is not None:
                raise DamagedCheckpointError(f"{where} is corrupt or truncated: entry {damaged} is damaged")
            text = archive.read(METADATA_ENTRY)
    except IntegrityError as exc:
        raise DamagedCheckpointError(str(exc)) from None
    except ARCHIVE_DAMAGE as exc:
        raise DamagedCheckpointError(f"{where} is corrupt or truncated ({_zip_problem(exc)})") from exc
    try:
        return json.loads(text), sealed
    except RecursionError:
        raise CheckpointError(f"{where}: {METADATA_ENTRY} is nested too deeply") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # with a seal, written so: not damaged
        error = CheckpointError if sealed else DamagedCheckpointError
        raise error(f"{where} is corrupt or truncated ({one_line(exc)})") from exc


@contextlib.contextmanager
def weights_fit(path: str | Path, entry: str) -> Iterator[None]:
    """Inside, the network that the checkpoint at ``path`` describes is built and the weights of its ``entry``
    loaded into it: a :class:`CheckpointError` says its own problem; any other failure of that is one
    :class:`CheckpointError`, ``entry`` does not fit the network its :data:`METADATA_ENTRY` describes."""
    try:
        yield
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError, OSError) as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {entry} does not fit the network its {METADATA_ENTRY} describes "
            f"({one_line(exc)})"
        ) from exc


def read_weights(path: str | Path, entry: str, missing_ok: bool = False) -> Any:
    """The ``torch.save`` entry ``entry`` of the checkpoint at ``path``, read with ``weights_only=True``: tensors,
    numbers, strings and containers of them, never code. :class:`CheckpointError` if it is missing (``None``
    instead with ``missing_ok``: an entry that older checkpoints lack), damaged, or holds anything else (it is
    refused unread)."""
    data = entry_bytes(path, entry, missing_ok)
    if data is None:
        return None
    try:
        return th.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: entry {entry} is not plain weights and was refused ({_refusal(exc)})"
        ) from exc
    except Exception as exc:  # torch's reader fails on junk bytes in many ways (struct.error, EOFError, ...)
        raise CheckpointError(
            f"checkpoint {str(path)!r}: entry {entry} is corrupt or truncated ({type(exc).__name__}: {one_line(exc)})"
        ) from exc


@overload
def entry_bytes(path: str | Path, entry: str, missing_ok: Literal[False] = False) -> bytes: ...
@overload
def entry_bytes(path: str | Path, entry: str, missing_ok: bool) -> bytes | None: ...
def entry_bytes(path: str | Path, entry: str, missing_ok: bool = False) -> bytes | None:
    """The bytes of the checkpoint's entry ``entry``; :class:`CheckpointError` if it has none (``None`` instead
    with ``missing_ok``), :class:`DamagedCheckpointError` if the archive or the entry is damaged
    (:data:`ARCHIVE_DAMAGE`): changed after :func:`read_metadata` proved it, or never proved."""
    try:
        with zipfile.ZipFile(path) as archive:
            if entry not in archive.namelist():
                if missing_ok:
                    return None
                raise CheckpointError(f"checkpoint {str(path)!r} has no {entry} entry")
            return archive.read(entry)
    except ARCHIVE_DAMAGE as exc:
        raise DamagedCheckpointError(
            f"checkpoint {str(path)!r}: entry {entry} is corrupt or truncated ({_zip_problem(exc)})"
        ) from exc


def _zip_problem(exc: BaseException) -> str:
    """What :mod:`zipfile` found, in words: its message, or the error's kind where the message is empty."""
    return one_line(exc) or type(exc).__name__


def trained_variant(path: str | Path, metadata: dict[str, Any], variant: Variant | None) -> Variant:
    """The rule variant the checkpoint at ``path`` was trained for; with ``variant``, :class:`CheckpointError` if
    it is another."""
    trained_for = Variant.make(**metadata["variant"])
    if variant is not None and trained_for != variant:
        raise CheckpointError(
            f"checkpoint {str(path)!r} was trained for rule variant {trained_for.describe()!r}, "
            f"not {variant.describe()!r}"
        )
    return trained_for


def checkpoint_metadata(
    path: str | Path,
    algorithm: str,
    variant: Variant | None,
    metadata: dict[str, Any] | None = None,
    backend: str = DEFAULT_BACKEND,
) -> tuple[Path, dict[str, Any], Variant]:
    """What every loader reads before the weights: the checkpoint file ``path`` stands for (:func:`checkpoint_path`:
    a run folder means its final checkpoint, else its latest), its metadata, checked to be ``algorithm``'s
    (:func:`check_algorithm`), and the rule variant it was trained for, refused when it is not ``variant``
    (:func:`trained_variant`). ``metadata``: the file's, already read by :func:`read_metadata` (which proves every
    entry whole: a resume reads it once), checked all the same, and its network ``backend``'s
    (:func:`check_backend`). Every failure is a :class:`CheckpointError` naming the file."""
    path = checkpoint_path(path)
    metadata = read_metadata(path) if metadata is None else metadata
    check_algorithm(path, metadata, algorithm)
    check_backend(path, metadata, backend)
    return path, metadata, trained_variant(path, metadata, variant)


def _refusal(exc: pickle.UnpicklingError) -> str:
    """torch's reason for refusing a file, without its advice to load it with ``weights_only=False``."""
    for line in str(exc).splitlines():
        if "WeightsUnpickler error:" in line:
            return line.split("WeightsUnpickler error:", 1)[1].split(" was not an allowed global")[0].strip()
    return "not a torch weights file"


DEFAULT_RUN_CHECKPOINTS = ("final", "latest")
"""The checkpoint a run folder means when none is named: the first of these in its ``checkpoints/`` that exists
-- the run's last network (``final.zip``; ``latest.zip`` while it still trains). It is the network whose table
``quarto train`` printed last, for every agent kind alike; ``best.zip`` is taken only by name."""
CHECKPOINT_NAME = re.compile(r"best|final|latest|step_\d+")
"""The names ``checkpoint=`` takes: the stems of the files of a run's ``checkpoints/``."""


def checkpoint_name(text: str) -> str:
    """A checkpoint's name in a run folder (:data:`CHECKPOINT_NAME`), for the ``checkpoint`` option of the agent
    specs: ``step_8192`` names the file ``step_000008192.zip`` (:func:`step_checkpoint_name`); ``ValueError``
    naming the allowed names otherwise."""
    name = text.strip().removesuffix(".zip")
    if not CHECKPOINT_NAME.fullmatch(name):
        raise QuartoValueError(f"must be best, final, latest or step_N, got {text!r}")
    return step_checkpoint_name(int(name.removeprefix("step_"))) if name.startswith("step_") else name


def step_checkpoint_name(step: int) -> str:
    """The name of the checkpoint a run saves at learner step ``step``: its digits padded to nine, so that the
    files sort by step."""
    return f"step_{step:09d}"


def checkpoint_path(path: str | Path, name: str | None = None) -> Path:
    """``path`` itself if it is not a folder; for a run folder, or its ``checkpoints/`` folder, the checkpoint
    ``NAME.zip`` there, or without ``name`` the first of :data:`DEFAULT_RUN_CHECKPOINTS` that exists. The file
    taken from a folder is said once on stderr (:func:`_say_taken`). :class:`CheckpointError` for a folder
    without that checkpoint, naming the ones it has."""
    path = Path(path)
    if not path.is_dir():
        if name is not None:
            raise CheckpointError(f"checkpoint={name} chooses within a run folder; {str(path)!r} is a file")
        return path
    # A run's checkpoints/ folder means the same as the run folder (not RUN/checkpoints/checkpoints/).
    folder = path if path.name == "checkpoints" and not (path / "checkpoints").is_dir() else path / "checkpoints"
    names = (name,) if name is not None else DEFAULT_RUN_CHECKPOINTS
    taken = next((folder / f"{stem}.zip" for stem in names if (folder / f"{stem}.zip").is_file()), None)
    if taken is None:
        kept = sorted(file.stem for file in folder.glob("*.zip")) if folder.is_dir() else []
        wanted = " or ".join(f"checkpoints/{stem}.zip" for stem in names)
        has = f"it has {', '.join(kept)}" if kept else "it holds no checkpoints of quarto train"
        raise CheckpointError(f"folder {str(path)!r} has no {wanted}: {has}")
    _say_taken(path, taken, name is None)
    return taken


_said: set[Path] = set()
"""The checkpoints :func:`_say_taken` has named in this process."""


def _say_taken(folder: Path, taken: Path, by_default: bool) -> None:
    """One line on stderr naming the checkpoint a folder stood for, so that a table or a game says whose it is;
    once per file and process, and only in the main process (the workers of a tournament build the same agent
    again)."""
    if taken in _said or multiprocessing.parent_process() is not None:
        return
    _said.add(taken)
    other = "; checkpoint=best takes the best evaluation's" if by_default and taken.stem != "best" else ""
    print(f"{folder}: playing {taken}{other}", file=sys.stderr)
