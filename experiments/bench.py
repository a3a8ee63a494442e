"""``quarto bench WHAT``: the speed benchmarks, each a module of its own."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "env": ("experiments.bench_env", "turns/s of the wrapped quarto_v0 vs connect_four_v3; rules core states/s"),
    "solver": ("experiments.bench_solver", "exact solver and minimax times on a seeded sample of positions"),
    "train": ("experiments.bench_train", "learner steps/s of a short training run"),
    "mcts": ("experiments.bench_mcts", "MCTS simulations/s, compiled playouts vs Python ones"),
    "az": ("experiments.bench_az", "AlphaZero self-play positions/s and simulations/s, tree vs network time"),
}


def main(argv: list[str]) -> int:
    """Dispatch to ``experiments.bench_<what>.main``."""
    if argv and argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if not argv or argv[0] not in BENCHMARKS:
        problem = f"unknown benchmark {argv[0]!r}" if argv else "name the benchmark to run"
        print(f"{usage()}\n\nquarto bench: {problem}", file=sys.stderr)  # the message last, where it shows
        return 2
    return int(importlib.import_module(BENCHMARKS[argv[0]][0]).main(argv[1:]) or 0)


def usage() -> str:
    """The help text of ``quarto bench``."""
    rows = "\n".join(f"  {name:<7} {text}" for name, (_, text) in BENCHMARKS.items())
    return f"usage: quarto bench WHAT [ARGS...]\n\nbenchmarks:\n{rows}"
