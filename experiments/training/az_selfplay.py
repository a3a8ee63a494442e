"""AlphaZero's self-play games and replay buffer (:mod:`experiments.training.alphazero` trains on them), the
searching player of its evaluations, and :class:`SelfPlayReport`, what some rounds of self-play hand the learner
-- from the training process itself, or from a worker (:mod:`experiments.training.az_workers`).
"""

from __future__ import annotations

import dataclasses
import io
import time

import numpy as np

from agents.networks import PolicyValueNetwork
from agents.puct import BatchedSearch, GumbelRoot, SearchResult, forced_actions
from experiments.training.config import AlphaZeroConfig, TrainConfig
from experiments.training.selfplay import Opponent
from quarto_env.core import (
    FIELD_OCCUPIED,
    FIELD_TO_MOVE,
    FIELD_WINNER,
    NO_WINNER,
    NUM_ACTIONS,
    NUM_FIELDS,
    NUM_SQUARES,
    Variant,
    popcount,
    state_of_row,
)
from quarto_env.vector import GameBatch

STORED_FIELDS = FIELD_TO_MOVE + 1
"""A checkpoint's buffer keeps lanes, occupied, available, hand and to_move of each position."""


class ReplayBuffer:
    """The latest ``capacity`` searched positions (rows of :func:`quarto_env.core.position_array`), each with its
    policy target, the game's outcome and the search's root value, both for the player to move."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.positions = np.zeros((capacity, NUM_FIELDS), dtype=np.int64)
        self.policy = np.zeros((capacity, NUM_ACTIONS), dtype=np.float32)
        self.outcome = np.zeros(capacity, dtype=np.float32)
        self.root_value = np.zeros(capacity, dtype=np.float32)
        self.size = 0
        self.next = 0

    def add(self, positions: np.ndarray, policy: np.ndarray, outcome: np.ndarray, root_value: np.ndarray) -> None:
        for row in range(len(positions)):
            at = self.next
            self.positions[at], self.policy[at] = positions[row], policy[row]
            self.outcome[at], self.root_value[at] = outcome[row], root_value[row]
            self.next = (self.next + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(
        self, count: int, rng: np.random.Generator, value_mix: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` rows drawn uniformly: positions, policy targets and value targets, ``(1 - value_mix) *
        outcome + value_mix * root value``."""
        rows = rng.integers(self.size, size=count)
        value = (1 - value_mix) * self.outcome[rows] + value_mix * self.root_value[rows]
        return self.positions[rows], self.policy[rows], value.astype(np.float32)

    def to_bytes(self) -> bytes:
        """The buffer as an ``.npz`` of plain arrays (read back with ``allow_pickle=False``). The positions are
        stored as their first :data:`STORED_FIELDS` fields (``fields``): a searched position is never claimable,
        won or over, so the rest is implied. ``root_value`` came later: a buffer without it (an older checkpoint)
        loads with the outcome in its place."""
        out = io.BytesIO()
        n = self.size
        order = (np.arange(n) + (self.next if n == self.capacity else 0)) % self.capacity  # oldest first
        fields = self.positions[order, :STORED_FIELDS]
        policy, outcome, root_value = self.policy[order], self.outcome[order], self.root_value[order]
        np.savez(out, fields=fields, policy=policy, outcome=outcome, root_value=root_value)
        return out.getvalue()

    def load_bytes(self, data: bytes) -> None:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            fields, policy, outcome = arrays["fields"], arrays["policy"], arrays["outcome"]
            root_value = arrays["root_value"] if "root_value" in arrays.files else outcome
        if not (fields.ndim == 2 and fields.shape[1] == STORED_FIELDS and policy.shape == (len(fields), NUM_ACTIONS)):
            raise ValueError(f"arrays of shapes {fields.shape} and {policy.shape}")
        if outcome.shape != (len(fields),) or root_value.shape != (len(fields),):
            raise ValueError(f"outcome of shape {outcome.shape}, root_value of shape {root_value.shape}")
        keep = slice(max(len(fields) - self.capacity, 0), None)  # the newest, if the buffer shrank
        positions = np.zeros((len(fields), NUM_FIELDS), dtype=np.int64)
        positions[:, :STORED_FIELDS] = fields
        positions[:, FIELD_WINNER] = NO_WINNER  # not claimable (0), no winner, not over (0)
        self.size = self.next = 0
        targets = (policy[keep], outcome[keep], root_value[keep])
        self.add(positions[keep], *(target.astype(np.float32) for target in targets))


