"""The command line of evaluation: the options of the commands that grade agents or play them against perfect play
(``quarto grade``, ``quarto evaluate``, ``quarto bench network``), and their refusals. The library beside it
(:mod:`.grading`, :mod:`.perfect`) takes plain values and raises; only the commands import this module.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.evaluation.grading import SOLVER_COMFORT_EMPTY, PositionValues
from experiments.options import number_argument, warn
from experiments.output import OutputError, check_output_path
from quarto_env.core import Variant

MAX_PERFECT_GAMES = 100_000


def add_perfect_games_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--perfect-games N`` (default 0: none) to a command that grades or evaluates agents."""
    parser.add_argument(
        "--perfect-games",
        type=_perfect_games,
        default=0,
        metavar="N",
        help="also play N games (even: each opening in both seats) against perfect play and report the points "
        "lost (default 0: none)",
    )


def _perfect_games(text: str) -> int:
    """The argparse ``type=`` of ``--perfect-games``: an even number from 0 to :data:`MAX_PERFECT_GAMES`."""
    games = int(number_argument("perfect-games", minimum=0, maximum=MAX_PERFECT_GAMES, integer=True)(text))
    if games % 2:
        raise argparse.ArgumentTypeError(
            f"perfect-games must be even (each opening is played in both seats), got {games}"
        )
    return games


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
        check_output_path(cache, "file", "--cache")  # it is rewritten once new positions are solved
        values = PositionValues(variant, cache)
    except OutputError as error:
        parser.error(str(error))
    except (ValueError, OSError) as error:  # not a cache at all, another variant's, or unreadable
        parser.error(f"--cache {cache}: {error}")
    if values.discarded:
        warn(parser, f"--cache {cache}: {values.discarded}; solving its positions again")
    return values
