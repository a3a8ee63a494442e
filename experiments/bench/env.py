"""``quarto bench env``: how fast the environment and the rules core play random games.

1. The fully wrapped ``quarto_v1`` (``quarto_env.env()``, PettingZoo's three standard wrappers, subclassed
   only to read the per-turn attributes in one hop) against PettingZoo's own ``connect_four_v3`` (``env()``,
   the stock wrappers), in the same process, by the very same
   loop: ``agent_iter`` / ``last()`` / a uniformly random action among those the ``action_mask`` allows /
   ``step``. A *turn* is one ``env.step(action)``, a single placement or give in Quarto, a single drop in
   Connect Four; the dead steps after each game and the resets are timed but not counted. The two are
   measured in alternation for several rounds; the medians and their ratio are printed. The same two games
   unwrapped (``raw_env``), ``quarto_v1`` under the stock wrappers, and an env that does no work at all under
   the stock wrappers show how much of a turn is the environment's own work and how much the wrappers' and
   the loop's.
2. The rules core alone: random games played by one compiled, single-threaded call
   (:func:`quarto_env.fast.random_games`, through the core's ``apply_action``), and -- for scale -- by
   ``core.step`` from Python, one state at a time. Both count actions (gives, placements, declarations).

Timings depend on the machine and on what else runs on it: compare figures from the same run.

Example usage::

    quarto bench env                          # 6 envs x 3 rounds x 2 s, then the rules core
    quarto bench env --seconds 1 --rounds 1   # a quick look
    quarto bench env --out runs/bench_env.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from agents.storage.files import atomic_write_text
from experiments.bench import add_timing_arguments
from experiments.options import (
    CommandParser,
    add_observation_argument,
    add_out_argument,
    add_seed_argument,
)
from experiments.output import add_overwrite_argument, claim_if_asked
from quarto_env.core import INITIAL_STATE, Variant, legal_actions, step
from quarto_env.extras import require
from quarto_env.fast import random_games
from quarto_env.observation import DEFAULT_OBSERVATION

CORE_GAMES = 100_000


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``quarto bench env``."""
    parser = CommandParser(
        prog="quarto bench env",
        description="Turns/s of the wrapped quarto_v1 against connect_four_v3 (same loop, same run), and the "
        "rules core's random-play actions/s.",
    )
    add_timing_arguments(parser, seconds=2.0, timed="env", rounds=3)
    add_seed_argument(parser, "seed of the random players and the games")
    add_observation_argument(
        parser, f"quarto_v1's observation option (default {DEFAULT_OBSERVATION}, the env's default)"
    )
    add_out_argument(
        parser,
        "--output",
        type=Path,
        metavar="FILE",
        help="also write the figures, config and command to this JSON file",
    )
    add_overwrite_argument(parser)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the benchmark and print its figures; returns the exit status."""
    args = parse_args(argv)
    with claim_if_asked(args.out, "file", overwrite=args.overwrite, prog="quarto bench env"):
        return _run(args, argv)


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    """Measure, print the figures and write them to the claimed ``--out`` if given."""
    print(_header(args))
    rounds = measure_envs(_env_makers(args.observation), args)
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    wrapped_ratio = medians["quarto_v1"] / medians["connect_four_v3"]
    raw_ratio = medians["quarto_v1 raw"] / medians["connect_four_v3 raw"]
    print(_row("median", medians))
    print(f"\nquarto_v1 / connect_four_v3, both fully wrapped: {wrapped_ratio:.2f}x")
    print(f"quarto_v1 / connect_four_v3, raw_env against raw_env: {raw_ratio:.2f}x")
    stock_ratio = medians["quarto_v1 stock"] / medians["connect_four_v3"]
    print(f"quarto_v1 under the stock wrappers / connect_four_v3: {stock_ratio:.2f}x")
    ceiling = medians["do-nothing env"] / medians["connect_four_v3"]
    print(f"do-nothing env / connect_four_v3, both under the stock wrappers: {ceiling:.2f}x (their ceiling)")
    print("time per turn (medians): raw_env and the loop itself + the three wrappers on top")
    for game in ("connect_four_v3", "quarto_v1", "quarto_v1 stock"):
        raw = game.removesuffix(" stock")
        raw_us, wrapped_us = 1e6 / medians[f"{raw} raw"], 1e6 / medians[game]
        print(f"  {game:<16} {raw_us:6.1f} us + {wrapped_us - raw_us:6.1f} us = {wrapped_us:6.1f} us")

    compiled = core_compiled_actions_per_second(args.seed)
    python = core_python_actions_per_second(args.seed, args.seconds)
    print("\nrules core alone, random play from the opening (actions/s; an action is a give, a placement):")
    print(f"  compiled, single thread, {CORE_GAMES:,} games in one call (quarto_env.fast): {compiled:>12,.0f}")
    print(f"  core.step from Python, one state at a time:{'':>28}{python:>12,.0f}")

    if args.out:
        results = {
            "turns_per_second": rounds,
            "median_turns_per_second": medians,
            "ratio_quarto_to_connect_four_wrapped": wrapped_ratio,
            "ratio_quarto_to_connect_four_raw": raw_ratio,
            "ratio_quarto_stock_wrappers_to_connect_four": stock_ratio,
            "ratio_do_nothing_to_connect_four_wrapped": ceiling,
            "core_actions_per_second": {"compiled_single_thread": compiled, "python_core_step": python},
        }
        record = {"command": _command(argv), "config": vars(args) | _machine(), "results": results}
        atomic_write_text(args.out, json.dumps(record, indent=2, default=str) + "\n")
        print(f"\nwrote {args.out}")
    return 0


# ---------------------------------------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------------------------------------
SLICES = 10
"""Each measurement is cut into this many slices, alternating between the envs, so that a change in the
machine's load falls on all of them alike."""


