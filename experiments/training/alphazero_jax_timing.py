"""The speed of ``backend: jax``'s AlphaZero (:mod:`experiments.training.alphazero_jax`): its jitted iteration
alone, for the device check (:func:`selfplay_positions_per_second`, read by :mod:`experiments.bench.jax`), and its
self-play beside the torch backend's, A/B in one process (:func:`compare_backends`). Each writes nothing."""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np

from experiments.training.alphazero_jax import compiled_iteration, make_selfplay, start
from experiments.training.config import TrainConfig


def selfplay_positions_per_second(config: TrainConfig, seconds: float) -> float:
    """Searched self-play positions per second of ``config``'s jitted iteration (self-play and its gradient
    steps), on its device, timed over whole iterations for at least ``seconds`` after one that compiles it;
    writes nothing."""
    trainer = start(config, Path("."), resume=False)
    iteration = compiled_iteration(trainer)
    key = jax.device_put(jax.random.key(config.seed), trainer.device)
    state = (trainer.params, trainer.opt_state, trainer.buffer)
    state = iteration(*state, key)[:3]
    jax.block_until_ready(state)
    done, began = 0, time.perf_counter()
    while True:
        key, step_key = jax.random.split(key)
        state = iteration(*state, step_key)[:3]
        jax.block_until_ready(state)
        done += config.num_games * config.alphazero.rollout_steps
        elapsed = time.perf_counter() - began
        if elapsed >= seconds:
            return done / elapsed


def compare_backends(config: TrainConfig, seconds: float, rounds: int = 3) -> dict[str, list[float]]:
    """Self-play searched positions per second of the torch backend and of this one for ``config`` (the same
    games side by side, network width and design, simulations, root and targets; no training), A/B in this
    process: ``rounds`` rounds, each timing the torch backend's self-play (:func:`experiments.training.
    az_selfplay.self_play`, on ``torch_threads`` threads, the moves the rules decide unsearched and uncounted)
    and then this backend's jitted self-play (every position searched; JAX's threads) for at least ``seconds``
    each, after a warm-up of both. Returns each backend's positions/s per round."""
    import torch as th

    from experiments.training.az_selfplay import new_network as new_torch_network
    from experiments.training.az_selfplay import play_rounds, self_play

    th.set_num_threads(config.torch_threads)
    th.manual_seed(config.seed)
    torch_network = new_torch_network(config, config.variant)
    session = self_play(config, config.variant, np.random.default_rng(config.seed))
    trainer = start(config, Path("."), resume=False)
    play = jax.jit(make_selfplay(config, trainer.env))
    network, key = trainer.network, jax.device_put(jax.random.key(config.seed), trainer.device)
    jax.block_until_ready(play(network, key))
    play_rounds(session, torch_network, 1)
    rates: dict[str, list[float]] = {"torch": [], "jax": []}
    for _ in range(rounds):
        done, began = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - began) < seconds or not done:
            done += play_rounds(session, torch_network, 1).searched
        rates["torch"].append(done / elapsed)
        done, began = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - began) < seconds or not done:
            key, play_key = jax.random.split(key)
            jax.block_until_ready(play(network, play_key))
            done += config.num_games * config.alphazero.rollout_steps
        rates["jax"].append(done / elapsed)
    return rates
