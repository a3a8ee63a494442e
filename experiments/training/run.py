"""What every ``quarto train`` backend's run shares, written once: what a run says first, the schedule, the
progress bar, the checkpoint set, the resume checks, the evaluation logging and the end of the run.

A backend (:mod:`experiments.training.sb3_ppo`, :mod:`experiments.training.rllib_ppo`,
:mod:`experiments.training.alphazero`) owns its learner and its loop; around them every run reads alike, in
the order a run meets these pieces:

:func:`watch_compiles`, :func:`announce_run`
    from the start of the checks, the first time numba compiles a function in the process, a line that says so
    (:class:`CompileNotice`): the game kernels compile on their first call after a fresh clone or an edit and are
    cached on disk after, so only such a run waits for them, before its progress bar; once every check has
    passed (a refused run prints nothing but its one line), the run folder and the command that opens
    TensorBoard on it.
:func:`read_resume_point`
    a resumed run's ``checkpoints/latest.zip``, checked before anything is written: whole (its seal,
    :mod:`agents.integrity`; a damaged one is passed over for the newest intact checkpoint beside it, said in one
    line), saved by ``quarto train`` (its ``quarto.json`` records the training config), no field of
    ``FIXED_ON_RESUME`` changed, a ``total_steps`` not below the steps done (:func:`check_steps_left`; a run
    already finished says so and changes nothing), a valid best score, and the opponent pool (``pool.pt``) where
    the backend keeps one. :func:`run_seed` reseeds a resumed run from its step count, so that it does not replay
    the games it already saw.
:func:`open_tensorboard`, :func:`describe_run`
    the run's ``tb/`` with the config as text and the layout of TensorBoard's Custom Scalars tab: the curves that
    show learning side by side (:func:`learning_layout`).
:class:`Schedule`
    when the periodic tasks fall due -- snapshots, evaluations, checkpoints -- each at the first step at or past
    its next point (steps come in leaps: a rollout, a round of games): a multiple of its interval, and for the
    evaluations also the steps of ``early_evals`` (by default 0, then doubling steps up to the first periodic
    one, where the scores move fastest). A fresh run evaluates its untrained network before it trains; a resumed
    one skips the points at or before its checkpoint's step.
:func:`stopping_step`, :func:`progress_bar`, :func:`paused`
    where the run stops -- ``total_steps`` rounded up to whole leaps, said once before training when that is
    further -- and the bar to it, whose rate is the average over training alone: its clock stops during an
    evaluation, so the ETA does not jump after one.
:class:`Checkpoints`
    the set in ``checkpoints/``, each written by the backend's save function: ``step_<N>.zip`` (the network) and
    ``latest.zip`` (resumable) on schedule, ``best.zip`` when the evaluation score improves, ``final.zip`` and
    ``latest.zip`` at the end.
:func:`evaluate_learner`, :class:`EvaluationLog`
    the evaluation games (the config's opponents, games and openings: ``eval_opening_plies`` random actions, by
    default ``quarto tournament``'s 4) and their logging: every result under ``eval/<opponent>/<seat>/``
    (``eval_sampled/`` for a sampled policy, :func:`log_result`), the mean score ``eval/score``, the grade by the
    exact solver (``eval/grade/value_lost``, ``_critical``, ``_<phase>``, ``_empty_<low>_<high>``, and the same
    under ``eval/grade/<name>/`` for the other agents a backend grades), with ``sample_games`` a few of the
    games against the last opponent graded move by move (``games/sample_<n>`` and its ``/first_mistake``,
    :mod:`experiments.evaluation.sample_games`), the progress bar's line (what it is
    evaluating, then the scores and the seconds the evaluation took) and the scores each checkpoint records
    (``best_score``, ``latest_eval``).
:func:`finish_run`
    ``final.zip``, the final table from it as read back from disk (``final_eval.json``, the last point of the
    eval curves, the printed table), and the closing lines: the final checkpoint, its agent spec, TensorBoard.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import functools
import json
import re
import sys
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numba.core import event
from rich.console import Console
from rich.table import Table
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.base import Agent
from agents.checkpoints import CheckpointError, DamagedCheckpointError, read_metadata, read_weights
from agents.files import atomic_write_bytes
from experiments.evaluation.games import SEAT_NAMES, EvalResult, Opponent, evaluate_all
from experiments.evaluation.grading import GradeReport, PositionValues, grade_agent, sample_decisions
from experiments.evaluation.sample_games import game_markdown, graded_games, mistake_picture
from experiments.training.config import SEED_LIMIT, ConfigError, TrainConfig, config_table
from experiments.training.config_file import check_unchanged_on_resume
from quarto_env.checks import checked_number, one_line
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
    """Where a resumed run continues: its ``latest.zip`` (or, that one damaged, the newest intact checkpoint),
    checked against the config."""

    checkpoint: Path
    metadata: dict[str, Any]
    best_score: float
    """The best evaluation score so far (-1 before the first evaluation)."""
    pool: dict[str, Any] | None
    """The opponent pool's snapshots (``steps`` and ``weights``, one each), where the backend keeps one and the
    checkpoint holds it."""

    @property
    def steps(self) -> int:
        """The learner steps the checkpoint was saved at."""
        return int(self.metadata["num_timesteps"])

    @property
    def complete(self) -> bool:
        """Whether the checkpoint holds all the run's state (``latest.zip``, ``final.zip``); a ``step_N.zip`` or
        ``best.zip`` holds the network alone, and what else the backend keeps (the opponent pool, the optimizer,
        the replay buffer) starts afresh."""
        return self.checkpoint.stem in RESUMABLE_CHECKPOINTS


RESUMABLE_CHECKPOINTS = ("latest", "final")
"""The checkpoints that hold all a run's state: the others (``step_N``, ``best``) hold its network."""
NETWORK_ALONE = "it holds the network alone: the opponent pool, optimizer or replay buffer start afresh"


