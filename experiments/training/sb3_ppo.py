"""``quarto train``'s MaskablePPO backend (``algorithm: ppo``, ``backend: sb3``): self-play against a growing pool
of past selves.

The learner is sb3-contrib's MaskablePPO on :class:`experiments.training.selfplay.SelfPlayVecEnv`:
``num_games`` games side by side in this process, each against an opponent drawn from an
:class:`~experiments.training.selfplay.OpponentPool` -- frozen snapshots of the learner and baseline agents,
with the config's weights. The module reads top to bottom: :func:`start` (a fresh learner, or the one of
``latest.zip``), :func:`run` (MaskablePPO's loop, into which :class:`TrainingCallback` adds the snapshots,
evaluations and checkpoints on the run's :class:`~experiments.training.run.Schedule`, and the TensorBoard
charts of every rollout), then the end of the run (:func:`experiments.training.run.finish_run`).

PPO trains whole rollouts of ``num_games * n_steps`` learner steps, so a run stops at the first multiple of a
rollout at or past ``total_steps`` (it says so before training when that is further). The scheduled tasks run
between two rollouts, where the network has been updated on every step so far: a snapshot, an evaluation or a
checkpoint at step ``N`` holds the network trained on ``N`` steps (the first, at step 0, evaluates the untrained
one), and the evaluations are written to TensorBoard at that step at once.

Checkpoints are stable-baselines3's zip with the project's ``quarto.json`` (:mod:`agents.ppo`); ``latest.zip``
and ``final.zip`` also hold the opponent pool (``pool.pt``). ``ppo:RUN_FOLDER`` plays ``best.zip``. On
``--resume`` the learner is rebuilt from the config and given the checkpoint's weights, optimizer state, step
count and pool, read as data.
"""

from __future__ import annotations

import dataclasses
import io
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat, make_output_format
from stable_baselines3.common.utils import set_random_seed
from tqdm import tqdm

from agents.networks.checkpoints import CheckpointError, CheckpointHeader
from agents.networks.policy_value import resolve_device
from agents.ppo import PPOAgent, load_policy, load_training_state, policy_setup, save_checkpoint
from experiments.evaluation.log import EvaluationLog
from experiments.training.config import TrainConfig
from experiments.training.run import (
    POOL_ENTRY,
    Checkpoints,
    Schedule,
    describe_run,
    evaluation_plan,
    finish_run,
    progress_bar,
    read_resume_point,
    run_seed,
    saved_on_interrupt,
    stopping_step,
)
from experiments.training.selfplay import OpponentPool, SelfPlayVecEnv, policy_players
from quarto_env.checks import one_line
from quarto_env.core import Variant
from quarto_env.render import render_image


@dataclasses.dataclass
class Learner:
    """The learner and its world at the start of training: model, opponents and games, best score so far."""

    model: MaskablePPO
    pool: OpponentPool
    env: SelfPlayVecEnv
    best_score: float


def start(config: TrainConfig, run_dir: Path, resume: bool) -> Learner:
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
        return Learner(model, pool, env, best_score=-1.0)
    # The checkpoint is read as data: weights, optimizer state and step count into the fresh model.
    load_training_state(model, resumed.checkpoint, variant, resumed.metadata)
    if resumed.pool is None:  # a checkpoint of the network alone (latest.zip was damaged): the pool starts with it
        pool.add_snapshot(model.policy, resumed.steps)
        return Learner(model, pool, env, resumed.best_score)
    try:
        pool.load_state_dict(resumed.pool, model.policy)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
        raise CheckpointError(
            f"checkpoint {str(resumed.checkpoint)!r}: {POOL_ENTRY} holds no opponent pool for this run "
            f"({one_line(exc)})"
        ) from exc
    return Learner(model, pool, env, resumed.best_score)


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


