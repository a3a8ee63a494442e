"""Checks of user input and safe file writing: the one place every command, agent spec and env flag uses.

- :func:`checked_number` and :func:`number_parser`: a number is finite and within its range, or the error
  names the field, the value and what is allowed. NaN and infinity never pass: a ``time=nan`` budget would
  never run out.
- :func:`output_file` and :func:`output_folder`: a path the user named for output is checked before any work
  starts -- not a folder where a file is wanted (or the reverse), not a device such as ``/dev/null``, in a
  place that can be written -- so that nothing is computed only to be lost.
- :func:`atomic_write` (and ``_bytes``, ``_text``): a reader never sees half a file; a run killed mid-write
  leaves at most an orphan temporary file, which :func:`remove_orphan_temporaries` clears.

Standard library only, like the rules core.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

TEMPORARY_SUFFIX = ".tmp"


class OutputPathError(ValueError):
    """A path named for output that cannot be written as asked."""


# ---------------------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------------------
def checked_number(
    value: object,
    name: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
) -> float:
    """``value`` if it is a finite number (an integer, with ``integer``) with ``value >= minimum``,
    ``value > above`` and ``value <= maximum`` (each bound optional); ``ValueError`` naming ``name``, the
    value and the allowed range otherwise. Booleans are not numbers here."""
    allowed = _describe_range(minimum, above, maximum, integer)
    if isinstance(value, bool | str) or not isinstance(value, numbers.Real):  # numpy's scalars are Real too
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    number = float(value)
    if (
        not math.isfinite(number)
        or (integer and not number.is_integer())
        or (minimum is not None and number < minimum)
        or (above is not None and number <= above)
        or (maximum is not None and number > maximum)
    ):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return int(number) if integer else number


def number_parser(
    name: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
) -> Callable[[str], float]:
    """A parser of text into a number checked by :func:`checked_number`: an argparse ``type=`` or an agent-spec
    option type. It raises ``ValueError`` with the full message (argparse prints it as it is when the parser
    is named after the option, which ``__name__`` does)."""

    def parse(text: str) -> float:
        try:
            number: float = int(text) if integer else float(text)
        except (TypeError, ValueError):
            if integer:  # "2.0" or "1e3" name integers too
                try:
                    number = float(text)
                except (TypeError, ValueError):
                    raise ValueError(f"{name} must be {allowed}, got {text!r}") from None
            else:
                raise ValueError(f"{name} must be {allowed}, got {text!r}") from None
        return checked_number(number, name, minimum=minimum, above=above, maximum=maximum, integer=integer)

    allowed = _describe_range(minimum, above, maximum, integer)
    parse.__name__ = name  # what argparse shows in "invalid <name> value"
    return parse


def _describe_range(minimum: float | None, above: float | None, maximum: float | None, integer: bool) -> str:
    kind = "an integer" if integer else "a finite number"
    bounds = [f">= {minimum:g}" if minimum is not None else "", f"> {above:g}" if above is not None else ""]
    bounds.append(f"<= {maximum:g}" if maximum is not None else "")
    bounds = [b for b in bounds if b]
    return f"{kind} {' and '.join(bounds)}" if bounds else kind


# ---------------------------------------------------------------------------------------------------------
# Output paths
# ---------------------------------------------------------------------------------------------------------
def output_file(path: str | Path, what: str, *, overwrite: bool = True) -> Path:
    """``path`` as a file this process can write (creating its folder if need be); :class:`OutputPathError`
    naming ``what`` if it is a folder or a device, already exists while ``overwrite`` is false, or lies where
    nothing can be written."""
    path = Path(path)
    if path.exists():
        if path.is_dir():
            raise OutputPathError(f"{what} {str(path)!r} is a folder; name a file")
        if not stat.S_ISREG(path.stat().st_mode):
            raise OutputPathError(f"{what} {str(path)!r} is not a regular file (a device or a pipe)")
        if not overwrite:
            raise OutputPathError(f"{what} {str(path)!r} already exists; remove it or name another file")
        if not os.access(path, os.W_OK):
            raise OutputPathError(f"{what} {str(path)!r} cannot be written (permission denied)")
    _writable_folder(path.parent, what, path)
    return path


def output_folder(path: str | Path, what: str) -> Path:
    """``path`` as a folder this process can create or write into; :class:`OutputPathError` naming ``what``
    if it is a file or a device, or lies where nothing can be written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{what} {str(path)!r} is a file, not a folder")
    _writable_folder(path, what, path)
    return path


def _writable_folder(folder: Path, what: str, named: Path) -> None:
    """Create ``folder`` if need be and check that files can be made in it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputPathError(f"{what} {str(named)!r}: {str(folder)!r} is a file, not a folder") from None
    except OSError as error:
        raise OutputPathError(f"{what} {str(named)!r} cannot be created: {error.strerror or error}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{what} {str(named)!r} cannot be written: folder {str(folder)!r} is read-only")


# ---------------------------------------------------------------------------------------------------------
# Atomic writes
# ---------------------------------------------------------------------------------------------------------
def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call ``write(temporary)`` on a fresh file beside ``path`` (same file system, so the rename is atomic), then
    ``os.replace`` it onto ``path``: a reader never sees half a file. The temporary name ends with ``path``'s
    suffix, so that writers that pick a format from it (Pillow, matplotlib) pick the right one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX + path.suffix, dir=path.parent)
    os.close(fd)
    temporary = Path(name)
    try:
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes the file private; give it the usual permissions
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
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


def remove_orphan_temporaries(folder: str | Path) -> list[Path]:
    """Remove the temporary files that :func:`atomic_write` leaves in ``folder`` when its process is killed
    mid-write; returns them. Call it only where no other process is writing into ``folder``."""
    orphans = [p for p in Path(folder).glob(".*") if p.is_file() and _TEMPORARY_NAME.fullmatch(p.name)]
    for orphan in orphans:
        orphan.unlink(missing_ok=True)
    return orphans


_TEMPORARY_NAME = re.compile(r"\..+\.[^.]+" + re.escape(TEMPORARY_SUFFIX) + r"(\.\w+)?")
"""``.NAME.RANDOM.tmp`` plus NAME's suffix: the temporary files of :func:`atomic_write`."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
