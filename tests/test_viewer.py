"""quarto replay --html: the offline game viewer page. It is written for one game and for a tournament file, parses,
holds one entry per game and every position's board, puts the solver's verdicts on the moves that lose value,
refuses bad input in one line (exit 2, nothing written), and, where chromium is installed, shows the position
that its address names in a real browser."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from agents.match import play_game
from agents.solver.labels import action_values
from agents.specs import make_agent
from experiments.arena import replay
from experiments.arena.records import record_line
from experiments.evaluation.moves import move_verdict
from quarto_env.core import NO_WINNER, STANDARD, State, Variant, legal_actions, step
from quarto_env.notation import format_position


class _PageParser(HTMLParser):
    """The game list entries, the board data and the SVG positions of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[str] = []
        self.boards: list[tuple[str, str, str]] = []  # (game, move, position) of div#board, after a browser ran
        self.positions: list[str] = []
        self.verdicts: dict[str, str] = {}
        self._in_data = False
        self.data_text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "li" and "data-game" in found:
            self.entries.append(found["data-game"] or "")
        if tag == "li" and "data-verdict" in found:
            self.verdicts[found["data-move"] or ""] = found["data-verdict"] or ""
        if tag == "div" and found.get("id") == "board" and "data-move" in found:
            self.boards.append((found.get("data-game") or "", found["data-move"] or "", ""))
        if tag == "svg" and "data-position" in found:
            self.positions.append(found["data-position"] or "")
        self._in_data = tag == "script" and found.get("id") == "viewer-data"

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data_text += data

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False


def _parsed(path: Path) -> tuple[_PageParser, dict]:
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser, json.loads(parser.data_text)


def _board_svg(data: dict, game: int, move: int) -> str:
    return "\n".join(data["lines"][i] for i in data["games"][game]["boards"][move])


def _games_file(tmp_path: Path, count: int, variant: Variant = STANDARD) -> Path:
    records = [
        play_game(variant, [make_agent("greedy", variant, seed=s), make_agent("random", variant, seed=s + 1)])
        for s in range(count)
    ]
    path = tmp_path / f"games{count}.jsonl"
    path.write_text("".join(record_line(r, variant, game=i) for i, r in enumerate(records)))
    return path


@pytest.mark.parametrize("count", [1, 3])
def test_the_page_holds_every_game_and_every_position(tmp_path: Path, count: int) -> None:
    games = _games_file(tmp_path, count)
    page = tmp_path / "page.html"
    assert replay.main([str(games), "--html", str(page)]) == 0
    parser, data = _parsed(page)
    records = [json.loads(line) for line in games.read_text().splitlines()]
    assert parser.entries == [str(i) for i in range(count)]
    assert len(data["games"]) == count and not data["graded"]
    for index, record in enumerate(records):
        state = State()
        boards = data["games"][index]["boards"]
        assert len(boards) == len(record["actions"]) + 1
        for move, action in enumerate(record["actions"], 1):
            state = step(STANDARD, state, action)
            assert f'data-position="{format_position(state)}"' in _board_svg(data, index, move)
            assert data["games"][index]["moves"][move - 1]["position"] == format_position(state)
            assert data["games"][index]["moves"][move - 1]["verdict"] is None


def _scripted_game(seed: int) -> dict:
    """A record whose random opening places eight pieces, then greedy (seat 0) against random (seat 1)."""
    rng = np.random.default_rng(seed)
    state, opening = State(), []
    while state.num_empty > 8:
        action = int(rng.choice(legal_actions(STANDARD, state)))
        opening.append(action)
        state = step(STANDARD, state, action)
        if state.over:
            return _scripted_game(seed + 1000)
    agents = [make_agent("greedy", STANDARD, seed=seed), make_agent("random", STANDARD, seed=seed + 1)]
    actions = []
    while not state.over:
        action = int(agents[state.to_move].act(state))
        actions.append(action)
        state = step(STANDARD, state, action)
    end = "draw" if state.winner == NO_WINNER else "win"
    return {
        "variant": STANDARD.to_dict(),
        "seats": ["greedy", "random"],
        "opening": opening,
        "actions": actions,
        "end": end,
        "winner": int(state.winner),
    }


