"""The evaluation log of a training run, kept alike by every backend: the evaluation games, their TensorBoard
curves, the grade, the sample games, and the final table.

:class:`EvaluationPlan`
    what a run's config says of its evaluations (its opponents, games, seed, openings: ``opening_plies`` random
    actions, by default ``quarto tournament``'s 4, sample games and graded positions), in plain values: this
    floor does not import training.
:func:`evaluate_learner`, :class:`EvaluationLog`
    the evaluation games and their logging: every result under ``eval/<opponent>/<seat>/`` (``eval_sampled/``
    for a sampled policy, :func:`log_result`), the mean score ``eval/score``, the grade by the exact solver
    (``eval/grade/value_lost``, ``_critical``, ``_<phase>``, ``_empty_<low>_<high>``, and the same under
    ``eval/grade/<name>/`` for the other agents a backend grades), with ``sample_games`` a few of the games
    against the last opponent graded move by move (``games/sample_<n>`` and its ``/first_mistake``,
    :mod:`experiments.evaluation.sample_games`), the progress bar's line (what it is evaluating, then the scores
    and the seconds the evaluation took, off the bar's clock: :func:`paused`) and the scores each checkpoint
    records (``best_score``, ``latest_eval``).
:func:`report_final`
    the final table: ``final_eval.json`` (:func:`write_final_eval`) and the printed tables (:func:`print_results`,
    :func:`print_grades`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.base import Agent
from agents.storage.files import atomic_write_bytes
from experiments.evaluation.games import SEAT_NAMES, EvalResult, Mover, evaluate_all
from experiments.evaluation.grading import GradeReport, PositionValues, grade_agent, sample_decisions
from experiments.evaluation.sample_games import game_markdown, graded_games, mistake_picture
from experiments.run_folder import FINAL_TABLE_FILE
from quarto_env.core import State, Variant

FINAL_EVAL_SEED_OFFSET = 1000
"""The final table plays from ``seed + 1000``: other games than the evaluations during training."""

Record = Callable[[str, float], None]
"""Records a TensorBoard scalar under a tag, at the run's current step."""


@dataclasses.dataclass(frozen=True)
class EvaluationPlan:
    """The evaluations of a run, as its training config sets them (``eval_opponents``, ``eval_games``, ...)."""

    opponents: Sequence[str]
    """The agent specs the learner plays, the strongest last (its games are the sample games)."""
    games: int
    """The games against each opponent at every evaluation."""
    final_games: int
    """The games against each opponent in the final table."""
    seed: int
    """The run's seed: the evaluations' games and the graded positions start from it."""
    opening_plies: int
    """The random actions that open every game."""
    sample_games: int = 0
    """The games of every evaluation kept whole and graded move by move (0: none)."""
    grade_positions: int = 0
    """The positions the exact solver grades at every evaluation (0: no grade)."""


def evaluate_learner(
    players: Sequence[Mover], plan: EvaluationPlan, variant: Variant, *, final: bool = False
) -> list[EvalResult]:
    """``players`` (the learner's ways of playing: most likely action, sampled policy, search) against every
    evaluation opponent of the plan from its openings: ``games`` games each, or ``final_games`` for the final
    table, from :data:`FINAL_EVAL_SEED_OFFSET` seeds further. Each keeps its first ``sample_games`` games whole
    (none for the final table)."""
    games = plan.final_games if final else plan.games
    seed = plan.seed + FINAL_EVAL_SEED_OFFSET if final else plan.seed
    keep = 0 if final else plan.sample_games
    return evaluate_all(players, plan.opponents, variant, games, seed, plan.opening_plies, keep)


EVAL_PREFIXES = ("eval_sampled", "eval")
"""Where an evaluation's results go, indexed by its ``deterministic``: the learner sampling its policy (0), or playing
its most likely action, a search (1)."""


def tag_name(spec: str) -> str:
    """The agent ``spec`` as it names its TensorBoard tags: ``minimax:depth=2`` is ``minimax_depth2``."""
    return spec.replace(":", "_").replace("=", "").replace(",", "_")


def log_result(record: Record, result: EvalResult) -> None:
    """Record win/draw/loss rates and the score against one opponent, per seat and overall, under ``eval/``
    (most likely action) or ``eval_sampled/``."""
    prefix = EVAL_PREFIXES[result.deterministic]
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
    shares = {"value_lost": report.share_lost().share, "value_lost_critical": report.critical().share}
    for phase, lost in report.by_phase().items():
        shares[f"value_lost_{phase}"] = lost.share
    for low, high in GRADE_BUCKETS:
        lost = report.share_lost_between(low, high)
        if lost.total:
            shares[f"value_lost_empty_{low}_{high}"] = lost.share
    return shares


