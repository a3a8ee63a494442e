"""Long proofs as a product: threads, the saved table (``--resume``), Ctrl-C, progress, the value cache, and
positions with 13 empty squares against values stored here.

The stored values were computed by the single-threaded solver of commit f2e55f5 (before threads, the lockless
table and the cache), whose results the brute-force tests of ``tests/test_solver.py`` check on small positions.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from agents import interrupts
from agents.solver.alphabeta import AlphaBetaInterrupted, AlphaBetaSearch
from agents.solver.kernels import EXACT_DEPTH, WIN
from agents.solver.minimax import Solver
from agents.solver.positions import greedy_game_positions
from agents.solver.table import table_bits_for
from agents.solver.table_files import TableFileError, load_table, read_table_header, save_table
from agents.solver.value_cache import ValueCache, default_cache_path, sound_rows
from experiments.arena import solve as solve_command
from quarto_env.core import NO_PIECE, STANDARD, State, Variant, from_board
from quarto_env.notation import format_position, parse_position
from tests.test_interrupts import default_sigint

ROOT = Path(__file__).resolve().parents[1]
SQUARES = Variant.make(squares=True)

STORED_VALUES = {
    # position (standard rules): value for the side to move
    "...4......2.f... 6": 0,
    "......5....8...a c": 0,
    "...d.6.........0 4": 0,
}


# ---------------------------------------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("jobs", [1, 2])
def test_positions_with_13_empty_squares_have_their_stored_values(jobs: int) -> None:
    solver = Solver(STANDARD, table_bits=22, jobs=jobs)
    for position, value in STORED_VALUES.items():
        assert solver.solve(parse_position(position), value_only=True).value == value, position


@pytest.mark.parametrize("variant", [STANDARD, SQUARES], ids=["standard", "squares"])
def test_two_threads_agree_with_one_on_every_best_action(variant: Variant) -> None:
    """Positions with 9-10 empty squares: the threads share the table and defer each other's subtrees there."""
    one, two = Solver(variant, table_bits=18), Solver(variant, table_bits=18, jobs=2)
    for empties in (9, 10):
        for state in greedy_game_positions(empties, 4, seed=empties, variant=variant):
            expected = one.solve(state)
            assert two.solve(state).best_actions == expected.best_actions, format_position(state)


def test_a_search_stopped_from_another_thread_raises_search_interrupted() -> None:
    """What the SIGINT watcher does, done by hand: the flag stops every thread within milliseconds."""
    search = AlphaBetaSearch(STANDARD, table_bits=16, jobs=2)
    stopped_at = []

    def stop_soon() -> None:
        time.sleep(0.3)
        stopped_at.append(time.perf_counter())
        search.shared[0] = interrupts.STOPPED_BY_CTRL_C

    stopper = threading.Thread(target=stop_soon)
    stopper.start()
    with pytest.raises(AlphaBetaInterrupted):
        search.run(parse_position("................ -"), EXACT_DEPTH, -1, 0)
    stopper.join()
    assert search.progress()["nodes"] > 0
    assert search.shared[0] == interrupts.STOPPED_BY_CTRL_C


# ---------------------------------------------------------------------------------------------------------
# The saved table
# ---------------------------------------------------------------------------------------------------------
def test_a_saved_table_seeds_a_table_of_another_size(tmp_path: Path) -> None:
    state = greedy_game_positions(11, 1, seed=5)[0]
    first = Solver(STANDARD, table_bits=16)
    value = first.value(state)
    path = tmp_path / "proof.npz"
    saved = save_table(path, first.table, STANDARD, {"positions": format_position(state)})
    assert saved == np.count_nonzero(first.table[:, 1]) > 0
    assert read_table_header(path)["entries"] == saved
    second = Solver(STANDARD, table_bits=17)
    load_table(path, second.table, STANDARD)
    nodes = second.nodes
    assert second.value(state) == value
    assert second.nodes - nodes < first.nodes / 10  # the root's bounds were saved: hardly any search


