"""Versioned, checksummed files: state that a command resumes from proves itself before it is used.

A *seal* is a small JSON object that says what a payload is and proves that it is whole::

    {"kind": "dataset label shard", "format": 1, "bytes": 1152, "sha256": "9f2c...", "positions_sha256": "..."}

``kind`` names what the payload is, ``format`` the version of its layout, ``bytes`` and ``sha256`` its length and
SHA-256; a writer may add fields of its own (``meta``: what the payload is *of*, such as the hash of the positions
a shard labels), which the reader asks for again. Reading checks every one of them and raises
:class:`IntegrityError`, one line naming the file and what failed: no seal (a file of an older version, or not
one of these at all), another kind, another format, other ``meta``, or content that does not match its checksum
(damaged, or altered by hand -- a well-formed file with other values is caught as surely as a torn one). What
to do then is the caller's: redo what is cheap and say so in one line, refuse the rest in one line; never use it.

One seal, three carriers, for three shapes of file:

- **a file of bytes** in its own format (``.npy``, ``.npz``, ...): the seal in a sidecar ``NAME.seal`` beside
  it (:func:`write_sealed`, :func:`read_sealed`). The payload stays a file every tool reads; the payload is
  written first and the sidecar after, each atomically, so a process killed between the two leaves a file whose
  seal is missing or is the previous one's: it fails the check, as it should. The dataset's shards of labels.
- **a JSON object**: the seal under the key ``"seal"``, over the canonical JSON (sorted keys, no spaces) of every
  other key (:func:`sealed_json`, :func:`unsealed_json`; for a whole file :func:`write_sealed_json`,
  :func:`read_sealed_json`). The dataset's plan of positions and its labels manifest, the grade's value cache,
  each line of a tournament's ``games.jsonl``.
- **a zip archive**: the seal as the entry :data:`SEAL_ENTRY`, a sealed JSON object holding the SHA-256 of every
  other entry (:func:`archive_seal`, :func:`check_archive`): a file that travels alone keeps its proof inside.
  The training checkpoints.

Every file is written atomically (:mod:`agents.storage.files`). A checksum detects damage and edits, not an author who
recomputes it: it is no signature. Standard library only (and the project's error classes).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.storage.files import atomic_write_bytes, atomic_write_text
from quarto_env.errors import IntegrityError

SEAL_KEY = "seal"
"""The key of a sealed JSON object that holds its seal."""
SEAL_SUFFIX = ".seal"
"""The suffix of a sealed file's sidecar: ``shard-00003.npy`` is sealed by ``shard-00003.npy.seal``."""
SEAL_ENTRY = "seal.json"
"""The entry of a sealed zip archive that holds the checksums of its other entries."""
ARCHIVE_KIND = "zip entries"
"""The ``kind`` of an archive's own seal (its entries' checksums): the archive's format is the caller's."""
ARCHIVE_FORMAT = 1
MAX_SEAL_BYTES = 1 << 16
"""A sidecar larger than this is not a seal (read no further)."""


def sha256(data: bytes) -> str:
    """The SHA-256 of ``data``, in hex."""
    return hashlib.sha256(data).hexdigest()


def make_seal(kind: str, version: int, payload: bytes, **meta: Any) -> dict[str, Any]:
    """The seal of ``payload``: ``kind``, ``format`` (``version``), ``bytes``, ``sha256`` and the ``meta`` fields."""
    return {"kind": kind, "format": version, "bytes": len(payload), "sha256": sha256(payload), **meta}


