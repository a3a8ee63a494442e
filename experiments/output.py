"""The one output discipline of every ``quarto`` command that writes: :func:`claim_output`.

- **One refusal of a bad path.** A path of the wrong sort (a folder named as a file, a device, an unwritable
  place) is refused by :func:`check_output_path` alone, the check that :func:`claim_output` makes first: one line,
  ``PROG: message``, exit status 2, before any work. A command claims its outputs before it works, so no earlier
  check is needed (and one at parse time would create folders for a command line refused later).
- **Nothing is replaced unasked.** An output that already holds a result is refused before any work, in one line
  naming ``--overwrite`` (and ``--resume`` where the run can go on), exit status 2.
- **One writer at a time.** The writer holds an exclusive ``flock`` on its output for its whole life
  (:func:`hold_lock`, the lock of :mod:`agents.storage.files` that sample datasets take too): ``RUN/.lock`` inside a run
  folder, ``.NAME.lock`` beside a file or a staged folder. A second writer is refused in one line naming the first
  (its pid and command). The kernel drops the lock of a process that dies, ``kill -9`` included, so the lock file
  a dead process left blocks nobody, and the next writer clears what it left: its temporary files and staging
  folder (:func:`agents.storage.files.remove_orphans_of`).
- **Whole or not at all.** A file is written by :func:`agents.storage.files.atomic_write` (a temporary file beside it,
  then one rename). A result of several files (kind ``folder``) is written into a staging folder beside it and
  made visible by one rename when the block ends without an error: a failure at any point leaves the previous
  result or nothing, never half a folder. A run folder that grows over time (kind ``run``: ``quarto train``,
  ``quarto tournament``, which ``--resume`` continues) cannot be staged whole: there each file is atomic and the
  folder is locked. An output named by a link: a file or a staged folder replaces the link (what it points to
  is left as it was, and no link stays aside); a run folder is written through it.
- **A late write failure is one line.** An ``OSError`` on the output's paths inside the block (a path taken by
  a folder, a folder made unwritable, a full disk, a file over the size limit) becomes one line naming the path
  and the cause, exit status :data:`WRITE_FAILED`, with no temporary file left behind: a run's temporaries are
  removed, a staging folder too (one that failed only at its last rename is kept, and named).
- **An empty path is refused as empty**: ``Path("")`` would be ``.``, the current folder.
- **Nothing written, nothing left.** The folders a claim makes for its output (and its lock) are removed when the
  block ends with them empty: a command refused or stopped before it writes leaves no empty folder behind.

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
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from agents.storage import files
from agents.storage.files import (
    OutputPathError,
    aside_path,
    is_temporary_name,
    named_path,
    output_file,
    output_folder,
    output_parent,
    remove_entry,
    remove_orphan_temporaries,
    remove_orphans_of,
    staging_folder_beside,
)
from experiments.options import USAGE_ERROR, refuse
from quarto_env.errors import QuartoError

WRITE_FAILED = 1
"""The exit status of a write that failed late, through no fault of the command line."""
LOCK_FILE = ".lock"
"""The file inside a run folder that its writer keeps locked."""

Kind = Literal["file", "folder", "run"]
"""``file``: one file, written atomically; ``folder``: several files, staged and published by one rename;
``run``: a folder that grows over the run (and that ``--resume`` continues), each file atomic."""

_DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG)
"""Errors of a write that name no file (a ``write`` on an open file) but are the output's all the same: a full
disk or quota, a read-only or failing one, a file over the size limit (``ulimit -f``; ``EFBIG`` where
``SIGXFSZ`` is ignored)."""


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
            if entry.name != LOCK_FILE:
                remove_entry(entry)


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
        checked = _output_path(path, option)
        with (
            made_folders_removed_if_empty(checked if kind == "run" else checked.parent),
            _claimed(checked, kind, option, overwrite, resume, holds_result, resume_hint) as output,
        ):
            yield output
    except OutputError as error:
        if prog is None:
            raise
        refuse(prog, str(error), error.status)


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
    check_output_path(path, kind, option)
    lock = path / LOCK_FILE if kind == "run" else path.parent / f".{path.name}.lock"
    with hold_lock(lock, named):
        # What a writer killed mid-work left (kill -9, a power cut): ours to clear, now that we hold the lock.
        if kind == "run":
            remove_orphan_temporaries(path)
        else:
            remove_orphans_of(path)
        earlier = (holds_result or _holds_anything)(path)
        if earlier and not (overwrite or resume):
            raise OutputExistsError(_exists_text(named, path, kind, resume_hint))
        staging = _staging_folder(named, path) if kind == "folder" else path
        output = Output(path, kind, option, staging, replaces=earlier and overwrite)
        settled = False  # the staging folder published, or kept and named: not to be removed
        try:
            with _writer_threads_quiet(output):
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


@contextlib.contextmanager
def made_folders_removed_if_empty(folder: Path) -> Iterator[None]:
    """``folder`` and those of its parents that do not exist yet (claiming an output makes them, for its lock)
    are removed when the block ends if they are empty: a command refused or stopped before it wrote anything
    leaves no empty folders behind. One that holds anything (the result, another writer's lock) stays."""
    missing = [f for f in [folder, *folder.parents] if not os.path.lexists(f)]
    try:
        yield
    finally:
        for made in missing:  # deepest first
            with contextlib.suppress(OSError, ValueError):  # ValueError: a path the OS refuses (a NUL byte)
                made.rmdir()


def _output_path(path: str | Path, option: str) -> Path:
    """``path`` as a ``Path``, refused if it is empty (``Path("")`` is ``.``, the current folder)."""
    try:
        return named_path(path, option)
    except OutputPathError as error:
        raise OutputError(str(error)) from None


def check_output_path(path: str | Path, kind: Kind, option: str = "--out") -> Path:
    """``path`` as an output of ``kind``, named on the command line by ``option``: :class:`OutputError` for a path of
    the wrong sort (empty, a folder where a file is wanted, a device, an unwritable place), creating the folders it
    needs. The one check of an output path: :func:`claim_output` makes it first, and an output that is written
    without a claim (a value cache that is read, then rewritten) makes it alone."""
    path = _output_path(path, option)
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
    return path


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
    try:
        return staging_folder_beside(path)
    except OSError as error:
        raise OutputError(f"{named} cannot be written: no folder can be made beside it ({error.strerror})") from None


def _publish(named: str, output: Output) -> None:
    """Make the staging folder ``output.path`` by one rename (moving an earlier result aside first, then removing
    it); an empty one is removed instead. A link at ``output.path`` is the output's name, not its place: the
    result replaces the link, as a file output's rename does, and what it points to is left as it was.
    :class:`OutputWriteError` naming where the results are kept if the rename fails."""
    if not any(output.staging.iterdir()):
        output.staging.rmdir()
        return
    path, aside = output.path, None
    try:
        if os.path.islink(path) or _holds_anything(path):
            if _holds_anything(path) and not output.replaces:  # made by a writer that does not lock, meanwhile
                raise OSError(errno.EEXIST, "a result appeared there meanwhile", str(path))
            aside = aside_path(path)
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
        remove_entry(aside)  # a link named as the output goes, never what it points to


@contextlib.contextmanager
def _writer_threads_quiet(output: Output) -> Iterator[None]:
    """Within the block, a thread that dies of a write into ``output`` prints no traceback. TensorBoard writes its
    events in a thread of its own: a full disk or a file-size limit kills that thread, whose writer then raises the
    same error in the main thread at its next call -- the one line that :func:`claim_output` prints. Other errors,
    and other threads' failures, are printed as always."""
    previous = threading.excepthook

    def hook(failure: threading.ExceptHookArgs) -> None:
        if not (isinstance(failure.exc_value, OSError) and _concerns(failure.exc_value, output)):
            previous(failure)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


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
    """:func:`agents.storage.files.hold_lock` (the one lock of every writer, sample datasets' too), its refusals an
    :class:`OutputError`: :class:`OutputInUseError` where another writer holds it."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(files.hold_lock(lock, named))
        except files.InUseError as error:
            raise OutputInUseError(str(error)) from None
        except OutputPathError as error:
            raise OutputError(str(error)) from None
        yield
