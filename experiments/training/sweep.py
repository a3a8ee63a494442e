"""``quarto sweep``: many seeds (and settings) of one ``quarto train`` config on Ray Tune, then their statistics.

Example usage::

    quarto sweep configs/default.yaml --seeds 0 1 2                       # three seeds, one trial per free core
    quarto sweep configs/default.yaml --seeds 0 1 2 --set learning_rate=1e-4,3e-4 --set total_steps=5e5
    quarto sweep configs/default.yaml --seeds 0 1 2 3 --address auto    # on a running Ray cluster
    quarto sweep --resume runs/sweeps/default__20261201-040000           # finish an interrupted sweep

Each trial is an ordinary ``quarto train`` run folder under ``OUT/trials/``; ``--set KEY=V1,V2`` makes a grid
that every seed trains; the statistics over seeds (:mod:`experiments.training.sweep_stats`) go to
``results.md``/``.csv`` and ``curves.png``/``.csv``. Everything is checked before Ray starts (one line, exit 2);
Ctrl-C prints the command that resumes. The manual -- the folder, the statistics, interruptions, clusters and
placement groups -- is docs/scaling.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

from agents.storage.files import OutputPathError, atomic_write_bytes, input_file
from experiments.options import CommandParser, add_integer_argument, add_number_argument
from experiments.output import LOCK_FILE, OutputError, check_output_path, hold_lock, made_folders_removed_if_empty
from experiments.run_folder import FINAL_TABLE_FILE, RUNS_DIR, command_line, default_run_folder, record_command
from experiments.training.config import ConfigError, check_agents
from experiments.training.config_file import load_config
from experiments.training.ray_runtime import check_address, check_reachable, quiet_logger, start_ray
from experiments.training.shipped_configs import config_path
from experiments.training.sweep_stats import SeedRun, aggregate, markdown, read_final_eval
from experiments.training.train import require_ray
from quarto_env.checks import one_line
from quarto_env.errors import SweepError

MAX_CONCURRENT = 1024
"""The most ``--max-concurrent`` trials: as many as the largest Ray cluster's CPUs a config may ask for."""
SWEEP_FILE = "sweep.json"
CONFIG_COPY = "config.yaml"
TRIALS = "trials"
"""The folder of the sweep's trials, one run folder each."""


