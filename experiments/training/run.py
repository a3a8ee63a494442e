"""What every ``quarto train`` backend's run shares, written once: the schedule, the checkpoint set, the resume
checks, the evaluation logging and the end of the run.

A backend (:mod:`experiments.training.sb3_ppo`, :mod:`experiments.training.rllib_ppo`,
:mod:`experiments.training.alphazero`) owns its learner and its loop; around them every run reads alike, in
the order a run meets these pieces:

:func:`read_resume_point`
    a resumed run's ``checkpoints/latest.zip``, checked before anything is written: saved by ``quarto train``
    (its ``quarto.json`` records the training config), no field of ``FIXED_ON_RESUME`` changed, a valid best
    score, and the opponent pool (``pool.pt``) where the backend keeps one. :func:`run_seed` reseeds a resumed
    run from its step count, so that it does not replay the games it already saw.
:class:`Schedule`
    when the periodic tasks fall due -- snapshots, evaluations, checkpoints -- each at the first step at or past
    the next multiple of its interval (steps come in leaps: a rollout, a round of games).
:class:`Checkpoints`
    the set in ``checkpoints/``, each written by the backend's save function: ``step_<N>.zip`` (the network) and
    ``latest.zip`` (resumable) on schedule, ``best.zip`` when the evaluation score improves, ``final.zip`` and
    ``latest.zip`` at the end.
:func:`evaluate_learner`, :class:`EvaluationLog`
    the evaluation games (the config's opponents, games and openings) and their logging: every result under
    ``eval/<opponent>/<seat>/`` (``eval_sampled/`` for a sampled policy, :func:`log_result`), the mean score
    ``eval/score``, the grade by the exact solver (``eval/grade/value_lost``, ``_critical``, ``_<phase>``), the
    progress bar's line and the scores each checkpoint records (``best_score``, ``latest_eval``).
:func:`finish_run`
    ``final.zip``, the final table from it as read back from disk (``final_eval.json``, the last point of the
    eval curves, the printed table), and the closing lines: the final checkpoint, its agent spec, TensorBoard.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.base import Agent
from agents.checkpoints import CheckpointError, read_metadata, read_weights
from experiments.arena.grading import PositionValues, grade_agent, sample_positions
from experiments.training.config import SEED_LIMIT, TrainConfig, check_unchanged_on_resume, config_table
from experiments.training.selfplay import SEAT_NAMES, EvalResult, Opponent, evaluate_all
from quarto_env.checks import atomic_write_bytes, checked_number, one_line
from quarto_env.core import State, Variant

POOL_ENTRY = "pool.pt"
"""The checkpoint entry holding the opponent pool (in ``latest.zip`` and ``final.zip`` of the PPO backends)."""
FINAL_EVAL_SEED_OFFSET = 1000
"""The final table plays from ``seed + 1000``: other games than the evaluations during training."""

Record = Callable[[str, float], None]
"""Records a TensorBoard scalar under a tag, at the run's current step."""
SaveCheckpoint = Callable[[Path, bool], None]
"""A backend's way to write its learner at a path; ``True`` adds what ``--resume`` needs besides the network (the
opponent pool, the optimizer, the replay buffer)."""


# ---------------------------------------------------------------------------------------------------------
# Resuming
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run continues: its ``latest.zip``, checked against the config."""

    checkpoint: Path
    metadata: dict[str, Any]
    best_score: float
    """The best evaluation score so far (-1 before the first evaluation)."""
    pool: dict[str, Any] | None
    """The opponent pool's snapshots (``steps`` and ``weights``, one each), where the backend keeps one."""

    @property
    def steps(self) -> int:
        """The learner steps the checkpoint was saved at."""
        return int(self.metadata["num_timesteps"])


def read_resume_point(config: TrainConfig, run_dir: Path, *, with_pool: bool) -> ResumePoint:
    """``run_dir``'s ``checkpoints/latest.zip``, checked: a checkpoint of ``quarto train`` whose rules,
    observation and network are the config's (overrides that change no field of ``FIXED_ON_RESUME``), with a
    valid best score and, ``with_pool``, an opponent pool. Reads only; :class:`CheckpointError` or
    :class:`ConfigError` otherwise. The backend then checks that the weights fit its learner."""
    checkpoint = run_dir / "checkpoints" / "latest.zip"
    metadata = read_metadata(checkpoint)
    trained_config = metadata.get("config")
    if not isinstance(trained_config, dict) or not {"name", "seed", "policy", "net_arch"} <= set(trained_config):
        raise CheckpointError(
            f"checkpoint {str(checkpoint)!r} records no training config (name, seed, policy, net_arch) in its "
            "quarto.json: it was not saved by quarto train"
        )
    check_unchanged_on_resume(config, metadata)
    pool = _read_pool(checkpoint) if with_pool else None
    return ResumePoint(checkpoint, metadata, _best_score(metadata, checkpoint), pool)


