"""``quarto bench vector``: steps/s of random self-play on :class:`quarto_env.VectorQuarto`, with and without each
observation kind, at several batch sizes -- and, when pgx is installed, pgx's ``connect_four`` and
``tic_tac_toe`` in the same run, every path reported as a ratio to pgx ``connect_four`` at the same batch.

The paths, each played with uniformly random legal actions for whole games, resets included:

- ``VectorQuarto none`` / ``raw`` / ``tactical`` / ``lookahead`` / ``parity`` / ``tempo``: a loop of
  ``envs.step(sample(info["action_mask"]))``, ``sample`` being :class:`quarto_env.vector.RandomLegalActions`
  (compiled, per-env random streams), that keeps each step's outputs until the next one, as a learner does;
  ``none`` is ``observation=None``, no planes.
- ``VectorQuarto none, numpy sampler``: the same without planes, the actions drawn by numpy's
  ``argmax(rng.random(shape) * mask)``: what the sampler saves.
- ``GameBatch loop, none``: the older engine of ``quarto train`` driven from Python as training drove it
  (masks, sample, step, the rewards of the games that ended, their reset), no planes: the reference the
  vector API was first measured against.
- ``pgx connect_four`` / ``pgx tic_tac_toe`` (only with pgx): ``jax.vmap`` of ``env.step`` under pgx's
  auto-reset wrapper, the random legal actions drawn on the device (pgx's ``act_randomly``), in ``jax.jit``; pgx
  computes observations, masks and rewards in every step. As pgx's own speed benchmark plays them
  (``workspace/speed_benchmark/run_pgx.py`` in github.com/sotetsuk/pgx): 100 steps fused into each call by a
  ``fori_loop``, compilation excluded (a warm-up before timing), each timed slice ending with
  ``jax.block_until_ready``. ``pgx connect_four`` this way is the reference of every ratio.
- ``pgx connect_four, a call per step``: the same with one ``jax.jit`` call per step from Python, as a learner
  with its network in the loop calls it (each call waits for the one before: one call in flight at most).

JAX runs with its defaults (here its CPU backend, with its own threads), or, with ``--pgx-one-core``, with its
threads started on one core: on a small machine pgx can run faster so, its threads no longer spread over every
core (docs/results.md has the figures), and the ratios of such a run are to pgx so. The Quarto paths run
on one thread, and with ``--threads N ...`` the ``VectorQuarto`` kinds also on ``N`` threads each
(``VectorQuarto(threads=N)`` and its sampler ``RandomLegalActions(threads=N)``: ``VectorQuarto tempo, 2
threads``), the same games played by the machine's cores at once.

A *step* is one action in one game: ``batch`` steps per call (``100 * batch`` in a fused pgx call). In Quarto an
action is a placement or a give (about 24 a game), in Connect Four a drop, in tic-tac-toe a mark. The paths are
measured in alternation: each round cuts every path's time at each batch into slices, taken in turn, so that a
change in the machine's load falls on all of them alike (a slice makes one call at least: a fused pgx call of 4096
games takes a fifth of a second); the figures are the medians over the rounds, and the ratios are the medians'
ratios.
Timings depend on the machine and what else runs on it: compare figures from the same run.

Without pgx the run prints one line saying that the ratios need the ``bench`` extra (pgx pulls in
JAX; nothing else in the project imports either) and reports absolute figures.

Example usage::

    quarto bench vector                                  # batches 1 64 1024 4096, every kind, 5 rounds
    quarto bench vector --batches 1024 --observations none parity --rounds 3
    quarto bench vector --batches 1024 --observations parity tempo --threads 1 2
    quarto bench vector --no-pgx --out runs/bench_vector.json
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from agents.storage.files import atomic_write_text
from experiments.bench import add_batch_arguments, add_timing_arguments, unique_batch_arguments
from experiments.options import CommandParser, add_integer_argument, add_seed_argument
from experiments.output import add_overwrite_argument, claim_if_asked
from quarto_env.core import Variant
from quarto_env.errors import install_command
from quarto_env.observation import OBSERVATION_KINDS
from quarto_env.vector import GameBatch, RandomLegalActions, VectorQuarto

KINDS = ("none", *OBSERVATION_KINDS)
"""The observation choices: ``none`` (``observation=None``) and every kind of ``quarto_v1``."""
DEFAULT_BATCHES = (1, 64, 1024, 4096)
PGX_GAMES = ("connect_four", "tic_tac_toe")
PGX_FUSED_STEPS = 100
"""Steps per ``jax.jit`` call in pgx's own speed benchmark (a ``fori_loop``), as here."""
REFERENCE = "pgx connect_four"
"""The path every other one is a ratio to, at the same batch."""
SLICES = 5
"""Each path's time per batch and round is cut into this many slices, taken in turn with the other paths'."""
WARM_UP_CALLS = 20
MAX_THREADS = 256
"""The most ``--threads``: far past any machine's cores that numba would use."""
INSTALL_HINT = f"pgx is not installed: the ratios to pgx connect_four need {install_command('bench')}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``quarto bench vector``."""
    parser = CommandParser(
        prog="quarto bench vector",
        description="Steps/s of random self-play on VectorQuarto per batch size and observation kind, the older "
        "GameBatch loop, and pgx's connect_four and tic_tac_toe when pgx is installed (ratios to connect_four).",
    )
    add_batch_arguments(parser, DEFAULT_BATCHES, KINDS, KINDS, "VectorQuarto (default all)")
    add_timing_arguments(parser, seconds=0.3, timed="path, batch", rounds=5, most_rounds=1000)
    add_seed_argument(parser, "seed of the games and the random actions")
    add_integer_argument(
        parser,
        "--threads",
        [1],
        "VectorQuarto's threads (default 1)",
        fewest=1,
        most=MAX_THREADS,
        nargs="+",
        metavar="N",
    )
    parser.add_argument("--no-pgx", action="store_true", help="leave pgx out even where it is installed")
    parser.add_argument(
        "--pgx-one-core",
        action="store_true",
        help="start JAX's threads on one core (Linux): pgx's best on a small machine; the Quarto paths keep every core",
    )
    parser.add_argument("--out", type=Path, metavar="FILE", help="also write the figures as JSON here")
    add_overwrite_argument(parser)
    args = parser.parse_args(argv)
    unique_batch_arguments(args)
    args.threads = list(dict.fromkeys(int(n) for n in args.threads))
    args.rounds = int(args.rounds)
    if args.pgx_one_core and not hasattr(os, "sched_setaffinity"):
        parser.error("--pgx-one-core needs os.sched_setaffinity (Linux); leave it out here")
    return args


