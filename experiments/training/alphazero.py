"""``quarto train``'s AlphaZero backend (``algorithm: alphazero``): search-based self-play
(``configs/alphazero.yaml``).

The loop, top to bottom (:func:`run`; the games and the replay buffer are :mod:`experiments.training.az_selfplay`):

1. ``num_games`` self-play games run side by side (an endless :class:`agents.tree.sessions.SelfPlaySession`, the
   learner's network evaluating its batches). Moves the one-ply rules decide (a win, the only safe piece,
   a claim; :func:`agents.tree.puct.forced_action`) are played at once; every other move is searched, all games
   together, by :class:`agents.tree.puct.PUCTSearch` with ``sims`` simulations, Dirichlet noise at the root,
   and the move sampled in proportion to the visits over the first ``temperature_plies`` actions of a game
   (then the most visited). With ``full_search_share`` below 1 (playout-cap randomisation), a round of moves
   is searched fully only with that chance, and otherwise with ``cheap_sims`` simulations and no noise, to
   move the games on.
2. Each fully searched position is stored with its policy target (``policy_target``: the visit distribution,
   or the completed-Q improved policy) and the search's root value; when its game ends, with the outcome for
   the player who was to move (+1, 0, -1). The replay buffer keeps the latest ``buffer_size`` positions.
3. After every round of moves, the network trains on minibatches drawn uniformly from the buffer, ``sample_reuse``
   samples per new stored position, each one (with ``augment``) moved by a random symmetry of the game -- a
   board symmetry and a relabelling of the counted attributes (:mod:`quarto_env.symmetry`) -- with its policy
   target moved alike. Loss: cross-entropy to the policy target plus ``vf_coef`` times the squared error to the
   value target ``(1 - value_mix) * outcome + value_mix * root value``; AdamW with ``weight_decay``.
4. Before the first round (a fresh run), at the ``early_evals`` positions, every ``eval_every`` positions and at
   the last one: the same evaluations as PPO (``eval/<opponent>/...`` from ``eval_opening_plies`` random plies
   shared by both seatings, and ``eval/grade/``), with ``eval_sims`` simulations per move, and ``best.zip`` when
   the score improves; every ``checkpoint_every`` positions, ``latest.zip`` (network, optimizer, buffer) and
   ``step_<N>.zip``. The schedule, checkpoints, evaluation logging and final table are every backend's
   (:mod:`experiments.training.run`).

Workers (``workers: N``, :mod:`experiments.training.az_workers`): step 1 moves to N Ray actors, one CPU each, on
this machine or the cluster of ``quarto train --address``; each plays its own ``num_games`` games (so N times as
many side by side) with its own generator (the run's seed at the current step, its index, its restarts) and
sends every round's finished positions back. The learner takes the rounds as they arrive (``ray.wait``), stores
and trains on them as in steps 2-3, and every ``broadcast_every`` gradient steps puts its weights in Ray's object
store for the workers' next rounds, so a round may be played with weights a few updates old (``charts/
weights_staleness``); the evaluations, checkpoints and TensorBoard are the learner's, as without workers. A dead
worker is restarted with the latest weights (one line); ``--resume`` starts fresh workers with the checkpoint's
weights. ``workers.json`` in the run folder gives each worker's Ray node, process, positions and restarts, and
``charts/worker_<i>_positions`` the positions each sent since the last log. ``workers: 0`` plays in this
process, between the updates, and is reproducible bit for bit from ``seed``; with workers the order in which
rounds arrive varies, and so does the run.

``total_steps`` counts searched self-play positions, a round adds ``num_games`` of them (a run stops at the first
whole round at or past ``total_steps``, and says so before training when that is further). The run folder,
``config.yaml``, ``command.txt``, the lock, ``--resume`` and TensorBoard (``tb/``) work as for PPO; a resumed run
starts new games (the ones in progress when it stopped are lost) with the network, optimizer and buffer of
``latest.zip``. Metrics: ``charts/``
(positions, games and simulations per second, the share of time in the tree, buffer size, game length, the
search's root value), ``losses/`` (policy, value, the policy's agreement with the search), ``eval/``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import json
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch as th
from torch.utils.tensorboard import SummaryWriter

from agents.alphazero import OPTIMIZER_ENTRY, AlphaZeroAgent, load_network, save_checkpoint
from agents.base import Agent
from agents.networks.checkpoints import CheckpointError, CheckpointHeader, read_weights, saved_bytes
from agents.networks.policy_value import PolicyValueNetwork, device_of, resolve_device
from agents.storage.files import atomic_write_bytes
from agents.tree.puct import encode_positions
from experiments.evaluation.games import seeded_torch
from experiments.evaluation.log import EvaluationLog
from experiments.training.az_selfplay import (
    ExactOutcomes,
    ReplayBuffer,
    SearchOpponent,
    SelfPlayReport,
    new_network,
    play_rounds,
    self_play,
)
from experiments.training.config import TrainConfig
from experiments.training.run import (
    Checkpoints,
    Schedule,
    evaluation_plan,
    finish_run,
    open_tensorboard,
    progress_bar,
    read_resume_point,
    run_seed,
    saved_on_interrupt,
    stopping_step,
)
from quarto_env.checks import one_line
from quarto_env.core import Variant
from quarto_env.symmetry import Symmetries

BUFFER_ENTRY = "buffer.npz"
GRADED_BESIDES = ("policy", "untrained")
"""The agents graded besides the learner's search (:func:`_graded`, :func:`_untrained_reference`)."""
UNTRAINED_CHECKPOINT = "untrained.zip"
"""The untrained reference network in a run's checkpoints folder (:func:`write_untrained_checkpoint`)."""
UNTRAINED_SEED_OFFSET = 7_919
"""Added to the run's seed for the untrained reference network: another draw than the run's own initial weights."""
WORKERS_FILE = "workers.json"
"""With ``workers``: each worker's node, process, searched positions and restarts, in the run folder."""


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
    """The best evaluation score when the run starts (-1 before the first evaluation)."""