class RunFinished(Exception):
    """A resume of a run that has nothing left to do (:func:`check_steps_left`); the message says so."""


def read_resume_point(config: TrainConfig, run_dir: Path, *, with_pool: bool) -> ResumePoint:
    """``run_dir``'s ``checkpoints/latest.zip`` -- or, where it is damaged, the newest intact checkpoint beside it
    (:func:`resume_checkpoint`) -- checked: a checkpoint of ``quarto train`` whose rules, observation and network
    are the config's (overrides that change no field of ``FIXED_ON_RESUME``), steps left to train
    (:func:`check_steps_left`), a valid best score and, ``with_pool``, an opponent pool (``None`` from a checkpoint
    that holds the network alone). Reads only; :class:`CheckpointError`, :class:`ConfigError` or
    :class:`RunFinished` otherwise. The backend then checks that the weights fit its learner."""
    checkpoint, metadata, damage = resume_checkpoint(run_dir)
    trained_config = metadata.get("config")
    if not isinstance(trained_config, dict) or not {"name", "seed", "policy", "net_arch"} <= set(trained_config):
        raise CheckpointError(
            f"checkpoint {str(checkpoint)!r} records no training config (name, seed, policy, net_arch) in its "
            "quarto.json: it was not saved by quarto train"
        )
    check_unchanged_on_resume(config, metadata)
    pool = _read_pool(checkpoint) if with_pool and checkpoint.stem in RESUMABLE_CHECKPOINTS else None
    point = ResumePoint(checkpoint, metadata, _best_score(metadata, checkpoint), pool)
    check_steps_left(config, run_dir, point)
    if damage is not None:
        afresh = "" if point.complete else f" ({NETWORK_ALONE})"
        print(
            f"quarto train: {damage}; going on from {checkpoint.name}, the newest intact checkpoint, at step "
            f"{point.steps:,}{afresh}",
            file=sys.stderr,
        )
    return point


