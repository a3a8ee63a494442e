"""Agents that play Quarto: random, greedy, minimax, the exact solver, MCTS and trained policies.

Build one from a spec with :func:`agents.make_agent`, e.g. ``make_agent("minimax:depth=3", variant, seed=0)``.

The players stay in this folder; what they are built from lives in rooms, from the ground up:

- ``storage``: files written whole and sealed;
- ``solver``: the exact alpha-beta solver, its book, value cache, labels and suites;
- ``tree``: the tree searches (PUCT and its sessions and sample datasets, UCT);
- ``networks``: the network designs and the checkpoint format;
- ``envs``: the environments against an agent.

``tests/test_layout.py`` says which room may import which.
"""

from agents.base import Agent
from agents.specs import AGENT_KINDS, SpecError, describe_kinds, make_agent, parse_spec

__all__ = ["AGENT_KINDS", "Agent", "SpecError", "describe_kinds", "make_agent", "parse_spec"]
