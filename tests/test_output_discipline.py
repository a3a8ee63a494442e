"""The one output discipline of every ``quarto`` command that writes (:mod:`experiments.output`): an existing result
is replaced only with ``--overwrite``, a second writer is refused while the first holds the output, a stale lock is
taken over, and a write that fails late is one line -- the earlier result intact, nothing half-written, no
temporary file left -- after what was computed has been printed. And the core install's arena: a tournament
without matplotlib writes everything but its picture and exits 0."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agents.storage import files
from experiments import cli, output
from experiments.arena import grade as grade_command

REPOSITORY = Path(__file__).resolve().parent.parent
EARLIER = "an earlier result\n"
BOOK_ROOT = "40f.7....9d..3.b -"


# ---------------------------------------------------------------------------------------------------------
# Fixtures: a games file to replay, a run folder to plot
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def games_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``games.jsonl`` of a two-game tournament between random and greedy."""
    out = tmp_path_factory.mktemp("arena") / "t"
    argv = ["tournament", "random", "greedy", "--games", "2", "--jobs", "1", "--bootstrap", "100", "--no-progress"]
    assert quarto([*argv, "--out", str(out)]) == 0
    return out / "games.jsonl"


def quarto(argv: list[str]) -> int:
    """The exit status of ``quarto ARGV``, run in this process (a refusal exits by ``SystemExit``)."""
    try:
        return cli.main(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (also hidden ones) and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def leftovers(folder: Path) -> list[str]:
    """Hidden names in ``folder``: temporary files, staging folders, locks -- none may stay after a command."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------------------------------------------------
# An existing result is refused without --overwrite, by every command that writes
# ---------------------------------------------------------------------------------------------------------
def _earlier_folder(path: Path, name: str = "config.json") -> None:
    path.mkdir()
    (path / name).write_text(EARLIER)


def _earlier_file(path: Path) -> None:
    path.write_text(EARLIER)


WRITERS: dict[str, tuple[Callable[[Path, Path], list[str]], Callable[[Path], None]]] = {
    "grade": (
        lambda out, _: ["grade", "random", "--positions", "2", "--max-empty", "4", "--no-progress", "--out", str(out)],
        _earlier_folder,
    ),
    "tournament": (
        lambda out, _: ["tournament", "random", "greedy", "--games", "2", "--jobs", "1", "--out", str(out)],
        _earlier_folder,
    ),
    "train": (
        lambda out, _: ["train", "total_steps=64", "--out", str(out)],
        lambda p: _earlier_folder(p, "config.yaml"),
    ),
    "replay --html": (lambda out, games: ["replay", str(games), "--html", str(out)], _earlier_file),
    "replay --gif": (lambda out, games: ["replay", str(games), "--gif", str(out)], _earlier_file),
    "replay --frames": (lambda out, games: ["replay", str(games), "--frames", str(out)], _earlier_folder),
    "dataset": (
        lambda out, _: ["dataset", "--min-empty", "4", "--max-empty", "4", "--no-progress", "--out", str(out)],
        _earlier_file,
    ),
    "suite --build": (
        lambda out, _: ["suite", "standard-v9", "--build", "--games", "6", "--per-stage", "1", "--out", str(out)],
        _earlier_file,
    ),
    "book": (
        lambda out, _: ["book", "--root", BOOK_ROOT, "--min-empty", "6", "--no-progress", "--out", str(out)],
        _earlier_file,
    ),
    "plot": (lambda out, games: ["plot", str(games.parent), "--out", str(out)], _earlier_file),
    "play": (lambda out, _: ["play", "--opponent", "random", "--out", str(out)], _earlier_file),
    "bench env": (lambda out, _: ["bench", "env", "--seconds", "0.01", "--out", str(out)], _earlier_file),
    "bench vector": (lambda out, _: ["bench", "vector", "--seconds", "0.01", "--out", str(out)], _earlier_file),
    "bench solver": (lambda out, _: ["bench", "solver", "--skip-startup", "--out", str(out)], _earlier_file),
    "bench network": (lambda out, _: ["bench", "network", "--json", str(out)], _earlier_file),
    "bench train": (lambda out, _: ["bench", "train", "--steps", "64", "--profile", str(out)], _earlier_file),
}
"""Each command that writes: its command line with the output ``out`` (and the games file of :func:`games_file`
where it reads one), and how an earlier result at ``out`` is made."""


def _no_input(prompt: str = "") -> str:
    raise AssertionError("the command started its work before refusing its output")


@pytest.mark.parametrize("command", list(WRITERS))
def test_an_existing_result_is_refused_without_overwrite(
    command: str,
    games_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv, make_earlier = WRITERS[command]
    # quarto plot writes the image format its suffix names, and refuses a suffix it cannot write first
    out = tmp_path / ("frames" if "--frames" in command else "result.png" if command == "plot" else "result.suffix")
    make_earlier(out)
    before = tree(tmp_path)
    monkeypatch.setattr("builtins.input", _no_input)  # quarto play asks for no move before the check
    assert quarto(argv(out, games_file)) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--overwrite replaces it" in error[0] and repr(str(out)) in error[0], error
    assert tree(tmp_path) == before and leftovers(tmp_path) == []


def test_overwrite_replaces_a_folder_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "grade"
    _earlier_folder(out, "from_the_earlier_run.txt")
    argv = ["grade", "random", "--positions", "2", "--max-empty", "4", "--no-progress", "--out", str(out)]
    assert quarto([*argv, "--overwrite"]) == 0
    assert sorted(tree(out)) == ["command.txt", "config.json", "decisions.jsonl", "grade.json", "grade.md"]
    assert leftovers(tmp_path) == []
    assert f"written to {out}" in capsys.readouterr().out


def test_overwrite_replaces_a_file(games_file: Path, tmp_path: Path) -> None:
    page = tmp_path / "games.html"
    _earlier_file(page)
    assert quarto(["replay", str(games_file), "--html", str(page), "--overwrite"]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>") and leftovers(tmp_path) == []


def test_overwrite_replaces_a_run_folder_once_its_checks_pass(tmp_path: Path) -> None:
    out = tmp_path / "arena"
    _earlier_folder(out)
    (out / "stale.txt").write_text("from the earlier run")
    argv = ["tournament", "random", "greedy", "--games", "2", "--jobs", "1", "--bootstrap", "100", "--no-progress"]
    assert quarto([*argv, "--anchor", "nobody", "--out", str(out), "--overwrite"]) == 2  # refused: kept
    assert (out / "stale.txt").exists()
    assert quarto([*argv, "--out", str(out), "--overwrite"]) == 0
    assert not (out / "stale.txt").exists() and json.loads((out / "config.json").read_text())["games_per_pair"] == 2


def test_overwrite_and_resume_are_one_or_the_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert quarto(["tournament", "--resume", str(tmp_path), "--overwrite"]) == 2
    assert "give one or the other" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------
# One writer at a time: the lock, a stale lock, two real processes
# ---------------------------------------------------------------------------------------------------------
HELD: dict[str, tuple[Callable[[Path, Path], list[str]], output.Kind]] = {
    "grade": (WRITERS["grade"][0], "folder"),
    "tournament": (WRITERS["tournament"][0], "run"),
    "dataset": (WRITERS["dataset"][0], "file"),
    "replay --html": (WRITERS["replay --html"][0], "file"),
    "bench vector": (WRITERS["bench vector"][0], "file"),
    "solve --resume": (lambda out, _: ["solve", "f9.......0..3... 5", "--resume", str(out)], "file"),
}


@pytest.mark.parametrize("command", list(HELD))
def test_a_second_writer_is_refused_naming_the_first(
    command: str, games_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, kind = HELD[command]
    out = tmp_path / "out"
    with output.claim_output(out, kind, resume=True):
        assert quarto(argv(out, games_file)) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"is in use by another writer in this process (pid {os.getpid()}: " in error[0], error
    assert not out.exists() or kind == "run"


def test_the_lock_names_its_holder_and_goes_with_the_block(tmp_path: Path) -> None:
    out = tmp_path / "data.npz"
    with output.claim_output(out, "file"):
        lock = tmp_path / ".data.npz.lock"
        pid, command = lock.read_text().split(" ", 1)
        assert int(pid) == os.getpid() and command.strip() == files.this_command()
        in_use = rf"--out '{out}' is in use by another writer in this process \(pid "
        with pytest.raises(output.OutputInUseError, match=in_use), output.claim_output(out, "file"):
            pass
    assert not lock.exists()
    with output.claim_output(out, "file"):  # free again
        pass


@pytest.mark.parametrize("kind", ["file", "folder", "run"])
def test_a_claim_that_writes_nothing_leaves_no_folder_it_made(kind: output.Kind, tmp_path: Path) -> None:
    """Claiming makes the output's folders (for its lock); a command refused or failing before it writes leaves
    none of them, and one that writes keeps them. A folder that was there before stays, empty or not."""
    out = tmp_path / "made" / "deeper" / "result"
    with pytest.raises(RuntimeError), output.claim_output(out, kind):
        raise RuntimeError("refused after the claim")
    assert list(tmp_path.iterdir()) == []
    with output.claim_output(out, kind):  # nothing written, no error
        pass
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "made").mkdir()
    with output.claim_output(out, kind) as claimed:
        target = claimed.staging / "table.md" if kind != "file" else out
        target.write_text("a result")
    assert (out / "table.md" if kind != "file" else out).read_text() == "a result"
    with pytest.raises(RuntimeError), output.claim_output(tmp_path / "made" / "other" / "x", kind):
        raise RuntimeError
    assert sorted(p.name for p in (tmp_path / "made").iterdir()) == ["deeper"]


@pytest.mark.parametrize("kind", ["file", "folder", "run"])
def test_a_stale_lock_of_a_dead_process_is_taken_over(kind: output.Kind, tmp_path: Path) -> None:
    out = tmp_path / "out"
    lock = out / output.LOCK_FILE if kind == "run" else tmp_path / ".out.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text("99999999 quarto grade random --out out\n")  # its process was killed with kill -9
    with output.claim_output(out, kind):
        assert lock.read_text().split()[0] == str(os.getpid())


HOLD_AND_DIE = """
import sys, time
from experiments.output import claim_output
with claim_output(sys.argv[1], "folder"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_the_lock_of_a_killed_writer_is_released_by_the_kernel(tmp_path: Path) -> None:
    out = tmp_path / "grade"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_DIE, str(out)], cwd=REPOSITORY, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(output.OutputInUseError, match=rf"pid {holder.pid}: "), output.claim_output(out, "folder"):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with output.claim_output(out, "folder") as claimed:  # its lock file is still there; its lock is not
        (claimed.staging / "grade.md").write_text("new")
    assert (out / "grade.md").read_text() == "new"


def test_the_next_writer_clears_what_a_killed_writer_left(tmp_path: Path) -> None:
    """kill -9 while a grade is staged: the staging folder stays; the next writer of the same output removes it
    (and a temporary file of its name), and nothing of another output's."""
    out = tmp_path / "grade"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_DIE, str(out)], cwd=REPOSITORY, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    (tmp_path / ".grade.abcd1234.staging").mkdir()  # as mkdtemp names it
    (tmp_path / ".grade.abcd1234.staging" / "grade.md").write_text("half a result")
    (tmp_path / ".grade.x1y2z3w4.tmp").write_text("half a file")
    others = [".grade2.abcd1234.staging", ".other.npz.abcd1234.tmp.npz"]  # another output's, maybe alive
    for name in others:
        (tmp_path / name).mkdir()
    killed = [p.name for p in tmp_path.iterdir() if p.name.startswith(".grade.") and p.name.endswith(".staging")]
    assert len(killed) == 2
    with output.claim_output(out, "folder") as claimed:
        (claimed.staging / "grade.md").write_text("new")
    assert leftovers(tmp_path) == others and (out / "grade.md").read_text() == "new"
    data = tmp_path / "data.npz"
    orphan = tmp_path / ".data.npz.k9k9k9k9.tmp.npz"
    orphan.write_bytes(b"half a dataset")
    with output.claim_output(data, "file"):
        assert not orphan.exists()


