"""AlphaZero's self-play and replay buffer (:mod:`experiments.training.alphazero` trains on them), the
searching player of its evaluations, and :class:`SelfPlayReport`, what some rounds of self-play hand the learner
-- from the training process itself, or from a worker (:mod:`experiments.training.az_workers`).

Self-play is a :class:`agents.tree.sessions.SelfPlaySession` without end, its batches evaluated by the learner's
network (:func:`self_play`, :func:`play_rounds`): the public sessions and the trainer share one search path.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Callable

import numpy as np

from agents.networks.policy_value import PolicyValueNetwork
from agents.tree.gumbel_root import GumbelRoot
from agents.tree.puct import PUCTSearch, forced_actions
from agents.tree.sessions import LeafBatch, PUCTOptions, PUCTSession, SelfPlaySession
from experiments.evaluation.games import Mover
from experiments.training.config import AlphaZeroConfig, TrainConfig
from experiments.training.targets import check_targets
from quarto_env.core import (
    FIELD_OCCUPIED,
    FIELD_TO_MOVE,
    FIELD_WINNER,
    NO_WINNER,
    NUM_ACTIONS,
    NUM_FIELDS,
    NUM_SQUARES,
    POSITION_PROBLEMS,
    Variant,
    popcount,
    position_problems,
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

    def load_bytes(self, data: bytes, variant: Variant) -> None:
        """The buffer of :meth:`to_bytes`; ``ValueError`` naming the first problem of arrays that are not a buffer of
        ``variant``'s positions (each a position in play) with finite targets. The resume checks a buffer whole: a
        position out of its fields' ranges would send the compiled code reading beyond its tables."""
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
        problems = position_problems(variant, positions)
        if problems.any():
            row = int(np.flatnonzero(problems)[0])
            problem = POSITION_PROBLEMS[problems[row]]
            raise ValueError(f"row {row} is no position in play under the run's rules: it {problem}")
        check_targets(policy, outcome, root_value)
        self.size = self.next = 0
        targets = (policy[keep], outcome[keep], root_value[keep])
        self.add(positions[keep], *(target.astype(np.float32) for target in targets))


class ExactOutcomes:
    """Rescores the outcomes of stored positions with at most ``max_empty`` empty squares by their exact values
    under perfect play (``exact_outcome_empties``), with one solver whose transposition table is kept from call
    to call: the positions of one game, and of games that went the same way, share their subtrees."""

    def __init__(self, variant: Variant, max_empty: int) -> None:
        from agents.solver.minimax import Solver  # here: a run without rescoring never compiles the exact search

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


class PUCTMover(Mover):
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
        self.evaluate = network_evaluator(network)
        self.search = PUCTSearch(variant, network.kind, None, max_games, max(sims, 1), c)

    @property
    def playing(self) -> str:
        return f"search {self.sims}" if self.sims else "policy"

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        actions = forced_actions(batch, games)
        open_games = np.flatnonzero(actions < 0)
        if len(open_games):
            roots = batch.positions[games[open_games]]
            session = PUCTSession(self.search, roots, self.sims, gumbel=self.gumbel).run(self.evaluate)
            actions[open_games] = session.result.best()
        return actions


def search_options(config: AlphaZeroConfig) -> PUCTOptions:
    """The search options of a config's ``alphazero`` section, for self-play (:class:`PUCTOptions`)."""
    return PUCTOptions(
        simulations=config.sims,
        root=config.root,
        c_puct=config.c_puct,
        dirichlet_alpha=config.dirichlet_alpha,
        dirichlet_fraction=config.dirichlet_fraction,
        temperature_plies=config.temperature_plies,
        targets=config.policy_target,
        completed_q_beta=config.completed_q_beta,
        gumbel_actions=config.gumbel_actions,
        full_search_share=config.full_search_share,
        cheap_simulations=config.cheap_sims,
    )


def new_network(config: TrainConfig, variant: Variant) -> PolicyValueNetwork:
    """A freshly initialised network of the config's observation, width and design, drawn from torch's generator;
    its leaves evaluated on the config's path (``alphazero.leaf_evaluation``)."""
    design = config.alphazero.network_design
    network = PolicyValueNetwork(config.observation, list(variant.groups), config.net_arch[0], design)
    network.evaluation_path = config.alphazero.leaf_evaluation
    return network


def network_evaluator(network: PolicyValueNetwork) -> Callable[[LeafBatch], tuple[np.ndarray, np.ndarray]]:
    """``network`` as a session's evaluator: a batch's planes through :meth:`PolicyValueNetwork.evaluate`."""
    return lambda batch: network.evaluate(batch.observations)


def self_play(config: TrainConfig, variant: Variant, rng: np.random.Generator) -> SelfPlaySession:
    """The config's ``num_games`` self-play games, without end, drawing from ``rng`` (the training process's own
    generator, or a worker's); :func:`play_rounds` plays them with a network."""
    return SelfPlaySession(
        None,
        search_options(config.alphazero),
        config.observation,
        variant,
        rng,
        parallel=config.num_games,
        records=False,
    )


@dataclasses.dataclass
class SelfPlayReport:
    """What some rounds of self-play produced (:func:`play_rounds`): the positions of the games that ended, and the
    counts and timings the learner logs under ``charts/``."""

    positions: np.ndarray
    policy: np.ndarray
    outcome: np.ndarray
    root_value: np.ndarray
    """The samples of the finished games (:class:`agents.tree.sessions.Samples`: positions, policy targets, outcomes
    and root values)."""
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


def play_rounds(selfplay: SelfPlaySession, network: PolicyValueNetwork, rounds: int) -> SelfPlayReport:
    """Play ``rounds`` rounds of moves (:meth:`SelfPlaySession.play_round`), evaluated by ``network``, and report
    them; the counters of ``selfplay`` start again from zero (:meth:`SelfPlaySession.take_counters`)."""
    agreement, root_abs_value = [], []
    evaluate = network_evaluator(network)
    cpu_start = time.process_time()
    for _ in range(rounds):
        result = selfplay.play_round(evaluate)
        if result is None:  # a session with an end (the trainer's has none)
            break
        agreement.append(float(np.mean(np.argmax(result.prior, 1) == np.argmax(result.visits, 1))))
        root_abs_value.append(float(np.mean(np.abs(result.root_value))))
    samples = selfplay.samples()
    counters = selfplay.take_counters()
    report = SelfPlayReport(
        samples.positions,
        samples.policy,
        samples.outcome,
        samples.root_value,
        games=selfplay.parallel,
        rounds=rounds,
        stored_rounds=counters.stored_rounds,
        lengths=counters.lengths,
        decisive=counters.decisive,
        agreement=agreement,
        root_abs_value=root_abs_value,
        simulations=counters.simulations,
        tree_seconds=counters.tree_seconds,
        network_seconds=counters.network_seconds,
        search_seconds=counters.search_seconds,
        cpu_seconds=time.process_time() - cpu_start,
    )
    return report
