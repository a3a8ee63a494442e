"""``quarto train``'s MaskablePPO backend (``algorithm: ppo``, ``backend: sb3``): self-play against a growing pool
of past selves.

The learner is sb3-contrib's MaskablePPO on :class:`experiments.training.selfplay.SelfPlayVecEnv`:
``num_games`` games side by side in this process, each against an opponent drawn from an
:class:`~experiments.training.selfplay.OpponentPool` -- frozen snapshots of the learner and baseline agents,
with the config's weights. The module reads top to bottom: :func:`start` (a fresh :class:`PPOLearner`, or the one
of ``latest.zip``), :func:`run` (the run's life, :func:`experiments.training.loop.train_run`), then what the
learner adds to it: MaskablePPO's loop, into which :class:`TrainingCallback` hands the run's tasks between two
rollouts and writes the TensorBoard charts of every rollout.

PPO trains whole rollouts of ``num_games * n_steps`` learner steps, so a run stops at the first multiple of a
rollout at or past ``total_steps`` (it says so before training when that is further). The scheduled tasks run
between two rollouts, where the network has been updated on every step so far: a snapshot, an evaluation or a
checkpoint at step ``N`` holds the network trained on ``N`` steps (the first, at step 0, evaluates the untrained
one), and the evaluations are written to TensorBoard at that step at once. MaskablePPO's loop ends after the
update of its last rollout, with no task after it: the end of the run follows.

Checkpoints are stable-baselines3's zip with the project's ``quarto.json`` (:mod:`agents.ppo`); ``latest.zip``
and ``final.zip`` also hold the opponent pool (``pool.pt``). ``ppo:RUN_FOLDER`` plays ``best.zip``. On
``--resume`` the learner is rebuilt from the config and given the checkpoint's weights, optimizer state, step
count and pool, read as data.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat
from stable_baselines3.common.utils import set_random_seed
from torch.utils.tensorboard import SummaryWriter

from agents.base import Agent
from agents.networks.checkpoints import CheckpointError, CheckpointHeader
from agents.networks.policy_value import resolve_device
from agents.ppo import PPOAgent, load_policy, load_training_state, policy_setup, save_checkpoint
from experiments.evaluation.games import EvalResult, Mover
from experiments.evaluation.log import EvaluationLog
from experiments.training.config import TrainConfig
from experiments.training.loop import Habits, Learner, train_run
from experiments.training.run import POOL_ENTRY, evaluation_log, read_resume_point, run_seed
from experiments.training.selfplay import OpponentPool, SelfPlayVecEnv, policy_players
from quarto_env.checks import one_line
from quarto_env.core import Variant
from quarto_env.render import render_image


def start(config: TrainConfig, run_dir: Path, resume: bool) -> PPOLearner:
    """The learner, fresh, or restored from the run's ``latest.zip`` (checked first). Reads only: a refused start
    leaves the run folder as it was."""
    th.set_num_threads(config.torch_threads)
    variant = config.variant
    resumed = read_resume_point(config, run_dir, with_pool=True) if resume else None
    seed = run_seed(config, resumed.steps if resumed else 0)
    set_random_seed(seed)
    pool = OpponentPool(variant, config.observation, config.ppo.opponents, config.ppo.max_snapshots, config.seed)
    env = SelfPlayVecEnv(variant, config.num_games, config.observation, pool, seed)
    model = build_model(config, variant, env)
    if resumed is None:
        pool.add_snapshot(model.policy, 0)
        return PPOLearner(config, model, pool, env, evaluation_log(config))
    # The checkpoint is read as data: weights, optimizer state and step count into the fresh model.
    load_training_state(model, resumed.checkpoint, variant, resumed.metadata)
    learner = PPOLearner(config, model, pool, env, evaluation_log(config, resumed))
    if resumed.pool is None:  # a checkpoint of the network alone (latest.zip was damaged): the pool starts with it
        pool.add_snapshot(model.policy, resumed.steps)
        return learner
    try:
        pool.load_state_dict(resumed.pool, model.policy)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
        raise CheckpointError(
            f"checkpoint {str(resumed.checkpoint)!r}: {POOL_ENTRY} holds no opponent pool for this run "
            f"({one_line(exc)})"
        ) from exc
    return learner


def build_model(config: TrainConfig, variant: Variant, env: SelfPlayVecEnv) -> MaskablePPO:
    """A fresh MaskablePPO learner as the config describes."""
    ppo = config.ppo
    policy_class, policy_kwargs = policy_setup(config.policy, variant, config.net_arch, config.observation)
    learning_rate: Any = ppo.learning_rate
    if ppo.lr_schedule == "linear":

        def learning_rate(progress_remaining: float) -> float:
            return ppo.learning_rate * progress_remaining

    return MaskablePPO(
        policy_class,
        env,
        learning_rate=learning_rate,
        n_steps=ppo.n_steps,
        batch_size=ppo.batch_size,
        n_epochs=ppo.n_epochs,
        gamma=ppo.gamma,
        gae_lambda=ppo.gae_lambda,
        clip_range=ppo.clip_range,
        ent_coef=ppo.ent_coef,
        vf_coef=ppo.vf_coef,
        max_grad_norm=ppo.max_grad_norm,
        policy_kwargs=policy_kwargs,
        seed=config.seed,
        device=resolve_device(config.device),
        verbose=0,
    )


def run(config: TrainConfig, run_dir: Path, learner: PPOLearner) -> Path:
    """Train ``learner`` up to ``total_steps`` in the run's life (:func:`experiments.training.loop.train_run`);
    returns the final checkpoint's path."""
    return train_run(config, run_dir, learner)