def start(config: TrainConfig, run_dir: Path, resume: bool) -> Trainer:
    """A fresh trainer, or the one saved in the run's ``latest.zip``. Reads only."""
    th.set_num_threads(config.torch_threads)
    th.manual_seed(config.seed)  # the network's initial weights
    variant = config.variant
    network = new_network(config, variant)
    network.to(resolve_device(config.device))  # before the optimizer: it keeps its state beside the weights
    settings = config.alphazero
    optimizer = th.optim.AdamW(network.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay)
    trainer = Trainer(config, variant, network, optimizer, ReplayBuffer(settings.buffer_size))
    if resume:
        _restore(trainer, run_dir)
    return trainer


def _restore(trainer: Trainer, run_dir: Path) -> None:
    """Give ``trainer`` the network, optimizer, buffer and counters of the run's ``latest.zip``, checked first (or
    those of the checkpoint a resume goes on from when it is damaged: from a ``step_N.zip``, the network alone)."""
    resumed = read_resume_point(trainer.config, run_dir, with_pool=False)
    settings = trainer.config.alphazero
    checkpoint = resumed.checkpoint
    network, _ = load_network(checkpoint, trainer.variant, metadata=resumed.metadata)
    trainer.network.load_state_dict(network.state_dict())
    trainer.steps, trainer.best_score = resumed.steps, resumed.best_score
    if not resumed.complete:  # the network alone (latest.zip was damaged): a fresh optimizer and an empty buffer
        return
    try:
        trainer.optimizer.load_state_dict(read_weights(checkpoint, OPTIMIZER_ENTRY))
        for group in trainer.optimizer.param_groups:  # the config's values apply from the resumed step on
            group["lr"], group["weight_decay"] = settings.learning_rate, settings.weight_decay
        trainer.buffer.load_bytes(_entry_bytes(checkpoint, BUFFER_ENTRY))
        trainer.games_played = int(resumed.metadata.get("games_played", 0))
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, OSError) as exc:
        raise CheckpointError(f"checkpoint {str(checkpoint)!r} cannot be resumed: {one_line(exc)}") from exc


def _entry_bytes(path: Path, entry: str) -> bytes:
    with zipfile.ZipFile(path) as archive:
        if entry not in archive.namelist():
            raise CheckpointError(f"checkpoint {str(path)!r} has no {entry}: it cannot be resumed")
        return archive.read(entry)


