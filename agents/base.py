"""The agent interface: a bot with one method.

An agent is a bot with one method, ``act(state) -> action``: given a position of the rules core
(:class:`quarto_env.core.State`) it returns a legal action for the current phase -- a square when placing,
a piece when giving, or ``DECLARE``. It is built for one rule variant and seeded once; ``reset()`` is called
before each game. Agents are named by specs and built by :func:`agents.specs.make_agent`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from quarto_env.core import STANDARD, State, Variant, legal_actions


class Agent(ABC):
    """A Quarto player: ``act(state)`` returns a legal action for ``state``."""

    spec: str = ""
    """The spec this agent was built from, used as its name in tables."""

    def __init__(self, variant: Variant = STANDARD, seed: int | None = None) -> None:
        self.variant = variant
        self.rng = np.random.default_rng(seed)

    @abstractmethod
    def act(self, state: State) -> int:
        """A legal action for ``state``, which is not over."""

    def reset(self) -> None:  # noqa: B027 -- an optional hook, empty by default
        """Called before each game."""

    def random_legal(self, state: State, actions: list[int] | None = None) -> int:
        """A uniformly random action among ``actions`` (default: all legal actions)."""
        choices = legal_actions(self.variant, state) if actions is None else actions
        return int(choices[self.rng.integers(len(choices))])
