"""Ratings and confidence intervals for tournament results.

Elo ratings fitted as a Bradley–Terry model by maximum likelihood on *all* games at once (not updated game by
game, so the order of games does not matter): agent ``i`` scores against ``j`` with expected score

    E_ij = 1 / (1 + 10 ** ((r_j - r_i) / 400)),

and a game's score (1 win, 0.5 draw, 0 loss) is its outcome; a draw counts as half a win and half a loss.
The likelihood fixes only differences, so one named *anchor* agent is pinned at ``anchor_rating``.

Two choices, both documented because they change the numbers:

* **Prior.** An agent that wins every game has an infinite maximum-likelihood rating. As in BayesElo, every
  pair that met gets ``prior_draws`` virtual draws (default 1) added before fitting: ratings stay finite and
  shrink a little towards each other; with hundreds of games per pair the effect is small.
* **Intervals.** 95% intervals come by default from a seeded bootstrap over games: each pair's games are
  resampled with replacement (keeping the schedule fixed), the model refitted, and the 2.5% and 97.5%
  quantiles taken. A pair whose games all ended the same way resamples to itself, so with few games and
  one-sided pairs the bootstrap understates the uncertainty; ``intervals="hessian"`` instead takes +-1.96
  standard errors from the inverse curvature of the log-likelihood (prior included) at the maximum, which
  stays wide when games are few. The anchor's interval is a point, since the others are measured from it.

Per-pair scores get the Wilson score interval (:func:`wilson_interval`), with a draw counted as half a win:
draws lower the true variance below the binomial one, so the interval is conservative where games are drawn
(25% too wide at a third of them drawn; of some width when all are).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from quarto_env.errors import QuartoValueError, RatingError

ELO_SCALE = 400 / math.log(10)
"""Rating points per unit of log-odds: 400 points is a 10:1 expected score ratio."""
Z_95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""


INTERVAL_METHODS = ("bootstrap", "hessian")


@dataclasses.dataclass(frozen=True)
class GameResult:
    """One game between agents ``a`` and ``b`` (indices into the agent names); ``score_a`` is 1, 0.5 or 0."""

    a: int
    b: int
    score_a: float


@dataclasses.dataclass(frozen=True)
class Rating:
    """An agent's fitted rating with its 95% bootstrap interval, games played and mean score."""

    name: str
    rating: float
    low: float
    high: float
    games: int
    score: float


class Share(NamedTuple):
    """A share of ``total`` decisions or games, with its 95% Wilson interval ``low`` to ``high``; a tuple still, as
    JSON takes it (``[share, low, high, total]``)."""

    share: float
    low: float
    high: float
    total: int


def wilson_share(hits: int, total: int) -> Share:
    """The share ``hits / total`` with its Wilson interval; none of none is ``Share(0.0, 0.0, 1.0, 0)``."""
    share = hits / total if total else 0.0
    return Share(share, *wilson_interval(share, total), total)


