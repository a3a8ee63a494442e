"""Ratings: the Bradley–Terry fit against closed forms and its optimality conditions, intervals, anchoring."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.evaluation.ratings import GameResult, RatingError, expected_score, fit_ratings, wilson_interval


def simulated_games(true_ratings: list[float], games_per_pair: int, draw_rate: float, seed: int) -> list[GameResult]:
    """Games drawn from the model itself: a draw with probability ``draw_rate``, else a win or loss such that
    the expected score is the model's."""
    rng = np.random.default_rng(seed)
    games = []
    for i in range(len(true_ratings)):
        for j in range(i + 1, len(true_ratings)):
            expected = expected_score(true_ratings[i], true_ratings[j])
            draw = min(draw_rate, 2 * min(expected, 1 - expected))
            for _ in range(games_per_pair):
                u = rng.random()
                score = 0.5 if u < draw else (1.0 if u < draw + expected - draw / 2 else 0.0)
                games.append(GameResult(i, j, score))
    return games


def test_two_agents_match_the_closed_form() -> None:
    # 7 wins, 2 draws, 1 loss, plus one virtual draw: score 8.5 / 11; Elo difference 400 log10(s / (1 - s)).
    games = [GameResult(0, 1, 1.0)] * 7 + [GameResult(0, 1, 0.5)] * 2 + [GameResult(1, 0, 1.0)]
    ratings = {r.name: r for r in fit_ratings(["a", "b"], games, anchor="b", bootstrap=0)}
    s = 8.5 / 11
    assert ratings["a"].rating == pytest.approx(400 * math.log10(s / (1 - s)), abs=1e-6)
    assert ratings["b"].rating == 0.0
    assert ratings["a"].games == 10 and ratings["a"].score == pytest.approx(0.8)


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 6), st.integers(0, 10_000), st.sampled_from([0.0, 0.5, 2.0]))
def test_fit_satisfies_the_likelihood_equations(agents: int, seed: int, prior: float) -> None:
    """At the maximum every agent's expected score over its games (prior included) equals its actual score."""
    rng = np.random.default_rng(seed)
    true = list(rng.normal(0, 300, agents))
    games = simulated_games(true, games_per_pair=6, draw_rate=0.2, seed=seed)
    if prior == 0.0:  # without a prior an unbeaten agent has no finite maximum: keep one game of each kind
        games += [GameResult(i, j, s) for i in range(agents) for j in range(i + 1, agents) for s in (0.0, 1.0)]
    names = [f"agent{i}" for i in range(agents)]
    fitted = {r.name: r.rating for r in fit_ratings(names, games, anchor="agent0", prior_draws=prior, bootstrap=0)}
    r = [fitted[n] for n in names]
    for i in range(agents):
        actual = expected_total = 0.0
        for g in games:
            if i in (g.a, g.b):
                me, other = (g.a, g.b) if g.a == i else (g.b, g.a)
                actual += g.score_a if g.a == i else 1 - g.score_a
                expected_total += expected_score(r[me], r[other])
        for j in range(agents):
            if j != i and any({g.a, g.b} == {i, j} for g in games):
                actual += prior / 2
                expected_total += prior * expected_score(r[i], r[j])
        assert actual == pytest.approx(expected_total, abs=1e-6)


def test_recovers_known_ratings_within_the_intervals() -> None:
    true = [0.0, 150.0, 400.0, 700.0]
    games = simulated_games(true, games_per_pair=400, draw_rate=0.3, seed=1)
    table = fit_ratings(["a", "b", "c", "d"], games, anchor="a", bootstrap=300, seed=0)
    assert [r.name for r in table] == ["d", "c", "b", "a"]
    for r in table:
        expected = true["abcd".index(r.name)]
        assert r.low <= r.rating <= r.high
        assert r.low - 15 <= expected <= r.high + 15, r  # the prior shrinks a little towards the others


def test_intervals_narrow_with_more_games_and_are_seeded() -> None:
    names = ["a", "b", "c"]
    few = fit_ratings(names, simulated_games([0, 100, 200], 20, 0.2, seed=2), "a", bootstrap=200, seed=0)
    many = fit_ratings(names, simulated_games([0, 100, 200], 400, 0.2, seed=2), "a", bootstrap=200, seed=0)
    width = {r.name: r.high - r.low for r in many}
    assert all(width[r.name] < r.high - r.low for r in few if r.name != "a")
    again = fit_ratings(names, simulated_games([0, 100, 200], 20, 0.2, seed=2), "a", bootstrap=200, seed=0)
    assert again == few


