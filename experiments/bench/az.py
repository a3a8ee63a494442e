"""``quarto bench az``: the speed of AlphaZero self-play, and where its time goes.

Example usage::

    quarto bench az --games 1 16 128 --sims 64 --seconds 10
    quarto bench az --checkpoint runs/alphazero__0__.../checkpoints/final.zip

For each number of games searched side by side it plays self-play moves for about ``--seconds`` (after one
warm-up move, which loads the compiled kernels) with a network of the config's shape -- fresh and seeded, or
``--checkpoint``'s -- and prints searched positions/s, finished games/s, simulations/s (one selection
per game per round) and the share of search time spent in the tree kernels (selection, expansion, backup,
observation planes) against the network's forward passes. The first row (one game at a time, as the ``az``
agent searches) is the reference: the last column is each row's simulations/s over it, measured in the same
run. No training happens, so these are the upper bounds of ``quarto train``'s self-play rates; its TensorBoard
``charts/`` show the rates with training included.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch as th

from agents.alphazero import load_network
from agents.networks import PolicyValueNetwork
from agents.puct import BatchedSearch
from experiments.options import SEED
from experiments.training.az_selfplay import SelfPlay, SelfPlaySettings
from quarto_env.checks import number_argument
from quarto_env.core import STANDARD
from quarto_env.observation import observation_kind


def main(argv: list[str]) -> int:
    """Run the benchmark; one row per number of games."""
    parser = argparse.ArgumentParser(prog="quarto bench az", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--games",
        type=number_argument("games", minimum=1, maximum=4096, integer=True),
        nargs="+",
        default=[1, 16, 128],
        help="numbers of games searched side by side (default 1 16 128; the first is the reference)",
    )
    parser.add_argument(
        "--sims",
        type=number_argument("sims", minimum=1, maximum=10_000, integer=True),
        default=64,
        help="simulations per searched move (default 64, as configs/alphazero.yaml)",
    )
    parser.add_argument(
        "--seconds",
        type=number_argument("seconds", above=0, maximum=3600),
        default=10.0,
        help="self-play time per row (default 10)",
    )
    parser.add_argument("--width", type=number_argument("width", minimum=1, maximum=1024, integer=True), default=64)
    parser.add_argument("--checkpoint", default=None, help="an alphazero checkpoint or run folder (default: fresh)")
    parser.add_argument("--seed", type=SEED, default=0, help="seed of the network and the games (default 0)")
    args = parser.parse_args(argv)

    th.set_num_threads(1)
    th.manual_seed(args.seed)
    if args.checkpoint:
        network, _ = load_network(args.checkpoint, STANDARD)
    else:
        network = PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), args.width)
    network.eval()
    print(
        f"AlphaZero self-play, standard rules, {args.sims} simulations per searched move, network width "
        f"{network.width}, about {args.seconds:g} s per row, one thread"
    )
    header = ("games", "positions/s", "games/s", "sims/s", "tree share", "sims/s ratio")
    print("".join(f"{h:>14}" for h in header))
    reference = None
    for games in args.games:
        rates = self_play_rates(network, games, args.sims, args.seconds, args.seed)
        reference = reference or rates["sims/s"]
        print(
            f"{games:>14}{rates['positions/s']:>14,.0f}{rates['games/s']:>14,.1f}{rates['sims/s']:>14,.0f}"
            f"{rates['tree share']:>14.0%}{rates['sims/s'] / reference:>14.1f}"
        )
    return 0


def self_play_rates(network: PolicyValueNetwork, games: int, sims: int, seconds: float, seed: int) -> dict[str, float]:
    """Self-play of ``games`` games side by side for about ``seconds``: positions, games and simulations per
    second, and the tree's share of the search time."""
    search = BatchedSearch(STANDARD, network.kind, network.evaluate, games, sims)
    selfplay = SelfPlay(search, SelfPlaySettings(sims, temperature_plies=8, noise=(0.3, 0.25)))
    rng = np.random.default_rng(seed)
    selfplay.play_move(rng)  # loads the kernels
    search.simulations, search.tree_seconds, search.network_seconds = 0, 0.0, 0.0
    selfplay.lengths = []
    moves = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        selfplay.play_move(rng)
        moves += 1
    elapsed = time.perf_counter() - start
    searching = search.tree_seconds + search.network_seconds
    return {
        "positions/s": moves * games / elapsed,
        "games/s": len(selfplay.lengths) / elapsed,
        "sims/s": search.simulations / elapsed,
        "tree share": search.tree_seconds / max(searching, 1e-9),
    }