SAMPLE_TAG = "games/sample_{number}"
"""The Text tag of sample game ``number``; its first mistake's picture is ``games/sample_<number>/first_mistake``."""


def scalar_recorder(writer: SummaryWriter, step: int) -> Record:
    """:data:`Record` into ``writer`` at ``step``."""
    return lambda key, value: writer.add_scalar(key, value, step)


class EvaluationLog:
    """The evaluations of a run, logged alike by every backend; and what a checkpoint records of them (the best
    score so far, which a resumed run carries on).

    Each evaluation is handed what it needs: the learner's ways of playing, the run's TensorBoard writer and
    step, and the agents to grade by name (``""`` the learner as it plays, ``eval/grade/value_lost``; any other
    name under its own prefix, ``eval/grade/policy/value_lost``). The ``references`` are graded once, at the first
    grade, and logged again at every one -- a flat line to compare with, such as the same search with an untrained
    network. With ``grade_positions`` in the plan, the grade is on positions sampled, and solved, once per run
    (without, nothing is graded). With ``sample_games`` in the plan, every evaluation also writes that many of its
    games, graded move by move (:meth:`sample_games`)."""

    def __init__(
        self,
        plan: EvaluationPlan,
        variant: Variant,
        best_score: float = -1.0,
    ) -> None:
        self.plan = plan
        self.variant = variant
        self.best_score = best_score
        """The best mean score so far (-1 before the first evaluation): ``best.zip``'s."""
        self.latest: dict[str, float] = {}
        """The latest evaluation's scores, by opponent (and ``value lost``, the grade)."""
        self.evaluated_at = -1
        """The step of the latest evaluation logged whole (-1 before the first): a resumed run does not evaluate
        again at a step whose points its checkpoint says the curves have."""
        self.begun_at = -1
        """The step of the latest evaluation begun: where it differs from :attr:`evaluated_at`, a run was stopped
        during that evaluation, and its resume from that step evaluates there before it trains."""
        self._reference_grades: dict[str, GradeReport] | None = None
        self._positions: list[State] | None = None
        self._values = PositionValues(variant)
        """The exact action values of the graded positions and sample games, solved once per run."""

    def evaluate(
        self,
        players: Sequence[Mover],
        progress: tqdm,
        writer: SummaryWriter,
        step: int,
        graded: dict[str, Agent] | None = None,
        references: dict[str, Agent] | None = None,
    ) -> tuple[list[EvalResult], bool]:
        """One evaluation of ``players`` (:func:`evaluate_learner`), logged into ``writer`` at ``step`` with the
        grades of ``graded`` and the ``references`` (:meth:`log`), off the progress bar's clock (:func:`paused`);
        the bar says it is evaluating, then the scores and the seconds it took. Returns the results, and whether
        the mean score is the best so far (then ``best.zip`` is due)."""
        started = time.perf_counter()
        self.begun_at = step
        with paused(progress):
            progress.set_postfix_str(f"evaluating at step {progress.n:,} ...")
            results = evaluate_learner(players, self.plan, self.variant)
            improved = self.log(results, writer, step, graded or {}, references)
        progress.set_postfix_str(f"{self._summary(results)} ({time.perf_counter() - started:.0f} s)")
        return results, improved

    def log(
        self,
        results: list[EvalResult],
        writer: SummaryWriter,
        step: int,
        graded: dict[str, Agent],
        references: dict[str, Agent] | None = None,
    ) -> bool:
        """Log one evaluation into ``writer`` at ``step``: every result, the mean score, the grades of ``graded``
        and the ``references`` (where the plan grades); whether the mean score is the best so far.

        All or nothing: the grades and the sample games are worked out before the first point is written, so that
        a run stopped during an evaluation leaves none of it in TensorBoard (its resume evaluates there again)."""
        grades = self.grade_all(graded, references) if graded and self.plan.grade_positions else {}
        samples = self.sample_games(results[len(self.plan.opponents) - 1]) if self.plan.sample_games else []
        record = scalar_recorder(writer, step)
        for result in results:
            log_result(record, result)
        score = float(np.mean([r.score() for r in results]))
        record("eval/score", score)
        self.latest = {f"{r.opponent}{'' if r.deterministic else ' (sampled)'}": r.score() for r in results}
        for name, report in grades.items():
            self._log_grade(record, name, grade_shares(report))
        for number, (markdown, picture) in enumerate(samples):
            tag = SAMPLE_TAG.format(number=number)
            writer.add_text(tag, markdown, step)
            writer.add_image(f"{tag}/first_mistake", picture, step, dataformats="HWC")
        improved = score > self.best_score
        self.best_score = max(self.best_score, score)
        self.evaluated_at = step
        return improved

    def final_results(self, players: Sequence[Mover]) -> list[EvalResult]:
        """The final table's games of ``players`` (:func:`evaluate_learner` with ``final``)."""
        return evaluate_learner(players, self.plan, self.variant, final=True)

    def checkpoint_fields(self) -> dict[str, Any]:
        """What a checkpoint's ``quarto.json`` records of the evaluations."""
        return {
            "best_score": self.best_score,
            "latest_eval": self.latest,
            "evaluated_at": self.evaluated_at,
            "evaluation_begun_at": self.begun_at,
        }

    def grade_all(self, agents: dict[str, Agent], references: dict[str, Agent] | None = None) -> dict[str, GradeReport]:
        """The exact solver's grade of each of ``agents`` and of the ``references`` (graded at the first call,
        then reused: the run's are the same at every call), by name, on the run's positions (sampled and solved
        once per run)."""
        if self._positions is None:
            self._positions = sample_decisions(self.variant, self.plan.grade_positions, self.plan.seed)
        positions, values = self._positions, self._values
        if self._reference_grades is None:
            self._reference_grades = {
                name: grade_agent(agent, self.variant, positions, values) for name, agent in (references or {}).items()
            }
        reports = {name: grade_agent(agent, self.variant, positions, values) for name, agent in agents.items()}
        return {**reports, **self._reference_grades}

    def sample_games(self, result: EvalResult) -> list[tuple[str, np.ndarray]]:
        """The games ``result`` kept -- the learner's first way of playing against the last evaluation opponent --
        graded move by move (:mod:`experiments.evaluation.sample_games`): each as Markdown, for ``games/sample_<n>``,
        and the picture of its first value-losing decision, for ``games/sample_<n>/first_mistake``."""
        games = graded_games(result.games, result.opponent, self.variant, self._values)
        return [(game_markdown(game), mistake_picture(game, self.variant)) for game in games]

    def _log_grade(self, record: Record, name: str, shares: dict[str, float]) -> None:
        """Record ``shares`` under ``eval/grade/`` (``eval/grade/<name>/`` for another agent than the learner)."""
        prefix = "eval/grade/" + (f"{tag_name(name)}/" if name else "")
        for curve, share in shares.items():
            record(prefix + curve, share)
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
# The final table
# ---------------------------------------------------------------------------------------------------------


