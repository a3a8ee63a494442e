"""Files written whole or not at all, and output paths checked before any work starts: the checkpoints, books,
labels and every command's results use them.

- :func:`output_file` and :func:`output_folder`: a path the user named for output is checked before any work
  starts -- not a folder where a file is wanted (or the reverse), not a device such as ``/dev/null``, in a
  place where a file can be made (tried: root passes the permission bits in ``/proc`` or on a read-only
  mount), under a name the file system takes -- so that nothing is computed only to be lost.
- :func:`atomic_write` (and ``_bytes``, ``_text``): a reader never sees half a file; a run killed mid-write
  leaves at most an orphan temporary file, which :func:`remove_orphan_temporaries` clears (or, beside one
  output, :func:`remove_orphans_of`, with its staging folders).
- :func:`hold_lock`: one writer at a time. A second writer of the same output, in another process or in this
  one, is refused in one line naming the first (:class:`InUseError`).
- :func:`input_file` and :func:`read_file_bytes`: a path named for input is checked before it is read: a named
  pipe would block, a device never end, a file over a bound fill the memory.
- An empty path is refused as empty everywhere: ``Path("")`` is ``.``, the current folder, never what was meant.

Standard library only, and the project's error classes (:mod:`quarto_env.errors`, standard library only too).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from quarto_env.errors import InUseError, OutputPathError

TEMPORARY_SUFFIX = ".tmp"
STAGING_SUFFIX = ".staging"
"""The suffix of a staging folder (:func:`staging_folder_beside`)."""
ASIDE_SUFFIX = ".replaced"
"""The suffix of an earlier result moved aside while a new one takes its place (:func:`aside_path`)."""


def named_path(path: str | Path, what: str, error: type[Exception] = OutputPathError) -> Path:
    """``path`` as a ``Path``; ``error`` naming ``what`` if it is the empty string, which ``Path`` would read as
    ``.``, the current folder: a refusal for the wrong reason at best, a result written into ``.`` at worst."""
    if isinstance(path, str) and not path:
        raise error(f"{what} '' is an empty path: name a file or folder")
    return Path(path)


# ---------------------------------------------------------------------------------------------------------
# Output paths
# ---------------------------------------------------------------------------------------------------------
def output_file(path: str | Path, what: str, *, overwrite: bool = True) -> Path:
    """``path`` as a file this process can write (creating its folder if need be); :class:`OutputPathError`
    naming ``what`` if it is a folder or a device, already exists while ``overwrite`` is false, or lies where
    nothing can be written."""
    path = named_path(path, what)
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
    path = named_path(path, what)
    if os.path.exists(path) and not path.is_dir():
        raise OutputPathError(f"{what} {str(path)!r} is a file, not a folder")
    _writable_folder(path, what, path, probe=path / "probe")
    return path


def output_parent(path: str | Path, what: str) -> Path:
    """``path``'s folder, created if need be and checked as one where ``path`` can be made whole beside it (a
    staging file or folder, then one rename); :class:`OutputPathError` naming ``what`` otherwise."""
    path = named_path(path, what)
    _writable_folder(path.parent, what, path, probe=path.parent / f"{path.name}{STAGING_SUFFIX}")
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


def staging_folder_beside(path: Path) -> Path:
    """A new empty folder beside ``path`` (same file system: one rename publishes it), ``.NAME.RANDOM.staging``,
    with the usual permissions (``mkdtemp`` makes it private; the published folder gets the usual mode)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=STAGING_SUFFIX, dir=path.parent))
    os.chmod(staging, 0o777 & ~_umask())
    return staging


def aside_path(path: Path) -> Path:
    """A free name beside ``path`` for its earlier result while a new one takes its place: ``.NAME.RANDOM.replaced``."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{ASIDE_SUFFIX}")


def remove_orphans_of(path: str | Path) -> list[Path]:
    """Clear what a writer of ``path`` killed mid-work (``kill -9``, a power cut) left beside it: its temporary
    files and staging folders are removed; an earlier result it had moved aside is put back if ``path`` is gone
    (killed between its two renames), removed otherwise. Best effort: what cannot be removed stays, harmless.
    Returns what was removed. Call it only while holding ``path``'s lock (:func:`hold_lock`): no live writer of
    ``path`` owns them then."""
    path = Path(path)
    suffixes = "|".join(map(re.escape, (TEMPORARY_SUFFIX + path.suffix, STAGING_SUFFIX, ASIDE_SUFFIX)))
    leftover = re.compile(rf"\.{re.escape(path.name)}\.{_RANDOM}({suffixes})")
    removed = []
    for entry in sorted(path.parent.iterdir()) if path.parent.is_dir() else []:
        found = leftover.fullmatch(entry.name)
        with contextlib.suppress(OSError):
            if found and found.group(1) == ASIDE_SUFFIX and not os.path.lexists(path):
                os.rename(entry, path)
            elif found:
                remove_entry(entry)
                removed.append(entry)
    return removed


def remove_entry(entry: Path) -> None:
    """Remove the file, link or folder ``entry`` -- a link itself, never what it points to."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


