"""Tests of :mod:`quarto_env.checks` (finite, in-range numbers with messages that name the field and what is
allowed), :mod:`agents.storage.files` (output paths checked before any work; atomic writes that never leave half a file,
and the clean-up of the temporaries a killed writer leaves) and the argparse types of :mod:`experiments.options`."""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.storage.files import (
    TEMPORARY_SUFFIX,
    OutputPathError,
    atomic_write,
    atomic_write_bytes,
    atomic_write_text,
    output_file,
    output_folder,
    remove_orphan_temporaries,
)
from experiments.options import number_argument
from quarto_env.checks import ECHO_LIMIT, checked_number, number_parser, one_line, shortened

REPO = Path(__file__).resolve().parent.parent
AS_ROOT = os.geteuid() == 0
"""Root writes into read-only folders, so the permission cases cannot be made as root."""
UNWRITABLE = Path("/proc/quarto-checks-test")
"""A place where no one, root included, can create anything (Linux's process file system)."""

FUZZ = settings(max_examples=300, deadline=None, database=None)  # database=None: nothing written in the checkout


def temporary_of(path: Path) -> Path:
    """A temporary file named as :func:`atomic_write` names its own (``.NAME.RANDOM.tmp`` + NAME's suffix), made
    the same way: what a writer killed mid-write leaves behind."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX + path.suffix, dir=path.parent)
    os.write(fd, b"half a fi")
    os.close(fd)
    return Path(name)


def case_id(value: object) -> str:
    """A short test id: a long text shows its start and its length."""
    text = repr(value) if not isinstance(value, dict) else ",".join(f"{k}={v}" for k, v in value.items())
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} chars)"


# ---------------------------------------------------------------------------------------------------------
# checked_number
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "bounds", "expected"),
    [
        (0, {}, 0.0),
        (-3.5, {}, -3.5),
        (1e308, {}, 1e308),
        (2, {"minimum": 2}, 2.0),
        (16, {"minimum": 1, "maximum": 16}, 16.0),
        (1e-9, {"above": 0}, 1e-9),
        (np.float32(0.5), {"above": 0, "maximum": 1}, 0.5),
        (np.int64(7), {"minimum": 0}, 7.0),
    ],
    ids=case_id,
)
def test_checked_number_accepts_finite_numbers_in_range(value: object, bounds: dict, expected: float) -> None:
    result = checked_number(value, "x", **bounds)
    assert result == expected
    assert type(result) is float


@pytest.mark.parametrize("value", [3, 3.0, np.int32(3), np.float64(3.0), 2**62])
def test_checked_number_gives_an_int_for_integers(value: object) -> None:
    result = checked_number(value, "depth", minimum=1, integer=True)
    assert result == int(value)  # type: ignore[call-overload]
    assert type(result) is int


@pytest.mark.parametrize(
    ("value", "bounds"),
    [
        (math.nan, {}),
        (math.inf, {}),
        (-math.inf, {}),
        (np.float64("nan"), {}),
        (np.float32("inf"), {"above": 0}),
        (math.inf, {"minimum": 0}),  # infinity is never "within range", even with no maximum
        (-math.inf, {"maximum": 0}),
        ("3", {}),
        ("nan", {}),
        ("", {}),
        (b"3", {}),
        (None, {}),
        (True, {}),
        (False, {"minimum": 0}),
        (np.bool_(True), {}),
        (1 + 2j, {}),
        ([1], {}),
        (0, {"minimum": 1}),
        (-1, {"minimum": 0}),
        (0, {"above": 0}),
        (-1e-300, {"above": 0}),
        (17, {"minimum": 1, "maximum": 16}),
        (1e308, {"maximum": 86400}),
        (2.5, {"integer": True}),
        (1e-9, {"integer": True}),
        (np.float64(3.5), {"minimum": 1, "integer": True}),
        (math.nan, {"integer": True}),
    ],
    ids=case_id,
)
def test_checked_number_refuses_with_a_message_naming_the_field_value_and_range(value: object, bounds: dict) -> None:
    with pytest.raises(ValueError) as caught:
        checked_number(value, "the_field", **bounds)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the_field must be ")
    assert repr(value) in message
    assert ("an integer" if bounds.get("integer") else "a finite number") in message
    for word, bound in (("minimum", ">="), ("above", ">"), ("maximum", "<=")):
        if word in bounds:
            assert f"{bound} {bounds[word]:g}" in message


def test_checked_number_message_lists_every_bound() -> None:
    with pytest.raises(ValueError, match=r"^time must be a finite number > 0 and <= 86400, got nan$"):
        checked_number(math.nan, "time", above=0, maximum=86400)
    with pytest.raises(ValueError, match=r"^empties must be an integer >= 1 and <= 16, got 99$"):
        checked_number(99, "empties", minimum=1, maximum=16, integer=True)


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**1024], ids=["10**400", "-10**400", "2**1024"])
def test_a_huge_integer_is_exact_or_refused_never_an_overflow(value: int) -> None:
    """``float(10**400)`` overflows: an integer field keeps it exact or refuses it, a float field refuses it,
    and neither lets an ``OverflowError`` out."""
    try:
        assert checked_number(value, "seed", integer=True) == value
    except ValueError as error:
        assert str(error).startswith("seed must be ")
    with pytest.raises(ValueError, match=r"^seed must be a finite number"):
        checked_number(value, "seed")
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0 and <= "):
        checked_number(value, "seed", minimum=0, maximum=2**32 - 1, integer=True)


BOUNDS = st.fixed_dictionaries(
    {},
    optional={
        "minimum": st.floats(-1e6, 1e6),
        "above": st.floats(-1e6, 1e6),
        "maximum": st.floats(-1e6, 1e6),
        "integer": st.booleans(),
    },
)


@FUZZ
@given(value=st.one_of(st.floats(), st.integers(-(2**53), 2**53)), bounds=BOUNDS)  # ints a float holds exactly
def test_checked_number_accepts_exactly_the_finite_numbers_in_range(value: float, bounds: dict) -> None:
    number = float(value)
    allowed = (
        math.isfinite(number)
        and (not bounds.get("integer") or number.is_integer())
        and ("minimum" not in bounds or number >= bounds["minimum"])
        and ("above" not in bounds or number > bounds["above"])
        and ("maximum" not in bounds or number <= bounds["maximum"])
    )
    if allowed:
        assert checked_number(value, "x", **bounds) == (int(number) if bounds.get("integer") else number)
    else:
        with pytest.raises(ValueError, match=r"^x must be "):
            checked_number(value, "x", **bounds)


# ---------------------------------------------------------------------------------------------------------
# number_parser
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        ("2", {}, 2.0),
        ("-2.5", {}, -2.5),
        ("1e-3", {"above": 0}, 0.001),
        (" 0.25 ", {"above": 0}, 0.25),
        ("16", {"minimum": 1, "maximum": 16, "integer": True}, 16),
        ("2.0", {"integer": True}, 2),  # an integer written as a float
        ("1e3", {"integer": True}, 1000),
        ("86400", {"above": 0, "maximum": 86400}, 86400.0),
    ],
    ids=case_id,
)
def test_number_parser_accepts(text: str, options: dict, expected: float) -> None:
    result = number_parser("n", **options)(text)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("text", "options"),
    [
        ("nan", {}),
        ("NaN", {}),
        ("-nan", {}),
        ("inf", {}),
        ("-inf", {}),
        ("Infinity", {}),
        ("1e400", {}),  # overflows to infinity
        ("", {}),
        ("   ", {}),
        ("abc", {}),
        ("1e", {}),
        ("0x10", {}),
        ("1_0.5x", {}),
        ("∞", {}),
        ("½", {}),
        ("一", {}),
        ("3 4", {}),
        ("0", {"above": 0}),
        ("-1", {"minimum": 0}),
        ("17", {"minimum": 1, "maximum": 16, "integer": True}),
        ("1e308", {"above": 0, "maximum": 86400}),
        ("2.5", {"integer": True}),
        ("nan", {"integer": True}),
        ("inf", {"integer": True}),
        ("1e400", {"integer": True}),
        ("9" * 400, {}),  # beyond a float's range
        ("9" * 400, {"integer": True, "maximum": 16}),
    ],
    ids=case_id,
)
def test_number_parser_refuses_with_a_message_naming_the_field(text: str, options: dict) -> None:
    parse = number_parser("the_option", **options)
    with pytest.raises(ValueError) as caught:
        parse(text)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the_option must be ")
    assert ("an integer" if options.get("integer") else "a finite number") in message


def test_number_parser_is_named_after_its_field() -> None:
    """argparse shows ``invalid <__name__> value``; the message itself names the field."""
    assert number_parser("seconds", above=0).__name__ == "seconds"


@FUZZ
@given(text=st.text(max_size=30), integer=st.booleans())
def test_number_parser_on_any_text_returns_a_checked_number_or_raises_value_error(text: str, integer: bool) -> None:
    parse = number_parser("n", minimum=-100, maximum=100, integer=integer)
    try:
        number = parse(text)
    except ValueError as error:
        assert str(error).startswith("n must be ")
    else:
        assert math.isfinite(number) and -100 <= number <= 100
        assert not integer or type(number) is int


@pytest.mark.parametrize(
    ("bounds", "allowed"),
    [
        ({"minimum": 0, "maximum": 2**32 - 1, "integer": True}, "an integer >= 0 and <= 4294967295"),
        ({"above": 0, "maximum": 86400}, "a finite number > 0 and <= 86400"),
        ({"minimum": 0.01, "maximum": 60}, "a finite number >= 0.01 and <= 60"),
        ({"above": 0.5}, "a finite number > 0.5"),
        ({"minimum": 1e-6}, "a finite number >= 1e-06"),
        ({"maximum": 1e20}, "a finite number <= 1e+20"),
    ],
)
def test_bounds_are_written_as_a_user_would_type_them(bounds: dict, allowed: str) -> None:
    with pytest.raises(ValueError, match=f"^x must be {re.escape(allowed)}, got"):
        checked_number(math.nan, "x", **bounds)


def parser_with(**types: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quarto test")
    for option, kind in types.items():
        parser.add_argument(f"--{option}", type=kind)  # type: ignore[arg-type]
    return parser


def test_the_argparse_hooks_that_the_command_parser_overrides_still_exist() -> None:
    """:class:`~experiments.options.CommandParser` tells a refused value from a syntax error by two private methods
    of argparse (no public hook tells them apart), and its help formatter adds the defaults where argparse's own
    ``ArgumentDefaultsHelpFormatter`` does: a Python release that renamed one would silently print the usage for a
    bad value, or no default, so this fails first."""
    from experiments.options import CommandParser, DefaultsHelpFormatter

    for owner, ours, name in [
        (argparse.ArgumentParser, CommandParser, "_get_value"),
        (argparse.ArgumentParser, CommandParser, "_check_value"),
        (argparse.ArgumentDefaultsHelpFormatter, DefaultsHelpFormatter, "_get_help_string"),
    ]:
        assert name in vars(owner) and name in vars(ours), name


def test_number_argument_is_an_argparse_type_whose_message_argparse_shows_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = parser_with(delay=number_argument("delay", above=0, maximum=60))
    assert parser.parse_args(["--delay", "0.5"]).delay == 0.5
    with pytest.raises(argparse.ArgumentTypeError, match=r"^delay must be a finite number > 0 and <= 60, got nan$"):
        number_argument("delay", above=0, maximum=60)("nan")
    for text in ["nan", "inf", "-1", "61", "abc", ""]:
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args([f"--delay={text}"])
        assert exit_.value.code == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        prefix = "quarto test: error: argument --delay: delay must be a finite number > 0 and <= 60, got "
        assert last.startswith(prefix)


def test_shortened_quotes_a_long_text_by_its_start_and_length() -> None:
    assert shortened("short") == "short"
    assert shortened("x" * ECHO_LIMIT) == "x" * ECHO_LIMIT
    assert shortened("y" * 1_000_000) == "y" * ECHO_LIMIT + "... (1,000,000 characters)"
    assert shortened("abcdef", limit=3) == "abc... (6 characters)"


def test_one_line_puts_a_message_on_one_line_and_shortens_it() -> None:
    assert one_line("a\n  b\tc\r\n") == "a b c"
    assert one_line(ValueError("line 1\nline 2")) == "line 1 line 2"
    long = one_line("word " * 1000)
    assert "\n" not in long and long.endswith("(4,999 characters)") and len(long) < 400


# ---------------------------------------------------------------------------------------------------------
# output_file and output_folder
# ---------------------------------------------------------------------------------------------------------
def test_output_file_accepts_a_new_or_existing_file_and_makes_its_folder(tmp_path: Path) -> None:
    new = tmp_path / "a" / "b" / "out.json"
    assert output_file(new, "--out") == new
    assert new.parent.is_dir() and not new.exists()  # the folder is made, the file is not
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    assert output_file(existing, "--out") == existing
    assert output_file(str(existing), "--out") == existing  # a str too


def test_output_file_refuses_a_folder(tmp_path: Path) -> None:
    with pytest.raises(OutputPathError, match=r"--save '.*' is a folder; name a file"):
        output_file(tmp_path, "--save")


def test_output_file_refuses_a_device() -> None:
    with pytest.raises(OutputPathError, match=r"--gif '/dev/null' is not a regular file"):
        output_file("/dev/null", "--gif")


def test_output_file_refuses_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match="not a regular file"):
        output_file(fifo, "--gif")


def test_output_file_refuses_an_existing_file_unless_told_to_overwrite(tmp_path: Path) -> None:
    existing = tmp_path / "game.jsonl"
    existing.write_text("kept\n")
    with pytest.raises(OutputPathError, match=r"--save '.*game\.jsonl' already exists"):
        output_file(existing, "--save", overwrite=False)
    assert existing.read_text() == "kept\n"
    assert output_file(tmp_path / "new.jsonl", "--save", overwrite=False) == tmp_path / "new.jsonl"


@pytest.mark.parametrize("below", ["x.json", "sub/x.json"])
def test_output_file_refuses_a_path_under_a_regular_file(tmp_path: Path, below: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OutputPathError, match="--out"):
        output_file(blocker / below, "--out")
    assert blocker.read_text() == "not a folder"


def test_output_file_refuses_a_place_nothing_can_be_created() -> None:
    with pytest.raises(OutputPathError, match="cannot be"):
        output_file(UNWRITABLE / "out.json", "--out")


@pytest.mark.parametrize("folder", ["/proc", "/sys"])
def test_output_file_refuses_a_system_folder_that_passes_the_permission_bits(folder: str) -> None:
    # The folder exists and, to root, looks writable; only making a file there tells.
    with pytest.raises(OutputPathError, match=f"--out '{folder}/x.json' cannot be written"):
        output_file(f"{folder}/x.json", "--out")


def test_output_paths_refuse_a_name_too_long_for_the_file_system(tmp_path: Path) -> None:
    long = "a" * 300
    with pytest.raises(OutputPathError, match=r"the file name \(305 characters\) is too long for the file system"):
        output_file(tmp_path / f"{long}.json", "--out")
    with pytest.raises(OutputPathError, match=r"--frames '.*' cannot be created: File name too long"):
        output_folder(tmp_path / long, "--frames")
    # short enough as a name, too long once the temporary file's prefix and suffix are added to it
    with pytest.raises(OutputPathError, match="is too long for the file system"):
        output_file(tmp_path / f"{'a' * 245}.json", "--out")
    assert list(tmp_path.iterdir()) == []


def test_the_write_check_leaves_nothing_behind(tmp_path: Path) -> None:
    output_file(tmp_path / "out.json", "--out")
    output_folder(tmp_path / "run", "--out")
    assert [p.name for p in tmp_path.rglob("*")] == ["run"]


@pytest.mark.skipif(AS_ROOT, reason="root can write into a read-only folder")
def test_output_file_refuses_a_read_only_folder_and_file(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "old.json").write_text("{}")
    (folder / "old.json").chmod(0o400)
    folder.chmod(0o500)
    try:
        with pytest.raises(OutputPathError, match="read-only"):
            output_file(folder / "new.json", "--out")
        with pytest.raises(OutputPathError, match="cannot be written"):
            output_file(folder / "old.json", "--out")
        with pytest.raises(OutputPathError, match="cannot be"):
            output_file(folder / "sub" / "new.json", "--out")
    finally:
        folder.chmod(0o700)


def test_output_paths_refuse_a_folder_without_write_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-only cases as the permission check sees them, which runs as root too."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "old.json").write_text("{}")
    real_access = os.access

    def access(path: str | os.PathLike, mode: int, **kwargs: object) -> bool:
        return False if Path(path).is_relative_to(locked) else real_access(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(OutputPathError, match=r"--out '.*new\.json' cannot be written: folder '.*locked' is read-only"):
        output_file(locked / "new.json", "--out")
    with pytest.raises(OutputPathError, match=r"cannot be written \(permission denied\)"):
        output_file(locked / "old.json", "--out")
    with pytest.raises(OutputPathError, match="read-only"):
        output_folder(locked, "--frames")


def test_output_folder_accepts_a_new_or_existing_folder(tmp_path: Path) -> None:
    new = tmp_path / "runs" / "t1"
    assert output_folder(new, "--out") == new
    assert new.is_dir()
    assert output_folder(new, "--out") == new


@pytest.mark.parametrize("name", ["file", "/dev/null"])
def test_output_folder_refuses_a_file_or_a_device(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name == "file":
        path.write_text("x")
    with pytest.raises(OutputPathError, match=r"--run-dir '.*' is a file, not a folder"):
        output_folder(path, "--run-dir")


@pytest.mark.parametrize("below", ["run", "a/b/run"])
def test_output_folder_refuses_a_path_under_a_regular_file(tmp_path: Path, below: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputPathError, match="--frames"):
        output_folder(blocker / below, "--frames")


def test_output_folder_refuses_a_place_nothing_can_be_created() -> None:
    with pytest.raises(OutputPathError, match=r"--out '/proc/quarto-checks-test/run' cannot be created"):
        output_folder(UNWRITABLE / "run", "--out")


@pytest.mark.skipif(AS_ROOT, reason="root can write into a read-only folder")
def test_output_folder_refuses_a_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(OutputPathError, match="read-only"):
            output_folder(folder, "--out")
        with pytest.raises(OutputPathError, match="cannot be created"):
            output_folder(folder / "run", "--out")
    finally:
        folder.chmod(0o700)


# ---------------------------------------------------------------------------------------------------------
# Atomic writes
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def umask_022():  # type: ignore[no-untyped-def]
    """A known umask, so that the expected permissions are known."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_atomic_write_bytes_writes_the_content_with_the_usual_permissions(tmp_path: Path, umask_022: None) -> None:
    path = tmp_path / "new" / "folder" / "data.bin"
    data = bytes(range(256)) * 100
    atomic_write_bytes(path, data)
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's private 0o600
    assert os.listdir(path.parent) == ["data.bin"]


