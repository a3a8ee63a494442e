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

import numpy as np
import torch as th
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.alphazero import OPTIMIZER_ENTRY, AlphaZeroAgent, load_network, save_checkpoint
from agents.checkpoints import CheckpointError, read_metadata, read_weights
from agents.networks import PolicyValueNetwork
from agents.puct import BatchedSearch, _encode
from experiments.arena.grading import PositionValues, grade_agent, sample_positions
from experiments.training.az_selfplay import ReplayBuffer, SearchOpponent, SelfPlay
from experiments.training.config import SEED_LIMIT, TrainConfig, check_unchanged_on_resume, markdown_table
from experiments.training.selfplay import EvalResult, evaluate
from experiments.training.train import log_result, print_results, write_final_eval
from quarto_env.checks import one_line
from quarto_env.core import NUM_ACTIONS, State, Variant
from quarto_env.observation import observation_kind
from quarto_env.symmetry import Symmetries

BUFFER_ENTRY = "buffer.npz"


# ---------------------------------------------------------------------------------------------------------
# Replay buffer and symmetries
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# The searching player, for evaluations
# ---------------------------------------------------------------------------------------------------------


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
