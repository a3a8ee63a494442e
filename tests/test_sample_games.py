"""The sample games of the evaluations (``sample_games``): an evaluation keeps its first games whole; a PPO and an
alphazero run write each one's moves (``games/sample_<n>``) and the picture of its first mistake at every
evaluation, from the same openings; the solver's marks on a scripted game with a known blunder; which decisions
are fast enough to grade; off, no ``games/`` tag; bad values refused in one line."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.solver.minimax import solve
from agents.specs import make_agent
from experiments.evaluation.games import AgentMover, KeptGame, evaluate
from experiments.evaluation.grading import PositionValues
from experiments.evaluation.sample_games import NOT_GRADED, fast_to_grade, game_markdown, graded_games
from experiments.training import train as train_module
from experiments.training.config import ConfigError
from experiments.training.config_file import load_config
from quarto_env.core import INITIAL_STATE, STANDARD, State, Variant, legal_actions, step
from quarto_env.notation import parse_position
from tests.test_train_alphazero import TINY_ALPHAZERO

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train(argv: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert train_module.main(argv) == 0


def _events(run_dir: Path) -> EventAccumulator:
    events = EventAccumulator(str(run_dir / "tb"), size_guidance={"tensors": 0, "images": 0, "scalars": 0})
    events.Reload()
    return events


def _texts(events: EventAccumulator, tag: str) -> list[tuple[int, str]]:
    return [(e.step, e.tensor_proto.string_val[0].decode()) for e in events.Tensors(f"{tag}/text_summary")]


def _games_tags(events: EventAccumulator) -> list[str]:
    tags = events.Tags()
    return [tag for kind in ("tensors", "images", "scalars") for tag in tags[kind] if tag.startswith("games/")]


def check_sample_games(run_dir: Path, count: int, opponent: str) -> None:
    """Each of ``count`` sample games has its text and its picture at every evaluation step, and no more."""
    events = _events(run_dir)
    evaluations = [e.step for e in events.Scalars("eval/score")]
    assert len(evaluations) >= 2
    for number in range(count):
        texts = _texts(events, f"games/sample_{number}")
        assert [step for step, _ in texts] == evaluations
        assert [e.step for e in events.Images(f"games/sample_{number}/first_mistake")] == evaluations
        seat = "first" if number % 2 == 0 else "second"
        for _, text in texts:
            assert text.startswith(f"**learner ({seat}) vs {opponent}**")
            assert "| move | player | action | position after | solver |" in text
        openings = {tuple(line for line in text.splitlines() if "opening (random)" in line) for _, text in texts}
        assert len(openings) == 1 and len(next(iter(openings))) == 4  # the same opening at every evaluation
    assert not any(tag.startswith(f"games/sample_{count}") for tag in _games_tags(events))


def test_an_evaluation_keeps_its_first_games_whole() -> None:
    learner = AgentMover(make_agent("random", STANDARD, seed=1))
    result = evaluate(learner, "greedy", STANDARD, 6, seed=3, opening_plies=4, keep_games=3)
    assert [game.learner_seat for game in result.games] == [0, 1, 0]
    assert result.games[0].opening == result.games[1].opening != result.games[2].opening
    for number, game in enumerate(result.games):
        assert len(game.opening) == 4
        state = INITIAL_STATE
        for action in (*game.opening, *game.actions):
            assert action in legal_actions(STANDARD, state)
            state = step(STANDARD, state, action)
        assert state.over
        if number == 0:
            assert state == result.final_state
    assert evaluate(learner, "greedy", STANDARD, 2, seed=3).games == []


def test_a_ppo_run_shows_its_sample_games_at_every_evaluation(tiny: list[str], tmp_path: Path) -> None:
    overrides = [item for item in tiny if not item.startswith(("grade_positions", "early_evals"))]
    _train([*overrides, "grade_positions=0", "early_evals=[0]", "sample_games=2", "--run-dir", str(tmp_path / "run")])
    check_sample_games(tmp_path / "run", 2, "greedy")  # the last of eval_opponents


def test_an_alphazero_run_shows_its_sample_games_at_every_evaluation(tmp_path: Path) -> None:
    overrides = [item for item in TINY_ALPHAZERO if not item.startswith("grade_positions")]
    _train([*overrides, "grade_positions=0", "sample_games=1", "--run-dir", str(tmp_path / "run")])
    check_sample_games(tmp_path / "run", 1, "random")


def test_a_run_without_sample_games_writes_no_games_tags(tiny_run: tuple[Path, str]) -> None:
    events = _events(tiny_run[0])
    assert events.Images("eval/final_board")  # the run wrote its other pictures
    assert _games_tags(events) == []


def _hands_a_win(variant: Variant, state: State, piece: int) -> bool:
    """Whether giving ``piece`` lets the opponent win with its placement: by the rules alone."""
    given = step(variant, state, piece)
    return any(step(variant, given, square).winner == given.to_move for square in legal_actions(variant, given))


def _scripted_blunder(seed: int) -> tuple[KeptGame, int, State]:
    """A game in which the learner (seat 0, the exact solver agent, which keeps the value of every position) plays
    random until its first give with at most 10 empty squares where a piece hands the opponent an immediate win:
    it gives that piece, and the opponent wins. Returns the game, the blunder's index and its position."""
    variant, seat = STANDARD, 0
    learner, opponent = make_agent("solver", variant, seed), make_agent("random", variant, seed + 1)
    state, actions = INITIAL_STATE, []
    while not state.over:
        if state.to_move == seat and not state.placing and state.num_empty <= 10:
            losing = [piece for piece in legal_actions(variant, state) if _hands_a_win(variant, state, piece)]
        else:
            losing = []
        if losing:
            blunder, before = len(actions), state
            state = step(variant, state, losing[0])
            win = next(s for s in legal_actions(variant, state) if step(variant, state, s).winner == 1 - seat)
            return KeptGame((), [*actions, losing[0], win], seat), blunder, before
        action = int((learner if state.to_move == seat else opponent).act(state))
        actions.append(action)
        state = step(variant, state, action)
    raise AssertionError("the scripted game ended before the blunder: try another seed")