def test_atomic_write_text_writes_utf8_and_replaces_the_old_content(tmp_path: Path, umask_022: None) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("old and much longer content\n" * 10)
    atomic_write_text(path, "name: ünïcode ♜\n")
    assert path.read_bytes() == "name: ünïcode ♜\n".encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["config.yaml"]


def test_atomic_write_gives_the_writer_a_temporary_with_the_same_suffix(tmp_path: Path) -> None:
    seen: list[Path] = []

    def write(temporary: Path) -> None:
        seen.append(temporary)
        temporary.write_bytes(b"GIF89a")

    atomic_write(tmp_path / "game.gif", write)
    (temporary,) = seen
    assert temporary.parent == tmp_path and temporary.suffix == ".gif" and temporary.name.startswith(".game.gif.")
    assert not temporary.exists()
    assert (tmp_path / "game.gif").read_bytes() == b"GIF89a"


@pytest.mark.parametrize("failure", [OSError("disk full"), ValueError("bad data"), KeyboardInterrupt()])
def test_a_failing_writer_keeps_the_old_file_whole_and_leaves_no_temporary(
    tmp_path: Path, failure: BaseException
) -> None:
    path = tmp_path / "latest.zip"
    path.write_bytes(b"the old checkpoint")

    def write(temporary: Path) -> None:
        temporary.write_bytes(b"half of the n")
        raise failure

    with pytest.raises(type(failure)):
        atomic_write(path, write)
    assert path.read_bytes() == b"the old checkpoint"
    assert os.listdir(tmp_path) == ["latest.zip"]


