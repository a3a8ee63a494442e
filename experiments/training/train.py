"""``quarto train``: self-play training with MaskablePPO against a growing pool of past selves.

Example usage::

    quarto train                                       # configs/default.yaml
    quarto train --config configs/long.yaml seed=3     # another config, one field overridden
    quarto train total_steps=20000 --run-dir /tmp/run  # a tiny run in a chosen folder
    quarto train --resume runs/default__0__20260101-120000   # continue a stopped or killed run

A run folder holds ``config.yaml`` (the resolved config), ``command.txt`` (every command that ran in it),
``tb/`` (TensorBoard events), ``checkpoints/`` (``latest.zip``, ``step_<N>.zip``, ``best.zip`` by evaluation
score, ``final.zip``), ``final_eval.json`` (the final table) and ``.lock``. The script reads top to bottom:
arguments, run folder, model and opponents, the training callback (snapshots, evaluation, checkpoints,
TensorBoard), then the final evaluation.

Nothing is written before everything is checked: the config (``experiments.training.config``), the run folder (a
folder that can be written), every agent the config names, and on ``--resume`` the checkpoint -- its metadata,
its rules, observation and network against the config, its opponent pool -- and the overrides. A field of
``experiments.training.config.FIXED_ON_RESUME`` (``name``, ``seed``, ``variant``, ``observation``, ``policy``,
``net_arch``) cannot change on ``--resume``; every other override is applied. One process at a time trains in
a run folder: it holds an exclusive lock on ``.lock`` for the run's life (the kernel releases it when the
process ends, also by ``kill -9``), and a second one is refused. Starting, it removes the temporary files that
a process killed mid-write left. A bad config, folder or checkpoint prints one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import io
import json
import os
import shlex
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from rich.console import Console
from rich.table import Table
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Image, TensorBoardOutputFormat, configure
from stable_baselines3.common.utils import set_random_seed
from tqdm import tqdm

from agents.checkpoints import CheckpointError, read_metadata, read_weights
from agents.ppo import PPOAgent, load_policy, load_training_state, policy_setup, save_checkpoint
from experiments.arena.grading import PositionValues, grade_agent, sample_positions
from experiments.training.config import (
    FIXED_ON_RESUME,
    SEED_LIMIT,
    ConfigError,
    TrainConfig,
    check_agents,
    check_unchanged_on_resume,
    describe_fields,
    load_config,
    markdown_table,
    save_config,
)
from experiments.training.selfplay import (
    SEAT_NAMES,
    EvalResult,
    Opponent,
    OpponentPool,
    SelfPlayVecEnv,
    evaluate,
    learner_opponent,
)
from quarto_env.checks import (
    OutputPathError,
    atomic_write_bytes,
    checked_number,
    one_line,
    output_folder,
    remove_orphan_temporaries,
)
from quarto_env.core import State, Variant
from quarto_env.render import render_image

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"
RUNS_DIR = Path("runs")
POOL_ENTRY = "pool.pt"
"""The extra checkpoint entry holding the opponent pool (in ``latest.zip`` and ``final.zip``)."""
LOCK_FILE = ".lock"
"""The file in a run folder that the training process holding the folder keeps locked."""
RESUME_HELP = (
    f"On --resume, the overrides of {', '.join(FIXED_ON_RESUME)} are refused (the checkpoint fixes the "
    "network and the run); every other override (total_steps, learning_rate, batch_size, the opponents, the "
    "evaluations, ...) is applied from the resumed step on."
)


class RunInUseError(RuntimeError):
    """A run folder that another training process holds."""


# ---------------------------------------------------------------------------------------------------------
# Arguments and the run folder
# ---------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``quarto train``."""
    parser = argparse.ArgumentParser(
        prog="quarto train",
        description="Self-play training (MaskablePPO; algorithm: alphazero; backend: rllib); KEY=VALUE arguments "
        "override config fields.",
        epilog=RESUME_HELP,
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. total_steps=1e5")
    parser.add_argument("--config", type=Path, default=None, help="YAML config (default configs/default.yaml)")
    parser.add_argument("--run-dir", type=Path, default=None, help="run folder (default runs/<name>__<seed>__<time>)")
    parser.add_argument(
        "--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR (overrides: see below)"
    )
    parser.add_argument("--help-config", action="store_true", help="list every config field and exit")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run ``quarto train ARGS``; returns the exit status (2 for a bad config, run folder or checkpoint, printed
    as one line)."""
    args = parse_args(argv)
    if args.help_config:
        print(describe_fields())
        return 0
    try:
        config, run_dir = resumed_run(args) if args.resume is not None else new_run(args)
        train(config, run_dir, resume=args.resume is not None, command=shlex.join(["quarto", "train", *argv]))
    except (ConfigError, CheckpointError, OutputPathError, RunInUseError) as exc:
        print(f"quarto train: {exc}", file=sys.stderr)
        return 2
    return 0


def new_run(args: argparse.Namespace) -> tuple[TrainConfig, Path]:
    """The config and the run folder of a new run (nothing written yet)."""
    config = load_config(args.config or DEFAULT_CONFIG, args.overrides)
    run_dir = args.run_dir or RUNS_DIR / f"{config.name}__{config.seed}__{time.strftime('%Y%m%d-%H%M%S')}"
    return config, run_dir


def resumed_run(args: argparse.Namespace) -> tuple[TrainConfig, Path]:
    """The config (the run's ``config.yaml`` with the overrides) and the folder of a resumed run."""
    if args.config is not None or args.run_dir is not None:
        raise ConfigError("--resume takes the run's own config and folder: drop --config and --run-dir")
    run_dir = args.resume
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a run folder: it has no config.yaml")
    return load_config(run_dir / "config.yaml", args.overrides), run_dir


def checked_run_dir(run_dir: Path) -> Path:
    """``run_dir`` as a folder that can be written, created if need be; :class:`OutputPathError` otherwise."""
    try:
        return output_folder(run_dir, "run folder")
    except OutputPathError:
        raise
    except ValueError as exc:  # a path the OS refuses, e.g. with a NUL byte
        raise OutputPathError(f"run folder {str(run_dir)!r} is not a valid path: {one_line(exc)}") from None


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for this process: an exclusive ``flock`` on its :data:`LOCK_FILE`, released when the block
    ends or the process dies (also by ``kill -9``: a stale lock file blocks nobody). :class:`RunInUseError`
    naming the holder's process id if another process holds it."""
    with open(run_dir / LOCK_FILE, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            raise RunInUseError(
                f"run folder {str(run_dir)!r} is in use by another training process (pid {holder}): "
                "wait for it to end, or stop it"
            ) from None
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield


def prepare_run_dir(config: TrainConfig, run_dir: Path, command: str) -> None:
    """Write the resolved config and append the command to ``command.txt``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(run_dir / "config.yaml", save_config(config).encode())
    with open(run_dir / "command.txt", "a") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}  {command}\n")


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------
def train(config: TrainConfig, run_dir: Path, resume: bool = False, command: str = "quarto train") -> Path:
    """Train (or continue training) in ``run_dir``; returns the final checkpoint's path. Everything is checked
    before anything is written: the agents the config names, the folder (created if need be), and on ``resume``
    the checkpoint and the overrides (:func:`start`). The folder is held for the whole run (:func:`run_lock`)."""
    check_agents(config)
    checked_run_dir(run_dir)
    with run_lock(run_dir):
        for folder in (run_dir, run_dir / "checkpoints"):
            remove_orphan_temporaries(folder)  # left by a process killed mid-write; no other writes here now
        if not resume and (run_dir / "config.yaml").exists():
            raise ConfigError(f"{str(run_dir)!r} already holds a run: continue it with --resume, or pick another")
        if config.algorithm == "alphazero":
            from experiments.training import alphazero  # here: it imports this module

            trainer = alphazero.start(config, run_dir, resume)
            prepare_run_dir(config, run_dir, command)
            return alphazero.run(trainer, run_dir)
        if config.backend == "rllib":
            from experiments.training import rllib_ppo as rllib_train  # here: it imports this module

            begin = rllib_train.start(config, run_dir, resume)
            prepare_run_dir(config, run_dir, command)
            return rllib_train.run(config, run_dir, begin)
        learner = start(config, run_dir, resume)
        prepare_run_dir(config, run_dir, command)
        return run(config, run_dir, learner)


@dataclasses.dataclass
class Learner:
    """The learner and its world at the start of training: model, opponents and games, best score so far."""

    model: MaskablePPO
    pool: OpponentPool
    env: SelfPlayVecEnv
    best_score: float


def start(config: TrainConfig, run_dir: Path, resume: bool) -> Learner:
    """The learner, fresh, or restored from the run's ``latest.zip`` (:func:`check_resume` first). Reads only:
    a refused start leaves the run folder as it was."""
    th.set_num_threads(config.torch_threads)
    variant = config.resolved_variant()
    latest = run_dir / "checkpoints" / "latest.zip"
    metadata, pool_state = check_resume(config, latest) if resume else ({}, {})
    # A resumed run reseeds from its step count, so it does not replay the games it already saw.
    seed = (config.seed + int(metadata.get("num_timesteps", 0))) % SEED_LIMIT
    set_random_seed(seed)
    pool = OpponentPool(variant, config.observation, config.opponents, config.max_snapshots, config.seed)
    env = SelfPlayVecEnv(variant, config.num_games, config.observation, pool, seed)
    model = build_model(config, variant, env)
    if not resume:
        pool.add_snapshot(model.policy, 0)
        return Learner(model, pool, env, best_score=-1.0)
    # The checkpoint is read as data: weights, optimizer state and step count into the fresh model.
    load_training_state(model, latest, variant)
    _restore_pool(pool, pool_state, latest, model.policy)
    return Learner(model, pool, env, _best_score(metadata, latest))


def check_resume(config: TrainConfig, checkpoint: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata and the opponent pool of ``checkpoint``, once checked: a checkpoint of this rules variant,
    observation and network, saved with its pool, and overrides that change no field of ``FIXED_ON_RESUME``.
    :class:`CheckpointError` or :class:`ConfigError` otherwise."""
    metadata = read_metadata(checkpoint)
    trained_config = metadata.get("config")
    if not isinstance(trained_config, dict) or not {"name", "seed", "policy", "net_arch"} <= set(trained_config):
        raise CheckpointError(
            f"checkpoint {str(checkpoint)!r} records no training config (name, seed, policy, net_arch) in its "
            "quarto.json: it was not saved by quarto train"
        )
    check_unchanged_on_resume(config, metadata)
    return metadata, _read_pool_state(checkpoint)


def run(config: TrainConfig, run_dir: Path, learner: Learner) -> Path:
    """Train ``learner`` up to ``total_steps``, save ``final.zip`` and ``latest.zip``, and evaluate the final
    checkpoint; returns its path."""
    model, variant = learner.model, config.resolved_variant()
    if model.num_timesteps:
        print(f"resuming {run_dir} at step {model.num_timesteps:,} with {len(learner.pool.snapshots)} snapshots")
    # TensorBoard: one folder for the whole run, so a resumed run's curves continue where they stopped.
    model.set_logger(configure(str(run_dir / "tb"), ["tensorboard"]))
    callback = TrainingCallback(config, variant, run_dir, learner.pool, learner.env, learner.best_score)
    remaining = max(config.total_steps - model.num_timesteps, 0)
    if remaining:
        model.learn(remaining, callback=callback, reset_num_timesteps=False, log_interval=1)
    callback.close()
    final = run_dir / "checkpoints" / "final.zip"
    callback.save(model, final, with_pool=True)
    callback.save(model, run_dir / "checkpoints" / "latest.zip", with_pool=True)

    # The final table, from the final checkpoint as written on disk; also the last point of the eval curves.
    results = final_evaluation(config, variant, final, run_dir)
    for result in results:
        log_result(model.logger.record, result)
    model.logger.dump(model.num_timesteps)
    print_results(results, model.num_timesteps)
    print(f"\nfinal checkpoint: {final}\nagent spec: ppo:{final}")
    print(f"TensorBoard: tensorboard --logdir {run_dir / 'tb'}   (then open http://localhost:6006)")
    return final


def build_model(config: TrainConfig, variant: Variant, env: SelfPlayVecEnv) -> MaskablePPO:
    """A fresh MaskablePPO learner as the config describes."""
    policy_class, policy_kwargs = policy_setup(config.policy, variant, config.net_arch, config.observation)
    learning_rate: Any = config.learning_rate
    if config.lr_schedule == "linear":

        def learning_rate(progress_remaining: float) -> float:
            return config.learning_rate * progress_remaining

    return MaskablePPO(
        policy_class,
        env,
        learning_rate=learning_rate,
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef,
        vf_coef=config.vf_coef,
        max_grad_norm=config.max_grad_norm,
        policy_kwargs=policy_kwargs,
        seed=config.seed,
        device="cpu",
        verbose=0,
    )


class TrainingCallback(BaseCallback):
    """Adds snapshots to the pool, evaluates, checkpoints and logs, each on its own step interval."""

    def __init__(
        self,
        config: TrainConfig,
        variant: Variant,
        run_dir: Path,
        pool: OpponentPool,
        env: SelfPlayVecEnv,
        best_score: float,
    ) -> None:
        super().__init__()
        self.config = config
        self.variant = variant
        self.run_dir = run_dir
        self.pool = pool
        self.env = env
        self.best_score = best_score
        self.latest_eval: dict[str, float] = {}
        self._grading: tuple[list[State], PositionValues] | None = None
        self.progress: tqdm | None = None
        self._last_time = time.perf_counter()
        self._last_step = 0

    def _on_training_start(self) -> None:
        step = self.model.num_timesteps
        self._last_time, self._last_step = time.perf_counter(), step
        self.next_snapshot = _next_multiple(step, self.config.snapshot_every)
        self.next_eval = _next_multiple(step, self.config.eval_every)
        self.next_checkpoint = _next_multiple(step, self.config.checkpoint_every)
        self.writer().add_text("config", markdown_table(self.config), step)
        self.progress = tqdm(total=self.config.total_steps, initial=step, unit="step", unit_scale=True, smoothing=0.1)

    def _on_step(self) -> bool:
        step = self.model.num_timesteps
        assert self.progress is not None
        self.progress.update(step - self.progress.n)
        if step >= self.next_snapshot:
            self.pool.add_snapshot(self.learner.policy, step)
            self.next_snapshot = _next_multiple(step, self.config.snapshot_every)
        if step >= self.next_eval:
            self.evaluate()
            self.next_eval = _next_multiple(step, self.config.eval_every)
        if step >= self.next_checkpoint:
            self.save(self.learner, self.checkpoints / f"step_{step:09d}.zip", with_pool=False)
            self.save(self.learner, self.checkpoints / "latest.zip", with_pool=True)
            self.next_checkpoint = _next_multiple(step, self.config.checkpoint_every)
        return True

    def _on_rollout_end(self) -> None:
        # Learner steps per second since the previous rollout: collection, the PPO update and any evaluation.
        now, step = time.perf_counter(), self.model.num_timesteps
        self.logger.record("charts/SPS", (step - self._last_step) / max(now - self._last_time, 1e-9))
        self._last_time, self._last_step = now, step
        self.logger.record("charts/pool_size", len(self.pool.snapshots))
        episodes = self.model.ep_info_buffer
        if episodes:
            self.logger.record("charts/episode_reward", float(np.mean([e["r"] for e in episodes])))
            self.logger.record("charts/episode_length", float(np.mean([e["l"] for e in episodes])))
        outcomes = self.env.pop_outcomes()
        games = sum(outcomes.values())
        if games:
            for outcome in ("win", "draw", "loss"):
                self.logger.record(f"charts/train_{outcome}_rate", outcomes[outcome] / games)

    @property
    def learner(self) -> MaskablePPO:
        assert isinstance(self.model, MaskablePPO)
        return self.model

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"

    def writer(self) -> Any:
        """The TensorBoard writer behind SB3's logger (for text and images)."""
        for output in self.logger.output_formats:
            if isinstance(output, TensorBoardOutputFormat):
                return output.writer
        raise RuntimeError("the logger has no TensorBoard output")

    def evaluate(self) -> None:
        """Play the evaluation opponents in both seats; log, and keep the best checkpoint."""
        results = evaluate_all(self.learner.policy, self.config, self.variant, self.config.eval_games, self.config.seed)
        for result in results:
            log_result(self.logger.record, result)
        score = float(np.mean([r.score() for r in results]))
        self.logger.record("eval/score", score)
        # A picture of how one game ended (game 0 against the last opponent: the learner gave first).
        sample = results[len(self.config.eval_opponents) - 1]
        image = render_image(self.variant, sample.final_state, names=("learner", sample.opponent))
        self.logger.record("eval/final_board", Image(image, "HWC"), exclude=("stdout", "log", "json", "csv"))
        self.latest_eval = {f"{r.opponent}{'' if r.deterministic else ' (sampled)'}": r.score() for r in results}
        if self.progress is not None:
            scores: dict[str, list[str]] = {r.opponent: [] for r in results}
            for r in results:
                scores[r.opponent].append(f"{r.score():.2f}")
            self.progress.set_postfix_str(
                "eval argmax/sampled: " + " ".join(f"{opponent} {'/'.join(s)}" for opponent, s in scores.items())
            )
        if self.config.grade_positions:
            self.grade()
        if score > self.best_score:
            self.best_score = score
            self.save(self.learner, self.checkpoints / "best.zip", with_pool=False)

    def grade(self) -> None:
        """Grade the learner's decisions with the exact solver; the positions are sampled and solved once."""
        if self._grading is None:
            positions = sample_positions(self.variant, self.config.grade_positions, self.config.seed)
            self._grading = (positions, PositionValues(self.variant))
        positions, values = self._grading
        learner = PPOAgent.from_policy(self.learner.policy, self.variant, self.config.observation)
        report = grade_agent(learner, self.variant, positions, values)
        self.logger.record("eval/grade/value_lost", report.share_lost()[0])
        self.logger.record("eval/grade/value_lost_critical", report.critical()[0])
        for phase, (share, *_) in report.by_phase().items():
            self.logger.record(f"eval/grade/value_lost_{phase}", share)
        self.latest_eval["value lost"] = report.share_lost()[0]

    def save(self, model: MaskablePPO, path: Path, with_pool: bool) -> None:
        """Checkpoint ``model`` (with the opponent pool when ``with_pool``) atomically at ``path``."""
        metadata = {
            "variant": self.variant.to_dict(),
            "observation": self.config.observation,
            "policy": self.config.policy,
            "config": self.config.to_dict(),
            "best_score": self.best_score,
            "latest_eval": self.latest_eval,
        }
        extras = {POOL_ENTRY: _pool_bytes(self.pool)} if with_pool else {}
        save_checkpoint(model, path, metadata, extras)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()


# ---------------------------------------------------------------------------------------------------------
# Evaluation tables and pictures
# ---------------------------------------------------------------------------------------------------------
def evaluate_all(
    policy: MaskableActorCriticPolicy, config: TrainConfig, variant: Variant, games: int, seed: int
) -> list[EvalResult]:
    """The learner against every evaluation opponent, ``games`` games each (half in each seat): first playing
    its most likely action, then sampling its policy. Against a deterministic opponent (minimax) the first
    repeats the same two games; the sampled policy plays varied ones."""
    return evaluate_players(
        lambda deterministic: learner_opponent(policy, config.observation, deterministic), config, variant, games, seed
    )


def evaluate_players(
    learner: Callable[[bool], Opponent], config: TrainConfig, variant: Variant, games: int, seed: int
) -> list[EvalResult]:
    """:func:`evaluate_all` for any learner: ``learner(deterministic)`` is the player, its most likely action
    (``True``) or sampling its policy (``False``)."""
    return [
        evaluate(
            learner(deterministic),
            spec,
            variant,
            games,
            seed + i,
            opening_plies=config.eval_opening_plies,
        )
        for deterministic in (True, False)
        for i, spec in enumerate(config.eval_opponents)
    ]


def log_result(record: Any, result: EvalResult) -> None:
    """Record win/draw/loss rates and the score against one opponent, per seat and overall, under ``eval/``
    (most likely action) or ``eval_sampled/``."""
    prefix = "eval" if result.deterministic else "eval_sampled"
    name = result.opponent.replace(":", "_").replace("=", "").replace(",", "_")
    for seat, seat_name in enumerate(SEAT_NAMES):
        for key, value in result.rates(seat).items():
            record(f"{prefix}/{name}/{seat_name}/{key}", value)
    record(f"{prefix}/{name}/score", result.score())


def final_evaluation(config: TrainConfig, variant: Variant, checkpoint: Path, run_dir: Path) -> list[EvalResult]:
    """Evaluate the checkpoint file against every evaluation opponent; write ``final_eval.json``."""
    loaded = load_policy(checkpoint, variant)
    results = evaluate_all(loaded.policy, config, variant, config.final_eval_games, config.seed + 1000)
    write_final_eval(run_dir, checkpoint, loaded.num_timesteps, results)
    return results


def write_final_eval(run_dir: Path, checkpoint: Path, steps: int, results: list[EvalResult]) -> None:
    """Write the final table to ``final_eval.json``."""
    summary = {
        "checkpoint": str(checkpoint),
        "num_timesteps": steps,
        "results": [
            {
                "opponent": r.opponent,
                "policy": r.playing,
                "games": r.num_games,
                "score": r.score(),
                "wins_draws_losses_by_seat": r.counts,
            }
            for r in results
        ],
    }
    atomic_write_bytes(run_dir / "final_eval.json", json.dumps(summary, indent=2).encode())


def print_results(results: list[EvalResult], steps: int) -> None:
    """The evaluation table: per opponent, learner policy and seat, wins/draws/losses and the score."""
    table = Table(
        title=f"final evaluation after {steps:,} learner steps",
        caption="score = (wins + draws/2) / games; learner: argmax = its most likely action, sampled = its policy, "
        "search N = the most visited action of N simulations",
    )
    for column in ("opponent", "learner", "games", "first W/D/L", "second W/D/L", "score"):
        table.add_column(column, justify="left" if column in ("opponent", "learner") else "right", no_wrap=True)
    for r in results:
        table.add_row(
            r.opponent,
            r.playing,
            str(r.num_games),
            "/".join(map(str, r.counts[0])),
            "/".join(map(str, r.counts[1])),
            f"{r.score():.3f}",
        )
    Console().print(table)


# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------
def _next_multiple(step: int, every: int) -> int:
    return (step // every + 1) * every


def _pool_bytes(pool: OpponentPool) -> bytes:
    buffer = io.BytesIO()
    th.save(pool.state_dict(), buffer)
    return buffer.getvalue()


def _read_pool_state(checkpoint: Path) -> dict[str, Any]:
    """The opponent pool saved in ``checkpoint`` (read as weights), checked for its shape."""
    with zipfile.ZipFile(checkpoint) as archive:  # read_metadata has opened it already
        if POOL_ENTRY not in archive.namelist():
            raise CheckpointError(
                f"checkpoint {str(checkpoint)!r} holds no opponent pool ({POOL_ENTRY}): it is a best.zip or "
                "step_N.zip, which plays as an agent but cannot be resumed. Resuming needs the run's latest.zip "
                "or final.zip"
            )
    state = read_weights(checkpoint, POOL_ENTRY)
    steps = state.get("steps") if isinstance(state, dict) else None
    weights = state.get("weights") if isinstance(state, dict) else None
    if not (
        isinstance(steps, list)
        and isinstance(weights, list)
        and len(steps) == len(weights) >= 1
        and all(type(step) is int and step >= 0 for step in steps)
        and all(isinstance(w, dict) for w in weights)
    ):
        raise CheckpointError(
            f"checkpoint {str(checkpoint)!r}: {POOL_ENTRY} holds no opponent pool (a mapping of 'steps' and "
            "'weights', one snapshot each)"
        )
    return state


def _restore_pool(
    pool: OpponentPool, state: dict[str, Any], checkpoint: Path, policy: MaskableActorCriticPolicy
) -> None:
    try:
        pool.load_state_dict(state, policy)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
        raise CheckpointError(
            f"checkpoint {str(checkpoint)!r}: {POOL_ENTRY} holds no opponent pool for this run ({one_line(exc)})"
        ) from exc


def _best_score(metadata: dict[str, Any], checkpoint: Path) -> float:
    """The best evaluation score the checkpoint records (-1 before the first evaluation)."""
    try:
        return checked_number(metadata.get("best_score", -1.0), "best_score", minimum=-1, maximum=1)
    except ValueError as exc:
        raise CheckpointError(
            f"checkpoint {str(checkpoint)!r} has invalid metadata in quarto.json: {one_line(exc)}"
        ) from exc