class ExactOutcomes:
    """Rescores the outcomes of stored positions with at most ``max_empty`` empty squares by their exact values
    under perfect play (``exact_outcome_empties``), with one solver whose transposition table is kept from call
    to call: the positions of one game, and of games that went the same way, share their subtrees."""

    def __init__(self, variant: Variant, max_empty: int) -> None:
        from agents.minimax import Solver  # here: a run without rescoring never compiles the exact search

        self.max_empty = max_empty
        self.solver = Solver(variant, book=None)
        self.rescored = self.changed = 0
        """Outcomes replaced so far, and how many of them the exact value changed."""

    def rescore(self, positions: np.ndarray, outcome: np.ndarray) -> np.ndarray:
        """``outcome`` (for the player to move at each row of ``positions``) with the rows at ``max_empty`` or
        fewer empty squares replaced by their exact values (+1, 0, -1); a copy, the input is left alone."""
        rescored = outcome.copy()
        empty = [NUM_SQUARES - popcount(int(occupied)) for occupied in positions[:, FIELD_OCCUPIED]]
        for row in np.flatnonzero(np.array(empty) <= self.max_empty):
            exact = self.solver.value(state_of_row(positions[row]))
            self.changed += int(exact != outcome[row])
            rescored[row] = exact
            self.rescored += 1
        return rescored


class SearchOpponent(Opponent):
    """The network with the search, moving in many games with one search: the most visited action, or with
    ``gumbel_actions`` the choice of a Gumbel root (without noise) that considers that many candidates."""

    deterministic = True

    def __init__(
        self,
        network: PolicyValueNetwork,
        variant: Variant,
        max_games: int,
        sims: int,
        c: float,
        gumbel_actions: int | None = None,
    ) -> None:
        self.name = "learner"
        self.sims = sims
        self.gumbel = None if gumbel_actions is None else GumbelRoot(gumbel_actions)
        self.search = BatchedSearch(variant, network.kind, network.evaluate, max_games, max(sims, 1), c)

    @property
    def playing(self) -> str:
        return f"search {self.sims}" if self.sims else "policy"

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        actions = forced_actions(batch, games)
        open_games = np.flatnonzero(actions < 0)
        if len(open_games):
            result = self.search.run(batch.positions[games[open_games]], self.sims, gumbel=self.gumbel)
            actions[open_games] = result.best()
        return actions


@dataclasses.dataclass(frozen=True)
class SelfPlaySettings:
    """How self-play searches, moves and labels its positions: the ``alphazero`` section of the config."""

    sims: int
    """Simulations of a full search, whose positions are stored."""
    temperature_plies: int
    """The first this many actions of a game are sampled in proportion to the visits."""
    noise: tuple[float, float] | None
    """Dirichlet ``(alpha, fraction)`` mixed into the root priors of full searches; ``None``: none."""
    policy_target: str = AlphaZeroConfig.policy_target  # the config's defaults: one home
    """``visits`` or ``completed_q`` (:func:`policy_target`)."""
    completed_q_beta: float = AlphaZeroConfig.completed_q_beta
    full_search_share: float = AlphaZeroConfig.full_search_share
    """The chance that a round of moves is searched fully and stored (playout-cap randomisation)."""
    cheap_sims: int = AlphaZeroConfig.cheap_sims
    """Simulations of the other rounds' searches, without noise; their positions are not stored."""
    gumbel_actions: int | None = None
    """``None``: PUCT roots. Else every search has a Gumbel root that considers this many candidates, draws its
    noise (cheap searches too: it samples the move) and plays its choice at every action; ``noise`` and
    ``temperature_plies`` do not apply."""

    @classmethod
    def of(cls, config: AlphaZeroConfig) -> SelfPlaySettings:
        """The settings of a config's ``alphazero`` section."""
        return cls(
            config.sims,
            config.temperature_plies,
            (config.dirichlet_alpha, config.dirichlet_fraction),
            config.policy_target,
            config.completed_q_beta,
            config.full_search_share,
            config.cheap_sims,
            config.gumbel_actions if config.root == "gumbel" else None,
        )


