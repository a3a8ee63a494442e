"""The games of an evaluation: any :class:`Mover` -- a network playing its most likely action or sampling its
policy (:func:`learner_players`), a search, an agent -- against agent specs, all games side by side, half in each
seat (:func:`evaluate`, :func:`evaluate_all`). Every backend's evaluations during training, their final table, and
``quarto evaluate`` play them; MaskablePPO's self-play (:mod:`experiments.training.selfplay`) moves its opponents
with the same :class:`Mover` and :func:`move`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch as th

from agents.base import Agent
from agents.match import OPENING_STREAM, opening_state, random_opening
from agents.specs import make_agent
from quarto_env.core import State, Variant
from quarto_env.observation import ObservationKind
from quarto_env.vector import GameBatch

SEAT_NAMES = ("first", "second")
"""Seat 0 gives first, seat 1 second."""


# ---------------------------------------------------------------------------------------------------------
# Movers: the learner, its opponents
# ---------------------------------------------------------------------------------------------------------
class Mover(ABC):
    """Something that moves in a batch of games: the learner (a network, a search) or an opponent (an agent)."""

    name: str
    deterministic: bool = False
    """Whether it always plays the same action in the same position (a network's most likely action)."""

    @property
    def playing(self) -> str:
        """How it plays, for evaluation tables: ``argmax`` or ``sampled`` for a network's policy."""
        return "argmax" if self.deterministic else "sampled"

    @abstractmethod
    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        """One action for each of ``games``, in which this mover is to move."""


NetworkActions = Callable[[np.ndarray, np.ndarray, bool], np.ndarray]
"""A network's actions for a batch of observations under legal-action masks: its most likely ones (``True``) or
sampled from its policy (``False``), e.g. ``functools.partial(agents.ppo.policy_actions, policy)``."""


class NetworkMover(Mover):
    """A network: one batched forward pass for all the games it moves in."""

    def __init__(self, name: str, actions: NetworkActions, kind: ObservationKind, deterministic: bool) -> None:
        self.name = name
        self.actions = actions
        self.kind = kind
        self.deterministic = deterministic

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        masks = batch.action_masks(games, false_declarations=False)
        return self.actions(batch.observe(games, self.kind), masks, self.deterministic)


class AgentMover(Mover):
    """Any :class:`agents.base.Agent`, asked game by game."""

    def __init__(self, agent: Agent) -> None:
        self.name = agent.spec
        self.agent = agent

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        return np.array([self.agent.act(batch.state(g)) for g in games], dtype=np.int64)


def move(batch: GameBatch, games: np.ndarray, movers: Sequence[Mover]) -> np.ndarray:
    """Let ``movers[i]`` act in game ``games[i]``: one call per distinct mover, over all of its games. Returns the
    actions played, ``actions[i]`` in ``games[i]``."""
    by_mover: dict[int, list[int]] = {}
    for index, mover in enumerate(movers):
        by_mover.setdefault(id(mover), []).append(index)
    first_of = {id(mover): mover for mover in movers}
    games, played = np.asarray(games, dtype=np.int64), np.zeros(len(movers), dtype=np.int64)
    for key, indices in by_mover.items():
        selected = games[indices]
        played[indices] = first_of[key].act(batch, selected)
        batch.step(selected, played[indices])
    return played


# ---------------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class KeptGame:
    """One evaluation game kept whole: its random opening, then the players' actions, and the learner's seat."""

    opening: tuple[int, ...]
    actions: list[int]
    learner_seat: int


@dataclasses.dataclass
class EvalResult:
    """The learner's results against one opponent: ``counts[seat]`` is ``(wins, draws, losses)``."""

    opponent: str
    counts: dict[int, tuple[int, int, int]]
    final_state: State
    """The final position of one of the games, for pictures."""
    deterministic: bool
    """Whether the learner was a network playing its most likely action (else it sampled its policy)."""
    playing: str = ""
    """How the learner played (:attr:`Mover.playing`): ``argmax``, ``sampled``, ``search 64``, ..."""
    games: list[KeptGame] = dataclasses.field(default_factory=list)
    """The first games, kept whole where the evaluation was asked to (``keep_games``), in order: the learner
    gives first in the even ones, and games ``2k`` and ``2k + 1`` share an opening."""

    def score(self, seat: int | None = None) -> float:
        """Wins plus half the draws, over the games played in ``seat`` (default both)."""
        seats = [seat] if seat is not None else list(self.counts)
        wins, draws, losses = (sum(self.counts[s][k] for s in seats) for k in range(3))
        return (wins + draws / 2) / max(wins + draws + losses, 1)

    @property
    def num_games(self) -> int:
        """Games played, both seats together."""
        return sum(sum(c) for c in self.counts.values())

    def rates(self, seat: int | None = None) -> dict[str, float]:
        """Win, draw and loss rates and the score, over ``seat`` (default both)."""
        seats = [seat] if seat is not None else list(self.counts)
        totals = [sum(self.counts[s][k] for s in seats) for k in range(3)]
        games = max(sum(totals), 1)
        return {
            "win": totals[0] / games,
            "draw": totals[1] / games,
            "loss": totals[2] / games,
            "score": self.score(seat),
        }


@contextlib.contextmanager
def seeded_torch(seed: int) -> Iterator[None]:
    """Inside, torch's generators start from ``seed``; after, they are back where they were. That is the CPU's
    and, where torch has started CUDA (a network on the GPU samples there), every GPU's; a GPU torch has not
    started is left alone, not seeded later."""
    gpus = list(range(th.cuda.device_count())) if th.cuda.is_initialized() else []
    with th.random.fork_rng(devices=gpus):
        th.default_generator.manual_seed(seed)
        if gpus:
            th.cuda.manual_seed_all(seed)
        yield


def evaluate(
    learner: Mover,
    opponent_spec: str,
    variant: Variant,
    num_games: int,
    seed: int,
    make: Callable[[str, Variant, int], Agent] = make_agent,
    opening_plies: int = 0,
    keep_games: int = 0,
) -> EvalResult:
    """Play ``num_games`` games of ``learner`` against the agent ``opponent_spec``, half in each seat, all
    side by side (the learner's moves in one batched call per turn). With ``opening_plies``, games ``2k`` and
    ``2k + 1`` (one per seating) start from the same random opening of that many actions, drawn from ``seed``.
    The first ``keep_games`` games are kept whole (:attr:`EvalResult.games`).

    ``seed`` seeds the opponent and the learner's sampled moves: torch's generators are forked for the
    evaluation (:func:`seeded_torch`), so its result depends on the policy and the seed alone, and a training
    run is the same whatever its evaluation schedule."""
    batch = GameBatch(variant, num_games)
    seats = np.arange(num_games) % 2
    openings: list[tuple[int, ...]] = [()] * num_games
    if opening_plies:
        rng = np.random.default_rng([seed, OPENING_STREAM])
        for pair in range(0, num_games, 2):
            opening = random_opening(variant, opening_plies, rng)
            pair_games = np.arange(pair, min(pair + 2, num_games))
            batch.set_state(pair_games, opening_state(variant, opening))
            openings[pair : pair + 2] = [opening] * len(pair_games)
    kept = [KeptGame(openings[g], [], int(seats[g])) for g in range(min(keep_games, num_games))]
    opponent = AgentMover(make(opponent_spec, variant, seed))
    with seeded_torch(seed):
        while not batch.over.all():
            live = np.flatnonzero(~batch.over)
            played = move(batch, live, [learner if batch.to_move[g] == seats[g] else opponent for g in live])
            for index in np.flatnonzero(live < len(kept)):
                kept[live[index]].actions.append(int(played[index]))
    results = batch.returns(batch.all_games, seats)
    counts = {
        seat: (
            int(np.sum(results[seats == seat] > 0)),
            int(np.sum(results[seats == seat] == 0)),
            int(np.sum(results[seats == seat] < 0)),
        )
        for seat in (0, 1)
    }
    return EvalResult(opponent_spec, counts, batch.state(0), learner.deterministic, learner.playing, kept)


def evaluate_all(
    players: Sequence[Mover],
    opponent_specs: Sequence[str],
    variant: Variant,
    num_games: int,
    seed: int,
    opening_plies: int = 0,
    keep_games: int = 0,
) -> list[EvalResult]:
    """Every player against every opponent spec (the ``i``-th from ``seed + i``, whichever player), ``num_games``
    games each, the first ``keep_games`` of them kept whole (:func:`evaluate`): the results, player by player."""
    return [
        evaluate(player, spec, variant, num_games, seed + i, opening_plies=opening_plies, keep_games=keep_games)
        for player in players
        for i, spec in enumerate(opponent_specs)
    ]


def learner_players(actions: NetworkActions, kind: ObservationKind) -> list[NetworkMover]:
    """A learning network's two ways of playing in evaluations: its most likely action, then sampling its policy.
    Against a deterministic opponent (minimax) from the empty board the first repeats the same two games; the
    sampled policy plays varied ones."""
    return [NetworkMover("learner", actions, kind, deterministic) for deterministic in (True, False)]
