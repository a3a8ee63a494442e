"""``quarto solve``: the exact value of positions under perfect play, one JSON line each.

Example usage::

    quarto solve "6.e2....d8..9..1 5"                 # {"position": ..., "value": 0, "best_actions": [1], ...}
    quarto solve "76.c..afd.....80 -" --all-moves     # the value of every legal action too
    quarto solve "..3...........a. 5" --squares --attributes colour shape
    printf '6.e2....d8..9..1 5\\n76.c..afd.....80 -\\n' | quarto solve -
    quarto solve "................ -" --value-only --jobs 2 --resume proof.npz   # the full-game proof: a draw

Each answer is one JSON line: ``position``, ``variant``, ``value`` (+1 win, 0 draw, -1 loss for the side to move),
``best_actions`` (squares when placing, pieces when giving, 16 to declare; null with ``--value-only``),
``action_values`` (with ``--all-moves``; else null), ``nodes``, ``table_hit_rate`` and ``seconds``.

Long proofs (see ``docs/solver.md``): ``--jobs N`` searches with N threads sharing one table of ``--table-mb``
MiB (default an eighth of the machine's memory, at most 1 GiB). A solve that lasts more than 2 seconds prints
progress to standard error every 5 (``--no-progress`` hides it). Ctrl-C stops the search within milliseconds,
prints the counts so far and exits with status 130. ``--resume FILE`` saves the table to ``FILE`` every
``--checkpoint-every`` seconds and on Ctrl-C, sealed (:mod:`agents.solver.table_files`), and starts from it when
it exists; a file that fails its seal (damaged, altered, or saved by an older version without one) is refused
in one line, exit status 2.

With ``-`` the positions are read from standard input, one per line (blank lines and lines starting with ``#``
are skipped), and answered in order by one process, which keeps its transposition table between them. A line
that is not a valid position, or a position that is over, is answered by a JSON line
``{"position": ..., "error": ...}`` and the command carries on; the exit status is then 1. Both fields quote a
long line shortened (its first 80 characters, ``...`` and its length), so a 1 MB line is not echoed back. When
the reader of the answers goes away (``quarto solve - | head -1``), the command stops quietly (see
:mod:`experiments.cli`). A single bad position on the command line prints the error to standard error and exits
with status 2, as does a bad rule-variant flag.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from agents.solver.minimax import Solver
from agents.solver.table import table_bits_for
from agents.solver.table_files import TableFileError, load_table, save_table
from experiments.options import (
    MAX_CHECKPOINT_SECONDS,
    MAX_JOBS,
    CommandParser,
    add_integer_argument,
    add_number_argument,
    add_progress_and_variant_arguments,
    parse_command,
    refuse_unused,
)
from experiments.output import claim_output
from quarto_env.checks import shortened
from quarto_env.core import RulesError, Variant
from quarto_env.notation import parse_position

DEFAULT_PROGRESS_SECONDS = 5.0
"""Seconds between progress lines on standard error."""
FIRST_PROGRESS_SECONDS = 2.0
"""A solve that ends sooner prints no progress."""
MAX_TABLE_MB = 2**14


def default_table_mb() -> int:
    """The default table size in MiB: an eighth of the machine's memory, from 64 MiB up to 1 GiB."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        memory = 8 * 2**30
    return max(64, min(1024, memory // 8 // 2**20))


def add_search_arguments(parser: argparse.ArgumentParser, table_mb: float, why: str) -> None:
    """``--jobs`` and ``--table-mb`` (default ``table_mb``, explained by ``why``): the solver's threads and
    table, for ``quarto solve`` and ``quarto bench solver``."""
    jobs_help = f"threads searching together, 1-{MAX_JOBS} (default 1; the machine has {os.cpu_count()} cores)"
    add_integer_argument(parser, "--jobs", 1, jobs_help, fewest=1, most=MAX_JOBS, name="--jobs")
    table_help = (
        f"transposition table size in MiB, rounded down to a power of two of 16-byte entries (default {table_mb:g}: "
        f"{why})"
    )
    add_number_argument(parser, "--table-mb", table_mb, table_help, name="--table-mb", minimum=1, maximum=MAX_TABLE_MB)


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    parser = CommandParser(
        prog="quarto solve",
        description="Exact value and best actions of Quarto positions under perfect play, as JSON lines.",
    )
    parser.add_argument("position", help="a position such as 'f9.......0..3... 5', or '-' to read lines from stdin")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--all-moves", action="store_true", help="also give the value of every legal action")
    what.add_argument("--value-only", action="store_true", help="only the value: no best actions (faster)")
    add_search_arguments(parser, default_table_mb(), "an eighth of this machine's memory, at most 1024")
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="FILE",
        help="save the table to FILE every --checkpoint-every seconds and on Ctrl-C, and start from it when it "
        "exists: a long proof survives a restart",
    )
    add_number_argument(
        parser,
        "--checkpoint-every",
        60.0,
        "seconds between saves of the table with --resume",
        name="--checkpoint-every",
        minimum=1,
        maximum=MAX_CHECKPOINT_SECONDS,
    )
    add_progress_and_variant_arguments(parser, "progress lines", several_words=True)
    return parser


def answer(solver: Solver, text: str, all_moves: bool, value_only: bool = False) -> dict:
    """The JSON-ready answer for one position string; raises :class:`RulesError` for a bad or finished one, its
    message quoting a long ``text`` shortened."""
    text = text.strip()
    try:
        result = solver.solve(parse_position(text, solver.variant), all_moves, value_only)
    except RulesError as error:  # the notation's message quotes the text whole
        raise RulesError(str(error).replace(text, shortened(text))) from None
    return {"position": text, "variant": solver.variant.describe(), **result.to_dict()}


def solve_lines(solver: Solver, lines: Iterable[str], all_moves: bool, value_only: bool = False) -> int:
    """Answer each position line with one JSON line, in order; returns the exit status (1 if any line failed)."""
    status = 0
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            record = answer(solver, text, all_moves, value_only)
        except RulesError as error:
            record, status = {"position": shortened(text), "error": str(error)}, 1
        print(json.dumps(record), flush=True)
    return status


def counts_line(solver: Solver, seconds: float) -> str:
    """Nodes, speed, table hits and what the solver is doing, in one line."""
    counts = solver.running_counts()
    nodes = counts["nodes"]
    hits = f", table hits {counts['hits'] / counts['probes']:.0%}" if counts["probes"] else ""
    line = f"{seconds:.0f} s, {nodes:,} nodes ({nodes / max(seconds, 1e-9) / 1e6:.2f}M/s){hits}"
    if solver.task:
        line += f"; {solver.task}"
        path = solver.search.path()
        if path:
            line += "; moves searched from the root: " + " > ".join(f"{done}/{total}" for done, total in path)
    return line


class ProgressReporter:
    """A daemon thread that prints :func:`counts_line` to standard error every ``every`` seconds while the
    solver runs, from ``FIRST_PROGRESS_SECONDS`` on."""

    def __init__(self, solver: Solver, every: float = DEFAULT_PROGRESS_SECONDS) -> None:
        self.solver, self.every = solver, every
        self.start = time.perf_counter()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._report, name="quarto-solve-progress", daemon=True)

    def __enter__(self) -> ProgressReporter:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()

    def _report(self) -> None:
        if self._done.wait(FIRST_PROGRESS_SECONDS):
            return
        while True:
            print(f"quarto solve: {counts_line(self.solver, time.perf_counter() - self.start)}", file=sys.stderr)
            if self._done.wait(self.every):
                return