def policy_target(result: SearchResult, settings: SelfPlaySettings) -> np.ndarray:
    """The policy targets of a search's roots: its visit distribution (``visits``) or the completed-Q improved
    policy ``softmax(log prior + beta * completed Q)`` (``completed_q``; :meth:`SearchResult.improved_policy`)."""
    if settings.policy_target == "completed_q":
        return result.improved_policy(settings.completed_q_beta)
    return result.policy()


def new_network(config: TrainConfig, variant: Variant) -> PolicyValueNetwork:
    """A freshly initialised network of the config's observation, width and design, drawn from torch's generator."""
    design = config.alphazero.network_design
    return PolicyValueNetwork(config.observation, list(variant.groups), config.net_arch[0], design)


def self_play(config: TrainConfig, network: PolicyValueNetwork, variant: Variant) -> SelfPlay:
    """The config's ``num_games`` self-play games, searched with ``network`` (in the training process or a worker)."""
    settings = config.alphazero
    most_sims = max(settings.sims, settings.cheap_sims if settings.full_search_share < 1 else 0)
    search = BatchedSearch(variant, network.kind, network.evaluate, config.num_games, most_sims, settings.c_puct)
    return SelfPlay(search, SelfPlaySettings.of(settings))


class SelfPlay:
    """``max_games`` self-play games side by side, each move searched with all games together.

    :meth:`play_move` plays the forced moves of every game (:func:`forced_actions`), then one searched move in
    every game -- a full search, stored with its policy target and root value, or (playout-cap randomisation,
    ``full_search_share`` below 1) a cheap one, not stored; the positions of the games that end are kept, with
    their outcomes, until :meth:`pop_positions`.
    """

    def __init__(self, search: BatchedSearch, settings: SelfPlaySettings) -> None:
        self.search = search
        self.settings = settings
        self.games = GameBatch(search.variant, search.max_games)
        self.plies = np.zeros(search.max_games, dtype=np.int64)
        """Actions played so far in each game."""
        self.pending: list[list[tuple[np.ndarray, np.ndarray, float]]] = [[] for _ in range(search.max_games)]
        self.finished: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.lengths: list[int] = []
        """The length of every game finished since the last :meth:`pop_positions`."""
        self.decisive: list[bool] = []
        self.search_seconds = 0.0
        self.stored_rounds = self.cheap_rounds = 0

    def play_move(self, rng: np.random.Generator) -> SearchResult:
        """The forced moves of every game, then one searched move in each; returns the search's result."""
        games, everyone, settings = self.games, self.games.all_games, self.settings
        while True:
            forced = forced_actions(games, everyone)
            moving = np.flatnonzero(forced >= 0)
            if not len(moving):
                break
            self._step(moving, forced[moving])
        roots = games.positions.copy()  # every game: the positions as the search starts from them
        # One draw per round, and none when every round is full: the default run draws what it always drew.
        full = settings.full_search_share >= 1 or rng.random() < settings.full_search_share
        gumbel = None if settings.gumbel_actions is None else GumbelRoot(settings.gumbel_actions, rng)
        noise = None if settings.noise is None or not full or gumbel else (*settings.noise, rng)
        tick = time.perf_counter()
        result = self.search.run(roots, settings.sims if full else settings.cheap_sims, noise=noise, gumbel=gumbel)
        self.search_seconds += time.perf_counter() - tick
        if full:
            self.stored_rounds += 1
            target = policy_target(result, settings)
            for g in everyone:
                self.pending[g].append((roots[g], target[g], float(result.root_value[g])))
        else:
            self.cheap_rounds += 1
        if gumbel is not None:
            self._step(everyone, result.best())  # the Gumbel root's choice: a sample of its improved policy
        else:
            sampling = self.plies < settings.temperature_plies
            self._step(everyone, np.where(sampling, _sampled(result.policy(), rng), result.best()))
        return result

    def pop_positions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The stored positions of the games finished since the last call: positions, policy targets, outcomes
        for the player to move (+1 won, 0 drawn, -1 lost) and the search's root values for that player."""
        found = self.finished or [
            (np.zeros((0, NUM_FIELDS), np.int64), np.zeros((0, NUM_ACTIONS), np.float32), np.zeros(0), np.zeros(0))
        ]
        self.finished = []
        return tuple(np.concatenate(part) for part in zip(*found, strict=True))  # type: ignore[return-value]

    def _step(self, games: np.ndarray, actions: np.ndarray) -> None:
        self.games.step(games, actions)
        self.plies[games] += 1
        for g in games[self.games.over[games]]:
            winner = int(self.games.winner[g])
            if self.pending[g]:
                positions = np.stack([position for position, _, _ in self.pending[g]])
                policy = np.stack([target for _, target, _ in self.pending[g]])
                root_value = np.array([value for _, _, value in self.pending[g]], dtype=np.float32)
                to_move = positions[:, FIELD_TO_MOVE]
                outcome = np.where(winner == NO_WINNER, 0.0, np.where(to_move == winner, 1.0, -1.0))
                self.finished.append((positions, policy, outcome.astype(np.float32), root_value))
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