def test_bad_table_files_are_refused_by_name(tmp_path: Path) -> None:
    table = AlphaBetaSearch(STANDARD, table_bits=10).table
    with pytest.raises(TableFileError, match="no such file"):
        load_table(tmp_path / "missing.npz", table, STANDARD)
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(TableFileError, match="is not a saved table"):
        load_table(damaged, table, STANDARD)
    squares = tmp_path / "squares.npz"
    save_table(squares, table, SQUARES)
    with pytest.raises(TableFileError, match="variant"):
        load_table(squares, table, STANDARD)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, header=np.array([{"format": 1}], dtype=object), rows=np.zeros((1, 2), dtype=np.int64))
    with pytest.raises(TableFileError, match="is not a saved table"):
        load_table(pickled, table, STANDARD)  # never unpickled


def test_table_sizes_in_megabytes() -> None:
    assert table_bits_for(1) == 16  # 65,536 entries of 16 bytes
    assert table_bits_for(1.9) == 16 and table_bits_for(2) == 17
    with pytest.raises(ValueError, match="at least"):
        table_bits_for(0.001)


# ---------------------------------------------------------------------------------------------------------
# quarto solve: JSON, progress, Ctrl-C, --resume
# ---------------------------------------------------------------------------------------------------------
def test_the_answer_has_nodes_hit_rate_and_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    position = format_position(greedy_game_positions(11, 1, seed=8)[0])
    assert solve_command.main([position, "--value-only", "--table-mb", "4", "--no-progress"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["best_actions"] is None and line["value"] in (1, 0, -1)
    assert line["nodes"] > 0 and 0 < line["table_hit_rate"] < 1 and line["seconds"] > 0
    assert solve_command.main([position, "--jobs", "2", "--table-mb", "4", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["best_actions"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--jobs", "0"], "--jobs"),
        (["--table-mb", "0"], "--table-mb"),
        (["--value-only", "--all-moves"], "not allowed with"),
        (["--checkpoint-every", "0"], "--checkpoint-every"),
        (["--resume", "/"], "--resume '/' is a folder"),
    ],
)
def test_bad_options_are_named(flags: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        solve_command.main(["6.e2....d8..9..1 5", *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_progress_lines_name_nodes_speed_and_the_path() -> None:
    solver = Solver(STANDARD, table_bits=16)
    solver.value(greedy_game_positions(11, 1, seed=2)[0])
    line = solve_command.counts_line(solver, 2.0)
    assert f"{solver.nodes:,} nodes" in line and "M/s" in line and "table hits" in line


def _interrupted_solve(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run the standard game's proof, send SIGINT once it prints progress, and return the finished process
    and the seconds from the signal to its exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "solve", "................ -", "--value-only", *flags],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:  # the first progress line: the search runs
        seen.append(line)
        if "nodes" in line:
            break
    sent = time.perf_counter()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    latency = time.perf_counter() - sent
    return subprocess.CompletedProcess(process.args, process.returncode, out, "".join(seen) + err), latency


@pytest.mark.slow
def test_ctrl_c_stops_a_proof_prints_its_counts_and_resume_continues_it(tmp_path: Path) -> None:
    path = tmp_path / "proof.npz"
    done, _ = _interrupted_solve(tmp_path, "--table-mb", "64", "--resume", str(path), "--jobs", "2")
    assert done.returncode == 130, done.stderr
    assert "interrupted after" in done.stderr and "nodes" in done.stderr and done.stdout == ""
    header = read_table_header(path)
    assert header["entries"] > 1000 and header["variant"] == STANDARD.to_dict()
    again, _ = _interrupted_solve(tmp_path, "--table-mb", "32", "--resume", str(path))
    assert again.returncode == 130 and f"resuming from {path} ({header['entries']:,} entries)" in again.stderr
    assert read_table_header(path)["entries"] >= header["entries"]


@pytest.mark.slow
def test_the_proof_command_agrees_with_the_shipped_book_fourteen_squares_in() -> None:
    """The proof as docs/solver.md gives it (two threads, the value alone), under the squares rules, from a give
    node 14 empty squares in, whose value the shipped book holds: the whole game would hold both cores for most
    of a minute of the suite. That the game itself is a draw is the book's root value (tests/test_book.py)."""
    from agents.solver.book import board_key, shipped_book

    state = parse_position("01.............. -", SQUARES)
    book = shipped_book(SQUARES)
    assert book is not None
    command = ["solve", format_position(state), "--squares", "--value-only", "--jobs", "2", "--table-mb", "512"]
    done = subprocess.run(
        [sys.executable, "-m", "experiments.cli", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["value"] == book.values[board_key(state.lanes, state.occupied, SQUARES)]
    assert answer["variant"] == "squares" and answer["nodes"] > 10**7  # searched, not looked up
    assert "moves searched from the root" in done.stderr


# ---------------------------------------------------------------------------------------------------------
# The value cache
# ---------------------------------------------------------------------------------------------------------
def test_the_cache_keeps_proven_values_across_solvers(tmp_path: Path) -> None:
    cache = ValueCache(STANDARD, tmp_path / "values.sqlite")
    states = greedy_game_positions(12, 2, seed=21)
    first = Solver(STANDARD, cache=cache, table_bits=18)
    results = [first.solve(state) for state in states]
    assert len(cache) > 0
    second = Solver(STANDARD, cache=ValueCache(STANDARD, tmp_path / "values.sqlite"), table_bits=18)
    for state, result in zip(states, results, strict=True):
        again = second.solve(state)
        assert (again.value, again.best_actions) == (result.value, result.best_actions)
        assert again.nodes < result.nodes / 4, format_position(state)
    other = ValueCache(SQUARES, tmp_path / "values.sqlite")
    assert len(other) == 0  # another variant reads none of them


def board_of_entry(key_occupied: int, key_lanes: int) -> State:
    """The give node that a canonical key stands for: the key's lanes are a relabelled, moved board."""
    board = [NO_PIECE] * 16
    for square in range(16):
        if key_occupied >> square & 1:
            board[square] = sum((key_lanes >> (16 * k + square) & 1) << k for k in range(4))
    return from_board(board)


def test_every_cached_bound_holds_for_its_position(tmp_path: Path) -> None:
    """The cache's rows, decoded back to positions and solved afresh: each exact value lies within its bounds."""
    cache = ValueCache(STANDARD, tmp_path / "values.sqlite")
    solver = Solver(STANDARD, cache=cache, table_bits=18)
    for state in greedy_game_positions(12, 2, seed=4):
        solver.solve(state)
    with sqlite3.connect(cache.path) as connection:
        rows = connection.execute(
            "SELECT key_occupied, key_lanes, lower, upper FROM positions ORDER BY empties LIMIT 40"
        ).fetchall()
    assert len(rows) >= 10
    fresh = Solver(STANDARD, table_bits=18)
    for key_occupied, key_lanes, lower, upper in rows:
        state = board_of_entry(key_occupied, key_lanes)
        assert not state.placing and not state.over
        assert lower <= fresh.value(state) * WIN <= upper, format_position(state)


def test_damaged_cache_rows_are_ignored_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = ValueCache(STANDARD, tmp_path / "values.sqlite")
    states = greedy_game_positions(12, 2, seed=21)
    first = Solver(STANDARD, cache=cache, table_bits=18)
    results = [first.solve(state) for state in states]
    columns = "key_occupied, key_lanes, empties, lower, upper, best_piece"
    with contextlib.closing(sqlite3.connect(cache.path)) as connection, connection:
        rows = connection.execute(f"SELECT {columns} FROM positions").fetchall()
        assert len(rows) >= 4 and sound_rows(np.array(rows, dtype=np.int64)).all()  # every harvested row passes
        damage = ["lower = 7, upper = 7", f"lower = {WIN}, upper = {-WIN}", "empties = empties - 1", "best_piece = 16"]
        for change, (key_occupied, key_lanes, *_) in zip(damage, rows, strict=False):
            connection.execute(
                f"UPDATE positions SET {change} WHERE key_occupied = ? AND key_lanes = ?", (key_occupied, key_lanes)
            )
    capsys.readouterr()
    second = Solver(STANDARD, cache=ValueCache(STANDARD, cache.path), table_bits=18)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{cache.path}: 4 damaged row(s) ignored" in err
    for state, result in zip(states, results, strict=True):
        again = second.solve(state)
        assert (again.value, again.best_actions) == (result.value, result.best_actions)


def test_the_cache_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUARTO_CACHE_DIR", "off")
    assert default_cache_path() is None
    monkeypatch.setenv("QUARTO_CACHE_DIR", "/somewhere")
    assert default_cache_path() == Path("/somewhere/values.sqlite")


def test_tests_do_not_write_to_the_home_cache() -> None:
    assert os.environ["QUARTO_CACHE_DIR"] != str(Path.home() / ".cache" / "quarto")
