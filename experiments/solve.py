"""``quarto solve``: the exact value of positions under perfect play, one JSON line each.

Example usage::

    quarto solve "6.e2....d8..9..1 5"                 # {"position": ..., "value": 0, "best_actions": [1], ...}
    quarto solve "76.c..afd.....80 -" --all-moves     # the value of every legal action too
    quarto solve "..3...........a. 5" --squares --attributes colour shape
    printf '6.e2....d8..9..1 5\\n76.c..afd.....80 -\\n' | quarto solve -

Each answer is one JSON line: ``position``, ``variant``, ``value`` (+1 win, 0 draw, -1 loss for the side to move),
``best_actions`` (squares when placing, pieces when giving, 16 to declare), ``action_values`` (with
``--all-moves``; else null), ``nodes`` and ``seconds``.

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
import io
import json
import sys
from collections.abc import Iterable

from agents.minimax import Solver
from experiments.arena_io import add_variant_arguments, variant_from_args
from quarto_env.checks import shortened
from quarto_env.core import RulesError
from quarto_env.notation import parse_position


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    parser = argparse.ArgumentParser(
        prog="quarto solve",
        description="Exact value and best actions of Quarto positions under perfect play, as JSON lines.",
    )
    parser.add_argument("position", help="a position such as 'f9.......0..3... 5', or '-' to read lines from stdin")
    parser.add_argument("--all-moves", action="store_true", help="also give the value of every legal action")
    add_variant_arguments(parser, several_words=True)
    return parser


def answer(solver: Solver, text: str, all_moves: bool) -> dict:
    """The JSON-ready answer for one position string; raises :class:`RulesError` for a bad or finished one, its
    message quoting a long ``text`` shortened."""
    text = text.strip()
    try:
        result = solver.solve(parse_position(text, solver.variant), all_moves)
    except RulesError as error:  # the notation's message quotes the text whole
        raise RulesError(str(error).replace(text, shortened(text))) from None
    return {"position": text, "variant": solver.variant.describe(), **result.to_dict()}


def solve_lines(solver: Solver, lines: Iterable[str], all_moves: bool) -> int:
    """Answer each position line with one JSON line, in order; returns the exit status (1 if any line failed)."""
    status = 0
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            record = answer(solver, text, all_moves)
        except RulesError as error:
            record, status = {"position": shortened(text), "error": str(error)}, 1
        print(json.dumps(record), flush=True)
    return status


def main(argv: list[str]) -> int:
    """Run ``quarto solve``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    solver = Solver(variant_from_args(parser, args))
    if args.position == "-":
        if isinstance(sys.stdin, io.TextIOWrapper):
            sys.stdin.reconfigure(errors="replace")  # a line that is not UTF-8 gets an error line, not a traceback
        return solve_lines(solver, sys.stdin, args.all_moves)
    try:
        record = answer(solver, args.position, args.all_moves)
    except RulesError as error:
        print(f"quarto solve: {error}", file=sys.stderr)
        return 2
    print(json.dumps(record))
    return 0
