"""The strength ladder, from seeded matches through :func:`agents.match.play_game`: greedy beats random, minimax
at depth 2 beats greedy, deeper minimax beats shallower, and the solver never loses a position it valued as a
win or a draw.

Minimax is deterministic given the position, so its matches start from varied openings: positions after a few
seeded random actions, each played twice with the seats swapped.
"""

from __future__ import annotations

import numpy as np
import pytest

from agents import make_agent
from agents.match import play_game
from agents.solver.minimax import solve
from agents.solver.positions import greedy_game_positions
from quarto_env.core import INITIAL_STATE, STANDARD, State, Variant, legal_actions, step


def random_openings(variant: Variant, count: int, actions: int, seed: int) -> list[State]:
    """``count`` positions after ``actions`` seeded uniformly random actions (games still going on)."""
    rng = np.random.default_rng(seed)
    openings: list[State] = []
    while len(openings) < count:
        state = INITIAL_STATE
        for _ in range(actions):
            if state.over:
                break
            moves = legal_actions(variant, state)
            state = step(variant, state, moves[rng.integers(len(moves))])
        if not state.over:
            openings.append(state)
    return openings


def match_score(first: str, second: str, openings: list[State], seed: int, variant: Variant = STANDARD) -> float:
    """The share of points ``first`` scores against ``second`` (win 1, draw 1/2), every opening played twice
    with the seats swapped."""
    a, b = make_agent(first, variant, seed=seed), make_agent(second, variant, seed=seed + 1)
    points = 0.0
    for opening in openings:
        points += play_game(variant, [a, b], opening).score(0)  # ``first`` is player 0, then player 1
        points += play_game(variant, [b, a], opening).score(1)
    return points / (2 * len(openings))


def test_greedy_beats_random_clearly() -> None:
    assert match_score("greedy", "random", [INITIAL_STATE] * 50, seed=1) >= 0.85  # 100 games


def test_minimax_depth_2_beats_greedy() -> None:
    assert match_score("minimax:depth=2", "greedy", random_openings(STANDARD, 30, 2, seed=2), seed=2) >= 0.75


@pytest.mark.parametrize(("deeper", "shallower"), [(3, 2), (4, 2), (8, 4)])
def test_deeper_minimax_beats_shallower(deeper: int, shallower: int) -> None:
    openings = random_openings(STANDARD, 25, 4, seed=3)
    assert match_score(f"minimax:depth={deeper}", f"minimax:depth={shallower}", openings, seed=3) > 0.6


def test_solver_never_loses_a_position_it_valued_as_a_win_or_draw() -> None:
    positions = greedy_game_positions(10, 12, seed=4)
    for opponent in ("greedy", "minimax:depth=4"):
        for index, start in enumerate(positions):
            value = solve(start).value
            solver, other = make_agent("solver:empties=10", STANDARD, seed=index), make_agent(opponent, STANDARD, 0)
            seats = [solver, other] if start.to_move == 0 else [other, solver]
            score = play_game(STANDARD, seats, start).score(start.to_move)
            assert score >= (value + 1) / 2, (opponent, index, value, score)  # win -> 1, draw -> at least 1/2