def wilson_interval(score: float, games: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for a mean score ``score`` over ``games`` games (draws as half a win)."""
    if games <= 0:
        return (0.0, 1.0)
    if not 0.0 <= score <= 1.0:
        raise QuartoValueError(f"score must be in [0, 1], got {score}")
    z2 = z * z
    centre = (score + z2 / (2 * games)) / (1 + z2 / games)
    half = z / (1 + z2 / games) * math.sqrt(score * (1 - score) / games + z2 / (4 * games * games))
    return (max(0.0, centre - half), min(1.0, centre + half))


def fit_ratings(
    names: Sequence[str],
    games: Sequence[GameResult],
    anchor: str,
    anchor_rating: float = 0.0,
    prior_draws: float = 1.0,
    intervals: str = "bootstrap",
    bootstrap: int = 1000,
    seed: int = 0,
) -> list[Rating]:
    """Elo ratings of ``names`` from ``games`` with 95% intervals, best first.

    :param anchor: the agent whose rating is fixed at ``anchor_rating``.
    :param prior_draws: virtual draws added to every pair that played (keeps unbeaten agents finite).
    :param intervals: ``"bootstrap"`` (percentiles over ``bootstrap`` refits on resampled games) or
        ``"hessian"`` (rating +- 1.96 standard errors from the curvature of the log-likelihood).
    :param bootstrap: number of bootstrap refits (0: no intervals, low = high = rating).
    :param seed: seed of the bootstrap resampling.
    """
    if anchor not in names:
        raise RatingError(f"anchor {anchor!r} is not one of the agents: {', '.join(names)}")
    if intervals not in INTERVAL_METHODS:
        raise QuartoValueError(f"unknown interval method {intervals!r}; allowed: {', '.join(INTERVAL_METHODS)}")
    if prior_draws < 0 or bootstrap < 0:
        raise QuartoValueError(f"prior_draws and bootstrap must be >= 0, got {prior_draws}, {bootstrap}")
    outcomes = _outcome_counts(len(names), games)
    _check_connected(names, outcomes.sum(axis=2))
    anchor_index = list(names).index(anchor)
    _check_finite_maximum(names, outcomes, prior_draws, "")
    ratings = _fit(outcomes, anchor_index, prior_draws) + anchor_rating
    low, high = ratings.copy(), ratings.copy()
    if intervals == "hessian":
        errors = _standard_errors(outcomes, anchor_index, prior_draws, ratings - anchor_rating)
        low, high = ratings - Z_95 * errors, ratings + Z_95 * errors
    elif bootstrap:
        resamples = [_resample(outcomes, rng) for rng in _bootstrap_generators(seed, bootstrap)]
        for resample in resamples:
            _check_finite_maximum(names, resample, prior_draws, " in a bootstrap resample")
        samples = np.stack([_fit(resample, anchor_index, prior_draws) + anchor_rating for resample in resamples])
        low, high = np.quantile(samples, [0.025, 0.975], axis=0)
    played, scored = _games_and_scores(outcomes)
    table = [
        Rating(name, float(ratings[i]), float(low[i]), float(high[i]), int(played[i]), float(scored[i]))
        for i, name in enumerate(names)
    ]
    return sorted(table, key=lambda r: -r.rating)


def expected_score(rating: float, opponent: float) -> float:
    """The model's expected score of an agent rated ``rating`` against one rated ``opponent``."""
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


# ---------------------------------------------------------------------------------------------------------
# Helper functions for the fit.
# ---------------------------------------------------------------------------------------------------------
def _outcome_counts(num_agents: int, games: Sequence[GameResult]) -> np.ndarray:
    """``counts[i, j, k]``: games of ``i`` against ``j`` in which ``i`` scored ``k / 2`` (k = 0, 1, 2)."""
    counts = np.zeros((num_agents, num_agents, 3))
    for game in games:
        if game.a == game.b:
            raise RatingError(f"agent {game.a} cannot play itself in a rated game")
        if game.score_a not in (0.0, 0.5, 1.0):
            raise RatingError(f"a game's score must be 0, 0.5 or 1, got {game.score_a}")
        k = int(2 * game.score_a)
        counts[game.a, game.b, k] += 1
        counts[game.b, game.a, 2 - k] += 1
    return counts


def _games_and_scores(outcomes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    played = outcomes.sum(axis=(1, 2))
    points = (outcomes[:, :, 1] * 0.5 + outcomes[:, :, 2]).sum(axis=1)
    return played, np.divide(points, played, out=np.zeros_like(points), where=played > 0)


def _check_connected(names: Sequence[str], played: np.ndarray) -> None:
    """Ratings are comparable only within a connected set of agents: raise naming the ones cut off."""
    reached = _reached(played)
    if len(reached) < len(names):
        apart = [names[i] for i in range(len(names)) if i not in reached]
        raise RatingError(f"no chain of games links {', '.join(apart)} to {names[0]}: their ratings are undefined")


def _check_finite_maximum(names: Sequence[str], outcomes: np.ndarray, prior_draws: float, where: str) -> None:
    """Without a prior, the ratings have a finite maximum only if every agent reaches every other through games
    it scored in (Zermelo's condition): otherwise some group won or lost every game against the rest, and its
    rating would run off to infinity (Newton's method stops at an arbitrary point). Raise, naming the fix."""
    if prior_draws > 0:
        return  # every pair that met has virtual draws: points both ways
    scored = outcomes[:, :, 1] + outcomes[:, :, 2]  # games of i against j in which i scored
    if len(_reached(scored)) < len(names) or len(_reached(scored.T)) < len(names):
        raise RatingError(
            f"the ratings have no finite maximum with prior_draws=0{where}: some agents won or lost every game "
            "against the others; give prior_draws > 0"
        )


def _reached(links: np.ndarray) -> set[int]:
    """The agents that agent 0 reaches along ``links[i, j] > 0``."""
    reached = {0}
    frontier = [0]
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(links[i]):
            if int(j) not in reached:
                reached.add(int(j))
                frontier.append(int(j))
    return reached


def _with_prior(outcomes: np.ndarray, prior_draws: float) -> tuple[np.ndarray, np.ndarray]:
    """``(played, points)``: games and points of ``i`` against ``j``, the prior's virtual draws included."""
    played = outcomes.sum(axis=2)
    points = outcomes[:, :, 1] * 0.5 + outcomes[:, :, 2]
    met = played > 0
    return played + prior_draws * met, points + 0.5 * prior_draws * met


def _gradient_and_hessian(
    strength: np.ndarray, played: np.ndarray, points: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Derivatives of the log-likelihood in natural log-odds units (``strength = rating / ELO_SCALE``)."""
    p = 1.0 / (1.0 + np.exp(strength[None, :] - strength[:, None]))  # p[i, j]: expected score of i against j
    gradient = (points - played * p).sum(axis=1)
    weights = played * p * p.T
    return gradient, weights - np.diag(weights.sum(axis=1))


def _fit(outcomes: np.ndarray, anchor: int, prior_draws: float, tolerance: float = 1e-9) -> np.ndarray:
    """Maximum-likelihood ratings (anchor at 0) by Newton's method on the concave log-likelihood."""
    played, points = _with_prior(outcomes, prior_draws)
    free = np.arange(len(played)) != anchor
    strength = np.zeros(len(played))
    for _ in range(100):
        gradient, hessian = _gradient_and_hessian(strength, played, points)
        delta = np.linalg.solve(hessian[np.ix_(free, free)], -gradient[free])
        strength[free] += delta
        if np.max(np.abs(delta)) < tolerance:
            break
    return strength * ELO_SCALE


def _standard_errors(outcomes: np.ndarray, anchor: int, prior_draws: float, ratings: np.ndarray) -> np.ndarray:
    """Standard errors of the ratings (anchor at 0) from the inverse observed information at the maximum."""
    played, points = _with_prior(outcomes, prior_draws)
    free = np.arange(len(played)) != anchor
    _, hessian = _gradient_and_hessian(ratings / ELO_SCALE, played, points)
    covariance = np.linalg.inv(-hessian[np.ix_(free, free)])
    errors = np.zeros(len(played))
    errors[free] = np.sqrt(np.diag(covariance)) * ELO_SCALE
    return errors


def _resample(outcomes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A bootstrap replicate: each pair's games drawn again with replacement, the schedule kept."""
    resampled = np.zeros_like(outcomes)
    n = len(outcomes)
    for i in range(n):
        for j in range(i + 1, n):
            games = int(outcomes[i, j].sum())
            if games:
                counts = rng.multinomial(games, outcomes[i, j] / games)
                resampled[i, j] = counts
                resampled[j, i] = counts[::-1]
    return resampled


def _bootstrap_generators(seed: int, count: int) -> list[np.random.Generator]:
    return [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(count)]
