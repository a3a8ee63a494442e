"""``quarto grade``: how often an agent's decisions throw away value, judged by the exact solver.

Example usage::

    quarto grade random greedy solver --positions 300 --seed 0 --max-empty 10

Positions are sampled from real games (seeded) between a mix of baseline agents (``--sources``, default
random and greedy): from each game one decision is drawn uniformly among those with at most ``--max-empty``
empty squares and more than one legal action. The exact solver values every action of every sampled
position once (the values are cached for the run, and on disk with ``--cache``), so grading several agents
on the same positions costs one solve per position. A cache file carries its solver version and a hash of
its positions: one written by another version, or edited, is solved again with a warning. Apart from it, the
solver keeps the bounds it proves for positions with 10 or more empty squares across runs, by canonical
position (:mod:`agents.value_cache`): what any earlier run proved is not searched again. Above
``--max-empty 12`` the solver needs from many seconds to minutes per position: the command warns, and
shows its progress on stderr (``--no-progress`` hides it). Ctrl-C while solving says how many positions
were valued and writes the values solved so far to ``--cache``, so that the next run starts from them.

A decision **loses value** when the value of the chosen action under perfect play is below the position's
value: a won position played into a draw or a loss, or a drawn one into a loss. The report gives the share
of such decisions with a 95% Wilson interval, overall, by phase (``place`` with a piece in hand, ``give``
otherwise) and by number of empty squares, plus the share among *critical* decisions -- those where some
legal action does lose value (elsewhere every move keeps the value and no agent can err).

The grading itself is :mod:`experiments.arena.grading`.
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

from experiments.arena.grading import (
    DEFAULT_MAX_EMPTY,
    DEFAULT_SOURCES,
    MAX_POSITIONS,
    SOLVER_COMFORT_EMPTY,
    GradeReport,
    PositionValues,
    grade_agent,
    sample_positions,
)
from experiments.options import (
    MAX_SEED,
    SEED,
    add_variant_arguments,
    agent_or_exit,
    check_specs,
    markdown_table,
    output_folder_or_exit,
    variant_from_args,
    warn,
)
from experiments.run_folder import default_run_folder, save_run_config
from quarto_env.checks import OutputPathError, atomic_write_text, number_argument, output_file, shortened
from quarto_env.core import NUM_SQUARES, State, Variant

# ---------------------------------------------------------------------------------------------------------
# Positions
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# Exact values, solved once per position
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# Grading
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``quarto grade``."""
    parser = argparse.ArgumentParser(
        prog="quarto grade",
        description="Share of an agent's decisions that lose value under perfect play, judged by the exact solver.",
    )
    parser.add_argument("agents", nargs="+", metavar="AGENT_SPEC", help="agents to grade, on the same positions")
    parser.add_argument(
        "--positions",
        type=number_argument("positions", minimum=1, maximum=MAX_POSITIONS, integer=True),
        default=200,
        help="positions to sample (default 200)",
    )
    parser.add_argument(
        "--seed", type=SEED, default=0, help=f"seed of the sampled games and of the agents, 0-{MAX_SEED}"
    )
    parser.add_argument(
        "--max-empty",
        type=number_argument("max-empty", minimum=2, maximum=NUM_SQUARES, integer=True),
        default=DEFAULT_MAX_EMPTY,
        help=f"most empty squares, 2-16 (default {DEFAULT_MAX_EMPTY}; above {SOLVER_COMFORT_EMPTY} the solver takes "
        "minutes per position)",
    )
    parser.add_argument(
        "--min-empty",
        type=number_argument("min-empty", minimum=1, maximum=NUM_SQUARES, integer=True),
        default=1,
        help="fewest empty squares (default 1)",
    )
    parser.add_argument(
        "--sources",
        default=",".join(DEFAULT_SOURCES),
        help="comma-separated specs whose games supply the positions (default random,greedy)",
    )
    parser.add_argument(
        "--cache", type=Path, default=None, metavar="FILE", help="JSON file of solved values to reuse and update"
    )
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="output folder (default runs/grade__SEED__TIME)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_variant_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto grade``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    variant = variant_from_args(parser, args)
    sources = _source_specs(parser, args.sources)
    check_specs(parser, [*args.agents, *sources])
    check_empty_range(parser, args.min_empty, args.max_empty)
    agents = [agent_or_exit(parser, spec, variant, _agent_seed(args.seed, i)) for i, spec in enumerate(args.agents)]
    for spec in sources:  # built here, with a message, rather than halfway through sampling
        agent_or_exit(parser, spec, variant, seed=0)
    values = values_or_exit(parser, variant, args.cache)
    out = output_folder_or_exit(parser, args.out or default_run_folder("grade", args.seed), "--out")
    save_run_config(out, "grade", argv, _config(args, sources, variant))

    try:
        positions = sample_positions(variant, args.positions, args.seed, args.max_empty, args.min_empty, sources)
    except RuntimeError as error:  # too few decisions within the bounds
        parser.error(f"{error}: widen --min-empty / --max-empty")
    start = time.perf_counter()
    try:
        for state in tqdm(positions, desc="solving", unit="pos", disable=args.no_progress):
            values.action_values(state)
    except KeyboardInterrupt:
        return _interrupted(values, positions, time.perf_counter() - start)
    print(f"{len(positions)} positions, {values.solved} solved in {time.perf_counter() - start:.1f} s")
    if args.cache:
        values.save()
    reports = [grade_agent(agent, variant, positions, values, progress=not args.no_progress) for agent in agents]
    _write_reports(out, reports, variant, args.seed)
    return 0


