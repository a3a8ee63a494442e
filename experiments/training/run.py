"""The pieces every ``quarto train`` backend's run is built of, written once: what a run says first, the resume
checks, the schedule, the progress bar, the checkpoint set and the interrupt save. The run's life that puts them
together is :func:`experiments.training.loop.train_run`; what its evaluations play, log and report is the
evaluation log's (:mod:`experiments.evaluation.log`).

A backend (:mod:`experiments.training.sb3_ppo`, :mod:`experiments.training.rllib_ppo`,
:mod:`experiments.training.alphazero`, :mod:`experiments.training.alphazero_jax`) builds its learner -- fresh,
or from the checkpoint these checks allow -- and the run's life drives it; a run meets these pieces in this
order:

:func:`watch_compiles`, :func:`announce_run`
    from the start of the checks, the first time numba compiles a function in the process, a line that says so
    (:class:`CompileNotice`): the game kernels compile on their first call after a fresh clone or an edit and are
    cached on disk after, so only such a run waits for them, before its progress bar; once every check has
    passed (a refused run prints nothing but its one line), the run folder and the command that opens
    TensorBoard on it.
:func:`read_resume_point`
    a resumed run's ``checkpoints/latest.zip``, checked before anything is written: whole (its seal,
    :mod:`agents.storage.integrity`; a damaged one is passed over for the newest intact checkpoint beside it, said in
    one line), saved by ``quarto train`` (its ``quarto.json`` records the training config), no field of
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
:func:`stopping_step`, :func:`progress_bar`
    where the run stops -- ``total_steps`` rounded up to whole leaps, said once before training when that is
    further -- and the bar to it, whose rate is the average over training alone: its clock stops during an
    evaluation (:func:`experiments.evaluation.log.paused`), so the ETA does not jump after one.
:class:`Checkpoints`
    the set in ``checkpoints/``, each written by the learner's ``save``: ``step_<N>.zip`` (the network) and
    ``latest.zip`` (resumable) on schedule, ``best.zip`` when the evaluation score improves, ``final.zip`` and
    ``latest.zip`` at the end, and ``latest.zip`` at Ctrl-C (:func:`saved_on_interrupt`): whenever a run is
    stopped, :func:`interrupted_story` says what it holds, and ``--resume`` goes on from there (a run stopped
    before its first checkpoint starts from step 0: :func:`has_checkpoint`).
:func:`evaluation_plan`, :func:`evaluation_log`
    the config's evaluations (its opponents, games, seed, openings, sample games and graded positions) as the
    evaluation log's :class:`~experiments.evaluation.log.EvaluationPlan`, and the
    :class:`~experiments.evaluation.log.EvaluationLog` a backend's ``start`` gives its learner (with the best
    score a resumed run carries on), which plays and logs them.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import functools
import json
import os
import re
import shlex
import signal
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from numba.core import event
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.interrupts import STOP_SIGNALS
from agents.networks.checkpoints import (
    CheckpointError,
    DamagedCheckpointError,
    read_metadata,
    read_weights,
    step_checkpoint_name,
)
from experiments.evaluation.log import EVAL_PREFIXES, EvaluationLog, EvaluationPlan, tag_name
from experiments.run_folder import FINAL_TABLE_FILE
from experiments.training.config import SEED_LIMIT, ConfigError, TrainConfig, config_table
from experiments.training.config_file import check_unchanged_on_resume
from quarto_env.checks import checked_number, one_line

POOL_ENTRY = "pool.pt"
"""The checkpoint entry holding the opponent pool (in ``latest.zip`` and ``final.zip`` of the PPO backends)."""
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
    def evaluated_at(self) -> int:
        """The step of the run's latest evaluation logged whole, as the checkpoint records it (-1: none recorded;
        checkpoints before 2026-12-07 record none)."""
        return self._step_field("evaluated_at")

    @property
    def evaluation_begun_at(self) -> int:
        """The step of the run's latest evaluation begun, whole or not (-1: none recorded; checkpoints before the
        sixth sitting of 2026-12-07 record none)."""
        return self._step_field("evaluation_begun_at")

    def _step_field(self, name: str) -> int:
        value = self.metadata.get(name, -1)
        return value if isinstance(value, int) and not isinstance(value, bool) else -1

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
    that hold more of the run's state first) -- also where ``latest.zip`` is missing beside others (a run killed
    before its first scheduled checkpoint keeps the ``best.zip`` of its evaluation at step 0).
    :class:`CheckpointError` for ``latest.zip``'s problem when it is whole but wrong, or when no intact checkpoint
    is left."""
    folder = run_dir / "checkpoints"
    latest = folder / "latest.zip"
    try:
        if os.path.lexists(latest) or not has_checkpoint(run_dir):
            return latest, read_metadata(latest), None
        damage = DamagedCheckpointError(f"checkpoint {str(latest)!r} is missing")
    except DamagedCheckpointError as error:
        damage = error
    intact = []
    for rank, pattern in enumerate(FALLBACK_CHECKPOINTS):
        for path in sorted(folder.glob(pattern)):
            with contextlib.suppress(CheckpointError):
                metadata = read_metadata(path)
                intact.append((int(metadata["num_timesteps"]), rank, path, metadata))
    if not intact:
        raise CheckpointError(f"{damage}; no intact checkpoint beside it to go on from") from None
    _, _, path, metadata = max(intact, key=lambda found: found[:2])
    return path, metadata, damage


FALLBACK_CHECKPOINTS = ("best.zip", "step_*.zip", "final.zip")
"""The checkpoints a resume falls back on where ``latest.zip`` is damaged or missing, in the order that ranks
them at equal steps (the last holds the most of the run's state)."""


