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
   ``step_<N>.zip``. The schedule, checkpoints, evaluation logging and final table are every backend's run
   (:func:`experiments.training.loop.train_run`, driving a :class:`SelfPlayLearner`).

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
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch as th
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.alphazero import OPTIMIZER_ENTRY, AlphaZeroAgent, load_network, save_checkpoint
from agents.base import Agent
from agents.networks.checkpoints import CheckpointError, CheckpointHeader, entry_bytes, read_weights, saved_bytes
from agents.networks.policy_value import PolicyValueNetwork, device_of, resolve_device
from agents.storage.files import atomic_write_bytes
from agents.tree.puct import encode_positions
from experiments.evaluation.games import EvalResult, Mover, seeded_torch
from experiments.evaluation.log import EvaluationLog
from experiments.training.az_selfplay import (
    ExactOutcomes,
    PUCTMover,
    ReplayBuffer,
    SelfPlayReport,
    new_network,
    play_rounds,
    self_play,
)
from experiments.training.config import TrainConfig
from experiments.training.loop import Habits, Learner, train_run
from experiments.training.run import evaluation_log, read_resume_point, restore_evaluations, run_seed
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
    evaluations: EvaluationLog
    """The run's evaluations: their plan, the best score so far, the untrained reference."""
    steps: int = 0
    games_played: int = 0


def start(config: TrainConfig, run_dir: Path, resume: bool) -> Trainer:
    """A fresh trainer, or the one saved in the run's ``latest.zip``. Reads only."""
    th.set_num_threads(config.torch_threads)
    th.manual_seed(config.seed)  # the network's initial weights
    variant = config.variant
    network = new_network(config, variant)
    network.to(resolve_device(config.device))  # before the optimizer: it keeps its state beside the weights
    settings = config.alphazero
    optimizer = th.optim.AdamW(network.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay)
    trainer = Trainer(config, variant, network, optimizer, ReplayBuffer(settings.buffer_size), evaluation_log(config))
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
    trainer.steps = resumed.steps
    restore_evaluations(trainer.evaluations, resumed)
    if not resumed.complete:  # the network alone (latest.zip was damaged): a fresh optimizer and an empty buffer
        return
    try:
        trainer.optimizer.load_state_dict(read_weights(checkpoint, OPTIMIZER_ENTRY))
        for group in trainer.optimizer.param_groups:  # the config's values apply from the resumed step on
            group["lr"], group["weight_decay"] = settings.learning_rate, settings.weight_decay
        trainer.buffer.load_bytes(entry_bytes(checkpoint, BUFFER_ENTRY), trainer.variant)
        trainer.games_played = int(resumed.metadata.get("games_played", 0))
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, OSError) as exc:
        raise CheckpointError(f"checkpoint {str(checkpoint)!r} cannot be resumed: {one_line(exc)}") from exc


def run(config: TrainConfig, run_dir: Path, trainer: Trainer) -> Path:
    """Self-play and train up to ``total_steps`` positions in the run's life
    (:func:`experiments.training.loop.train_run`); returns the final checkpoint's path."""
    rng = np.random.default_rng(run_seed(config, trainer.steps))
    with _self_play_source(trainer, rng, tqdm.write) as source:
        return train_run(config, run_dir, SelfPlayLearner(trainer, source, rng))


class SearchLearner(Learner):
    """What the learners of both AlphaZero backends share: a leap adds searched positions (the progress bar's
    ``pos``), and the evaluations play and grade the network with the project's search. ``trainer``: the
    backend's state (its config, network, buffer, counters and evaluation log)."""

    def __init__(self, trainer: Any, leap: int, leaps: str) -> None:
        self.trainer = trainer
        self.evaluations: EvaluationLog = trainer.evaluations
        self.habits = Habits("pos", leap, leaps, graded_besides=GRADED_BESIDES)

    @property
    def steps(self) -> int:
        return int(self.trainer.steps)

    def begin(self, run_dir: Path, writer: SummaryWriter) -> str:
        self.run_dir, self.writer = run_dir, writer
        self.write_untrained(run_dir)
        return f"{int(self.trainer.buffer.size):,} positions in the buffer"

    def write_untrained(self, run_dir: Path) -> None:
        """Write ``checkpoints/untrained.zip`` unless the run has it (:func:`write_untrained_checkpoint`)."""
        raise NotImplementedError

    def network(self, checkpoint: Path | None = None) -> PolicyValueNetwork:
        """The network the search reads: the learner's, or the one in ``checkpoint``."""
        raise NotImplementedError

    def players(self, checkpoint: Path | None = None) -> list[Mover]:
        config = self.trainer.config
        games = config.eval_games if checkpoint is None else config.final_eval_games
        return [search_player(self.network(checkpoint), config, games)]

    def graded(self, checkpoint: Path | None = None) -> dict[str, Agent]:
        return graded_agents(self.trainer.config, self.network(checkpoint))

    def references(self) -> dict[str, Agent]:
        return untrained_reference(self.trainer.config, self.untrained())

    def untrained(self) -> PolicyValueNetwork:
        """The untrained reference network (:func:`untrained_network`), beside the learner's."""
        raise NotImplementedError

    def agent_spec(self, final: Path) -> str:
        return f"az:{final}"


