"""quarto play, driven like a person would: through a pseudo-terminal, with bad input along the way."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.arena import play
from experiments.arena.play import parse_action, parse_piece, parse_square
from experiments.arena.replay import load_game
from quarto_env.core import DECLARE, STANDARD, Variant, legal_actions, step
from quarto_env.notation import parse_position
from quarto_env.render import piece_code, render_text, square_name

OPPONENT = "minimax:depth=2"
PROMPT = re.compile(rb"your move: [^\n]*> $")
POSITION = re.compile(rb"position: (.{16} [0-9a-f-])")


class Terminal:
    """``quarto play`` running on a pseudo-terminal: read what it prints, type lines at it."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "experiments.cli", "play", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=Path(__file__).resolve().parents[1],
            close_fds=True,
        )
        os.close(slave)
        self.screen = b""

    def read_until(self, pattern: re.Pattern[bytes], timeout: float = 60.0) -> bytes:
        """Everything printed since the last call, up to and including a match of ``pattern``."""
        deadline = time.monotonic() + timeout
        while not pattern.search(self.screen):
            ready, _, _ = select.select([self.master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise AssertionError(f"timed out waiting for {pattern.pattern!r}; screen ends {self.screen[-800:]!r}")
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the program exited and closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"program ended before {pattern.pattern!r}; screen ends {self.screen[-800:]!r}")
            self.screen += chunk
        match = pattern.search(self.screen)
        assert match is not None
        seen, self.screen = self.screen[: match.end()], self.screen[match.end() :]
        return seen

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def finish(self) -> int:
        """Read to the end and return the exit status."""
        try:
            while True:
                ready, _, _ = select.select([self.master], [], [], 30)
                if not ready or not os.read(self.master, 4096):
                    break
        except OSError:
            pass
        os.close(self.master)
        return self.process.wait(timeout=30)


def test_a_person_plays_a_full_game_with_bad_input_along_the_way() -> None:
    terminal = Terminal("--opponent", OPPONENT, "--first", "you", "--seed", "3")
    bad_inputs = {
        "give": [("", b"please type a move"), ("zz", b"'zz' is not a piece"), ("help", b"Squares: a number 0-15")],
        "place": [("99", b"square 99 does not exist"), ("e5", b"'e5' is not a square"), ("TDSH", b"is not a square")],
    }
    moves = 0
    while True:
        seen = terminal.read_until(re.compile(PROMPT.pattern + rb"|Game over: [^\n]*\n"))
        if b"Game over:" in seen:
            break
        state = parse_position(POSITION.findall(seen)[-1].decode())
        phase = "place" if state.placing else "give"
        for text, explanation in bad_inputs[phase]:  # every kind of wrong input, once, in its phase
            terminal.type(text)
            assert explanation in terminal.read_until(PROMPT)
        bad_inputs[phase] = []
        used_piece = next((p for p in state.board if p >= 0), None)
        if phase == "give" and used_piece is not None and moves < 6:
            terminal.type(format(used_piece, "x"))
            assert f"piece {used_piece:x}".encode() + b" (" in terminal.read_until(PROMPT)
        occupied = next((s for s in range(16) if state.occupied >> s & 1), None)
        if phase == "place" and occupied is not None and moves < 6:
            name = f"{'abcd'[occupied % 4]}{occupied // 4 + 1}"  # the a1-d4 form of a taken square
            terminal.type(name)
            assert f"square {occupied} ({name}) is taken".encode() in terminal.read_until(PROMPT)
        action = legal_actions(STANDARD, state)[-1]
        terminal.type(str(action) if state.placing else _code(action))
        moves += 1
    assert terminal.finish() == 0
    assert moves >= 4


def _code(piece: int) -> str:
    """The piece typed as its four-letter attribute code, in mixed case."""
    return piece_code(piece).swapcase() if piece % 2 else piece_code(piece)


@pytest.mark.parametrize("keys", [b"\x04", b"quit\n"], ids=["end-of-input", "quit"])
def test_end_of_input_and_quit_leave_cleanly(keys: bytes) -> None:
    terminal = Terminal("--opponent", "random", "--first", "you")
    terminal.read_until(PROMPT)
    os.write(terminal.master, keys)
    assert b"game abandoned" in terminal.read_until(re.compile(rb"game abandoned"))
    assert terminal.finish() == 0


def test_saved_game_replays(tmp_path: Path) -> None:
    saved = tmp_path / "game.jsonl"
    terminal = Terminal("--opponent", "greedy", "--first", "agent", "--seed", "1", "--save", str(saved))
    while True:
        seen = terminal.read_until(re.compile(PROMPT.pattern + rb"|game saved to"))
        if b"game saved to" in seen:
            break
        state = parse_position(POSITION.findall(seen)[-1].decode())
        terminal.type(str(legal_actions(STANDARD, state)[0]))
    assert terminal.finish() == 0
    record, frames = load_game(saved, 0)
    assert frames[-1][0].over and len(frames) == len(record["actions"]) + 1
    assert record["seats"] == ["agent greedy", "you"]


def test_parsing_accepts_every_documented_form_and_explains_the_rest() -> None:
    assert [parse_square(w) for w in ("0", "15", "a1", "D4", "b3")] == [0, 15, 0, 15, 9]
    assert [parse_piece(w) for w in ("0", "F", "tdsh", "slrf", "TlSf")] == [0, 15, 15, 0, 5]
    variant = Variant.make(declaration=True)
    state = parse_position("f9.......0..3... 5", variant)
    assert parse_action(variant, state, "Quarto") == DECLARE
    with pytest.raises(ValueError, match="no declaring in this variant"):
        parse_action(STANDARD, parse_position("f9.......0..3... 5"), "declare")
    with pytest.raises(ValueError, match=r"square 0 \(a1\) is taken; empty squares: 2 3 4"):
        parse_action(STANDARD, parse_position("f9.......0..3... 5"), "a1")
    given = step(STANDARD, parse_position("f9.......0..3... 5"), 2)
    with pytest.raises(ValueError, match=r"piece f \(TDSH\) is not available; pieces left: 1 2 4"):
        parse_action(STANDARD, given, "f")
    with pytest.raises(ValueError, match="'tdsx' is not a piece"):
        parse_piece("tdsx")


def test_the_board_labels_name_the_squares_that_play_accepts() -> None:
    """Read off the board as a person does: the column letter above a cell and the row number beside it, typed
    as ``b2``, name the square whose number the cell shows."""
    lines = render_text(STANDARD, parse_position("................ -")).splitlines()
    header = next(line for line in lines if line.split() == ["a", "b", "c", "d"])
    named = {}
    for line in lines:
        if re.match(r"[1-4] \|", line):
            for cell in re.finditer(r"\((\d+)\)", line):
                centre = (cell.start() + cell.end()) / 2
                column = min("abcd", key=lambda letter: abs(header.index(letter) - centre))  # the letter above
                assert abs(header.index(column) - centre) <= 1
                named[f"{column}{line[0]}"] = int(cell[1])
    assert len(named) == 16 and all(parse_square(name) == square for name, square in named.items())
    assert named["b2"] == 5 and named["d4"] == 15
    assert [square_name(square) for square in range(16)] == list(named)


# ---------------------------------------------------------------------------------------------------------
# --save is checked before the game starts
# ---------------------------------------------------------------------------------------------------------
def _no_game(prompt: str = "") -> str:
    raise AssertionError("the game started before --save was checked")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (lambda tmp: tmp, "is a folder; name a file"),
        (lambda tmp: Path("/dev/null"), "is not a regular file"),
        (lambda tmp: Path("/proc/quarto-test/game.jsonl"), "cannot be created"),
        (lambda tmp: tmp / "earlier.jsonl", "already holds a file: --overwrite replaces it, or name another"),
    ],
    ids=["folder", "/dev/null", "unwritable", "existing file"],
)
def test_a_bad_save_path_is_refused_before_the_game(
    target: Callable[[Path], Path],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text("an earlier game\n")
    monkeypatch.setattr("builtins.input", _no_game)
    with pytest.raises(SystemExit) as exit_info:
        play.main(["--opponent", "random", "--first", "you", "--save", str(target(tmp_path))])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "You play" not in captured.out
    assert captured.err.splitlines()[-1].startswith("quarto play: --out ") and message in captured.err
    assert earlier.read_text() == "an earlier game\n"


def test_overwrite_lets_save_replace_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "game.jsonl"
    saved.write_text("an earlier game\n")
    monkeypatch.setattr("builtins.input", _end_of_input)
    assert play.main(["--opponent", "random", "--first", "you", "--save", str(saved), "--overwrite"]) == 0
    assert "game saved to" in capsys.readouterr().out
    record, frames = load_game(saved, 0)
    assert record["end"] == "abandoned" and record["actions"] == [] and len(frames) == 1


def _end_of_input(prompt: str = "") -> str:
    raise EOFError


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", "-1"], "argument --seed: seed must be an integer >= 0"),
        (["--seed", "nan"], "argument --seed: seed must be an integer"),
        (["--false-declaration", "penalty"], "false_declaration='penalty' needs declaration=True"),
        (["--attributes", "weight"], "argument --attributes: unknown attribute(s) ['weight']"),
    ],
)
def test_bad_options_are_one_line_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        play.main(["--opponent", "random", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]