def test_a_failing_writer_of_a_new_file_leaves_nothing(tmp_path: Path) -> None:
    def write(temporary: Path) -> None:
        raise RuntimeError("nothing written")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "results.csv", write)
    assert os.listdir(tmp_path) == []


KILLED_WRITER = """
import os, signal, sys
from agents.storage.files import atomic_write

def write(temporary):
    temporary.write_bytes(b"half of the new conte")
    os.kill(os.getpid(), signal.SIGKILL)  # killed mid-write, as by kill -9

atomic_write(sys.argv[1], write)
"""


def test_a_writer_killed_mid_write_keeps_the_old_file_and_leaves_an_orphan_that_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "latest.zip"
    path.write_bytes(b"the old checkpoint")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], env=env, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL
    assert path.read_bytes() == b"the old checkpoint"
    (orphan,) = [p for p in tmp_path.iterdir() if p != path]
    assert orphan.name.startswith(".latest.zip.") and orphan.name.endswith(".tmp.zip")
    assert remove_orphan_temporaries(tmp_path) == [orphan]
    assert list(tmp_path.iterdir()) == [path]


# ---------------------------------------------------------------------------------------------------------
# remove_orphan_temporaries
# ---------------------------------------------------------------------------------------------------------
REAL_FILES = ["latest.zip", "config.yaml", "games.jsonl", "command.txt", "Makefile", "step_000000512.zip"]
ORDINARY_DOT_FILES = [".gitignore", ".env", ".DS_Store", ".hidden.tmp", ".config.yaml", ".latest.zip"]
"""Dot-files a user may have that only look a little like temporaries."""