def report_final(
    run_dir: Path, checkpoint: Path, steps: int, results: list[EvalResult], grades: dict[str, GradeReport]
) -> None:
    """The final table of ``checkpoint`` at ``steps``: written to ``run_dir``'s ``final_eval.json`` and printed
    (with the ``grades``, where the backend graded). It is no point of the curves: the evaluation at the run's last
    step ends them, on the same games as the evaluations before it."""
    write_final_eval(run_dir, checkpoint, steps, results, grades)
    print_results(results, steps)
    if grades:
        print_grades(grades)


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
    atomic_write_bytes(run_dir / FINAL_TABLE_FILE, json.dumps(summary, indent=2).encode())


def print_grades(grades: dict[str, GradeReport]) -> None:
    """The final grades: per graded agent the share of value-losing decisions with its 95% interval, among the
    critical ones, and per empty-square bucket; the untrained reference's share over the learner's, where both
    are there (how many times fewer mistakes learning made)."""
    table = Table(
        title="value-losing decisions, graded by the exact solver",
        caption="share of the decisions that lose value (all: with its 95% interval; 1-4, ...: by empty squares), "
        "on the same positions for every agent",
    )
    buckets = [(lo, hi) for lo, hi in GRADE_BUCKETS if any(r.share_lost_between(lo, hi).total for r in grades.values())]
    for column in ("agent", "n", "all", "critical", *(f"{lo}-{hi}" for lo, hi in buckets)):
        table.add_column(column, justify="left" if column == "agent" else "right", no_wrap=True)
    for name, report in grades.items():
        share, low, high, _ = report.share_lost()
        by_bucket = [report.share_lost_between(lo, hi) for lo, hi in buckets]
        cells = [f"{bucket.share:.3f}" if bucket.total else "-" for bucket in (report.critical(), *by_bucket)]
        table.add_row(name or LEARNER_GRADE, str(len(report.decisions)), f"{share:.3f} [{low:.2f}, {high:.2f}]", *cells)
    Console().print(table)
    if "" in grades and "untrained" in grades and grades[""].share_lost().share > 0:
        ratio = grades["untrained"].share_lost().share / grades[""].share_lost().share
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