def main(argv: list[str]) -> int:
    """Run the benchmark and print its figures; returns the exit status."""
    args = parse_args(argv)
    with claim_if_asked(args.out, "file", overwrite=args.overwrite, prog="quarto bench vector"):
        return _run(args, argv)


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    """Measure, print the figures and write them to the claimed ``--out`` if given."""
    with_pgx = not args.no_pgx and pgx_installed()
    paths = quarto_paths(args.observations, args.threads)
    if with_pgx:
        paths = {**pgx_paths(), **paths}
        if args.pgx_one_core:
            start_jax_on_one_core(args.batches, args.seed)
    print(_header(args, with_pgx))
    if not with_pgx and not args.no_pgx:
        print(INSTALL_HINT + "\n")
    rounds = measure(paths, args)
    medians = medians_of(rounds)
    ratios = ratios_to_reference(medians) if with_pgx else {}
    print(results_table(medians, ratios, args.batches))
    if args.out:
        _write(args, argv, rounds, medians, ratios, with_pgx)
    return 0


# ---------------------------------------------------------------------------------------------------------
# Paths: each makes a runner for a batch size
# ---------------------------------------------------------------------------------------------------------
class Runner(Protocol):
    steps_per_call: int

    def step(self) -> None: ...

    def finish(self) -> None: ...


Maker = Callable[[int, int], Runner]
"""``make(batch, seed)``: a runner of ``batch`` games, reset and ready."""


class VectorRunner:
    """``VectorQuarto`` with ``observation`` (``None``: no planes), actions from ``RandomLegalActions`` or, with
    ``numpy_sampler``, numpy's argmax of random numbers times the mask."""

    def __init__(
        self, batch: int, seed: int, observation: str | None, numpy_sampler: bool = False, threads: int = 1
    ) -> None:
        self.steps_per_call = batch
        self.envs = VectorQuarto(batch, observation=observation, seed=seed, threads=threads)
        self.sample = self._numpy_sampler(seed) if numpy_sampler else RandomLegalActions(batch, seed, threads)
        _, self.info = self.envs.reset()
        self.outputs: tuple[Any, ...] = ()

    def step(self) -> None:
        # Every output is kept until the next step, as a learner keeps them: what a step costs depends on it.
        self.outputs = self.envs.step(self.sample(self.info["action_mask"]))
        self.info = self.outputs[-1]

    def finish(self) -> None:
        pass

    @staticmethod
    def _numpy_sampler(seed: int) -> Callable[[np.ndarray], np.ndarray]:
        rng = np.random.default_rng(seed)
        return lambda mask: np.argmax(rng.random(mask.shape) * mask, axis=1)