def run(config: TrainConfig, run_dir: Path, trainer: Trainer) -> Path:
    """Self-play and train up to ``total_steps`` positions, then end the run
    (:func:`experiments.training.run.finish_run`); returns the final checkpoint's path."""
    variant, network = trainer.variant, trainer.network
    rng = np.random.default_rng(run_seed(config, trainer.steps))
    writer = open_tensorboard(run_dir, config, trainer.steps, graded=GRADED_BESIDES)
    if trainer.steps:
        print(f"resuming {run_dir} at step {trainer.steps:,} with {trainer.buffer.size:,} positions in the buffer")
    settings = config.alphazero
    symmetries = Symmetries(variant) if settings.augment else None
    stats = _Stats(steps_at_start=trainer.steps)
    exact = ExactOutcomes(variant, settings.exact_outcome_empties) if settings.exact_outcome_empties else None

    def record(key: str, value: float) -> None:
        writer.add_scalar(key, value, trainer.steps)

    evaluations = EvaluationLog(
        evaluation_plan(config),
        variant,
        record,
        trainer.best_score,
        lambda: _graded(trainer),
        lambda: _untrained_reference(trainer),
        tensorboard=lambda: (writer, trainer.steps),
    )
    checkpoints = Checkpoints(run_dir, functools.partial(_save, trainer, evaluations))
    write_untrained_checkpoint(config, run_dir)
    schedule = Schedule(config, trainer.steps, snapshots=False)
    stop = stopping_step(config, trainer.steps, config.num_games, "each round of self-play adds num_games = {leap}")
    progress = progress_bar(trainer.steps, stop, "pos")
    samples_owed = 0.0
    updates = 0  # gradient steps of this process: the version of the weights the workers are sent

    def evaluate() -> None:
        players = [_search_player(network, variant, config, config.eval_games)]
        if evaluations.evaluate(players, progress)[1]:
            checkpoints.save_best()
        writer.flush()

    # The bar closes as the block ends, also on Ctrl-C: it must not redraw under quarto train's message. Ctrl-C
    # saves latest.zip with the rounds stored so far (one in progress is lost: steps count a round once stored).
    with saved_on_interrupt(checkpoints), progress, _self_play_source(trainer, rng, progress.write) as source:
        if schedule.due(trainer.steps):  # a fresh run's evaluation at step 0, before it trains
            evaluate()
        while trainer.steps < config.total_steps:
            # 1. Self-play: a round of moves in every game (here or a worker's); finished games go to the buffer.
            report = source.next_report()
            outcome = report.outcome if exact is None else exact.rescore(report.positions, report.outcome)
            trainer.buffer.add(report.positions, report.policy, outcome, report.root_value)
            trainer.steps += report.searched
            trainer.games_played += len(report.lengths)
            stats.add(report, updates)
            progress.update(report.searched)
            # 2. Learn: sample_reuse samples per new stored position (a cheap round stores none).
            samples_owed += settings.sample_reuse * report.games * report.stored_rounds
            tick = time.perf_counter()
            while samples_owed >= settings.batch_size and trainer.buffer.size >= settings.batch_size:
                stats.losses.append(_train_step(trainer, symmetries, rng))
                samples_owed -= settings.batch_size
                updates += 1
            stats.train_seconds += time.perf_counter() - tick
            if updates - source.version >= settings.broadcast_every:
                source.broadcast(network, updates)
            # 3. Evaluate (also at the last step: the curves end with the final network), log, checkpoint.
            due = schedule.due(trainer.steps)
            if "evaluation" in due or trainer.steps >= config.total_steps:
                stats = stats.log(writer, trainer)
                if exact is not None and exact.rescored:  # how often self-play's outcome was not the exact value
                    record("charts/exact_outcome_changed", exact.changed / exact.rescored)
                _record_workers(source, run_dir)
                evaluate()
            if "checkpoint" in due:
                checkpoints.save_step(trainer.steps)

    final = finish_run(
        config,
        checkpoints,
        trainer.steps,
        lambda checkpoint: [
            _search_player(load_network(checkpoint, variant)[0], variant, config, config.final_eval_games)
        ],
        record,
        f"az:{checkpoints.final}",
        lambda checkpoint: evaluations.grade_all(_graded(trainer, load_network(checkpoint, variant)[0])),
    )
    writer.close()
    return final


class _SelfPlaySource(Protocol):
    """Where the learner's self-play comes from: this process (``workers: 0``) or the workers."""

    version: int
    """The version (the learner's gradient steps) of the weights it plays with."""

    def next_report(self) -> SelfPlayReport: ...

    def broadcast(self, network: PolicyValueNetwork, version: int) -> None: ...

    def summary(self) -> list[dict[str, Any]]:
        """Per worker: where it ran and what it played (none without workers)."""
        ...


class _InProcess:
    """``workers: 0``: a round of the config's games in this process per report, searched with the learner's own
    network (always its latest weights), drawing from the run's generator as training does."""

    def __init__(self, trainer: Trainer, rng: np.random.Generator) -> None:
        self.selfplay = self_play(trainer.config, trainer.variant, rng)
        self.network = trainer.network
        self.version = 0

    def next_report(self) -> SelfPlayReport:
        return play_rounds(self.selfplay, self.network, 1)

    def broadcast(self, network: PolicyValueNetwork, version: int) -> None:
        self.version = version  # the games search with the network itself: nothing to send
        self.selfplay.model_version = version

    def summary(self) -> list[dict[str, Any]]:
        return []


