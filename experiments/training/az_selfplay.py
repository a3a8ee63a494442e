"""AlphaZero's self-play games and replay buffer (:mod:`experiments.training.alphazero` trains on them), and
the searching player of its evaluations.
"""

from __future__ import annotations

import io
import time

import numpy as np

from agents.networks import PolicyValueNetwork
from agents.puct import BatchedSearch, SearchResult, forced_actions
from experiments.training.selfplay import Opponent
from quarto_env.core import FIELD_TO_MOVE, FIELD_WINNER, NO_WINNER, NUM_ACTIONS, NUM_FIELDS, Variant
from quarto_env.vector import GameBatch

STORED_FIELDS = FIELD_TO_MOVE + 1
"""A checkpoint's buffer keeps lanes, occupied, available, hand and to_move of each position."""


class ReplayBuffer:
    """The latest ``capacity`` searched positions (rows of :func:`quarto_env.core.position_array`), each with its
    visit distribution and the outcome for the player to move."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.positions = np.zeros((capacity, NUM_FIELDS), dtype=np.int64)
        self.policy = np.zeros((capacity, NUM_ACTIONS), dtype=np.float32)
        self.outcome = np.zeros(capacity, dtype=np.float32)
        self.size = 0
        self.next = 0

    def add(self, positions: np.ndarray, policy: np.ndarray, outcome: np.ndarray) -> None:
        for row in range(len(positions)):
            self.positions[self.next], self.policy[self.next], self.outcome[self.next] = (
                positions[row],
                policy[row],
                outcome[row],
            )
            self.next = (self.next + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = rng.integers(self.size, size=count)
        return self.positions[rows], self.policy[rows], self.outcome[rows]

    def to_bytes(self) -> bytes:
        """The buffer as an ``.npz`` of plain arrays (read back with ``allow_pickle=False``). The positions are
        stored as their first :data:`STORED_FIELDS` fields (``fields``): a searched position is never claimable,
        won or over, so the rest is implied -- and checkpoints keep the format they always had."""
        out = io.BytesIO()
        n = self.size
        order = (np.arange(n) + (self.next if n == self.capacity else 0)) % self.capacity  # oldest first
        fields = self.positions[order, :STORED_FIELDS]
        np.savez(out, fields=fields, policy=self.policy[order], outcome=self.outcome[order])
        return out.getvalue()

    def load_bytes(self, data: bytes) -> None:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            fields, policy, outcome = arrays["fields"], arrays["policy"], arrays["outcome"]
        if not (fields.ndim == 2 and fields.shape[1] == STORED_FIELDS and policy.shape == (len(fields), NUM_ACTIONS)):
            raise ValueError(f"arrays of shapes {fields.shape} and {policy.shape}")
        if outcome.shape != (len(fields),):
            raise ValueError(f"outcome of shape {outcome.shape}")
        keep = slice(max(len(fields) - self.capacity, 0), None)  # the newest, if the buffer shrank
        positions = np.zeros((len(fields), NUM_FIELDS), dtype=np.int64)
        positions[:, :STORED_FIELDS] = fields
        positions[:, FIELD_WINNER] = NO_WINNER  # not claimable (0), no winner, not over (0)
        self.size = self.next = 0
        self.add(positions[keep], policy[keep].astype(np.float32), outcome[keep].astype(np.float32))


class SearchOpponent(Opponent):
    """The network with the search (most visited action), moving in many games with one search."""

    deterministic = True

    def __init__(self, network: PolicyValueNetwork, variant: Variant, max_games: int, sims: int, c: float) -> None:
        self.name = "learner"
        self.sims = sims
        self.search = BatchedSearch(variant, network.kind, network.evaluate, max_games, max(sims, 1), c)

    @property
    def playing(self) -> str:
        return f"search {self.sims}" if self.sims else "policy"

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        actions = forced_actions(batch, games)
        open_games = np.flatnonzero(actions < 0)
        if len(open_games):
            result = self.search.run(batch.positions[games[open_games]], self.sims)
            actions[open_games] = result.best()
        return actions


class SelfPlay:
    """``num_games`` self-play games side by side, each move searched with all games together.

    :meth:`play_move` plays the forced moves of every game (:func:`forced_actions`), then one searched move in
    every game; the positions of the games that end are kept, with their outcomes, until :meth:`pop_positions`.
    """

    def __init__(
        self,
        search: BatchedSearch,
        sims: int,
        temperature_plies: int,
        noise: tuple[float, float] | None,
    ) -> None:
        self.search = search
        self.sims = sims
        self.temperature_plies = temperature_plies
        self.noise = noise
        self.games = GameBatch(search.variant, search.max_games)
        self.plies = np.zeros(search.max_games, dtype=np.int64)
        """Actions played so far in each game."""
        self.pending: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(search.max_games)]
        self.finished: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.lengths: list[int] = []
        """The length of every game finished since the last :meth:`pop_positions`."""
        self.decisive: list[bool] = []
        self.search_seconds = 0.0

    def play_move(self, rng: np.random.Generator) -> SearchResult:
        """The forced moves of every game, then one searched move in each; returns the search's result."""
        games, everyone = self.games, self.games.all_games
        while True:
            forced = forced_actions(games, everyone)
            moving = np.flatnonzero(forced >= 0)
            if not len(moving):
                break
            self._step(moving, forced[moving])
        roots = games.positions.copy()  # every game: the positions as the search starts from them
        noise = None if self.noise is None else (*self.noise, rng)
        tick = time.perf_counter()
        result = self.search.run(roots, self.sims, noise=noise)
        self.search_seconds += time.perf_counter() - tick
        policy = result.policy()
        for g in everyone:
            self.pending[g].append((roots[g], policy[g]))
        self._step(everyone, np.where(self.plies < self.temperature_plies, _sampled(policy, rng), result.best()))
        return result

    def pop_positions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The searched positions of the games finished since the last call: positions, visit distributions, and
        outcomes for the player to move (+1 won, 0 drawn, -1 lost)."""
        found = self.finished or [
            (np.zeros((0, NUM_FIELDS), np.int64), np.zeros((0, NUM_ACTIONS), np.float32), np.zeros(0))
        ]
        self.finished = []
        return tuple(np.concatenate(part) for part in zip(*found, strict=True))  # type: ignore[return-value]

    def _step(self, games: np.ndarray, actions: np.ndarray) -> None:
        self.games.step(games, actions)
        self.plies[games] += 1
        for g in games[self.games.over[games]]:
            winner = int(self.games.winner[g])
            if self.pending[g]:
                positions = np.stack([position for position, _ in self.pending[g]])
                policy = np.stack([p for _, p in self.pending[g]])
                to_move = positions[:, FIELD_TO_MOVE]
                outcome = np.where(winner == NO_WINNER, 0.0, np.where(to_move == winner, 1.0, -1.0))
                self.finished.append((positions, policy, outcome.astype(np.float32)))
            self.lengths.append(int(self.plies[g]))
            self.decisive.append(winner != NO_WINNER)
            self.pending[g] = []
            self.games.reset(np.array([g]))
            self.plies[g] = 0


def _sampled(policy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row drawn from the visit distribution."""
    cumulative = np.cumsum(policy, axis=1)
    draws = rng.random(len(policy))[:, None] * cumulative[:, -1:]
    return np.minimum((cumulative <= draws).sum(1), NUM_ACTIONS - 1)