def test_an_earlier_result_moved_aside_by_a_killed_writer_is_put_back(tmp_path: Path) -> None:
    """Killed between its two renames: the earlier result is aside, the output gone. The next writer puts it back
    (and so refuses to replace it unasked)."""
    aside = tmp_path / ".grade.0a1b2c3d.replaced"
    _earlier_folder(aside, "grade.md")
    with (
        pytest.raises(output.OutputExistsError, match="already holds a result"),
        output.claim_output(tmp_path / "grade", "folder"),
    ):
        pass
    assert (tmp_path / "grade" / "grade.md").read_text() == EARLIER and leftovers(tmp_path) == []


def test_a_writer_thread_dying_of_a_file_size_limit_prints_no_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TensorBoard's event thread dies of EFBIG; its writer raises the same error in the main thread, which is
    the one line. The thread's own traceback is left out; any other thread's failure is printed as ever."""
    printed: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda failure: printed.append(failure.exc_value))

    def dies(error: BaseException) -> None:
        def run() -> None:
            raise error

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()

    with output.claim_output(tmp_path / "run", "run"):
        dies(OSError(errno.EFBIG, "File too large"))
        dies(KeyError("a bug"))
    dies(OSError(errno.EFBIG, "File too large"))  # after the block: printed again
    assert [type(error) for error in printed] == [KeyError, OSError]


# ---------------------------------------------------------------------------------------------------------
# --overwrite onto a link: the result replaces the link, nothing stays aside, the link's target is untouched
# ---------------------------------------------------------------------------------------------------------
GRADE = ["grade", "random", "--positions", "2", "--max-empty", "4", "--no-progress"]


@pytest.mark.parametrize("target", ["a result", "an empty folder", "nothing"])
def test_overwrite_onto_a_linked_output_leaves_no_link_behind(tmp_path: Path, target: str) -> None:
    real, out = tmp_path / "real", tmp_path / "out"
    if target == "a result":
        _earlier_folder(real, "grade.md")
    elif target == "an empty folder":
        real.mkdir()
    out.symlink_to(real)
    before = tree(real) if real.exists() else None
    assert quarto([*GRADE, "--out", str(out), "--overwrite"]) == 0
    assert out.is_dir() and not out.is_symlink() and (out / "grade.md").exists()
    assert leftovers(tmp_path) == [] and (tree(real) if real.exists() else None) == before


# ---------------------------------------------------------------------------------------------------------
# A file-size limit (EFBIG) is one line: a real process under RLIMIT_FSIZE, SIGXFSZ ignored
# ---------------------------------------------------------------------------------------------------------
def _under_file_size_limit(limit: int) -> Callable[[], None]:
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, not a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limited


@pytest.mark.parametrize(
    ("command", "out"),
    [
        (["dataset", "--min-empty", "4", "--max-empty", "4", "--no-progress", "--out"], "data.npz"),
        ([*GRADE, "--out"], "grade"),
    ],
)
def test_a_file_size_limit_is_one_line(tmp_path: Path, command: list[str], out: str) -> None:
    environment = dict(os.environ, PYTHONPATH=str(REPOSITORY), PYTHONDONTWRITEBYTECODE="1")
    environment["QUARTO_CACHE_DIR"] = "off"
    done = subprocess.run(
        [sys.executable, "-m", "experiments.cli", *command, str(tmp_path / out)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_under_file_size_limit(300),
    )
    error = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(error) == 1 and "(File too large)" in error[0], done.stderr[-2000:]
    assert f"--out '{tmp_path / out}'" in error[0] and leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------------------------------
# An empty path is refused as empty: Path("") is ".", the current folder
# ---------------------------------------------------------------------------------------------------------
EMPTY = {
    "grade --out": [*GRADE, "--out", ""],
    "tournament --out": ["tournament", "random", "greedy", "--games", "2", "--jobs", "1", "--out", ""],
    "train --out": ["train", "total_steps=64", "--out", ""],
    "train --config": ["train", "--config", "", "--out", "run"],
    "tournament --resume": ["tournament", "--resume", ""],
    "dataset --out": ["dataset", "--min-empty", "4", "--max-empty", "4", "--out", ""],
    "dataset --check": ["dataset", "--check", ""],
    "replay": ["replay", ""],
    "plot": ["plot", "", "--out", "p.png"],
    "book --out": ["book", "--out", ""],
}


@pytest.mark.parametrize("command", EMPTY)
def test_an_empty_path_is_refused_as_empty(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert quarto(EMPTY[command]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "'' is an empty path: name a file or folder" in error[0], error
    assert "usage:" not in error[0] and list(tmp_path.iterdir()) == []


def test_an_empty_suite_is_no_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert quarto(["dataset", "--suite", "", "--out", str(tmp_path / "d.npz")]) == 2
    assert "unknown suite ''" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kind", "there", "message"),
    [
        ("file", "folder", "is a folder; name a file"),
        ("folder", "file", "is a file, not a folder"),
        ("run", "file", "is a file, not a folder"),
        ("file", "nothing", "is not a valid path"),
    ],
)
def test_check_output_path_is_the_one_refusal_of_a_bad_output_path(
    tmp_path: Path, kind: output.Kind, there: str, message: str
) -> None:
    bad = tmp_path / "out"
    if there == "folder":
        bad.mkdir()
    elif there == "file":
        bad.write_text(EARLIER)
    else:
        bad = tmp_path / "o\0ut"  # a NUL byte: a name no file system takes
    with pytest.raises(output.OutputError, match=f"^--save '.*' {message}"):
        output.check_output_path(bad, kind, "--save")
    new = tmp_path / "new" / "out"
    assert output.check_output_path(str(new), kind, "--save") == new and new.parent.is_dir()


def test_only_the_output_discipline_checks_an_output_path() -> None:
    """Every command refuses a bad output path through :func:`experiments.output.check_output_path` (which
    :func:`~experiments.output.claim_output` makes first): no other module of ``experiments`` calls the library's
    checks, whose refusals would then take a second form."""
    checks = {"output_file", "output_folder", "output_parent"}
    callers = []
    for path in sorted((REPOSITORY / "experiments").rglob("*.py")):
        if path.name == "output.py" and path.parent.name == "experiments":
            continue
        text = path.read_text()
        if any(f"{check}(" in text for check in checks):
            callers.append(str(path.relative_to(REPOSITORY)))
    assert callers == []


def test_claim_output_refuses_an_empty_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for kind in ("file", "folder", "run"):
        with (
            pytest.raises(output.OutputError, match="--out '' is an empty path"),
            output.claim_output("", kind),  # type: ignore[arg-type]
        ):
            pass
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_resume_while_the_tournament_still_plays_is_refused(tmp_path: Path) -> None:
    """Two real processes: ``quarto tournament --resume DIR`` while the tournament in DIR still plays."""
    out = tmp_path / "arena"
    argv = ["random", "mcts:sims=300", "--games", "40", "--jobs", "1", "--bootstrap", "100", "--no-progress"]
    first = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "tournament", *argv, "--out", str(out)],
        cwd=REPOSITORY,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not (out / "games.jsonl").exists() or not (out / "games.jsonl").read_text():
            assert time.monotonic() < deadline and first.poll() is None, "the first tournament did not start"
            time.sleep(0.05)
        second = subprocess.run(
            [sys.executable, "-m", "experiments.cli", "tournament", "--resume", str(out), "--no-progress"],
            cwd=REPOSITORY,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert first.poll() is None, "the first tournament ended before the second was refused"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert second.returncode == 2, second.stderr
    assert f"--resume '{out}' is in use by another process (pid {first.pid}: " in second.stderr
    assert "tournament random mcts:sims=300" in second.stderr and len(second.stderr.splitlines()) == 1


# ---------------------------------------------------------------------------------------------------------
# A write that fails late: one line, the earlier result intact, nothing half-written, no temporary file
# ---------------------------------------------------------------------------------------------------------
def test_grade_failing_late_prints_its_table_and_keeps_the_earlier_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "grade"
    argv = ["grade", "random", "--positions", "2", "--max-empty", "4", "--no-progress", "--out", str(out)]
    assert quarto(argv) == 0
    earlier = tree(out)
    write = grade_command.atomic_write_text

    def failing(path: Path, text: str) -> None:
        if path.name == "decisions.jsonl":  # the last file: the others are written already
            raise IsADirectoryError(21, "Is a directory", str(path))
        write(path, text)

    monkeypatch.setattr(grade_command, "atomic_write_text", failing)
    capsys.readouterr()
    assert quarto([*argv, "--seed", "1", "--overwrite"]) == 1
    captured = capsys.readouterr()
    assert "| agent | all decisions |" in captured.out  # the table, computed, is printed all the same
    error = captured.err.strip().splitlines()
    assert len(error) == 1 and f"writing '{out / 'decisions.jsonl'}' failed (Is a directory)" in error[0], error
    assert f"'{out}' is as it was" in error[0]
    assert tree(out) == earlier and leftovers(tmp_path) == []


def test_a_result_that_cannot_be_published_is_kept_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_rename(source: str, target: str) -> None:
        raise PermissionError(13, "Permission denied", source, None, target)

    monkeypatch.setattr(output.os, "rename", no_rename)
    out = tmp_path / "grade"
    argv = ["grade", "random", "--positions", "2", "--max-empty", "4", "--no-progress", "--out", str(out)]
    assert quarto(argv) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "could not be written (Permission denied): the results are kept in" in error[0]
    kept = Path(error[0].rsplit(" ", 1)[1].strip("'"))
    assert sorted(tree(kept)) == ["command.txt", "config.json", "decisions.jsonl", "grade.json", "grade.md"]
    assert not out.exists()


def test_tournament_whose_picture_path_is_taken_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "arena"
    (out / "ratings.png").mkdir(parents=True)  # a path taken by a folder: the last file fails
    argv = ["tournament", "random", "greedy", "--games", "2", "--jobs", "1", "--bootstrap", "100", "--no-progress"]
    assert quarto([*argv, "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "| rank | agent |" in captured.out
    error = captured.err.strip().splitlines()
    assert len(error) == 1 and f"writing '{out / 'ratings.png'}' failed (Is a directory)" in error[0], error
    assert f"--resume {out} goes on from it" in error[0]
    assert leftovers(out) == [] and (out / "ratings.md").exists()


def test_dataset_whose_file_is_taken_mid_run_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.training import dataset

    out = tmp_path / "data.npz"
    arrays = dataset.dataset_arrays

    def taken_meanwhile(*args: object, **kwargs: object) -> object:
        out.mkdir()  # the path becomes a folder while the positions are turned into arrays
        return arrays(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dataset, "dataset_arrays", taken_meanwhile)
    argv = ["dataset", "--min-empty", "4", "--max-empty", "4", "--no-progress", "--out", str(out)]
    assert quarto(argv) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"writing '{out}' failed (Is a directory)" in error[0], error
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_train_whose_last_file_is_taken_says_so_in_one_line(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.training import train

    run_dir = tmp_path / "run"
    (run_dir / "final_eval.json").mkdir(parents=True)  # taken by a folder: the run's last write fails
    argv = [*tiny, "total_steps=256", "final_eval_games=2", "grade_positions=0", "--out", str(run_dir)]
    assert train.main([*argv, "--no-progress"]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"writing '{run_dir / 'final_eval.json'}' failed (Is a directory)" in error[0], error
    assert leftovers(run_dir) == [] and leftovers(run_dir / "checkpoints") == []
    assert (run_dir / "checkpoints" / "final.zip").is_file()


# ---------------------------------------------------------------------------------------------------------
# The core install's arena: no matplotlib, every file but the picture, exit 0
# ---------------------------------------------------------------------------------------------------------
def test_a_tournament_without_matplotlib_writes_all_but_its_picture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("matplotlib", "matplotlib.pyplot"):
        monkeypatch.setitem(sys.modules, module, None)  # import matplotlib: ModuleNotFoundError, as without it
    out = tmp_path / "arena"
    argv = ["tournament", "random", "greedy", "--games", "2", "--jobs", "1", "--bootstrap", "100", "--no-progress"]
    for command in ([*argv, "--out", str(out)], ["tournament", "--resume", str(out), "--no-progress"]):
        assert quarto(command) == 0
        captured = capsys.readouterr()
        assert "| rank | agent |" in captured.out and f"written to {out}" in captured.out
        error = captured.err.strip().splitlines()
        assert len(error) == 1 and "ratings.png" in error[0] and "'train' extra" in error[0], error
        assert not (out / "ratings.png").exists() and leftovers(out) == []
        assert all((out / name).is_file() for name in ("games.jsonl", "results.md", "ratings.csv", "ratings.md"))