def check_seal(seal: object, kind: str, version: int, payload: bytes, where: str, **meta: Any) -> None:
    """:class:`IntegrityError`, in one line naming ``where``, unless ``seal`` is the seal of ``payload`` as a
    ``kind`` of format ``version`` whose ``meta`` fields are those given."""
    if not isinstance(seal, dict) or "sha256" not in seal:
        raise IntegrityError(
            f"{where} carries no format and checksum: it was written by an older version, or is no {kind}"
        )
    if seal.get("kind") != kind:
        raise IntegrityError(f"{where} is a {_quoted(seal.get('kind'))}, not a {kind}")
    if seal.get("format") != version:
        raise IntegrityError(f"{where} is {kind} format {_quoted(seal.get('format'))}; this version reads {version}")
    if seal.get("bytes") != len(payload) or seal.get("sha256") != sha256(payload):
        raise IntegrityError(f"{where} does not match its checksum: damaged or altered")
    other = [key for key, value in meta.items() if seal.get(key) != value]
    if other:
        raise IntegrityError(f"{where} is a {kind} of something else: its {', '.join(other)} differ")


def _quoted(value: object) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------------------------------------
# A file of bytes, sealed by a sidecar
# ---------------------------------------------------------------------------------------------------------
def seal_path(path: str | Path) -> Path:
    """The sidecar that seals ``path``."""
    path = Path(path)
    return path.with_name(path.name + SEAL_SUFFIX)


def write_sealed(path: str | Path, kind: str, version: int, payload: bytes, **meta: Any) -> None:
    """Write ``payload`` to ``path`` and its seal (:func:`make_seal`) to :func:`seal_path`, each atomically, the
    payload first."""
    atomic_write_bytes(path, payload)
    atomic_write_text(seal_path(path), json.dumps(make_seal(kind, version, payload, **meta)) + "\n")


def read_sealed(path: str | Path, kind: str, version: int, **meta: Any) -> bytes:
    """The payload of ``path`` once its sidecar proves it (:func:`check_seal`); :class:`IntegrityError` if it
    does not, or has no sidecar. ``OSError`` (``FileNotFoundError``: never written) as reading raises it."""
    payload = Path(path).read_bytes()
    check_seal(_sidecar(seal_path(path)), kind, version, payload, str(path), **meta)
    return payload


def _sidecar(path: Path) -> object:
    """The seal in the sidecar ``path``, or ``None`` where there is none that parses."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_SEAL_BYTES + 1)
        return json.loads(text) if len(text) <= MAX_SEAL_BYTES else None
    except (OSError, ValueError, RecursionError):  # missing, unreadable, not UTF-8, not JSON, nested too deep
        return None


# ---------------------------------------------------------------------------------------------------------
# A JSON object, sealed under its "seal" key
# ---------------------------------------------------------------------------------------------------------
def canonical_json(value: object) -> bytes:
    """``value`` as the JSON a seal covers: sorted keys, no spaces, UTF-8. The same value parsed back from any
    JSON text gives the same bytes (floats are written as their shortest exact form)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def sealed_json(body: Mapping[str, Any], kind: str, version: int, **meta: Any) -> dict[str, Any]:
    """``body`` with its seal under :data:`SEAL_KEY` (any seal it had is replaced)."""
    unsealed = {key: value for key, value in body.items() if key != SEAL_KEY}
    return {**unsealed, SEAL_KEY: make_seal(kind, version, canonical_json(unsealed), **meta)}


def unsealed_json(value: object, kind: str, version: int, where: str, **meta: Any) -> dict[str, Any]:
    """The object ``value`` without its seal, once the seal proves the rest (:func:`check_seal`);
    :class:`IntegrityError` naming ``where`` otherwise."""
    if not isinstance(value, dict):
        raise IntegrityError(f"{where} is not a JSON object, so no {kind}")
    body = {key: item for key, item in value.items() if key != SEAL_KEY}
    check_seal(value.get(SEAL_KEY), kind, version, canonical_json(body), where, **meta)
    return body


def write_sealed_json(path: str | Path, body: Mapping[str, Any], kind: str, version: int, **meta: Any) -> None:
    """Write ``body`` with its seal to ``path`` as one line of JSON, atomically."""
    atomic_write_text(path, json.dumps(sealed_json(body, kind, version, **meta)) + "\n")


