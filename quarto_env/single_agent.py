"""
# Quarto against a fixed opponent (``quarto_env/QuartoVsAgent-v1``)

| Creation          | ``gymnasium.make("quarto_env/QuartoVsAgent-v1", **kwargs)``, ``QuartoVsAgent(player, **kwargs)`` |
|-------------------|--------------------------------------------------------------------------------------------------|
| Agents            | one learner; the opponent's moves are played inside ``reset`` and ``step``                       |
| Action space      | ``Discrete(16)``; ``Discrete(17)`` with ``declaration=True`` (action 16 declares)                |
| Observation space | ``Box(0, 1, (channels, 16), float32)``: 19 channels by default (``observation=``)                |
| Action masks      | ``env.action_masks()`` (``bool``, as sb3-contrib reads it); ``info["action_mask"]``              |
| Rewards           | +1 win, -1 loss, 0 draw at the end; the false-declaration penalty at once                        |
| Truncation        | never (``truncated`` is always ``False``)                                                        |
| Render modes      | ``"ansi"``, ``"rgb_array"``, ``"human"``                                                         |

A single-agent Gymnasium view of the PettingZoo game ``quarto_v1`` (:mod:`quarto_env.env`): the learner
plays one seat, a fixed opponent plays the other: through ``gymnasium.make``, any agent spec of
:mod:`agents.specs` (``random``, ``greedy``, ``minimax:depth=2``, ``ppo:PATH``...), built by the registered
entry point :func:`agents.envs.vs_agent.make_vs_agent`; constructed directly, any player object -- anything with
``act(state) -> action`` and ``reset()``, as the agents of :mod:`agents` have. It is a thin layer over
:class:`quarto_env.env.raw_env`, so every rule, variant flag, observation kind and reset option of
``quarto_v1`` holds here unchanged; ``env.unwrapped.raw`` is that AEC env (``game_state``, ``position``,
``seats``, ``infos``) and ``env.unwrapped.opponent`` the opponent agent.

## Turns

The learner makes every decision of its seat: it **places** the piece it was given, then **gives** one --
two ``step`` calls in a row -- and, in the declaration variant, declares. Each ``step`` plays the learner's
action, then all the opponent's decisions up to the learner's next one; when the opponent acts first, its
first give is played inside ``reset``. The observation's phase channel (16,
:data:`quarto_env.observation.PLACING`) says what the next action is: all ones to place, all zeros to give.

## Observation and action spaces

The observation is the ``observation`` planes of ``raw_env.observe`` for the learner, as ``float32`` (so that
Stable-Baselines3 and CleanRL take them unchanged): 17 channels with ``observation="raw"``, 19 with
``"tactical"`` (the default), more with the richer kinds; :mod:`quarto_env.observation` describes each
channel. An action is a square (placing) or a piece (giving), 0-15, or 16 to declare "Quarto!" where the
variant has declarations. ``action_masks()`` returns the legal actions as a ``bool`` array (the method
MaskablePPO looks for), and every ``reset`` and ``step`` info holds the same mask as ``int8`` under
``"action_mask"`` (all zeros once the episode has ended).

## Rewards

| Learner wins | Opponent wins | Draw | Learner declares falsely (``false_declaration="penalty"``)     |
|:------------:|:-------------:|:----:|:--------------------------------------------------------------:|
| +1           | -1            | 0    | ``false_declaration_penalty`` (default -0.1), the game goes on |

The final reward comes with the ``step`` that ends the game, whoever ends it: a give that lets the opponent
win is answered at once by the opponent's winning placement, so that step returns -1. An opponent's false
declaration costs the learner nothing.

## Illegal actions

An action outside the mask, with ``illegal_action="lose"`` (the default), ends the episode at once: reward
-1, ``terminated=True``, ``info["illegal_action"] = True`` and ``info["outcome"] = Outcome.ILLEGAL_ACTION`` (the
position is left as it was). With
``illegal_action="raise"`` it raises :class:`quarto_env.core.IllegalActionError`, naming the legal actions,
and nothing changes. An action must be an integer -- a Python or numpy integer, or a 0-d integer array as
``model.predict`` returns; anything else (a float, a ``bool``, a string) raises ``TypeError`` under either
policy. ``step`` after the episode has ended raises ``RuntimeError``: call ``reset``.

The opponent sees the position as the rules core's :class:`~quarto_env.core.State`. Should it repeat a false
declaration under the penalty policy -- the core allows it, the env masks it -- it plays a uniformly random
action of the env's mask instead, from its own seeded generator; any other illegal action of the opponent
raises :class:`~quarto_env.core.IllegalActionError`.

## Arguments

| argument                      | values                                                          | default      |
|-------------------------------|-----------------------------------------------------------------|--------------|
| ``opponent``                  | an agent spec (``gymnasium.make``): ``random``, ``greedy``,     | ``"random"`` |
|                               | ``minimax:depth=2``, ...; a player object (``QuartoVsAgent``)   |              |
| ``learner_seat``              | ``"random"`` (drawn from the reset seed each episode), ``0``    | ``"random"`` |
|                               | (the learner gives first) or ``1``                              |              |
| ``illegal_action``            | ``"lose"`` or ``"raise"`` (see above)                           | ``"lose"``   |
| ``attributes``, ``squares``,  | the rule variant, as in ``quarto_v1``                           | standard     |
| ``declaration``,              |                                                                 |              |
| ``false_declaration``,        |                                                                 |              |
| ``false_declaration_penalty`` |                                                                 |              |
| ``observation``               | an observation kind of ``quarto_v1``                            | tactical     |
| ``render_mode``               | ``None``, ``"ansi"``, ``"rgb_array"``, ``"human"``              | ``None``     |

A bad value raises ``ValueError`` naming the allowed values (a bad agent spec raises
:class:`agents.specs.SpecError`, a ``ValueError`` that lists the agent kinds). A spec's opponent is built once,
with ``make_agent(opponent, variant)``; a player object without ``act`` and ``reset`` raises ``TypeError``.

## Seeds and reset options

``reset(seed=s)`` seeds the env's generator, which then draws, for each episode, the seed of the learner's
seat (under ``learner_seat="random"``) and the seed of the opponent's generator: the same seed gives the same
episode for the same learner actions, and the episodes after a seeded reset follow from it. (A player object
is reseeded when it has an ``rng`` attribute, as the agents of :mod:`agents` do.) (A ``ppo``
opponent with ``deterministic=false`` samples from torch's global generator, which the env does not reseed.)
``reset(options={"position": ...})`` starts from a position in the notation of :mod:`quarto_env.notation`, as
``quarto_v1`` does; when the opponent is to move there, it moves first, and a position the opponent wins
before the learner's first decision raises ``ValueError``. From the opening, a game the opponent ends before the
learner's first decision (a random opponent's false declaration under ``false_declaration="lose"``) is
discarded and another started with the same seats, as ``QuartoVectorVsAgent`` does (up to
:data:`OPENING_TRIES` games, then ``ValueError``): seats drawn anew there would have the learner give first more
often than not (docs/results.md measures it).

## Infos

Every ``reset`` and ``step`` info holds the same keys, with numbers, booleans and ``int8`` arrays only -- no
string, no ``None`` -- so that any library can turn it into tensors:

| key                  | value                                                                                  |
|----------------------|----------------------------------------------------------------------------------------|
| ``"action_mask"``    | ``int8`` ``(num_actions,)``: the learner's legal actions (all zeros once it has ended) |
| ``"seat"``           | the learner's seat: 0 when it gives first, 1 otherwise                                 |
| ``"outcome"``        | a :class:`quarto_env.Outcome` code: ``IN_PLAY`` (0) during the game; then ``WIN`` (1), |
|                      | ``DRAW`` (2), ``FALSE_DECLARATION`` (3) or ``ILLEGAL_ACTION`` (5)                      |
| ``"winner"``         | the winner's seat, numbered as ``"seat"``: the learner won when                        |
|                      | ``info["winner"] == info["seat"]``; ``NO_WINNER`` (-1) during the game, after a draw   |
| ``"illegal_action"`` | ``True`` only when the learner's illegal action ended the episode (the opponent wins)  |

## Creating it without importing ``quarto_env``

``import quarto_env`` registers the id with Gymnasium. Gymnasium's module prefix does that import itself, so a
program or a config file that only names the env needs nothing else::

    import gymnasium

    env = gymnasium.make("quarto_env:quarto_env/QuartoVsAgent-v1", opponent="greedy")
    envs = gymnasium.make_vec("quarto_env:quarto_env/QuartoVsAgent-v1", num_envs=8, opponent="greedy")

## Training with Stable-Baselines3

```python
import gymnasium
import quarto_env  # registers quarto_env/QuartoVsAgent-v1
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO

env = gymnasium.make("quarto_env/QuartoVsAgent-v1", opponent="greedy")
model = MaskablePPO("MlpPolicy", env, seed=0).learn(100_000)  # reads env.action_masks() by itself
obs, info = env.reset(seed=1)
action, _ = model.predict(obs, action_masks=info["action_mask"].astype(bool))
obs, reward, terminated, truncated, info = env.step(action)
PPO("MlpPolicy", env, seed=0).learn(100_000)  # no masks: an illegal action loses, so it learns the rules
```

## Version history

* v1 (this release): infos hold numbers only, with the same keys at every step (``outcome`` an
  :class:`~quarto_env.outcome.Outcome` code, ``winner`` a seat or ``NO_WINNER``, ``illegal_action`` always
  there); ``info["phase"]`` is gone (the observation's channel 16 holds it). Gymnasium answers the old id,
  ``quarto_env/QuartoVsAgent-v0``, with its ``DeprecatedEnv`` naming v1.
* v0: initial release.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import gymnasium
import numpy as np
from gymnasium import spaces

from quarto_env.checks import checked_seed
from quarto_env.core import DECLARE, IllegalActionError, State, checked_action
from quarto_env.env import AGENTS, raw_env
from quarto_env.errors import CallOrderError, QuartoTypeError, QuartoValueError
from quarto_env.flags import RuleFlags
from quarto_env.observation import DEFAULT_OBSERVATION
from quarto_env.outcome import NO_WINNER, Outcome

LEARNER, OPPONENT = AGENTS
"""The learner plays ``raw_env``'s ``player_0``; its seat follows from ``raw_env``'s ``first_player``."""
LEARNER_SEATS = ("random", 0, 1)
ILLEGAL_ACTION_POLICIES = ("lose", "raise")
OPENING_TRIES = 100
"""Games ``reset`` starts from the opening before it gives up on an opponent that ends each one before the
learner's first decision (a random opponent declares falsely at one opening in 17)."""


