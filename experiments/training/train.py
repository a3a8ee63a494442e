"""``quarto train``: self-play training, by the backend the config names.

Example usage::

    quarto train                                       # configs/default.yaml
    quarto train --config configs/long.yaml seed=3     # another config, one field overridden
    quarto train total_steps=20000 --out /tmp/run      # a tiny run in a chosen folder (also: --run-dir)
    quarto train --device auto                         # the network on the GPU where torch sees one
    quarto train --resume runs/default__0__20260101-120000   # continue a stopped or killed run
    quarto train --config configs/alphazero.yaml alphazero.workers=2   # self-play in 2 Ray actors (a local Ray)
    quarto train --config configs/alphazero.yaml alphazero.workers=8 --address auto   # on the Ray cluster of this node

This module is the command -- its arguments, the run folder of a new or resumed run, the checks before anything
is written, the lock -- and :data:`BACKENDS`, the table of the modules that train (MaskablePPO, RLlib's PPO,
AlphaZero), each with ``start(config, run_dir, resume)`` (reads only: a refused start writes nothing) and ``run(config,
run_dir, state)``; every run's life is :func:`experiments.training.loop.train_run`, built of the pieces of
:mod:`experiments.training.run`. The manual -- the run folder, the
checks, resuming, the lock, Ctrl-C -- is docs/training.md.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from pathlib import Path
from typing import Any, Protocol, cast

from agents.networks.checkpoints import CheckpointError, recording_code_version
from agents.networks.policy_value import DEVICES
from agents.storage.files import OutputPathError, atomic_write_bytes, remove_orphan_temporaries
from experiments.options import CommandParser, add_out_argument, add_progress_argument
from experiments.output import OutputError, add_overwrite_argument, claim_output
from experiments.run_folder import (
    FINAL_TABLE_FILE,
    code_version,
    command_line,
    default_run_folder,
    record_command,
)
from experiments.training.config import FIXED_ON_RESUME, ConfigError, TrainConfig, check_agents, describe_fields
from experiments.training.config_file import load_config, save_config
from experiments.training.ray_runtime import check_address, check_reachable, start_ray
from experiments.training.shipped_configs import DEFAULT_CONFIG
from quarto_env.checks import one_line, shortened
from quarto_env.errors import install_command
from quarto_env.extras import require as require_extra

BACKENDS = {
    ("ppo", "sb3"): "experiments.training.sb3_ppo",
    ("ppo", "rllib"): "experiments.training.rllib_ppo",
    ("alphazero", "torch"): "experiments.training.alphazero",
    ("alphazero", "jax"): "experiments.training.alphazero_jax",
}
"""The module that trains each ``(algorithm, backend)`` of the config (:class:`Backend`), imported by name when
its run starts: importing this module imports none of them."""
NEEDS_EXTRA = {("alphazero", "jax"): "jax"}
"""The extra a backend needs besides ``train`` (checked before anything is written: :func:`train`)."""
NEEDS_RAY = {("ppo", "rllib"): "ray.rllib"}
"""The part of Ray a backend needs (the ``ray`` extra), checked before anything is written: :func:`require_ray`;
alphazero needs Ray itself with ``workers`` (:func:`ray_module`)."""
RAY_INSTALL = install_command("ray")
RESUME_HELP = (
    f"On --resume, the overrides of {', '.join(FIXED_ON_RESUME)} are refused (the checkpoint fixes the "
    "network and the run); every other override (total_steps, learning_rate, batch_size, the opponents, the "
    "evaluations, ...) is applied from the resumed step on."
)


class Backend(Protocol):
    """What every module of :data:`BACKENDS` holds; the state between the two is the backend's own."""

    def start(self, config: TrainConfig, run_dir: Path, resume: bool) -> Any:
        """The learner, fresh or read from ``latest.zip`` and checked; reads only."""

    def run(self, config: TrainConfig, run_dir: Path, state: Any) -> Path:
        """Train from ``state`` up to ``total_steps``; the final checkpoint's path."""


