"""``quarto bench solver``: how fast the exact solver and minimax are, on a fixed, seeded sample.

Example usage::

    quarto bench solver                          # the full benchmark (a few minutes on 2 cores)
    quarto bench solver --empties 8 10 --positions 5 --out runs/bench/solver.json

What it measures, each on a fresh transposition table:

* **solver** -- positions with 8, 10 and 12 empty squares (standard rules unless flags say otherwise), half with
  a piece in hand and half with a piece to give, reached by seeded greedy-vs-greedy play
  (:func:`agents.solver.positions.greedy_game_positions`: greedy takes wins and never hands over a winning piece when a
  safe one exists, so the positions are not decided by the next action). For each group: median seconds and nodes
  of the exact value, nodes per second, the slowest position, and the median extra seconds to list every best
  action as ``solve()`` does, also as a ratio: (value + best actions) / value. ``--jobs`` and ``--table-mb``
  set the solver's threads and table as for ``quarto solve``.
* **minimax** -- seconds per move at depths 1-4 (and 6, 8) from a few opening positions (after 0-3 greedy actions).
* **time budget** -- how long ``minimax:time=T`` really takes per move, as a ratio to ``T`` (at most 1.0 is
  within budget).
* **solver agent over whole games** -- seconds per move of the ``solver`` agent as users get it (the variant's
  opening book, one thread, no value cache: ``QUARTO_CACHE_DIR=off`` for this process) in ``--games`` seeded
  games against itself from the empty board: the median and the slowest move overall and by empty squares.
* **start-up** -- seconds for a new process to import the search with an empty numba cache (it compiles) and
  again with the cache filled (it loads the machine code).

Figures are wall-clock seconds on whatever else the machine is running: run it on a quiet machine, and read
them as noisy. With ``--out`` the figures, the resolved configuration and the command are written (atomically)
to a JSON file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agents.simple import GreedyAgent
from agents.solver.minimax import MinimaxAgent, Solver
from agents.solver.positions import greedy_game_positions
from agents.solver.table import table_bits_for
from agents.storage.files import atomic_write_text
from experiments.arena.solve import add_search_arguments
from experiments.options import (
    CommandParser,
    add_integer_argument,
    add_number_argument,
    add_seed_argument,
    add_variant_arguments,
    parse_command,
)
from experiments.output import add_overwrite_argument, claim_if_asked
from quarto_env.core import INITIAL_STATE, MAX_GAME_LENGTH, NUM_SQUARES, State, Variant, step
from quarto_env.notation import format_position

DEFAULT_BENCH_TABLE_MB = 64
"""The solver's table in the benchmark: larger than the agents' 32 MiB, small enough to clear fast."""
MAX_BUDGET = 600.0
"""Seconds: a longer minimax:time budget is no benchmark."""
MAX_POSITIONS = 10_000
"""The most ``--positions`` per group and ``--openings``: each is solved or searched at every setting."""
BUDGET_EMPTIES = range(14, 8, -1)
"""The positions timed under a budget, one per number of empty squares."""


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    parser = CommandParser(prog="quarto bench solver", description=__doc__.split("\n\n")[0])
    add_integer_argument(
        parser, "--empties", [8, 10, 12], "empty squares per group, 1-16", fewest=1, most=NUM_SQUARES, nargs="+"
    )
    add_integer_argument(parser, "--positions", 10, "positions per group", fewest=1, most=MAX_POSITIONS)
    add_seed_argument(parser, "seed of the position sample")
    depths = f"minimax depths in plies, 1-{MAX_GAME_LENGTH}"
    add_integer_argument(
        parser, "--depths", [1, 2, 3, 4, 6, 8], depths, fewest=1, most=MAX_GAME_LENGTH, name="depth", nargs="+"
    )
    add_integer_argument(parser, "--openings", 4, "opening positions for minimax", fewest=1, most=MAX_POSITIONS)
    budgets = f"minimax:time values in seconds, at most {MAX_BUDGET:g}"
    add_number_argument(
        parser, "--budgets", [0.01, 0.1, 1.0], budgets, name="budget", nargs="+", above=0, maximum=MAX_BUDGET
    )
    moves = len(BUDGET_EMPTIES)
    add_integer_argument(parser, "--budget-moves", moves, f"moves timed per budget, 1-{moves}", fewest=1, most=moves)
    games = "whole games of the solver agent against itself, every move timed (default 4; 0: none)"
    add_integer_argument(parser, "--games", 4, games, fewest=0, most=1000)
    add_search_arguments(parser, DEFAULT_BENCH_TABLE_MB, "larger than the agents' 32 MiB, small enough to clear fast")
    parser.add_argument("--skip-startup", action="store_true", help="do not time process start-up")
    parser.add_argument(
        "--out",
        type=Path,
        help="also write the figures, config and command to this JSON file",
    )
    add_overwrite_argument(parser)
    add_variant_arguments(parser, several_words=True)
    return parser


@dataclasses.dataclass
class SolveTiming:
    """The solver's figures on one position of the benchmark: its value, best actions, time and nodes."""

    position: str
    value: int
    best_actions: list[int]
    seconds: float
    """Wall time of the exact value, from a fresh table."""
    nodes: int
    best_actions_seconds: float
    """Extra wall time to list every best action, reusing the table the value filled."""


