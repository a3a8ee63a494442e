"""``quarto train`` with ``algorithm: alphazero``: search-based self-play (``configs/alphazero.yaml``).

The loop, top to bottom (:func:`run`):

1. ``num_games`` self-play games run side by side. Moves the one-ply rules decide (a win, the only safe piece,
   a claim; :func:`agents.alphazero.forced_action`) are played at once; every other move is searched, all games
   together, by :class:`agents.alphazero.BatchedSearch` with ``sims`` simulations, Dirichlet noise at the root,
   and the move sampled in proportion to the visits over the first ``temperature_plies`` actions of a game
   (then the most visited).
2. Each searched position is stored with its visit distribution; when its game ends, with the outcome for the
   player who was to move (+1, 0, -1). The replay buffer keeps the latest ``buffer_size`` positions.
3. After every round of moves, the network trains on minibatches drawn uniformly from the buffer, ``sample_reuse``
   samples per new position, each one (with ``augment``) moved by a random symmetry of the game -- a board
   symmetry and a relabelling of the counted attributes (:mod:`quarto_env.symmetry`) -- with its visit
   distribution moved alike. Loss: cross-entropy to the visits plus ``vf_coef`` times the squared value error;
   AdamW with ``weight_decay``.
4. Every ``eval_every`` positions: the same evaluations as PPO (``eval/<opponent>/...`` from
   ``eval_opening_plies`` random plies shared by both seatings, and ``eval/grade/``), with ``eval_sims``
   simulations per move; every ``checkpoint_every`` positions, ``latest.zip`` (network, optimizer, buffer) and
   ``step_<N>.zip``.

``total_steps`` counts searched self-play positions. The run folder, ``config.yaml``, ``command.txt``, the lock,
``--resume`` and TensorBoard (``tb/``) work as for PPO; a resumed run starts new games (the ones in progress
when it stopped are lost) with the network, optimizer and buffer of ``latest.zip``. Metrics: ``charts/``
(positions, games and simulations per second, the share of time in the tree, buffer size, game length, the
search's root value), ``losses/`` (policy, value, the policy's agreement with the search), ``eval/``.
"""

from __future__ import annotations

import dataclasses
import io
import time
import zipfile
from pathlib import Path
from typing import Any

import numba
import numpy as np
import torch as th
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.alphazero import (
    OPTIMIZER_ENTRY,
    AlphaZeroAgent,
    BatchedSearch,
    PolicyValueNetwork,
    SearchResult,
    candidates,
    forced_action,
    load_network,
    save_checkpoint,
)
from agents.ppo import CheckpointError, read_metadata, read_weights
from experiments.config import SEED_LIMIT, TrainConfig, check_unchanged_on_resume, markdown_table
from experiments.grade import PositionValues, grade_agent, sample_positions
from experiments.selfplay import EvalResult, Opponent, evaluate
from experiments.train import log_result, print_results, write_final_eval
from quarto_env.checks import one_line
from quarto_env.core import NO_PIECE, NO_WINNER, NUM_ACTIONS, NUM_SQUARES, State, Variant
from quarto_env.observation import encode_observation, observation_kind
from quarto_env.symmetry import symmetries_for
from quarto_env.vector import GameBatch

BUFFER_ENTRY = "buffer.npz"