def every_opening_ended(opponents: str) -> QuartoValueError:
    """The refusal of an env (this one, the vector env, the self-play env) whose ``opponents`` (named as the line
    says them) ended :data:`OPENING_TRIES` games in a row before the learner's first decision."""
    return QuartoValueError(
        f"{opponents} ended {OPENING_TRIES} games in a row before the learner's first decision: an opponent that "
        "declares falsely at every opening, or the like, leaves the learner nothing to play"
    )


class Player(Protocol):
    """What the env asks of its opponent: an action for a position, and a fresh start before each game."""

    def act(self, state: State) -> int: ...

    def reset(self) -> None: ...


class QuartoVsAgent(gymnasium.Env[np.ndarray, np.int64]):
    """Quarto for one learner against a fixed opponent; see the module docstring for the whole specification."""

    metadata: dict[str, Any] = {  # noqa: RUF012 -- Gymnasium reads it from the class
        "render_modes": raw_env.metadata["render_modes"],
        "render_fps": raw_env.metadata["render_fps"],
    }

    def __init__(
        self,
        opponent: Player,
        observation: str = DEFAULT_OBSERVATION,
        learner_seat: int | str = "random",
        illegal_action: str = "lose",
        render_mode: str | None = None,
        **rule_flags: Any,
    ) -> None:
        """``rule_flags``: those of :class:`quarto_env.flags.RuleFlags` but ``first_player``, which
        ``learner_seat`` sets (the learner is player_0, so its seat is the seat that gives first)."""
        if "first_player" in rule_flags:
            raise QuartoTypeError("QuartoVsAgent takes learner_seat ('random', 0 or 1), not first_player")
        flags = RuleFlags.of({**rule_flags, "first_player": check_learner_seat(learner_seat)}, "QuartoVsAgent")
        self.raw = raw_env(**flags.as_kwargs(), observation=observation, render_mode=render_mode)
        """The AEC env underneath: the position (``game_state``, ``position``), ``seats`` and ``infos``."""
        self.illegal_action = check_illegal_action(illegal_action)
        self.opponent = _check_player(opponent)
        """The opponent, reseeded at every ``reset`` (where it has an ``rng``)."""
        self._fallback_rng = np.random.default_rng()
        self.render_mode = self.raw.render_mode
        observed = cast(spaces.Dict, self.raw.observation_space(LEARNER))  # {"observation": planes, "action_mask"}
        self.observation_space = spaces.Box(0, 1, observed["observation"].shape, np.float32)
        self._num_actions = self.raw.variant.num_actions
        self.action_space = spaces.Discrete(self._num_actions)
        self._mask = np.zeros(self._num_actions, dtype=np.int8)
        self._episode_over = True

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode and play the opponent's moves up to the learner's first decision; ``seed`` seeds the
        episodes from here on, ``options={"position": ...}`` sets the starting position."""
        super().reset(seed=checked_seed(seed))
        from_opening = not (options or {}).get("position")
        game_seed, opponent_seed = (int(s) for s in self.np_random.integers(2**31, size=2))
        for _ in range(OPENING_TRIES if from_opening else 1):
            self._start_game(options, game_seed, opponent_seed)
            if not self._episode_over:
                break
            # Again with the same seats (the game's seed draws them) and the opponent's other draws: seats drawn
            # anew would give the learner the first give more often than not.
            opponent_seed = int(self.np_random.integers(2**31))
        if self._episode_over and from_opening:
            raise every_opening_ended(f"the opponent {getattr(self.opponent, 'spec', self.opponent)!r}")
        if self._episode_over:
            raise QuartoValueError(
                f"the opponent {getattr(self.opponent, 'spec', self.opponent)!r} ended the game before the learner's "
                f"first decision (final position {self.raw.position!r}); start from a position that the learner "
                "gets to play"
            )
        return self._observe(), self._info()

    def step(self, action: int | np.integer) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Play the learner's ``action``, then the opponent's decisions up to the learner's next one."""
        if self._episode_over:
            raise CallOrderError("the episode is over (or has not started): call reset() before step()")
        action = checked_action(action)
        if self.illegal_action == "lose" and not self._allows(action):
            return self._lose_for_illegal_action()
        self.raw.step(action)  # raises IllegalActionError for an illegal action (illegal_action="raise")
        reward = self.raw.rewards[LEARNER] + self._play_opponent()
        self._episode_over = self.raw.terminations[LEARNER]
        return self._observe(), reward, self._episode_over, False, self._info()

    def action_masks(self) -> np.ndarray:
        """The learner's legal actions now, as a ``bool`` array (all ``False`` once the episode has ended)."""
        return self._mask.astype(bool)

    @property
    def seat(self) -> int:
        """The learner's seat in this episode: 0 when it gives first, 1 otherwise."""
        return self.raw.seats.index(LEARNER)

    def render(self) -> str | np.ndarray | None:  # type: ignore[override]  # gymnasium 1.2 types it by a TypeVar
        """The position, as ``raw_env`` renders it for ``render_mode``."""
        return self.raw.render()

    def close(self) -> None:
        """Close the ``human`` window, if one is open."""
        self.raw.close()

    # -----------------------------------------------------------------------------------------------------
    # Helpers
    # -----------------------------------------------------------------------------------------------------
    def _start_game(self, options: dict[str, Any] | None, game_seed: int, opponent_seed: int) -> None:
        """A new game of ``game_seed`` (the seats), the opponent's moves, drawn from ``opponent_seed``, played up to
        the learner's first decision (or the end, where the opponent ends the game first)."""
        self.raw.reset(seed=game_seed, options=options)
        self._fallback_rng = np.random.default_rng(opponent_seed)
        if hasattr(self.opponent, "rng"):
            self.opponent.rng = self._fallback_rng  # agents draw every random choice from rng
        self.opponent.reset()
        self._play_opponent()
        self._episode_over = self.raw.terminations[LEARNER]

    def _play_opponent(self) -> float:
        """Play the opponent until the learner is to act or the game ends; the learner's reward meanwhile."""
        reward = 0.0
        while self.raw.agent_selection == OPPONENT and not self.raw.terminations[OPPONENT]:
            state = self.raw.game_state
            action = self.opponent.act(state)
            try:
                self.raw.step(action)
            except IllegalActionError:
                if action != DECLARE:  # the opponent's own bug: let it show
                    raise
                # A repeated false declaration, which the env masks though the rules core allows it (agents
                # see only the core): a random action of the env's mask instead, from the opponent's generator.
                allowed = np.flatnonzero(self.raw.observe(OPPONENT)["action_mask"]).tolist()
                self.raw.step(int(allowed[self._fallback_rng.integers(len(allowed))]))
            reward += self.raw.rewards[LEARNER]
        return reward

    def _allows(self, action: int) -> bool:
        return 0 <= action < self._num_actions and bool(self._mask[action])

    def _lose_for_illegal_action(self) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._episode_over = True
        observation = self._observe()
        self._mask = np.zeros_like(self._mask)
        info = self._info_with(Outcome.ILLEGAL_ACTION, winner=1 - self.seat)
        return observation, -1.0, True, False, {**info, "illegal_action": True}

    def _observe(self) -> np.ndarray:
        """The learner's planes, keeping its action mask for ``action_masks`` and the next legality check."""
        observed = self.raw.observe(LEARNER)
        self._mask = observed["action_mask"]
        return observed["observation"].astype(np.float32)

    def _info(self) -> dict[str, Any]:
        """The info of the position now, from ``raw_env``'s (whose winner is an index into ``AGENTS``)."""
        raw_info = self.raw.infos[LEARNER]
        winner = raw_info["winner"]
        seat = NO_WINNER if winner == NO_WINNER else self.raw.seats.index(AGENTS[winner])
        return self._info_with(Outcome(raw_info["outcome"]), seat)

    def _info_with(self, outcome: Outcome, winner: int) -> dict[str, Any]:
        return {
            "action_mask": self._mask.copy(),
            "seat": self.seat,
            "outcome": int(outcome),
            "winner": winner,
            "illegal_action": False,
        }


def check_learner_seat(value: int | str) -> int | str:
    """``learner_seat``, checked: ``"random"``, 0 or 1 (the learner's seat is who gives first)."""
    if isinstance(value, bool) or value not in LEARNER_SEATS:
        raise QuartoValueError(f"learner_seat must be one of {', '.join(map(repr, LEARNER_SEATS))}; got {value!r}")
    return value


def check_illegal_action(value: str) -> str:
    """``illegal_action``, checked: ``"lose"`` or ``"raise"``."""
    if value not in ILLEGAL_ACTION_POLICIES:
        allowed = ", ".join(map(repr, ILLEGAL_ACTION_POLICIES))
        raise QuartoValueError(f"illegal_action must be one of {allowed}; got {value!r}")
    return value


def _check_player(value: Player) -> Player:
    if not (callable(getattr(value, "act", None)) and callable(getattr(value, "reset", None))):
        raise QuartoTypeError(
            f"opponent must be a player, an object with act(state) -> action and reset() such as an agent of "
            f"agents.make_agent; got {value!r}"
        )
    return value
