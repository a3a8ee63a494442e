"""``quarto grade``: how often an agent's decisions throw away value, judged by the exact solver.

Example usage::

    quarto grade random greedy                     # on the variant's shipped suite (standard-v1), nothing solved
    quarto grade random --suite squares-v1 --squares
    quarto grade random greedy solver --positions 300 --seed 0 --max-empty 10   # sampled positions, solved
    quarto grade greedy --perfect-games 40         # also its points lost in 40 games against perfect play

**On a suite** (the default): the positions of a suite of solved positions (:mod:`agents.suites`), every stage
from 16 empty squares down to 4, each with every action's exact value: grading is lookups alone, and two runs that
name the same suite grade on the same positions. ``--suite NAME`` picks one (a shipped name or a ``.jsonl`` file);
without it the variant's newest shipped suite is used, as long as no sampling option below is given. A variant
that ships no suite (the declaration variant, other attribute counts) is graded on sampled positions, with a note.

**On sampled positions** (any of ``--positions``, ``--min-empty``, ``--max-empty``, ``--sources``, ``--cache``
given): positions are sampled from real games (seeded) between a mix of baseline agents (``--sources``, default
random and greedy): from each game one decision is drawn uniformly among those with at most ``--max-empty``
empty squares and more than one legal action. The exact solver values every action of every sampled
position once (the values are cached for the run, and on disk with ``--cache``), so grading several agents
on the same positions costs one solve per position. A cache file carries its solver version and a hash of
its positions: one written by another version, or edited, is solved again with a warning. Apart from it, the
solver keeps the bounds it proves for positions with 10 or more empty squares across runs, by canonical
position (:mod:`agents.solver.value_cache`): what any earlier run proved is not searched again. Above
``--max-empty 12`` the solver needs from many seconds to minutes per position: the command warns, and
shows its progress on stderr (``--no-progress`` hides it). Ctrl-C while solving says how many positions
were valued and writes the values solved so far to ``--cache``, so that the next run starts from them.

A decision **loses value** when the value of the chosen action under perfect play is below the position's
value: a won position played into a draw or a loss, or a drawn one into a loss. The report gives the share
of such decisions with a 95% Wilson interval, overall, by phase (``place`` with a piece in hand, ``give``
otherwise) and by number of empty squares, plus the share among *critical* decisions -- those where some
legal action does lose value (elsewhere every move keeps the value and no agent can err).

``--perfect-games N`` also plays each agent N games against perfect play from seeded random openings and
reports the points it lost (:mod:`experiments.evaluation.perfect`).

The grading itself is :mod:`experiments.evaluation.grading`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from agents.base import Agent
from agents.storage.files import atomic_write_text
from agents.suites import Suite, SuiteError, default_suite_name, load_suite, shipped_suite_names
from experiments.evaluation.arguments import add_perfect_games_argument, check_empty_range, values_or_exit
from experiments.evaluation.grading import (
    DEFAULT_MAX_EMPTY,
    DEFAULT_SOURCES,
    MAX_POSITIONS,
    SOLVER_COMFORT_EMPTY,
    GradeReport,
    PositionValues,
    grade_agent,
    sample_decisions,
    suite_states,
)
from experiments.evaluation.perfect import PerfectPlayReport, perfect_markdown, points_lost
from experiments.evaluation.ratings import Share
from experiments.evaluation.tables import markdown_table
from experiments.options import (
    MAX_SEED,
    CommandParser,
    add_empty_squares_argument,
    add_integer_argument,
    add_progress_and_variant_arguments,
    add_seed_argument,
    agent_or_exit,
    check_specs,
    parse_command,
)
from experiments.output import add_overwrite_argument, claim_output
from experiments.run_folder import default_run_folder, save_run_config
from quarto_env.checks import shortened
from quarto_env.core import State, Variant

SAMPLING_DEFAULTS: dict[str, Any] = {
    "positions": 200,
    "min_empty": 1,
    "max_empty": DEFAULT_MAX_EMPTY,
    "sources": ",".join(DEFAULT_SOURCES),
    "cache": None,
}
"""The sampling options (``args`` names) and their values when sampled positions are graded; giving any of them
selects that mode."""


# ---------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``quarto grade``."""
    parser = CommandParser(
        prog="quarto grade",
        description="Share of an agent's decisions that lose value under perfect play, on a suite of solved "
        "positions or on sampled positions valued by the exact solver.",
    )
    parser.add_argument("agents", nargs="+", metavar="AGENT_SPEC", help="agents to grade, on the same positions")
    shipped = ", ".join(shipped_suite_names()) or "none yet"
    parser.add_argument(
        "--suite",
        metavar="NAME",
        help=f"grade on this suite of solved positions: a shipped name ({shipped}) or a .jsonl file (default: the "
        "variant's newest shipped suite, unless a sampling option below is given)",
    )
    add_perfect_games_argument(parser)
    positions = f"sampling: positions to sample (default {SAMPLING_DEFAULTS['positions']})"
    add_integer_argument(parser, "--positions", None, positions, fewest=1, most=MAX_POSITIONS)
    add_seed_argument(parser, f"seed of the agents, the sampled games and the perfect-play openings, 0-{MAX_SEED}")
    add_empty_squares_argument(
        parser,
        "--max-empty",
        None,
        f"sampling: most empty squares, 2-16 (default {DEFAULT_MAX_EMPTY}; above {SOLVER_COMFORT_EMPTY} the solver "
        "takes minutes per position)",
        fewest=2,
    )
    add_empty_squares_argument(parser, "--min-empty", None, "sampling: fewest empty squares (default 1)")
    parser.add_argument(
        "--sources",
        default=None,
        help="sampling: comma-separated specs whose games supply the positions (default random,greedy)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="FILE",
        help="sampling: JSON file of solved values to reuse and update",
    )
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="output folder (default runs/grade__SEED__TIME)"
    )
    add_overwrite_argument(parser)
    add_progress_and_variant_arguments(parser, "progress bars")
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto grade``."""
    parser, args, variant = parse_command(build_parser, argv)
    check_specs(parser, args.agents)
    suite = suite_or_none(parser, args, variant)
    sources = [] if suite else _source_specs(parser, args.sources)
    check_specs(parser, sources)
    if suite is None:
        check_empty_range(parser, args.min_empty, args.max_empty)
    agents = [agent_or_exit(parser, spec, variant, _agent_seed(args.seed, i)) for i, spec in enumerate(args.agents)]
    for spec in sources:  # built here, with a message, rather than halfway through sampling
        agent_or_exit(parser, spec, variant, seed=0)
    values = PositionValues.from_suite(suite) if suite else values_or_exit(parser, variant, args.cache)
    folder = args.out or default_run_folder("grade", args.seed)
    # Staged: every file is written at the end into a folder beside --out, which one rename then makes --out.
    with claim_output(folder, "folder", overwrite=args.overwrite, prog=parser.prog) as out:
        if suite is not None:
            positions = suite_states(suite)
        else:
            positions = _sampled_positions(parser, args, variant, sources)
            if not _value_all(values, positions, progress=not args.no_progress):
                return 130  # nothing staged: nothing is published, an earlier result stays
        reports = [grade_agent(agent, variant, positions, values, progress=not args.no_progress) for agent in agents]
        perfect = [_perfect_play(agent, variant, args) for agent in agents] if args.perfect_games else []
        text = _reports_text(reports, variant, _graded_on(args, suite, sources), perfect)
        print(f"\n{text}")  # first: a write that fails does not take the table with it
        save_run_config(out.staging, "grade", argv, _config(args, sources, variant, suite))
        _write_reports(out.staging, text, reports, _graded_on(args, suite, sources), perfect)
    print(f"written to {out.path}")
    return 0


def suite_or_none(parser: argparse.ArgumentParser, args: argparse.Namespace, variant: Variant) -> Suite | None:
    """The suite to grade on, or ``None`` to grade on sampled positions (whose options then get their defaults).
    ``--suite`` with a sampling option, or a suite that cannot be used, exits with a usage error; a variant that
    ships no suite, with no option, gets a note and sampled positions."""
    given = [f"--{name.replace('_', '-')}" for name in SAMPLING_DEFAULTS if getattr(args, name) is not None]
    if args.suite is not None and given:
        parser.error(f"--suite grades on a suite's positions and {given[0]} samples positions: give one or the other")
    name = None if given else args.suite if args.suite is not None else default_suite_name(variant)
    if name is not None:
        try:
            return load_suite(name, variant)
        except SuiteError as error:
            parser.error(str(error))
    if not given:
        note = f"no suite ships for {variant.describe()} rules; grading on positions sampled with seed {args.seed}"
        print(f"{parser.prog}: note: {note}", file=sys.stderr)
    for option, default in SAMPLING_DEFAULTS.items():
        if getattr(args, option) is None:
            setattr(args, option, default)
    return None


def _sampled_positions(
    parser: argparse.ArgumentParser, args: argparse.Namespace, variant: Variant, sources: list[str]
) -> list[State]:
    """The positions of the sampling options; too few within the bounds exits with a usage error."""
    try:
        return sample_decisions(variant, args.positions, args.seed, args.max_empty, args.min_empty, sources)
    except RuntimeError as error:  # too few decisions within the bounds
        parser.error(f"{error}: widen --min-empty / --max-empty")


def _perfect_play(agent: Agent, variant: Variant, args: argparse.Namespace) -> PerfectPlayReport:
    """``agent``'s points lost in ``--perfect-games`` games against perfect play, from openings of ``--seed``."""
    return points_lost(agent, variant, args.perfect_games, args.seed, progress=not args.no_progress)


