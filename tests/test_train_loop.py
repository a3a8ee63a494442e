"""The run's life (experiments/training/loop.py), driven with a fake backend: a learner that counts its steps in
leaps of 10 and writes real, sealed checkpoints of its step count. What the skeleton owns is checked on it: the
tasks on the schedule (snapshots, evaluations, checkpoints), ``best.zip``, the evaluation at the last step, the
save at Ctrl-C, a resume from the newest intact checkpoint, and the end of the run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from torch.utils.tensorboard import SummaryWriter

from agents.networks.checkpoints import CheckpointHeader, read_metadata, read_weights, write_checkpoint
from experiments.evaluation import log
from experiments.evaluation.games import EvalResult, Mover
from experiments.training.config import TrainConfig
from experiments.training.config_file import config_from_dict
from experiments.training.loop import Habits, Learner, train_run
from experiments.training.run import evaluation_log, has_checkpoint, read_resume_point
from quarto_env.core import INITIAL_STATE

LEAP = 10
STATE_ENTRY = "state.pt"


class FakeLearner(Learner):
    """Steps in leaps of :data:`LEAP`; writes what it did in ``calls``; Ctrl-C in the leap that would reach
    ``stop_at``."""

    def __init__(
        self, config: TrainConfig, habits: Habits, steps: int = 0, best_score: float = -1.0, evaluated_at: int = -1
    ) -> None:
        self.config, self.habits, self.count = config, habits, steps
        self.evaluations = evaluation_log(config)
        self.evaluations.best_score, self.evaluations.evaluated_at = best_score, evaluated_at
        self.calls: list[tuple[str, int]] = []
        self.stop_at: int | None = None

    @property
    def steps(self) -> int:
        return self.count

    def begin(self, run_dir: Path, writer: SummaryWriter) -> str:
        self.calls.append(("begin", self.count))
        return "nothing else"

    def leap(self) -> None:
        if self.count + LEAP == self.stop_at:
            raise KeyboardInterrupt
        self.count += LEAP

    def snapshot(self) -> None:
        self.calls.append(("snapshot", self.count))

    def log_charts(self) -> None:
        self.calls.append(("charts", self.count))

    def players(self, checkpoint: Path | None = None) -> list[Mover]:
        self.calls.append(("players", self.count if checkpoint is None else read_metadata(checkpoint)["num_timesteps"]))
        return []

    def save(self, path: Path, resumable: bool) -> None:
        self.calls.append((f"save {path.name}{' resumable' if resumable else ''}", self.count))
        header = CheckpointHeader(self.config.variant, self.config.observation.name, self.count)
        metadata = {"config": self.config.to_dict(), **self.evaluations.checkpoint_fields()}
        entries = {STATE_ENTRY: {"count": self.count}} if resumable else {}
        write_checkpoint(path, "fake", header, metadata, entries)

    def agent_spec(self, final: Path) -> str:
        return f"fake:{final}"

    def done(self, kind: str) -> list[int]:
        """The steps at which ``kind`` was done."""
        return [step for call, step in self.calls if call == kind]


def fake_config(**fields: Any) -> TrainConfig:
    settings = {
        "total_steps": 50,
        "eval_every": 20,
        "early_evals": [0],
        "checkpoint_every": 30,
        "snapshot_every": 25,
        "grade_positions": 0,
        "sample_games": 0,
    }
    return config_from_dict({**settings, **fields})


@pytest.fixture
def scores(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The evaluations play no game: each scores the next of the list (then the last again)."""
    given: list[float] = []
    calls = iter(range(1_000))

    def evaluate(players: Sequence[Mover], *args: Any, **kwargs: Any) -> list[EvalResult]:
        wins = round(given[min(next(calls), len(given) - 1)] * 4)  # of 4 games in each seat
        return [EvalResult("random", {0: (wins, 0, 4 - wins), 1: (wins, 0, 4 - wins)}, INITIAL_STATE, True, "argmax")]

    monkeypatch.setattr(log, "evaluate_learner", evaluate)
    given.append(0.5)
    return given


