"""A tournament's games: the schedule (:class:`GameJob`, :func:`schedule`) and a finished game
(:class:`PlayedGame`), shared by :mod:`experiments.arena.tournament`, which plays them, and
:mod:`experiments.arena.tournament_resume`, which reads back those an interrupted run already played."""

from __future__ import annotations

import dataclasses

import numpy as np

from agents.match import OPENING_STREAM, GameRecord, random_opening
from quarto_env.core import STANDARD, Variant


@dataclasses.dataclass(frozen=True)
class GameJob:
    """One scheduled game: agents ``pair = (i, j)`` (indices into the agent list), round ``round`` of that
    pair, with ``seats`` giving the agent index of player 0 and player 1."""

    index: int
    pair: tuple[int, int]
    round: int
    seats: tuple[int, int]
    seed: int
    opening: tuple[int, ...] = ()
    """Actions played at random before the agents take over; both seatings of a pair share each opening."""


@dataclasses.dataclass
class PlayedGame:
    """A finished game and the job that scheduled it."""

    job: GameJob
    record: GameRecord

    def score(self, agent: int) -> float:
        """The score (1, 0.5, 0) of agent index ``agent``, which played this game."""
        return self.record.score(self.job.seats.index(agent))

    def forfeited_by(self, agent: int) -> bool:
        """Whether ``agent`` lost this game on time."""
        return self.record.end == "forfeit" and self.score(agent) == 0.0


def schedule(
    num_agents: int, mode: str, games_per_pair: int, seed: int, variant: Variant = STANDARD, opening_plies: int = 0
) -> list[GameJob]:
    """Every game to play. In vs-field mode the field is the last agent. Seats alternate within each pair, and
    games ``2k`` and ``2k + 1`` of a pair start from the same random opening of ``opening_plies`` actions."""
    jobs: list[GameJob] = []
    for i, j in playing_pairs(num_agents, mode):
        for game in range(games_per_pair):
            seats = (i, j) if game % 2 == 0 else (j, i)
            game_seed = int(np.random.SeedSequence([seed, i, j, game]).generate_state(1)[0])
            opening_rng = np.random.default_rng([seed, i, j, game // 2, OPENING_STREAM])
            opening = random_opening(variant, opening_plies, opening_rng)
            jobs.append(GameJob(len(jobs), (i, j), game, seats, game_seed, opening))
    return jobs


def playing_pairs(num_agents: int, mode: str) -> list[tuple[int, int]]:
    """The pairs of agent indices that play: all of them, or each agent with the field (the last) in vs-field."""
    if mode == "round-robin":
        return [(i, j) for i in range(num_agents) for j in range(i + 1, num_agents)]
    field = num_agents - 1
    return [(i, field) for i in range(field)]
