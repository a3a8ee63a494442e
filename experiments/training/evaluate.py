"""Evaluate a training checkpoint against agents over many games, with a confidence interval.

Example usage::

    quarto evaluate runs/long_parity/checkpoints/final.zip --games 4000
    quarto evaluate runs/x/checkpoints/best.zip --opponents greedy minimax:depth=3 --seed 7
    quarto evaluate runs/az/checkpoints/final.zip --opponents minimax:depth=4 --games 400 \
        --opening-plies 4 --sims 200 0

The games are played side by side as in training (the learner's moves in one batched call per turn), half with
the learner giving first. A PPO learner plays its most likely action (argmax) and, separately, samples its
policy; an alphazero learner plays the most visited action of its search, once per ``--sims`` value (0: the
network's policy alone), all games searched together. ``--opening-plies`` starts each pair of games (one per
seating) from the same random opening. From the empty board, a deterministic learner against a deterministic
opponent (minimax) replays the same two games over and over: there, the sampled rows, or openings, are the
informative ones.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch as th
from rich.console import Console
from rich.table import Table

from agents.alphazero import load_network
from agents.base import DEFAULT_SEARCH_SIMULATIONS, MAX_SEARCH_SIMULATIONS
from agents.checkpoints import check_algorithm, read_metadata
from agents.match import MAX_OPENING_PLIES
from agents.ppo import load_policy
from agents.puct import DEFAULT_C_PUCT
from experiments.training.az_selfplay import SearchOpponent
from experiments.training.config import MAX_GAMES, SEED_LIMIT, check_agent_specs
from experiments.training.selfplay import EvalResult, Opponent, evaluate_all, policy_players
from quarto_env.checks import number_argument, one_line
from quarto_env.core import Variant
from quarto_env.observation import observation_kind


def confidence_95(result: EvalResult) -> float:
    """Half-width of the normal 95% interval of the mean score (per-game scores 1, 1/2, 0)."""
    score, games = result.score(), result.num_games
    wins, draws, losses = (sum(result.counts[seat][k] for seat in result.counts) for k in range(3))
    variance = (wins * (1 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / games
    return 1.96 * math.sqrt(variance / games)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quarto evaluate", description=__doc__.split("\n\n")[0])
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
    parser.add_argument(
        "--opening-plies",
        type=number_argument("opening-plies", minimum=0, maximum=MAX_OPENING_PLIES, integer=True),
        default=0,
        help=f"random actions starting each pair of games, shared by both seatings (0-{MAX_OPENING_PLIES}; default 0)",
    )
    parser.add_argument(
        "--sims",
        type=number_argument("sims", minimum=0, maximum=MAX_SEARCH_SIMULATIONS, integer=True),
        nargs="+",
        default=[DEFAULT_SEARCH_SIMULATIONS],
        help="alphazero checkpoints: simulations per move, one row each (0: the policy alone; default "
        f"{DEFAULT_SEARCH_SIMULATIONS})",
    )
    args = parser.parse_args(argv)

    th.set_num_threads(1)
    th.manual_seed(args.seed)
    try:
        learners, steps, variant = _learners(args)
        check_agent_specs([("--opponents", spec) for spec in args.opponents], variant, args.seed)
    except ValueError as exc:  # CheckpointError, or an opponent that cannot play this variant
        print(f"{parser.prog}: {one_line(exc)}", file=sys.stderr)
        return 2
    table = Table(
        title=f"{args.checkpoint} ({steps:,} learner steps, {variant.describe()})",
        caption="score = (wins + draws/2) / games; the interval assumes independent games, which a deterministic "
        "learner and opponent from the empty board are not: they repeat one game per seat",
    )
    for column in ("opponent", "learner", "games", "first W/D/L", "second W/D/L", "score", "95% interval"):
        # Every column keeps its full width but the opponent's spec, which may be a long path.
        widths = {"opponent": (None, 40), "learner": (max(len(learner.playing) for learner in learners), None)}
        min_width, max_width = widths.get(column, (len(column), None))
        table.add_column(
            column,
            justify="left" if column in ("opponent", "learner") else "right",
            no_wrap=True,
            min_width=min_width,
            max_width=max_width,
        )
    for result in evaluate_all(learners, args.opponents, variant, args.games, args.seed, args.opening_plies):
        table.add_row(
            result.opponent,
            result.playing,
            str(result.num_games),
            *("/".join(map(str, result.counts[seat])) for seat in (0, 1)),
            f"{result.score():.3f}",
            f"+-{confidence_95(result):.3f}",
        )
    Console(width=120).print(table)
    return 0


def _learners(args: argparse.Namespace) -> tuple[list[Opponent], int, Variant]:
    """The checkpoint's ways of playing (each named for the table by its ``playing``); its step count and rule
    variant."""
    metadata = read_metadata(args.checkpoint)
    if metadata.get("algorithm", "ppo") == "alphazero":
        network, metadata = load_network(args.checkpoint)
        variant = Variant.make(**metadata["variant"])
        searches = [SearchOpponent(network, variant, args.games, sims, DEFAULT_C_PUCT) for sims in args.sims]
        return list(searches), int(metadata["num_timesteps"]), variant
    check_algorithm(args.checkpoint, metadata, "ppo")
    loaded = load_policy(args.checkpoint)
    players = policy_players(loaded.policy, observation_kind(loaded.observation))
    return list(players), loaded.num_timesteps, loaded.variant
