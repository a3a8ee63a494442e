"""The vector entry point of ``quarto_env/QuartoVsAgent-v1``: ``gymnasium.make_vec(..., num_envs=N, opponent=SPEC)``
builds :class:`quarto_env.vector_env.QuartoVectorVsAgent` against an opponent named by an agent spec.

``random`` and ``greedy`` play compiled; an agent with a batched form (``act_batch`` and ``kind``, as
``ppo:PATH``'s :class:`agents.ppo.PPOAgent`) plays all its games in one forward pass; any other spec is built
once per game and asked game by game (:class:`quarto_env.vector_env.PlayerOpponent`: slower).
"""

from __future__ import annotations

from typing import Any

from agents.specs import make_agent
from quarto_env.core import Variant
from quarto_env.flags import RuleFlags
from quarto_env.observation import ObservationKind
from quarto_env.vector_env import (
    COMPILED_OPPONENTS,
    BatchedNetworkOpponent,
    BatchedOpponent,
    NetworkActions,
    PlayerOpponent,
    QuartoVectorVsAgent,
)


def make_vector_vs_agent(
    num_envs: int = 1, opponent: str | BatchedOpponent | NetworkActions = "random", **env_kwargs: Any
) -> QuartoVectorVsAgent:
    """:class:`QuartoVectorVsAgent` of ``num_envs`` games against ``opponent``: an agent spec, or what the env
    takes itself (``"random"``, ``"greedy"``, a network callable, a batched opponent). The other keyword arguments
    are the env's."""
    if isinstance(opponent, str) and opponent.strip() not in COMPILED_OPPONENTS:
        variant = RuleFlags.among(env_kwargs).variant
        opponent = spec_opponent(opponent, variant, int(num_envs))
    return QuartoVectorVsAgent(num_envs, opponent, **env_kwargs)


def spec_opponent(spec: str, variant: Variant, num_envs: int) -> BatchedOpponent:
    """The batched opponent for an agent ``spec``: its network in one pass where it has one, else one agent per
    game."""
    agent = make_agent(spec, variant)
    act_batch, kind = getattr(agent, "act_batch", None), getattr(agent, "kind", None)
    if callable(act_batch) and isinstance(kind, ObservationKind):
        return BatchedNetworkOpponent(act_batch, kind)
    return PlayerOpponent([agent, *(make_agent(spec, variant) for _ in range(num_envs - 1))])