def _expected_verdicts(record: dict) -> list[str]:
    """The verdict on each agent move, from the solver's values and a comparison written here."""
    names = {1: "won", 0: "drawn", -1: "lost"}
    state = State()
    for action in record["opening"]:
        state = step(STANDARD, state, action)
    verdicts = []
    for action in record["actions"]:
        values = action_values(STANDARD, state)
        best = max(values.values())
        verdicts.append("kept" if values[action] == best else f"{names[best]}->{names[values[action]]}")
        state = step(STANDARD, state, action)
    return verdicts


def test_the_verdicts_sit_on_the_moves_that_lose_value(tmp_path: Path) -> None:
    records = [_scripted_game(seed) for seed in range(4)]
    expected = [_expected_verdicts(record) for record in records]
    assert any(v != "kept" for game in expected for v in game), "the scripted games must hold a mistake"
    games = tmp_path / "games.jsonl"
    games.write_text("".join(json.dumps(record) + "\n" for record in records))
    page = tmp_path / "page.html"
    assert replay.main([str(games), "--html", str(page), "--grade"]) == 0
    _, data = _parsed(page)
    assert data["graded"]
    for record, verdicts, game in zip(records, expected, data["games"], strict=True):
        moves = game["moves"]
        assert len(moves) == len(record["opening"]) + len(record["actions"])
        assert [m["verdict"] for m in moves[: len(record["opening"])]] == [None] * len(record["opening"])
        assert [m["verdict"] for m in moves[len(record["opening"]) :]] == verdicts
    lost = [sum(v != "kept" for v in game) for game in expected]
    assert all(f"{n} value-losing move(s)" in page.read_text() for n in lost)


def test_move_verdict_names_the_value_thrown_away() -> None:
    assert move_verdict({0: 1, 1: 0, 2: -1}, 0) == "kept"
    assert move_verdict({0: 1, 1: 0, 2: -1}, 1) == "won->drawn"
    assert move_verdict({0: 1, 1: 0, 2: -1}, 2) == "won->lost"
    assert move_verdict({0: 0, 1: -1}, 1) == "drawn->lost"
    assert move_verdict({0: -1, 1: -1}, 1) == "kept"


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], out: Path) -> str:
    try:
        status = replay.main(argv)
    except SystemExit as exit_:
        status = exit_.code  # type: ignore[assignment]
    assert status == 2
    assert not out.exists()
    lines = capsys.readouterr().err.strip().splitlines()
    return lines[-1]


def test_bad_input_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page.html"
    bad = tmp_path / "bad.jsonl"
    good = _games_file(tmp_path, 2)
    bad.write_text(good.read_text() + "not json\n")
    message = _refused(capsys, [str(bad), "--html", str(out)], out)
    assert "line 3 (game 2)" in message and "not JSON" in message
    message = _refused(capsys, [str(good), "--html", str(out), "--game", "2"], out)
    assert "--game must be 0-1" in message
    message = _refused(capsys, [str(good), "--grade"], out)
    assert "--grade" in message and "--html" in message
    message = _refused(capsys, [str(good), "--html", str(tmp_path)], tmp_path / "nothing")
    assert "is a folder" in message


def test_grade_is_refused_for_rules_with_no_opening_book(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    games = _games_file(tmp_path, 1, Variant.make(declaration=True))
    out = tmp_path / "page.html"
    message = _refused(capsys, [str(games), "--html", str(out), "--grade"], out)
    assert "opening book" in message
    assert replay.main([str(games), "--html", str(out)]) == 0 and out.exists()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: the browser test needs it")
def test_a_browser_shows_the_position_its_address_names(tmp_path: Path) -> None:
    records = [_scripted_game(seed) for seed in range(2)]
    games = tmp_path / "games.jsonl"
    games.write_text("".join(json.dumps(record) + "\n" for record in records))
    page = tmp_path / "page.html"
    assert replay.main([str(games), "--html", str(page), "--grade"]) == 0
    expected = _expected_verdicts(records[1])
    opening = len(records[1]["opening"])
    move = opening + 3
    state = State()
    for action in (records[1]["opening"] + records[1]["actions"])[:move]:
        state = step(STANDARD, state, action)
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"{page.as_uri()}#game=1&move={move}"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    parser = _PageParser()
    parser.feed(dom)
    assert parser.boards == [("1", str(move), "")]
    assert parser.positions == [format_position(state)]
    assert parser.verdicts == {str(opening + i + 1): verdict for i, verdict in enumerate(expected)}