def test_the_run_does_its_tasks_on_the_schedule_and_ends_with_the_final_checkpoint(
    tmp_path: Path, scores: list[float], capsys: pytest.CaptureFixture
) -> None:
    learner = FakeLearner(fake_config(), Habits("step", LEAP, "leaps of {leap}", snapshots=True))
    final = train_run(learner.config, tmp_path, learner)
    assert final == tmp_path / "checkpoints" / "final.zip" and read_metadata(final)["num_timesteps"] == 50
    # early_evals=[0], every 20, at the last step (not due: 50 is no multiple of 20), then the final table's
    assert learner.done("players") == [0, 20, 40, 50, 50]
    assert learner.done("snapshot") == [30, 50]  # the first step at or past each multiple of 25
    assert learner.done("save step_000000030.zip") == [30] and learner.done("save latest.zip resumable") == [30, 50]
    assert learner.done("charts") == [20, 40, 50]  # before each evaluation after a leap
    assert learner.done("save best.zip") == [0]  # the first score is the best: 0.5 stays
    assert (tmp_path / "final_eval.json").is_file() and list((tmp_path / "tb").iterdir())
    assert f"agent spec: fake:{final}" in capsys.readouterr().out


def test_best_zip_follows_the_best_score_and_a_backend_without_it_keeps_none(
    tmp_path: Path, scores: list[float]
) -> None:
    scores[:] = [0.25, 0.75, 0.5]
    learner = FakeLearner(fake_config(), Habits("step", LEAP, "leaps of {leap}"))
    train_run(learner.config, tmp_path / "best", learner)
    assert learner.done("save best.zip") == [0, 20]
    assert read_metadata(tmp_path / "best" / "checkpoints" / "final.zip")["best_score"] == 0.75
    without = FakeLearner(fake_config(), Habits("step", keeps_best=False))
    train_run(without.config, tmp_path / "none", without)
    assert not without.done("save best.zip") and not (tmp_path / "none" / "checkpoints" / "best.zip").exists()