def test_remove_orphan_temporaries_removes_exactly_the_temporaries(tmp_path: Path) -> None:
    for name in REAL_FILES + ORDINARY_DOT_FILES + ["latest.zip.tmp", "x.abc.tmp"]:
        (tmp_path / name).write_text(name)
    (tmp_path / ".latest.zip.abcd1234.tmp.zip").mkdir()  # a folder, whatever its name, is not a temporary file
    orphans = {temporary_of(tmp_path / name) for name in REAL_FILES}
    orphans.add(temporary_of(tmp_path / "never-written.json"))  # the file itself need not exist
    kept = {p for p in tmp_path.iterdir() if p not in orphans}

    removed = remove_orphan_temporaries(tmp_path)

    assert sorted(removed) == sorted(orphans)
    assert set(tmp_path.iterdir()) == kept
    for name in REAL_FILES + ORDINARY_DOT_FILES:
        assert (tmp_path / name).read_text() == name
    assert remove_orphan_temporaries(tmp_path) == []


def test_remove_orphan_temporaries_leaves_subfolders_alone(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    nested = temporary_of(tmp_path / "checkpoints" / "latest.zip")
    assert remove_orphan_temporaries(tmp_path) == []
    assert nested.exists()
    assert remove_orphan_temporaries(tmp_path / "checkpoints") == [nested]


def test_remove_orphan_temporaries_in_an_empty_or_missing_folder(tmp_path: Path) -> None:
    assert remove_orphan_temporaries(tmp_path) == []
    assert remove_orphan_temporaries(tmp_path / "missing") == []


def test_an_atomic_write_leaves_nothing_for_remove_orphan_temporaries(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "a.txt", "a")
    atomic_write_bytes(tmp_path / ".hidden", b"b")
    assert remove_orphan_temporaries(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden", "a.txt"]
