"""quarto replay: steps through a record, writes GIF and PNG frames, and refuses broken records clearly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from agents.base import make_agent
from agents.match import play_game
from experiments import replay
from experiments.arena_io import record_line
from quarto_env.core import Variant

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
        "actions": [3, 0],
        "positions": ["................ -", "................ 3", "3............... -"],
        "winner": 1,
        "end": "forfeit",
    }
    frames = list(replay.replay_frames(record))
    assert len(frames) == 3
    assert frames[-1][1] == "move 2: fast places piece 3 TDrf on square 0 -- " + (
        "slow overran the time limit and forfeits: fast wins"
    )


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        ('{"seats": ["a", "b"], "actions": []}\n', [], "not a game record: missing variant"),
        ("not json\n", [], "line 1 is not JSON"),
        (None, ["--game", "4"], "has 2 game(s): --game must be 0-1, got 4"),
        ('{"variant": {"squares": "yes"}, "seats": ["a", "b"], "actions": [1]}\n', [], "is not valid"),
    ],
)
def test_broken_records_are_refused_with_a_clear_message(
    content: str | None, argv: list[str], message: str, games_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if content is not None:
        games_file.write_text(content)
    assert replay.main([str(games_file), *argv]) == 1
    assert message in capsys.readouterr().err


def test_a_record_that_breaks_the_rules_is_refused(games_file: Path) -> None:
    record = json.loads(games_file.read_text().splitlines()[0])
    record["actions"][2] = record["actions"][0]  # give the first piece again: it is on the board
    record.pop("positions")
    with pytest.raises(replay.RecordError, match="move 2"):
        list(replay.replay_frames(record))
    tampered = json.loads(games_file.read_text().splitlines()[0])
    tampered["positions"][1] = "f............... -"
    with pytest.raises(replay.RecordError, match="move 1: the record has position"):
        list(replay.replay_frames(tampered))