class SelfPlayLearner(SearchLearner):
    """The torch AlphaZero learner (:class:`Trainer`) with its self-play ``source``: a leap is one round of moves
    in every game, stored, then trained on."""

    def __init__(self, trainer: Trainer, source: _SelfPlaySource, rng: np.random.Generator) -> None:
        config, settings = trainer.config, trainer.config.alphazero
        super().__init__(trainer, config.num_games, "each round of self-play adds num_games = {leap}")
        self.source, self.rng = source, rng
        self.symmetries = Symmetries(trainer.variant) if settings.augment else None
        self.exact = (
            ExactOutcomes(trainer.variant, settings.exact_outcome_empties) if settings.exact_outcome_empties else None
        )
        self.stats = _Stats(steps_at_start=trainer.steps)
        self.samples_owed = 0.0
        self.updates = 0
        """Gradient steps of this process: the version of the weights the workers are sent."""

    def write_untrained(self, run_dir: Path) -> None:
        write_untrained_checkpoint(self.trainer.config, run_dir)

    def network(self, checkpoint: Path | None = None) -> PolicyValueNetwork:
        if checkpoint is None:
            return self.trainer.network
        return load_network(checkpoint, self.trainer.variant)[0]

    def untrained(self) -> PolicyValueNetwork:
        return untrained_network(self.trainer.config, self.trainer.variant).to(device_of(self.trainer.network))

    def leap(self) -> None:
        trainer, settings = self.trainer, self.trainer.config.alphazero
        # 1. Self-play: a round of moves in every game (here or a worker's); finished games go to the buffer. Ctrl-C
        # loses the round in progress: steps count a round once it is stored.
        report = self.source.next_report()
        exact = self.exact
        outcome = report.outcome if exact is None else exact.rescore(report.positions, report.outcome)
        trainer.buffer.add(report.positions, report.policy, outcome, report.root_value)
        trainer.steps += report.searched
        trainer.games_played += len(report.lengths)
        self.stats.add(report, self.updates)
        # 2. Learn: sample_reuse samples per new stored position (a cheap round stores none).
        self.samples_owed += settings.sample_reuse * report.games * report.stored_rounds
        tick = time.perf_counter()
        while self.samples_owed >= settings.batch_size and trainer.buffer.size >= settings.batch_size:
            self.stats.losses.append(_train_step(trainer, self.symmetries, self.rng))
            self.samples_owed -= settings.batch_size
            self.updates += 1
        self.stats.train_seconds += time.perf_counter() - tick
        if self.updates - self.source.version >= settings.broadcast_every:
            self.source.broadcast(trainer.network, self.updates)

    def after_evaluation(self, results: list[EvalResult]) -> None:
        # The speed charts time the training, not the evaluations: the clock restarts after one. Workers play on
        # during an evaluation, and what they made then arrives after it, so with them the clock runs through.
        if not self.trainer.config.alphazero.workers:
            self.stats.started = time.perf_counter()

    def log_charts(self) -> None:
        self.stats = self.stats.log(self.writer, self.trainer)
        if self.exact is not None and self.exact.rescored:  # how often self-play's outcome was not the exact value
            self.writer.add_scalar("charts/exact_outcome_changed", self.exact.changed / self.exact.rescored, self.steps)
        _record_workers(self.source, self.run_dir)

    def save(self, path: Path, resumable: bool) -> None:
        _save(self.trainer, path, resumable)


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