def _graded_on(args: argparse.Namespace, suite: Suite | None, sources: list[str]) -> dict[str, Any]:
    """What the positions were, for the reports: ``{"suite": NAME}``, or the sampling settings."""
    if suite is not None:
        return {"suite": suite.name}
    return {
        "sampled": {
            "seed": args.seed,
            "positions": args.positions,
            "min_empty": args.min_empty,
            "max_empty": args.max_empty,
            "sources": sources,
        }
    }


def _value_all(values: PositionValues, positions: Sequence[State], progress: bool) -> bool:
    """Solve every position that ``values`` does not know yet, and save them to its cache file if it has one.
    ``False`` when Ctrl-C stopped it (:func:`_interrupted` has said so)."""
    start = time.perf_counter()
    try:
        for state in tqdm(positions, desc="solving", unit="pos", disable=not progress):
            values.action_values(state)
    except KeyboardInterrupt:
        _interrupted(values, positions, time.perf_counter() - start)
        return False
    print(f"{len(positions)} positions, {values.solved} solved in {time.perf_counter() - start:.1f} s")
    if values.path is not None:
        values.save()
    return True


def _interrupted(values: PositionValues, positions: Sequence[State], seconds: float) -> None:
    """Ctrl-C while solving: keep the values solved so far in the ``--cache`` file, if there is one, and say how
    far it got."""
    valued = sum(state in values for state in positions)
    if values.path is not None:
        values.save()
        kept = f"values so far are kept in --cache {values.path}"
    else:
        kept = "--cache FILE would keep the values solved so far"
    message = f"interrupted after valuing {valued} of {len(positions)} positions ({seconds:.1f} s); {kept}"
    print(f"\nquarto grade: {message}", file=sys.stderr)


