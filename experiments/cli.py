"""The ``quarto`` command, the one door to every experiment: :data:`COMMANDS` and :data:`BENCHMARKS` name the
module behind each subcommand, imported only when it runs, so ``quarto solve`` does not pay for importing torch.

Example usage::

    quarto train                      # self-play training on configs/default.yaml
    quarto bench env                  # environment speed against connect_four_v3
    quarto solve "f9.......0..3... 5"

``quarto --version`` (or ``-V``) prints ``quarto-env X.Y.Z``. An unknown command prints the usage and, last, the
problem with the nearest name (``quarto trian``: ``did you mean 'train'?``), exit status 2. A command whose
reader goes away (``quarto solve - < positions.txt | head -1``) stops quietly with exit status 141, as a Unix
tool killed by ``SIGPIPE`` does; Ctrl-C stops any command with status 130 and one line, not a traceback.
``SIGTERM`` (``kill PID``, ``timeout``, a job scheduler's stop) does what Ctrl-C does -- it keeps what Ctrl-C
keeps (a grade's solved values, a tournament's games, a training's ``latest.zip``) and leaves no lock or staging
folder -- and exits with status 143, a process stopped by ``SIGTERM``'s (:func:`sigterm_as_interrupt`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import NamedTuple

from quarto_env.extras import MissingExtra, as_missing_extra


class Entry(NamedTuple):
    """A subcommand: the module whose ``main(argv)`` runs it, imported only then, and its line of help."""

    module: str | None
    """``None``: a table of its own (``quarto bench``)."""
    help: str


Table = dict[str, Entry]
"""A subcommand's name -> its :class:`Entry`."""

COMMANDS: Table = {
    "train": Entry(
        "experiments.training.train",
        "self-play training (MaskablePPO, RLlib PPO or AlphaZero) with checkpoints",
    ),
    "sweep": Entry(
        "experiments.training.sweep", "many seeds and settings of a training config on Ray Tune, with stats"
    ),
    "evaluate": Entry("experiments.training.evaluate", "a trained checkpoint or run against agents, with intervals"),
    "plot": Entry("experiments.training.plot", "the evaluation curves of training runs, as one PNG"),
    "tournament": Entry(
        "experiments.arena.tournament", "round-robin tournaments with ratings and confidence intervals"
    ),
    "grade": Entry("experiments.arena.grade", "share of an agent's decisions that lose value under perfect play"),
    "solve": Entry("experiments.arena.solve", "exact value and best actions of positions"),
    "book": Entry("experiments.arena.book", "build the opening book that makes the solver exact from the first move"),
    "suite": Entry("experiments.arena.suite", "show, check or build the versioned suites of solved positions"),
    "dataset": Entry("experiments.training.dataset", "solved positions as arrays for supervised learning"),
    "play": Entry("experiments.arena.play", "play a game in the terminal against an agent"),
    "replay": Entry("experiments.arena.replay", "step through a recorded game, or write it as a GIF"),
    "compile": Entry("experiments.bench.compile", "compile the numba kernels ahead of time (once, after installing)"),
    "bench": Entry(None, "speed benchmarks: "),  # its list of names is added below, from BENCHMARKS
}
"""``quarto NAME``: the module whose ``main(argv)`` runs it, and its line of help."""

BENCHMARKS: Table = {
    "env": Entry("experiments.bench.env", "turns/s of the wrapped quarto_v1 vs connect_four_v3; rules core states/s"),
    "solver": Entry("experiments.bench.solver", "exact solver and minimax times on a seeded sample of positions"),
    "train": Entry("experiments.bench.train", "learner steps/s of a short training run"),
    "mcts": Entry("experiments.bench.uct", "MCTS against quartors (a compiled peer) at equal time per turn"),
    "az": Entry("experiments.bench.az", "AlphaZero self-play positions/s and simulations/s, tree vs network time"),
    "network": Entry("experiments.probe.network", "supervised fit of network designs to exact values; forward time"),
    "vector": Entry(
        "experiments.bench.vector", "VectorQuarto steps/s per batch and observation kind; vs pgx if installed"
    ),
    "planes": Entry("experiments.bench.planes", "ns per position of each kind of observation planes alone, by phase"),
    "jax": Entry(
        "experiments.bench.jax", "quarto_env.jax steps/s vs pgx; --check vs the compiled core; --device-check"
    ),
    "startup": Entry(
        "experiments.bench.startup", "a new process: first env step, first MCTS move; warm, cold; beside quartors"
    ),
}
"""``quarto bench NAME``: the same, one level down."""
COMMANDS["bench"] = Entry(None, COMMANDS["bench"].help + ", ".join(BENCHMARKS))  # cannot miss a benchmark


