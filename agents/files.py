"""Files written whole or not at all, and output paths checked before any work starts: the checkpoints, books,
labels and every command's results use them.

- :func:`output_file` and :func:`output_folder`: a path the user named for output is checked before any work
  starts -- not a folder where a file is wanted (or the reverse), not a device such as ``/dev/null``, in a
  place where a file can be made (tried: root passes the permission bits in ``/proc`` or on a read-only
  mount), under a name the file system takes -- so that nothing is computed only to be lost.
- :func:`atomic_write` (and ``_bytes``, ``_text``): a reader never sees half a file; a run killed mid-write
  leaves at most an orphan temporary file, which :func:`remove_orphan_temporaries` clears.

Standard library only, and the project's error classes (:mod:`quarto_env.errors`, standard library only too).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from quarto_env.errors import QuartoValueError

TEMPORARY_SUFFIX = ".tmp"


class OutputPathError(QuartoValueError):
    """A path named for output that cannot be written as asked."""


# ---------------------------------------------------------------------------------------------------------
# Output paths
# ---------------------------------------------------------------------------------------------------------
def output_file(path: str | Path, what: str, *, overwrite: bool = True) -> Path:
    """``path`` as a file this process can write (creating its folder if need be); :class:`OutputPathError`
    naming ``what`` if it is a folder or a device, already exists while ``overwrite`` is false, or lies where
    nothing can be written."""
    path = Path(path)
    if os.path.exists(path):  # not Path.exists, which raises for a name too long to look up
        if path.is_dir():
            raise OutputPathError(f"{what} {str(path)!r} is a folder; name a file")
        if not stat.S_ISREG(path.stat().st_mode):
            raise OutputPathError(f"{what} {str(path)!r} is not a regular file (a device or a pipe)")
        if not overwrite:
            raise OutputPathError(f"{what} {str(path)!r} already exists; remove it or name another file")
        if not os.access(path, os.W_OK):
            raise OutputPathError(f"{what} {str(path)!r} cannot be written (permission denied)")
    _writable_folder(path.parent, what, path, probe=path)
    return path


def output_folder(path: str | Path, what: str) -> Path:
    """``path`` as a folder this process can create or write into; :class:`OutputPathError` naming ``what``
    if it is a file or a device, or lies where nothing can be written."""
    path = Path(path)
    if os.path.exists(path) and not path.is_dir():
        raise OutputPathError(f"{what} {str(path)!r} is a file, not a folder")
    _writable_folder(path, what, path, probe=path / "probe")
    return path


def output_parent(path: str | Path, what: str) -> Path:
    """``path``'s folder, created if need be and checked as one where ``path`` can be made whole beside it (a
    staging file or folder, then one rename); :class:`OutputPathError` naming ``what`` otherwise."""
    path = Path(path)
    _writable_folder(path.parent, what, path, probe=path.parent / f"{path.name}.staging")
    return path.parent


def _writable_folder(folder: Path, what: str, named: Path, probe: Path) -> None:
    """Create ``folder`` if need be and check that files can be made in it: by making, and removing at once, the
    temporary file that :func:`atomic_write` would make for ``probe``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputPathError(f"{what} {str(named)!r}: {str(folder)!r} is a file, not a folder") from None
    except OSError as error:
        raise OutputPathError(f"{what} {str(named)!r} cannot be created: {error.strerror or error}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{what} {str(named)!r} cannot be written: folder {str(folder)!r} is read-only")
    # The permission bits are not the whole answer: root passes them in /proc, /sys or on a read-only mount,
    # where no file can be made, and a name may be too long for the file system (the temporary one is longer).
    try:
        _temporary_beside(probe).unlink()
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:
            reason = (
                f"the file name ({len(probe.name)} characters) is too long for the file system, counting what the "
                "temporary file written first adds to it"
            )
        else:
            reason = f"no file can be made in folder {str(folder)!r} ({error.strerror or error})"
        raise OutputPathError(f"{what} {str(named)!r} cannot be written: {reason}") from None


# ---------------------------------------------------------------------------------------------------------
# Atomic writes
# ---------------------------------------------------------------------------------------------------------
def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call ``write(temporary)`` on a fresh file beside ``path`` (same file system, so the rename is atomic), then
    ``os.replace`` it onto ``path``: a reader never sees half a file. The temporary name ends with ``path``'s
    suffix, so that writers that pick a format from it (Pillow, matplotlib) pick the right one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = _temporary_beside(path)
    try:
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes the file private; give it the usual permissions
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        # Best effort: in a folder that became unwritable the temporary cannot go either, and the error that
        # matters is the write's, not this one.
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, flushed to disk before the rename."""

    def write(temporary: Path) -> None:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    atomic_write(path, write)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _temporary_beside(path: Path) -> Path:
    """A new empty file in ``path``'s folder, named ``.NAME.RANDOM.tmp`` plus NAME's suffix (``_TEMPORARY_NAME``)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX + path.suffix, dir=path.parent)
    os.close(fd)
    return Path(name)


def remove_orphan_temporaries(folder: str | Path) -> list[Path]:
    """Remove the temporary files that :func:`atomic_write` leaves in ``folder`` when its process is killed
    mid-write; returns them. Call it only where no other process is writing into ``folder``."""
    orphans = [p for p in Path(folder).glob(".*") if p.is_file() and is_temporary_name(p.name)]
    for orphan in orphans:
        orphan.unlink(missing_ok=True)
    return orphans


_TEMPORARY_NAME = re.compile(r"\..+\.[^.]+" + re.escape(TEMPORARY_SUFFIX) + r"(\.\w+)?")
"""``.NAME.RANDOM.tmp`` plus NAME's suffix: the temporary files of :func:`atomic_write`."""


def is_temporary_name(name: str) -> bool:
    """Whether ``name`` is that of a temporary file of :func:`atomic_write` (``.NAME.RANDOM.tmp`` plus NAME's
    suffix): half a write, never a result."""
    return _TEMPORARY_NAME.fullmatch(name) is not None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------------------------------------------------
# Input paths
# ---------------------------------------------------------------------------------------------------------
def input_file(path: str | Path, what: str, error: type[Exception] = ValueError) -> Path:
    """``path`` as a regular file to read, checked before it is opened; ``error`` (the caller's own kind: a
    config, checkpoint or record error) naming ``what`` if it is missing, a folder, or not a regular file -- a
    named pipe, whose reader waits for a writer that may never come, or a device such as ``/dev/zero``, which
    never ends."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{what} {str(path)!r} does not exist") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error(f"{what} {str(path)!r} cannot be read: {reason}") from None
    if stat.S_ISDIR(mode):
        raise error(f"{what} {str(path)!r} is a folder; name a file")
    if not stat.S_ISREG(mode):
        raise error(f"{what} {str(path)!r} is not a regular file (a named pipe or a device); name a file")
    return path