def read_sealed_json(path: str | Path, kind: str, version: int, **meta: Any) -> dict[str, Any]:
    """The object in ``path`` without its seal, once proved (:func:`unsealed_json`); :class:`IntegrityError` for
    a file that is not JSON or fails the check. ``OSError`` as reading raises it."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, nested too deep
        raise IntegrityError(f"{path} is not JSON ({type(error).__name__}): damaged, or no {kind}") from None
    return unsealed_json(value, kind, version, str(path), **meta)


# ---------------------------------------------------------------------------------------------------------
# A zip archive, sealed by an entry
# ---------------------------------------------------------------------------------------------------------
def archive_seal(entries: Mapping[str, bytes]) -> bytes:
    """The :data:`SEAL_ENTRY` of an archive of ``entries`` (any seal entry among them is left out): a sealed JSON
    object ``{"entries": {name: sha256}}``. Write it as the archive's last entry."""
    digests = {name: sha256(data) for name, data in entries.items() if name != SEAL_ENTRY}
    return json.dumps(sealed_json({"entries": digests}, ARCHIVE_KIND, ARCHIVE_FORMAT), indent=1).encode("utf-8")


ARCHIVE_DAMAGE = (
    zipfile.BadZipFile,  # a bad signature, size or CRC; truncated, empty, or no zip at all
    zipfile.LargeZipFile,
    zlib.error,  # compressed data that does not decompress
    lzma.LZMAError,
    struct.error,
    EOFError,  # truncated inside an entry
    OSError,  # bzip2's errors too
    ValueError,  # numpy's .npy header parser, JSON that does not parse, a name not UTF-8, pickles refused
    TypeError,  # an .npy header dict whose values are of the wrong types
    KeyError,  # an entry missing
    NotImplementedError,  # a changed byte in the version needed to extract or the compression method
    RuntimeError,  # a changed flag bit: "encrypted"
    RecursionError,  # JSON nested too deep
    OverflowError,
    tokenize.TokenError,  # a changed byte in an .npy header
)
"""What reading a damaged zip archive -- a checkpoint, an ``.npz`` -- raises, whichever byte is wrong: one
changed byte can lead to any of them. Every reader of such a file catches this tuple around its reading and says
in one line that the file is damaged, never with a traceback."""


def is_sealed(archive: zipfile.ZipFile) -> bool:
    """Whether ``archive`` has a :data:`SEAL_ENTRY` (older archives have none, and are checked by their CRCs)."""
    return SEAL_ENTRY in archive.namelist()


def check_archive(archive: zipfile.ZipFile, where: str) -> None:
    """:class:`IntegrityError` naming ``where`` unless every entry of ``archive`` but its seal is one the seal
    names, with the checksum it gives, and the seal names no entry the archive lacks. Reads every entry (so
    zipfile checks their CRCs too: a torn archive raises zipfile's own errors, ``BadZipFile``, ``zlib.error``,
    ``EOFError``)."""
    if not is_sealed(archive):
        raise IntegrityError(f"{where} has no {SEAL_ENTRY}, the checksums of its entries")
    try:
        sealed = json.loads(archive.read(SEAL_ENTRY))
    except (ValueError, RecursionError):
        raise IntegrityError(f"{where}: {SEAL_ENTRY} is not JSON: damaged or altered") from None
    body = unsealed_json(sealed, ARCHIVE_KIND, ARCHIVE_FORMAT, f"{where}: {SEAL_ENTRY}")
    digests = body.get("entries")
    names = [name for name in archive.namelist() if name != SEAL_ENTRY]
    if not isinstance(digests, dict) or sorted(digests) != sorted(names):
        raise IntegrityError(f"{where} holds other entries than its {SEAL_ENTRY} names: damaged or altered")
    for name in names:
        if sha256(archive.read(name)) != digests[name]:
            raise IntegrityError(f"{where}: entry {name} does not match its checksum: damaged or altered")