@contextlib.contextmanager
def _self_play_source(
    trainer: Trainer, rng: np.random.Generator, log: Callable[[str], None]
) -> Iterator[_SelfPlaySource]:
    """The run's self-play: in this process, or ``workers`` Ray actors on the Ray that ``quarto train`` started or
    joined, each seeded from the run's seed at this step."""
    if not trainer.config.alphazero.workers:
        yield _InProcess(trainer, rng)
        return
    from experiments.training.az_workers import WorkerPool  # imports ray: only runs with workers need it

    pool = WorkerPool(trainer.config, run_seed(trainer.config, trainer.steps), trainer.network, log)
    try:
        yield pool
    finally:
        pool.close()


def _record_workers(source: _SelfPlaySource, run_dir: Path) -> None:
    """With workers, write :data:`WORKERS_FILE`: where each ran, and what it played."""
    summary = source.summary()
    if summary:
        atomic_write_bytes(run_dir / WORKERS_FILE, json.dumps(summary, indent=1).encode())


def _train_step(trainer: Trainer, symmetries: Symmetries | None, rng: np.random.Generator) -> tuple[float, float]:
    """One gradient step on a minibatch from the buffer; returns (policy loss, value loss)."""
    settings, variant = trainer.config.alphazero, trainer.variant
    positions, policy, value_target = trainer.buffer.sample(settings.batch_size, rng, settings.value_mix)
    if symmetries is not None:
        positions, policy = symmetries.apply(positions, policy, rng)
    planes, masks = encode_positions(positions, trainer.network.kind, variant)
    trainer.network.train()
    policy_loss, value_loss = trainer.network.losses(planes, masks, policy, value_target)
    loss = policy_loss + settings.vf_coef * value_loss
    trainer.optimizer.zero_grad()
    loss.backward()
    th.nn.utils.clip_grad_norm_(trainer.network.parameters(), settings.max_grad_norm)
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
    lengths: list[int] = dataclasses.field(default_factory=list)
    decisive: list[bool] = dataclasses.field(default_factory=list)
    rounds: int = 0
    stored_rounds: int = 0
    simulations: int = 0
    tree_seconds: float = 0.0
    network_seconds: float = 0.0
    search_seconds: float = 0.0
    by_worker: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    """Searched positions per worker (none without workers)."""
    staleness: list[int] = dataclasses.field(default_factory=list)
    """Per worker report: the learner's gradient steps between the weights it played with and its arrival."""

    def add(self, report: SelfPlayReport, updates: int) -> None:
        """Count ``report`` in, arriving when the learner has made ``updates`` gradient steps."""
        self.agreement += report.agreement
        self.root_value += report.root_abs_value
        self.lengths += report.lengths
        self.decisive += report.decisive
        self.rounds += report.rounds
        self.stored_rounds += report.stored_rounds
        self.simulations += report.simulations
        self.tree_seconds += report.tree_seconds
        self.network_seconds += report.network_seconds
        self.search_seconds += report.search_seconds
        if report.worker >= 0:
            self.by_worker[report.worker] += report.searched
            self.staleness.append(updates - report.weights_version)

    def log(self, writer: SummaryWriter, trainer: Trainer) -> _Stats:
        """Write the charts and losses at the trainer's step; returns the statistics to count from now on."""
        step = trainer.steps
        seconds = max(time.perf_counter() - self.started, 1e-9)
        games = len(self.lengths)
        scalars = {
            "charts/positions_per_s": (step - self.steps_at_start) / seconds,
            "charts/games_per_s": games / seconds,
            "charts/sims_per_s": self.simulations / max(self.search_seconds, 1e-9),
            "charts/tree_share": self.tree_seconds / max(self.tree_seconds + self.network_seconds, 1e-9),
            "charts/train_share": self.train_seconds / seconds,
            "charts/buffer_size": trainer.buffer.size,
            "charts/games_played": trainer.games_played,
            "charts/game_length": float(np.mean(self.lengths)) if games else None,
            "charts/decisive_share": float(np.mean(self.decisive)) if games else None,
            "charts/root_abs_value": float(np.mean(self.root_value)) if self.root_value else None,
            "charts/stored_share": self.stored_rounds / max(self.rounds, 1),
            "charts/weights_staleness": float(np.mean(self.staleness)) if self.staleness else None,
            **{f"charts/worker_{index}_positions": count for index, count in sorted(self.by_worker.items())},
            "losses/policy_agreement": float(np.mean(self.agreement)) if self.agreement else None,
            "losses/policy_loss": float(np.mean([p for p, _ in self.losses])) if self.losses else None,
            "losses/value_loss": float(np.mean([v for _, v in self.losses])) if self.losses else None,
        }
        for key, value in scalars.items():
            if value is not None:
                writer.add_scalar(key, value, step)
        return _Stats(steps_at_start=step)


