"""The Gumbel root of AlphaZero's search (:mod:`agents.tree.puct`, "Two roots"; Danihelka et al. 2022): its settings
(:class:`GumbelRoot`), the plan of sequential halving (:func:`halving_phases`), the completed Q of a root's actions,
and the halving itself over a batch of games (:class:`SequentialHalving`), which :class:`agents.tree.puct.PUCTSearch`
runs at its roots.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from quarto_env.core import NUM_ACTIONS
from quarto_env.errors import QuartoValueError

DEFAULT_GUMBEL_ACTIONS = 16
"""The most actions the Gumbel root considers (mctx's ``max_num_considered_actions``: all 16 of a Quarto turn)."""
DEFAULT_C_VISIT = 50.0
DEFAULT_C_SCALE = 0.1


@dataclasses.dataclass(frozen=True)
class GumbelRoot:
    """The Gumbel root's settings (see :mod:`agents.tree.puct`, "Two roots"): :meth:`agents.tree.puct.PUCTSearch.run`
    with ``gumbel=`` one of these forces each simulation's first action by sequential halving."""

    actions: int = DEFAULT_GUMBEL_ACTIONS
    """The most candidates considered, ``k`` (fewer when the root has fewer)."""
    rng: np.random.Generator | None = None
    """Where the Gumbel noise comes from; ``None``: no noise (``g = 0``), a deterministic search."""
    scale: float = 1.0
    """The noise's scale (``g ~ scale * Gumbel(0, 1)``): the top-``k`` draw samples ``softmax(log P / scale)``."""
    c_visit: float = DEFAULT_C_VISIT
    c_scale: float = DEFAULT_C_SCALE

    def __post_init__(self) -> None:
        if not 1 <= self.actions <= NUM_ACTIONS:
            raise QuartoValueError(f"the Gumbel root considers 1 to {NUM_ACTIONS} actions, got {self.actions}")
        for name in ("scale", "c_visit", "c_scale"):
            if not getattr(self, name) >= 0:
                raise QuartoValueError(f"the Gumbel root's {name} must be at least 0, got {getattr(self, name)}")


def halving_phases(considered: int, sims: int) -> list[tuple[int, int]]:
    """The visit plan of sequential halving over ``considered`` actions for ``sims`` simulations: one
    ``(survivors, visits each)`` per phase. A phase gives each survivor ``max(1, sims // (ceil(log2 considered) *
    survivors))`` visits, and ``max(2, survivors // 2)`` survive it (all, when one or two are left), until the
    phases hold ``sims`` visits or more: the last one is cut short where the budget ends."""
    phases = max(1, math.ceil(math.log2(considered)))
    plan = []
    survivors, planned = considered, 0
    while planned < sims:
        each = max(1, sims // (phases * survivors))
        plan.append((survivors, each))
        planned += survivors * each
        survivors = max(min(survivors, 2), survivors // 2)
    return plan


@functools.cache
def _halving_rounds(considered: int, sims: int) -> tuple[np.ndarray, np.ndarray]:
    """Sequential halving round by round: for each of the ``sims`` simulations, the rank among the survivors of
    the action it visits (each phase visits its survivors in turn, best first), and how many survive after it
    (0 where no phase ends)."""
    slots, survive = [], []
    for survivors, each in halving_phases(considered, sims):
        slots += list(range(survivors)) * each
        survive += [0] * (survivors * each - 1) + [max(min(survivors, 2), survivors // 2)]
    return np.array(slots[:sims], dtype=np.int64), np.array(survive[:sims], dtype=np.int64)


def completed_q(visits: np.ndarray, value_sum: np.ndarray, root_value: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """``(n, 16)`` each candidate's (``prior > 0``) completed Q: ``value_sum / visits`` where visited, else the
    root's ``root_value`` (``(n,)``); 0 outside the candidates. float32."""
    q = np.where(visits > 0, value_sum / np.maximum(visits, 1), root_value[:, None])
    return np.where(prior > 0, q, 0.0).astype(np.float32)


def root_values(visits: np.ndarray, value_sum: np.ndarray, network_value: np.ndarray) -> np.ndarray:
    """``(n,)`` float32: the mean value backed up through each root (``visits``, ``value_sum``: ``(n, 16)``), or
    its ``network_value`` where no simulation ran."""
    totals = visits.sum(1)
    return np.where(totals > 0, value_sum.sum(1) / np.maximum(totals, 1), network_value).astype(np.float32)


class SequentialHalving:
    """The Gumbel root of ``n`` games during one search: which root action each round forces, and the survivors.

    :param prior: ``(n, 16)`` the roots' priors (positive exactly on the candidates).
    :param gumbel: the settings.
    :param sims: the budget the phases are planned for.
    """

    def __init__(self, prior: np.ndarray, gumbel: GumbelRoot, sims: int) -> None:
        n = len(prior)
        self.gumbel = gumbel
        self.prior = prior
        noise = np.zeros(prior.shape) if gumbel.rng is None else gumbel.scale * gumbel.rng.gumbel(size=prior.shape)
        with np.errstate(divide="ignore"):
            self.base = np.where(prior > 0, noise + np.log(prior), -np.inf)
        """``g + log P`` of each action, ``-inf`` outside the candidates."""
        self.survivors = np.argsort(-self.base, axis=1, kind="stable")
        """Each game's actions, best first: its first ``count`` are the survivors."""
        self.count = np.minimum(gumbel.actions, (prior > 0).sum(1))
        self.slot = np.zeros((n, sims), dtype=np.int64)
        self.survive = np.zeros((n, sims), dtype=np.int64)
        for considered in np.unique(self.count):
            games = self.count == considered
            self.slot[games], self.survive[games] = _halving_rounds(int(considered), sims)
        self.games = np.arange(n)

    def forced(self, done: int) -> np.ndarray:
        """The root action of each game's simulation number ``done`` (int32)."""
        return self.survivors[self.games, self.slot[:, done]].astype(np.int32)

    def after(self, done: int, visits: np.ndarray, value_sum: np.ndarray, network_value: np.ndarray) -> None:
        """End the phases that simulation ``done`` ends: their better survivors stay (the roots' ``visits`` and
        ``value_sum`` are ``(n, 16)``)."""
        ending = np.flatnonzero(self.survive[:, done])
        if len(ending):
            self._rank(ending, visits, value_sum, network_value)
            self.count[ending] = self.survive[ending, done]

    def chosen(self, visits: np.ndarray, value_sum: np.ndarray, network_value: np.ndarray) -> np.ndarray:
        """``(n,)`` each game's survivor of the highest ``g + log P + sigma(completed Q)`` among the most visited
        (all survivors, unless the budget ended inside a phase: then those the phase reached)."""
        self._rank(self.games, visits, value_sum, network_value, most_visited_only=True)
        return self.survivors[:, 0].copy()

    def _rank(
        self,
        games: np.ndarray,
        visits: np.ndarray,
        value_sum: np.ndarray,
        network_value: np.ndarray,
        most_visited_only: bool = False,
    ) -> None:
        """Sort the survivors of ``games`` by ``g + log P + sigma(completed Q)``, best first (ties keep their order;
        ``most_visited_only``: the less visited after all of them)."""
        visits, value_sum = visits[games], value_sum[games]
        q = completed_q(visits, value_sum, root_values(visits, value_sum, network_value[games]), self.prior[games])
        most = visits.max(1, keepdims=True)
        score = self.base[games] + (self.gumbel.c_visit + most) * self.gumbel.c_scale * (q + 1) / 2
        if most_visited_only:
            score[visits < most] = -np.inf
        survivors = self.survivors[games]
        score = np.take_along_axis(score, survivors, 1)
        score[np.arange(NUM_ACTIONS) >= self.count[games, None]] = -np.inf
        self.survivors[games] = np.take_along_axis(survivors, np.argsort(-score, axis=1, kind="stable"), 1)
