"""``quarto solve --resume FILE``: the saved transposition table (agents/solver/table_files.py) is sealed
(agents/storage/integrity.py), so a file whose rows were edited -- check words recomputed -- or replaced by random
rows, or one saved by an older version without a seal, is refused in one line instead of changing the answers;
and a solve that saves nothing leaves no folders behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from agents.solver.minimax import Solver
from agents.solver.table import DATA_MASK, INFO, VERIFY, _scramble
from agents.solver.table_files import TableFileError, load_table, pack_bounds, read_table_header, save_table
from experiments.arena import solve as solve_command
from quarto_env.core import STANDARD
from quarto_env.notation import parse_position

POSITION = "6.e2....d8..9..1 5"
"""A draw (value 0) that the solver proves in a fraction of a second."""


def quarto_solve(*argv: str) -> int:
    """The exit status of ``quarto solve ARGV``."""
    try:
        return solve_command.main([*argv, "--table-mb", "1", "--no-progress"])
    except SystemExit as exit_info:
        return int(exit_info.code or 0)


def saved_proof(path: Path) -> None:
    """The table of a solve of :data:`POSITION`, saved to ``path`` as ``--resume`` saves it."""
    solver = Solver(STANDARD, table_bits=16)
    assert solver.value(parse_position(POSITION)) == 0
    save_table(path, solver.table, STANDARD, {"positions": POSITION})


def rows_turned_to_losses(rows: np.ndarray) -> np.ndarray:
    """``rows`` with every bound made a proven loss and each row's check word recomputed: rows the table's own
    check accepts, which make the draw :data:`POSITION` read as a loss."""
    scramble = _scramble.py_func
    key_lanes = rows[:, VERIFY] ^ scramble(rows[:, INFO])
    losses = np.full(len(rows), -1)
    edited = rows.copy()
    edited[:, INFO] = rows[:, INFO] & ~DATA_MASK | pack_bounds(losses, losses, losses)
    edited[:, VERIFY] = key_lanes ^ scramble(edited[:, INFO])
    return edited


def random_rows(rows: np.ndarray) -> np.ndarray:
    """Rows of random numbers in place of ``rows``."""
    return np.random.default_rng(0).integers(-(2**62), 2**62, size=(4096, 2), dtype=np.int64)


def rewritten(path: Path, edit: Callable[[np.ndarray], np.ndarray]) -> None:
    """Rewrite the table file ``path`` with its rows edited by ``edit`` and its header (seal included) kept."""
    with np.load(path, allow_pickle=False) as data:
        header, rows = data["header"], data["rows"]
    np.savez(path, header=header, rows=edit(rows))


def test_a_saved_table_loads_back_and_proves_itself(tmp_path: Path) -> None:
    path = tmp_path / "proof.npz"
    saved_proof(path)
    header = read_table_header(path)
    assert header["positions"] == POSITION and "seal" not in header
    solver = Solver(STANDARD, table_bits=16)
    load_table(path, solver.table, STANDARD)
    assert solver.value(parse_position(POSITION)) == 0


EDITS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "bounds turned to losses": rows_turned_to_losses,
    "random rows": random_rows,
    "a row removed": lambda rows: rows[1:],
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS)
def test_a_table_file_with_edited_rows_is_refused_in_one_line(
    edit: Callable[[np.ndarray], np.ndarray],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    saved_proof(tmp_path / "proof.npz")
    rewritten(tmp_path / "proof.npz", edit)
    before = (tmp_path / "proof.npz").read_bytes()
    with pytest.raises(TableFileError, match="does not match its checksum: damaged or altered"):
        load_table("proof.npz", Solver(STANDARD, table_bits=16).table, STANDARD)
    assert quarto_solve(POSITION, "--resume", "proof.npz") == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no answer from an altered table (it would be "value": -1 after the first edit)
    assert captured.err == (
        "quarto solve: --resume: proof.npz does not match its checksum: damaged or altered; "
        "remove it (or name another file) to start without it\n"
    )
    assert (tmp_path / "proof.npz").read_bytes() == before


def test_a_table_file_without_a_seal_is_refused_as_written_by_an_older_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the previous version wrote: the same arrays, a header without its seal."""
    monkeypatch.chdir(tmp_path)
    saved_proof(tmp_path / "proof.npz")
    header = read_table_header(tmp_path / "proof.npz")  # without its seal
    with np.load(tmp_path / "proof.npz", allow_pickle=False) as data:
        rows = data["rows"]
    np.savez(tmp_path / "proof.npz", header=np.array(json.dumps(header)), rows=rows)
    assert quarto_solve(POSITION, "--resume", "proof.npz") == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        "quarto solve: --resume: proof.npz carries no format and checksum: it was written by an older version, or "
        "is no saved transposition table; remove it (or name another file) to start without it\n"
    )


def test_a_solve_that_saves_no_table_leaves_no_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kept").mkdir()  # there before: stays
    assert quarto_solve(POSITION, "--resume", "kept/no/such/t.npz") == 0
    assert '"value": 0' in capsys.readouterr().out
    assert quarto_solve("not a position", "--resume", "no/such/t.npz") == 2
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["kept"]


def test_a_table_saved_on_ctrl_c_keeps_the_folders_made_for_it_and_is_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    def ctrl_c(*args: object) -> dict:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(solve_command, "answer", ctrl_c)
        assert quarto_solve(POSITION, "--resume", "new/t.npz") == 130  # the (empty) table saved on Ctrl-C
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["new", "t.npz"]
    assert quarto_solve(POSITION, "--resume", "new/t.npz") == 0
    assert '"value": 0' in capsys.readouterr().out
