"""One run's life, written once for every ``quarto train`` backend: :func:`train_run` opens it, trains it leap by
leap with the tasks of its schedule between the leaps, saves it on Ctrl-C, and ends it.

The contract. A backend hands :func:`train_run` a :class:`Learner`: its training state (the network, its optimizer
and what else it keeps -- a replay buffer, an opponent pool -- and the run's evaluation log with its best score,
built fresh or from the checkpoint a resume goes on from, by the backend's ``start``) and its training step. The
learner

- trains one leap at a time (:meth:`Learner.leap`: a round of self-play, a jitted iteration, an RLlib update) and
  counts its steps in :attr:`Learner.steps`; where a library owns the loop (MaskablePPO's ``learn``), it runs that
  loop instead and hands back between its leaps (:meth:`Learner.train`);
- writes its charts as it goes, or gathers them for :meth:`Learner.log_charts`;
- writes itself to a path (:meth:`Learner.save`, atomically: the checkpoint format's), with what ``--resume`` needs
  besides the network when asked;
- plays and is graded, as it trains or as a checkpoint read back from disk (:meth:`Learner.players`,
  :meth:`Learner.graded`, :meth:`Learner.references`);
- says what differs between the backends' runs in a few fixed :class:`Habits`.

Everything else is here, in the order a run meets it (the pieces are :mod:`experiments.training.run`'s and
:mod:`experiments.evaluation.log`'s):

1. TensorBoard (``tb/``) and the checkpoint set;
2. the schedule from the learner's step, and the progress bar to where the run stops;
3. the tasks due before the first leap (a fresh run's evaluation at step 0), then after every leap the tasks due:
   a snapshot for the opponent pool, an evaluation (``best.zip`` when its score is the best so far), a checkpoint;
   after the last leap an evaluation in any case, so that every curve ends with the final network;
4. Ctrl-C, or SIGTERM, anywhere in 3 saves ``latest.zip`` first (:func:`~experiments.training.run.saved_on_interrupt`);
5. the end: ``final.zip``, its final table as read back from disk, the closing lines.

``tests/test_train_loop.py`` drives it with a fake learner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.base import Agent
from experiments.evaluation.games import EvalResult, Mover
from experiments.evaluation.log import EvaluationLog, report_final
from experiments.training.config import TrainConfig
from experiments.training.run import (
    Checkpoints,
    Schedule,
    open_tensorboard,
    progress_bar,
    saved_on_interrupt,
    stopping_step,
    tensorboard_command,
)


@dataclasses.dataclass(frozen=True)
class Habits:
    """What differs between the backends' runs besides their step; fixed for a backend."""

    unit: str
    """The progress bar's unit: ``step`` (a decision of the learner) or ``pos`` (a searched position)."""
    leap: int | None = None
    """The steps of every leap where that is fixed: the run stops at the first whole leap at or past
    ``total_steps``, and says so (:func:`~experiments.training.run.stopping_step`, which names the leaps with
    ``leaps``). ``None``: the leaps vary, and the bar ends at ``total_steps``."""
    leaps: str = ""
    snapshots: bool = False
    """Whether the learner keeps a pool of its snapshots (the schedule's ``snapshot`` task)."""
    keeps_best: bool = True
    """Whether the run keeps ``best.zip``."""
    graded_besides: tuple[str, ...] = ()
    """The agents whose grades TensorBoard's layout shows beside the learner's (:func:`~experiments.training.run.
    learning_layout`)."""


class Learner:
    """A backend's training state and step, driven by :func:`train_run` (the methods with a body here are the
    defaults of a backend that has nothing to add)."""

    habits: Habits
    evaluations: EvaluationLog
    """The run's evaluation log, part of its state: a resumed run carries on its best score
    (:func:`~experiments.training.run.evaluation_log`)."""

    @property
    def steps(self) -> int:
        """The learner's steps so far (its decisions, or its searched positions)."""
        raise NotImplementedError

    def begin(self, run_dir: Path, writer: SummaryWriter) -> str:
        """Ready to train in ``run_dir``, charts into ``writer``; returns what a resumed run holds besides its
        network (``3 snapshots``), for the line that says it resumes."""
        raise NotImplementedError

    def leap(self) -> None:
        """Train one leap: a rollout, a round of self-play, an iteration."""
        raise NotImplementedError

    def train(self, until: int, after_leap: Callable[[], None]) -> None:
        """Train up to ``until`` steps, leap by leap, calling ``after_leap`` after each, the last one included. A
        backend whose library owns the loop (MaskablePPO's ``learn``) calls it where the library lets it instead,
        and once more after the loop."""
        while self.steps < until:
            self.leap()
            after_leap()

    def save(self, path: Path, resumable: bool) -> None:
        """Write a checkpoint at ``path`` (with what ``quarto.json`` records of the evaluations); ``resumable`` adds
        what ``--resume`` needs besides the network."""
        raise NotImplementedError

    def players(self, checkpoint: Path | None = None) -> list[Mover]:
        """The learner's ways of playing in the evaluations, or those of the network in ``checkpoint``."""
        raise NotImplementedError

    def agent_spec(self, final: Path) -> str:
        """The agent spec that plays the final checkpoint ``final``."""
        raise NotImplementedError

    def graded(self, checkpoint: Path | None = None) -> dict[str, Agent]:
        """The agents to grade by name (``""``: the learner as it plays), of the learner or of ``checkpoint``;
        none where the backend does not grade."""
        return {}

    def references(self) -> dict[str, Agent]:
        """The agents graded once per run, for comparison (the search with an untrained network)."""
        return {}

    def snapshot(self) -> None:
        """Add the learner as it stands to its pool of opponents (with :attr:`Habits.snapshots`)."""

    def log_charts(self) -> None:
        """Write the charts gathered since the last call; before each evaluation during training."""

    def after_evaluation(self, results: list[EvalResult]) -> None:
        """Anything the backend writes of an evaluation besides the evaluation log's."""


