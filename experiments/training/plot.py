"""Draw the evaluation curves of training runs from their TensorBoard events, as one PNG.

Example usage::

    quarto plot runs/compare/* --out docs/compare.png
    quarto plot runs/default__0__20260101-120000 --out docs/curves.png --x time
    quarto plot runs/default__0__20260101-120000 --out docs/curves.png --argmax   # also the most likely action

By default, the curves that show learning: one panel per evaluation opponent with the score of the learner
sampling its policy (``eval_sampled/<opponent>/score``: wins plus half the draws, both seats), and for runs graded
by the solver one of ``eval/grade/value_lost``; one line per run, against learner steps or wall-clock minutes. A
run without sampled curves (``algorithm: alphazero``, whose evaluations play its search) draws its
``eval/<opponent>/score`` there instead. ``--argmax`` adds a row with the learner playing its most likely action
(``eval/<opponent>/score``), which against a deterministic opponent from the empty board replays two games and
moves in steps of 0.25 (``eval_opening_plies: 0``). ``--sampled``, the default now, is still accepted.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.files import atomic_write_bytes
from experiments.options import CommandParser, add_out_argument, output_file_argument
from quarto_env.checks import shortened

GRADE_TAG = "eval/grade/value_lost"
VALUE_LOST = "value lost"
"""The panel of the solver-graded share of value-losing decisions (runs with ``grade_positions``)."""
SAMPLED = " (sampled policy)"
"""What names the sampled policy's curve of an opponent: ``greedy (sampled policy)``."""


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
            name = opponent if prefix == "eval" else opponent + SAMPLED
            curves[name] = [(e.step, e.wall_time - start, e.value) for e in events.Scalars(tag)]
    return curves


Line = tuple[str, list[tuple[int, float, float]]]
"""A curve of a panel: its legend label, and its points ``(step, wall seconds, value)``."""


@dataclasses.dataclass
class Panel:
    """One panel of the figure: its title and its curves."""

    title: str
    lines: list[Line]


def panels(runs: dict[str, dict[str, list[tuple[int, float, float]]]], argmax: bool) -> list[list[Panel]]:
    """The figure's rows of panels for the runs' curves (:func:`score_curves`, by run name): the sampled policy's
    score per opponent (a run without it: its ``eval/`` curve, labelled so) and the value lost; with ``argmax``,
    a second row of the most likely action's scores (of the runs that have both)."""
    names = sorted({o for curves in runs.values() for o in curves}, key=_opponent_order)
    opponents = [o for o in names if not o.endswith(SAMPLED) and o != VALUE_LOST]
    informative = []
    for opponent in opponents:
        lines = []
        for run, curves in runs.items():
            if opponent + SAMPLED in curves:
                lines.append((run, curves[opponent + SAMPLED]))
            elif opponent in curves:
                lines.append((f"{run} (no sampled curve: eval/)", curves[opponent]))
        informative.append(Panel(f"vs {opponent}{SAMPLED}", lines))
    if VALUE_LOST in names:
        lines = [(run, curves[VALUE_LOST]) for run, curves in runs.items() if VALUE_LOST in curves]
        informative.append(Panel("value-losing decisions (solver-graded)", lines))
    rows = [informative]
    if argmax:
        rows.append(
            [
                Panel(
                    f"vs {opponent} (most likely action)",
                    [(run, c[opponent]) for run, c in runs.items() if opponent in c and opponent + SAMPLED in c],
                )
                for opponent in opponents
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="quarto plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (each with a tb/ folder)")
    add_out_argument(
        parser,
        "-o",
        "--output",
        type=output_file_argument("--out"),
        required=True,
        metavar="FILE",
        help="PNG file to write",
    )
    parser.add_argument("--x", choices=("steps", "time"), default="steps", help="horizontal axis")
    parser.add_argument(
        "--argmax", action="store_true", help="a second row with the learner playing its most likely action"
    )
    parser.add_argument("--sampled", action="store_true", help="the sampled policy's curves: the default now")
    parser.add_argument("--title", default="evaluation score (wins + draws/2, both seats)")
    args = parser.parse_args(argv)
    for run in args.runs:
        if not _has_events(run):
            parser.error(f"{shortened(str(run))!r} is not a training run folder: it has no tb/ with TensorBoard events")

    rows = panels({run.name: score_curves(run) for run in args.runs}, args.argmax)
    columns = max(len(row) for row in rows)
    figure, axes = plt.subplots(len(rows), columns, figsize=(5 * columns, 4 * len(rows)), squeeze=False)
    for row_axes, row in zip(axes, rows, strict=True):
        for column, axis in enumerate(row_axes):
            if column >= len(row):
                axis.set_visible(False)
                continue
            _draw(axis, row[column], args.x)
        row_axes[0].set_ylabel("score")
    axes[0][len(rows[0]) - 1].legend(fontsize=8, loc="lower right")
    figure.suptitle(args.title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    atomic_write_bytes(args.out, buffer.getvalue())
    print(f"wrote {args.out}")
    return 0


def _draw(axis: Any, panel: Panel, x: str) -> None:
    for label, points in panel.lines:
        xs = [p[0] / 1e6 if x == "steps" else p[1] / 60 for p in points]
        axis.plot(xs, [p[2] for p in points], marker=".", label=label)
    axis.set_title(panel.title)
    axis.set_xlabel("learner steps (millions)" if x == "steps" else "wall-clock minutes")
    axis.set_ylim(0, 1)
    axis.grid(alpha=0.3)


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