def _search_player(network: PolicyValueNetwork, variant: Variant, config: TrainConfig, games: int) -> SearchOpponent:
    """The network with its search (``eval_sims`` simulations, the config's ``root`` without noise), in ``games``
    games at once: the learner of the evaluations."""
    settings = config.alphazero
    gumbel_actions = settings.gumbel_actions if settings.root == "gumbel" else None
    return SearchOpponent(network, variant, games, settings.eval_sims, settings.c_puct, gumbel_actions)


def _graded(trainer: Trainer, network: PolicyValueNetwork | None = None) -> dict[str, Agent]:
    """What every evaluation grades: the network with its search (``eval_sims``; the curves ``eval/grade/``), its
    policy alone (``eval/grade/policy/``), and, where ``sims`` differs, the search of self-play
    (``eval/grade/search<sims>/``). ``network``: another than the trainer's (the final checkpoint's)."""
    settings, network = trainer.config.alphazero, network or trainer.network
    graded: dict[str, Agent] = {
        "": _search_agent(trainer, network, settings.eval_sims),
        "policy": _search_agent(trainer, network, 0),
    }
    if settings.sims != settings.eval_sims:
        graded[f"search{settings.sims}"] = _search_agent(trainer, network, settings.sims)
    return graded


def untrained_network(config: TrainConfig, variant: Variant) -> PolicyValueNetwork:
    """The run's untrained reference network: the config's shape, drawn from its seed plus
    :data:`UNTRAINED_SEED_OFFSET` with torch's generator forked, so training draws what it would have drawn
    without it. On the CPU."""
    with seeded_torch(config.seed + UNTRAINED_SEED_OFFSET):
        return new_network(config, variant)


def write_untrained_checkpoint(config: TrainConfig, run_dir: Path) -> Path:
    """``checkpoints/untrained.zip``, the untrained reference network (:func:`untrained_network`) as a checkpoint
    of step 0, unless the run has it: ``az:RUN/checkpoints/untrained.zip,sims=N`` grades or plays the search
    without learning at any budget. Returns its path."""
    path = run_dir / "checkpoints" / UNTRAINED_CHECKPOINT
    if not path.is_file():
        variant = config.variant
        metadata = {"config": config.to_dict(), "games_played": 0, "reference": "untrained"}
        network = untrained_network(config, variant)
        save_checkpoint(path, network, CheckpointHeader(variant, network.kind.name, 0), metadata)
    return path


def _untrained_reference(trainer: Trainer) -> dict[str, Agent]:
    """The same search (``eval_sims``) with the untrained reference network (:func:`untrained_network`), graded
    once per run (``eval/grade/untrained/``): the grade the search reaches without learning."""
    untrained = untrained_network(trainer.config, trainer.variant).to(device_of(trainer.network))
    return {"untrained": _search_agent(trainer, untrained, trainer.config.alphazero.eval_sims)}


def _search_agent(trainer: Trainer, network: PolicyValueNetwork, sims: int) -> AlphaZeroAgent:
    """``network`` with ``sims`` simulations of search (0: its policy alone) as an agent, to grade."""
    config = trainer.config
    agent = AlphaZeroAgent(
        trainer.variant,
        config.seed,
        network=network,
        sims=sims,
        c=config.alphazero.c_puct,
        root=config.alphazero.root,
        k=config.alphazero.gumbel_actions,
    )
    agent.spec = "learner"
    return agent


def _save(trainer: Trainer, evaluations: EvaluationLog, path: Path, resumable: bool) -> None:
    """Checkpoint the network atomically; ``resumable`` adds the optimizer and the buffer (for ``--resume``)."""
    extras = {}
    if resumable:  # the optimizer's state is saved from CPU copies, as the network's (agents.networks.checkpoints)
        extras = {OPTIMIZER_ENTRY: saved_bytes(trainer.optimizer.state_dict()), BUFFER_ENTRY: trainer.buffer.to_bytes()}
    metadata = {
        "config": trainer.config.to_dict(),
        "games_played": trainer.games_played,
        **evaluations.checkpoint_fields(),
    }
    header = CheckpointHeader(trainer.variant, trainer.network.kind.name, trainer.steps)
    save_checkpoint(path, trainer.network, header, metadata, extras)