def _source_specs(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """The specs of ``--sources``, split at each comma that does not begin one of a spec's own options
    (``minimax:depth=2,time=0.1,random`` is two specs); an empty item exits with a usage error."""
    specs = _SOURCES_SEPARATOR.split(text)
    empty = [number for number, spec in enumerate(specs, 1) if not spec.strip()]
    if empty:
        parser.error(
            f"--sources {shortened(text)!r}: item {empty[0]} of {len(specs)} is empty; give agent specs joined by "
            f"commas, e.g. {','.join(DEFAULT_SOURCES)}"
        )
    return specs


_SOURCES_SEPARATOR = re.compile(r",(?!\w+=)")
"""A comma not followed by ``NAME=``: the commas between the specs of ``--sources`` (the others separate a spec's
options, as :func:`agents.specs.parse_spec` reads them)."""


def _config(args: argparse.Namespace, sources: list[str], variant: Variant, suite: Suite | None) -> dict[str, Any]:
    """The run's ``config.json``: the suite's name, or ``None`` and the sampling settings."""
    return {
        "agents": args.agents,
        "suite": suite.name if suite else None,
        "positions": args.positions,
        "seed": args.seed,
        "max_empty": args.max_empty,
        "min_empty": args.min_empty,
        "sources": sources or None,
        "cache": str(args.cache) if args.cache else None,
        "perfect_games": args.perfect_games,
        "variant": variant.to_dict(),
    }


def _reports_text(
    reports: list[GradeReport],
    variant: Variant,
    graded_on: dict[str, Any],
    perfect: Sequence[PerfectPlayReport] = (),
) -> str:
    """The tables of ``grade.md``: the grades, then the points lost against perfect play if games were played."""
    text = report_markdown(reports, variant, graded_on)
    return text + "\n" + perfect_markdown(perfect) if perfect else text


def _write_reports(
    out: Path,
    text: str,
    reports: list[GradeReport],
    graded_on: dict[str, Any],
    perfect: Sequence[PerfectPlayReport] = (),
) -> None:
    """Write ``grade.md`` (``text``: :func:`_reports_text`), ``grade.json`` (one summary per agent, each with
    ``graded_on`` and, with perfect-play games, ``perfect_play``) and ``decisions.jsonl`` into ``out``."""
    atomic_write_text(out / "grade.md", text)
    summaries = [{**r.summary(), "graded_on": graded_on} for r in reports]
    for summary, played in zip(summaries, perfect, strict=False):
        summary["perfect_play"] = played.summary()
    atomic_write_text(out / "grade.json", json.dumps(summaries, indent=2) + "\n")
    lines = [json.dumps({"agent": r.agent, **dataclasses.asdict(d)}) + "\n" for r in reports for d in r.decisions]
    atomic_write_text(out / "decisions.jsonl", "".join(lines))


def _agent_seed(seed: int, index: int) -> int:
    """The seed of the ``index``-th graded agent: the same agent list and seed grade the same way."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def graded_on_text(graded_on: dict[str, Any]) -> str:
    """``graded_on`` (:func:`_graded_on`) in words."""
    if "suite" in graded_on:
        return f"suite {graded_on['suite']}"
    sampled = graded_on["sampled"]
    return f"positions sampled with seed {sampled['seed']}, {sampled['min_empty']}-{sampled['max_empty']} empty squares"


def report_markdown(reports: Sequence[GradeReport], variant: Variant, graded_on: dict[str, Any]) -> str:
    """Tables of the share of value-losing decisions: overall and by phase, then by empty squares (the stages,
    16 first)."""

    def cell(lost: Share) -> str:
        return f"{100 * lost.share:.1f}% [{100 * lost.low:.1f}, {100 * lost.high:.1f}] (n={lost.total})"

    def short_cell(lost: Share) -> str:
        return f"{100 * lost.share:.0f}% [{100 * lost.low:.0f}-{100 * lost.high:.0f}]"

    header = ["agent", "all decisions", "critical only", "place", "give", "win->draw / win->loss / draw->loss"]
    rows = []
    for r in reports:
        phases = r.by_phase()
        t = r.transitions()
        rows.append(
            [
                f"`{r.agent}`",
                cell(r.share_lost()),
                cell(r.critical()),
                cell(phases["place"]),
                cell(phases["give"]),
                f"{t['win->draw']} / {t['win->loss']} / {t['draw->loss']}",
            ]
        )
    empties = sorted({d.empty for r in reports for d in r.decisions}, reverse=True)
    by_empty = [[f"`{r.agent}`", *(short_cell(r.by_empty()[e]) for e in empties)] for r in reports]
    counts = [str(sum(d.empty == e for d in reports[0].decisions)) for e in empties]
    return (
        f"Value-losing decisions under {variant.describe()} rules ({graded_on_text(graded_on)}; share, 95% CI, count)"
        "\n\n"
        + markdown_table(header, rows)
        + "\nBy empty squares (share lost, 95% CI)\n\n"
        + markdown_table(["agent", *(f"{e} empty" for e in empties)], [["positions", *counts], *by_empty])
    )