def resume_checkpoint(run_dir: Path) -> tuple[Path, dict[str, Any], DamagedCheckpointError | None]:
    """The checkpoint a resume of ``run_dir`` goes on from, its metadata, and the damage of ``latest.zip`` when
    that was passed over: ``latest.zip`` if it is whole, else the intact checkpoint of ``checkpoints/`` with the
    most steps (``final.zip`` before a ``step_N.zip`` and that before ``best.zip`` at equal steps: the ones
    that hold more of the run's state first). :class:`CheckpointError` for ``latest.zip``'s problem when it is
    whole but wrong, or when no intact checkpoint is left."""
    folder = run_dir / "checkpoints"
    latest = folder / "latest.zip"
    try:
        return latest, read_metadata(latest), None
    except DamagedCheckpointError as damage:
        intact = []
        for rank, pattern in enumerate(("best.zip", "step_*.zip", "final.zip")):
            for path in sorted(folder.glob(pattern)):
                with contextlib.suppress(CheckpointError):
                    metadata = read_metadata(path)
                    intact.append((int(metadata["num_timesteps"]), rank, path, metadata))
        if not intact:
            raise CheckpointError(f"{damage}; no intact checkpoint beside it to go on from") from None
        _, _, path, metadata = max(intact, key=lambda found: found[:2])
        return path, metadata, damage


def check_steps_left(config: TrainConfig, run_dir: Path, point: ResumePoint) -> None:
    """Refuse a resume whose ``total_steps`` lies below the steps done where the command lowered it
    (:class:`ConfigError`), and stop one of a run that is finished at them (:class:`RunFinished`: its final table
    is written): either would only rewrite the final checkpoint and table. A run stopped after its last step but
    before its final table is left to write it."""
    done, total = point.steps, config.total_steps
    if total < done and total != point.metadata["config"].get("total_steps"):
        raise ConfigError(
            f"total_steps={total:,} is below the {done:,} steps the run has done: give more than {done:,} to go on "
            "training (nothing was changed)"
        )
    if total <= done and _final_table_at(run_dir, done):
        raise RunFinished(
            f"{run_dir} is already finished at {done:,} steps (total_steps={total:,}); raise total_steps to go on. "
            "Nothing was changed"
        )


