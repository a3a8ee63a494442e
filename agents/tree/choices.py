"""The choices of the tree searches and their defaults, their one home: the ``mcts`` agent's playouts
(:data:`PLAYOUTS`); which root a PUCT search searches from (:data:`ROOTS`), what a searched position's policy target is
(:data:`POLICY_TARGETS`), and the defaults that the sessions' options (:class:`agents.tree.options.PUCTOptions`) and
the training config's ``alphazero`` section share.

Plain data, without numba or torch, so that the agents' specs (:mod:`agents.specs`) and the training config
(:mod:`experiments.training.config`) check their options against them without loading the searches; and the one
rule of the searching agents' budget (:func:`simulations_per_move`).
"""

from __future__ import annotations

from quarto_env.errors import QuartoValueError

PLAYOUTS = ("tactical", "random")
"""How the ``mcts`` agent's playouts play: ``tactical`` (:func:`agents.tree.uct.tactical_playout`: a win when the
piece in hand makes one, no piece that hands the receiver a win while a safe one is left) or ``random`` (uniform, as
:func:`quarto_env.fast.random_playout`)."""
DEFAULT_PLAYOUT = "tactical"
"""The ``mcts`` agent's playout unless a spec or a caller names one."""
DEFAULT_UCT_SIMULATIONS = 2000
"""The ``mcts`` agent's simulations per move unless a spec or a caller names them (or a time budget)."""


def simulations_per_move(sims: int | None, time: float, default: int) -> int:
    """A searching agent's ``sims``, or ``default`` when none were named (``None``). A time budget replaces the
    simulations, so naming both is refused, whatever their values: ``sims=2000,time=1`` would otherwise search
    for a second and say nothing of the 2,000."""
    if time and sims is not None:
        raise QuartoValueError(f"sims={sims} and time={time}: a time budget replaces sims; give one of them")
    return default if sims is None else sims


DEFAULT_C_PUCT = 1.5
"""The PUCT exploration constant's default (:mod:`agents.tree.puct`)."""
ROOTS = ("puct", "gumbel")
"""The search's roots: PUCT (:meth:`agents.tree.puct.PUCTSearch.run` without ``gumbel``), or the Gumbel root's
sequential halving (with a :class:`agents.tree.gumbel_root.GumbelRoot`)."""
POLICY_TARGETS = ("visits", "completed_q")
"""The policy targets of a searched position: the visit distribution (:meth:`agents.tree.puct.PUCTResult.policy`)
or the completed-Q improved policy (:meth:`agents.tree.puct.PUCTResult.improved_policy`), Gumbel MuZero's
``softmax(log prior + completed_q_beta * completed Q)``."""
DEFAULT_SIMULATIONS = 64
"""Simulations of a full self-play search."""
DEFAULT_CHEAP_SIMULATIONS = 16
"""Simulations of a cheap self-play search (playout-cap randomisation)."""
DEFAULT_FULL_SEARCH_SHARE = 1.0
"""The chance that a round of self-play moves is searched fully: 1, every round."""
DEFAULT_DIRICHLET_ALPHA = 0.3
"""The concentration of the Dirichlet noise mixed into self-play's root priors (PUCT root)."""
DEFAULT_DIRICHLET_FRACTION = 0.25
"""That noise's weight."""
DEFAULT_TEMPERATURE_PLIES = 8
"""The first actions of a self-play game that are sampled from the visits (PUCT root)."""
DEFAULT_COMPLETED_Q_BETA = 20.0
"""The inverse temperature of the completed-Q policy target."""
