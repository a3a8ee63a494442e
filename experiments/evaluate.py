"""Evaluate a training checkpoint against agents over many games, with a confidence interval.

Example usage::

    python -m experiments.evaluate runs/long_parity/checkpoints/final.zip --games 4000
    python -m experiments.evaluate runs/x/checkpoints/best.zip --opponents greedy minimax:depth=3 --seed 7

The games are played side by side as in training (the learner's moves in one batched forward pass per turn),
half with the learner giving first; the learner plays its most likely action (argmax) and, separately, samples
its policy. Against a deterministic opponent the argmax rows replay the same two games over and over: the
sampled rows are the informative ones there.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch as th
from rich.console import Console
from rich.table import Table

from agents.ppo import load_policy
from experiments.config import MAX_GAMES, SEED_LIMIT, check_agent_specs
from experiments.selfplay import EvalResult, evaluate, learner_opponent
from quarto_env.checks import number_argument, one_line


def confidence_95(result: EvalResult) -> float:
    """Half-width of the normal 95% interval of the mean score (per-game scores 1, 1/2, 0)."""
    score, games = result.score(), result.num_games
    wins, draws, losses = (sum(result.counts[seat][k] for seat in result.counts) for k in range(3))
    variance = (wins * (1 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / games
    return 1.96 * math.sqrt(variance / games)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint .zip written by quarto train")
    parser.add_argument("--opponents", nargs="+", default=["random", "greedy", "minimax:depth=2"], help="agent specs")
    parser.add_argument(
        "--games",
        type=number_argument("games", minimum=1, maximum=MAX_GAMES, integer=True),
        default=4000,
        help="games per opponent and learner policy (default 4000)",
    )
    parser.add_argument(
        "--seed",
        type=number_argument("seed", minimum=0, maximum=SEED_LIMIT - 1, integer=True),
        default=12345,
        help="seed of the opponents and the sampled policy",
    )
    args = parser.parse_args(argv)

    th.set_num_threads(1)
    th.manual_seed(args.seed)
    try:
        loaded = load_policy(args.checkpoint)
        check_agent_specs([("--opponents", spec) for spec in args.opponents], loaded.variant, args.seed)
    except ValueError as exc:  # CheckpointError, or an opponent that cannot play this variant
        print(f"{parser.prog}: {one_line(exc)}", file=sys.stderr)
        return 2
    variant = loaded.variant
    table = Table(
        title=f"{args.checkpoint} ({loaded.num_timesteps:,} learner steps, {variant.describe()})",
        caption="score = (wins + draws/2) / games; the interval assumes independent games, which the argmax rows "
        "against a deterministic opponent (minimax) are not: they repeat one game per seat",
    )
    for column in ("opponent", "learner", "games", "first W/D/L", "second W/D/L", "score", "95% interval"):
        table.add_column(column, justify="left" if column in ("opponent", "learner") else "right", no_wrap=True)
    for deterministic in (True, False):
        learner = learner_opponent(loaded.policy, loaded.observation, deterministic)
        for i, spec in enumerate(args.opponents):
            result = evaluate(learner, spec, variant, args.games, args.seed + i)
            table.add_row(
                spec,
                "argmax" if deterministic else "sampled",
                str(result.num_games),
                *("/".join(map(str, result.counts[seat])) for seat in (0, 1)),
                f"{result.score():.3f}",
                f"+-{confidence_95(result):.3f}",
            )
    Console(width=120).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
