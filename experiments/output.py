"""The one output discipline of every ``quarto`` command that writes: :func:`claim_output`.

- **Nothing is replaced unasked.** An output that already holds a result is refused before any work, in one line
  naming ``--overwrite`` (and ``--resume`` where the run can go on), exit status 2.
- **One writer at a time.** The writer holds an exclusive ``flock`` on its output for its whole life
  (:func:`hold_lock`): ``RUN/.lock`` inside a run folder, ``.NAME.lock`` beside a file or a staged folder. A
  second writer is refused in one line naming the first (its pid and command). The kernel drops the lock of a
  process that dies, ``kill -9`` included, so the lock file a dead process left blocks nobody.
- **Whole or not at all.** A file is written by :func:`agents.files.atomic_write` (a temporary file beside it,
  then one rename). A result of several files (kind ``folder``) is written into a staging folder beside it and
  made visible by one rename when the block ends without an error: a failure at any point leaves the previous
  result or nothing, never half a folder. A run folder that grows over time (kind ``run``: ``quarto train``,
  ``quarto tournament``, which ``--resume`` continues) cannot be staged whole: there each file is atomic and the
  folder is locked.
- **A late write failure is one line.** An ``OSError`` on the output's paths inside the block (a path taken by
  a folder, a folder made unwritable, a full disk) becomes one line naming the path and the cause, exit status
  :data:`WRITE_FAILED`, with no temporary file left behind: a run's temporaries are removed, a staging folder
  too (one that failed only at its last rename is kept, and named).

Example::

    with claim_output(args.out, "folder", overwrite=args.overwrite, prog=parser.prog) as out:
        ...                                          # the work: a second writer is refused meanwhile
        atomic_write_text(out.staging / "grade.md", text)
    print(f"written to {out.path}")                 # published by one rename
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import fcntl
import os
import secrets
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TextIO

from agents.files import (
    OutputPathError,
    is_temporary_name,
    output_file,
    output_folder,
    output_parent,
    remove_orphan_temporaries,
)
from experiments.options import USAGE_ERROR
from quarto_env.errors import QuartoError

WRITE_FAILED = 1
"""The exit status of a write that failed late, through no fault of the command line."""
LOCK_FILE = ".lock"
"""The file inside a run folder that its writer keeps locked."""

Kind = Literal["file", "folder", "run"]
"""``file``: one file, written atomically; ``folder``: several files, staged and published by one rename;
``run``: a folder that grows over the run (and that ``--resume`` continues), each file atomic."""

_DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)
"""Errors of a write that name no file (a ``write`` on an open file) but are the output's all the same."""


class OutputError(QuartoError):
    """An output that cannot be claimed or written; ``str(error)`` is the one line to print, ``status`` the exit
    status (:data:`~experiments.options.USAGE_ERROR` for a refusal before any work)."""

    status = USAGE_ERROR


class OutputExistsError(OutputError):
    """The output already holds a result, and neither ``--overwrite`` nor ``--resume`` was given."""


class OutputInUseError(OutputError):
    """Another process holds the output's lock."""


class OutputWriteError(OutputError):
    """A write into the output failed after the work began."""

    status = WRITE_FAILED


@dataclasses.dataclass(frozen=True)
class Output:
    """A claimed output: ``path`` is where the result is seen; ``staging`` where to write it (a folder beside
    ``path`` for kind ``folder``, ``path`` itself otherwise)."""

    path: Path
    kind: Kind
    option: str
    staging: Path
    replaces: bool
    """Whether an earlier result is there that this one replaces (``--overwrite``)."""

    def replace_previous(self) -> None:
        """Kind ``run`` with ``--overwrite``: remove the earlier run's files (all but the lock). Call it once every
        check has passed, right before the first write: a refused start leaves the earlier run as it was."""
        if self.kind != "run" or not self.replaces:
            return
        for entry in self.path.iterdir():
            if entry.name == LOCK_FILE:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def add_overwrite_argument(parser: argparse.ArgumentParser, what: str = "--out") -> None:
    """Add ``--overwrite`` (``dest`` ``overwrite``): without it an existing result at ``what`` is refused."""
    parser.add_argument("--overwrite", action="store_true", help=f"let {what} replace an existing result")


