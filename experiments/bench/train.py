"""``quarto bench train``: learner steps per second of a short training run.

Example usage::

    quarto bench train                       # the default config, against the reference setup
    quarto bench train --steps 200000 policy=mlp net_arch=[256,256]
    quarto bench train --profile prof.out    # cProfile of the measured run, for snakeviz or pstats

It trains the default config (plus any ``KEY=VALUE`` overrides) for ``--steps`` learner steps after one
warm-up rollout (compilation, allocation), with a full pool of snapshots and no evaluation or checkpoint, and
prints the learner steps per second split into collecting rollouts (games, opponents, inference) and PPO
updates. The *reference*, measured in the same run, is the baseline setup the slots network was first measured
against: an MLP with layers [128, 128] on the tactical planes, with the same games and opponents. Timings on a
shared machine are noisy: compare within a run.
"""

from __future__ import annotations

import cProfile
import time
from pathlib import Path

import torch as th
from rich.console import Console
from rich.table import Table
from stable_baselines3.common.callbacks import BaseCallback

from agents.storage.files import atomic_write
from experiments.options import CommandParser, add_integer_argument
from experiments.output import add_overwrite_argument, claim_if_asked
from experiments.training.config import MAX_STEPS, ConfigError, TrainConfig
from experiments.training.config_file import load_config
from experiments.training.sb3_ppo import build_model
from experiments.training.selfplay import OpponentPool, SelfPlayVecEnv
from experiments.training.shipped_configs import DEFAULT_CONFIG

PROG = "quarto bench train"
REFERENCE = ["policy=mlp", "net_arch=[128,128]", "observation=tactical"]


class RolloutTimer(BaseCallback):
    """Accumulates the wall time spent collecting rollouts; the rest of ``learn`` is PPO updates."""

    def __init__(self) -> None:
        super().__init__()
        self.rollout_seconds = 0.0
        self._start = 0.0

    def _on_rollout_start(self) -> None:
        self._start = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.rollout_seconds += time.perf_counter() - self._start

    def _on_step(self) -> bool:
        return True


def measure(config: TrainConfig, steps: int, profile: Path | None = None) -> dict[str, float]:
    """Steps per second of ``steps`` learner steps with ``config`` (after a warm-up rollout)."""
    th.set_num_threads(config.torch_threads)
    variant = config.variant
    pool = OpponentPool(variant, config.observation, config.ppo.opponents, config.ppo.max_snapshots, config.seed)
    env = SelfPlayVecEnv(variant, config.num_games, config.observation, pool, config.seed)
    model = build_model(config, variant, env)
    for _ in range(config.ppo.max_snapshots):  # a full pool, as after the first max_snapshots snapshots of a run
        pool.add_snapshot(model.policy, 0)
    rollout = config.num_games * config.ppo.n_steps
    model.learn(rollout)
    timer = RolloutTimer()
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    model.learn(steps, callback=timer, reset_num_timesteps=False)
    if profiler and profile:  # the profiler is made only with a profile path
        profiler.disable()
        atomic_write(profile, profiler.dump_stats)
    seconds = time.perf_counter() - start
    done = model.num_timesteps - rollout
    return {
        "steps": done,
        "seconds": seconds,
        "steps_per_s": done / seconds,
        "rollout_share": timer.rollout_seconds / seconds,
    }


def main(argv: list[str]) -> int:
    """Run ``quarto bench train``."""
    parser = CommandParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML config (default: configs/default.yaml)")
    add_integer_argument(parser, "--steps", 131072, "learner steps to measure", fewest=1, most=MAX_STEPS)
    parser.add_argument("--no-reference", action="store_true", help="skip the reference MLP measurement")
    parser.add_argument("--profile", type=Path, metavar="FILE", help="write a cProfile of the measured run to FILE")
    add_overwrite_argument(parser, "--profile")
    args = parser.parse_intermixed_args(argv)  # overrides before, between and after the options
    try:  # both configs read before anything is measured: a bad override is told at once
        configs = {"config": load_config(args.config, args.overrides)}
        if not args.no_reference:
            configs["reference"] = load_config(args.config, [*args.overrides, *REFERENCE])
    except ConfigError as error:
        parser.error(str(error))

    with claim_if_asked(args.profile, "file", option="--profile", overwrite=args.overwrite, prog=PROG):
        rows = {
            name: measure(config, args.steps, args.profile if name == "config" else None)
            for name, config in configs.items()
        }
    Console(width=160).print(results_table(rows, args.steps, args.overrides))
    return 0


def results_table(rows: dict[str, dict[str, float]], steps: int, overrides: list[str]) -> Table:
    """The measurements of :func:`measure` by setup (``config``, and ``reference`` unless it was skipped) as a
    table; without the reference, its ratio column shows a dash."""
    table = Table(title=f"learner steps/s, {steps:,} steps after a warm-up rollout (torch threads as configured)")
    for column in ("setup", "steps/s", "seconds", "collecting rollouts", "PPO updates", "ratio to reference"):
        table.add_column(column, justify="left" if column == "setup" else "right")
    for name, row in rows.items():
        ratio = f"{row['steps_per_s'] / rows['reference']['steps_per_s']:.2f}" if "reference" in rows else "-"
        table.add_row(
            f"{name} ({' '.join(overrides + (REFERENCE if name == 'reference' else [])) or 'as in the file'})",
            f"{row['steps_per_s']:,.0f}",
            f"{row['seconds']:.1f}",
            f"{row['rollout_share']:.0%}",
            f"{1 - row['rollout_share']:.0%}",
            ratio,
        )
    return table