@dataclasses.dataclass
class SelfPlayReport:
    """What some rounds of self-play produced (:func:`play_rounds`): the positions of the games that ended, and the
    counts and timings the learner logs under ``charts/``."""

    positions: np.ndarray
    policy: np.ndarray
    outcome: np.ndarray
    root_value: np.ndarray
    """The stored positions of the finished games, as :meth:`SelfPlay.pop_positions` gives them."""
    games: int
    """Games played side by side: each round searches (and counts as) this many positions."""
    rounds: int
    stored_rounds: int
    """Rounds searched fully, whose positions are stored (the rest were cheap: playout-cap randomisation)."""
    lengths: list[int]
    decisive: list[bool]
    agreement: list[float]
    """Per round: the share of games where the network's prior and the search agree on the best action."""
    root_abs_value: list[float]
    simulations: int
    tree_seconds: float
    network_seconds: float
    search_seconds: float
    cpu_seconds: float
    """CPU time of the playing process over the rounds (below their wall time when it waited for a core)."""
    worker: int = -1
    """The worker that played (-1: the training process)."""
    weights_version: int = 0
    """The learner's gradient steps when the weights that played were sent (a worker's; 0 in the process)."""

    @property
    def searched(self) -> int:
        """Searched self-play positions: the steps the rounds add to the run."""
        return self.games * self.rounds


def play_rounds(selfplay: SelfPlay, rng: np.random.Generator, rounds: int) -> SelfPlayReport:
    """Play ``rounds`` rounds of moves (:meth:`SelfPlay.play_move`) and report them; the counters of ``selfplay``
    and its search start again from zero."""
    search, agreement, root_abs_value = selfplay.search, [], []
    cpu_start = time.process_time()
    for _ in range(rounds):
        result = selfplay.play_move(rng)
        agreement.append(float(np.mean(np.argmax(result.prior, 1) == np.argmax(result.visits, 1))))
        root_abs_value.append(float(np.mean(np.abs(result.root_value))))
    report = SelfPlayReport(
        *selfplay.pop_positions(),
        games=search.max_games,
        rounds=rounds,
        stored_rounds=selfplay.stored_rounds,
        lengths=selfplay.lengths,
        decisive=selfplay.decisive,
        agreement=agreement,
        root_abs_value=root_abs_value,
        simulations=search.simulations,
        tree_seconds=search.tree_seconds,
        network_seconds=search.network_seconds,
        search_seconds=selfplay.search_seconds,
        cpu_seconds=time.process_time() - cpu_start,
    )
    search.simulations = search.evaluations = 0
    search.tree_seconds = search.network_seconds = selfplay.search_seconds = 0.0
    selfplay.lengths, selfplay.decisive = [], []
    selfplay.stored_rounds = selfplay.cheap_rounds = 0
    return report
