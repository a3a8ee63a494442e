"""AlphaZero's self-play workers (``workers: N``): N Ray actors that play self-play while the learner
(:mod:`experiments.training.alphazero`) trains on what they send.

Each worker (:class:`SelfPlayWorker`: one CPU, one torch thread, its network on the CPU) plays its own
``num_games`` games side by side, so N workers play ``N * num_games``; its generator is seeded from the run's
seed, its index and how often it was restarted. A call plays one round of moves
(:func:`experiments.training.az_selfplay.play_rounds`) and returns a :class:`SelfPlayReport`: the stored positions
of the games that ended (positions, policy targets, outcomes, root values, as numpy arrays) and its counters.

:class:`WorkerPool`, the learner's side, keeps :data:`IN_FLIGHT` calls outstanding on every worker, so that a
worker never waits for the learner, and takes the reports in the order they finish (``ray.wait``: the learner
never waits on the slowest worker). Weights travel through Ray's object store: :meth:`WorkerPool.broadcast` puts
them there once and every later call carries the reference, with the version (the learner's gradient steps when
they were sent); a worker fetches them only when its own are older. A worker whose process dies (killed, out of
memory, its node lost: ``RayActorError``) is replaced by a fresh one with the latest weights, with one line
printed; the rounds it had in flight are lost. Workers need as many CPUs as there are of them, on this machine or
the Ray cluster (``quarto train --address``); too few is refused in one line rather than left waiting.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
import torch as th
from ray.exceptions import GetTimeoutError, RayActorError

from agents.networks.policy_value import PolicyValueNetwork
from experiments.training.az_selfplay import SelfPlayReport, new_network, play_rounds, self_play
from experiments.training.config import TrainConfig
from experiments.training.ray_runtime import RayStartError

IN_FLIGHT = 2
"""Calls outstanding on each worker: it starts its next round while the learner takes the last one."""
START_SECONDS = 300
"""How long a worker may take to start (import torch, load the game kernels) before the run gives up on it."""


class SelfPlayWorker:
    """One worker's games and network (a Ray actor: :class:`WorkerPool` makes it remote)."""

    def __init__(self, config: TrainConfig, index: int, seed: list[int], niceness: int) -> None:
        th.set_num_threads(1)  # one CPU per worker: more threads only fight over it
        # Ray starts its workers at niceness 15, so that on a busy machine every other process comes first; the
        # self-play workers are the run's main work: they take the learner's niceness where the OS allows it.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        variant = config.variant
        self.network = new_network(config, variant).eval()
        self.selfplay = self_play(config, variant, np.random.default_rng(seed))
        self.index = index
        self.version = -1

    def where(self) -> dict[str, Any]:
        """The Ray node, the process and the niceness this worker runs with."""
        place = {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}
        return {**place, "niceness": os.getpriority(os.PRIO_PROCESS, 0)}

    def play(self, version: int, weights: list[ray.ObjectRef]) -> SelfPlayReport:
        """One round of moves with the weights of ``version`` (fetched from the object store if newer than the
        worker's; given in a list so that Ray passes the reference, not the weights, with every call)."""
        if version != self.version:
            self.network.load_state_dict(ray.get(weights[0]))
            self.version = self.selfplay.model_version = version
        report = play_rounds(self.selfplay, self.network, 1)
        report.worker, report.weights_version = self.index, version
        return report


