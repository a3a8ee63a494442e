"""Agents that play Quarto: random, greedy, minimax, the exact solver, MCTS and trained policies.

Build one from a spec with :func:`agents.make_agent`, e.g. ``make_agent("minimax:depth=3", variant, seed=0)``.
"""

from agents.base import AGENT_KINDS, Agent, SpecError, describe_kinds, make_agent, parse_spec

__all__ = ["AGENT_KINDS", "Agent", "SpecError", "describe_kinds", "make_agent", "parse_spec"]
