"""``quarto suite``: show, check and build the suites of solved positions (:mod:`agents.suites`).

Example usage::

    quarto suite                                   # the shipped suites, positions per stage
    quarto suite standard-v1                       # one suite checked (hash, rules): positions, critical, phases
    quarto suite standard-v1 --build               # build it again, exactly as shipped (its seed and sizes)
    quarto suite squares-v2 --build --squares --per-stage 400 --seed 1

``--build`` plays ``--games`` seeded games between the agents of ``--sources``, keeps up to ``--per-stage``
positions per stage (16 to 4 empty squares) no two of which a symmetry relates, values every action of each
with the exact solver and writes ``agents/data/suite-NAME.jsonl`` (or ``--out``). A shipped suite is never
rewritten: a new one takes a new version.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from pathlib import Path

from agents.suites import (
    DEFAULT_GAMES,
    DEFAULT_SOURCES,
    SUITE_STAGES,
    PositionSource,
    Suite,
    SuiteError,
    build_suite,
    load_suite,
    rules_name,
    save_suite,
    shipped_suite_names,
    suite_path,
)
from experiments.options import (
    CommandParser,
    add_integer_argument,
    add_jobs_argument,
    add_progress_and_variant_arguments,
    add_seed_argument,
    check_specs,
    parse_command,
    refuse_unused,
)
from experiments.output import add_overwrite_argument, claim_output
from quarto_env.core import Variant

DEFAULT_PER_STAGE = 300


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="quarto suite",
        description="Show, check or build the versioned suites of solved positions that quarto grade uses.",
    )
    parser.add_argument("name", nargs="?", default=None, help="a suite's name, RULES-vN (none: list the shipped ones)")
    parser.add_argument("--build", action="store_true", help="build the suite NAME (standard rules or the flags')")
    add_integer_argument(parser, "--per-stage", DEFAULT_PER_STAGE, "most positions per stage", fewest=1, most=10_000)
    add_integer_argument(parser, "--games", DEFAULT_GAMES, "games played for positions", fewest=1, most=100_000)
    add_seed_argument(parser, "seed of the games and of the draw")
    parser.add_argument(
        "--sources",
        nargs="+",
        default=list(DEFAULT_SOURCES),
        metavar="SPEC",
        help="agents whose games supply the positions",
    )
    add_jobs_argument(
        parser,
        "worker processes that play the games and solve the positions (default 1); the suite is the same",
    )
    parser.add_argument("--out", type=Path, default=None, help="file to write")
    add_overwrite_argument(parser)
    add_progress_and_variant_arguments(parser, "progress bars (of --build)")
    return parser


def main(argv: list[str]) -> int:
    parser, args, variant = parse_command(build_parser, argv)
    if args.name is None:
        if args.build:
            parser.error("--build needs the suite's NAME, e.g. standard-v1")
        return _list_suites()
    if args.build:
        return _build(parser, args, argv, variant)
    refuse_unused(parser, args, "--build", "--out", "--per-stage", "--games", "--sources")
    try:
        suite = load_suite(args.name)
    except SuiteError as error:
        parser.error(str(error))
    print(suite_table(suite))
    return 0


def _list_suites() -> int:
    names = shipped_suite_names()
    if not names:
        print("no suite ships with this copy of the package")
    for name in names:
        try:
            suite = load_suite(name)
        except SuiteError as error:
            print(f"{name}: not usable: {error}")
            continue
        counts = " ".join(f"{e}:{n}" for e, (n, _) in suite.counts().items())
        print(f"{name}: {len(suite.positions)} positions, {suite.variant.describe()} rules; by empty squares {counts}")
    return 0


def _build(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str], variant: Variant) -> int:
    if variant.declaration:
        parser.error("suites cover the rules without --declaration")
    rules = rules_name(variant)
    if not re.fullmatch(rf"{re.escape(rules)}-v[1-9][0-9]*", args.name):
        parser.error(f"suite name {args.name!r}: expected {rules}-vN for {variant.describe()} rules, e.g. {rules}-v1")
    check_specs(parser, args.sources)
    out = args.out or suite_path(args.name)
    if args.out is None and args.name in shipped_suite_names():
        parser.error(f"suite {args.name} ships already: a changed suite takes a new version, or give --out")
    command = shlex.join(["quarto", "suite", *argv])
    start = time.perf_counter()
    with claim_output(out, "file", overwrite=args.overwrite, prog=parser.prog):
        suite = build_suite(
            args.name,
            variant,
            args.per_stage,
            args.seed,
            PositionSource(args.sources, SUITE_STAGES, args.games),
            not args.no_progress,
            command,
            args.jobs,
        )
        save_suite(suite, out)
    print(suite_table(suite))
    print(f"{out}: {len(suite.positions)} positions in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


def suite_table(suite: Suite) -> str:
    """A Markdown table of ``suite``'s positions per stage: count, critical ones, place and give, values."""
    rows = [
        f"Suite {suite.name} ({suite.variant.describe()} rules): {len(suite.positions)} positions",
        "",
        "| empty squares | positions | critical | place | give | won | drawn | lost |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for empty, positions in suite.stages().items():
        critical = sum(p.critical for p in positions)
        place = sum(p.phase == "place" for p in positions)
        won, drawn, lost = (sum(p.value == v for p in positions) for v in (1, 0, -1))
        counts = [empty, len(positions), critical, place, len(positions) - place, won, drawn, lost]
        rows.append("| " + " | ".join(map(str, counts)) + " |")
    return "\n".join(rows)