def run_seed(config: TrainConfig, steps: int) -> int:
    """The seed of a run from ``steps`` on: a resumed run reseeds from its step count, so it does not replay the
    games it already saw."""
    return (config.seed + steps) % SEED_LIMIT


def _read_pool(checkpoint: Path) -> dict[str, Any]:
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


def _best_score(metadata: dict[str, Any], checkpoint: Path) -> float:
    """The best evaluation score the checkpoint records (-1 before the first evaluation, or where none is kept)."""
    try:
        return checked_number(metadata.get("best_score", -1.0), "best_score", minimum=-1, maximum=1)
    except ValueError as exc:
        raise CheckpointError(
            f"checkpoint {str(checkpoint)!r} has invalid metadata in quarto.json: {one_line(exc)}"
        ) from exc


# ---------------------------------------------------------------------------------------------------------
# The schedule, TensorBoard, the progress bar
# ---------------------------------------------------------------------------------------------------------
def next_multiple(step: int, every: int) -> int:
    """The first multiple of ``every`` after ``step``."""
    return (step // every + 1) * every


class Schedule:
    """When each periodic task of a run falls due -- ``snapshot``, ``evaluation``, ``checkpoint``, every
    ``snapshot_every``, ``eval_every`` and ``checkpoint_every`` steps of the config -- from ``step`` on: at the
    first step at or past the next multiple of its interval, once however far a leap of steps goes past it. A
    resumed run keeps the multiples of the first. ``snapshots=False``: a backend without a pool of snapshots."""

    def __init__(self, config: TrainConfig, step: int, *, snapshots: bool = True) -> None:
        self.intervals = {"evaluation": config.eval_every, "checkpoint": config.checkpoint_every}
        if snapshots:
            self.intervals["snapshot"] = config.snapshot_every
        self.next_due = {task: next_multiple(step, every) for task, every in self.intervals.items()}

    def due(self, step: int) -> set[str]:
        """The tasks due at ``step``, each moved on to its next multiple after it."""
        due = {task for task, at in self.next_due.items() if step >= at}
        for task in due:
            self.next_due[task] = next_multiple(step, self.intervals[task])
        return due


def open_tensorboard(run_dir: Path, config: TrainConfig, step: int) -> SummaryWriter:
    """The writer of the run's TensorBoard folder ``tb/``, with the config as text at ``step``: one folder for the
    whole run, so a resumed run's curves continue where they stopped."""
    writer = SummaryWriter(str(run_dir / "tb"))
    writer.add_text("config", config_table(config), step)
    return writer


def progress_bar(config: TrainConfig, step: int, unit: str) -> tqdm:
    """The run's progress bar on stderr, from ``step`` to ``total_steps``."""
    return tqdm(total=config.total_steps, initial=step, unit=unit, unit_scale=True, smoothing=0.1)


# ---------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------
class Checkpoints:
    """The run's checkpoint set in ``run_dir/checkpoints``, each file written by ``save``."""

    def __init__(self, run_dir: Path, save: SaveCheckpoint) -> None:
        self.run_dir = run_dir
        self.folder = run_dir / "checkpoints"
        self.save = save
        self.latest = self.folder / "latest.zip"
        self.final = self.folder / "final.zip"

    def save_step(self, step: int) -> None:
        """``step_<N>.zip`` (the network, to play) and ``latest.zip`` (resumable)."""
        self.save(self.folder / f"step_{step:09d}.zip", False)
        self.save(self.latest, True)

    def save_best(self) -> None:
        """``best.zip``: the network of the best evaluation so far (``ppo:RUN_FOLDER`` plays it)."""
        self.save(self.folder / "best.zip", False)

    def save_final(self) -> Path:
        """``final.zip`` and ``latest.zip``, both resumable (a finished run continues with a larger
        ``total_steps``); returns the final one's path."""
        self.save(self.final, True)
        self.save(self.latest, True)
        return self.final


# ---------------------------------------------------------------------------------------------------------
# Evaluations
# ---------------------------------------------------------------------------------------------------------
def evaluate_learner(
    players: Sequence[Opponent], config: TrainConfig, variant: Variant, *, final: bool = False
) -> list[EvalResult]:
    """``players`` (the learner's ways of playing: most likely action, sampled policy, search) against every
    evaluation opponent from the config's openings: ``eval_games`` games each, or ``final_eval_games`` for the
    final table, from :data:`FINAL_EVAL_SEED_OFFSET` seeds further."""
    games = config.final_eval_games if final else config.eval_games
    seed = config.seed + FINAL_EVAL_SEED_OFFSET if final else config.seed
    return evaluate_all(players, config.eval_opponents, variant, games, seed, config.eval_opening_plies)


def log_result(record: Record, result: EvalResult) -> None:
    """Record win/draw/loss rates and the score against one opponent, per seat and overall, under ``eval/``
    (most likely action) or ``eval_sampled/``."""
    prefix = "eval" if result.deterministic else "eval_sampled"
    name = result.opponent.replace(":", "_").replace("=", "").replace(",", "_")
    for seat, seat_name in enumerate(SEAT_NAMES):
        for key, value in result.rates(seat).items():
            record(f"{prefix}/{name}/{seat_name}/{key}", value)
    record(f"{prefix}/{name}/score", result.score())


class EvaluationLog:
    """The evaluations during a run, logged alike by every backend; and what a checkpoint records of them.

    ``grading`` makes the learner as an agent (``None``: the backend does not grade); with ``grade_positions``
    in the config, every evaluation grades its decisions on positions sampled, and solved, once per run."""

    def __init__(
        self,
        config: TrainConfig,
        variant: Variant,
        record: Record,
        best_score: float = -1.0,
        grading: Callable[[], Agent] | None = None,
    ) -> None:
        self.config = config
        self.variant = variant
        self.record = record
        self.best_score = best_score
        """The best mean score so far (-1 before the first evaluation): ``best.zip``'s."""
        self.latest: dict[str, float] = {}
        """The latest evaluation's scores, by opponent (and ``value lost``, the grade)."""
        self.grading = grading if config.grade_positions else None
        self._positions: tuple[list[State], PositionValues] | None = None

    def log(self, results: list[EvalResult], progress: tqdm) -> bool:
        """Log one evaluation: every result, the mean score, the grade, the progress bar's line; whether the mean
        score is the best so far (then ``best.zip`` is due)."""
        for result in results:
            log_result(self.record, result)
        score = float(np.mean([r.score() for r in results]))
        self.record("eval/score", score)
        self.latest = {f"{r.opponent}{'' if r.deterministic else ' (sampled)'}": r.score() for r in results}
        if self.grading is not None:
            self.latest["value lost"] = self._grade(self.grading())
        progress.set_postfix_str(self._summary(results))
        improved = score > self.best_score
        self.best_score = max(self.best_score, score)
        return improved

    def checkpoint_fields(self) -> dict[str, Any]:
        """What a checkpoint's ``quarto.json`` records of the evaluations."""
        return {"best_score": self.best_score, "latest_eval": self.latest}

    def _grade(self, learner: Agent) -> float:
        """Grade ``learner``'s decisions with the exact solver, log the shares of value lost; the overall share."""
        if self._positions is None:
            positions = sample_positions(self.variant, self.config.grade_positions, self.config.seed)
            self._positions = (positions, PositionValues(self.variant))
        report = grade_agent(learner, self.variant, *self._positions)
        self.record("eval/grade/value_lost", report.share_lost()[0])
        self.record("eval/grade/value_lost_critical", report.critical()[0])
        for phase, (share, *_) in report.by_phase().items():
            self.record(f"eval/grade/value_lost_{phase}", share)
        return report.share_lost()[0]

    def _summary(self, results: list[EvalResult]) -> str:
        """``eval argmax/sampled: random 0.98/0.95 greedy 0.71/0.64``: each opponent's score per way of playing."""
        scores: dict[str, list[str]] = {}
        for r in results:
            scores.setdefault(r.opponent, []).append(f"{r.score():.2f}")
        playing = "/".join(dict.fromkeys(r.playing for r in results))
        line = f"eval {playing}: " + " ".join(f"{opponent} {'/'.join(s)}" for opponent, s in scores.items())
        return line + (f" value lost {self.latest['value lost']:.3f}" if "value lost" in self.latest else "")


# ---------------------------------------------------------------------------------------------------------
# The end of a run
# ---------------------------------------------------------------------------------------------------------
def finish_run(
    config: TrainConfig,
    checkpoints: Checkpoints,
    steps: int,
    players_of: Callable[[Path], Sequence[Opponent]],
    record: Record,
    agent_spec: str,
) -> Path:
    """Save ``final.zip`` (and ``latest.zip``), evaluate ``players_of`` the final checkpoint as read back from
    disk, write the table to ``final_eval.json``, record it as the last point of the eval curves and print it,
    then the closing lines (the checkpoint, ``agent_spec`` that plays it, TensorBoard); returns its path."""
    final = checkpoints.save_final()
    results = evaluate_learner(players_of(final), config, config.resolved_variant(), final=True)
    write_final_eval(checkpoints.run_dir, final, steps, results)
    for result in results:
        log_result(record, result)
    print_results(results, steps)
    print(f"\nfinal checkpoint: {final}\nagent spec: {agent_spec}")
    print(f"TensorBoard: tensorboard --logdir {checkpoints.run_dir / 'tb'}   (then open http://localhost:6006)")
    return final


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