def _env_makers(observation: str) -> dict[str, Callable[[], Any]]:
    require("bench", "connect_four_v3, the reference", "pygame")
    from pettingzoo.classic.connect_four import connect_four

    import quarto_env

    return {
        "connect_four_v3": connect_four.env,
        "quarto_v1": lambda: quarto_env.env(observation=observation),
        "connect_four_v3 raw": connect_four.raw_env,
        "quarto_v1 raw": lambda: quarto_env.raw_env(observation=observation),
        "quarto_v1 stock": lambda: _stock_wrappers(quarto_env.raw_env(observation=observation)),
        "do-nothing env": lambda: _stock_wrappers(DoNothingEnv()),
    }


def _stock_wrappers(unwrapped: AECEnv) -> AECEnv:
    """``unwrapped`` in PettingZoo's three standard wrappers as they ship, the way ``connect_four_v3`` has them."""
    from pettingzoo.utils import wrappers

    wrapped = wrappers.TerminateIllegalWrapper(unwrapped, illegal_reward=-1)
    return wrappers.OrderEnforcingWrapper(wrappers.AssertOutOfBoundsWrapper(wrapped))


class DoNothingEnv(AECEnv):
    """The ceiling of the measurement: an AEC env that does no work at all -- a constant observation, every
    action legal, 24 turns a game (as many as a random Quarto game) -- wrapped and played like the others."""

    metadata: dict[str, Any] = {"render_modes": [], "name": "do_nothing"}  # noqa: RUF012 -- read from the class

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["player_0", "player_1"]
        self._observation = {"observation": np.zeros((19, 16), np.int8), "action_mask": np.ones(16, np.int8)}
        self._space: spaces.Discrete = spaces.Discrete(16)

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._space

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        return self._observation

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {agent: {} for agent in self.agents}
        self.agent_selection = self.agents[0]
        self._turns = 0

    def step(self, action: int | None) -> None:
        if self.terminations[self.agent_selection]:
            self._was_dead_step(action)
            return
        self._turns += 1
        if self._turns == 24:
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = self.possible_agents[self._turns % 2]


def measure_envs(makers: dict[str, Callable[[], Any]], args: argparse.Namespace) -> dict[str, list[float]]:
    """Turns/s of each env in each of ``args.rounds`` rounds, after a short warm-up."""
    envs = {name: make() for name, make in makers.items()}
    rngs = {name: np.random.default_rng(args.seed) for name in envs}
    for name, env in envs.items():
        env.reset(seed=args.seed)
        random_play(env, rngs[name], 0.2)  # first calls load compiled code and fill caches
    rounds: dict[str, list[float]] = {name: [] for name in envs}
    print(_row("round", {name: name for name in envs}))
    for i in range(args.rounds):
        turns = dict.fromkeys(envs, 0)
        seconds = dict.fromkeys(envs, 0.0)
        for _ in range(SLICES):
            for name, env in envs.items():
                start = time.perf_counter()
                turns[name] += random_play(env, rngs[name], args.seconds / SLICES)
                seconds[name] += time.perf_counter() - start
        for name in envs:
            rounds[name].append(turns[name] / seconds[name])
        print(_row(str(i + 1), {name: values[-1] for name, values in rounds.items()}))
    return rounds


def random_play(env: Any, rng: np.random.Generator, seconds: float) -> int:
    """Play whole games of uniformly random legal actions through ``env`` for about ``seconds``; returns the
    number of turns (steps with an action)."""
    turns = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.reset()
        for _agent in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                action = None
            else:
                legal = np.flatnonzero(observation["action_mask"])
                action = int(legal[rng.integers(len(legal))])
                turns += 1
            env.step(action)
    return turns


def _row(label: str, values: dict[str, Any]) -> str:
    cells = "".join(f"{v:>22,.0f}" if isinstance(v, float) else f"{v:>22}" for v in values.values())
    return f"{label:<8}{cells}"


# ---------------------------------------------------------------------------------------------------------
# Rules core
# ---------------------------------------------------------------------------------------------------------
def core_compiled_actions_per_second(seed: int) -> float:
    """Actions/s of :func:`quarto_env.fast.random_games`, compiled code loaded before timing."""
    random_games(Variant(), 10, seed)
    start = time.perf_counter()
    played = random_games(Variant(), CORE_GAMES, seed)
    return played.num_actions / (time.perf_counter() - start)


def core_python_actions_per_second(seed: int, seconds: float) -> float:
    """Actions/s of random games through ``core.step``, for about ``seconds``."""
    variant = Variant()
    rng = np.random.default_rng(seed)
    actions = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        state = INITIAL_STATE
        while not state.over:
            choices = legal_actions(variant, state)
            state = step(variant, state, choices[rng.integers(len(choices))])
            actions += 1
    return actions / (time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------------------
def _header(args: argparse.Namespace) -> str:
    machine = _machine()
    return (
        f"quarto bench env -- {machine['cpu_count']} CPUs, Python {machine['python']}, numpy {machine['numpy']}, "
        f"pettingzoo {machine['pettingzoo']}, seed {args.seed}\n"
        f"fully wrapped env() of each game, uniformly random legal actions from the action mask, "
        f"{args.rounds} round(s) of {args.seconds:g} s each;\n"
        f"a turn = one env.step() with an action (a placement or a give in Quarto); quarto_v1 observation: "
        f"{args.observation}\n"
    )


def _machine() -> dict[str, Any]:
    import pettingzoo

    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pettingzoo": pettingzoo.__version__,
        "platform": platform.platform(),
    }


def _command(argv: list[str]) -> str:
    return " ".join(["quarto", "bench", "env", *argv])
