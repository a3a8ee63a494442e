"""The options of a session's searches (:class:`PUCTOptions`): how it searches, moves and labels its samples.

Apart from :mod:`agents.tree.sessions`, which imports them (and from which they are imported), so a reader of the
sessions' play does not wade through the options' checks first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from agents.tree import choices
from agents.tree.gumbel_root import DEFAULT_GUMBEL_ACTIONS
from agents.tree.puct import PUCTResult
from quarto_env.checks import checked_number
from quarto_env.core import NUM_ACTIONS
from quarto_env.errors import QuartoValueError


@dataclasses.dataclass(frozen=True)
class PUCTOptions:
    """How a session searches, moves and labels: the options of the AlphaZero config's ``alphazero`` section
    (:func:`experiments.training.az_selfplay.search_options` maps one onto the other). An arena uses
    ``simulations``, ``root``, ``c_puct`` and ``gumbel_actions`` alone: its searches draw no noise and play their
    best action."""

    simulations: int = choices.DEFAULT_SIMULATIONS
    """Simulations of a full search (at least 0; 0 evaluates the root alone)."""
    root: str = "puct"
    """``puct`` or ``gumbel`` (:data:`agents.tree.choices.ROOTS`). A Gumbel root draws its own noise in every self-play
    search and plays its choice at every action: ``dirichlet_*`` and ``temperature_plies`` then do not apply."""
    c_puct: float = choices.DEFAULT_C_PUCT
    dirichlet_alpha: float | None = choices.DEFAULT_DIRICHLET_ALPHA
    """The Dirichlet noise mixed into the root priors of self-play's full PUCT searches; ``None``: none."""
    dirichlet_fraction: float = choices.DEFAULT_DIRICHLET_FRACTION
    """The noise's weight, 0 to 1."""
    temperature_plies: int = choices.DEFAULT_TEMPERATURE_PLIES
    """The first this many actions of a self-play game are sampled in proportion to the visits (PUCT root)."""
    targets: str = "completed_q"
    """The policy target of a sample (:data:`agents.tree.choices.POLICY_TARGETS`): ``visits``, the visit distribution,
    or ``completed_q``, the completed-Q improved policy (:meth:`agents.tree.puct.PUCTResult.improved_policy`)."""
    completed_q_beta: float = choices.DEFAULT_COMPLETED_Q_BETA
    gumbel_actions: int = DEFAULT_GUMBEL_ACTIONS
    """The most candidates a Gumbel root considers (1 to 16)."""
    full_search_share: float = choices.DEFAULT_FULL_SEARCH_SHARE
    """Playout-cap randomisation: the chance that a round of self-play moves gets a full search whose positions
    become samples; the other rounds search ``cheap_simulations`` without noise and keep nothing (0 < share <=
    1)."""
    cheap_simulations: int = choices.DEFAULT_CHEAP_SIMULATIONS

    def __post_init__(self) -> None:
        for name in ("simulations", "temperature_plies", "cheap_simulations"):  # 8.0 or 1e3 kept as ints
            object.__setattr__(self, name, int(checked_number(getattr(self, name), name, minimum=0, integer=True)))
        _check_choice("root", self.root, choices.ROOTS)
        _check_choice("targets", self.targets, choices.POLICY_TARGETS)
        checked_number(self.c_puct, "c_puct", above=0)
        if self.dirichlet_alpha is not None:
            checked_number(self.dirichlet_alpha, "dirichlet_alpha (or None: no noise)", above=0)
        checked_number(self.dirichlet_fraction, "dirichlet_fraction", minimum=0, maximum=1)
        checked_number(self.completed_q_beta, "completed_q_beta", above=0)
        gumbel_actions = checked_number(
            self.gumbel_actions, "gumbel_actions", minimum=1, maximum=NUM_ACTIONS, integer=True
        )
        object.__setattr__(self, "gumbel_actions", int(gumbel_actions))
        checked_number(self.full_search_share, "full_search_share", above=0, maximum=1)

    @property
    def most_simulations(self) -> int:
        """The largest search a self-play round makes: what the trees are allocated for."""
        return max(self.simulations, self.cheap_simulations if self.full_search_share < 1 else 0)

    def policy_target(self, result: PUCTResult) -> np.ndarray:
        """``(n, 16)`` the policy targets of a search's roots (:attr:`targets`)."""
        if self.targets == "completed_q":
            return result.improved_policy(self.completed_q_beta)
        return result.policy()


def _check_choice(name: str, value: object, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise QuartoValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
