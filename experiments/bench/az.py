"""``quarto bench az``: the speed of AlphaZero self-play, and where its time goes.

Example usage::

    quarto bench az --games 1 16 128 --sims 64 --seconds 10
    quarto bench az --games 128 --observation tempo --seconds 20     # the planes configs/alphazero.yaml trains on
    quarto bench az --checkpoint runs/alphazero__0__.../checkpoints/final.zip

For each number of games searched side by side it plays self-play moves for about ``--seconds`` (after one
warm-up move, which loads the compiled kernels) with a network of the config's shape -- fresh and seeded, or
``--checkpoint``'s -- and prints searched positions/s, finished games/s, simulations/s (one selection
per game per round) and the share of search time spent in the tree kernels (selection, expansion, backup,
observation planes) against the network's forward passes. The first row (one game at a time, as the ``az``
agent searches) is the reference: the last column is each row's simulations/s over it, measured in the same
run. No training happens, so these are the upper bounds of ``quarto train``'s self-play rates; its TensorBoard
``charts/`` show the rates with training included.

Then the A/B of the leaf evaluations (:meth:`agents.networks.policy_value.PolicyValueNetwork.evaluate`): self-play
sessions alike (the last ``--games``, the seed), one per path -- the network's forward pass (``forward``, the
reference), the fast path that gives its numbers bit for bit (``fast``, the default) and, where the ``onnx`` extra is
installed, ONNX Runtime's CPU session (``onnx``, close but not bit for bit) -- their rounds interleaved for about
``--seconds`` (the order reversed every round). It prints each path's evaluations, CPU and wall milliseconds per batch
(medians), page faults per batch, CPU seconds in all and the forward pass's CPU seconds over its, and the whole
self-play's searched positions per CPU second (tree kernels and evaluations together); then, for each path
against the forward pass, the ratio of the wall times, the largest difference of their logits and values on the same
positions (the batches of the two sessions, compared while they are the same), and whether the two sessions played
the same moves. The machine's load average heads it.

With ``--workers N [N ...]`` it compares self-play in this process (``workers: 0``, one core) with N Ray workers
(``workers: N``, :mod:`experiments.training.az_workers`, each one CPU, one torch thread and its own ``--games``
games), on a local Ray with every core of the machine: ``--rounds`` rounds, each timing every setting for
``--seconds`` in turn (0 first, then each N), so that a change in the machine's load falls on all of them alike.
It prints each setting's median, lowest and highest searched positions/s over the rounds, the ratio of its
median to the median of 0 workers, and the CPUs its self-play processes had (CPU seconds per second; on a
machine busy with other work, below one per process) with the positions per CPU second. The workers are
started and warmed up before the first round, and the rounds they had in flight when a window closes are not
counted; the workers of every N are up at once, so the Ns together take that many CPUs. ``--games`` takes one
number there (default 128)::

    quarto bench az --workers 2 --rounds 3 --seconds 10
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from rich.console import Console
from rich.table import Table

from agents.alphazero import load_network
from agents.networks.checkpoints import CheckpointError
from agents.networks.onnx_runtime import onnx_available
from agents.networks.policy_value import FAST_MIN_BATCH, PolicyValueNetwork
from agents.tree.sessions import PUCTOptions, SelfPlaySession
from experiments.bench import MAX_SECONDS
from experiments.options import CommandParser, add_integer_argument, add_number_argument, add_seed_argument
from experiments.training.az_selfplay import SelfPlayReport, play_rounds, self_play
from experiments.training.config import MAX_WORKERS, TrainConfig
from experiments.training.config_file import config_from_dict
from experiments.training.ray_runtime import RayStartError
from quarto_env.core import STANDARD
from quarto_env.observation import OBSERVATION_KINDS, observation_kind

DEFAULT_GAMES = (1, 16, 128)
"""The rows of games searched side by side; the last is also each process's games with ``--workers``."""