class GameBatchRunner:
    """The older loop over :class:`GameBatch`: masks, sample, step, the rewards of the games that ended, their
    reset; no planes."""

    def __init__(self, batch: int, seed: int) -> None:
        self.steps_per_call = batch
        self.games = GameBatch(Variant(), batch)
        self.all_games = self.games.all_games
        self.seats = np.zeros(batch, dtype=np.int64)
        self.sample = RandomLegalActions(batch, seed=seed)

    def step(self) -> None:
        self.games.step(self.all_games, self.sample(self.games.action_masks(self.all_games)))
        ended = np.flatnonzero(self.games.over)
        if len(ended):
            self.games.returns(ended, self.seats[ended])
            self.games.reset(ended)

    def finish(self) -> None:
        pass


def vector_paths(observations: list[str], threads: list[int] | None = None) -> dict[str, Maker]:
    """VectorQuarto with each kind of ``observations`` (of :data:`KINDS`) on each count of ``threads`` (default
    one): ``VectorQuarto KIND``, and ``VectorQuarto KIND, N threads`` for more than one."""
    return {
        f"VectorQuarto {kind}{'' if n == 1 else f', {n} threads'}": functools.partial(
            VectorRunner, observation=None if kind == "none" else kind, threads=n
        )
        for n in threads or [1]
        for kind in observations
    }


def quarto_paths(observations: list[str], threads: list[int] | None = None) -> dict[str, Maker]:
    """This project's paths: VectorQuarto with each kind asked for on each count of threads, the numpy sampler,
    the GameBatch loop."""
    paths = vector_paths(observations, threads)
    paths["VectorQuarto none, numpy sampler"] = functools.partial(VectorRunner, observation=None, numpy_sampler=True)
    paths["GameBatch loop, none"] = GameBatchRunner
    return paths


# ---------------------------------------------------------------------------------------------------------
# pgx: imported here only, and only when installed and asked for
# ---------------------------------------------------------------------------------------------------------
def pgx_installed() -> bool:
    """Whether pgx (and so JAX) can be imported; looks without importing either."""
    return importlib.util.find_spec("pgx") is not None


class PgxRunner:
    """pgx's ``game`` at ``batch``: each ``jax.jit`` call draws random legal actions and steps every game under
    pgx's auto-reset, ``fused`` times in a ``fori_loop`` (1: a call per step); ``finish`` waits for the device
    (``block_until_ready``). ``game`` is one of pgx's ids, or a ``pgx.Env`` object (an env from outside pgx, such
    as ``quarto_env.jax.env()``: ``quarto bench jax``)."""

    def __init__(self, game: Any, batch: int, seed: int, fused: int, sampler: str = "act_randomly") -> None:
        import jax
        import pgx
        from pgx.experimental import act_randomly, auto_reset

        env = pgx.make(game) if isinstance(game, str) else game  # type: ignore[arg-type]  # EnvId: a Literal
        step_one = auto_reset(env.step, env.init)
        sample = act_randomly if sampler == "act_randomly" else uniform_legal_actions

        def play(state: Any, key: Any) -> tuple[Any, Any]:
            key, act_key, step_key = jax.random.split(key, 3)
            actions = sample(act_key, state.legal_action_mask)
            return jax.vmap(step_one)(state, actions, jax.random.split(step_key, batch)), key

        def play_fused(state: Any, key: Any) -> tuple[Any, Any]:
            return jax.lax.fori_loop(0, fused, lambda _, carry: play(*carry), (state, key))

        self.steps_per_call = batch * fused
        self._block = jax.block_until_ready
        self._play = jax.jit(play if fused == 1 else play_fused)
        self.key, init_key = jax.random.split(jax.random.PRNGKey(seed))
        self.state = jax.jit(jax.vmap(env.init))(jax.random.split(init_key, batch))

    def step(self) -> None:
        previous = self.state
        self.state, self.key = self._play(self.state, self.key)
        self._block(previous)  # one call in flight at most: JAX would queue calls far past the slice's end

    def finish(self) -> None:
        self._block(self.state)


