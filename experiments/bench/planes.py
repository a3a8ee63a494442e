"""``quarto bench planes``: what each kind of observation planes costs alone, per position, by phase.

``quarto bench vector`` times whole steps of :class:`~quarto_env.vector.VectorQuarto`, planes included, beside
pgx; its figures move by tens of percent between runs on a small machine, more than most changes to the planes.
This bench isolates the planes: it plays seeded random games (``VectorQuarto`` without planes,
:class:`~quarto_env.vector.RandomLegalActions`), keeps ``--positions`` of the positions they went through, and
times one compiled loop that writes each kind's planes for all of them (:func:`quarto_env.vector.write_env_planes`,
as a step writes them), the least of ``--rounds`` rounds. It prints nanoseconds per position: over all of them,
over those that place and those that give, and over the positions that give by the pieces on the board (the
``tempo`` planes of a give work out a placement of every safe piece, so they cost most in the middle game).

Example usage::

    quarto bench planes                                   # every kind, 32,768 positions, 5 rounds
    quarto bench planes --observations parity tempo --rounds 9
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable

import numpy as np

from experiments.bench import add_observations_argument, add_timing_arguments
from experiments.bench.vector import cpu_model
from experiments.options import CommandParser, add_integer_argument, add_seed_argument
from quarto_env.core import FIELD_HAND, FIELD_OCCUPIED, NO_PIECE, Variant, popcount
from quarto_env.kernel import kernel
from quarto_env.observation import OBSERVATION_KINDS
from quarto_env.vector import RandomLegalActions, VectorQuarto, write_env_planes

DEFAULT_POSITIONS = 32_768
MAX_POSITIONS = 1 << 22
GAMES = 1024
"""The most games played side by side to collect the positions: fewer for fewer positions, so that they still
come from every stage of the game (a game lasts about 24 steps)."""
STEPS_PER_GAME = 32
RING = 1024
"""The planes are written into a ring of this many positions' planes: the cache holds it, as it holds a step's."""
PIECE_BANDS = ((0, 3), (4, 7), (8, 11), (12, 15))
"""The bands of pieces on the board the give positions are split into."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``quarto bench planes``."""
    parser = CommandParser(
        prog="quarto bench planes",
        description="Nanoseconds per position of each kind of observation planes alone, in one compiled loop over "
        "positions of seeded random games; by phase, and the positions that give by the pieces on the board.",
    )
    add_integer_argument(
        parser, "--positions", DEFAULT_POSITIONS, "positions timed", fewest=1, most=MAX_POSITIONS, metavar="N"
    )
    add_timing_arguments(parser, seconds=0.1, timed="kind, subset", rounds=5)
    add_observations_argument(parser, OBSERVATION_KINDS, OBSERVATION_KINDS, "the planes alone (default all)")
    add_seed_argument(parser, "seed of the random games")
    args = parser.parse_args(argv)
    args.observations = list(dict.fromkeys(args.observations))
    return args


def main(argv: list[str]) -> int:
    """Run the benchmark and print its figures; returns the exit status."""
    args = parse_args(argv)
    variant = Variant()
    positions = random_positions(args.positions, args.seed)
    print(
        f"quarto bench planes -- {cpu_model()}, seed {args.seed}: {len(positions):,} positions of random games; "
        f"ns per position, the least time of a loop over them in {args.rounds} round(s) of {args.seconds:g} s per "
        "kind and subset"
    )
    subsets = position_subsets(positions)
    print("kind".ljust(10) + "".join(f"{name:>12}" for name in subsets))
    for kind in args.observations:
        times = planes_times(variant, kind, subsets, args.rounds, args.seconds)
        print(kind.ljust(10) + "".join(f"{times[name]:>12,.0f}" for name in subsets))
    print("(give a-b: positions that give with a to b pieces on the board)")
    return 0


def random_positions(count: int, seed: int) -> np.ndarray:
    """``count`` positions (rows of :attr:`~quarto_env.vector.GameBatch.positions`) that seeded random games of the
    standard rules go through, each step's in turn: at most :data:`GAMES` games side by side, for about
    :data:`STEPS_PER_GAME` steps."""
    games = min(GAMES, max(1, count // STEPS_PER_GAME))
    envs, draw = VectorQuarto(games, observation=None, seed=seed), RandomLegalActions(games, seed)
    _, info = envs.reset()
    rows = []
    for _ in range(-(-count // games)):
        *_, info = envs.step(draw(info["action_mask"]))
        rows.append(envs.games.positions.copy())
    return np.concatenate(rows)[:count]


def position_subsets(positions: np.ndarray) -> dict[str, np.ndarray]:
    """The positions, all of them, those that place, those that give, and those that give by :data:`PIECE_BANDS`
    (each band that has some), as contiguous arrays."""
    giving = positions[:, FIELD_HAND] == NO_PIECE
    pieces = np.array([popcount(occupied) for occupied in positions[:, FIELD_OCCUPIED]])
    subsets = {"all": positions, "place": positions[~giving], "give": positions[giving]}
    for low, high in PIECE_BANDS:
        subsets[f"give {low}-{high}"] = positions[giving & (pieces >= low) & (pieces <= high)]
    return {name: np.ascontiguousarray(rows) for name, rows in subsets.items() if len(rows)}


def planes_times(
    variant: Variant, kind: str, subsets: dict[str, np.ndarray], rounds: int, seconds: float
) -> dict[str, float]:
    """Nanoseconds per position of ``kind``'s planes over each subset: the least time of the loop over it in
    ``rounds`` rounds, each running it over and over for about ``seconds`` per subset, the subsets in turn."""
    level, shape = OBSERVATION_KINDS[kind].level, OBSERVATION_KINDS[kind].shape
    words = np.zeros((RING, *shape), dtype=np.int8).view(np.uint64)
    _write_all(words, level, subsets["all"][:1], variant.compiled)  # compiles, or loads the cached machine code
    best = dict.fromkeys(subsets, np.inf)
    for _ in range(rounds):
        for name, rows in subsets.items():
            loop = functools.partial(_write_all, words, level, rows, variant.compiled)
            best[name] = min(best[name], _least_per_position(loop, len(rows), seconds))
    return {name: value * 1e9 for name, value in best.items()}


def _least_per_position(loop: Callable[[], None], count: int, seconds: float) -> float:
    """Seconds per position of ``loop`` (a loop over ``count`` positions): the least of its calls in about
    ``seconds`` (one call at least)."""
    best, start = np.inf, time.perf_counter()
    while True:
        began = time.perf_counter()
        loop()
        best = min(best, (time.perf_counter() - began) / count)
        if time.perf_counter() - start > seconds:
            return float(best)


@kernel
def _write_all(words, level, positions, rules):  # type: ignore[no-untyped-def]
    """Write the planes of every position into the ring of ``words`` (a ring of planes seen as 64-bit words),
    compiled as the step's kernels are (:func:`~quarto_env.kernel.kernel`): numba's reference counting would count
    each row's view in and out, which costs more than the raw planes themselves."""
    for i in range(len(positions)):
        write_env_planes(words[i % len(words)], level, positions[i], rules)