@pytest.mark.parametrize("total_steps", [50, 60])
def test_the_curves_end_at_the_last_step_with_one_point_a_tag(
    tmp_path: Path, scores: list[float], total_steps: int
) -> None:
    """Whether or not an evaluation is due at the last step (60 is a multiple of eval_every=20, 50 is not), the
    run evaluates there once, and the final table writes no point of its own: each tag has one point a step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scores[:] = [0.25, 0.5, 0.75, 1.0, 0.0]  # the final table's 0.0 would show as a second point at the end
    learner = FakeLearner(fake_config(total_steps=total_steps), Habits("pos", LEAP, "leaps of {leap}"))
    train_run(learner.config, tmp_path, learner)
    assert learner.done("players") == [0, 20, 40, total_steps, total_steps]  # the last evaluation, the final table
    events = EventAccumulator(str(tmp_path / "tb")).Reload()
    for tag in ("eval/score", "eval/random/score"):
        points = [(event.step, event.value) for event in events.Scalars(tag)]
        assert points == [(0, 0.25), (20, 0.5), (40, 0.75), (total_steps, 1.0)], (tag, points)


def test_ctrl_c_saves_latest_zip_and_the_resume_goes_on_from_the_newest_intact_checkpoint(
    tmp_path: Path, scores: list[float], capsys: pytest.CaptureFixture
) -> None:
    config = fake_config()
    learner = FakeLearner(config, Habits("step", LEAP, "leaps of {leap}"))
    learner.stop_at = 40  # Ctrl-C in the leap from 30 to 40
    with pytest.raises(KeyboardInterrupt):
        train_run(config, tmp_path, learner)
    latest = tmp_path / "checkpoints" / "latest.zip"
    assert learner.calls[-1] == ("save latest.zip resumable", 30)
    assert read_weights(latest, STATE_ENTRY) == {"count": 30}
    assert not (tmp_path / "checkpoints" / "final.zip").exists()

    latest.write_bytes(latest.read_bytes()[:-40])  # damaged: the resume takes step_000000030.zip beside it
    point = read_resume_point(config, tmp_path, with_pool=False)
    assert point.checkpoint.name == "step_000000030.zip" and point.steps == 30 and not point.complete
    assert "the newest intact checkpoint, at step 30" in capsys.readouterr().err
    resumed = FakeLearner(
        config, Habits("step", LEAP, "leaps of {leap}"), point.steps, point.best_score, point.evaluated_at
    )
    train_run(config, tmp_path, resumed)
    assert ("begin", 30) in resumed.calls and "resuming" in capsys.readouterr().out
    assert resumed.done("players") == [40, 50, 50]  # not the points it had passed; the last step, the final table
    assert read_metadata(latest)["num_timesteps"] == 50 and has_checkpoint(tmp_path)


def test_a_run_resumed_at_its_last_step_still_ends_its_curves_there(tmp_path: Path, scores: list[float]) -> None:
    """Stopped in its last evaluation, a run's latest.zip is at total_steps: the resume trains no leap, and
    evaluates there before its final table (else the curves would end a leap early)."""
    resumed = FakeLearner(fake_config(), Habits("step", LEAP, "leaps of {leap}"), 50)
    train_run(resumed.config, tmp_path, resumed)
    assert resumed.done("players") == [50, 50]  # the last evaluation, then the final table's
    # Stopped in its final table instead: its checkpoint records the evaluation at 50, which is not done again.
    evaluated = FakeLearner(fake_config(), Habits("step", LEAP, "leaps of {leap}"), 50, evaluated_at=50)
    train_run(evaluated.config, tmp_path / "evaluated", evaluated)
    assert evaluated.done("players") == [50]  # the final table's alone
    finished = FakeLearner(fake_config(), Habits("step", LEAP, "leaps of {leap}"))
    train_run(finished.config, tmp_path / "whole", finished)
    assert finished.done("players").count(50) == 2  # not a third time after the last leap's


class ChartingLearner(FakeLearner):
    """Writes ``charts/SPS`` where a backend logs its charts: before each evaluation after a leap."""

    def begin(self, run_dir: Path, writer: SummaryWriter) -> str:
        self.writer = writer
        return super().begin(run_dir, writer)

    def log_charts(self) -> None:
        self.writer.add_scalar("charts/SPS", float(self.count), self.count)
        super().log_charts()


@pytest.mark.parametrize("stopped_at", [0, 20, 50])
def test_a_run_stopped_during_an_evaluation_resumes_with_that_evaluation_whole_and_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stopped_at: int
) -> None:
    """Ctrl-C in the evaluation at step 0, in the middle or at the last step: latest.zip is saved at that step,
    nothing of that evaluation is in TensorBoard, the resume evaluates there before it goes on, and every tag ends
    with one point a step -- the charts written before the evaluation kept."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from experiments.training.run import restore_evaluations

    learner: list[FakeLearner] = []

    def evaluate(players: Sequence[Mover], *args: Any, **kwargs: Any) -> list[EvalResult]:
        if learner[0].count == stopped_at and len(learner) == 1:
            raise KeyboardInterrupt
        return [EvalResult("random", {0: (2, 0, 2), 1: (2, 0, 2)}, INITIAL_STATE, True, "argmax")]

    monkeypatch.setattr(log, "evaluate_learner", evaluate)
    config = fake_config()
    learner.append(ChartingLearner(config, Habits("step", LEAP, "leaps of {leap}")))
    with pytest.raises(KeyboardInterrupt):
        train_run(config, tmp_path, learner[0])
    point = read_resume_point(config, tmp_path, with_pool=False)
    assert (point.steps, point.evaluation_begun_at) == (stopped_at, stopped_at) != (stopped_at, point.evaluated_at)
    resumed = ChartingLearner(config, Habits("step", LEAP, "leaps of {leap}"), point.steps)
    restore_evaluations(resumed.evaluations, point)
    learner.append(resumed)
    train_run(config, tmp_path, resumed)
    assert resumed.done("players")[0] == stopped_at  # that evaluation first, then the schedule's
    events = EventAccumulator(str(tmp_path / "tb")).Reload()
    for tag in ("eval/score", "eval/random/score", "charts/SPS"):
        steps = [event.step for event in events.Scalars(tag)]
        expected = [0, 20, 40, 50] if tag.startswith("eval") else [20, 40, 50]
        assert steps == expected, (tag, steps)


def test_an_evaluation_stopped_in_its_grade_writes_no_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The grade (and the sample games) are worked out before the first point is written: stopped there, an
    evaluation leaves nothing in TensorBoard for the resume to duplicate."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    evaluations = evaluation_log(fake_config(grade_positions=4))

    def stopped(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluations, "grade_all", stopped)
    writer = SummaryWriter(str(tmp_path))
    result = EvalResult("random", {0: (2, 0, 2), 1: (2, 0, 2)}, INITIAL_STATE, True, "argmax")
    with pytest.raises(KeyboardInterrupt):
        evaluations.log([result], writer, 10, graded={"": object()})  # type: ignore[dict-item]
    writer.close()
    assert EventAccumulator(str(tmp_path)).Reload().Tags()["scalars"] == []
    assert evaluations.evaluated_at == -1