def uniform_legal_actions(key: Any, legal_action_mask: Any) -> Any:
    """A uniformly random legal action per row of ``legal_action_mask``, as pgx's ``act_randomly`` draws it, by
    the argmax of uniform noise over the legal actions rather than a categorical draw from log-probabilities: the
    same distribution, without the two logarithms per action of the Gumbel trick, whose cost on a CPU grows
    steeply past a dozen actions (``quarto bench jax``'s ``uniform sampler`` paths)."""
    import jax
    import jax.numpy as jnp

    noise = jax.random.uniform(key, legal_action_mask.shape)
    return jnp.argmax(jnp.where(legal_action_mask, noise, -1.0), axis=-1)


def pgx_paths(per_step: bool = True) -> dict[str, Maker]:
    """pgx's games as its own benchmark plays them (:data:`PGX_FUSED_STEPS` steps a call), and with ``per_step``
    connect_four with a call per step."""
    paths: dict[str, Maker] = {
        f"pgx {game}": functools.partial(PgxRunner, game, fused=PGX_FUSED_STEPS) for game in PGX_GAMES
    }
    if per_step:
        paths["pgx connect_four, a call per step"] = functools.partial(PgxRunner, "connect_four", fused=1)
    return paths


def start_jax_on_one_core(batches: list[int], seed: int) -> None:
    """Start JAX's CPU backend, and compile and play pgx ``connect_four`` at each batch, while this thread runs on
    one core: the threads JAX starts take that affinity with them, and this thread gets every core back after."""
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        for batch in batches:
            warm_up(PgxRunner("connect_four", batch, seed, fused=PGX_FUSED_STEPS))
    finally:
        os.sched_setaffinity(0, cores)


def pgx_versions() -> dict[str, str]:
    import jax
    import pgx

    return {"pgx": pgx.__version__, "jax": jax.__version__, "jax_backend": jax.default_backend()}


# ---------------------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------------------
def measure(paths: dict[str, Maker], args: argparse.Namespace) -> dict[str, dict[int, list[float]]]:
    """Steps/s of every path at every batch in each of ``args.rounds`` interleaved rounds."""
    runners = {(name, batch): make(batch, args.seed) for batch in args.batches for name, make in paths.items()}
    for runner in runners.values():
        warm_up(runner)
    rounds: dict[str, dict[int, list[float]]] = {name: {batch: [] for batch in args.batches} for name in paths}
    for i in range(args.rounds):
        start = time.perf_counter()
        for batch in args.batches:
            at_batch = {name: runners[name, batch] for name in paths}
            for name, rate in interleaved_rates(at_batch, args.seconds).items():
                rounds[name][batch].append(rate)
        print(f"round {i + 1}/{args.rounds}: {time.perf_counter() - start:.1f} s", flush=True)
    return rounds


def warm_up(runner: Runner) -> None:
    """Compile and load everything the runner calls (pgx's ``jax.jit`` compiles here), untimed: its
    ``warm_up_calls`` calls where it says (a runner whose calls are long), else :data:`WARM_UP_CALLS`."""
    for _ in range(getattr(runner, "warm_up_calls", WARM_UP_CALLS)):
        runner.step()
    runner.finish()


def interleaved_rates(runners: dict[str, Runner], seconds: float) -> dict[str, float]:
    """Steps/s of each runner over ``seconds``, taken in :data:`SLICES` turns alternating between them."""
    steps = dict.fromkeys(runners, 0)
    elapsed = dict.fromkeys(runners, 0.0)
    for _ in range(SLICES):
        for name, runner in runners.items():
            played, took = play_for(runner, seconds / SLICES)
            steps[name] += played
            elapsed[name] += took
    return {name: steps[name] / elapsed[name] for name in runners}


def play_for(runner: Runner, seconds: float) -> tuple[int, float]:
    """Step ``runner`` for about ``seconds`` (at least once), then wait for it; returns (steps, seconds taken)."""
    calls = 0
    start = time.perf_counter()
    while calls == 0 or time.perf_counter() - start < seconds:
        runner.step()
        calls += 1
    runner.finish()
    return calls * runner.steps_per_call, time.perf_counter() - start