SUMMED = ("rounds", "stored_rounds", "simulations", "tree_seconds", "network_seconds", "search_seconds")
"""The counts of a :class:`SelfPlayReport` that the statistics add up."""


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
    sums: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    """The counts of the reports that add up (:data:`SUMMED`), added up."""
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
        self.sums.update({name: getattr(report, name) for name in SUMMED})
        if report.worker >= 0:
            self.by_worker[report.worker] += report.searched
            self.staleness.append(updates - report.weights_version)

    def log(self, writer: SummaryWriter, trainer: Trainer) -> _Stats:
        """Write the charts and losses at the trainer's step; returns the statistics to count from now on."""
        step, sums = trainer.steps, self.sums
        seconds = max(time.perf_counter() - self.started, 1e-9)
        games = len(self.lengths)
        scalars = {
            "charts/positions_per_s": (step - self.steps_at_start) / seconds,
            "charts/games_per_s": games / seconds,
            "charts/sims_per_s": sums["simulations"] / max(sums["search_seconds"], 1e-9),
            "charts/tree_share": sums["tree_seconds"] / max(sums["tree_seconds"] + sums["network_seconds"], 1e-9),
            "charts/train_share": self.train_seconds / seconds,
            "charts/buffer_size": trainer.buffer.size,
            "charts/games_played": trainer.games_played,
            "charts/game_length": float(np.mean(self.lengths)) if games else None,
            "charts/decisive_share": float(np.mean(self.decisive)) if games else None,
            "charts/root_abs_value": float(np.mean(self.root_value)) if self.root_value else None,
            "charts/stored_share": sums["stored_rounds"] / max(sums["rounds"], 1),
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


def search_player(network: PolicyValueNetwork, config: TrainConfig, games: int) -> PUCTMover:
    """The network with its search (``eval_sims`` simulations, the config's ``root`` without noise), in ``games``
    games at once: the learner of the evaluations (the JAX backend's too, its network on the CPU)."""
    settings = config.alphazero
    gumbel_actions = settings.gumbel_actions if settings.root == "gumbel" else None
    return PUCTMover(network, config.variant, games, settings.eval_sims, settings.c_puct, gumbel_actions)


def graded_agents(config: TrainConfig, network: PolicyValueNetwork) -> dict[str, Agent]:
    """What every evaluation grades: the network with its search (``eval_sims``; the curves ``eval/grade/``), its
    policy alone (``eval/grade/policy/``), and, where ``sims`` differs, the search of self-play
    (``eval/grade/search<sims>/``)."""
    settings = config.alphazero
    graded: dict[str, Agent] = {
        "": _search_agent(config, network, settings.eval_sims),
        "policy": _search_agent(config, network, 0),
    }
    if settings.sims != settings.eval_sims:
        graded[f"search{settings.sims}"] = _search_agent(config, network, settings.sims)
    return graded


def untrained_reference(config: TrainConfig, network: PolicyValueNetwork) -> dict[str, Agent]:
    """The same search (``eval_sims``) with the untrained reference ``network`` (:func:`untrained_network`),
    graded once per run (``eval/grade/untrained/``): the grade the search reaches without learning."""
    return {"untrained": _search_agent(config, network, config.alphazero.eval_sims)}


def _search_agent(config: TrainConfig, network: PolicyValueNetwork, sims: int) -> AlphaZeroAgent:
    """``network`` with ``sims`` simulations of search (0: its policy alone) as an agent, to grade."""
    settings = config.alphazero
    agent = AlphaZeroAgent(
        config.variant,
        config.seed,
        network=network,
        sims=sims,
        c=settings.c_puct,
        root=settings.root,
        k=settings.gumbel_actions if settings.root == "gumbel" else None,
    )
    agent.spec = "learner"
    return agent


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


def _save(trainer: Trainer, path: Path, resumable: bool) -> None:
    """Checkpoint the network atomically; ``resumable`` adds the optimizer and the buffer (for ``--resume``)."""
    extras = {}
    if resumable:  # the optimizer's state is saved from CPU copies, as the network's (agents.networks.checkpoints)
        extras = {OPTIMIZER_ENTRY: saved_bytes(trainer.optimizer.state_dict()), BUFFER_ENTRY: trainer.buffer.to_bytes()}
    metadata = {
        "config": trainer.config.to_dict(),
        "games_played": trainer.games_played,
        **trainer.evaluations.checkpoint_fields(),
    }
    header = CheckpointHeader(trainer.variant, trainer.network.kind.name, trainer.steps)
    save_checkpoint(path, trainer.network, header, metadata, extras)
