"""The statistics of ``quarto sweep`` over seeds: per setting, the mean of every final score and curve point,
its 95% Student-t interval and its interquartile mean (the interquartile mean as rliable computes it: Agarwal et
al. 2021, "Deep RL at the edge of the statistical precipice"), written as CSV, Markdown and a PNG of the curves
with their bands.

Why a t-interval and not rliable's percentile bootstrap: a sweep has a few seeds per setting, and over three
seeds the bootstrap's 2.5% and 97.5% quantiles are the lowest and the highest seed, an interval that holds the
mean about three times in four (docs/scaling.md has the simulation), where the t-interval's 95% holds.

It reads finished run folders only; running the trials is :mod:`experiments.training.sweep`'s."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from agents.storage.files import atomic_write_bytes
from experiments.evaluation.tables import markdown_table
from experiments.run_folder import FINAL_TABLE_FILE
from experiments.training.config_file import load_config

CONFIDENCE = 0.95
CURVE_TAGS = re.compile(r"^eval(_sampled)?/[^/]+/score$|^eval/grade/value_lost$")
"""The TensorBoard scalars aggregated across seeds."""
WALL_CLOCK = "(wall clock)"
"""The opponent column of the row that gives each trial's training minutes (:func:`training_minutes`)."""


@dataclasses.dataclass(frozen=True)
class Summary:
    """Statistics of one quantity over seeds."""

    mean: float
    low: float
    """The 95% Student-t interval of the mean over the seeds (equal to the mean with one seed, or seeds alike)."""
    high: float
    iqm: float
    """The interquartile mean: the mean of the middle half (the 25% lowest and highest cut, rounded down)."""


def summarize(values: list[float], bounds: tuple[float, float] = (-math.inf, math.inf)) -> Summary:
    """Mean, its 95% Student-t interval over the values (n - 1 degrees of freedom) and interquartile mean; the
    interval cut to ``bounds``, where the quantity lies (a score's 0 to 1): few seeds give a wide one."""
    from scipy import stats

    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if len(data) < 2 or np.all(data == data[0]):  # no spread to scale the interval by
        low = high = mean
    else:
        low, high = (float(end) for end in stats.t.interval(CONFIDENCE, len(data) - 1, loc=mean, scale=stats.sem(data)))
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Summary(mean, low, high, float(stats.trim_mean(data, 0.25)))


def read_final_eval(run_dir: Path) -> list[dict[str, Any]]:
    """The results of a run's ``final_eval.json`` (opponent, policy, score, ...)."""
    return json.loads((run_dir / FINAL_TABLE_FILE).read_text(encoding="utf-8"))["results"]


def read_curves(run_dir: Path) -> dict[str, dict[int, float]]:
    """The run's TensorBoard scalars that :data:`CURVE_TAGS` names: tag -> step -> value (the last one written
    at a step, which is the resumed run's when a run was resumed over it)."""
    curves: dict[str, dict[int, float]] = {}
    for accumulator in _event_folders(run_dir):
        for tag in filter(CURVE_TAGS.match, accumulator.Tags()["scalars"]):
            curves.setdefault(tag, {}).update({e.step: e.value for e in accumulator.Scalars(tag)})
    return curves


def training_minutes(run_dir: Path) -> float:
    """Wall-clock minutes from the run's first TensorBoard scalar to its last (the evaluation at the last step):
    the training and its evaluations, without the start-up and without the final table, played after it (runs
    before 2026-12-07 wrote scalars of the final table, whose games were counted); a resumed run's pause counts
    too."""
    times = [
        event.wall_time
        for accumulator in _event_folders(run_dir)
        for tag in accumulator.Tags()["scalars"]
        for event in accumulator.Scalars(tag)
    ]
    return (max(times) - min(times)) / 60 if times else float("nan")