@contextlib.contextmanager
def claim_output(
    path: str | Path,
    kind: Kind,
    *,
    option: str = "--out",
    overwrite: bool = False,
    resume: bool = False,
    holds_result: Callable[[Path], bool] | None = None,
    resume_hint: str | None = None,
    prog: str | None = None,
) -> Iterator[Output]:
    """Claim ``path`` (named on the command line by ``option``) as this command's output of ``kind``, for the
    block: checked, locked, refused if it holds a result (``holds_result(path)``; by default anything there)
    unless ``overwrite`` or ``resume``; for kind ``folder``, published when the block ends without an error and
    its staging folder holds something (an empty one publishes nothing: an interrupted command leaves the
    earlier result). ``resume_hint`` (``--resume DIR``) is named in the refusal and after a late failure, as the
    way to go on. :class:`OutputError` in one line; with ``prog``, printed as ``PROG: message`` and the command
    exits with its status. An output that is not always asked for: :func:`claim_if_asked`."""
    try:
        with _claimed(Path(path), kind, option, overwrite, resume, holds_result, resume_hint) as output:
            yield output
    except OutputError as error:
        if prog is None:
            raise
        print(f"{prog}: {error}", file=sys.stderr)
        raise SystemExit(error.status) from None


def claim_if_asked(
    path: str | Path | None, kind: Kind, **options: Any
) -> contextlib.AbstractContextManager[Output | None]:
    """:func:`claim_output` of an output that the command line may leave out (``--gif``, ``--json``): without a
    ``path`` nothing is claimed, and the block gets ``None``."""
    return claim_output(path, kind, **options) if path is not None else contextlib.nullcontext()


@contextlib.contextmanager
def _claimed(
    path: Path,
    kind: Kind,
    option: str,
    overwrite: bool,
    resume: bool,
    holds_result: Callable[[Path], bool] | None,
    resume_hint: str | None,
) -> Iterator[Output]:
    named = f"{option} {str(path)!r}"
    _check_path(path, kind, option)
    lock = path / LOCK_FILE if kind == "run" else path.parent / f".{path.name}.lock"
    with hold_lock(lock, named):
        earlier = (holds_result or _holds_anything)(path)
        if earlier and not (overwrite or resume):
            raise OutputExistsError(_exists_text(named, path, kind, resume_hint))
        if kind == "run":
            remove_orphan_temporaries(path)  # left by a process killed mid-write; we hold the folder now
        staging = _staging_folder(named, path) if kind == "folder" else path
        output = Output(path, kind, option, staging, replaces=earlier and overwrite)
        settled = False  # the staging folder published, or kept and named: not to be removed
        try:
            yield output
        except OSError as error:
            if not _concerns(error, output):
                raise
            raise OutputWriteError(_failure_text(named, output, error, resume_hint)) from None
        else:
            if kind == "folder":
                settled = True
                _publish(named, output)
        finally:
            if kind == "folder" and not settled:
                shutil.rmtree(staging, ignore_errors=True)


def _check_path(path: Path, kind: Kind, option: str) -> None:
    """Refuse a path of the wrong sort (a folder where a file is wanted, a device, an unwritable place) before the
    lock, creating the folders it needs."""
    try:
        if kind == "file":
            output_file(path, option)
        elif kind == "run":
            output_folder(path, option)
        else:
            if os.path.exists(path) and not os.path.isdir(path):
                raise OutputPathError(f"{option} {str(path)!r} is a file, not a folder")
            output_parent(path, option)
    except OutputPathError as error:
        raise OutputError(str(error)) from None
    except ValueError as error:  # a path the OS refuses, e.g. with a NUL byte
        raise OutputError(f"{option} {str(path)!r} is not a valid path: {error}") from None


def _holds_anything(path: Path) -> bool:
    """Whether ``path`` holds a result: a file, or a folder with anything in it but its lock and temporaries."""
    if not os.path.isdir(path):
        return os.path.exists(path)
    return bool(_contents(path))


def _contents(folder: Path) -> list[str]:
    """The names in ``folder`` that are a result's: not its lock, not a killed write's temporary file."""
    return sorted(e.name for e in folder.iterdir() if e.name != LOCK_FILE and not is_temporary_name(e.name))


def _exists_text(named: str, path: Path, kind: Kind, resume_hint: str | None) -> str:
    what = "a run" if kind == "run" else "a result" if kind == "folder" else "a file"
    if kind != "file" and os.path.isdir(path):
        names = _contents(path)
        what += f" ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
    ways = f"{resume_hint} continues it, --overwrite replaces it" if resume_hint else "--overwrite replaces it"
    return f"{named} already holds {what}: {ways}, or name another"