class PPOLearner(Learner):
    """The learner and its world: model, opponents and games, and the run's evaluation log."""

    def __init__(
        self,
        config: TrainConfig,
        model: MaskablePPO,
        pool: OpponentPool,
        env: SelfPlayVecEnv,
        evaluations: EvaluationLog,
    ) -> None:
        self.config, self.model, self.pool, self.env, self.evaluations = config, model, pool, env, evaluations
        rollout = config.num_games * config.ppo.n_steps
        leaps = "PPO trains whole rollouts of num_games * n_steps = {leap}"
        self.habits = Habits("step", rollout, leaps, snapshots=True)

    @property
    def steps(self) -> int:
        return int(self.model.num_timesteps)

    def begin(self, run_dir: Path, writer: SummaryWriter) -> str:
        self.writer = writer
        self.model.set_logger(TensorBoardLogger(writer, lambda: self.steps))
        return f"{len(self.pool.snapshots)} snapshots"

    def train(self, until: int, after_leap: Callable[[], None]) -> None:
        """MaskablePPO's loop up to ``until``, the run's tasks between two rollouts (:class:`TrainingCallback`)."""
        remaining = max(until - self.steps, 0)
        if not remaining:
            return
        callback = TrainingCallback(self, after_leap)
        try:
            self.model.learn(remaining, callback=callback, reset_num_timesteps=False, log_interval=1)
        except KeyboardInterrupt:  # Ctrl-C: latest.zip follows, less a rollout being collected
            callback.drop_rollout_in_progress()
            raise
        after_leap()  # the callback runs the tasks before each next rollout: the last update's follow here

    def snapshot(self) -> None:
        self.pool.add_snapshot(self.model.policy, self.steps)

    def players(self, checkpoint: Path | None = None) -> list[Mover]:
        kind = self.config.observation
        if checkpoint is None:
            return list(policy_players(self.model.policy, kind))
        return list(policy_players(load_policy(checkpoint, self.config.variant).policy, kind))

    def graded(self, checkpoint: Path | None = None) -> dict[str, Agent]:
        """The learner's policy playing its most likely action (the final table grades none)."""
        if checkpoint is not None:
            return {}
        return {"": PPOAgent.from_policy(self.model.policy, self.config.variant, self.config.observation)}

    def after_evaluation(self, results: list[EvalResult]) -> None:
        # A picture of how one game ended (game 0 against the last opponent: the learner gave first).
        sample = results[len(self.config.eval_opponents) - 1]
        image = render_image(self.config.variant, sample.final_state, names=("learner", sample.opponent))
        self.writer.add_image("eval/final_board", image, self.steps, dataformats="HWC")

    def save(self, path: Path, resumable: bool) -> None:
        """Checkpoint the model (with the opponent pool when ``resumable``) atomically at ``path``."""
        header = CheckpointHeader(self.config.variant, self.config.observation.name, self.steps)
        metadata = {
            "policy": self.config.policy,
            "config": self.config.to_dict(),
            **self.evaluations.checkpoint_fields(),
        }
        extras = {POOL_ENTRY: _pool_bytes(self.pool)} if resumable else {}
        save_checkpoint(path, self.model, header, metadata, extras)

    def agent_spec(self, final: Path) -> str:
        return f"ppo:{final}"