def train_run(config: TrainConfig, run_dir: Path, learner: Learner) -> Path:
    """Train ``learner`` up to ``total_steps`` in ``run_dir``, then end the run; returns the final checkpoint's
    path."""
    writer = open_tensorboard(run_dir, config, learner.steps, learner.habits.graded_besides)
    try:
        holds = learner.begin(run_dir, writer)
        if learner.steps:
            print(f"resuming {run_dir} at step {learner.steps:,} with {holds}")
        checkpoints = Checkpoints(run_dir, learner.save)
        references = learner.references() if config.grade_positions else {}
        _train(config, learner, writer, checkpoints, references)
        return _finish(config, learner, checkpoints, references)
    finally:
        writer.close()


def _train(
    config: TrainConfig,
    learner: Learner,
    writer: SummaryWriter,
    checkpoints: Checkpoints,
    references: dict[str, Agent],
) -> None:
    """Leap after leap up to ``total_steps``, each followed by the tasks due: step 3 of the module's list."""
    habits = learner.habits
    schedule = Schedule(config, learner.steps, snapshots=habits.snapshots)
    stop = config.total_steps
    if habits.leap is not None:
        stop = stopping_step(config, learner.steps, habits.leap, habits.leaps)
    progress = progress_bar(learner.steps, stop, habits.unit)
    grades = bool(config.grade_positions)

    def evaluate() -> None:
        if _evaluate(learner, writer, progress, grades, references) and habits.keeps_best:
            checkpoints.save_best()

    def run_due(trained: bool) -> None:
        due = schedule.due(learner.steps)
        # Every run evaluates at its last step, due or not: its curves end with the final network, one point a
        # tag (the final table, more games of the checkpoint read back, is final_eval.json's, not a curve's).
        last = trained and learner.steps >= config.total_steps
        if "snapshot" in due:
            learner.snapshot()
        # (a run resumed at step 0 whose checkpoint holds the evaluation there whole does not evaluate again)
        if ("evaluation" in due or last) and learner.evaluations.evaluated_at != learner.steps:
            if trained:  # nothing gathered before the first leap
                learner.log_charts()
            evaluate()
        if "checkpoint" in due:
            checkpoints.save_step(learner.steps)

    def after_leap() -> None:
        progress.update(learner.steps - progress.n)
        run_due(trained=True)

    # The bar closes as the block ends, also on Ctrl-C: it must not redraw under quarto train's message.
    with saved_on_interrupt(checkpoints), progress:
        run_due(trained=False)  # a fresh run's evaluation at step 0, before it trains
        evaluations = learner.evaluations
        if evaluations.begun_at == learner.steps != evaluations.evaluated_at:  # resumed from one stopped midway
            evaluate()
        learner.train(config.total_steps, after_leap)
        if learner.evaluations.evaluated_at != learner.steps:  # resumed at its last step, not evaluated there yet
            evaluate()


def _evaluate(
    learner: Learner, writer: SummaryWriter, progress: tqdm, grades: bool, references: dict[str, Agent]
) -> bool:
    """One evaluation of the learner as it stands (graded beside the ``references`` where the run ``grades``);
    whether its score is the best so far."""
    graded = learner.graded() if grades else {}  # built only where they are graded
    evaluations = learner.evaluations
    results, improved = evaluations.evaluate(learner.players(), progress, writer, learner.steps, graded, references)
    learner.after_evaluation(results)
    writer.flush()
    return improved


def _finish(config: TrainConfig, learner: Learner, checkpoints: Checkpoints, references: dict[str, Agent]) -> Path:
    """Save ``final.zip`` (and ``latest.zip``), evaluate and grade the final checkpoint as read back from disk,
    and report the final table (:func:`~experiments.evaluation.log.report_final`), then the closing lines (the
    checkpoint, the agent spec that plays it, TensorBoard); returns its path."""
    final, evaluations = checkpoints.save_final(), learner.evaluations
    results = evaluations.final_results(learner.players(final))
    graded = learner.graded(final) if config.grade_positions else {}
    grades = evaluations.grade_all(graded, references) if graded else {}
    report_final(checkpoints.run_dir, final, learner.steps, results, grades)
    print(f"\nfinal checkpoint: {final}\nagent spec: {learner.agent_spec(final)}")
    print(tensorboard_command(checkpoints.run_dir))
    return final
