"""``quarto bench mcts``: MCTS simulations per second, compiled playouts against Python ones.

Example usage::

    quarto bench mcts --sims 2000 --positions 6 --seed 0

Both searches run on the same seeded positions (from greedy games, at 16, 12, 8 and 4 empty squares) in
the same process, so the ratio between them is the figure to quote; absolute speeds depend on the machine
and its load. The compiled playout's compilation (or cache load) happens before the clock starts.
"""

from __future__ import annotations

import time

from agents.mcts import MCTSAgent
from agents.positions import greedy_game_positions
from experiments.options import SEED, CommandParser, number_argument
from quarto_env.core import INITIAL_STATE, STANDARD, State

EMPTY_SQUARES = (12, 8, 4)


def main(argv: list[str]) -> int:
    """Run the benchmark and print one row per position set."""
    parser = CommandParser(prog="quarto bench mcts", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sims",
        type=number_argument("sims", minimum=1, integer=True),
        default=2000,
        help="simulations per search",
    )
    parser.add_argument(
        "--positions",
        type=number_argument("positions", minimum=1, integer=True),
        default=6,
        help="positions per number of empty squares",
    )
    parser.add_argument(
        "--seed",
        type=SEED,
        default=0,
        help="seed of the positions and the searches",
    )
    args = parser.parse_args(argv)
    position_sets: dict[str, list[State]] = {"16 empty (opening give)": [INITIAL_STATE]}
    for empty in EMPTY_SQUARES:
        position_sets[f"{empty} empty"] = greedy_game_positions(empty, args.positions, args.seed, STANDARD)
    print(f"MCTS, {args.sims} simulations per search, standard rules")
    print(f"{'positions':<26}{'compiled sims/s':>16}{'python sims/s':>16}{'ratio':>8}")
    for name, positions in position_sets.items():
        compiled = sims_per_second("compiled", positions, args.sims, args.seed)
        python = sims_per_second("python", positions, args.sims, args.seed)
        print(f"{name:<26}{compiled:>16,.0f}{python:>16,.0f}{compiled / python:>8.1f}")
    return 0


def sims_per_second(playout: str, positions: list[State], sims: int, seed: int) -> float:
    """Simulations per second of one search per position, with ``playout`` playouts."""
    agent = MCTSAgent(STANDARD, seed=seed, sims=sims, playout=playout)
    total_sims = 0
    start = time.perf_counter()
    for state in positions:
        agent.act(state)
        assert agent.last_search is not None
        total_sims += agent.last_search.sims
    return total_sims / (time.perf_counter() - start)