def _final_table_at(run_dir: Path, steps: int) -> bool:
    """Whether ``run_dir``'s ``final_eval.json`` is the final table at ``steps``."""
    try:
        table = json.loads((run_dir / "final_eval.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(table, dict) and table.get("num_timesteps") == steps


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
    ``snapshot_every``, ``eval_every`` and ``checkpoint_every`` steps of the config, and the evaluations also at
    the steps of ``early_evals`` -- from ``step`` on: at the first step at or past its next point, once however
    far a leap of steps goes past it. A resumed run keeps the points of the first and skips those it has passed;
    a fresh run (``step`` 0) has the evaluation at step 0 due at once, before it trains. ``snapshots=False``: a
    backend without a pool of snapshots."""

    def __init__(self, config: TrainConfig, step: int, *, snapshots: bool = True) -> None:
        self.intervals = {"evaluation": config.eval_every, "checkpoint": config.checkpoint_every}
        if snapshots:
            self.intervals["snapshot"] = config.ppo.snapshot_every
        self.early = {"evaluation": tuple(config.early_evals)}
        self.next_due = {task: self._next_point(task, step, fresh=step == 0) for task in self.intervals}

    def due(self, step: int) -> set[str]:
        """The tasks due at ``step``, each moved on to its next point after it."""
        due = {task for task, at in self.next_due.items() if step >= at}
        for task in due:
            self.next_due[task] = self._next_point(task, step)
        return due

    def _next_point(self, task: str, step: int, fresh: bool = False) -> int:
        """The first point of ``task`` after ``step`` -- a multiple of its interval, or an early step (``fresh``:
        also ``step`` itself)."""
        early = self.early.get(task, ())
        later = early[(bisect.bisect_left if fresh else bisect.bisect_right)(early, step) :]
        return min((next_multiple(step, self.intervals[task]), *later[:1]))


def open_tensorboard(run_dir: Path, config: TrainConfig, step: int, graded: Sequence[str] = ()) -> SummaryWriter:
    """The writer of the run's TensorBoard folder ``tb/`` (:func:`describe_run`): one folder for the whole run, so
    a resumed run's curves continue where they stopped."""
    writer = SummaryWriter(str(run_dir / "tb"))
    describe_run(writer, config, step, graded)
    return writer


def describe_run(writer: SummaryWriter, config: TrainConfig, step: int, graded: Sequence[str] = ()) -> None:
    """Write the config as text at ``step``, and the layout of TensorBoard's Custom Scalars tab
    (:func:`learning_layout`, with the grades of the ``graded`` agents besides the learner's)."""
    writer.add_text("config", config_table(config), step)
    writer.add_custom_scalars(learning_layout(config, graded if config.grade_positions else ()))


def learning_layout(config: TrainConfig, graded: Sequence[str] = ()) -> dict[str, Any]:
    """The curves that show learning side by side, as TensorBoard's Custom Scalars tab shows them (its section
    ``learning``): per evaluation opponent the score of the sampled policy and of the most likely action (or the
    search) in one chart, and the grade (``eval/grade/value_lost``) with those of the ``graded`` agents beside it
    (``eval/grade/<name>/value_lost``; alphazero: its policy alone, the search with an untrained network)."""
    charts: dict[str, Any] = {
        f"vs {spec}": ["Multiline", [re.escape(f"{prefix}/{tag_name(spec)}/score") for prefix in EVAL_PREFIXES]]
        for spec in config.eval_opponents
    }
    grades = ["eval/grade/value_lost", *(f"eval/grade/{name}/value_lost" for name in graded)]
    charts["value-losing decisions (solver-graded)"] = ["Multiline", [re.escape(tag) for tag in grades]]
    return {"learning": charts}


_progress_hidden = False
"""Set by :func:`hidden_progress` (``quarto train --no-progress``): the run's bar is created disabled."""


def progress_bar(step: int, stop: int, unit: str) -> tqdm:
    """The run's progress bar on stderr, from ``step`` to ``stop`` (:func:`stopping_step`). Its rate is the
    average since the start, on a clock that stops for evaluations (:func:`paused`): the ETA counts training
    alone, and holds. A backend closes it also when the run stops on an exception (Ctrl-C), so that nothing
    redraws it after the message that follows."""
    return tqdm(total=stop, initial=step, unit=unit, unit_scale=True, smoothing=0, disable=_progress_hidden)


@contextlib.contextmanager
def hidden_progress(hidden: bool = True) -> Iterator[None]:
    """Within the block, the runs' progress bars are not drawn (``hidden``). A switch of the module, not an
    argument, because each backend creates its bar deep inside its loop; restored after, for the next caller in
    the same process (the tests)."""
    global _progress_hidden
    before, _progress_hidden = _progress_hidden, hidden
    try:
        yield
    finally:
        _progress_hidden = before


@contextlib.contextmanager
def paused(progress: tqdm) -> Iterator[None]:
    """Keep the time the block takes off ``progress``'s clock (tqdm's ``time.time``): an evaluation does not
    count as training time, so the rate and the ETA do not jump after it."""
    started = time.time()
    try:
        yield
    finally:
        if not progress.disable:  # a disabled bar (TQDM_DISABLE=1) has no clock
            pause = time.time() - started
            progress.start_t += pause
            progress.last_print_t += pause


# ---------------------------------------------------------------------------------------------------------
# What a run says before its progress bar
# ---------------------------------------------------------------------------------------------------------
COMPILING = (
    "compiling the game kernels (numba compiles them on their first call after a fresh clone or an edit, then "
    "caches them on disk: later runs load them at once) ..."
)


class CompileNotice(event.Listener):
    """Prints :data:`COMPILING` the first time numba compiles a function in this process (a function loaded from
    numba's disk cache is not compiled, and says nothing)."""

    def __init__(self) -> None:
        self.told = False

    def on_start(self, ev: event.Event) -> None:
        if not self.told:
            self.told = True
            tqdm.write(COMPILING)  # above a progress bar, if one is showing
            sys.stdout.flush()

    def on_end(self, ev: event.Event) -> None:
        pass


@functools.cache
def watch_compiles() -> CompileNotice:
    """The process's :class:`CompileNotice`, listening to numba from the first call on."""
    notice = CompileNotice()
    event.register("numba:compile", notice)
    return notice


def announce_run(run_dir: Path) -> None:
    """The first lines of a run that every check has let start: its folder and the command that opens its
    curves."""
    print(f"run folder: {run_dir}\n{tensorboard_command(run_dir)}", flush=True)


def tensorboard_command(run_dir: Path) -> str:
    """The line that says how to watch the run's curves."""
    return f"TensorBoard: tensorboard --logdir {run_dir / 'tb'}   (then open http://localhost:6006)"


def stopping_step(config: TrainConfig, step: int, leap: int, leaps: str) -> int:
    """Where a run from ``step`` stops when its steps come in leaps of ``leap``: ``total_steps``, rounded up to
    whole leaps. Where that is past ``total_steps``, it says so once, before training (``leaps`` names the leaps,
    ``{leap}`` standing for their size)."""
    remaining = config.total_steps - step
    if remaining <= 0 or remaining % leap == 0:
        return max(config.total_steps, step)
    stop = step + -(-remaining // leap) * leap
    print(f"total_steps={config.total_steps} rounds up to {stop:,} ({leaps.format(leap=f'{leap:,}')})", flush=True)
    return stop


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
    final table, from :data:`FINAL_EVAL_SEED_OFFSET` seeds further. Each keeps its first ``sample_games`` games
    whole (none for the final table)."""
    games = config.final_eval_games if final else config.eval_games
    seed = config.seed + FINAL_EVAL_SEED_OFFSET if final else config.seed
    keep = 0 if final else config.sample_games
    return evaluate_all(players, config.eval_opponents, variant, games, seed, config.eval_opening_plies, keep)


EVAL_PREFIXES = ("eval_sampled", "eval")
"""Where an evaluation's results go: the learner sampling its policy, or playing its most likely action (a search)."""


def tag_name(spec: str) -> str:
    """The agent ``spec`` as it names its TensorBoard tags: ``minimax:depth=2`` is ``minimax_depth2``."""
    return spec.replace(":", "_").replace("=", "").replace(",", "_")


def log_result(record: Record, result: EvalResult) -> None:
    """Record win/draw/loss rates and the score against one opponent, per seat and overall, under ``eval/``
    (most likely action) or ``eval_sampled/``."""
    prefix = "eval" if result.deterministic else "eval_sampled"
    name = tag_name(result.opponent)
    for seat, seat_name in enumerate(SEAT_NAMES):
        for key, value in result.rates(seat).items():
            record(f"{prefix}/{name}/{seat_name}/{key}", value)
    record(f"{prefix}/{name}/score", result.score())


GRADE_BUCKETS = ((1, 4), (5, 7), (8, 10), (11, 16))
"""Empty-square ranges of the per-bucket grade curves (``eval/grade/value_lost_empty_5_7``)."""


def grade_shares(report: GradeReport) -> dict[str, float]:
    """The shares of the report's decisions that lose value, by curve name: ``value_lost`` overall,
    ``_critical``, ``_<phase>`` and ``_empty_<low>_<high>`` (the :data:`GRADE_BUCKETS` with positions)."""
    shares = {"value_lost": report.share_lost()[0], "value_lost_critical": report.critical()[0]}
    for phase, (share, *_) in report.by_phase().items():
        shares[f"value_lost_{phase}"] = share
    for low, high in GRADE_BUCKETS:
        share, _, _, count = report.share_lost_between(low, high)
        if count:
            shares[f"value_lost_empty_{low}_{high}"] = share
    return shares


TensorBoard = Callable[[], tuple[SummaryWriter, int]]
"""The run's TensorBoard writer and its current step, for what :class:`EvaluationLog` writes besides scalars."""
SAMPLE_TAG = "games/sample_{number}"
"""The Text tag of sample game ``number``; its first mistake's picture is ``games/sample_<number>/first_mistake``."""


Graded = Callable[[], dict[str, Agent]]
"""The agents to grade, by name: ``""`` the learner as it plays (``eval/grade/value_lost``), any other name
under its own prefix (``eval/grade/policy/value_lost``)."""


class EvaluationLog:
    """The evaluations during a run, logged alike by every backend; and what a checkpoint records of them.

    ``grading`` makes the agents to grade at every evaluation (:data:`Graded`; ``None``: the backend does not
    grade), ``references`` those graded once, at the first evaluation, and logged again at every one -- a flat
    line to compare with, such as the same search with an untrained network. With ``grade_positions`` in the
    config, the grade is on positions sampled, and solved, once per run. With ``sample_games`` in the config,
    every evaluation also writes that many of its games, graded move by move, to ``tensorboard``
    (:meth:`log_sample_games`)."""

    def __init__(
        self,
        config: TrainConfig,
        variant: Variant,
        record: Record,
        best_score: float = -1.0,
        grading: Graded | None = None,
        references: Graded | None = None,
        tensorboard: TensorBoard | None = None,
    ) -> None:
        self.config = config
        self.variant = variant
        self.record = record
        self.best_score = best_score
        """The best mean score so far (-1 before the first evaluation): ``best.zip``'s."""
        self.latest: dict[str, float] = {}
        """The latest evaluation's scores, by opponent (and ``value lost``, the grade)."""
        self.grading = grading if config.grade_positions else None
        self.references = references if config.grade_positions else None
        self.tensorboard = tensorboard
        self._reference_grades: dict[str, GradeReport] | None = None
        self._positions: list[State] | None = None
        self._values = PositionValues(variant)
        """The exact action values of the graded positions and sample games, solved once per run."""

    def evaluate(self, players: Sequence[Opponent], progress: tqdm) -> tuple[list[EvalResult], bool]:
        """One evaluation of ``players`` (:func:`evaluate_learner`), logged (:meth:`log`), off the progress bar's
        clock (:func:`paused`); the bar says it is evaluating, then the scores and the seconds it took. Returns the
        results, and whether the mean score is the best so far (then ``best.zip`` is due)."""
        started = time.perf_counter()
        with paused(progress):
            progress.set_postfix_str(f"evaluating at step {progress.n:,} ...")
            results = evaluate_learner(players, self.config, self.variant)
            improved = self.log(results)
        progress.set_postfix_str(f"{self._summary(results)} ({time.perf_counter() - started:.0f} s)")
        return results, improved

    def log(self, results: list[EvalResult]) -> bool:
        """Log one evaluation: every result, the mean score, the grade; whether the mean score is the best so far."""
        for result in results:
            log_result(self.record, result)
        score = float(np.mean([r.score() for r in results]))
        self.record("eval/score", score)
        self.latest = {f"{r.opponent}{'' if r.deterministic else ' (sampled)'}": r.score() for r in results}
        if self.grading is not None:
            for name, report in self.grade_all(self.grading()).items():
                self._log_grade(name, grade_shares(report))
        if self.config.sample_games and self.tensorboard is not None:
            self.log_sample_games(results[len(self.config.eval_opponents) - 1])
        improved = score > self.best_score
        self.best_score = max(self.best_score, score)
        return improved

    def checkpoint_fields(self) -> dict[str, Any]:
        """What a checkpoint's ``quarto.json`` records of the evaluations."""
        return {"best_score": self.best_score, "latest_eval": self.latest}

    def grade_all(self, agents: dict[str, Agent]) -> dict[str, GradeReport]:
        """The exact solver's grade of each of ``agents`` and of the ``references`` (graded at the first call,
        then reused), by name, on the run's positions (sampled and solved once per run)."""
        if self._positions is None:
            self._positions = sample_decisions(self.variant, self.config.grade_positions, self.config.seed)
        positions, values = self._positions, self._values
        if self.references is not None and self._reference_grades is None:
            references = self.references().items()
            self._reference_grades = {
                name: grade_agent(agent, self.variant, positions, values) for name, agent in references
            }
        reports = {name: grade_agent(agent, self.variant, positions, values) for name, agent in agents.items()}
        return {**reports, **(self._reference_grades or {})}

    def log_sample_games(self, result: EvalResult) -> None:
        """Write the games ``result`` kept -- the learner's first way of playing against the last evaluation
        opponent -- graded move by move (:mod:`experiments.evaluation.sample_games`): each as Markdown under
        ``games/sample_<n>`` and the picture of its first value-losing decision under
        ``games/sample_<n>/first_mistake``, at the evaluation's step."""
        assert self.tensorboard is not None
        writer, step = self.tensorboard()
        for number, game in enumerate(graded_games(result.games, result.opponent, self.variant, self._values)):
            tag = SAMPLE_TAG.format(number=number)
            writer.add_text(tag, game_markdown(game), step)
            writer.add_image(f"{tag}/first_mistake", mistake_picture(game, self.variant), step, dataformats="HWC")

    def _log_grade(self, name: str, shares: dict[str, float]) -> None:
        """Record ``shares`` under ``eval/grade/`` (``eval/grade/<name>/`` for another agent than the learner)."""
        prefix = "eval/grade/" + (f"{tag_name(name)}/" if name else "")
        for curve, share in shares.items():
            self.record(prefix + curve, share)
        if not name:
            self.latest["value lost"] = shares["value_lost"]

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
    grades_of: Callable[[Path], dict[str, GradeReport]] | None = None,
) -> Path:
    """Save ``final.zip`` (and ``latest.zip``), evaluate ``players_of`` the final checkpoint as read back from
    disk -- and grade it with ``grades_of`` where the backend grades (with ``grade_positions``) -- write the table
    to ``final_eval.json``, record it as the last point of the eval curves and print it, then the closing lines
    (the checkpoint, ``agent_spec`` that plays it, TensorBoard); returns its path."""
    final = checkpoints.save_final()
    results = evaluate_learner(players_of(final), config, config.variant, final=True)
    grades = grades_of(final) if grades_of is not None and config.grade_positions else {}
    write_final_eval(checkpoints.run_dir, final, steps, results, grades)
    for result in results:
        log_result(record, result)
    print_results(results, steps)
    if grades:
        print_grades(grades)
    print(f"\nfinal checkpoint: {final}\nagent spec: {agent_spec}")
    print(tensorboard_command(checkpoints.run_dir))
    return final


LEARNER_GRADE = "learner"
"""The name of the learner's own grade in ``final_eval.json`` and the final table (``""`` in :data:`Graded`)."""


def write_final_eval(
    run_dir: Path,
    checkpoint: Path,
    steps: int,
    results: list[EvalResult],
    grades: dict[str, GradeReport] | None = None,
) -> None:
    """Write the final table to ``final_eval.json``: the results and, where graded, ``grades`` (by agent, each
    :meth:`GradeReport.summary`: every share as ``[share, low, high, count]``)."""
    summary: dict[str, Any] = {
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
    if grades:
        summary["grades"] = {name or LEARNER_GRADE: report.summary() for name, report in grades.items()}
    atomic_write_bytes(run_dir / "final_eval.json", json.dumps(summary, indent=2).encode())


def print_grades(grades: dict[str, GradeReport]) -> None:
    """The final grades: per graded agent the share of value-losing decisions with its 95% interval, among the
    critical ones, and per empty-square bucket; the untrained reference's share over the learner's, where both
    are there (how many times fewer mistakes learning made)."""
    table = Table(
        title="value-losing decisions, graded by the exact solver",
        caption="share of the decisions that lose value (all: with its 95% interval; 1-4, ...: by empty squares), "
        "on the same positions for every agent",
    )
    buckets = [(lo, hi) for lo, hi in GRADE_BUCKETS if any(r.share_lost_between(lo, hi)[3] for r in grades.values())]
    for column in ("agent", "n", "all", "critical", *(f"{lo}-{hi}" for lo, hi in buckets)):
        table.add_column(column, justify="left" if column == "agent" else "right", no_wrap=True)
    for name, report in grades.items():
        share, low, high, _ = report.share_lost()
        by_bucket = [report.share_lost_between(lo, hi) for lo, hi in buckets]
        cells = [f"{bucket[0]:.3f}" if bucket[3] else "-" for bucket in (report.critical(), *by_bucket)]
        table.add_row(name or LEARNER_GRADE, str(len(report.decisions)), f"{share:.3f} [{low:.2f}, {high:.2f}]", *cells)
    Console().print(table)
    if "" in grades and "untrained" in grades and grades[""].share_lost()[0] > 0:
        ratio = grades["untrained"].share_lost()[0] / grades[""].share_lost()[0]
        print(f"untrained / learner: {ratio:.2f}x the value-losing decisions")


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
