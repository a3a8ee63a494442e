"""``quarto book``: build the opening book that makes the solver exact from the first move (:mod:`agents.solver.book`).

Example usage::

    quarto book                          # standard rules, down to 12 empty squares: agents/data/book-standard.npz
    quarto book --squares --jobs 2       # the squares variant
    quarto book --min-empty 14 --out /tmp/book.npz

It lists the canonical give nodes from the empty board down to ``--min-empty`` empty squares, solves the bottom
level with the exact solver (``--jobs`` threads sharing one transposition table of ``--table-mb`` MiB), fills
the levels above by the one-ply rule, and writes the book atomically to ``--out``. The solved values are saved
to ``OUT.partial.npz`` every ``--checkpoint-every`` seconds and on Ctrl-C; the same command started again
continues from there (a partial file for other rules or another depth is refused, in one line). Progress goes
to standard error: boards solved, their rate, the time left.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from agents.solver.book import BookError, OpeningBook, book_levels, default_book_path, fill_levels, load_book, save_book
from agents.solver.minimax import Solver
from agents.solver.table import table_bits_for
from experiments.arena.solve import MAX_TABLE_MB, default_table_mb
from experiments.options import (
    MAX_CHECKPOINT_SECONDS,
    CommandParser,
    add_empty_squares_argument,
    add_jobs_argument,
    add_number_argument,
    add_progress_argument,
    add_variant_arguments,
    parse_command,
)
from experiments.output import add_overwrite_argument, claim_output
from quarto_env.core import State, Variant
from quarto_env.notation import PositionError, format_position, parse_position


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="quarto book",
        description="Build the opening book: the exact value of every early give node, for the solver.",
    )
    add_empty_squares_argument(parser, "--min-empty", 12, "the book's deepest boards have this many empty squares")
    parser.add_argument("--out", type=Path, default=None, help="the book file to write")
    add_overwrite_argument(parser, "--out (default: the variant's shipped book)")
    add_progress_argument(parser, "progress lines")
    add_jobs_argument(parser)
    add_number_argument(parser, "--table-mb", None, minimum=1, maximum=MAX_TABLE_MB)
    add_number_argument(
        parser,
        "--checkpoint-every",
        60.0,
        "seconds between saves of the solved values",
        metavar="S",
        above=0,
        maximum=MAX_CHECKPOINT_SECONDS,
    )
    parser.add_argument(
        "--root",
        default=None,
        metavar="POSITION",
        help="build from this give node instead of the empty board (for tests and studies; needs --out)",
    )
    add_variant_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    parser, args, variant = parse_command(build_parser, argv)
    if variant.declaration:
        parser.error("the book covers the rules without --declaration")
    root = None
    if args.root is not None:
        if args.out is None:
            parser.error("--root needs --out: the shipped book starts from the empty board")
        try:
            root = parse_position(args.root, variant)
            levels = book_levels(variant, args.min_empty, root)
        except (PositionError, ValueError) as exc:
            parser.error(f"--root: {exc}")
    else:
        levels = book_levels(variant, args.min_empty)
    out = args.out or default_book_path(variant)
    # Held for the whole build: a second build of the same book (or of its partial file) is refused meanwhile.
    with claim_output(out, "file", overwrite=args.overwrite, prog=parser.prog):
        _check_partial_path(parser, out)
        return _build(args, variant, out, levels, root)


def _partial_path(out: Path) -> Path:
    """Where the build of ``out`` keeps the boards solved so far."""
    return out.with_name(out.name + ".partial.npz")


def _check_partial_path(parser: argparse.ArgumentParser, out: Path) -> None:
    """Refuse (one line, exit status 2) a partial path beside ``out`` that is no file: before any solving, not
    once the book is written and the partial file cannot be removed."""
    partial = _partial_path(out)
    if os.path.lexists(partial) and not partial.is_file():
        parser.error(
            f"{str(partial)!r}, where --out {str(out)!r} keeps an unfinished build, is not a file (a folder, a device "
            "or a broken link): remove it, or name another --out"
        )


def _build(
    args: argparse.Namespace,
    variant: Variant,
    out: Path,
    levels: list[dict[tuple[int, int], State]],
    root: State | None,
) -> int:
    """Solve the bottom level of ``levels`` (resuming from the partial file beside ``out``), fill the levels above
    and write the book to the claimed ``out``; the exit status."""
    partial_path = _partial_path(out)
    bottom = levels[-1]
    values: dict[tuple[int, int], int] = {}
    if partial_path.is_file():
        try:
            partial = load_book(partial_path, variant, partial=True, min_empty=args.min_empty)
            if partial.root != (root or State()):
                raise BookError(f"{partial_path} was built from another root, {format_position(partial.root)}")
            values = partial.values
        except BookError as exc:
            print(f"quarto book: {exc}; remove it to start again", file=sys.stderr)
            return 2
        print(f"resuming from {partial_path}: {len(values):,} of {len(bottom):,} boards solved", file=sys.stderr)
    table_mb = args.table_mb or default_table_mb()
    solver = Solver(variant, table_bits=table_bits_for(table_mb), jobs=args.jobs)
    start = last_save = time.perf_counter()
    todo = [key for key in sorted(bottom) if key not in values]
    print(f"{sum(map(len, levels)):,} boards in {len(levels)} levels; {len(todo):,} to solve", file=sys.stderr)
    try:
        for done, key in enumerate(todo, 1):
            values[key] = solver.value(bottom[key])
            now = time.perf_counter()
            if now - last_save >= args.checkpoint_every:
                _save_partial(partial_path, variant, args.min_empty, values, root)
                last_save = now
                rate = done / (now - start)
                left = (len(todo) - done) / rate
                if not args.no_progress:
                    print(
                        f"{len(values):,}/{len(bottom):,} solved, {rate:.2f}/s, {left / 60:.0f} min left",
                        file=sys.stderr,
                    )
    except KeyboardInterrupt:
        _save_partial(partial_path, variant, args.min_empty, values, root)
        print(f"\ninterrupted: {len(values):,} boards saved to {partial_path}; run again to continue", file=sys.stderr)
        return 130
    book = fill_levels(variant, levels, values)
    seconds = time.perf_counter() - start
    save_book(out, book, {"build_seconds_this_run": round(seconds, 1), "jobs": args.jobs})
    partial_path.unlink(missing_ok=True)
    print(f"{out}: {len(book):,} boards down to {args.min_empty} empty squares ({seconds:.0f} s this run)")
    return 0


def _save_partial(
    path: Path, variant: Variant, min_empty: int, values: dict[tuple[int, int], int], root: State | None
) -> None:
    """The bottom values solved so far, for the next run of the same command."""
    save_book(path, OpeningBook(variant, min_empty, dict(values), root), {"partial": True})
