"""``quarto bench jax --check N``: the JAX core replayed against the compiled core, move for move.

For each variant, ``N`` random games run side by side in :class:`quarto_env.VectorQuarto` (the compiled core, the
ground truth) and in :class:`quarto_env.jax.QuartoEnv`, started from the same positions and seats
(:meth:`~quarto_env.jax.QuartoEnv.from_positions`) and driven by the same uniformly random legal actions. After
every step, for every game still in play, it compares the five things a learner reads:

- ``mask``: the legal actions (while the game goes on; once it has ended pgx's are all True, and that is checked);
- ``player``: the seat to act;
- ``rewards``: both seats' rewards of the step;
- ``end``: whether the game ended;
- ``planes``: the observation planes of ``observation`` (default ``tempo``, whose 27 planes hold every other
  kind's as their first channels; the finished game's last planes, ``info["final_observation"]``, where the
  compiled core has already reset).

``tempo`` costs both cores far more than the other kinds (in JAX it works the give planes out again for each of
256 placements; docs/results.md has the figures), so a long check may compare ``parity``'s 23 planes, and
``tempo``'s on fewer games.

A step of a game with any difference counts once per field that differs; the goal is zero of each.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

VARIANTS: dict[str, dict[str, Any]] = {
    "standard": {},
    "squares": {"squares": True},
    "attributes=2": {"attributes": 2},
    "attributes=colour+top,squares": {"attributes": ["colour", "top"], "squares": True},
    "declaration(lose)": {"declaration": True},
    "declaration(penalty)": {"declaration": True, "false_declaration": "penalty", "false_declaration_penalty": -0.25},
    "squares,declaration(penalty),first=player_1": {
        "squares": True,
        "declaration": True,
        "false_declaration": "penalty",
        "first_player": "player_1",
    },
}
"""The variants checked: every flag, and each declaration policy, alone and combined."""

FIELDS = ("mask", "player", "rewards", "end", "planes")


@dataclasses.dataclass
class CheckResult:
    """What one variant's check found."""

    variant: str
    games: int
    steps: int
    """Steps compared: one action in one game still in play."""
    mismatches: dict[str, int]
    """Per field of :data:`FIELDS`: the game steps where the two cores differ."""
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.mismatches.values())


def check(
    name: str, flags: dict[str, Any], games: int, batch: int = 4096, seed: int = 0, observation: str = "tempo"
) -> CheckResult:
    """Replay ``games`` random games of the variant ``flags`` through both cores, ``batch`` at a time, comparing
    the planes of ``observation``."""
    import jax

    import quarto_env.jax
    from quarto_env import VectorQuarto
    from quarto_env.vector import RandomLegalActions

    env = quarto_env.jax.env(observation=observation, **flags)
    step = jax.jit(jax.vmap(env.step))
    mismatches = dict.fromkeys(FIELDS, 0)
    steps = 0
    start = time.perf_counter()
    for index, first_game in enumerate(range(0, games, batch)):
        size = min(batch, games - first_game)
        vector = VectorQuarto(size, observation=observation, seed=seed + index, **flags)
        sample = RandomLegalActions(size, seed=seed + index)
        planes, info = vector.reset()
        state = env.from_positions(vector.games.positions, vector.first_seats)
        live = np.ones(size, dtype=bool)
        _compare_live(state, planes, info, live, mismatches)
        while live.any():
            actions = sample(info["action_mask"])
            planes, rewards, terminated, _, info = vector.step(actions)
            state = step(state, actions.astype(np.int32))
            steps += int(live.sum())
            ended = live & terminated
            mismatches["rewards"] += int((live & ~_rows_equal(np.asarray(state.rewards), rewards)).sum())
            mismatches["end"] += int((live & (np.asarray(state.terminated) != terminated)).sum())
            final = np.asarray(state.observation)
            mismatches["planes"] += int((ended & ~_rows_equal(final, info["final_observation"])).sum())
            mismatches["mask"] += int((ended & ~np.asarray(state.legal_action_mask).all(axis=1)).sum())
            live &= ~terminated
            _compare_live(state, planes, info, live, mismatches)
    return CheckResult(name, games, steps, mismatches, time.perf_counter() - start)


def _compare_live(state: Any, planes: Any, info: dict, live: np.ndarray, mismatches: dict[str, int]) -> None:
    """Count the games in play whose mask, seat to act or planes differ between the two cores."""
    mismatches["mask"] += int((live & ~_rows_equal(np.asarray(state.legal_action_mask), info["action_mask"])).sum())
    mismatches["player"] += int((live & (np.asarray(state.current_player) != info["current_player"])).sum())
    mismatches["planes"] += int((live & ~_rows_equal(np.asarray(state.observation), planes)).sum())


def _rows_equal(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per game (the first axis), whether every entry is equal (booleans and 0/1 integers compare as numbers)."""
    equal = ours.astype(np.float32) == theirs.astype(np.float32)
    return equal.reshape(len(equal), -1).all(axis=1)
