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

``--probe`` draws the supervised probe's data-scaling curve instead, from the JSON records of
``quarto bench network --json`` (docs/learnability.md): the share of critical positions whose pick loses value,
held out and on the training set, against the number of labelled positions, one line per design and budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.backend_bases import FigureCanvasBase
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.storage.files import atomic_write_bytes
from experiments.options import CommandParser, add_out_argument, input_file_or_exit
from experiments.output import add_overwrite_argument, claim_output
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
        # "(sampled policy)" only where a run has that curve: an alphazero run's eval/ curve is its search's
        sampled = any(opponent + SAMPLED in curves for curves in runs.values())
        informative.append(Panel(f"vs {opponent}{SAMPLED if sampled else ''}", lines))
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


ProbePoint = tuple[int, float, float, float]
"""A point of a probe line: labelled positions, and the shares lost on the training set, the test set, and by a
random candidate of the test set."""


def probe_lines(records: list[dict[str, Any]]) -> dict[str, list[ProbePoint]]:
    """The probe records' points by line, ordered by positions. A line is one design (width, iterations), input
    planes and training setting; records that differ in the network seed alone are averaged. Its label names the
    design, the planes, the epochs and the augmentation, and where two lines would share a label, the other
    settings that tell them apart."""
    grouped: dict[tuple[str, str], dict[int, list[tuple[float, float, float]]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        protocol = record["protocol"]
        settings = {key: value for key, value in protocol["settings"].items() if key != "seed"}
        for result in record["results"]:
            iterations = f" x{result['iterations']}" if "iterations" in result else ""
            label = f"{result['design']} w{result['width']}{iterations}, {protocol['observation']} planes, "
            label += f"{settings['epochs']} epochs" + ("" if settings["augment"] else ", no augmentation")
            train, test = (_all_row(result[part]) for part in ("train", "test"))
            shares = (train["network_lost"], test["network_lost"], test["random_lost"])
            grouped[label, json.dumps(settings, sort_keys=True)][protocol["positions"]].append(shares)
    labels = [label for label, _ in grouped]
    return {
        _line_label(label, settings, labels.count(label) > 1): [
            (size, *(sum(column) / len(column) for column in zip(*points, strict=True)))
            for size, points in sorted(sizes.items())
        ]
        for (label, settings), sizes in grouped.items()
    }


def _line_label(label: str, settings: str, shared: bool) -> str:
    """``label``, followed by the training ``settings`` (JSON) other than those it names when another line
    ``shared`` it."""
    if not shared:
        return label
    named = ("epochs", "augment")
    return label + " (" + ", ".join(f"{k} {v}" for k, v in json.loads(settings).items() if k not in named) + ")"


def _all_row(part: dict[str, Any]) -> dict[str, Any]:
    """The row of a probe record's part (train or test) over every number of empty squares."""
    return next(row for row in part["empty"] if row["empty"] == "all")


def probe_figure(lines: dict[str, list[ProbePoint]]) -> Any:
    """One panel: each line's test share (solid) and training share (dashed) against the positions (log scale),
    and a random candidate's test share (dotted)."""
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for label, points in lines.items():
        sizes = [p[0] for p in points]
        (test,) = axis.plot(sizes, [100 * p[2] for p in points], marker="o", label=f"{label}: held out")
        axis.plot(
            sizes,
            [100 * p[1] for p in points],
            ls="--",
            marker="x",
            color=test.get_color(),
            label=f"{label}: trained on",
        )
    randoms = sorted({(p[0], p[3]) for points in lines.values() for p in points})
    axis.plot([r[0] for r in randoms], [100 * r[1] for r in randoms], ls=":", color="grey", label="a random candidate")
    axis.set_xscale("log")
    axis.set_xlabel("labelled positions (75% trained on, 25% held out)")
    axis.set_ylabel("critical positions whose pick loses value (%)")
    axis.set_ylim(0, 60)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="lower right")
    return figure


def _probe_record(parser: CommandParser, path: Path) -> dict[str, Any]:
    """The JSON record of ``quarto bench network --json`` at ``path``, or one line and exit 2."""
    input_file_or_exit(parser, path, "probe record")
    try:
        record = json.loads(path.read_text())
        probe_lines([record])  # every field the figure reads, read once: a record of another shape fails here
        return record
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError, StopIteration):
        parser.error(f"{shortened(str(path))!r} is not a probe record: the --json file of quarto bench network")


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="quarto plot", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", nargs="+", type=Path, help="run folders (each with a tb/ folder); with --probe, probe records"
    )
    add_out_argument(
        parser,
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="FILE",
        help="image file to write: PNG, or the format its suffix names (.svg, .pdf, .jpg, ...)",
    )
    add_overwrite_argument(parser)
    parser.add_argument("--x", choices=("steps", "time"), default="steps", help="horizontal axis")
    parser.add_argument(
        "--argmax", action="store_true", help="a second row with the learner playing its most likely action"
    )
    parser.add_argument("--sampled", action="store_true", help="the sampled policy's curves: the default now")
    parser.add_argument("--title", default=None, help="the figure's title (default: what it shows)")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="draw the data-scaling curve of quarto bench network's --json records instead of training curves",
    )
    args = parser.parse_args(argv)
    check_image_format(parser, args.out)  # before the file is claimed
    with claim_output(args.out, "file", overwrite=args.overwrite, prog=parser.prog):
        return _plot(parser, args)


def check_image_format(parser: CommandParser, out: Path) -> None:
    """One line and exit 2 unless matplotlib writes the image format that ``out``'s suffix names
    (:func:`_suffix_format`), naming the suffixes it writes: a ``.jpg`` holding PNG bytes would puzzle every
    viewer."""
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = _suffix_format(out)
    if suffix not in formats:
        parser.error(f"--out {shortened(str(out))!r}: matplotlib writes no .{suffix}; it writes .{', .'.join(formats)}")


def _suffix_format(out: Path) -> str:
    """The image format that ``out``'s suffix names: ``png`` without one."""
    return out.suffix.lower().removeprefix(".") or "png"


def _plot(parser: CommandParser, args: argparse.Namespace) -> int:
    """Draw the figure the command line asks for into the claimed ``--out``; the exit status."""
    if args.probe:
        figure = probe_figure(probe_lines([_probe_record(parser, path) for path in args.runs]))
        figure.axes[0].set_title(args.title or "supervised probe: exact labels, 6-10 empty squares")
        figure.tight_layout()
        return _save(figure, args.out)
    for run in args.runs:
        if not _has_events(run):
            parser.error(f"{shortened(str(run))!r} is not a training run folder: it has no tb/ with TensorBoard events")

    curves = {}
    for run in args.runs:
        curves[run.name] = score_curves(run)
        if not curves[run.name]:
            parser.error(
                f"{shortened(str(run))!r} has no evaluation curves in its tb/ yet (eval/<opponent>/score): a run "
                "draws them from its first evaluation on"
            )
    rows = panels(curves, args.argmax)
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
    figure.suptitle(args.title or "evaluation score (wins + draws/2, both seats)")
    figure.tight_layout()
    return _save(figure, args.out)


def _save(figure: Any, out: Path) -> int:
    """Write ``figure`` to ``out``, atomically, in the format its suffix names (:func:`check_image_format`)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format=_suffix_format(out), dpi=100)
    atomic_write_bytes(out, buffer.getvalue())
    print(f"wrote {out}")
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