def run(config: TrainConfig, run_dir: Path, learner: Learner) -> Path:
    """Train ``learner`` up to ``total_steps``, then end the run (:func:`experiments.training.run.finish_run`);
    returns the final checkpoint's path."""
    model = learner.model
    if model.num_timesteps:
        print(f"resuming {run_dir} at step {model.num_timesteps:,} with {len(learner.pool.snapshots)} snapshots")
    # TensorBoard: one folder for the whole run, so a resumed run's curves continue where they stopped.
    model.set_logger(TensorBoardLogger(run_dir / "tb"))
    callback = TrainingCallback(config, run_dir, learner)
    remaining = max(config.total_steps - model.num_timesteps, 0)
    with saved_on_interrupt(callback.checkpoints):  # Ctrl-C: latest.zip, less a rollout being collected
        try:
            if remaining:
                model.learn(remaining, callback=callback, reset_num_timesteps=False, log_interval=1)
        except KeyboardInterrupt:
            callback.drop_rollout_in_progress()
            raise
        finally:  # also on Ctrl-C: the bar must not redraw under quarto train's message
            callback.close()
    final = finish_run(
        config,
        callback.checkpoints,
        model.num_timesteps,
        lambda checkpoint: policy_players(load_policy(checkpoint, callback.variant).policy, callback.kind),
        callback.record,
        f"ppo:{callback.checkpoints.final}",
    )
    model.logger.dump(model.num_timesteps)  # the last update's losses
    return final


SB3_TAGS = {
    "train/policy_gradient_loss": "losses/policy_loss",
    "train/clip_fraction": "losses/clipfrac",
    "train/learning_rate": "charts/learning_rate",
    "train/n_updates": "charts/n_updates",
    "train/clip_range": "charts/clip_range",
}
"""MaskablePPO's ``train/`` scalars filed under another tag: the update's figures go to ``losses/``, the group
of every backend (CleanRL's), under the names the other backends give them; the rest of ``train/`` to
``losses/`` with SB3's name (``entropy_loss`` is minus the entropy), the schedule's values to ``charts/``."""