# ---------------------------------------------------------------------------------------------------------
# Replay buffer and symmetries
# ---------------------------------------------------------------------------------------------------------
class ReplayBuffer:
    """The latest ``capacity`` searched positions: fields (lanes, occupied, available, hand, to_move), visit
    distribution and outcome for the player to move."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.fields = np.zeros((capacity, 5), dtype=np.int64)
        self.policy = np.zeros((capacity, NUM_ACTIONS), dtype=np.float32)
        self.outcome = np.zeros(capacity, dtype=np.float32)
        self.size = 0
        self.next = 0

    def add(self, fields: np.ndarray, policy: np.ndarray, outcome: np.ndarray) -> None:
        for row in range(len(fields)):
            self.fields[self.next], self.policy[self.next], self.outcome[self.next] = (
                fields[row],
                policy[row],
                outcome[row],
            )
            self.next = (self.next + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = rng.integers(self.size, size=count)
        return self.fields[rows], self.policy[rows], self.outcome[rows]

    def to_bytes(self) -> bytes:
        """The buffer as an ``.npz`` of plain arrays (read back with ``allow_pickle=False``)."""
        out = io.BytesIO()
        n = self.size
        order = (np.arange(n) + (self.next if n == self.capacity else 0)) % self.capacity  # oldest first
        np.savez(out, fields=self.fields[order], policy=self.policy[order], outcome=self.outcome[order])
        return out.getvalue()

    def load_bytes(self, data: bytes) -> None:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            fields, policy, outcome = arrays["fields"], arrays["policy"], arrays["outcome"]
        if not (fields.ndim == 2 and fields.shape[1] == 5 and policy.shape == (len(fields), NUM_ACTIONS)):
            raise ValueError(f"arrays of shapes {fields.shape} and {policy.shape}")
        if outcome.shape != (len(fields),):
            raise ValueError(f"outcome of shape {outcome.shape}")
        keep = slice(max(len(fields) - self.capacity, 0), None)  # the newest, if the buffer shrank
        self.size = self.next = 0
        self.add(fields[keep].astype(np.int64), policy[keep].astype(np.float32), outcome[keep].astype(np.float32))


class Symmetries:
    """The symmetries of a variant as tables, to move positions and their visit distributions.

    A symmetry is a board symmetry (``images[b][s]``: where square ``s`` goes) with a relabelling of the counted
    attributes: new attribute ``k`` is old attribute ``source[r][k]``, complemented where ``flip[r][k]``. On a
    piece that is ``pieces[r][p]``; on the attribute lanes, new lane ``k`` is old lane ``source[k]`` (xor the
    occupied squares where flipped), moved square by square.
    """

    def __init__(self, variant: Variant) -> None:
        self.images = np.array(symmetries_for(variant.squares), dtype=np.int64)
        counted = [k for k in range(4) if variant.counted >> k & 1]
        sources, flips = [], []
        for order in _permutations(counted):
            for flip_bits in range(1 << len(counted)):
                source = list(range(4))
                flip = [0] * 4
                for i, k in enumerate(counted):
                    source[k] = order[i]
                    flip[k] = flip_bits >> i & 1
                sources.append(source)
                flips.append(flip)
        self.sources = np.array(sources, dtype=np.int64)
        self.flips = np.array(flips, dtype=np.int64)
        self.pieces = np.array(
            [[_relabelled(p, s, f) for p in range(16)] for s, f in zip(sources, flips, strict=True)], dtype=np.int64
        )

    @property
    def count(self) -> int:
        return len(self.images) * len(self.sources)

    def apply(self, fields: np.ndarray, policy: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Each position and distribution moved by its own random symmetry."""
        boards = rng.integers(len(self.images), size=len(fields))
        labels = rng.integers(len(self.sources), size=len(fields))
        return self.apply_chosen(fields, policy, boards, labels)

    def apply_chosen(
        self, fields: np.ndarray, policy: np.ndarray, boards: np.ndarray, labels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Position ``i`` and its distribution moved by board symmetry ``boards[i]`` and relabelling ``labels[i]``."""
        out_fields = np.empty_like(fields)
        out_policy = np.empty_like(policy)
        _transform(
            fields, policy, boards, labels, self.images, self.sources, self.flips, self.pieces, out_fields, out_policy
        )
        return out_fields, out_policy


def _permutations(items: list[int]) -> list[list[int]]:
    if not items:
        return [[]]
    return [[x, *rest] for i, x in enumerate(items) for rest in _permutations(items[:i] + items[i + 1 :])]


def _relabelled(piece: int, source: list[int], flip: list[int]) -> int:
    return sum(((piece >> source[k] & 1) ^ flip[k]) << k for k in range(4))


@numba.njit(cache=True)
def _transform(fields, policy, boards, labels, images, sources, flips, pieces, out_fields, out_policy):  # type: ignore[no-untyped-def]
    for i in range(len(fields)):
        image = images[boards[i]]
        r = labels[i]
        lanes, occupied, available, hand, to_move = fields[i, 0], fields[i, 1], fields[i, 2], fields[i, 3], fields[i, 4]
        new_lanes = 0
        for k in range(4):
            lane = (lanes >> (16 * sources[r, k])) & 0xFFFF
            if flips[r, k]:
                lane ^= occupied
            moved = 0
            for s in range(NUM_SQUARES):
                if lane >> s & 1:
                    moved |= 1 << image[s]
            new_lanes |= moved << (16 * k)
        new_occupied = 0
        for s in range(NUM_SQUARES):
            if occupied >> s & 1:
                new_occupied |= 1 << image[s]
        new_available = 0
        for p in range(NUM_SQUARES):
            if available >> p & 1:
                new_available |= 1 << pieces[r, p]
        out_fields[i, 0] = new_lanes
        out_fields[i, 1] = new_occupied
        out_fields[i, 2] = new_available
        out_fields[i, 3] = pieces[r, hand] if hand != NO_PIECE else NO_PIECE
        out_fields[i, 4] = to_move
        for a in range(NUM_ACTIONS):
            target = image[a] if hand != NO_PIECE else pieces[r, a]
            out_policy[i, target] = policy[i, a]


@numba.njit(cache=True)
def _encode(fields, out, masks, level, groups, counted):  # type: ignore[no-untyped-def]
    """Planes and candidate masks of positions given as fields."""
    for i in range(len(fields)):
        out[i] = 0
        lanes, occupied, available, hand, to_move = fields[i, 0], fields[i, 1], fields[i, 2], fields[i, 3], fields[i, 4]
        encode_observation(out[i], level, lanes, occupied, available, hand, to_move, 0, -1, False, groups, counted)
        mask = candidates(lanes, occupied, available, hand, groups, counted)[0]
        for a in range(NUM_ACTIONS):
            masks[i, a] = mask >> a & 1


@numba.njit(cache=True)
def _forced_actions(games, lanes, occupied, available, hand, claimable, groups, counted, out):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        g = games[i]
        out[i] = forced_action(lanes[g], occupied[g], available[g], hand[g], claimable[g], groups, counted)[0]


def forced_actions(batch: GameBatch, games: np.ndarray) -> np.ndarray:
    """For each of ``games``, the action the rules shortcuts dictate, or -1 where a search is needed."""
    out = np.empty(len(games), dtype=np.int64)
    _forced_actions(
        games,
        batch.lanes,
        batch.occupied,
        batch.available,
        batch.hand,
        batch.claimable,
        batch.variant.group_array,
        batch.variant.counted,
        out,
    )
    return out


def batch_roots(batch: GameBatch, games: np.ndarray) -> np.ndarray:
    """The search roots of ``games``: ``(n, 5)`` lanes, occupied, available, hand, to_move."""
    return np.stack(
        [batch.lanes[games], batch.occupied[games], batch.available[games], batch.hand[games], batch.to_move[games]],
        axis=1,
    )


# ---------------------------------------------------------------------------------------------------------
# The searching player, for evaluations
# ---------------------------------------------------------------------------------------------------------
class SearchOpponent(Opponent):
    """The network with the search (most visited action), moving in many games with one search."""

    deterministic = True

    def __init__(self, network: PolicyValueNetwork, variant: Variant, max_games: int, sims: int, c: float) -> None:
        self.name = "learner"
        self.sims = sims
        self.search = BatchedSearch(variant, network.observation, network.evaluate, max_games, max(sims, 1), c)

    @property
    def playing(self) -> str:
        return f"search {self.sims}" if self.sims else "policy"

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        actions = forced_actions(batch, games)
        open_games = np.flatnonzero(actions < 0)
        if len(open_games):
            result = self.search.run(batch_roots(batch, games[open_games]), self.sims)
            actions[open_games] = result.best()
        return actions


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Trainer:
    """Everything a run holds: network, optimizer, buffer, and counters."""

    config: TrainConfig
    variant: Variant
    network: PolicyValueNetwork
    optimizer: th.optim.Optimizer
    buffer: ReplayBuffer
    steps: int = 0
    games_played: int = 0
    best_score: float = -1.0
    latest_eval: dict[str, float] = dataclasses.field(default_factory=dict)


def start(config: TrainConfig, run_dir: Path, resume: bool) -> Trainer:
    """A fresh trainer, or the one saved in the run's ``latest.zip``. Reads only."""
    th.set_num_threads(config.torch_threads)
    th.manual_seed(config.seed)  # the network's initial weights
    variant = config.resolved_variant()
    network = PolicyValueNetwork(config.observation, list(variant.groups), config.net_arch[0])
    optimizer = th.optim.AdamW(network.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    trainer = Trainer(config, variant, network, optimizer, ReplayBuffer(config.buffer_size))
    if resume:
        _restore(trainer, run_dir / "checkpoints" / "latest.zip")
    return trainer


def _restore(trainer: Trainer, checkpoint: Path) -> None:
    metadata = read_metadata(checkpoint)
    trained_config = metadata.get("config")
    if not isinstance(trained_config, dict) or metadata.get("algorithm") != "alphazero":
        raise CheckpointError(
            f"checkpoint {str(checkpoint)!r} was not saved by an alphazero run of quarto train (no alphazero config)"
        )
    check_unchanged_on_resume(trainer.config, metadata)
    network, _ = load_network(checkpoint, trainer.variant)
    trainer.network.load_state_dict(network.state_dict())
    try:
        trainer.optimizer.load_state_dict(read_weights(checkpoint, OPTIMIZER_ENTRY))
        for group in trainer.optimizer.param_groups:  # the config's values apply from the resumed step on
            group["lr"], group["weight_decay"] = trainer.config.learning_rate, trainer.config.weight_decay
        trainer.buffer.load_bytes(_entry_bytes(checkpoint, BUFFER_ENTRY))
        trainer.steps = int(metadata["num_timesteps"])
        trainer.games_played = int(metadata.get("games_played", 0))
        trainer.best_score = float(metadata.get("best_score", -1.0))
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, OSError) as exc:
        raise CheckpointError(f"checkpoint {str(checkpoint)!r} cannot be resumed: {one_line(exc)}") from exc


def _entry_bytes(path: Path, entry: str) -> bytes:
    with zipfile.ZipFile(path) as archive:
        if entry not in archive.namelist():
            raise CheckpointError(f"checkpoint {str(path)!r} has no {entry}: it cannot be resumed")
        return archive.read(entry)


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
        roots = batch_roots(games, everyone)
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
        """The searched positions of the games finished since the last call: fields, visit distributions, and
        outcomes for the player to move (+1 won, 0 drawn, -1 lost)."""
        found = self.finished or [(np.zeros((0, 5), np.int64), np.zeros((0, NUM_ACTIONS), np.float32), np.zeros(0))]
        self.finished = []
        return tuple(np.concatenate(part) for part in zip(*found, strict=True))  # type: ignore[return-value]

    def _step(self, games: np.ndarray, actions: np.ndarray) -> None:
        self.games.step(games, actions)
        self.plies[games] += 1
        for g in games[self.games.over[games]]:
            winner = int(self.games.winner[g])
            if self.pending[g]:
                fields = np.stack([f for f, _ in self.pending[g]])
                policy = np.stack([p for _, p in self.pending[g]])
                outcome = np.where(winner == NO_WINNER, 0.0, np.where(fields[:, 4] == winner, 1.0, -1.0))
                self.finished.append((fields, policy, outcome.astype(np.float32)))
            self.lengths.append(int(self.plies[g]))
            self.decisive.append(winner != NO_WINNER)
            self.pending[g] = []
            self.games.reset(np.array([g]))
            self.plies[g] = 0


def run(trainer: Trainer, run_dir: Path) -> Path:
    """Self-play and train up to ``total_steps`` positions; save, evaluate and return the final checkpoint."""
    config, variant, network = trainer.config, trainer.variant, trainer.network
    rng = np.random.default_rng((config.seed + trainer.steps) % SEED_LIMIT)
    writer = SummaryWriter(str(run_dir / "tb"))
    writer.add_text("config", markdown_table(config), trainer.steps)
    if trainer.steps:
        print(f"resuming {run_dir} at step {trainer.steps:,} with {trainer.buffer.size:,} positions in the buffer")
    search = BatchedSearch(variant, config.observation, network.evaluate, config.num_games, config.sims, config.c_puct)
    selfplay = SelfPlay(
        search, config.sims, config.temperature_plies, (config.dirichlet_alpha, config.dirichlet_fraction)
    )
    symmetries = Symmetries(variant) if config.augment else None
    kind = observation_kind(config.observation)
    stats = _Stats(steps_at_start=trainer.steps)
    next_eval = _next_multiple(trainer.steps, config.eval_every)
    next_checkpoint = _next_multiple(trainer.steps, config.checkpoint_every)
    progress = tqdm(total=config.total_steps, initial=trainer.steps, unit="pos", unit_scale=True, smoothing=0.1)
    grading: tuple[list[State], PositionValues] | None = None
    samples_owed = 0.0

    while trainer.steps < config.total_steps:
        # 1. Self-play: the forced moves, then one searched move in every game; finished games go to the buffer.
        finished_before = len(selfplay.lengths)
        result = selfplay.play_move(rng)
        trainer.games_played += len(selfplay.lengths) - finished_before
        stats.agreement.append(float(np.mean(np.argmax(result.prior, 1) == np.argmax(result.visits, 1))))
        stats.root_value.append(float(np.mean(np.abs(result.root_value))))
        fields, policy, outcome = selfplay.pop_positions()
        trainer.buffer.add(fields, policy, outcome)
        trainer.steps += config.num_games
        progress.update(config.num_games)
        # 2. Learn: sample_reuse samples per new position.
        samples_owed += config.sample_reuse * config.num_games
        tick = time.perf_counter()
        while samples_owed >= config.batch_size and trainer.buffer.size >= config.batch_size:
            stats.losses.append(_train_step(trainer, kind, symmetries, rng))
            samples_owed -= config.batch_size
        stats.train_seconds += time.perf_counter() - tick
        # 3. Evaluate, log, checkpoint.
        if trainer.steps >= next_eval or trainer.steps >= config.total_steps:
            stats = stats.log(writer, trainer, selfplay)
            best_before = trainer.best_score
            grading = _evaluate(trainer, writer, progress, grading)
            next_eval = _next_multiple(trainer.steps, config.eval_every)
            if trainer.best_score > best_before:
                _save(trainer, run_dir / "checkpoints" / "best.zip", with_state=False)
        if trainer.steps >= next_checkpoint:
            _save(trainer, run_dir / "checkpoints" / f"step_{trainer.steps:09d}.zip", with_state=False)
            _save(trainer, run_dir / "checkpoints" / "latest.zip", with_state=True)
            next_checkpoint = _next_multiple(trainer.steps, config.checkpoint_every)
    progress.close()

    final = run_dir / "checkpoints" / "final.zip"
    _save(trainer, final, with_state=True)
    _save(trainer, run_dir / "checkpoints" / "latest.zip", with_state=True)
    results = final_evaluation(trainer, final, run_dir)
    for played in results:
        log_result(lambda key, value: writer.add_scalar(key, value, trainer.steps), played)
    write_final_eval(run_dir, final, trainer.steps, results)
    writer.close()
    print_results(results, trainer.steps)
    print(f"\nfinal checkpoint: {final}\nagent spec: az:{final}")
    print(f"TensorBoard: tensorboard --logdir {run_dir / 'tb'}   (then open http://localhost:6006)")
    return final


def _sampled(policy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row drawn from the visit distribution."""
    cumulative = np.cumsum(policy, axis=1)
    draws = rng.random(len(policy))[:, None] * cumulative[:, -1:]
    return np.minimum((cumulative <= draws).sum(1), NUM_ACTIONS - 1)


def _train_step(
    trainer: Trainer, kind: Any, symmetries: Symmetries | None, rng: np.random.Generator
) -> tuple[float, float]:
    """One gradient step on a minibatch from the buffer; returns (policy loss, value loss)."""
    config, variant = trainer.config, trainer.variant
    fields, policy, outcome = trainer.buffer.sample(config.batch_size, rng)
    if symmetries is not None:
        fields, policy = symmetries.apply(fields, policy, rng)
    planes = np.empty((len(fields), *kind.shape), dtype=np.int8)
    masks = np.empty((len(fields), NUM_ACTIONS), dtype=np.bool_)
    _encode(fields, planes, masks, kind.level, variant.group_array, variant.counted)
    trainer.network.train()
    logits, value = trainer.network(th.from_numpy(planes).float())
    log_probs = th.log_softmax(logits.masked_fill(~th.from_numpy(masks), -1e9), dim=1)
    policy_loss = -(th.from_numpy(policy) * log_probs).sum(1).mean()
    value_loss = ((value - th.from_numpy(outcome)) ** 2).mean()
    loss = policy_loss + config.vf_coef * value_loss
    trainer.optimizer.zero_grad()
    loss.backward()
    th.nn.utils.clip_grad_norm_(trainer.network.parameters(), config.max_grad_norm)
    trainer.optimizer.step()
    trainer.network.eval()
    return policy_loss.item(), value_loss.item()


@dataclasses.dataclass
class _Stats:
    """What happened since the last log."""

    train_seconds: float = 0.0
    started: float = dataclasses.field(default_factory=time.perf_counter)
    steps_at_start: int = 0
    losses: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    agreement: list[float] = dataclasses.field(default_factory=list)
    root_value: list[float] = dataclasses.field(default_factory=list)

    def log(self, writer: SummaryWriter, trainer: Trainer, selfplay: SelfPlay) -> _Stats:
        """Write the charts and losses at the trainer's step; returns the statistics to count from now on."""
        step, search = trainer.steps, selfplay.search
        seconds = max(time.perf_counter() - self.started, 1e-9)
        games = len(selfplay.lengths)
        scalars = {
            "charts/positions_per_s": (step - self.steps_at_start) / seconds,
            "charts/games_per_s": games / seconds,
            "charts/sims_per_s": search.simulations / max(selfplay.search_seconds, 1e-9),
            "charts/tree_share": search.tree_seconds / max(search.tree_seconds + search.network_seconds, 1e-9),
            "charts/train_share": self.train_seconds / seconds,
            "charts/buffer_size": trainer.buffer.size,
            "charts/games_played": trainer.games_played,
            "charts/game_length": float(np.mean(selfplay.lengths)) if games else None,
            "charts/decisive_share": float(np.mean(selfplay.decisive)) if games else None,
            "charts/root_abs_value": float(np.mean(self.root_value)) if self.root_value else None,
            "losses/policy_agreement": float(np.mean(self.agreement)) if self.agreement else None,
            "losses/policy_loss": float(np.mean([p for p, _ in self.losses])) if self.losses else None,
            "losses/value_loss": float(np.mean([v for _, v in self.losses])) if self.losses else None,
        }
        for key, value in scalars.items():
            if value is not None:
                writer.add_scalar(key, value, step)
        search.simulations = search.evaluations = 0
        search.tree_seconds = search.network_seconds = selfplay.search_seconds = 0.0
        selfplay.lengths, selfplay.decisive = [], []
        return _Stats(steps_at_start=step)


def _evaluate(
    trainer: Trainer, writer: SummaryWriter, progress: tqdm, grading: tuple[list[State], PositionValues] | None
) -> tuple[list[State], PositionValues] | None:
    """The evaluation opponents and the grade, logged like PPO's; keeps the best score."""
    config = trainer.config
    results = evaluate_network(trainer, config.eval_games, config.seed)
    for result in results:
        log_result(lambda key, value: writer.add_scalar(key, value, trainer.steps), result)
    score = float(np.mean([r.score() for r in results]))
    writer.add_scalar("eval/score", score, trainer.steps)
    shown = {r.opponent: f"{r.score():.2f}" for r in results}
    trainer.best_score = max(trainer.best_score, score)
    trainer.latest_eval = {r.opponent: r.score() for r in results}
    if config.grade_positions:
        if grading is None:
            grading = (
                sample_positions(trainer.variant, config.grade_positions, config.seed),
                PositionValues(trainer.variant),
            )
        positions, values = grading
        agent = AlphaZeroAgent(
            trainer.variant, config.seed, network=trainer.network, sims=config.eval_sims, c=config.c_puct
        )
        agent.spec = "learner"
        report = grade_agent(agent, trainer.variant, positions, values)
        writer.add_scalar("eval/grade/value_lost", report.share_lost()[0], trainer.steps)
        writer.add_scalar("eval/grade/value_lost_critical", report.critical()[0], trainer.steps)
        for phase, (share, *_) in report.by_phase().items():
            writer.add_scalar(f"eval/grade/value_lost_{phase}", share, trainer.steps)
        shown["value lost"] = f"{report.share_lost()[0]:.3f}"
        trainer.latest_eval["value lost"] = report.share_lost()[0]
    progress.set_postfix_str("eval: " + " ".join(f"{k} {v}" for k, v in shown.items()))
    writer.flush()
    return grading


def evaluate_network(trainer: Trainer, games: int, seed: int) -> list[EvalResult]:
    """The searching network against every evaluation opponent, ``games`` games each from random openings."""
    config = trainer.config
    learner = SearchOpponent(trainer.network, trainer.variant, games, config.eval_sims, config.c_puct)
    return [
        evaluate(learner, spec, trainer.variant, games, seed + i, opening_plies=config.eval_opening_plies)
        for i, spec in enumerate(config.eval_opponents)
    ]


def final_evaluation(trainer: Trainer, checkpoint: Path, run_dir: Path) -> list[EvalResult]:
    """The final checkpoint, as written on disk, against every evaluation opponent."""
    network, _ = load_network(checkpoint, trainer.variant)
    final = Trainer(trainer.config, trainer.variant, network, trainer.optimizer, trainer.buffer, trainer.steps)
    return evaluate_network(final, trainer.config.final_eval_games, trainer.config.seed + 1000)


def _save(trainer: Trainer, path: Path, with_state: bool) -> None:
    """Checkpoint the network atomically; ``with_state`` adds the optimizer and the buffer (for ``--resume``)."""
    extras = {}
    if with_state:
        buffer = io.BytesIO()
        th.save(trainer.optimizer.state_dict(), buffer)
        extras = {OPTIMIZER_ENTRY: buffer.getvalue(), BUFFER_ENTRY: trainer.buffer.to_bytes()}
    metadata = {
        "config": trainer.config.to_dict(),
        "games_played": trainer.games_played,
        "best_score": trainer.best_score,
        "latest_eval": trainer.latest_eval,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path, trainer.network, trainer.variant, trainer.steps, metadata, extras)


def _next_multiple(step: int, every: int) -> int:
    return (step // every + 1) * every