def bench_solver(variant: Variant, empties: int, count: int, seed: int, jobs: int = 1, table_mb: float = 64) -> dict:
    """Solve ``count`` seeded positions with ``empties`` empty squares; print and return the group's figures."""
    solver = Solver(variant, table_bits=table_bits_for(table_mb), jobs=jobs)
    solver.value(greedy_game_positions(6, 1, seed=seed, variant=variant)[0])  # untimed: first-call costs
    rows = []
    for state in greedy_game_positions(empties, count, seed=seed + empties, variant=variant):
        solver.clear()
        start, nodes_before = time.perf_counter(), solver.nodes
        value = solver.value(state)
        seconds, nodes = time.perf_counter() - start, solver.nodes - nodes_before
        start = time.perf_counter()
        best = solver.solve(state).best_actions
        assert best is not None  # listed unless value_only
        rows.append(SolveTiming(format_position(state), value, best, seconds, nodes, time.perf_counter() - start))
    slowest = max(rows, key=lambda r: r.seconds)
    summary = {
        "empties": empties,
        "positions": len(rows),
        "median_seconds": statistics.median(r.seconds for r in rows),
        "max_seconds": slowest.seconds,
        "slowest_position": slowest.position,
        "median_nodes": statistics.median(r.nodes for r in rows),
        "nodes_per_second": sum(r.nodes for r in rows) / sum(r.seconds for r in rows),
        "median_best_actions_seconds": statistics.median(r.best_actions_seconds for r in rows),
        "median_best_actions_ratio": statistics.median((r.seconds + r.best_actions_seconds) / r.seconds for r in rows),
        "values": {str(v): sum(r.value == v for r in rows) for v in (1, 0, -1)},
        "rows": [dataclasses.asdict(r) for r in rows],
    }
    print(
        f"  {empties:>2} empty  {len(rows):>3}  {summary['median_seconds']:>9.3f}  {slowest.seconds:>8.3f}"
        f"  {summary['median_nodes']:>12,.0f}  {summary['nodes_per_second']:>11,.0f}"
        f"  {summary['median_best_actions_seconds']:>11.3f}  {summary['median_best_actions_ratio']:>6.2f}"
        f"   {slowest.position}",
        flush=True,
    )
    return summary


def opening_positions(variant: Variant, count: int, seed: int) -> list[State]:
    """The opening, and positions after 1, 2, 3, ... seeded greedy actions (wrapping after 3)."""
    positions = []
    for index in range(count):
        positions.append(_after_greedy_actions(variant, index % 4, seed + index))
    return positions


def _after_greedy_actions(variant: Variant, actions: int, seed: int) -> State:
    agent, state = GreedyAgent(variant, seed=seed), INITIAL_STATE
    for _ in range(actions):
        state = step(variant, state, agent.act(state))
    return state


def bench_minimax(variant: Variant, depths: list[int], openings: list[State]) -> list[dict]:
    """Seconds and nodes per move of ``minimax:depth=d`` (fresh table each move) from the opening positions."""
    results = []
    for depth in depths:
        seconds, nodes = [], []
        for state in openings:
            agent = MinimaxAgent(variant, seed=0, depth=depth)
            start = time.perf_counter()
            agent.act(state)
            seconds.append(time.perf_counter() - start)
            nodes.append(agent.last_nodes)
        result = {
            "depth": depth,
            "median_seconds": statistics.median(seconds),
            "max_seconds": max(seconds),
            "median_nodes": statistics.median(nodes),
        }
        print(
            f"  depth {depth}  {result['median_seconds']:>10.4f}  {result['max_seconds']:>10.4f}"
            f"  {result['median_nodes']:>12,.0f}",
            flush=True,
        )
        results.append(result)
    return results


def bench_budgets(variant: Variant, budgets: list[float], moves: int, seed: int) -> list[dict]:
    """Wall time per move of ``minimax:time=T`` over the first ``moves`` moves of a seeded greedy game's
    positions with 14 down to 9 empty squares, as a ratio to ``T``."""
    positions = [greedy_game_positions(empties, 1, seed=seed, variant=variant)[0] for empties in BUDGET_EMPTIES]
    results = []
    for budget in budgets:
        agent = MinimaxAgent(variant, seed=0, time=budget)
        ratios, depths = [], []
        for state in positions[:moves]:
            start = time.perf_counter()
            agent.act(state)
            ratios.append((time.perf_counter() - start) / budget)
            depths.append(agent.last_depth)
        result = {
            "budget": budget,
            "max_ratio": max(ratios),
            "median_ratio": statistics.median(ratios),
            "median_depth": statistics.median(depths),
        }
        print(
            f"  time={budget:<6g}  {result['median_ratio']:>12.3f}  {result['max_ratio']:>9.3f}"
            f"  {result['median_depth']:>12g}",
            flush=True,
        )
        results.append(result)
    return results