class TensorBoardLogger(Logger):
    """stable-baselines3's logger writing to TensorBoard in ``folder``, MaskablePPO's ``train/`` scalars renamed
    by :data:`SB3_TAGS` (runs before 2026-12-05 have them under ``train/``)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        super().__init__(str(folder), [make_output_format("tensorboard", str(folder))])

    def record(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        if key.startswith("train/"):
            key = SB3_TAGS.get(key, "losses/" + key.removeprefix("train/"))
        super().record(key, value, exclude)


class TrainingCallback(BaseCallback):
    """MaskablePPO's hook into the run: on the schedule, adds snapshots to the pool, evaluates and checkpoints;
    logs every rollout's charts."""

    def __init__(self, config: TrainConfig, run_dir: Path, learner: Learner) -> None:
        super().__init__()
        self.config = config
        self.variant = config.variant
        self.kind = config.observation
        self.learner = learner
        self.evaluations = EvaluationLog(
            evaluation_plan(config),
            self.variant,
            self.record,
            learner.best_score,
            lambda: {"": self.learner_agent()},
            tensorboard=lambda: (self.writer(), self.learner.model.num_timesteps),
        )
        self.checkpoints = Checkpoints(run_dir, self.save)
        step = learner.model.num_timesteps
        self.schedule = Schedule(config, step)
        self.progress: tqdm | None = None
        self._last_time, self._last_step = time.perf_counter(), step
        self._collecting_from: int | None = None
        """The step at which the rollout being collected began; ``None`` between collection and the update."""

    def _on_training_start(self) -> None:
        step = self.learner.model.num_timesteps
        self._last_time = time.perf_counter()
        describe_run(self.writer(), self.config, step)
        rollout = self.config.num_games * self.config.ppo.n_steps
        stop = stopping_step(self.config, step, rollout, "PPO trains whole rollouts of num_games * n_steps = {leap}")
        self.progress = progress_bar(step, stop, "step")

    def _on_rollout_start(self) -> None:
        # Between two rollouts the network has been updated on every step so far, so the tasks due here see it as
        # trained to this step (before the first rollout: a fresh run's evaluation at step 0).
        model, step = self.learner.model, self.learner.model.num_timesteps
        self._collecting_from = step
        due = self.schedule.due(step)
        if "snapshot" in due:
            self.learner.pool.add_snapshot(model.policy, step)
        if "evaluation" in due:
            self.evaluate()
        if "checkpoint" in due:
            self.checkpoints.save_step(step)

    def _on_step(self) -> bool:
        assert self.progress is not None
        self.progress.update(self.learner.model.num_timesteps - self.progress.n)
        return True

    def _on_rollout_end(self) -> None:
        self._collecting_from = None  # collected whole: the update trains on it
        # Learner steps per second since the previous rollout: collection, the PPO update and any evaluation.
        now, step = time.perf_counter(), self.learner.model.num_timesteps
        self.logger.record("charts/SPS", (step - self._last_step) / max(now - self._last_time, 1e-9))
        self._last_time, self._last_step = now, step
        self.logger.record("charts/pool_size", len(self.learner.pool.snapshots))
        episodes = self.learner.model.ep_info_buffer
        if episodes:
            self.logger.record("charts/episode_reward", float(np.mean([e["r"] for e in episodes])))
            self.logger.record("charts/episode_length", float(np.mean([e["l"] for e in episodes])))
        outcomes = self.learner.env.pop_outcomes()
        games = sum(outcomes.values())
        if games:
            for outcome in ("win", "draw", "loss"):
                self.logger.record(f"charts/train_{outcome}_rate", outcomes[outcome] / games)

    def writer(self) -> Any:
        """The TensorBoard writer behind SB3's logger (for text, images and the evaluations)."""
        for output in self.learner.model.logger.output_formats:
            if isinstance(output, TensorBoardOutputFormat):
                return output.writer
        raise RuntimeError("the logger has no TensorBoard output")

    def evaluate(self) -> None:
        """Play the evaluation opponents in both seats; log, and keep the best checkpoint."""
        assert self.progress is not None
        players = policy_players(self.learner.model.policy, self.kind)
        results, improved = self.evaluations.evaluate(players, self.progress)
        # A picture of how one game ended (game 0 against the last opponent: the learner gave first).
        sample = results[len(self.config.eval_opponents) - 1]
        image = render_image(self.variant, sample.final_state, names=("learner", sample.opponent))
        self.writer().add_image("eval/final_board", image, self.learner.model.num_timesteps, dataformats="HWC")
        if improved:
            self.checkpoints.save_best()

    def record(self, key: str, value: float) -> None:
        """Write a scalar to TensorBoard at the learner's step, at once (SB3's logger would hold it to the end of
        the next rollout, and write it at that step)."""
        self.writer().add_scalar(key, value, self.learner.model.num_timesteps)

    def learner_agent(self) -> PPOAgent:
        """The learner's policy as an agent playing its most likely action, to grade."""
        return PPOAgent.from_policy(self.learner.model.policy, self.variant, self.kind)

    def save(self, path: Path, resumable: bool) -> None:
        """Checkpoint the model (with the opponent pool when ``resumable``) atomically at ``path``."""
        model = self.learner.model
        header = CheckpointHeader(self.variant, self.config.observation.name, model.num_timesteps)
        metadata = {
            "policy": self.config.policy,
            "config": self.config.to_dict(),
            **self.evaluations.checkpoint_fields(),
        }
        extras = {POOL_ENTRY: _pool_bytes(self.learner.pool)} if resumable else {}
        save_checkpoint(path, model, header, metadata, extras)

    def drop_rollout_in_progress(self) -> None:
        """Stopped while collecting a rollout: count its steps out, so that a checkpoint saved now holds the
        network trained on the steps it claims (the rollout, never trained on, is lost as a kill loses it)."""
        if self._collecting_from is not None:
            self.learner.model.num_timesteps = self._collecting_from

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()


def _pool_bytes(pool: OpponentPool) -> bytes:
    buffer = io.BytesIO()
    th.save(pool.state_dict(), buffer)
    return buffer.getvalue()