# ---------------------------------------------------------------------------------------------------------
# Arguments: the grid of trials
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Trial:
    """One ``quarto train`` run of the sweep."""

    setting: str
    """The grid point, as ``KEY=VALUE`` pairs joined by spaces (``base`` when nothing is swept)."""
    seed: int
    overrides: tuple[str, ...]
    """The ``KEY=VALUE`` arguments of ``quarto train``, ``seed=S`` last."""

    @property
    def name(self) -> str:
        """Its run folder's name: the setting and seed, with only characters safe in a file name."""
        label = "" if self.setting == "base" else self.setting.replace(" ", "__") + "__"
        return re.sub(r"[^A-Za-z0-9._=+-]", "_", f"{label}seed={self.seed}")[:200]


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``quarto sweep``."""
    parser = CommandParser(
        prog="quarto sweep",
        description="Train one config over seeds (and a grid of --set values) on Ray Tune; aggregate the results.",
        epilog="Every trial is: quarto train --config CONFIG --out OUT/trials/NAME KEY=VALUE... seed=S",
    )
    parser.add_argument("config", nargs="?", type=Path, help="the YAML config of quarto train")
    parser.add_argument("--seeds", nargs="+", type=str, metavar="SEED", help="training seeds, e.g. 0 1 2")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a config field: one value overrides it, a comma list makes a grid (repeat for more fields)",
    )
    parser.add_argument(
        "--address", default=None, help="Ray cluster: auto, HOST:PORT or ray://HOST:PORT (default: a local Ray)"
    )
    parser.add_argument("--out", type=Path, default=None, help="output folder (default runs/sweeps/NAME__TIME)")
    parser.add_argument("--resume", type=Path, metavar="DIR", help="finish the interrupted sweep in DIR")
    concurrent = "trials at once (0: as many as the free CPUs allow)"
    add_integer_argument(parser, "--max-concurrent", 0, concurrent, fewest=0, most=MAX_CONCURRENT, metavar="N")
    cpus = "CPUs reserved per trial (default 1: training uses one torch thread)"
    add_number_argument(parser, "--cpus-per-trial", 1.0, cpus, metavar="N", above=0, maximum=1024)
    return parser.parse_args(argv)


def split_values(text: str) -> list[str]:
    """``1e-4,3e-4`` -> ``["1e-4", "3e-4"]``; commas inside brackets or braces stay in their value."""
    values, depth, current = [], 0, ""
    for char in text:
        depth += char in "[{"
        depth -= char in "]}"
        if char == "," and depth == 0:
            values.append(current)
            current = ""
        else:
            current += char
    return [*values, current]


def parse_sets(sets: list[str]) -> list[tuple[str, list[str]]]:
    """``["lr=1,2", "total_steps=5"]`` -> ``[("lr", ["1", "2"]), ("total_steps", ["5"])]``; :class:`SweepError`
    for a malformed one, a repeated key, an empty value or the seed (given by ``--seeds``)."""
    parsed: list[tuple[str, list[str]]] = []
    for item in sets:
        # The syntax of quarto train's KEY=VALUE: an opponents.SPEC key may itself hold '='.
        key, eq, text = item.rpartition("=") if item.startswith("opponents.") else item.partition("=")
        if not eq or not key or not text:
            raise SweepError(f"--set {item!r} must be KEY=VALUE or KEY=V1,V2,..., e.g. --set learning_rate=1e-4,3e-4")
        if key == "seed":
            raise SweepError("--set seed=...: the seeds are given by --seeds")
        if key in (k for k, _ in parsed):
            raise SweepError(f"--set {key}=... is given twice: give its values once, as a comma list")
        values = split_values(text)
        if "" in values:
            raise SweepError(f"--set {item!r} has an empty value; give KEY=V1,V2 with every value")
        if len(set(values)) < len(values):
            raise SweepError(f"--set {item!r} repeats a value")
        parsed.append((key, values))
    return parsed


def parse_seeds(seeds: list[str]) -> list[int]:
    """The ``--seeds``, as distinct integers (their range is the config's to check)."""
    try:
        parsed = [int(seed) for seed in seeds]
    except ValueError:
        raise SweepError(f"--seeds takes integers, got {' '.join(seeds)!r}") from None
    if len(set(parsed)) < len(parsed):
        raise SweepError(f"--seeds repeats a seed: {' '.join(seeds)}")
    return parsed


def plan_trials(sets: list[tuple[str, list[str]]], seeds: list[int]) -> list[Trial]:
    """Every grid point with every seed, the grid in the order given."""
    swept = [(key, values) for key, values in sets if len(values) > 1]
    fixed = [f"{key}={values[0]}" for key, values in sets if len(values) == 1]
    trials = []
    for point in itertools.product(*([f"{key}={v}" for v in values] for key, values in swept)):
        setting = " ".join(point) or "base"
        trials += [Trial(setting, seed, (*fixed, *point, f"seed={seed}")) for seed in seeds]
    return trials


def check_trials(config: Path, trials: list[Trial]) -> None:
    """Build every trial's config and agents, so that no trial fails on its settings once Ray runs;
    :class:`SweepError` naming the first bad one."""
    for trial in trials:
        try:
            check_agents(load_config(config, list(trial.overrides)))
        except ConfigError as exc:
            raise SweepError(f"trial {trial.name}: {exc}") from None


# ---------------------------------------------------------------------------------------------------------
# The sweep folder
# ---------------------------------------------------------------------------------------------------------
def check_ray(address: str | None) -> None:
    """The last check before a sweep writes: Ray and the statistics are installed (one line naming the ``ray``
    extra otherwise) and the Ray head at ``address``, if any, answers. After the command line's own checks, so
    that a bad command line is told as such with or without Ray."""
    require_ray("a sweep", "ray.tune", "scipy.stats")
    check_reachable(address)


def new_sweep(args: argparse.Namespace, argv: list[str]) -> tuple[str | Path, dict[str, Any]]:
    """The folder and settings of a new sweep, everything checked but the folder and Ray (:func:`main` checks them
    as it claims the folder, and that it holds no sweep under its lock); writes nothing (:func:`write_sweep` does,
    once Ray is up, so that a sweep that could not start leaves no ``sweep.json`` to refuse the same command
    again)."""
    if args.config is None or not args.seeds:
        raise SweepError(
            "give a config and --seeds (e.g. quarto sweep configs/default.yaml --seeds 0 1 2), or --resume"
        )
    args.config = config_path(args.config)  # a shipped config by its name too
    name = load_config(args.config).name  # a missing file is refused naming the shipped configs
    seeds, sets = parse_seeds(args.seeds), parse_sets(args.sets)
    check_trials(args.config, plan_trials(sets, seeds))
    out = args.out or default_run_folder(name, parent=RUNS_DIR / "sweeps")  # checked as the sweep claims it
    settings = {
        "config": str(args.config),
        "seeds": seeds,
        "sets": sets,
        "command": command_line("sweep", argv),
    }
    return out, settings


def refuse_a_second_sweep(out: Path) -> None:
    """:class:`SweepError` if ``out`` already holds a sweep: a new one is never written over it."""
    if (out / SWEEP_FILE).exists():
        raise SweepError(f"--out {out} already holds a sweep: `quarto sweep --resume {out}` finishes it")


def write_sweep(out: Path, settings: dict[str, Any]) -> None:
    """Write a new sweep's ``sweep.json`` and the copy of its config file, which the trials train on."""
    atomic_write_bytes(out / CONFIG_COPY, Path(settings["config"]).read_bytes())
    atomic_write_bytes(out / SWEEP_FILE, json.dumps(settings, indent=2).encode())


def resumed_sweep(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The folder and settings of the sweep in ``args.resume``; refuses options that would change its trials."""
    out = args.resume
    given = [
        flag
        for flag, value in (("CONFIG", args.config), ("--seeds", args.seeds), ("--set", args.sets), ("--out", args.out))
        if value
    ]
    if given:
        raise SweepError(f"--resume {out} takes the sweep's own settings: drop {', '.join(given)}")
    if (out / SWEEP_FILE).exists():  # a pipe or a folder in its place: refused before it is read
        input_file(out / SWEEP_FILE, "--resume's sweep file", SweepError)
    try:
        settings = json.loads((out / SWEEP_FILE).read_text(encoding="utf-8"))
        sets = [(str(key), [str(v) for v in values]) for key, values in settings["sets"]]
        settings = {**settings, "seeds": [int(s) for s in settings["seeds"]], "sets": sets}
    except FileNotFoundError:
        raise SweepError(f"--resume {out}: no {SWEEP_FILE} there, so no sweep to finish") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SweepError(f"--resume {out}: {SWEEP_FILE} cannot be read: {one_line(exc)}") from None
    except (ValueError, KeyError, TypeError):  # JSON of another shape: what the error says would only puzzle
        raise SweepError(
            f"--resume {out}: {SWEEP_FILE} is not a sweep's settings (an object with its config, seeds and sets, "
            "as quarto sweep writes it)"
        ) from None
    check_ray(args.address)
    check_output_path(out, "run", "--resume")
    return out, settings


# ---------------------------------------------------------------------------------------------------------
# Running the trials on Ray Tune
# ---------------------------------------------------------------------------------------------------------
def run_trial(params: dict[str, Any]) -> None:
    """Ray Tune's trainable: ``quarto train`` in the trial's run folder, new or resumed; reports the final
    scores. Its console output goes to the run folder's ``train.log``."""
    from ray import tune

    from experiments.training import train

    run_dir, config = Path(params["run_dir"]), params["config"]
    if not (run_dir / FINAL_TABLE_FILE).exists():
        resume = (run_dir / "config.yaml").exists()  # a trial that an interruption stopped
        if resume and not (run_dir / "checkpoints" / "latest.zip").exists():
            (run_dir / "config.yaml").unlink()  # stopped before its first checkpoint: nothing to resume, start again
            resume = False
        argv = ["--resume", str(run_dir)] if resume else ["--config", config, "--out", str(run_dir)]
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(run_dir / "train.log", "a") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            status = train.main(argv + ([] if resume else params["overrides"]))
        if status:
            raise RuntimeError(f"quarto train exited with status {status}: see {run_dir / 'train.log'}")
    scores = {f"{r['opponent']} ({r['policy']})": r["score"] for r in read_final_eval(run_dir)}
    tune.report(scores)


def trial_trainable(params: dict[str, Any]) -> None:
    """The function Ray Tune runs: the trial its grid point names."""
    run_trial(params["trial"])


def trial_resources(params: dict[str, Any], cpus_per_trial: float) -> Any:
    """The placement group of a trial: its own bundle (``--cpus-per-trial`` CPUs), and for the rllib backend the
    bundles of its env runners and learners, as RLlib lays them out (env runner ``i`` takes bundle ``i`` of the
    placement group it runs in: without them, a trial with env runners fails)."""
    from ray import tune

    config = load_config(params["trial"]["config"], params["trial"]["overrides"])
    if config.backend != "rllib":
        return tune.PlacementGroupFactory([{"CPU": cpus_per_trial}])
    from experiments.training.rllib_ppo import resource_bundles

    driver, *actors = resource_bundles(config)
    return tune.PlacementGroupFactory([{**driver, "CPU": max(cpus_per_trial, driver.get("CPU", 0))}, *actors])


def run_sweep(out: Path, settings: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Run (or finish) every trial on Ray Tune, which this process is connected to; the names of the trials that
    failed. Tune's own messages on an interruption (its ``Tuner.restore`` hint) are silenced: ``main`` says how to
    resume."""
    from ray import tune

    trials = plan_trials(settings["sets"], settings["seeds"])
    storage = (out / "tune").resolve()
    trainable = tune.with_resources(
        trial_trainable, functools.partial(trial_resources, cpus_per_trial=args.cpus_per_trial)
    )
    if tune.Tuner.can_restore(storage / "sweep"):
        tuner = tune.Tuner.restore(str(storage / "sweep"), trainable, resume_errored=True)
    else:
        space = {
            "trial": tune.grid_search(
                [
                    {
                        "name": t.name,
                        "run_dir": str((out / TRIALS / t.name).resolve()),
                        "config": str((out / CONFIG_COPY).resolve()),
                        "overrides": list(t.overrides),
                    }
                    for t in trials
                ]
            )
        }
        tuner = tune.Tuner(
            trainable,
            param_space=space,
            tune_config=tune.TuneConfig(
                max_concurrent_trials=args.max_concurrent or None,
                trial_name_creator=lambda trial: trial.config["trial"]["name"],
                trial_dirname_creator=lambda trial: trial.config["trial"]["name"],
            ),
            run_config=tune.RunConfig(name="sweep", storage_path=str(storage), verbose=1),
        )
    with quiet_logger("ray.tune.tune"):  # its warnings on an interruption: a Tuner.restore hint, not our command
        results = tuner.fit()
    outcomes = [results[i] for i in range(len(results))]  # a ResultGrid is indexed, not iterated
    return sorted((r.config or {})["trial"]["name"] for r in outcomes if r.error is not None)


# ---------------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------------
def main(argv: list[str]) -> int:
    """Run ``quarto sweep ARGS``; returns the exit status: 2 for bad settings, 1 if a trial failed, 130 if the sweep
    was interrupted (Ctrl-C) before every trial finished."""
    args = parse_args(argv)
    try:
        check_address(args.address)
        given, settings = resumed_sweep(args) if args.resume is not None else new_sweep(args, argv)
        # A new sweep refused or stopped before it wrote its settings leaves no empty folders behind.
        with made_folders_removed_if_empty(Path(given)):
            out = Path(given)
            if args.resume is None:
                out = check_output_path(given, "run")
                check_ray(args.address)  # the last check before a sweep writes (a resumed sweep's is done)
            # One process at a time drives a sweep folder, results included; a second is refused, naming the first.
            with hold_lock(out / LOCK_FILE, f"sweep folder {str(out)!r}"):
                if args.resume is None:
                    refuse_a_second_sweep(out)  # under the lock: another sweep may have started it a moment ago
                return _sweep(out, settings, args, argv)
    except (SweepError, ConfigError, OutputPathError, OutputError) as exc:
        print(f"quarto sweep: {exc}", file=sys.stderr)
        return exc.status if isinstance(exc, OutputError) else 2


def _sweep(out: Path, settings: dict[str, Any], args: argparse.Namespace, argv: list[str]) -> int:
    """Run the trials of the claimed ``out`` and report them; the exit status."""
    try:
        failed = _run_on_ray(out, settings, args, argv)
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside Tune's run (which catches the first)
        failed = []
    if not (out / SWEEP_FILE).exists():
        print("quarto sweep: interrupted before the sweep started; nothing was run", file=sys.stderr)
        return 130
    return _report(out, plan_trials(settings["sets"], settings["seeds"]), failed)


def _run_on_ray(out: Path, settings: dict[str, Any], args: argparse.Namespace, argv: list[str]) -> list[str]:
    """Connect to Ray, then write the sweep's files (a new sweep's ``sweep.json`` only now that Ray is up) and run
    the trials; the names of those that failed."""
    import ray

    try:
        start_ray(args.address)
        config = Path(settings["config"]) if args.resume is None else out / CONFIG_COPY
        check_trial_gpus(config, plan_trials(settings["sets"], settings["seeds"]))
        if args.resume is None:
            write_sweep(out, settings)
        record_command(out, command_line("sweep", argv), history=True)
        return run_sweep(out, settings, args)
    finally:
        ray.shutdown()  # also after a Ctrl-C inside ray.init: a process that exits with Ray half up can crash


def check_trial_gpus(config: Path, trials: list[Trial]) -> None:
    """Once Ray is up: :class:`SweepError` naming the first rllib trial whose learners ask for more GPUs than the
    cluster has (Tune would leave it pending for ever)."""
    for trial in trials:
        trial_config = load_config(config, list(trial.overrides))
        if trial_config.backend == "rllib":
            from experiments.training.rllib_ppo import check_gpus

            try:
                check_gpus(trial_config)
            except ConfigError as exc:
                raise SweepError(f"trial {trial.name}: {exc}") from None


def _report(out: Path, trials: list[Trial], failed: list[str]) -> int:
    """Aggregate the finished trials (no results files while none has finished), print the table and one line on
    what failed or is unfinished; the exit status."""
    unfinished = [t.name for t in trials if not (out / TRIALS / t.name / FINAL_TABLE_FILE).exists()]
    if len(unfinished) < len(trials):
        rows, _ = aggregate(out, [SeedRun(t.setting, t.seed, out / TRIALS / t.name) for t in trials])
        print(markdown(rows))
        print(f"sweep folder: {out}   (results.csv, results.md, curves.csv, curves.png; trials/ holds the run folders)")
        print(f"TensorBoard: tensorboard --logdir {out / TRIALS}")
    resume = f"`quarto sweep --resume {out}` finishes them"
    if failed:
        print(
            f"quarto sweep: {len(failed)} trial(s) failed: {', '.join(failed)}; see their train.log; {resume}",
            file=sys.stderr,
        )
    elif unfinished:
        print(f"quarto sweep: interrupted with {len(unfinished)} trial(s) unfinished; {resume}", file=sys.stderr)
    return 1 if failed else 130 if unfinished else 0