def _staging_folder(named: str, path: Path) -> Path:
    """A new empty folder beside ``path`` (same file system: the rename is atomic), with the usual permissions."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".staging", dir=path.parent))
    except OSError as error:
        raise OutputError(f"{named} cannot be written: no folder can be made beside it ({error.strerror})") from None
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(staging, 0o777 & ~mask)  # mkdtemp makes it private; the published folder gets the usual mode
    return staging


def _publish(named: str, output: Output) -> None:
    """Make the staging folder ``output.path`` by one rename (moving an earlier result aside first, then removing
    it); an empty one is removed instead. :class:`OutputWriteError` naming where the results are kept if the
    rename fails."""
    if not any(output.staging.iterdir()):
        output.staging.rmdir()
        return
    path, aside = output.path, None
    try:
        if os.path.isdir(path) and _holds_anything(path):
            if not output.replaces:  # made by a writer that does not lock, while this one worked
                raise OSError(errno.EEXIST, "a result appeared there meanwhile", str(path))
            aside = path.with_name(f".{path.name}.{secrets.token_hex(4)}.replaced")
            os.rename(path, aside)
        os.rename(output.staging, path)  # also onto an empty folder, which it replaces
    except OSError as error:
        if aside is not None and not os.path.exists(path):
            os.rename(aside, path)  # the earlier result back where it was
        cause = error.strerror or str(error)
        raise OutputWriteError(
            f"{named} could not be written ({cause}): the results are kept in {str(output.staging)!r}"
        ) from None
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def _concerns(error: OSError, output: Output) -> bool:
    """Whether ``error`` is a write into ``output``: it names a path of the output (inside it, or beside it under
    its name, as ``OUT.parts/`` or a temporary ``.OUT.*``), or names none and is a full or read-only disk."""
    names = [name for name in (error.filename, error.filename2) if name is not None]
    if not names:
        return error.errno in _DISK_ERRORS
    return any(_within(Path(os.fsdecode(name)), output) for name in names)


def _within(name: Path, output: Output) -> bool:
    name = Path(os.path.abspath(name))
    roots = [Path(os.path.abspath(output.path)), Path(os.path.abspath(output.staging))]
    if any(name == root or root in name.parents for root in roots):
        return True
    if output.kind == "run":
        return False
    parent = roots[0].parent
    if parent not in name.parents:
        return False
    first = name.relative_to(parent).parts[0]
    return first.startswith((output.path.name, f".{output.path.name}."))


def _failure_text(named: str, output: Output, error: OSError, resume_hint: str | None) -> str:
    """The one line of a late write failure: the path (as it would have been seen), the cause, what is left."""
    target = error.filename2 if error.filename2 is not None else error.filename
    shown = _seen_as(Path(os.fsdecode(target)), output) if target is not None else output.path
    cause = error.strerror or str(error)
    if output.kind == "run":
        with contextlib.suppress(OSError):
            remove_orphan_temporaries(shown.parent if shown != output.path else output.path)
        left = f"what was written before is kept in {str(output.path)!r}"
        if resume_hint:
            left += f"; once that is fixed, {resume_hint} goes on from it"
    else:
        left = f"{str(output.path)!r} is as it was" if os.path.exists(output.path) else "nothing was written"
    return f"{named}: writing {str(shown)!r} failed ({cause}); {left}"


def _seen_as(name: Path, output: Output) -> Path:
    """``name`` with the staging folder in it replaced by the output's path: what the user would have seen."""
    try:
        return output.path / Path(os.path.abspath(name)).relative_to(os.path.abspath(output.staging))
    except ValueError:
        return name


# ---------------------------------------------------------------------------------------------------------
# The lock
# ---------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def hold_lock(lock: Path, named: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the file ``lock`` for the block, with this process's id and command in it;
    :class:`OutputInUseError` naming ``named`` and the holder if another process holds it. The kernel releases
    the lock when the holder dies (``kill -9`` too): a lock file left by a dead process is simply taken over.
    The file is removed when the block ends (while still held, so that no one locks a file about to go; a
    process that opened it before is sent to the new one: :func:`_locked`)."""
    handle = _locked(lock, named)
    try:
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
            raise OutputError(f"{named} cannot be locked: {str(lock)!r} cannot be made ({error.strerror})") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise OutputInUseError(
                f"{named} is in use by another process ({_holder_text(holder)}): wait for it to end, or stop it"
            ) from None
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
    """``pid 4242: quarto grade random`` from a lock file's ``4242 quarto grade random``."""
    pid, _, command = holder.partition(" ")
    return f"pid {pid or 'unknown'}" + (f": {command}" if command else "")


def this_command() -> str:
    """This process's command line, as a lock file records it: ``quarto grade random --out g``."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if program in ("cli.py", "__main__.py"):  # python -m experiments.cli
        program = "quarto"
    return shlex.join([program, *sys.argv[1:]])