# ---------------------------------------------------------------------------------------------------------
# Arguments and the run folder
# ---------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``quarto train``."""
    parser = CommandParser(
        prog="quarto train",
        description="Self-play training (MaskablePPO; algorithm: alphazero; backend: rllib); KEY=VALUE arguments "
        "override config fields.",
        epilog=RESUME_HELP,
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. total_steps=1e5")
    parser.add_argument("--config", type=Path, default=None, help="YAML config (default configs/default.yaml)")
    add_out_argument(
        parser,
        "--run-dir",
        type=Path,
        default=None,
        metavar="RUN_FOLDER",
        help="run folder (default runs/NAME__SEED__TIME)",
    )
    parser.add_argument(
        "--resume", type=Path, metavar="RUN_FOLDER", help="continue the run in RUN_FOLDER (overrides: see below)"
    )
    add_overwrite_argument(parser, "--out")
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default=None,
        help="where the network trains: the config field device (default cpu; auto is cuda when torch sees a GPU)",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="the Ray cluster of a run on Ray (backend rllib, or alphazero with workers >= 1): auto, HOST:PORT or "
        "ray://HOST:PORT (default: RAY_ADDRESS, else a local Ray)",
    )
    add_progress_argument(parser)
    parser.add_argument("--help-config", action="store_true", help="list every config field and exit")
    args = parser.parse_intermixed_args(argv)  # overrides before, between and after the options
    if args.device is not None:  # the flag is the override device=..., given last so that it wins
        args.overrides.append(f"device={args.device}")
    return args


def main(argv: list[str]) -> int:
    """Run ``quarto train ARGS``; returns the exit status (2 for a bad config, run folder or checkpoint, printed
    as one line)."""
    args = parse_args(argv)
    if args.help_config:
        print(describe_fields())
        return 0
    try:
        check_address(args.address)
        config, run_dir = resumed_run(args) if args.resume is not None else new_run(args)
        resume = args.resume is not None
        from experiments.training.run import RunFinished, hidden_progress  # here: the run machinery loads TensorBoard

        with hidden_progress(args.no_progress):
            try:
                train(
                    config,
                    run_dir,
                    resume=resume,
                    command=command_line("train", argv),
                    address=args.address,
                    overwrite=args.overwrite,
                )
            except RunFinished as finished:  # nothing to do, as asked: not an error
                print(f"quarto train: {finished}")
                return 0
    except (ConfigError, CheckpointError, OutputPathError) as exc:
        print(f"quarto train: {exc}", file=sys.stderr)
        return 2
    except OutputError as exc:  # the run folder refused (2), or a write that failed late (1)
        print(f"quarto train: {exc}", file=sys.stderr)
        return exc.status
    except TrainingInterrupted as stop:
        print(f"\nquarto train: interrupted; {stop.next_step()}", file=sys.stderr)
        return STATUS_INTERRUPTED
    return 0


STATUS_INTERRUPTED = 128 + 2
"""The exit status of a process stopped by ``SIGINT`` (2), Ctrl-C: as the ``quarto`` entry point's."""


