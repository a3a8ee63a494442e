"""The two simplest baselines: uniform random play and a greedy one-ply player."""

from __future__ import annotations

from agents.base import Agent
from quarto_env.core import ALL_SQUARES, DECLARE, State, bits, safe_gives, winning_squares_for


class RandomAgent(Agent):
    """Uniform over the legal actions (the declaration too, where the variant has one)."""

    def act(self, state: State) -> int:
        return self.random_legal(state)


class GreedyAgent(Agent):
    """Wins at once when it can; never gives a piece that lets the opponent win at once if a safe piece exists;
    otherwise plays at random (never declaring falsely).

    In the declaration variant it declares as soon as something can be claimed, its own group or the one its
    opponent missed, and places on a winning square when it has one (declaring on its next action).
    """

    def act(self, state: State) -> int:
        if state.claimable:
            return DECLARE
        if state.placing:
            empty = ALL_SQUARES & ~state.occupied
            wins = winning_squares_for(self.variant, state, state.hand)
            return self.random_legal(state, bits(wins or empty))
        return self.random_legal(state, bits(safe_gives(self.variant, state) or state.available))