def _interrupted(values: PositionValues, positions: Sequence[State], seconds: float) -> int:
    """Ctrl-C while solving: keep the values solved so far in the ``--cache`` file, if there is one, say how
    far it got, and return the exit status 130."""
    valued = sum(state in values for state in positions)
    if values.path is not None:
        values.save()
        kept = f"values so far are kept in --cache {values.path}"
    else:
        kept = "--cache FILE would keep the values solved so far"
    message = f"interrupted after valuing {valued} of {len(positions)} positions ({seconds:.1f} s); {kept}"
    print(f"\nquarto grade: {message}", file=sys.stderr)
    return 130


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
options, as :func:`agents.base.parse_spec` reads them)."""


def _config(args: argparse.Namespace, sources: list[str], variant: Variant) -> dict[str, Any]:
    """The run's ``config.json``."""
    return {
        "agents": args.agents,
        "positions": args.positions,
        "seed": args.seed,
        "max_empty": args.max_empty,
        "min_empty": args.min_empty,
        "sources": sources,
        "cache": str(args.cache) if args.cache else None,
        "variant": variant.to_dict(),
    }


def check_empty_range(parser: argparse.ArgumentParser, min_empty: int, max_empty: int) -> None:
    """Exit with a usage error when ``--min-empty`` is above ``--max-empty``; warn when ``--max-empty`` is past
    what the exact solver values quickly (:data:`SOLVER_COMFORT_EMPTY`)."""
    if min_empty > max_empty:
        parser.error(f"--min-empty {min_empty} is above --max-empty {max_empty}")
    if max_empty > SOLVER_COMFORT_EMPTY:
        warn(
            parser,
            f"--max-empty {max_empty}: valuing a position's actions takes the exact solver seconds at "
            f"{SOLVER_COMFORT_EMPTY} empty squares and about ten times longer for each one more; this can take hours",
        )


def values_or_exit(parser: argparse.ArgumentParser, variant: Variant, cache: Path | None) -> PositionValues:
    """The value cache of ``--cache`` (empty without one), read and checked writable before any work; a file that
    is no cache or cannot be written exits with a message, one that is not trusted is solved again (a warning)."""
    if cache is None:
        return PositionValues(variant)
    try:
        output_file(cache, "--cache")
        values = PositionValues(variant, cache)
    except OutputPathError as error:
        parser.error(str(error))
    except (ValueError, OSError) as error:  # not a cache at all, another variant's, or unreadable
        parser.error(f"--cache {cache}: {error}")
    if values.discarded:
        warn(parser, f"--cache {cache}: {values.discarded}; solving its positions again")
    return values


def _write_reports(out: Path, reports: list[GradeReport], variant: Variant, seed: int) -> None:
    """Write ``grade.md``, ``grade.json`` and ``decisions.jsonl`` into ``out`` and print the tables."""
    text = report_markdown(reports, variant, seed)
    atomic_write_text(out / "grade.md", text)
    atomic_write_text(out / "grade.json", json.dumps([r.summary() for r in reports], indent=2) + "\n")
    lines = [json.dumps({"agent": r.agent, **dataclasses.asdict(d)}) + "\n" for r in reports for d in r.decisions]
    atomic_write_text(out / "decisions.jsonl", "".join(lines))
    print(f"\n{text}\nwritten to {out}")


def _agent_seed(seed: int, index: int) -> int:
    """The seed of the ``index``-th graded agent: the same agent list and seed grade the same way."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def report_markdown(reports: Sequence[GradeReport], variant: Variant, seed: int) -> str:
    """Tables of the share of value-losing decisions: overall and by phase, then by empty squares."""

    def cell(share: tuple[float, float, float, int]) -> str:
        return f"{100 * share[0]:.1f}% [{100 * share[1]:.1f}, {100 * share[2]:.1f}] (n={share[3]})"

    def short_cell(share: tuple[float, float, float, int]) -> str:
        return f"{100 * share[0]:.0f}% [{100 * share[1]:.0f}-{100 * share[2]:.0f}]"

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
    empties = sorted({d.empty for r in reports for d in r.decisions})
    by_empty = [[f"`{r.agent}`", *(short_cell(r.by_empty()[e]) for e in empties)] for r in reports]
    counts = [str(sum(d.empty == e for d in reports[0].decisions)) for e in empties]
    return (
        f"Value-losing decisions under {variant.describe()} rules (seed {seed}; share, 95% CI, count)\n\n"
        + markdown_table(header, rows)
        + "\nBy empty squares (share lost, 95% CI)\n\n"
        + markdown_table(["agent", *(f"{e} empty" for e in empties)], [["positions", *counts], *by_empty])
    )