def remove_orphan_temporaries(folder: str | Path) -> list[Path]:
    """Remove the temporary files that :func:`atomic_write` leaves in ``folder`` when its process is killed
    mid-write; returns them. Call it only where no other process is writing into ``folder``."""
    orphans = [p for p in Path(folder).glob(".*") if p.is_file() and is_temporary_name(p.name)]
    for orphan in orphans:
        orphan.unlink(missing_ok=True)
    return orphans


_RANDOM = "[a-z0-9_]{8}"
"""The random part of the names of ``mkstemp``, ``mkdtemp`` and :func:`aside_path`."""
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
    config, checkpoint or record error) naming ``what`` if it is empty, missing, a folder, or not a regular file
    -- a named pipe, whose reader waits for a writer that may never come, or a device such as ``/dev/zero``,
    which never ends."""
    return _regular_file(path, what, error, advice="; name a file")


def read_file_bytes(path: str | Path, what: str, most: int, error: type[Exception] = ValueError) -> bytes:
    """The bytes of the regular file ``path``, refused before a byte is read -- ``error`` naming ``what`` -- if it
    is no regular file (:func:`input_file`) or holds more than ``most`` bytes. It is opened without waiting, so a
    pipe put in its place after the check is refused too, not waited on."""
    path = _regular_file(path, what, error)
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            status = os.fstat(handle.fileno())
            regular = stat.S_ISREG(status.st_mode)
            data = handle.read(most + 1) if regular and status.st_size <= most else b""
    except OSError as exc:
        raise error(f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    if not regular:
        raise error(f"{what} {str(path)!r} is not a regular file (a named pipe or a device)")
    size = max(status.st_size, len(data))  # len(data): a file that grew while it was read
    if size > most:
        raise error(f"{what} {str(path)!r} holds {size:,} bytes, more than the {most:,} it can: refused unread")
    return data


def _regular_file(path: str | Path, what: str, error: type[Exception], advice: str = "") -> Path:
    path = named_path(path, what, error)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{what} {str(path)!r} does not exist") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error(f"{what} {str(path)!r} cannot be read: {reason}") from None
    if stat.S_ISDIR(mode):
        raise error(f"{what} {str(path)!r} is a folder{advice}")
    if not stat.S_ISREG(mode):
        raise error(f"{what} {str(path)!r} is not a regular file (a named pipe or a device){advice}")
    return path


# ---------------------------------------------------------------------------------------------------------
# The lock
# ---------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def hold_lock(lock: Path, named: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the file ``lock`` for the block, with this process's id and command in it;
    :class:`InUseError` naming ``named`` and the holder if another writer holds it -- another process, or another
    writer of this one (each takes its own open file, and ``flock`` refuses the second). The kernel releases the
    lock when the holder dies (``kill -9`` too): a lock file left by a dead process is simply taken over. The file
    is removed when the block ends (while still held, so that no one locks a file about to go; a process that
    opened it before is sent to the new one: :func:`_locked`)."""
    handle = _locked(lock, named)
    try:
        with contextlib.suppress(OSError):  # who holds it is news, not the lock: a full disk leaves it unsaid
            handle.truncate(0)
            handle.write(f"{os.getpid()} {this_command()}\n")
            handle.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        handle.close()


def _locked(lock: Path, named: str) -> TextIO:
    """The open ``lock`` file, locked by this process; retried while the file that got locked is no longer the one
    at ``lock`` (its holder removed it between this process's open and its lock)."""
    while True:
        try:
            handle = open(lock, "a+", encoding="utf-8")  # noqa: SIM115 -- held open for the lock's life
        except OSError as error:
            raise OutputPathError(
                f"{named} cannot be locked: {str(lock)!r} cannot be made ({error.strerror})"
            ) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise InUseError(f"{named} is in use by {_holder_text(holder)}: wait for it to end, or stop it") from None
        if _same_file(handle.fileno(), lock):
            return handle
        handle.close()


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def _holder_text(holder: str) -> str:
    """``another process (pid 4242: quarto grade random)`` from a lock file's ``4242 quarto grade random``;
    ``another writer in this process (...)`` where the pid is this process's."""
    pid, _, command = holder.partition(" ")
    who = "another writer in this process" if pid == str(os.getpid()) else "another process"
    return f"{who} (pid {pid or 'unknown'}" + (f": {command})" if command else ")")


def this_command() -> str:
    """This process's command line, as a lock file records it: ``quarto grade random --out g``."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if program in ("cli.py", "__main__.py"):  # python -m experiments.cli
        program = "quarto"
    words = ["python", "-c"] if program == "-c" else [program]
    return shlex.join([*words, *sys.argv[1:]])