def bench_agent_games(variant: Variant, games: int, seed: int) -> dict:
    """Seconds per move of the ``solver`` agent (its default options) in ``games`` seeded games against itself
    from the empty board, overall and by empty squares, with no value cache (a cold start, as on a fresh
    machine)."""
    from agents.solver.minimax import SolverAgent

    os.environ["QUARTO_CACHE_DIR"] = "off"  # read when each agent's solver is made; this process only
    by_empty: dict[int, list[float]] = {}
    for game in range(games):
        players = [SolverAgent(variant, seed=seed + 2 * game + seat) for seat in range(2)]
        state = INITIAL_STATE
        while not state.over:
            start = time.perf_counter()
            action = players[state.to_move].act(state)
            by_empty.setdefault(state.num_empty, []).append(time.perf_counter() - start)
            state = step(variant, state, action)
    moves = [seconds for times in by_empty.values() for seconds in times]
    stages = {e: {"median": statistics.median(t), "max": max(t), "moves": len(t)} for e, t in by_empty.items()}
    median, slowest = statistics.median(moves), max(moves)
    print(f"  all   {len(moves):>5}  {median:>9.4f}  {slowest:>8.3f}", flush=True)
    for empty in sorted(stages, reverse=True):
        row = stages[empty]
        print(f"  {empty:>2}    {row['moves']:>5.0f}  {row['median']:>9.4f}  {row['max']:>8.3f}", flush=True)
    return {"games": games, "moves": len(moves), "median_seconds": median, "max_seconds": slowest, "by_empty": stages}


def bench_startup() -> dict:
    """Seconds for a fresh process to import the search and solve one position, with an empty numba cache and
    then with the cache it filled."""
    code = "from agents.solver.minimax import solve; from quarto_env.notation import parse_position; "
    code += "solve(parse_position('6.e2....d8..9..1 5'))"
    timings = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("first_process_seconds", "second_process_seconds"):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            timings[label] = time.perf_counter() - start
    print(
        f"  first process (compiles): {timings['first_process_seconds']:.2f} s   "
        f"second process (cached): {timings['second_process_seconds']:.2f} s",
        flush=True,
    )
    return timings


def main(argv: list[str]) -> int:
    """Run ``quarto bench solver``."""
    parser, args, variant = parse_command(build_parser, argv)
    with claim_if_asked(args.out, "file", overwrite=args.overwrite, prog=parser.prog):
        return _run(parser, args, variant, argv)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, variant: Variant, argv: list[str]) -> int:
    """Time the solver, print the figures and write them to the claimed ``--out`` if given."""
    command = "quarto bench solver " + " ".join(argv)
    print(f"# {command}\n# variant: {variant.describe()}, seed {args.seed}; wall-clock seconds (noisy)")

    print(
        f"\nexact solver, {args.jobs} thread(s), {args.table_mb:g} MiB table (fresh table per position; the value, "
        "then the extra time for every best action, and value + best actions as a multiple of the value alone)"
    )
    print("  group     n   median s     max s  median nodes      nodes/s  best acts s   ratio   slowest position")
    solver = [
        bench_solver(variant, empties, args.positions, args.seed, args.jobs, args.table_mb) for empties in args.empties
    ]

    print("\nminimax seconds per move from opening positions (fresh table per move)")
    print("  depth     median s       max s  median nodes")
    minimax = bench_minimax(variant, args.depths, opening_positions(variant, args.openings, args.seed))

    print("\nminimax under a time budget: wall time per move / budget (<= 1.0 is within budget)")
    print("  budget      median ratio  max ratio  median depth")
    budgets = bench_budgets(variant, args.budgets, args.budget_moves, args.seed)

    games = {}
    if args.games:
        print(f"\nthe solver agent against itself, {args.games} games from the empty board, no value cache")
        print("  empty  moves   median s     max s")
        games = bench_agent_games(variant, args.games, args.seed)

    startup = {}
    if not args.skip_startup:
        print("\nstart-up: import, load or compile the search, solve one position")
        startup = bench_startup()

    if args.out:
        config = {**vars(args), "out": str(args.out), "variant": variant.to_dict()}
        results = {"solver": solver, "minimax": minimax, "budgets": budgets, "agent_games": games, "startup": startup}
        record = {"command": command, "config": config, "results": results}
        atomic_write_text(args.out, json.dumps(record, indent=2))
        print(f"\nwrote {args.out}")
    return 0