@pytest.mark.parametrize("seed", [0, 3])  # the learner blunders from a draw (seed 0), from a win (seed 3)
def test_the_solver_marks_the_blunder_and_keeps_the_exact_moves(seed: int) -> None:
    kept, blunder, before = _scripted_blunder(seed)
    value = solve(before).value  # the learner's value before the blunder; giving the winning piece loses
    assert value >= 0  # the solver agent kept the start's draw
    (game,) = graded_games([kept], "random", STANDARD, PositionValues(STANDARD))
    assert game.result() == "random wins"
    assert game.first_mistake == blunder and game.moves[blunder].before == before
    assert game.moves[blunder].verdict == {1: "won->lost", 0: "drawn->lost"}[value]
    for move in game.moves:
        if move.mover != "learner":
            assert move.verdict is None
        elif move.before.num_empty in (11, 12):  # outside the book, above 10 empty squares: too slow
            assert move.verdict == NOT_GRADED
        elif move is not game.moves[blunder]:
            assert move.verdict == "kept"  # the exact solver agent's moves
    text = game_markdown(game)
    assert f"**{game.moves[blunder].verdict}**" in text and "1 lost value, the first at move" in text
    assert len([line for line in text.splitlines() if line.startswith("| ")]) == 2 + len(game.moves)  # the header


def test_decisions_are_graded_where_the_solver_is_fast() -> None:
    declaration = Variant.make(declaration=True)
    assert fast_to_grade(STANDARD, INITIAL_STATE)  # the opening book values it
    assert fast_to_grade(STANDARD, parse_position("0....8....5..... 3"))  # 13 empty: the book
    assert not fast_to_grade(STANDARD, parse_position("0....8....5....3 -"))  # 12 empty: a search
    assert not fast_to_grade(STANDARD, parse_position("0....8....5..4.3 d"))  # 11 empty
    assert fast_to_grade(STANDARD, parse_position("0....8...d5..4.3 -"))  # 10 empty
    assert not fast_to_grade(declaration, INITIAL_STATE)  # no book for the declaration variant
    assert fast_to_grade(declaration, parse_position("0....8...d5..4.3 -", declaration))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["sample_games=-1"], r"config field sample_games must be an integer >= 0 and <= 16, got -1"),
        (["sample_games=17"], r"config field sample_games must be an integer >= 0 and <= 16, got 17"),
        (["sample_games=1.5"], r"config field sample_games must be int, got 1.5"),
        (["sample_games=true"], r"config field sample_games must be int, got True"),
        (["eval_games=8", "sample_games=9"], r"sample_games must be <= eval_games = 8 \(the sample games are"),
    ],
)
def test_bad_sample_games_are_refused_in_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        load_config(None, overrides)
    assert "\n" not in str(refused.value)
