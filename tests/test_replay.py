"""quarto replay: steps through a record, writes GIF and PNG frames, and refuses broken records and bad output
paths clearly: one line naming the file's line and the game, exit status 2, nothing rendered."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from agents.match import play_game
from agents.specs import make_agent
from experiments.arena import replay
from experiments.arena.records import record_line
from quarto_env.core import STANDARD, Variant, step

ROOT = Path(__file__).resolve().parents[1]
VARIANT = Variant.make(declaration=True, squares=True)


@pytest.fixture
def games_file(tmp_path: Path) -> Path:
    records = [
        play_game(VARIANT, [make_agent("greedy", VARIANT, seed=s), make_agent("random", VARIANT, seed=s + 1)])
        for s in (0, 2)
    ]
    path = tmp_path / "games.jsonl"
    path.write_text("".join(record_line(r, VARIANT, game=i) for i, r in enumerate(records)))
    return path


def test_steps_through_a_game_with_enter_and_stops_on_q(games_file: Path) -> None:
    record = json.loads(games_file.read_text().splitlines()[1])
    moves = len(record["actions"])
    run = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "replay", str(games_file), "--game", "1"],
        input="\n" * moves,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("Enter: next move") == moves
    assert f"move {moves}: " in run.stdout and ("wins" in run.stdout or "draw" in run.stdout)
    stopped = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "replay", str(games_file), "--game", "1"],
        input="\nq\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert stopped.returncode == 0 and stopped.stdout.count("Enter: next move") == 2
    assert "move 1: " in stopped.stdout and "move 2: " not in stopped.stdout


def test_writes_an_animated_gif_and_png_frames(games_file: Path, tmp_path: Path) -> None:
    gif, frames = tmp_path / "game.gif", tmp_path / "frames"
    assert replay.main([str(games_file), "--game", "0", "--gif", str(gif), "--frames", str(frames)]) == 0
    moves = len(json.loads(games_file.read_text().splitlines()[0])["actions"])
    pngs = sorted(frames.glob("frame_*.png"))
    assert len(pngs) == moves + 1
    with Image.open(gif) as animation:
        assert animation.n_frames == moves + 1
        size = animation.size
    with Image.open(pngs[-1]) as last, Image.open(pngs[0]) as first:
        assert last.size == first.size == size
        assert last.tobytes() != first.tobytes()


def test_a_forfeit_is_told_in_the_last_caption() -> None:
    record = {
        "variant": Variant().to_dict(),
        "seats": ["slow", "fast"],
        "actions": [3, 0, 5],  # slow gives 3, fast places it and gives 5; slow, to place it, overruns
        "positions": ["................ -", "................ 3", "3............... -", "3............... 5"],
        "winner": 1,
        "end": "forfeit",
    }
    frames = replay.replay_frames(record)
    assert len(frames) == 4
    assert frames[-1][1] == "move 3: fast gives piece 5 (tall, light, square, solid) -- " + (
        "slow overran the time limit and forfeits: fast wins"
    )
    with pytest.raises(replay.RecordError, match="player 0 was to move: only player 1 can win by its forfeit"):
        replay.replay_frames({**record, "winner": 0})


def test_a_record_that_breaks_the_rules_is_refused(games_file: Path) -> None:
    record = json.loads(games_file.read_text().splitlines()[0])
    record["actions"][2] = record["actions"][0]  # give the first piece again: it is on the board
    record.pop("positions")
    with pytest.raises(replay.RecordError, match=r"actions\[2\] = \d+ is illegal"):
        replay.replay_frames(record)
    tampered = json.loads(games_file.read_text().splitlines()[0])
    tampered["positions"][1] = "f............... -"
    with pytest.raises(replay.RecordError, match=r"positions\[1\] is 'f............... -', but the actions lead"):
        replay.replay_frames(tampered)


# ---------------------------------------------------------------------------------------------------------
# Malformed records: one line naming the line and the game, exit status 2
# ---------------------------------------------------------------------------------------------------------
def _won_game() -> dict:
    """A standard game that player 0 (greedy) wins in 16 actions, as its games.jsonl line reads."""
    agents = [make_agent("greedy", STANDARD, seed=2), make_agent("random", STANDARD, seed=3)]
    return json.loads(record_line(play_game(STANDARD, agents), STANDARD))


WON = _won_game()


def _to_move_after(actions: int) -> int:
    state = replay.INITIAL_STATE
    for action in WON["actions"][:actions]:
        state = step(STANDARD, state, action)
    return state.to_move


def _changed(**fields: Any) -> Callable[[dict], Any]:
    return lambda record: {**record, **fields}


def _without(key: str) -> Callable[[dict], Any]:
    return lambda record: {k: v for k, v in record.items() if k != key}


def _stopped_after(actions: int, **fields: Any) -> Callable[[dict], Any]:
    """The game cut after ``actions`` actions, with ``fields`` changed."""
    return lambda record: {
        **record,
        "actions": record["actions"][:actions],
        "positions": record["positions"][:actions],
        "move_seconds": record["move_seconds"][:actions],
        **fields,
    }


def _action_changed(index: int, action: Any) -> Callable[[dict], Any]:
    return lambda record: {**record, "actions": [*record["actions"][:index], action, *record["actions"][index + 1 :]]}


MALFORMED: dict[str, tuple[Callable[[dict], Any] | bytes, str]] = {
    # not a JSON object at all
    "not JSON": (b"not json", "not JSON: Expecting value at character 1"),
    "truncated line": (json.dumps(WON)[:40].encode(), "not JSON"),
    "JSON list": (b"[1, 2]", "a game record is a JSON object {...}, got [1, 2]"),
    "JSON string": (b'"game"', 'a game record is a JSON object {...}, got "game"'),
    "JSON null": (b"null", "got null"),
    "not UTF-8": (b'{"seats": "\xff\xfe"}', "not UTF-8 text (byte 12 of the line)"),
    "nested too deep": (b"[" * 200_000, "JSON that cannot be read (RecursionError)"),
    "integer of 5000 digits": (b'{"actions": [' + b"9" * 5000 + b"]}", "JSON that cannot be read (ValueError)"),
    # missing or malformed fields
    "no variant": (_without("variant"), "not a game record: missing variant"),
    "no seats": (_without("seats"), "not a game record: missing seats"),
    "no actions": (_without("actions"), "not a game record: missing actions"),
    "variant a string": (_changed(variant="standard"), 'variant must be a JSON object such as {"attributes"'),
    "variant unknown key": (_changed(variant={"colours": 2}), "unexpected keyword argument 'colours'"),
    "variant squares=yes": (_changed(variant={"squares": "yes"}), "squares must be True or False"),
    "variant penalty alone": (_changed(variant={"false_declaration": "penalty"}), "needs declaration=True"),
    "variant 7 attributes": (_changed(variant={"attributes": 7}), "attributes count must be 1-4, got 7"),
    "seats a string": (_changed(seats="ab"), 'seats must be a list of two names, got "ab"'),
    "three seats": (_changed(seats=["a", "b", "c"]), "seats must be a list of two names"),
    "seats numbers": (_changed(seats=[1, 2]), "seats must be a list of two names, got [1, 2]"),
    "a long seat": (_changed(seats=["x" * 100_000]), "(100,004 characters)"),
    "actions a number": (_changed(actions=5), "actions must be a list of actions, integers 0-16, got 5"),
    "action a string": (_action_changed(0, "3"), 'integers 0-16, got ["3"'),
    "action a float": (_action_changed(0, 3.0), "got [3.0"),
    "action true": (_action_changed(0, True), "got [true"),
    "action 17": (_action_changed(0, 17), "got [17"),
    "action -1": (_action_changed(0, -1), "got [-1"),
    "action 10**30": (_action_changed(0, 10**30), "got [1000000000000000000000000000000"),
    "opening a dict": (_changed(opening={}), "opening must be a list of actions"),
    "opening out of range": (_changed(opening=[99]), "opening must be a list of actions, integers 0-16, got [99]"),
    "move_seconds NaN": (_changed(move_seconds=[float("nan")]), "move_seconds must be a list of seconds"),
    "move_seconds negative": (_changed(move_seconds=[-1]), "finite numbers >= 0, got [-1]"),
    "positions numbers": (_changed(positions=[1]), "positions must be a list of position strings, got [1]"),
    "winner a string": (_changed(winner="0"), 'winner must be 0, 1 or -1 (no winner), got "0"'),
    "winner 2": (_changed(winner=2), "winner must be 0, 1 or -1 (no winner), got 2"),
    "end unknown": (_changed(end="resign"), 'end must be one of win, forfeit, draw, abandoned, got "resign"'),
    "win without a winner": (_changed(winner=-1), "a game that ends in 'win' has winner 0 or 1, got -1"),
    "forfeit without a winner": (_stopped_after(3, end="forfeit", winner=-1), "ends in 'forfeit' has winner 0 or 1"),
    # fields of the right kinds that the rules contradict
    "piece given twice": (_action_changed(2, WON["actions"][0]), "actions[2] = "),
    "declare outside the variant": (_action_changed(1, 16), "actions[1] = 16 is illegal: action 16 (declare)"),
    "an action after the end": (lambda r: {**r, "actions": [*r["actions"], 0]}, "is illegal: the game is over"),
    "illegal opening": (_changed(opening=[3, 3, 3]), "opening[2] = 3 is illegal: piece 3 cannot be given"),
    "wrong position": (lambda r: {**r, "positions": ["f............... -"]}, "positions[0] is 'f............... -'"),
    "too many positions": (lambda r: {**r, "positions": [*r["positions"], "x", "y"]}, "18 positions for 16 actions"),
    "wrong winner": (_changed(winner=1), "the record has winner 1, but its actions end the game: player 0 wins"),
    "draw that is a win": (_changed(end="draw", winner=-1), "the record has winner -1, but its actions end the game"),
    "win that stops early": (_stopped_after(5), "the record ends in 'win', but its actions stop before the game"),
    "abandoned but over": (_changed(end="abandoned", winner=-1), "ends in 'abandoned', but its actions end the game"),
    "forfeit by the other side": (
        _stopped_after(3, end="forfeit", winner=_to_move_after(3)),
        f"player {_to_move_after(3)} was to move: only player {1 - _to_move_after(3)} can win by its forfeit",
    ),
}


@pytest.mark.parametrize(("broken", "message"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_record_is_told_in_one_line_naming_its_line_and_game(
    broken: Callable[[dict], Any] | bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = broken if isinstance(broken, bytes) else json.dumps(broken(WON)).encode()
    path = tmp_path / "games.jsonl"
    path.write_bytes(json.dumps(WON).encode() + b"\n\n" + line + b"\n")  # a blank line: game 1 is on line 3
    assert replay.main([str(path), "--game", "1", "--no-pause"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"quarto replay: {path} line 3 (game 1): ") and captured.err.count("\n") == 1
    assert message in captured.err
    assert len(captured.err) < 600  # a long field is quoted shortened


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        (b"", [], "holds no game record: it is empty"),
        (b"\n  \n", [], "holds no game record: it is empty"),
        (json.dumps(WON).encode(), ["--game", "1"], "has 1 game(s): --game must be 0-0, got 1"),
        (None, [], "is a folder; name a file"),
    ],
    ids=["empty", "blank lines only", "no such game", "a folder"],
)
def test_a_file_without_the_game_is_told_in_one_line(
    content: bytes | None, argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "games.jsonl"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    assert replay.main([str(path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("quarto replay: ") and err.count("\n") == 1 and message in err


def test_a_device_is_refused_rather_than_read_for_ever(capsys: pytest.CaptureFixture[str]) -> None:
    assert replay.main(["/dev/zero"]) == 2
    assert "is not a regular file (a named pipe or a device)" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------
# Options and output paths: usage errors (exit 2) before anything is rendered
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--delay", "nan"], "argument --delay: delay must be a finite number >= 0.01 and <= 60, got nan"),
        (["--delay", "inf"], "delay must be a finite number >= 0.01 and <= 60"),
        (["--delay", "0"], "delay must be a finite number >= 0.01"),
        (["--delay", "1e9"], "<= 60"),
        (["--game", "-1"], "argument --game: game must be an integer >= 0"),
        (["--game", "1.5"], "game must be an integer"),
        (["--delay", "0.5"], "--delay is used only with --gif"),  # the terminal's replay steps on Enter
        (["--delay", "0.5", "--frames", "f"], "--delay is used only with --gif"),
    ],
)
def test_bad_numbers_are_usage_errors(
    argv: list[str], message: str, games_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        replay.main([str(games_file), *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


UNWRITABLE = Path("/proc/quarto-test")
"""A place where nothing can be created, by root either."""


@pytest.mark.parametrize(
    ("option", "target", "message"),
    [
        ("--gif", lambda tmp: tmp, "is a folder; name a file"),
        ("--gif", lambda tmp: Path("/dev/null"), "is not a regular file"),
        ("--gif", lambda tmp: UNWRITABLE / "game.gif", "cannot be created"),
        ("--gif", lambda tmp: tmp / "games.jsonl" / "game.gif", "is a file, not a folder"),
        ("--frames", lambda tmp: tmp / "games.jsonl", "is a file, not a folder"),
        ("--frames", lambda tmp: Path("/dev/null"), "is a file, not a folder"),
        ("--frames", lambda tmp: UNWRITABLE / "frames", "cannot be created"),
    ],
    ids=[
        "gif folder",
        "gif /dev/null",
        "gif unwritable",
        "gif under a file",
        "frames file",
        "frames /dev/null",
        "frames unwritable",
    ],
)
def test_output_paths_are_checked_before_rendering(
    option: str,
    target: Callable[[Path], Path],
    message: str,
    games_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(replay, "render_image", _must_not_render)
    with pytest.raises(SystemExit) as exit_info:
        replay.main([str(games_file), option, str(target(tmp_path))])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("quarto replay: ") and option in last and message in last


def _must_not_render(*args: object) -> None:
    raise AssertionError("rendered before the output path was checked")
