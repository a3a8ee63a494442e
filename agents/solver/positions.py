"""Seeded samples of positions for the solver's tests and benchmarks.

A sample position is reached by play between two greedy agents (:class:`agents.simple.GreedyAgent`): they take
a win when they can and never hand over a winning piece while a safe one exists, so the positions are not
trivially decided by the next action, yet are varied (greedy plays at random otherwise). A game that ends
before reaching the wanted number of empty squares is discarded and another one is played.
"""

from __future__ import annotations

import numpy as np

from agents.simple import GreedyAgent
from quarto_env.core import INITIAL_STATE, NUM_SQUARES, STANDARD, State, Variant, step
from quarto_env.errors import QuartoValueError, SamplingError

MAX_ATTEMPTS_PER_POSITION = 1000


def greedy_game_positions(
    empty_squares: int,
    count: int,
    seed: int,
    variant: Variant = STANDARD,
    placing: bool | None = None,
) -> list[State]:
    """``count`` positions with ``empty_squares`` empty squares, from seeded greedy-vs-greedy games.

    ``placing``: ``True`` for positions with a piece in hand to place, ``False`` for positions where the next
    action is a give, ``None`` to alternate between the two, starting with a placement.
    """
    if not 0 < empty_squares <= NUM_SQUARES:
        raise QuartoValueError(f"empty_squares must be 1-{NUM_SQUARES}, got {empty_squares}")
    rng = np.random.default_rng(seed)
    positions: list[State] = []
    games = count * MAX_ATTEMPTS_PER_POSITION
    for _ in range(games):
        want_placing = (len(positions) % 2 == 0) if placing is None else placing
        state = _play_until(empty_squares, want_placing, variant, rng)
        if state is not None:
            positions.append(state)
            if len(positions) == count:
                return positions
    raise SamplingError(
        f"found only {len(positions)} of {count} positions with {empty_squares} empty squares in "
        f"{games} greedy games under {variant.describe()} rules"
    )


def _play_until(empty_squares: int, placing: bool, variant: Variant, rng: np.random.Generator) -> State | None:
    """The position of one seeded greedy game with ``empty_squares`` empty squares in the wanted phase, or
    ``None`` when the game ends first."""
    agent = GreedyAgent(variant, seed=int(rng.integers(2**32)))
    state = INITIAL_STATE
    while not state.over and not state.claimable:
        if state.num_empty == empty_squares and state.placing == placing:
            return state
        if state.num_empty < empty_squares:
            return None
        state = step(variant, state, agent.act(state))
    return None