class WorkerPool:
    """The learner's handle on ``alphazero.workers`` self-play workers; :meth:`next_report` takes their reports."""

    def __init__(
        self, config: TrainConfig, seed: int, network: PolicyValueNetwork, log: Callable[[str], None] = print
    ) -> None:
        check_cpus(config.alphazero.workers)
        self.config, self.seed, self.log = config, seed, log
        self.actor_class = ray.remote(num_cpus=1, max_restarts=0)(SelfPlayWorker)
        self.restarts = [0] * config.alphazero.workers
        self.positions = [0] * config.alphazero.workers
        """Searched positions each worker (whichever process held its index) reported."""
        self.broadcast(network, 0)
        self.workers = [self._start(index) for index in range(config.alphazero.workers)]
        self.places = [self._place(index) for index in range(config.alphazero.workers)]
        """Each worker's node id, process id and niceness (as :meth:`SelfPlayWorker.where` gives them)."""
        self.pending: dict[ray.ObjectRef, int] = {}
        for index in range(config.alphazero.workers):
            self._submit(index, IN_FLIGHT)

    def broadcast(self, network: PolicyValueNetwork, version: int) -> None:
        """Put ``network``'s weights in the object store (once, for every worker) as ``version``."""
        self.weights = ray.put({key: value.detach().cpu() for key, value in network.state_dict().items()})
        self.version = version

    def next_report(self) -> SelfPlayReport:
        """The first report any worker finishes; a worker that died is restarted (one line) and waited past."""
        while True:
            (ready,), _ = ray.wait(list(self.pending), num_returns=1)
            index = self.pending.pop(ready)
            try:
                report: SelfPlayReport = ray.get(ready)
            except RayActorError as exc:
                self._restart(index, exc)
                continue
            self.positions[index] += report.searched
            self._submit(index, 1)
            return report

    def drain(self) -> None:
        """Wait for every outstanding call and drop its report (the bench's pause between timed windows)."""
        with contextlib.suppress(RayActorError):  # a dead worker is restarted by the first report after refill
            ray.get(list(self.pending))
        self.pending.clear()

    def refill(self) -> None:
        """:data:`IN_FLIGHT` calls outstanding on every worker again, after :meth:`drain`."""
        for index in range(len(self.workers)):
            self._submit(index, IN_FLIGHT)

    def summary(self) -> list[dict[str, Any]]:
        """Per worker: its node, process, searched positions and restarts (the run folder's ``workers.json``)."""
        return [
            {"worker": index, **place, "positions": self.positions[index], "restarts": self.restarts[index]}
            for index, place in enumerate(self.places)
        ]

    def close(self) -> None:
        for worker in self.workers:
            ray.kill(worker)
        self.pending.clear()

    def _start(self, index: int) -> Any:
        seed = [self.seed, index, self.restarts[index]]  # a restarted worker plays new games
        niceness = os.getpriority(os.PRIO_PROCESS, 0)
        return self.actor_class.remote(self.config, index, seed, niceness)  # type: ignore[attr-defined]

    def _place(self, index: int) -> dict[str, Any]:
        """Where worker ``index`` runs, once it has started; :class:`RayStartError` if it does not start in time
        (Ray would keep it waiting for a CPU without end)."""
        try:
            place: dict[str, Any] = ray.get(self.workers[index].where.remote(), timeout=START_SECONDS)
        except GetTimeoutError:
            raise RayStartError(
                f"self-play worker {index} did not start within {START_SECONDS} s: no CPU free on the Ray cluster?"
            ) from None
        return place

    def _submit(self, index: int, calls: int) -> None:
        for _ in range(calls):
            self.pending[self.workers[index].play.remote(self.version, [self.weights])] = index

    def _restart(self, index: int, exc: RayActorError) -> None:
        self.pending = {ref: held for ref, held in self.pending.items() if held != index}  # lost with the worker
        ray.kill(self.workers[index], no_restart=True)
        self.restarts[index] += 1
        self.log(
            f"self-play worker {index} died ({type(exc).__name__}); restarted with the weights of update "
            f"{self.version:,} (restart {self.restarts[index]})"
        )
        self.workers[index] = self._start(index)
        self.places[index] = self._place(index)
        self._submit(index, IN_FLIGHT)


def check_cpus(workers: int, seconds: float = 10.0) -> None:
    """Refuse more workers than the Ray cluster has CPUs free: their actors would wait for CPUs forever. Waits up
    to ``seconds`` for them first: the CPUs of actors just ended come back with a delay."""
    deadline = time.monotonic() + seconds
    while (cpus := int(ray.available_resources().get("CPU", 0))) < workers and time.monotonic() < deadline:
        time.sleep(0.2)
    if workers > cpus:
        raise RayStartError(
            f"workers={workers} needs {workers} CPUs (one per self-play worker), the Ray cluster has "
            f"{cpus} free: give workers <= {cpus}, or join a larger cluster with --address"
        )
