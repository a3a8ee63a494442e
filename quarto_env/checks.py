"""Checks of user input and safe file writing: the one place every command, agent spec and env flag uses.

- :func:`checked_number` and :func:`number_parser`: a number is finite and within its range, or the error
  names the field, the value and what is allowed. NaN and infinity never pass: a ``time=nan`` budget would
  never run out. :func:`number_argument` is the argparse ``type=`` of a numeric option.
- :func:`output_file` and :func:`output_folder`: a path the user named for output is checked before any work
  starts -- not a folder where a file is wanted (or the reverse), not a device such as ``/dev/null``, in a
  place where a file can be made (tried: root passes the permission bits in ``/proc`` or on a read-only
  mount), under a name the file system takes -- so that nothing is computed only to be lost.
  :func:`output_file_argument` is the argparse ``type=`` of an output-file option.
- :func:`shortened`: the user's input quoted back in a message, cut to its first 80 characters.
- :func:`atomic_write` (and ``_bytes``, ``_text``): a reader never sees half a file; a run killed mid-write
  leaves at most an orphan temporary file, which :func:`remove_orphan_temporaries` clears.
- :func:`checked_first_player` and :func:`checked_penalty`: the flags that ``quarto_v1`` and
  :class:`quarto_env.vector.VectorQuarto` take beside the rules (which :meth:`quarto_env.core.Variant.make` checks).

Standard library only, like the rules core.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

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
    # An integer stays an int: exact however large (a float would round 2**60 + 1 or overflow at 10**400).
    number = int(value) if isinstance(value, numbers.Integral) else float(value)
    if (
        not _finite(number, integer)
        or (minimum is not None and number < minimum)
        or (above is not None and number <= above)
        or (maximum is not None and number > maximum)
    ):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return int(number) if integer else float(number)


def _finite(number: float, integer: bool) -> bool:
    """Whether ``number`` is finite -- and whole with ``integer``, or within a float's range without it."""
    if isinstance(number, int):
        return integer or number.bit_length() <= 1023  # float(number) may overflow beyond
    return math.isfinite(number) and (number.is_integer() or not integer)


def number_parser(
    name: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
) -> Callable[[str], float]:
    """A parser of text into a number checked by :func:`checked_number`, raising ``ValueError`` with the full
    message: an agent-spec option type (for argparse, :func:`number_argument` shows that message)."""

    def parse(text: str) -> float:
        number: float
        try:
            number = int(text)  # exact, however large
        except ValueError:
            try:
                number = float(text)  # "2.0" and "1e3" name integers too
            except ValueError:
                raise ValueError(f"{name} must be {allowed}, got {text!r}") from None
        return checked_number(number, name, minimum=minimum, above=above, maximum=maximum, integer=integer)

    allowed = _describe_range(minimum, above, maximum, integer)
    parse.__name__ = name  # what argparse shows in "invalid <name> value"
    return parse


def number_argument(
    name: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
) -> Callable[[str], float]:
    """:func:`number_parser` as an argparse ``type=`` that shows its whole message ("argument --delay: delay must
    be a finite number > 0, got 'nan'"; for a plain ``ValueError`` argparse prints only "invalid delay value")."""
    return _argument_type(number_parser(name, minimum=minimum, above=above, maximum=maximum, integer=integer))


_Parsed = TypeVar("_Parsed")


def _argument_type(parse: Callable[[str], _Parsed]) -> Callable[[str], _Parsed]:
    """``parse`` raising ``argparse.ArgumentTypeError`` for its ``ValueError``: argparse prints that message as
    it is, after the option's name."""
    import argparse  # here: the rules core and the env import this module, and need no argparse

    def parse_argument(text: str) -> _Parsed:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse_argument


ECHO_LIMIT = 80
"""The most characters of the user's input that a message or an answer quotes back."""


def shortened(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` itself up to ``limit`` characters; else its first ``limit`` characters, ``...`` and its length,
    so that an error about a 1 MB line does not print that line again."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def one_line(message: object, limit: int = 4 * ECHO_LIMIT) -> str:
    """``message`` (an exception or text) on one line -- every run of whitespace, newlines included, one space --
    and :func:`shortened` to ``limit`` characters: for a message that quotes a library's error, such as torch's
    list of missing keys."""
    return shortened(" ".join(str(message).split()), limit)


def _describe_range(minimum: float | None, above: float | None, maximum: float | None, integer: bool) -> str:
    kind = "an integer" if integer else "a finite number"
    bounds = [f">= {_bound(minimum)}" if minimum is not None else "", f"> {_bound(above)}" if above is not None else ""]
    bounds.append(f"<= {_bound(maximum)}" if maximum is not None else "")
    bounds = [b for b in bounds if b]
    return f"{kind} {' and '.join(bounds)}" if bounds else kind


def _bound(bound: float) -> str:
    """A bound as the user would type it: ``4294967295`` and ``86400``, not ``4.29497e+09``; ``0.5`` and ``1e-06``."""
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e16 else f"{bound:g}"


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


def output_file_argument(what: str) -> Callable[[str], Path]:
    """:func:`output_file` as an argparse ``type=``: the path is checked as the command line is read, before
    any work starts, and a bad one is a one-line usage error naming ``what`` (the option)."""
    return _argument_type(lambda text: output_file(text, what))


def output_folder(path: str | Path, what: str) -> Path:
    """``path`` as a folder this process can create or write into; :class:`OutputPathError` naming ``what``
    if it is a file or a device, or lies where nothing can be written."""
    path = Path(path)
    if os.path.exists(path) and not path.is_dir():
        raise OutputPathError(f"{what} {str(path)!r} is a file, not a folder")
    _writable_folder(path, what, path, probe=path / "probe")
    return path


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


# ---------------------------------------------------------------------------------------------------------
# The environments' flags beside the rules
# ---------------------------------------------------------------------------------------------------------
AGENTS = ("player_0", "player_1")
"""The two seats at the table, ``player_0`` and ``player_1``."""
FIRST_PLAYER_CHOICES = ("random", 0, 1, *AGENTS)
"""What ``first_player`` takes: a draw from the seed, or the seat that gives first."""


def checked_first_player(value: object) -> int | None:
    """The seat (0 or 1) that ``first_player`` makes give first, or ``None`` for ``"random"``, a draw from the
    seed; ``ValueError`` naming the allowed values otherwise."""
    if isinstance(value, bool) or value not in FIRST_PLAYER_CHOICES:
        allowed = ", ".join(repr(c) for c in FIRST_PLAYER_CHOICES)
        raise ValueError(f"first_player must be one of {allowed}; got {value!r}")
    if value == "random":
        return None
    return AGENTS.index(value) if isinstance(value, str) else int(value)


def checked_penalty(value: object) -> float:
    """``false_declaration_penalty``: a finite number <= 0, the reward of an ignored false declaration."""
    return float(checked_number(value, "false_declaration_penalty", maximum=0))