def _event_folders(run_dir: Path) -> list[Any]:
    """The scalars of the run's TensorBoard folders, one reader per folder: each reads the folder's event files in
    order, and hides what a resumed run purged (:func:`~experiments.training.run.open_tensorboard`)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulators = []
    for folder in sorted({events.parent for events in (run_dir / "tb").glob("**/events.out.tfevents.*")}):
        accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
        accumulator.Reload()
        accumulators.append(accumulator)
    return accumulators


class SeedRun(NamedTuple):
    """One seed of one setting, and its run folder."""

    setting: str
    seed: int
    run_dir: Path


def aggregate(out: Path, runs: Sequence[SeedRun]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The final scores and the curves of the finished runs over their seeds, one row per setting and quantity
    (a curve row per evaluation, its step rounded by :func:`snapped`, at which every seed of the setting has a
    value); also written as ``results.csv``,
    ``results.md``, ``curves.csv`` and ``curves.png`` in ``out``."""
    finals: dict[tuple[str, str, str], dict[int, float]] = {}
    curves: dict[tuple[str, str, int], dict[int, float]] = {}
    seeds_done: dict[str, set[int]] = {}
    for trial in runs:
        run_dir = trial.run_dir
        if not (run_dir / FINAL_TABLE_FILE).exists():
            continue
        seeds_done.setdefault(trial.setting, set()).add(trial.seed)
        for result in read_final_eval(run_dir):
            finals.setdefault((trial.setting, result["opponent"], result["policy"]), {})[trial.seed] = result["score"]
        finals.setdefault((trial.setting, WALL_CLOCK, "minutes"), {})[trial.seed] = training_minutes(run_dir)
        config = load_config(run_dir / "config.yaml")
        for tag, points in read_curves(run_dir).items():
            for step, value in sorted(points.items()):  # the later of two steps in one bin wins: the final one
                at = snapped(step, config.eval_every, config.early_evals, config.total_steps)
                curves.setdefault((trial.setting, tag, at), {})[trial.seed] = value
    final_rows = [
        _row({"setting": setting, "opponent": opponent, "policy": policy}, by_seed)
        for (setting, opponent, policy), by_seed in finals.items()
    ]
    curve_rows = [
        _row({"setting": setting, "tag": tag, "step": step}, by_seed)
        for (setting, tag, step), by_seed in sorted(curves.items())
        if set(by_seed) == seeds_done[setting]
    ]
    _write_csv(out / "results.csv", final_rows)
    _write_csv(out / "curves.csv", curve_rows)
    atomic_write_bytes(out / "results.md", markdown(final_rows).encode())
    if curve_rows:
        plot_curves(curve_rows, out / "curves.png")
    return final_rows, curve_rows


def snapped(step: int, every: int, early: Sequence[int] = (), last: int | None = None) -> int:
    """``step`` rounded to the nearest point of the evaluation schedule -- a multiple of ``every`` (0 included) or
    a step of ``early`` (the config's ``early_evals``; :class:`experiments.training.run.Schedule`): the evaluation
    it belongs to, the later point on a tie. Runs log each evaluation at the first rollout past its point, and a
    resumed run's rollouts fall elsewhere, so the same evaluation has other step numbers in other seeds
    (1,000,064 in one, 1,003,520 in another; 16,384 for the early point 16,000). With ``last`` (the config's
    ``total_steps``), the evaluation every run makes at its end is a point of its own: a step at or past ``last``
    is ``last``, and the others keep to the points before it."""
    if last is not None and step >= last:
        return last
    below = step // every * every
    points = {below, below + every, *early}
    before_last = {point for point in points if last is None or point < last}
    return min(before_last or {below}, key=lambda point: (abs(step - point), -point))


def _row(keys: dict[str, Any], by_seed: dict[int, float]) -> dict[str, Any]:
    # Every quantity is a score or a share (0 to 1), but the wall clock's minutes
    bounds = (0.0, math.inf) if keys.get("opponent") == WALL_CLOCK else (0.0, 1.0)
    summary = summarize([by_seed[s] for s in sorted(by_seed)], bounds)
    scores = " ".join(f"{seed}:{by_seed[seed]:.4f}" for seed in sorted(by_seed))
    return {**keys, "seeds": len(by_seed), **dataclasses.asdict(summary), "by_seed": scores}


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    text = io.StringIO()
    if rows:
        writer = csv.DictWriter(text, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    atomic_write_bytes(path, text.getvalue().encode())


def markdown(rows: list[dict[str, Any]]) -> str:
    """The final scores (and training minutes) as a Markdown table: mean with its interval, interquartile mean,
    every seed's value."""
    header = ["setting", "opponent", "learner", "seeds", "mean [95% CI]", "IQM", "by seed"]
    cells = [
        [
            r["setting"],
            r["opponent"],
            r["policy"],
            str(r["seeds"]),
            f"{r['mean']:.3f} [{r['low']:.3f}, {r['high']:.3f}]",
            f"{r['iqm']:.3f}",
            r["by_seed"],
        ]
        for r in rows
    ]
    return markdown_table(header, cells)


def plot_curves(rows: list[dict[str, Any]], path: Path) -> None:
    """One panel per curve tag, one line per setting: the mean over seeds, the 95% interval as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tags = sorted({r["tag"] for r in rows})
    columns = min(3, len(tags))
    figure, axes = plt.subplots(
        -(-len(tags) // columns), columns, figsize=(5 * columns, 3.4 * -(-len(tags) // columns)), squeeze=False
    )
    for axis, tag in zip(axes.flat, tags, strict=False):
        for setting in sorted({r["setting"] for r in rows}):
            points = [r for r in rows if r["tag"] == tag and r["setting"] == setting]
            steps = [r["step"] for r in points]
            axis.plot(
                steps,
                [r["mean"] for r in points],
                label=f"{setting} ({points[0]['seeds']} seeds)" if points else setting,
            )
            axis.fill_between(steps, [r["low"] for r in points], [r["high"] for r in points], alpha=0.25)
        axis.set_title(tag, fontsize=9)
        axis.set_xlabel("learner steps")
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(tags) :]:
        axis.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    figure.suptitle("mean over seeds; band: 95% Student-t interval of the mean", fontsize=10)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())