def _medians(by_batch: dict[int, list[float]]) -> dict[int, float]:
    return {batch: statistics.median(values) for batch, values in by_batch.items()}


def medians_of(rounds: dict[str, dict[int, list[float]]]) -> dict[str, dict[int, float]]:
    """Every path's median steps/s over the rounds, per batch."""
    return {name: _medians(by_batch) for name, by_batch in rounds.items()}


def _ratios(by_batch: dict[int, float], reference: dict[int, float]) -> dict[int, float]:
    return {batch: rate / reference[batch] for batch, rate in by_batch.items()}


def ratios_to_reference(medians: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
    """Every path's medians as ratios to :data:`REFERENCE`'s at the same batch."""
    return {name: _ratios(by_batch, medians[REFERENCE]) for name, by_batch in medians.items()}


# ---------------------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------------------
def results_table(medians: dict[str, dict[int, float]], ratios: dict[str, dict[int, float]], batches: list[int]) -> str:
    """The medians in steps/s, a column per batch, and each one's ratio to pgx connect_four where measured."""
    width = max(map(len, medians)) + 2
    head = f"{'steps/s (median)':<{width}}" + "".join(f"{f'batch {b}':>22}" for b in batches)
    lines = ["", head]
    for name, by_batch in medians.items():
        cells = [_cell(by_batch[b], ratios.get(name, {}).get(b)) for b in batches]
        lines.append(f"{name:<{width}}" + "".join(f"{cell:>22}" for cell in cells))
    if ratios:
        lines.append(f"\n(x.xx): the ratio to {REFERENCE} at the same batch, in this run")
    return "\n".join(lines)


def _cell(rate: float, ratio: float | None) -> str:
    return f"{rate:,.0f}" if ratio is None else f"{rate:,.0f} ({ratio:.2f})"


def _header(args: argparse.Namespace, with_pgx: bool) -> str:
    machine = machine_record(with_pgx)
    pgx = f", pgx {machine['pgx']} on JAX {machine['jax']} ({machine['jax_backend']})" if with_pgx else ""
    pgx += ", JAX's threads on one core" if with_pgx and args.pgx_one_core else ""
    return (
        f"quarto bench vector -- {machine['cpu_count']} CPUs (load {load_text(machine)}), Python {machine['python']}, "
        f"numpy {machine['numpy']}{pgx}, seed {args.seed}\n{timing_line(args)}"
    )


def load_text(machine: dict[str, Any]) -> str:
    """The machine's load averages (:func:`machine_record`), for a header: ``1.2, 0.9, 0.7``."""
    return ", ".join(f"{value:.1f}" for value in machine["load_average"])


def timing_line(args: argparse.Namespace) -> str:
    """The line of a batch bench's header that says what it times, and how long."""
    return (
        f"uniformly random legal actions, auto-reset; batches {' '.join(map(str, args.batches))}; "
        f"{args.rounds} round(s) of {args.seconds:g} s per path and batch; a step = one action in one game\n"
    )


def machine_record(with_pgx: bool) -> dict[str, Any]:
    """The machine's CPUs, load, Python and numpy, and with ``with_pgx`` pgx's and JAX's versions and backend."""
    machine = {
        "cpu_count": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
    }
    return machine | pgx_versions() if with_pgx else machine


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name`` on Linux), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _write(
    args: argparse.Namespace,
    argv: list[str],
    rounds: dict[str, dict[int, list[float]]],
    medians: dict[str, dict[int, float]],
    ratios: dict[str, dict[int, float]],
    with_pgx: bool,
) -> None:
    config = vars(args) | {"with_pgx": with_pgx} | machine_record(with_pgx)
    write_record(args.out, ["quarto", "bench", "vector", *argv], config, rounds, medians, ratios)


def write_record(
    out: Any,
    command: list[str],
    config: dict[str, Any],
    rounds: dict[str, dict[int, list[float]]],
    medians: dict[str, dict[int, float]],
    ratios: dict[str, dict[int, float]],
) -> None:
    """Write a run's figures as JSON to ``out`` (the command, its config and machine, every round's steps/s, the
    medians and their ratios), and say so."""
    results = {"steps_per_second": rounds, "median_steps_per_second": medians, f"ratio_to_{REFERENCE}": ratios}
    record = {"command": " ".join(command), "config": config, "results": results}
    atomic_write_text(out, json.dumps(record, indent=2, default=str) + "\n")
    print(f"\nwrote {out}")