def test_anchor_is_pinned_and_order_does_not_matter() -> None:
    games = simulated_games([0, 200, 300], 30, 0.2, seed=4)
    table = fit_ratings(["x", "y", "z"], games, anchor="y", anchor_rating=1500, bootstrap=100)
    y = next(r for r in table if r.name == "y")
    assert (y.rating, y.low, y.high) == (1500, 1500, 1500)
    shuffled = list(reversed(games))
    assert fit_ratings(["x", "y", "z"], shuffled, anchor="y", anchor_rating=1500, bootstrap=100) == table


def test_all_draws_give_equal_ratings_and_unbeaten_agents_stay_finite() -> None:
    draws = [GameResult(0, 1, 0.5)] * 10
    assert [r.rating for r in fit_ratings(["a", "b"], draws, "a", bootstrap=0)] == pytest.approx([0, 0])
    sweep = [GameResult(0, 1, 1.0)] * 50
    best = fit_ratings(["a", "b"], sweep, "b", bootstrap=50)[0]
    assert best.name == "a" and math.isfinite(best.rating) and best.rating > 600
    # Without a prior the unbeaten agent has no finite rating: refused, not the point where Newton stopped
    with pytest.raises(RatingError, match="no finite maximum with prior_draws=0"):
        fit_ratings(["a", "b"], sweep, "b", prior_draws=0, bootstrap=0)


def test_hessian_intervals_match_the_two_agent_closed_form() -> None:
    # 7 wins, 2 draws, 1 loss plus one virtual draw: p = 8.5 / 11 at the maximum; the information of the
    # 11 games is 11 p (1 - p) per unit of log-odds squared.
    games = [GameResult(0, 1, 1.0)] * 7 + [GameResult(0, 1, 0.5)] * 2 + [GameResult(1, 0, 1.0)]
    a = next(r for r in fit_ratings(["a", "b"], games, anchor="b", intervals="hessian") if r.name == "a")
    p = 8.5 / 11
    error = 400 / math.log(10) / math.sqrt(11 * p * (1 - p))
    assert (a.low, a.high) == pytest.approx((a.rating - 1.959964 * error, a.rating + 1.959964 * error), abs=1e-3)


def test_one_sided_pairs_bootstrap_to_a_point_but_not_with_the_hessian() -> None:
    sweep = [GameResult(0, 1, 1.0)] * 4
    boot = fit_ratings(["a", "b"], sweep, "b", bootstrap=100)[0]
    hessian = fit_ratings(["a", "b"], sweep, "b", intervals="hessian")[0]
    assert boot.low == boot.high == boot.rating  # the documented limitation of the bootstrap
    assert hessian.low < 0 < hessian.rating < hessian.high and hessian.high - hessian.low > 1000
    with pytest.raises(ValueError, match="allowed: bootstrap, hessian"):
        fit_ratings(["a", "b"], sweep, "b", intervals="profile")


def test_errors_name_the_problem() -> None:
    with pytest.raises(RatingError, match="anchor 'zz' is not one of the agents: a, b"):
        fit_ratings(["a", "b"], [GameResult(0, 1, 1.0)], anchor="zz")
    with pytest.raises(RatingError, match="no chain of games links c, d"):
        fit_ratings(["a", "b", "c", "d"], [GameResult(0, 1, 1.0), GameResult(2, 3, 0.0)], anchor="a")
    with pytest.raises(RatingError, match=r"score must be 0, 0\.5 or 1"):
        fit_ratings(["a", "b"], [GameResult(0, 1, 0.7)], anchor="a")


def test_wilson_interval_matches_textbook_values() -> None:
    # Wilson (1927) / Newcombe (1998), 95%: 8 of 10 -> [0.490, 0.943]; 0 of 10 -> [0, 0.278].
    assert wilson_interval(0.8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0.0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    low, high = wilson_interval(0.5, 10_000)
    assert high - low == pytest.approx(2 * 1.96 * 0.005, rel=1e-3)
    with pytest.raises(ValueError, match=r"score must be in \[0, 1\]"):
        wilson_interval(1.5, 3)
