"""``quarto bench WHAT``: the speed benchmarks. Each prints its figures, as ratios to a reference measured in the
same run where one exists.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Sequence

from experiments.options import add_integer_argument, add_number_argument

MAX_SECONDS = 3600.0
"""The most ``--seconds`` of a timed setting per round: an hour is already more than any figure needs."""
MAX_ROUNDS = 1000
"""The most ``--rounds`` of measurement: the spread of a figure settles long before."""
MAX_BATCH = 65_536
"""The most games of one batch of the benches that time games in batches (``vector``, ``jax``)."""


def add_timing_arguments(
    parser: argparse.ArgumentParser, seconds: float, timed: str, rounds: int, most_rounds: int = MAX_ROUNDS
) -> None:
    """Add the timing options of a benchmark that measures its settings in turn, round after round:
    ``--seconds`` (default ``seconds``), the time of each ``timed`` setting per round (the help says "seconds
    per ``timed`` and round"), above 0 and at most :data:`MAX_SECONDS`; and ``--rounds`` (default ``rounds``),
    the rounds of measurement, at least 1 and at most ``most_rounds``."""
    timing = f"seconds per {timed} and round, at most {MAX_SECONDS:g}"
    add_number_argument(parser, "--seconds", seconds, timing, above=0, maximum=MAX_SECONDS)
    add_integer_argument(parser, "--rounds", rounds, "rounds of measurement", fewest=1, most=most_rounds)


def add_batch_arguments(
    parser: argparse.ArgumentParser,
    batches: Sequence[int],
    kinds: Collection[str],
    default_kinds: Collection[str],
    timed: str,
) -> None:
    """Add the options of a benchmark of games in batches: ``--batches``, the batch sizes (games per call, 1 to
    :data:`MAX_BATCH`, default ``batches``), and ``--observations``, the observation kinds of ``timed`` to time (of
    ``kinds``, default ``default_kinds``). :func:`unique_batch_arguments` drops their repeats once parsed."""
    batches_help = f"batch sizes, games per call, 1-{MAX_BATCH}"
    add_integer_argument(
        parser, "--batches", list(batches), batches_help, fewest=1, most=MAX_BATCH, nargs="+", metavar="N"
    )
    add_observations_argument(parser, kinds, default_kinds, timed)


def add_observations_argument(
    parser: argparse.ArgumentParser, kinds: Collection[str], default_kinds: Collection[str], timed: str
) -> None:
    """Add ``--observations``: the observation kinds of ``timed`` to time (of ``kinds``, default ``default_kinds``),
    one or more. :func:`unique_batch_arguments` drops their repeats once parsed."""
    parser.add_argument(
        "--observations",
        nargs="+",
        choices=list(kinds),
        default=list(default_kinds),
        metavar="KIND",
        help=f"observation kinds of {timed} to time, of {', '.join(kinds)}",
    )


def unique_batch_arguments(args: argparse.Namespace) -> None:
    """``--batches`` and ``--observations`` (:func:`add_batch_arguments`) without repeats, in their order."""
    args.batches = list(dict.fromkeys(int(b) for b in args.batches))
    args.observations = list(dict.fromkeys(args.observations))