class TrainingInterrupted(Exception):
    """Ctrl-C in :func:`train`, at any point: :meth:`next_step` says what the run folder holds and how to go on."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(str(run_dir))
        self.run_dir = run_dir

    def next_step(self) -> str:
        """What the run folder holds and the command that goes on from it
        (:func:`experiments.training.run.interrupted_story`)."""
        from experiments.training.run import interrupted_story  # here: the run machinery loads TensorBoard

        return interrupted_story(self.run_dir)


def new_run(args: argparse.Namespace) -> tuple[TrainConfig, Path]:
    """The config and the run folder of a new run (nothing written yet)."""
    config = load_config(args.config or DEFAULT_CONFIG, args.overrides)
    return config, args.out or default_run_folder(config.name, config.seed)


def resumed_run(args: argparse.Namespace) -> tuple[TrainConfig, Path]:
    """The config (the run's ``config.yaml`` with the overrides) and the folder of a resumed run."""
    if args.config is not None or args.out is not None:
        raise ConfigError("--resume takes the run's own config and folder: drop --config and --out")
    run_dir = args.resume
    if not (run_dir / "config.yaml").exists():  # one that is no regular file is refused as it is read
        raise ConfigError(f"{str(run_dir)!r} is not a run folder: it has no config.yaml")
    return load_config(run_dir / "config.yaml", args.overrides), run_dir


def require_ray(purpose: str, *modules: str) -> None:
    """Import ``modules`` (parts of Ray, or of the ``ray`` extra); :class:`ConfigError` naming ``purpose`` and
    the command that installs them if one is missing, so that a command without Ray stops before it writes."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            problem = f"{purpose} needs the ray extra ({one_line(exc)}): install it with {RAY_INSTALL}"
            raise ConfigError(problem) from None


def ray_module(config: TrainConfig) -> str | None:
    """The part of Ray the config's run needs, if any: RLlib for ``backend: rllib``, Ray for alphazero's workers."""
    if (config.algorithm, config.backend) in NEEDS_RAY:
        return NEEDS_RAY[config.algorithm, config.backend]
    return "ray" if config.alphazero.workers else None


def prepare_run_dir(config: TrainConfig, run_dir: Path, command: str) -> None:
    """Write the resolved config and append the command, with the code's version, to ``command.txt``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(run_dir / "config.yaml", save_config(config).encode())
    record_command(run_dir, command, history=True)


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------
def train(
    config: TrainConfig,
    run_dir: Path,
    resume: bool = False,
    command: str = "quarto train",
    address: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Train (or continue training) in ``run_dir`` with the config's backend; returns the final checkpoint's path.
    Everything is checked before anything is written: the libraries the backend needs (:func:`ray_module`), the
    Ray cluster at ``address`` (reachable, and joined before anything is written), the agents the config names,
    the folder (created if need be; one that holds a run is refused unless ``resume``, or ``overwrite`` which
    replaces that run once every check has passed), and on ``resume`` the checkpoint and the overrides (the
    backend's ``start``). The run folder and the TensorBoard line are printed once all of these have passed. The
    folder is held for the whole run (:func:`experiments.output.claim_output`: a second process is refused, a
    write that fails late is :class:`~experiments.output.OutputWriteError`), and every checkpoint records the
    code's version of the run's start. A resume of a run stopped before its first checkpoint trains it from
    step 0. Ctrl-C at any point raises :class:`TrainingInterrupted`, once the backend has saved the run to resume
    it (:func:`experiments.training.run.saved_on_interrupt`)."""
    try:
        return _train(config, run_dir, resume, command, address, overwrite)
    except KeyboardInterrupt:  # the backend has closed its progress bar on the way out
        raise TrainingInterrupted(run_dir) from None


def _train(
    config: TrainConfig, run_dir: Path, resume: bool, command: str, address: str | None, overwrite: bool
) -> Path:
    """:func:`train`, but for Ctrl-C."""
    needs_ray = ray_module(config)
    extra = NEEDS_EXTRA.get((config.algorithm, config.backend))
    if extra is not None:  # one line naming the extra (quarto_env.extras), before anything is written
        require_extra(extra, f"backend {config.backend}")
    if config.backend == "jax":  # the device JAX trains on, before the run folder is claimed
        from experiments.training.alphazero_jax import jax_device

        jax_device(config.device)
    if resume and overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces one: give one or the other")
    if needs_ray is not None:
        require_ray("backend rllib" if config.backend == "rllib" else "workers", needs_ray)
    elif address is not None:
        raise ConfigError(
            f"--address {address} is for a run on Ray: backend rllib, or algorithm alphazero with workers >= 1"
        )
    check_reachable(address)
    from experiments.training.run import announce_run, has_checkpoint, watch_compiles  # here: loads TensorBoard

    watch_compiles()  # first: the checks below may compile the game kernels, which takes a while: say so
    check_agents(config)
    claim = claim_output(
        run_dir,
        "run",
        option="run folder",
        overwrite=overwrite,
        resume=resume,
        holds_result=lambda folder: (folder / "config.yaml").exists(),
        resume_hint=f"quarto train --resume {shlex.quote(str(run_dir))}",
    )
    with claim as run, recording_code_version(code_version()):
        remove_orphan_temporaries(run_dir / "checkpoints")  # left by a process killed mid-write (the claim: run_dir's)
        backend = cast(Backend, importlib.import_module(BACKENDS[config.algorithm, config.backend]))
        from_start = resume and not has_checkpoint(run_dir)  # stopped before its first checkpoint
        if from_start and (run_dir / FINAL_TABLE_FILE).exists():  # got to its end: its checkpoints were removed
            raise CheckpointError(
                f"{shortened(str(run_dir))!r} has its final table but no checkpoint to resume from in checkpoints/; "
                "--overwrite trains it again from step 0"
            )
        state = backend.start(config, run_dir, resume and not from_start)
        started_ray = needs_ray is not None and start_ray(address)
        try:
            if config.backend == "rllib":  # once Ray is up (the GPUs may be on other nodes), before any file
                from experiments.training.rllib_ppo import check_gpus

                check_gpus(config)
            announce_run(run_dir)  # every check has passed: from here on, the run is on
            if from_start:
                print(f"resuming {run_dir} from step 0: it stopped before its first checkpoint", flush=True)
            run.replace_previous()  # --overwrite: the earlier run goes only now
            prepare_run_dir(config, run_dir, command)
            return backend.run(config, run_dir, state)
        finally:
            if started_ray:
                import ray

                ray.shutdown()
