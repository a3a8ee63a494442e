"""Draw the evaluation curves of training runs from their TensorBoard events, as one PNG.

Example usage::

    quarto plot runs/compare/* -o docs/compare.png
    quarto plot runs/default__0__20260101-120000 -o docs/curves.png --x time

One panel per evaluation opponent (``eval/<opponent>/score``: wins plus half the draws, both seats, the learner
playing its most likely action; with ``--sampled`` also ``eval_sampled/``), and for runs graded by the solver one
of ``eval/grade/value_lost``, one line per run, against learner steps or wall-clock minutes.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from quarto_env.checks import atomic_write_bytes, output_file_argument, shortened

GRADE_TAG = "eval/grade/value_lost"
VALUE_LOST = "value lost"
"""The panel of the solver-graded share of value-losing decisions (runs with ``grade_positions``)."""


def score_curves(run_dir: Path) -> dict[str, list[tuple[int, float, float]]]:
    """``{opponent: [(step, wall seconds since the first point, score), ...]}`` of one run; the sampled
    policy's curves are named ``<opponent> (sampled policy)``."""
    events = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    curves = {}
    tags = [t for t in events.Tags()["scalars"] if t.split("/")[0] in ("eval", "eval_sampled") and t.count("/") == 2]
    start = min((events.Scalars(t)[0].wall_time for t in tags), default=0.0)
    for tag in tags:
        prefix, opponent, what = tag.split("/")
        if tag == GRADE_TAG:
            curves[VALUE_LOST] = [(e.step, e.wall_time - start, e.value) for e in events.Scalars(tag)]
        elif what == "score":
            name = opponent if prefix == "eval" else f"{opponent} (sampled policy)"
            curves[name] = [(e.step, e.wall_time - start, e.value) for e in events.Scalars(tag)]
    return curves


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quarto plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (each with a tb/ folder)")
    parser.add_argument(
        "-o", "--output", type=output_file_argument("--output"), required=True, help="PNG file to write"
    )
    parser.add_argument("--x", choices=("steps", "time"), default="steps", help="horizontal axis")
    parser.add_argument("--sampled", action="store_true", help="a second row with the sampled policy's curves")
    parser.add_argument("--title", default="evaluation score (wins + draws/2, both seats)")
    args = parser.parse_args(argv)
    for run in args.runs:
        if not _has_events(run):
            parser.error(f"{shortened(str(run))!r} is not a training run folder: it has no tb/ with TensorBoard events")

    runs = {run.name: score_curves(run) for run in args.runs}
    names = sorted({o for curves in runs.values() for o in curves}, key=_opponent_order)
    opponents = [o for o in names if "sampled" not in o and o != VALUE_LOST]
    rows = [opponents, [f"{o} (sampled policy)" for o in opponents]] if args.sampled else [opponents]
    if VALUE_LOST in names:
        rows[0] = [*rows[0], VALUE_LOST]
        rows[1:] = [[*row, ""] for row in rows[1:]]
    columns = len(rows[0])
    figure, axes = plt.subplots(len(rows), columns, figsize=(5 * columns, 4 * len(rows)), squeeze=False)
    for row, panels in zip(axes, rows, strict=True):
        for axis, panel in zip(row, panels, strict=True):
            if not panel:
                axis.set_visible(False)
                continue
            for name, curves in runs.items():
                if panel in curves:
                    points = curves[panel]
                    xs = [p[0] / 1e6 if args.x == "steps" else p[1] / 60 for p in points]
                    axis.plot(xs, [p[2] for p in points], marker=".", label=name)
            axis.set_title(f"vs {panel}" if panel != VALUE_LOST else "value-losing decisions (solver-graded)")
            axis.set_xlabel("learner steps (millions)" if args.x == "steps" else "wall-clock minutes")
            axis.set_ylim(0, 1)
            axis.grid(alpha=0.3)
        row[0].set_ylabel("score")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    figure.suptitle(args.title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    atomic_write_bytes(args.output, buffer.getvalue())
    print(f"wrote {args.output}")
    return 0


def _has_events(run_dir: Path) -> bool:
    """Whether ``run_dir/tb`` holds a TensorBoard event file (a path the OS refuses holds none)."""
    try:
        return any((run_dir / "tb").glob("events.out.tfevents.*"))
    except (OSError, ValueError):
        return False


def _opponent_order(opponent: str) -> tuple[int, str]:
    """Baselines from the weakest: random, greedy, then the others by name."""
    known = ("random", "greedy")
    base = opponent.split(" ")[0]
    return (known.index(base) if base in known else len(known), opponent)