def main(argv: list[str]) -> int:
    """Run the benchmark; one row per number of games."""
    parser = CommandParser(prog="quarto bench az", description=__doc__.split("\n\n")[0])
    games_help = (
        f"numbers of games searched side by side (default {' '.join(map(str, DEFAULT_GAMES))}; the first is the "
        f"reference); with --workers, one number: the games of each process (default {DEFAULT_GAMES[-1]})"
    )
    add_integer_argument(parser, "--games", None, games_help, fewest=1, most=4096, nargs="+")
    workers = "compare self-play in this process with this many Ray workers (each N; see --rounds)"
    add_integer_argument(parser, "--workers", None, workers, fewest=1, most=MAX_WORKERS, nargs="+")
    add_integer_argument(
        parser, "--rounds", 3, "with --workers: rounds of timing every setting in turn", fewest=1, most=1000
    )
    add_integer_argument(
        parser,
        "--sims",
        64,
        "simulations per searched move (default 64, as configs/alphazero.yaml)",
        fewest=1,
        most=10_000,
    )
    add_number_argument(parser, "--seconds", 10.0, "self-play time per row", above=0, maximum=MAX_SECONDS)
    add_integer_argument(parser, "--width", 64, fewest=1, most=1024)
    parser.add_argument("--checkpoint", default=None, help="an alphazero checkpoint or run folder (default: fresh)")
    parser.add_argument(
        "--observation",
        default="parity",
        choices=sorted(OBSERVATION_KINDS),
        help="the fresh network's observation planes (default parity; configs/alphazero.yaml trains on tempo)",
    )
    add_seed_argument(parser, "seed of the network and the games")
    args = parser.parse_args(argv)
    if args.workers and args.games and len(args.games) > 1:
        parser.error(f"--games takes one number with --workers (the games of each process), got {args.games}")

    th.set_num_threads(1)
    th.manual_seed(args.seed)
    metadata: dict[str, Any] = {}
    if args.checkpoint:
        try:
            network, metadata = load_network(args.checkpoint, STANDARD)
        except CheckpointError as exc:
            print(f"quarto bench az: {exc}", file=sys.stderr)
            return 2
    else:
        network = PolicyValueNetwork(observation_kind(args.observation), list(STANDARD.groups), args.width)
    network.eval()
    if args.workers:
        games = args.games[0] if args.games else DEFAULT_GAMES[-1]
        config = bench_config(metadata.get("config"), network, games, args.sims, max(args.workers))
        try:
            rows = compare_workers(config, network, args.workers, args.rounds, args.seconds, args.seed)
        except RayStartError as exc:
            print(f"quarto bench az: {exc}", file=sys.stderr)
            return 2
        Console(width=160).print(workers_table(rows, config, args.rounds, args.seconds))
        return 0
    args.games = args.games or list(DEFAULT_GAMES)
    print(
        f"AlphaZero self-play, standard rules, {args.sims} simulations per searched move, network width "
        f"{network.width}, {network.kind.name} planes, about {args.seconds:g} s per row, one thread"
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
    print_evaluation_ab(evaluation_ab(network, args.games[-1], args.sims, args.seconds, args.seed))
    return 0


def self_play_rates(network: PolicyValueNetwork, games: int, sims: int, seconds: float, seed: int) -> dict[str, float]:
    """Self-play of ``games`` games side by side for about ``seconds``: positions, games and simulations per
    second, and the tree's share of the search time."""
    options = PUCTOptions(sims, targets="visits")
    selfplay = SelfPlaySession(None, options, network.kind, STANDARD, seed, parallel=games, records=False)
    play_rounds(selfplay, network, 1)  # loads the kernels; the counters start again from zero
    reports = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        reports.append(play_rounds(selfplay, network, 1))
    elapsed = time.perf_counter() - start
    tree, network_seconds = sum(r.tree_seconds for r in reports), sum(r.network_seconds for r in reports)
    return {
        "positions/s": sum(r.searched for r in reports) / elapsed,
        "games/s": sum(len(r.lengths) for r in reports) / elapsed,
        "sims/s": sum(r.simulations for r in reports) / elapsed,
        "tree share": tree / max(tree + network_seconds, 1e-9),
    }


REFERENCE_PATH = "forward"
"""The path of :meth:`PolicyValueNetwork.evaluate` that the evaluation A/B holds the others to."""


def ab_paths() -> tuple[str, ...]:
    """The paths of the evaluation A/B: the forward pass first, then the fast path, then ONNX Runtime where the
    ``onnx`` extra is installed."""
    return (REFERENCE_PATH, "fast", *(("onnx",) if onnx_available() else ()))


@dataclasses.dataclass
class Evaluations:
    """The timed evaluations of one path in the A/B, and what they saw."""

    cpu: list[float] = dataclasses.field(default_factory=list)
    wall: list[float] = dataclasses.field(default_factory=list)
    faults: list[int] = dataclasses.field(default_factory=list)
    batches: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = dataclasses.field(default_factory=list)
    """The round's batches: (planes, logits, values)."""
    difference: float = 0.0
    """The largest difference of its outputs from the reference path's on the same positions."""
    compared: int = 0
    """The batches compared with the reference path's."""
    alike: bool = True
    """Whether its session evaluated the same positions as the reference path's (so played the same moves)."""
    searched: int = 0
    """The positions its session searched (self-play moves that were not forced)."""
    selfplay_cpu: float = 0.0
    """The CPU seconds of its session's rounds, the tree kernels' and the evaluations' together."""

    def play_round(self, session: SelfPlaySession, evaluator: Callable[[Any], tuple[np.ndarray, np.ndarray]]) -> None:
        """Play one round of ``session``'s moves, counting its searched positions and CPU time."""
        cpu = time.thread_time()
        result = session.play_round(evaluator)
        self.selfplay_cpu += time.thread_time() - cpu
        self.searched += 0 if result is None else len(result.prior)

    def evaluator(self, network: PolicyValueNetwork, path: str) -> Callable[[Any], tuple[np.ndarray, np.ndarray]]:
        """A session's evaluator that times ``network.evaluate(..., path)`` and keeps what it saw."""

        def evaluate(batch: Any) -> tuple[np.ndarray, np.ndarray]:
            planes, faults = batch.observations, _page_faults()
            cpu, wall = time.thread_time(), time.perf_counter()
            logits, values = network.evaluate(planes, path)
            self.wall.append(time.perf_counter() - wall)
            self.cpu.append(time.thread_time() - cpu)
            self.faults.append(_page_faults() - faults)
            self.batches.append((planes.copy(), logits, values))
            return logits, values

        return evaluate

    def compare(self, reference: Evaluations) -> None:
        """Compare this round's batches with the reference path's, while the two sessions are alike: whether they
        evaluated the same positions throughout, and the largest difference of the outputs of those they shared."""
        if not self.alike:
            return
        for (planes, *outputs), (other_planes, *other_outputs) in zip(self.batches, reference.batches, strict=False):
            if not np.array_equal(planes, other_planes):
                self.alike = False
                return
            self.compared += 1
            for one, other in zip(outputs, other_outputs, strict=True):
                self.difference = max(self.difference, float(np.max(np.abs(one - other), initial=0.0)))
        self.alike = len(self.batches) == len(reference.batches)


def _page_faults() -> int:
    """The minor page faults of this thread so far (0 where the platform does not count them per thread)."""
    import resource

    who = getattr(resource, "RUSAGE_THREAD", None)
    return resource.getrusage(who).ru_minflt if who is not None else 0


def evaluation_ab(network: PolicyValueNetwork, games: int, sims: int, seconds: float, seed: int) -> dict[str, Any]:
    """The leaf evaluations of self-play sessions alike (``games`` games side by side, ``sims`` simulations,
    ``seed``), one per path of :func:`ab_paths`, their rounds interleaved for about ``seconds`` after one warm-up
    round each (the order reversed every round): each path's :class:`Evaluations`, compared with the reference
    path's on the same positions."""
    options = PUCTOptions(sims, targets="visits")
    paths = ab_paths()
    sessions = {
        path: SelfPlaySession(None, options, network.kind, STANDARD, seed, parallel=games, records=False)
        for path in paths
    }
    for path, session in sessions.items():  # loads the kernels, sizes the fast path's buffers, builds the session
        session.play_round(Evaluations().evaluator(network, path))
    logs = {path: Evaluations() for path in paths}
    evaluators = {path: logs[path].evaluator(network, path) for path in paths}
    rounds, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for path in paths[:: 1 if rounds % 2 == 0 else -1]:
            logs[path].play_round(sessions[path], evaluators[path])
        rounds += 1
        for path in paths[1:]:
            logs[path].compare(logs[REFERENCE_PATH])
        for log in logs.values():
            log.batches.clear()
    return {"logs": logs, "rounds": rounds, "games": games, "sims": sims, "seconds": seconds, "load": os.getloadavg()}


def print_evaluation_ab(ab: dict[str, Any]) -> None:
    """Print the evaluation A/B of :func:`evaluation_ab`."""
    logs: dict[str, Evaluations] = ab["logs"]
    load = ", ".join(f"{value:.2f}" for value in ab["load"])
    print(
        f"\nLeaf evaluations A/B: self-play sessions alike, one per path, {ab['games']} games side by side, "
        f"{ab['sims']} simulations, {ab['rounds']} rounds each in about {ab['seconds']:g} s, interleaved; "
        f"load average {load}"
    )
    header = ("path", "evaluations", "CPU ms/batch", "wall ms/batch", "faults/batch", "CPU s", "forward/path CPU")
    print("".join(f"{h:>17}" for h in header) + f"{'self-play pos/CPU-s':>21}")
    reference = logs[REFERENCE_PATH]
    for path, log in logs.items():
        print(
            f"{path:>17}{len(log.cpu):>17,}{statistics.median(log.cpu) * 1e3:>17.2f}"
            f"{statistics.median(log.wall) * 1e3:>17.2f}{statistics.mean(log.faults):>17.0f}{sum(log.cpu):>17.2f}"
            f"{sum(reference.cpu) / max(sum(log.cpu), 1e-9):>16.2f}x"
            f"{log.searched / max(log.selfplay_cpu, 1e-9):>21,.0f}"
        )
    for path, log in logs.items():
        if path != REFERENCE_PATH:
            print(
                f"{path} against {REFERENCE_PATH}: {sum(reference.wall) / max(sum(log.wall), 1e-9):.2f}x the wall "
                f"time; largest |difference| of logits and values {log.difference:.3g} over {log.compared:,} "
                "batches of the same positions; "
                + ("the same moves" if log.alike else "different positions searched since (the moves differed)")
            )
    if "onnx" not in logs:
        print("(onnx: not measured, the onnx extra is not installed: pip install 'quarto-env[onnx]')")
    if ab["games"] < FAST_MIN_BATCH:
        print(f"(below {FAST_MIN_BATCH} positions a batch runs the forward pass on every path)")


def bench_config(
    trained: dict[str, Any] | None, network: PolicyValueNetwork, games: int, sims: int, workers: int
) -> TrainConfig:
    """The self-play config of the workers comparison: a checkpoint's training config (``trained``) or the
    defaults for the fresh network, with ``games`` games per process and ``sims`` simulations."""
    config = config_from_dict(trained or {"algorithm": "alphazero"})
    searches = dataclasses.replace(config.alphazero, sims=sims, workers=workers, network_design=network.design)
    return dataclasses.replace(
        config, num_games=games, net_arch=[network.width], observation=network.kind, alphazero=searches
    )


def with_workers(config: TrainConfig, count: int) -> TrainConfig:
    """``config`` with ``count`` self-play workers."""
    return dataclasses.replace(config, alphazero=dataclasses.replace(config.alphazero, workers=count))


def compare_workers(
    config: TrainConfig, network: PolicyValueNetwork, workers: list[int], rounds: int, seconds: float, seed: int
) -> dict[int, list[tuple[float, float]]]:
    """Searched positions/s of self-play in this process (key 0) and with each number of ``workers``, timed for
    ``seconds`` per setting in each of ``rounds`` rounds, the settings in turn; each with the CPUs it had."""
    from experiments.training.az_workers import WorkerPool  # imports ray
    from experiments.training.ray_runtime import start_ray

    started_ray = start_ray()
    pools: dict[int, WorkerPool] = {}
    try:
        selfplay = self_play(config, config.variant, np.random.default_rng(seed))
        play_rounds(selfplay, network, 1)  # loads the kernels
        for count in workers:
            pools[count] = pool = WorkerPool(with_workers(config, count), seed, network)
            for _ in range(count):  # each worker's first round: its kernels load
                pool.next_report()
            pool.drain()
        rates: dict[int, list[tuple[float, float]]] = {0: [], **{count: [] for count in workers}}
        for _ in range(rounds):
            rates[0].append(_timed(lambda: play_rounds(selfplay, network, 1), seconds))
            for count, pool in pools.items():
                pool.refill()
                rates[count].append(_timed(pool.next_report, seconds))
                pool.drain()
        return rates
    finally:
        for pool in pools.values():
            pool.close()
        if started_ray:
            import ray

            ray.shutdown()


def _timed(next_report: Callable[[], SelfPlayReport], seconds: float) -> tuple[float, float]:
    """Searched positions/s of the reports ``next_report`` gives within about ``seconds``, and the CPUs their
    processes had (CPU seconds per second: on a busy machine, less than one per process)."""
    searched, cpu_seconds, start = 0, 0.0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        report = next_report()
        searched, cpu_seconds = searched + report.searched, cpu_seconds + report.cpu_seconds
    elapsed = time.perf_counter() - start
    return searched / elapsed, cpu_seconds / elapsed


def workers_table(
    rates: dict[int, list[tuple[float, float]]], config: TrainConfig, rounds: int, seconds: float
) -> Table:
    """The workers comparison: each setting's median, lowest and highest positions/s, its median over 0's, and the
    CPUs its self-play processes had (median), with the positions per CPU second."""
    table = Table(
        title=f"AlphaZero self-play positions/s, {config.num_games} games per process, "
        f"{config.alphazero.sims} simulations, network width {config.net_arch[0]}, {rounds} rounds of about "
        f"{seconds:g} s per setting ({os.cpu_count()} CPUs)"
    )
    columns = ("workers", "positions/s (median)", "lowest", "highest", "ratio to 0 workers", "CPUs had", "pos/CPU-s")
    for column in columns:
        table.add_column(column, justify="right")
    reference = statistics.median(rate for rate, _ in rates[0])
    for count, measured in rates.items():
        median = statistics.median(rate for rate, _ in measured)
        cpus = statistics.median(cpu for _, cpu in measured)
        table.add_row(
            str(count) if count else "0 (this process)",
            f"{median:,.0f}",
            f"{min(rate for rate, _ in measured):,.0f}",
            f"{max(rate for rate, _ in measured):,.0f}",
            f"{median / reference:.2f}",
            f"{cpus:.2f}",
            f"{median / max(cpus, 1e-9):,.0f}",
        )
    return table