def make_solver(parser: argparse.ArgumentParser, args: argparse.Namespace, variant: Variant) -> Solver:
    """The solver of ``variant`` the arguments ask for, its table loaded from ``--resume`` when that file exists (a
    bad file exits with status 2)."""
    bits = table_bits_for(args.table_mb)
    checkpoint = None
    if args.resume is not None:
        path = args.resume

        def checkpoint() -> None:
            entries = save_table(path, solver.table, variant, {"positions": args.position})
            if not args.no_progress:
                print(f"quarto solve: saved {entries:,} table entries to {path}", file=sys.stderr)

    solver = Solver(
        variant, checkpoint=checkpoint, checkpoint_every=args.checkpoint_every, table_bits=bits, jobs=args.jobs
    )
    if args.resume is not None and args.resume.exists():
        try:
            header = load_table(args.resume, solver.table, variant)
        except TableFileError as error:  # never used: a damaged or altered table could change the answers
            parser.error(f"--resume: {error}; remove it (or name another file) to start without it")
        if not args.no_progress:
            print(f"quarto solve: resuming from {args.resume} ({header['entries']:,} entries)", file=sys.stderr)
    return solver


def main(argv: list[str]) -> int:
    """Run ``quarto solve``."""
    parser, args, variant = parse_command(build_parser, argv)
    if args.resume is None:
        refuse_unused(parser, args, "--resume", "--checkpoint-every")
        return _solve(parser, args, variant)
    # The table file is held for the whole solve: a second solver saving into it is refused meanwhile.
    with claim_output(args.resume, "file", option="--resume", resume=True, prog=parser.prog):
        return _solve(parser, args, variant)


def _solve(parser: argparse.ArgumentParser, args: argparse.Namespace, variant: Variant) -> int:
    """Answer the positions of the command line; the exit status (130 after Ctrl-C, the table saved)."""
    solver = make_solver(parser, args, variant)
    start = time.perf_counter()
    try:
        with contextlib.nullcontext() if args.no_progress else ProgressReporter(solver):
            return _answer_all(solver, args)
    except KeyboardInterrupt:
        print(f"quarto solve: interrupted after {counts_line(solver, time.perf_counter() - start)}", file=sys.stderr)
        if solver.checkpoint is not None:
            solver.checkpoint()
            print(f"quarto solve: run the same command to resume from {args.resume}", file=sys.stderr)
        return 130


def _answer_all(solver: Solver, args: argparse.Namespace) -> int:
    if args.position == "-":
        if isinstance(sys.stdin, io.TextIOWrapper):
            sys.stdin.reconfigure(errors="replace")  # a line that is not UTF-8 gets an error line, not a traceback
        return solve_lines(solver, sys.stdin, args.all_moves, args.value_only)
    try:
        record = answer(solver, args.position, args.all_moves, args.value_only)
    except RulesError as error:
        print(f"quarto solve: {error}", file=sys.stderr)
        return 2
    print(json.dumps(record))
    return 0