def version_line() -> str:
    """``quarto-env X.Y.Z``: what ``quarto --version`` prints (the installed package's version)."""
    import quarto_env

    return f"{quarto_env.DISTRIBUTION} {quarto_env.__version__}"


def usage(table: Table = COMMANDS, prog: str = "quarto", noun: str = "COMMAND", kind: str = "command") -> str:
    """The help text of ``prog`` and its ``table`` of subcommands (each a ``kind``, named by ``noun``)."""
    width = max(map(len, table))
    rows = "\n".join(f"  {name:<{width}}  {entry.help}" for name, entry in table.items())
    version = "\n\n--version (-V) prints the version." if prog == "quarto" else ""
    return (
        f"usage: {prog} {noun} [ARGS...]\n\n{kind}s:\n{rows}\n\n{prog} {noun} --help shows a {kind}'s options.{version}"
    )


def dispatch(argv: list[str], table: Table, prog: str, noun: str, kind: str) -> int:
    """Run the entry of ``table`` that ``argv[0]`` names with the rest of ``argv``; 2 for a missing or unknown
    name (the usage, then the problem last, where it shows)."""
    if argv and argv[0] in ("-h", "--help"):
        print(usage(table, prog, noun, kind))
        return 0
    if not argv or argv[0] not in table:
        problem = f"unknown {kind} {argv[0]!r}{_suggestion(argv[0], table)}" if argv else f"name the {kind} to run"
        print(f"{usage(table, prog, noun, kind)}\n\n{prog}: {problem}", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    module_name = table[name].module
    if module_name is None:  # a table of its own: quarto bench WHAT
        return dispatch(rest, BENCHMARKS, f"{prog} {name}", "WHAT", "benchmark")
    try:
        module = importlib.import_module(module_name)  # may compile the search: Ctrl-C may come here too
        return int(module.main(rest) or 0)
    except MissingExtra as refusal:  # a feature that checked for its extra before doing anything
        return _without_extra(f"{prog} {name}", table[name], str(refusal), rest)
    except ModuleNotFoundError as exc:  # a command, or a part of it, whose extra is not installed
        missing = as_missing_extra(exc, "this command")
        if missing is None:
            raise
        return _without_extra(f"{prog} {name}", table[name], str(missing), rest)


def _without_extra(command: str, entry: Entry, missing: str, rest: list[str]) -> int:
    """A command whose extra is missing: the line that says so, exit status 2; asked for its help, what the
    command does and that line, exit status 0 (its options are its parser's, which needs the extra)."""
    if any(arg in ("-h", "--help") for arg in rest):
        then = f"; then `{command} --help` lists its options"
        print(f"usage: {command} [ARGS...]\n\n{entry.help}\n\n{missing[:1].upper()}{missing[1:]}{then}.")
        return 0
    print(f"{command}: {missing}", file=sys.stderr)
    return 2


def _suggestion(name: str, table: Table) -> str:
    """``"; did you mean 'train'?"`` for a name near one of ``table``'s, else ``""``."""
    from agents.specs import did_you_mean  # here, not above: every command would pay for numpy and the rules core

    return did_you_mean(name, table)


def main(argv: list[str] | None = None) -> int:
    """Run ``quarto COMMAND ARGS``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        print(version_line())
        return 0
    with sigterm_as_interrupt() as terminated:
        try:
            status = dispatch(argv, COMMANDS, "quarto", "COMMAND", "command")
        except BrokenPipeError:
            return _reader_gone()
        except KeyboardInterrupt:
            print(f"\nquarto {argv[0]}: interrupted", file=sys.stderr)
            status = STATUS_INTERRUPTED
    return STATUS_TERMINATED if status == STATUS_INTERRUPTED and terminated else status


STATUS_INTERRUPTED = 128 + signal.SIGINT
"""The exit status after Ctrl-C (``SIGINT``, 2), as a shell reports a process it stopped."""
STATUS_TERMINATED = 128 + signal.SIGTERM
"""The exit status after ``SIGTERM`` (15), which is handled as Ctrl-C (:func:`sigterm_as_interrupt`)."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[list[int]]:
    """Within the block ``SIGTERM`` raises ``KeyboardInterrupt``, as Ctrl-C does: every command's Ctrl-C path (what
    it saves, the output it releases) runs for it too, and a compiled search stops at once (:mod:`agents.interrupts`
    watches for both). The block gets a list that the signal's number is appended to. Left alone where
    ``SIGTERM`` is ignored (a parent's choice) or handled already, and off the main thread (no handler there)."""
    received: list[int] = []

    def interrupt(number: int, frame: object) -> None:
        received.append(number)
        raise KeyboardInterrupt

    ours = False
    with contextlib.suppress(ValueError):  # not the main thread of the main interpreter
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, interrupt)
            ours = True
    try:
        yield received
    finally:
        if ours:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
