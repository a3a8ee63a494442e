"""``quarto bench WHAT``: the speed benchmarks. Each prints its figures, as ratios to a reference measured in the
same run where one exists.
"""

from __future__ import annotations

import argparse

from experiments.options import add_integer_argument, add_number_argument

MAX_SECONDS = 3600.0
"""The most ``--seconds`` of a timed setting per round: an hour is already more than any figure needs."""
MAX_ROUNDS = 1000
"""The most ``--rounds`` of measurement: the spread of a figure settles long before."""


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
