"""The ``quarto`` command. Each subcommand lives in its own module of ``experiments`` and is imported only
when it runs, so ``quarto solve`` does not pay for importing torch.

Example usage::

    quarto train                      # self-play training on configs/default.yaml
    quarto bench env                  # environment speed against connect_four_v3
    quarto solve "f9.......0..3... 5"
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "train": ("experiments.train", "self-play training with MaskablePPO, checkpointed, with TensorBoard curves"),
    "tournament": ("experiments.tournament", "round-robin tournaments with ratings and confidence intervals"),
    "grade": ("experiments.grade", "share of an agent's decisions that lose value under perfect play"),
    "solve": ("experiments.solve", "exact value and best actions of positions"),
    "play": ("experiments.play", "play a game in the terminal against an agent"),
    "replay": ("experiments.replay", "step through a recorded game, or write it as a GIF"),
    "bench": ("experiments.bench", "speed benchmarks: env, solver, train"),
}


def usage() -> str:
    """The top-level help text."""
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items())
    return f"usage: quarto COMMAND [ARGS...]\n\ncommands:\n{rows}\n\nquarto COMMAND --help shows a command's options."


def main(argv: list[str] | None = None) -> int:
    """Run ``quarto COMMAND ARGS``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"quarto: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
