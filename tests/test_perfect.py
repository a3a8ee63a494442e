"""Points lost against perfect play (experiments/evaluation/perfect.py): the solver loses nothing, an agent that hands
over won games loses them, the opening values and their sign, and the reports of ``quarto grade
--perfect-games``, ``quarto evaluate --perfect-games`` and a tournament with a ``solver`` entrant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.base import Agent
from agents.match import GameRecord, opening_state
from agents.solver.minimax import default_solver
from agents.specs import make_agent
from experiments.arena import tournament
from experiments.evaluation.perfect import (
    PERFECT_SPEC,
    perfect_game,
    perfect_score,
    plays_perfectly_from,
    points_lost,
    solver_agent,
)
from experiments.evaluation.ratings import wilson_interval
from quarto_env.core import NO_WINNER, STANDARD, State, Variant, bits, legal_actions, winning_squares_for
from quarto_env.notation import parse_position


class GiveAway(Agent):
    """Throws games away, deterministically: places on the lowest empty square, and gives a piece that wins at
    once for the receiver whenever there is one (else the lowest piece)."""

    spec = "give-away"

    def act(self, state: State) -> int:
        if state.placing:
            return min(legal_actions(self.variant, state))
        winning = [p for p in bits(state.available) if winning_squares_for(self.variant, state, p)]
        return min(winning or legal_actions(self.variant, state))


def test_the_perfect_score_is_the_exact_value_for_the_seat() -> None:
    won = parse_position("135.4.a9eb.c.8.7 0")  # the player to move places piece 0 on square 3 and wins
    solver = default_solver(STANDARD)
    assert perfect_score(won, won.to_move, solver) == 1.0
    assert perfect_score(won, 1 - won.to_move, solver) == 0.0
    lost = parse_position("135.4.a9eb.c.8.7 -")  # every piece left completes row 0: the giver loses
    assert perfect_score(lost, lost.to_move, solver) == 0.0 and perfect_score(lost, 1 - lost.to_move, solver) == 1.0


@pytest.mark.slow
def test_the_solver_loses_nothing_against_perfect_play() -> None:
    report = points_lost(make_agent("solver", STANDARD, seed=5), STANDARD, games=10, seed=3)
    assert report.counts() == {"games": 10, "lost_nothing": 10, "lost_half": 0, "lost_one": 0}
    assert report.mean_lost() == (0.0, *wilson_interval(0.0, 10))
    assert report.opponent == PERFECT_SPEC and report.agent == "solver"
    # five seeded openings, each played once in each seat, each worth its exact value to the seat
    openings = [game.opening for game in report.games]
    assert openings[::2] == openings[1::2] and len(set(openings)) == 5 and all(len(o) == 4 for o in openings)
    assert [game.seat for game in report.games] == [0, 1] * 5
    for game in report.games:
        state = opening_state(STANDARD, game.opening)
        value = default_solver(STANDARD).solve(state).value
        assert game.perfect_score == (1 + (value if game.seat == state.to_move else -value)) / 2
        assert game.score == game.perfect_score


def test_an_agent_that_throws_games_away_loses_points() -> None:
    report = points_lost(GiveAway(STANDARD), STANDARD, games=4, seed=0)
    lost = [game.perfect_score - game.score for game in report.games]
    assert [game.lost for game in report.games] == lost and all(x in (0.5, 1.0) for x in lost)
    mean, low, high = report.mean_lost()
    assert mean == sum(lost) / 4 > 0 and low <= mean <= high
    assert report.share_losing() == (1.0, *wilson_interval(1.0, 4), 4)
    assert (report.share_losing().total, report.mean_lost().mean) == (4, mean)  # named results
    summary = report.summary()
    assert summary["perfect_points"] - summary["points"] == sum(lost)
    assert summary["lost_half"] + summary["lost_one"] == 4 == summary["games"]


def test_scoring_above_perfect_play_is_reported_as_a_bug() -> None:
    won_by_seat_0 = GameRecord(seats=("lucky", "solver"), winner=0, end="win")
    assert perfect_game(won_by_seat_0, (0, 1), seat=0, perfect=1.0).lost == 0.0
    with pytest.raises(AssertionError, match=r"lucky scored 1.0 from opening \[0, 1\], worth 0.5 under perfect"):
        perfect_game(won_by_seat_0, (0, 1), seat=0, perfect=0.5)
    drawn = GameRecord(seats=("a", "b"), winner=NO_WINNER)
    assert perfect_game(drawn, (), seat=1, perfect=1.0).lost == 0.5


@pytest.mark.parametrize("games", [0, 1, 3])
def test_games_must_come_in_pairs_of_seats(games: int) -> None:
    with pytest.raises(ValueError, match=f"games must be an even number >= 2 .* got {games}"):
        points_lost(make_agent("random"), STANDARD, games=games, seed=0)


def test_the_solver_plays_perfectly_where_its_book_or_its_empties_reach() -> None:
    bookless = Variant.make(attributes=3)  # no book ships for these rules
    opening = opening_state(bookless, (0, 0, 1, 1))  # 14 empty squares
    assert solver_agent("greedy", bookless) is None
    shallow, deep = solver_agent("solver:empties=12", bookless), solver_agent("solver:empties=14", bookless)
    assert shallow is not None and deep is not None
    assert not plays_perfectly_from(shallow, opening) and plays_perfectly_from(deep, opening)
    with_book = solver_agent("solver:empties=4", STANDARD)
    assert with_book is not None and plays_perfectly_from(with_book, opening_state(STANDARD, (0, 0, 1, 1)))


def test_a_tournament_with_the_solver_reports_points_lost(tmp_path: Path) -> None:
    out = tmp_path / "t"
    argv = ["greedy", "solver", "--games", "4", "--jobs", "1", "--no-progress", "--intervals", "hessian"]
    assert tournament.main([*argv, "--out", str(out)]) == 0
    (report,) = json.loads((out / "perfect.json").read_text())
    assert (report["agent"], report["opponent"], report["games"]) == ("greedy", "solver", 4)
    solver = default_solver(STANDARD)
    points = perfect = 0.0
    for line in (out / "games.jsonl").read_text().splitlines():
        game = json.loads(line)
        seat = game["seats"].index("greedy")
        points += 0.5 if game["winner"] == NO_WINNER else float(game["winner"] == seat)
        perfect += perfect_score(opening_state(STANDARD, game["opening"]), seat, solver)
    assert (report["points"], report["perfect_points"]) == (points, perfect)
    assert report["mean_lost"][0] == (perfect - points) / 4
    assert "Points lost against perfect play" in (out / "perfect.md").read_text()


def test_a_tournament_without_the_solver_writes_no_perfect_play(tmp_path: Path) -> None:
    argv = ["greedy", "random", "--games", "2", "--jobs", "1", "--no-progress", "--intervals", "hessian"]
    assert tournament.main([*argv, "--out", str(tmp_path / "t")]) == 0
    assert not (tmp_path / "t" / "perfect.json").exists()


def test_evaluate_reports_the_checkpoints_points_lost(
    tiny_run: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.training import evaluate

    monkeypatch.setattr(evaluate, "evaluate_all", lambda *args: [])  # only the games against perfect play
    assert evaluate.main([str(tiny_run[0]), "--opponents", "random", "--perfect-games", "2", "--seed", "1"]) == 0
    output = capsys.readouterr().out
    assert "Points lost against perfect play" in output
    rows = [line for line in output.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[:3] for row in rows] == [
        ["| `argmax`", f"`{PERFECT_SPEC}`", "2"],
        ["| `sampled`", f"`{PERFECT_SPEC}`", "2"],
    ]
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([str(tiny_run[0]), "--perfect-games", "3"])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "argument --perfect-games: perfect-games must be even" in error
