"""Playing games between agents: one small, general function, and the record it returns.

The tournament rule of the sheets limits the time per move. ``play_game(..., time_limit=T)`` measures each
``act`` call; an agent that takes longer than ``T`` seconds **forfeits the game** (project choice): the game
stops there, the opponent wins, and the record says ``"forfeit"``. Agents with a time budget of their own
(``minimax:time=...``) answer well within it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import numpy as np

from agents.base import Agent
from quarto_env.core import DECLARE, INITIAL_STATE, NO_WINNER, State, Variant, legal_actions, step
from quarto_env.notation import format_position

MAX_OPENING_PLIES = 7
"""At most three pieces placed: no opening can complete a group."""
DEFAULT_OPENING_PLIES = 4
"""Random actions that start a game of a tournament, an evaluation or a training run's evaluations."""
OPENING_STREAM = 1
"""Keeps the openings' random stream apart from the games' seeds."""


@dataclasses.dataclass
class GameRecord:
    """One finished game. ``seats[i]`` names the agent that was player ``i`` (player 0 gives first)."""

    seats: tuple[str, str]
    actions: list[int] = dataclasses.field(default_factory=list)
    winner: int = NO_WINNER
    """0 or 1, or ``NO_WINNER`` for a draw."""
    end: str = "draw"
    """How the game ended: ``"win"``, ``"draw"`` or ``"forfeit"`` (the loser overran the time limit)."""
    move_seconds: list[float] = dataclasses.field(default_factory=list)
    positions: list[str] = dataclasses.field(default_factory=list)
    """The position before each action, in the position notation."""

    def score(self, seat: int) -> float:
        """1 for a win of ``seat``, 0.5 for a draw, 0 for a loss."""
        if self.winner == NO_WINNER:
            return 0.5
        return 1.0 if self.winner == seat else 0.0

    def to_dict(self) -> dict:
        """Plain data, for JSON records."""
        return dataclasses.asdict(self)


def play_game(
    variant: Variant,
    agents: Sequence[Agent],
    state: State = INITIAL_STATE,
    time_limit: float | None = None,
) -> GameRecord:
    """Play ``agents[0]`` (player 0) against ``agents[1]`` from ``state`` to the end."""
    record = GameRecord(seats=(agents[0].spec, agents[1].spec))
    for agent in agents:
        agent.reset()
    while not state.over:
        mover = state.to_move
        record.positions.append(format_position(state))
        start = time.perf_counter()
        action = agents[mover].act(state)
        elapsed = time.perf_counter() - start
        record.move_seconds.append(elapsed)
        if time_limit is not None and elapsed > time_limit:
            record.winner, record.end = 1 - mover, "forfeit"
            return record
        record.actions.append(int(action))
        state = step(variant, state, action)
    record.winner = state.winner
    record.end = "draw" if state.winner == NO_WINNER else "win"
    return record


def game_states(
    variant: Variant, players: Sequence[Agent], state: State = INITIAL_STATE, min_empty: int = 0
) -> list[State]:
    """Every position of one game between ``players`` (``players[i]`` is player ``i``) from ``state`` to its end,
    the end excluded. Positions, not a :class:`GameRecord`: the record keeps them in the notation, which drops the
    claimable groups of the declaration variant. With ``min_empty``, the game stops before its first position
    with fewer empty squares: a caller that wants no later position saves playing them, and the positions it gets
    are those of the whole game up to there (an agent's choice depends on the positions it has seen, not on
    those to come)."""
    states = []
    while not state.over and state.num_empty >= min_empty:
        states.append(state)
        state = step(variant, state, players[state.to_move].act(state))
    return states


def random_opening(variant: Variant, plies: int, rng: np.random.Generator) -> tuple[int, ...]:
    """``plies`` uniformly random legal actions from the empty board (never a declaration). With at most
    ``MAX_OPENING_PLIES`` plies at most three pieces are placed, so no opening ends the game."""
    actions = []
    state = INITIAL_STATE
    for _ in range(plies):
        choices = [a for a in legal_actions(variant, state) if a != DECLARE]
        actions.append(int(choices[rng.integers(len(choices))]))
        state = step(variant, state, actions[-1])
    return tuple(actions)


def opening_state(variant: Variant, opening: Sequence[int]) -> State:
    """The position after the opening ``opening``."""
    state = INITIAL_STATE
    for action in opening:
        state = step(variant, state, action)
    return state
