"""The ``quarto`` command. Each subcommand lives in its own module of ``experiments`` and is imported only
when it runs, so ``quarto solve`` does not pay for importing torch.

Example usage::

    quarto train                      # self-play training on configs/default.yaml
    quarto bench env                  # environment speed against connect_four_v3
    quarto solve "f9.......0..3... 5"

A command whose reader goes away (``quarto solve - < positions.txt | head -1``) stops quietly with exit status
141, as a Unix tool killed by ``SIGPIPE`` does; Ctrl-C stops any command with status 130 and one line, not a
traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {
    "train": ("experiments.train", "self-play training: MaskablePPO, RLlib PPO or AlphaZero, with checkpoints"),
    "sweep": ("experiments.sweep", "many seeds and settings of a training config on Ray Tune, with statistics"),
    "tournament": ("experiments.tournament", "round-robin tournaments with ratings and confidence intervals"),
    "grade": ("experiments.grade", "share of an agent's decisions that lose value under perfect play"),
    "solve": ("experiments.solve", "exact value and best actions of positions"),
    "play": ("experiments.play", "play a game in the terminal against an agent"),
    "replay": ("experiments.replay", "step through a recorded game, or write it as a GIF"),
    "bench": ("experiments.bench", "speed benchmarks: env, solver, train, mcts"),
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
        print(f"{usage()}\n\nquarto: unknown command {name!r}", file=sys.stderr)  # the message last, where it shows
        return 2
    try:
        module = importlib.import_module(COMMANDS[name][0])  # may compile the search: Ctrl-C may come here too
        return int(module.main(rest) or 0)
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        print(f"\nquarto {name}: interrupted", file=sys.stderr)
        return 130


STATUS_READER_GONE = 128 + 13
"""The exit status of a process killed by ``SIGPIPE`` (13), which is what a reader going away means."""


def _reader_gone() -> int:
    """Point standard output at ``/dev/null``, so that Python's final flush of what is still buffered does not
    raise ``BrokenPipeError`` again (as an "Exception ignored" message), and return :data:`STATUS_READER_GONE`."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)
    return STATUS_READER_GONE


if __name__ == "__main__":
    sys.exit(main())