def has_checkpoint(run_dir: Path) -> bool:
    """Whether the run has saved a checkpoint a resume can go on from (``latest.zip`` or one of
    :data:`FALLBACK_CHECKPOINTS`; alphazero's ``untrained.zip`` is a reference, not the run's). A run stopped
    before its first has none: ``quarto train --resume`` starts it from step 0."""
    folder = run_dir / "checkpoints"
    return any(any(folder.glob(pattern)) for pattern in ("latest.zip", *FALLBACK_CHECKPOINTS))


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
        table = json.loads((run_dir / FINAL_TABLE_FILE).read_text(encoding="utf-8"))
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
    a resumed run's curves continue where they stopped. What earlier event files hold past ``step`` is hidden
    (TensorBoard's purge, which its readers and ours apply): the points that a stopped process wrote after its
    checkpoint, which the resumed run writes again. An evaluation writes its points all at once
    (:meth:`~experiments.evaluation.log.EvaluationLog.log`), so those at ``step`` itself are whole, or none."""
    writer = SummaryWriter(str(run_dir / "tb"), purge_step=step + 1)
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
    argument, because the run creates its bar deep inside its life; restored after, for the next caller in
    the same process (the tests)."""
    global _progress_hidden
    before, _progress_hidden = _progress_hidden, hidden
    try:
        yield
    finally:
        _progress_hidden = before


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
        self.save(self.folder / f"{step_checkpoint_name(step)}.zip", False)
        self.save(self.latest, True)

    def save_best(self) -> None:
        """``best.zip``: the network of the best evaluation so far (``ppo:RUN_FOLDER`` plays it)."""
        self.save(self.folder / "best.zip", False)

    def save_latest(self) -> None:
        """``latest.zip`` alone (resumable): the run as it stands, at Ctrl-C (:func:`saved_on_interrupt`)."""
        self.save(self.latest, True)

    def save_final(self) -> Path:
        """``latest.zip`` and ``final.zip``, both resumable (a finished run continues with a larger
        ``total_steps``); returns the final one's path. ``latest.zip`` first: a run stopped between the two
        resumes at its last step, and only writes its final table."""
        self.save(self.latest, True)
        self.save(self.final, True)
        return self.final


@contextlib.contextmanager
def saved_on_interrupt(checkpoints: Checkpoints) -> Iterator[None]:
    """Ctrl-C inside the block first saves ``latest.zip`` as the run stands (:meth:`Checkpoints.save_latest`,
    atomically, a second Ctrl-C held until it is written), then goes on as the ``KeyboardInterrupt`` it was:
    ``quarto train --resume`` continues from there, whenever the run was stopped (:func:`interrupted_story`)."""
    try:
        yield
    except KeyboardInterrupt:
        with interrupts_held():
            checkpoints.save_latest()
        raise


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Within the block, SIGINT is held, and SIGTERM where Python handles it (``quarto`` makes it Ctrl-C: see
    :func:`experiments.cli.sigterm_as_interrupt`): the block runs to its end, and a ``KeyboardInterrupt`` follows
    if one came. (Only the main thread can set a handler; elsewhere the block runs as it is.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    handled = [number for number in STOP_SIGNALS if callable(signal.getsignal(number))]
    previous = {number: signal.signal(number, lambda signum, frame: received.append(signum)) for number in handled}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if received:
        raise KeyboardInterrupt


def interrupted_story(run_dir: Path) -> str:
    """What a run stopped by Ctrl-C has left, read from its folder, and the command that goes on: the one story
    whenever it was stopped. Without ``config.yaml`` it had not started (nothing was written); otherwise
    ``quarto train --resume`` continues it from the checkpoint a resume takes (:func:`resume_checkpoint`), or,
    stopped before its first checkpoint, starts it from step 0."""
    if not (run_dir / "config.yaml").is_file():
        return "the run had not started: nothing was written; the same command starts it"
    resume = f"quarto train --resume {shlex.quote(str(run_dir))}"
    if not has_checkpoint(run_dir):
        return f"it has no checkpoint yet: {resume} starts it from step 0"
    try:
        checkpoint, metadata, _ = resume_checkpoint(run_dir)
    except CheckpointError as error:
        return f"it cannot be resumed ({error}); --overwrite starts it again"
    where = f"checkpoints/{checkpoint.name}"
    return f"{where} holds it at step {int(metadata['num_timesteps']):,}: continue it with: {resume}"


# ---------------------------------------------------------------------------------------------------------
# The end of a run
# ---------------------------------------------------------------------------------------------------------
def evaluation_plan(config: TrainConfig) -> EvaluationPlan:
    """What ``config`` says of the run's evaluations, for the evaluation log (:mod:`experiments.evaluation.log`)."""
    return EvaluationPlan(
        opponents=tuple(config.eval_opponents),
        games=config.eval_games,
        final_games=config.final_eval_games,
        seed=config.seed,
        opening_plies=config.eval_opening_plies,
        sample_games=config.sample_games,
        grade_positions=config.grade_positions,
    )


def evaluation_log(config: TrainConfig, resumed: ResumePoint | None = None) -> EvaluationLog:
    """The run's evaluation log as a backend's ``start`` finds it: the config's :func:`evaluation_plan`, and from
    the checkpoint of a ``resumed`` run, the best score so far and the step of its latest evaluation."""
    log = EvaluationLog(evaluation_plan(config), config.variant)
    if resumed is not None:
        restore_evaluations(log, resumed)
    return log


def restore_evaluations(log: EvaluationLog, resumed: ResumePoint) -> None:
    """What the checkpoint of a ``resumed`` run records of its evaluations, into its ``log``: the best score so
    far and the steps of its latest evaluation logged whole and of the latest begun."""
    log.best_score, log.evaluated_at, log.begun_at = (
        resumed.best_score,
        resumed.evaluated_at,
        resumed.evaluation_begun_at,
    )
