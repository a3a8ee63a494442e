"""The entry point of ``gymnasium.make("quarto_env/QuartoVsAgent-v1", opponent=SPEC, ...)``: the single-agent env
of :mod:`quarto_env.single_agent` against an opponent named by an agent spec.

The env itself takes a player object and knows nothing of agent specs, so ``quarto_env`` imports nothing from
``agents``; this function, which Gymnasium finds by name, builds the player first.
"""

from __future__ import annotations

from typing import Any

from agents.specs import make_agent
from quarto_env.errors import QuartoValueError
from quarto_env.flags import RuleFlags
from quarto_env.single_agent import Player, QuartoVsAgent


def make_vs_agent(opponent: str | Player = "random", **env_kwargs: Any) -> QuartoVsAgent:
    """:class:`QuartoVsAgent` against ``opponent``: an agent spec (``"greedy"``, ``"minimax:depth=2"``, ...), built
    once with :func:`agents.specs.make_agent` for the env's rule variant, or a player object as it is. The other
    keyword arguments are the env's."""
    if isinstance(opponent, str):
        opponent = make_agent(opponent, RuleFlags.among(env_kwargs).variant)
    elif not hasattr(opponent, "act"):
        raise QuartoValueError(
            f"opponent must be an agent spec string such as 'random', 'greedy' or 'minimax:depth=2', or a player; "
            f"got {opponent!r}"
        )
    return QuartoVsAgent(opponent, **env_kwargs)