SB3_TAGS = {
    "train/policy_gradient_loss": "losses/policy_loss",
    "train/clip_fraction": "losses/clipfrac",
    "train/learning_rate": "charts/learning_rate",
    "train/clip_range": "charts/clip_range",
}
"""MaskablePPO's ``train/`` scalars filed under another tag: the update's figures go to ``losses/``, the group
of every backend (CleanRL's), under the names the other backends give them; the rest of ``train/`` to
``losses/`` with SB3's name (``entropy_loss`` is minus the entropy), the schedule's values to ``charts/``."""


class TensorBoardLogger(Logger):
    """stable-baselines3's logger writing into the run's TensorBoard ``writer``, MaskablePPO's ``train/`` scalars
    renamed by :data:`SB3_TAGS` (runs before 2026-12-05 have them under ``train/``) and written at once, at
    ``step()``: SB3 writes its records when the next rollout is collected, which would put an update's losses at
    the next rollout's step (and the last update's nowhere). ``step()`` during an update is the step of the
    rollout it trains on, where CleanRL writes its losses."""

    def __init__(self, writer: SummaryWriter, step: Callable[[], int]) -> None:
        super().__init__(writer.log_dir, [_RunWriter(writer)])
        self.writer, self.step = writer, step

    def record(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        if not key.startswith("train/"):
            super().record(key, value, exclude)
        elif "tensorboard" not in ((exclude,) if isinstance(exclude, str) else exclude or ()):  # as SB3's writer
            self.writer.add_scalar(SB3_TAGS.get(key, "losses/" + key.removeprefix("train/")), value, self.step())


class _RunWriter(TensorBoardOutputFormat):
    """SB3's TensorBoard output into the run's own writer: one events file for the run's curves."""

    def __init__(self, writer: SummaryWriter) -> None:  # no super().__init__: it would open a second writer
        self.writer = writer
        self._is_closed = False


class TrainingCallback(BaseCallback):
    """MaskablePPO's hook into the run: ``after_leap`` (the run's tasks) before every rollout but the first -- after
    the update of the one before; the first follows the tasks at the run's start --, and every rollout's charts."""

    def __init__(self, learner: PPOLearner, after_leap: Callable[[], None]) -> None:
        super().__init__()
        self.learner = learner
        self.after_leap = after_leap
        self.started_at = learner.steps
        self._last_time, self._last_step = time.perf_counter(), learner.steps
        self._collecting_from: int | None = None
        """The step at which the rollout being collected began; ``None`` between collection and the update."""

    def _on_training_start(self) -> None:
        self._last_time = time.perf_counter()

    def _on_rollout_start(self) -> None:
        step = self.learner.steps
        self._collecting_from = step
        if step > self.started_at:
            self.after_leap()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self._collecting_from = None  # collected whole: the update trains on it
        # Learner steps per second since the previous rollout: collection, the PPO update and any evaluation.
        now, step, learner = time.perf_counter(), self.learner.steps, self.learner
        self.logger.record("charts/SPS", (step - self._last_step) / max(now - self._last_time, 1e-9))
        self._last_time, self._last_step = now, step
        self.logger.record("charts/pool_size", len(learner.pool.snapshots))
        episodes = learner.model.ep_info_buffer
        if episodes:
            self.logger.record("charts/episode_reward", float(np.mean([e["r"] for e in episodes])))
            self.logger.record("charts/episode_length", float(np.mean([e["l"] for e in episodes])))
        outcomes = learner.env.pop_outcomes()
        games = sum(outcomes.values())
        if games:
            for outcome in ("win", "draw", "loss"):
                self.logger.record(f"charts/train_{outcome}_rate", outcomes[outcome] / games)

    def drop_rollout_in_progress(self) -> None:
        """Stopped while collecting a rollout: count its steps out, so that a checkpoint saved now holds the
        network trained on the steps it claims (the rollout, never trained on, is lost as a kill loses it)."""
        if self._collecting_from is not None:
            self.learner.model.num_timesteps = self._collecting_from


def _pool_bytes(pool: OpponentPool) -> bytes:
    buffer = io.BytesIO()
    th.save(pool.state_dict(), buffer)
    return buffer.getvalue()
