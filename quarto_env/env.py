"""
# Quarto

Quarto is a two-player game on a 4x4 board with 16 pieces that belong to nobody. Each piece is tall or
short, light or dark, round or square, hollow or solid. On your turn you **place** the piece your opponent
gave you on an empty square, then **give** your opponent one of the pieces left, so **the same agent acts
twice in a row**: read ``env.agent_selection`` (or use ``env.agent_iter()``) instead of assuming alternation.
The very first action of the game is a give. Whoever completes a row, column or diagonal of four pieces that
share an attribute wins; after 16 placements without such a line the game is a draw. The precise rules and
their variants are in ``docs/rules.md`` (the code in :mod:`quarto_env.core`); the keyword arguments that pick
them, the infos, illegal moves and errors, rendering and the speed are in ``docs/environment.md``.

| Import             | ``quarto_env.env(**flags)`` or ``pettingzoo.make("aec", "quarto_v1", **flags)``         |
|--------------------|-----------------------------------------------------------------------------------------|
| Actions            | Discrete                                                                                |
| Parallel API       | No                                                                                      |
| Manual Control     | No (``quarto play`` plays in the terminal)                                              |
| Agents             | ``agents = ["player_0", "player_1"]``                                                   |
| Agents count       | 2                                                                                       |
| Action Shape       | ``()``                                                                                  |
| Action Values      | ``Discrete(16)``; ``Discrete(17)`` with ``declaration=True`` (action 16 declares)       |
| Observation Shape  | ``{"observation": (channels, 16), "action_mask": (16,) or (17,)}``; 19 channels default |
| Observation Values | ``[0, 1]``, ``int8``                                                                    |

## Observation Space

``{"observation": int8 (channels, 16), "action_mask": int8 (num_actions,)}``, from the acting agent's view.
Quarto is impartial -- no piece belongs to a player -- so both agents see the same planes. They hold
everything needed to play perfectly. ``observation=`` picks one of five nested kinds, each the previous one
plus planes computed by the rules core: ``raw`` (17 channels: the position and the phase), ``tactical`` (19,
the default: plus the 1-ply wins and losing gives), ``lookahead`` (21: plus the traps one turn deeper),
``parity`` (23: plus the parity of the safe pieces) and ``tempo`` (27: plus the traps and parities one turn
further on; what ``quarto train`` uses by default; far slower to observe, see docs/results.md). The planes are
exactly those the trainer sees, so a checkpoint plays in ``quarto_env.env(**env_kwargs)`` with the
``env_kwargs`` stored in it. The kinds and channels are one table, :data:`quarto_env.observation.CHANNELS` and
:data:`~quarto_env.observation.OBSERVATION_KINDS`; this is it:

| ch. | name          | kind      | over    | meaning |
|----:|---------------|-----------|---------|---------|
|   0 | occupied      | raw       | squares | the square is occupied |
|   1 | square_tall   | raw       | squares | the piece on it is tall |
|   2 | square_dark   | raw       | squares | the piece on it is dark |
|   3 | square_square | raw       | squares | the piece on it is square |
|   4 | square_hollow | raw       | squares | the piece on it is hollow |
|   5 | square_short  | raw       | squares | the piece on it is short |
|   6 | square_light  | raw       | squares | the piece on it is light |
|   7 | square_round  | raw       | squares | the piece on it is round |
|   8 | square_solid  | raw       | squares | the piece on it is solid |
|   9 | claimable     | raw       | squares | in a group that can be declared now (declaration variant) |
|  10 | available     | raw       | pieces  | the piece can be given (neither on the board nor in hand) |
|  11 | in_hand       | raw       | pieces  | the piece is in hand, to be placed |
|  12 | piece_tall    | raw       | pieces  | the piece is tall (constant) |
|  13 | piece_dark    | raw       | pieces  | the piece is dark (constant) |
|  14 | piece_square  | raw       | pieces  | the piece is square (constant) |
|  15 | piece_hollow  | raw       | pieces  | the piece is hollow (constant) |
|  16 | placing       | raw       | both    | 1 when the next action places the piece in hand, 0 when it gives |
|  17 | square_wins   | tactical  | squares | placing the piece in hand here completes a winning group |
|  18 | piece_loses   | tactical  | pieces  | giving this available piece lets the receiver win at once |
|  19 | self_trap     | lookahead | squares | placing here does not win and leaves only pieces that lose |
|  20 | trap_give     | lookahead | pieces  | a safe piece after which, wherever it goes, every piece left loses |
|  21 | odd_safe      | parity    | squares | placing here does not win and leaves an odd number of safe pieces |
|  22 | even_give     | parity    | pieces  | a safe piece after which, wherever it goes, an even number are safe |
|  23 | sets_trap     | tempo     | squares | placing here does not win and leaves a trap_give to give |
|  24 | sets_even     | tempo     | squares | placing here does not win and leaves an even_give to give |
|  25 | allows_trap   | tempo     | pieces  | a safe piece the receiver can place so as to leave a trap_give |
|  26 | allows_even   | tempo     | pieces  | a safe piece the receiver can place so as to leave an even_give |

### Legal Actions Mask

``action_mask[a]`` is 1 when action ``a`` is legal: the empty squares when placing, the pieces neither on the
board nor in hand when giving, and the declaration at every decision of the declaration variant. It is all
zeros for the agent that is not acting and after the game ends, however it ended.

## Action Space

One ``Discrete`` space serves both phases:

- placing: action ``a`` in 0-15 puts the piece in hand on square ``a`` (squares numbered row by row,
  ``4 * row + col``);
- giving: action ``a`` in 0-15 gives piece ``a`` (bit 0 tall, bit 1 dark, bit 2 square, bit 3 hollow: piece
  ``5`` is tall, light, square, solid);
- with ``declaration=True`` only: action ``16`` declares "Quarto!".

The phase is in the observation: channel 16 (:data:`quarto_env.observation.PLACING`) is all ones when the next
action places, all zeros when it gives.

## Rewards

| Winner | Loser | Draw |
|:------:|:-----:|:----:|
| +1     | -1    | 0    |

Rewards come at the end, and both agents see theirs: the loser reads its -1 from ``env.last()`` when it is
selected for its final (dead) step. In the declaration variant with ``false_declaration="penalty"``, a
declaration with nothing to claim costs the declarer ``false_declaration_penalty`` (default -0.1) at once;
the game goes on with the same agent to act, which **may not declare again before its next placement or
give**: the declaration is masked out, and repeating it is an illegal action. So every game ends, after at
most 65 actions (32 placements and gives, each preceded by at most one false declaration, and one true
declaration). With a ``time_limit``, an agent that takes longer than that many seconds to answer loses: -1
for it, +1 for its opponent. Under ``env()`` an illegal move (an action the mask forbids) ends the game: -1
for the agent that played it, 0 for the other.

## Version History

* v1: ``copy.deepcopy`` and ``pickle`` keep the game: the copy goes on from the same position with the same
  generator, independent of the original. They gave a fresh env that had not been reset before (the constructor's
  arguments were the whole pickled state, as with PettingZoo's ``EzPickle``). ``step()`` once the game is over
  raises ``CallOrderError`` through the wrappers too (PettingZoo's order wrapper only warned and returned
  ``None``). Games are unchanged.
* v1: an illegal move (an action outside the mask) ends the game with ``info["outcome"] ==
  Outcome.ILLEGAL_ACTION`` (5) and the other agent as ``info["winner"]`` in both infos, which said ``IN_PLAY``
  and ``NO_WINNER`` before; an action outside the action space or ``None`` for a live agent raises
  ``IllegalActionError`` (a ``ValueError``) instead of an ``AssertionError`` (an ``IndexError`` under ``python
  -O``); ``last()`` after the game, and ``step()``, ``observe()``, ``render()`` or ``state()`` before
  ``reset()``, raise ``CallOrderError`` instead of a ``KeyError`` or an ``AssertionError``; reset options that are
  not a dict raise ``TypeError``. The id stays ``quarto_v1``: games, rewards and observations are unchanged,
  and only calls that used to crash or that read an illegal move's infos see a difference.
* v1: ``observation="tempo"`` added (27 planes); the other kinds are unchanged.
* v1: infos hold numbers only, for both agents at every step: ``info["outcome"]`` is an :class:`Outcome`
  code (0 while the game goes on) and ``info["winner"]`` an agent index or ``NO_WINNER`` (-1), instead of the
  strings ``"win"``/``"draw"``/... and an agent name or ``None``; ``info["phase"]`` is gone (observation
  channel 16 holds it). TorchRL's ``PettingZooWrapper`` failed on the strings. ``quarto_v0`` now raises
  PettingZoo's ``DeprecatedEnv``, "quarto_v0 is now deprecated, use quarto_v1 instead"; games, records and
  checkpoints are unchanged (none of them names the env).
* v0: ``observation`` takes every kind the trainer trains on (``lookahead``, ``parity``); under
  ``false_declaration="penalty"`` a false declaration cannot be repeated before the next placement or give, so
  every game ends; non-integer actions are refused; all masks are zero after any termination.
* v0: initial release -- every rule variant of the sheets, declaration policies, the tournament time limit,
  raw and tactical observations, ``ansi``/``rgb_array``/``human`` rendering.
"""

from __future__ import annotations

import inspect
import operator
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.utils import EzPickle, seeding
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from quarto_env import PETTINGZOO_ENV_ID
from quarto_env.checks import AGENTS, checked_agent, checked_number, checked_seed
from quarto_env.core import (
    DECLARE,
    INITIAL_STATE,
    NO_WINNER,
    State,
    Variant,
    checked_action,
    compiled_fields,
    legal_mask,
    step,
)
from quarto_env.errors import ActionTypeError, CallOrderError, IllegalActionError, QuartoTypeError, QuartoValueError
from quarto_env.extras import require
from quarto_env.flags import RuleFlags
from quarto_env.notation import RESET_OPTIONS, format_position, starting_position
from quarto_env.observation import DEFAULT_OBSERVATION, observation_kind, write_planes
from quarto_env.outcome import Outcome
from quarto_env.render import render_image, render_text, svg_board

DEFAULT_FLAGS = RuleFlags()
"""The rule flags' defaults, spelled out in the signature of :class:`raw_env` for readers and IDEs: their one
home is :class:`quarto_env.flags.RuleFlags`."""


def env(**kwargs: Any) -> AECEnv:
    """``quarto_v1`` wrapped like PettingZoo's classic environments (illegal action: -1 and the game ends)."""
    return wrap_like_classic(raw_env(**kwargs))


def wrap_like_classic(unwrapped: AECEnv) -> AECEnv:
    """``unwrapped`` in PettingZoo's standard wrappers, as its classic games apply them."""
    wrapped = _TerminateIllegal(unwrapped, illegal_reward=-1)
    wrapped = _AssertOutOfBounds(wrapped)
    return _OrderEnforcing(wrapped)


_HOT_ATTRIBUTES = (
    "agent_selection",
    "agents",
    "rewards",
    "terminations",
    "truncations",
    "infos",
    "_cumulative_rewards",
)


class _OneHop:
    """Mixin for PettingZoo's wrappers: the attributes read on every turn come straight from the unwrapped env.

    A wrapper finds them through ``__getattr__``, one layer at a time: under the three standard wrappers that
    is about 36 calls per turn, more time than ``raw_env`` spends on the turn itself. The values are the same
    (wrappers never keep their own copies of these); only the lookups are fewer, each one C call. The outermost
    wrapper, as ``OrderEnforcingWrapper`` does, refuses them before the first reset.
    """

    def __init__(self, env: AECEnv, *args: Any, **kwargs: Any) -> None:
        super().__init__(env, *args, **kwargs)  # type: ignore[call-arg]
        self._raw = env.unwrapped


def _forward(name: str) -> property:
    """A read of ``name`` from the unwrapped env in one C call (``attrgetter``): no Python frame per read."""
    return property(operator.attrgetter(f"_raw.{name}"))


def _forward_after_reset(name: str) -> property:
    """As :func:`_forward`, refused before the first reset, as ``OrderEnforcingWrapper`` refuses it."""

    def get(self: Any) -> Any:
        if not self._has_reset:
            raise AttributeError(f"{name} cannot be accessed before reset")
        return getattr(self._raw, name)

    return property(get)


for _name in _HOT_ATTRIBUTES:
    setattr(_OneHop, _name, _forward(_name))


class _TerminateIllegal(_OneHop, wrappers.TerminateIllegalWrapper):
    """PettingZoo's ``TerminateIllegalWrapper``, with one-hop attribute reads; when it ends the game for an
    action outside the mask, both agents' infos say so (the stock wrapper leaves them as they were)."""

    def step(self, action: int | None) -> None:
        agent, already_ended = self.agent_selection, self._terminated
        super().step(action)
        if self._terminated and not already_ended:
            self._raw.record_illegal_action(agent)


class _AssertOutOfBounds(_OneHop, wrappers.AssertOutOfBoundsWrapper):
    """PettingZoo's ``AssertOutOfBoundsWrapper``, with one-hop attribute reads and its check made explicit: an
    action outside the action space raises :class:`~quarto_env.errors.IllegalActionError` naming the action
    and the range, under ``python -O`` too (the stock wrapper's ``assert`` vanishes there, and takes ``True``
    for action 1)."""

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if not (self.terminations[agent] or self.truncations[agent]):  # a finished agent's step: raw_env checks it
            checked_live_action(agent, action, self._raw._num_actions)
        wrappers.BaseWrapper.step(self, action)  # skips the stock wrapper's assert: the check above is that one


class _OrderEnforcing(_OneHop, wrappers.OrderEnforcingWrapper):
    """PettingZoo's ``OrderEnforcingWrapper``, with one-hop attribute reads; ``step()``, ``observe()``,
    ``render()`` and ``state()`` before ``reset()``, and ``step()`` once the game is over, raise
    :class:`~quarto_env.errors.CallOrderError` (the stock wrapper's ``AssertionError`` says the same before
    ``reset()``, but is no error of ours to catch; after the game it only warns and returns ``None``)."""

    def __str__(self) -> str:
        return str(self.env)  # the stock wrapper prints the bare env name, unless subclassed

    def step(self, action: int | None) -> None:
        self._raw.require_game_in_play("step()")  # the stock wrapper only warns once the game is over
        super().step(action)

    def observe(self, agent: str) -> dict[str, np.ndarray] | None:
        self._require_reset("observe()")
        return super().observe(agent)

    def render(self) -> str | np.ndarray | None:
        self._require_reset("render()")
        return super().render()  # type: ignore[return-value]

    def state(self) -> np.ndarray:
        self._require_reset("state()")
        return super().state()

    def _require_reset(self, call: str) -> None:
        if not self._has_reset:
            self._raw.require_game_in_play(call)  # no game yet: the CallOrderError of a call before reset()

    def last(self, observe: bool = True) -> tuple[dict[str, np.ndarray] | None, float, bool, bool, dict[str, Any]]:
        """As PettingZoo's; :class:`~quarto_env.errors.CallOrderError` when no game is in play."""
        raw = self._raw
        raw.require_game_in_play("last()")  # a game in play: reset() has run
        agent = raw.agent_selection
        # AECEnv.last, reading the unwrapped env's dicts directly; the observation still comes through the
        # wrappers below, where TerminateIllegalWrapper keeps it to check the next action against its mask.
        observation = self.env.observe(agent) if observe else None
        return (
            observation,
            raw._cumulative_rewards[agent],
            raw.terminations[agent],
            raw.truncations[agent],
            raw.infos[agent],
        )

    def _repr_svg_(self) -> str:
        """The position as SVG, for notebooks (the stock wrappers refuse to forward underscore names)."""
        return self._raw._repr_svg_()


for _name in _HOT_ATTRIBUTES:  # the outermost wrapper, the one a user reads, keeps the refusal before reset
    setattr(_OrderEnforcing, _name, _forward_after_reset(_name))


class raw_env(AECEnv[str, dict[str, np.ndarray], int], EzPickle):
    """The unwrapped ``quarto_v1`` AEC environment; the module docstring is its page, docs/environment.md the rest."""

    metadata: dict[str, Any] = {  # noqa: RUF012 -- PettingZoo reads it from the class
        "render_modes": ["ansi", "rgb_array", "human"],
        "name": PETTINGZOO_ENV_ID,
        "is_parallelizable": False,
        "render_fps": 2,
    }

    def __init__(
        self,
        attributes: int | str | list[str] | tuple[str, ...] | None = DEFAULT_FLAGS.attributes,
        squares: bool = DEFAULT_FLAGS.squares,
        declaration: bool = DEFAULT_FLAGS.declaration,
        false_declaration: str = DEFAULT_FLAGS.false_declaration,
        false_declaration_penalty: float = DEFAULT_FLAGS.false_declaration_penalty,
        first_player: int | str = DEFAULT_FLAGS.first_player,
        observation: str = DEFAULT_OBSERVATION,
        time_limit: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        render_mode: str | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:  # QuartoTypeError, as the other envs say it (Python's own TypeError is no error of ours)
            known = [name for name in inspect.signature(raw_env.__init__).parameters if name not in ("self", "unknown")]
            raise QuartoTypeError(
                f"quarto_v1 has no argument {', '.join(sorted(unknown))}; its arguments: {', '.join(known)}"
            )
        EzPickle.__init__(
            self,
            attributes=attributes,
            squares=squares,
            declaration=declaration,
            false_declaration=false_declaration,
            false_declaration_penalty=false_declaration_penalty,
            first_player=first_player,
            observation=observation,
            time_limit=time_limit,
            clock=clock,
            render_mode=render_mode,
        )
        super().__init__()
        self.flags = RuleFlags(
            attributes, squares, declaration, false_declaration, false_declaration_penalty, first_player
        )
        self.variant = self.flags.variant
        self.false_declaration_penalty = self.flags.penalty
        self.first_seat = self.flags.first_seat
        self.observation_kind = observation_kind(observation)
        self.time_limit = _check_time_limit(time_limit)
        if not callable(clock):
            raise QuartoValueError(f"clock must be a function returning seconds, such as time.monotonic; got {clock!r}")
        self.clock = clock
        self.render_mode = _check_render_mode(render_mode, self.metadata["render_modes"])

        # Read on every step: computed once here rather than through the Variant's properties.
        self._num_actions = self.variant.num_actions
        self._level = self.observation_kind.level
        self._shape = self.observation_kind.shape

        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.action_spaces: dict[str, spaces.Discrete] = {agent: spaces.Discrete(self._num_actions) for agent in AGENTS}
        observation_space = spaces.Dict(
            {
                "observation": spaces.Box(0, 1, self.observation_kind.shape, np.int8),
                "action_mask": spaces.Box(0, 1, (self._num_actions,), np.int8),
            }
        )
        self.observation_spaces = {agent: observation_space for agent in AGENTS}
        self.np_random, self.np_random_seed = seeding.np_random()
        self.agent_selection: str = AGENTS[0]
        self.game_state: State = INITIAL_STATE
        """The position, in the rules core's terms."""
        self.seats: tuple[str, str] = AGENTS
        """``seats[p]`` is the agent that plays as the core's player ``p`` (player 0 gives first)."""
        self._forfeited_by: str | None = None
        self._ended = False
        self._declared_falsely = False
        """A false declaration was ignored (penalty policy) and the same agent is still to act: it may not
        declare again before its placement or give."""
        self._handed_over_at = 0.0
        self._last_placed: int | None = None
        """The square of the last placement of this game, outlined in the SVG; ``None`` before the first."""
        self._figure: Any = None

    # -----------------------------------------------------------------------------------------------------
    # Copies
    # -----------------------------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """The whole env, its game included: ``copy.deepcopy`` and ``pickle`` give an env that goes on from the same
        position with the same generator (``EzPickle``'s state, the constructor's arguments, would give a fresh
        env that has not been reset). The ``human`` window stays with the original."""
        state = self.__dict__.copy()
        state["_figure"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # -----------------------------------------------------------------------------------------------------
    # PettingZoo API
    # -----------------------------------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Space:
        """The observation space of ``agent`` (the same for both)."""
        return self.observation_spaces[checked_agent(agent)]

    def action_space(self, agent: str) -> spaces.Space:
        """The action space of ``agent`` (the same for both)."""
        return self.action_spaces[checked_agent(agent)]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a new game; ``seed`` seeds the draw of the first player, ``options={"position": ...}`` sets
        the starting position (see docs/environment.md)."""
        start = self._starting_state(options)  # checked first: bad options change nothing
        seed = checked_seed(seed)
        if seed is not None:
            self.np_random, self.np_random_seed = seeding.np_random(seed)
        first = int(self.np_random.integers(2)) if self.first_seat is None else self.first_seat
        self.seats = (AGENTS[first], AGENTS[1 - first])
        self.game_state = start
        self._forfeited_by = None
        self._ended = False
        self._declared_falsely = False
        self._last_placed = None
        self.agents = list(AGENTS)
        self.rewards = dict.fromkeys(AGENTS, 0.0)
        self._cumulative_rewards = dict.fromkeys(AGENTS, 0.0)
        self.terminations = dict.fromkeys(AGENTS, False)
        self.truncations = dict.fromkeys(AGENTS, False)
        self.infos: dict[str, dict[str, int]] = _infos(Outcome.IN_PLAY, NO_WINNER)
        self._skip_agent_selection = None
        self._hand_over()
        if self.render_mode == "human":
            self.render()

    def step(self, action: int | None) -> None:
        """Play ``action`` for ``agent_selection``. Raises :class:`~quarto_env.errors.IllegalActionError` for an
        action outside the mask (``env()`` turns one inside the action space into a loss instead), and
        :class:`~quarto_env.errors.CallOrderError` when no game is in play."""
        self.require_game_in_play("step()")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        late = self.time_limit is not None and self.clock() - self._handed_over_at > self.time_limit
        after = None if late else self._next_state(agent, action)  # raises before anything has changed
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {AGENTS[0]: 0.0, AGENTS[1]: 0.0}
        if after is None:
            self._forfeit(agent)
        else:
            self._play(agent, after, declared=action == DECLARE)
        if self.rewards[AGENTS[0]] or self.rewards[AGENTS[1]]:
            self._accumulate_rewards()
        if self._ended:
            # Both agents are terminated; the one that did not act last reads its final reward first.
            self.agent_selection = self.seats[1 - self.seats.index(agent)]
        else:
            self._hand_over()
        if self.render_mode == "human":
            self.render()

    def last(self, observe: bool = True) -> tuple[dict[str, np.ndarray] | None, float, bool, bool, dict[str, Any]]:
        """As PettingZoo's; :class:`~quarto_env.errors.CallOrderError` when no game is in play."""
        self.require_game_in_play("last()")
        return super().last(observe)

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """The observation planes of the position and ``agent``'s action mask (all zeros unless it acts)."""
        checked_agent(agent)
        planes = np.zeros(self._shape, dtype=np.int8)
        mask = np.empty(self._num_actions, dtype=np.int8)
        acting = agent == self.agent_selection and not (
            self._ended or self.terminations[agent] or self.truncations[agent]
        )
        observe_into(planes, mask, self._level, self.game_state, self.variant, acting)
        if self._declared_falsely:
            mask[DECLARE] = 0
        return {"observation": planes, "action_mask": mask}

    def render(self) -> str | np.ndarray | None:
        """``ansi``: the text board; ``rgb_array``: the picture; ``human``: shows the picture in a window when
        matplotlib has an interactive backend, else prints the text board."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode; pass render_mode= to the env")
            return None
        names = self.seats
        status = self._forfeit_status()
        if self.render_mode == "ansi":
            return render_text(self.variant, self.game_state, names, status)
        image = render_image(self.variant, self.game_state, names, status)
        if self.render_mode == "rgb_array":
            return image
        self._show(image)
        return None

    def close(self) -> None:
        """Close the ``human`` window, if one is open."""
        if self._figure is not None:
            import matplotlib.pyplot as plt

            plt.close(self._figure)
            self._figure = None

    # -----------------------------------------------------------------------------------------------------
    # Extras
    # -----------------------------------------------------------------------------------------------------
    def _repr_svg_(self) -> str:
        """The current position as SVG, the picture of ``rgb_array`` with the last placement outlined: how
        Jupyter shows the env (whatever its ``render_mode``). See :func:`quarto_env.render.svg_board`."""
        return svg_board(self.variant, self.game_state, self.seats, self._forfeit_status(), self._last_placed)

    @property
    def position(self) -> str:
        """The current position in the notation of :mod:`quarto_env.notation`."""
        return format_position(self.game_state)

    def require_game_in_play(self, call: str) -> None:
        """Raise :class:`~quarto_env.errors.CallOrderError` naming why ``call`` cannot run, unless a game is in
        play: an agent is still to take a step (a finished agent's final step included)."""
        if self.agents:
            return
        if self._ended:
            raise CallOrderError(
                f"{call} after the game is over: both agents have taken their final step (env.agents is empty); "
                "call reset() to start a new game"
            )
        raise CallOrderError(f"{call} before reset(): call reset() to start a game")

    def record_illegal_action(self, agent: str) -> None:
        """End the game in the infos for ``agent``'s action outside the mask, which the wrapper of :func:`env`
        has just turned into a loss: the outcome ``Outcome.ILLEGAL_ACTION`` and its opponent as the winner. The
        rewards stay floats (the stock wrapper sets the other agent's to the int 0)."""
        self._ended = True
        self.rewards = {name: float(reward) for name, reward in self.rewards.items()}
        self.infos = _infos(Outcome.ILLEGAL_ACTION, AGENTS.index(self.seats[1 - self.seats.index(agent)]))

    # -----------------------------------------------------------------------------------------------------
    # Helpers
    # -----------------------------------------------------------------------------------------------------
    def _starting_state(self, options: object) -> State:
        name = self.metadata["name"]
        state, unknown = starting_position(options, self.variant, name)
        if unknown:  # a warning, not an error: PettingZoo's api_test passes options={"options": 1}
            warnings.warn(f"{name} ignores reset options {unknown}; it knows {list(RESET_OPTIONS)}", stacklevel=3)
        return INITIAL_STATE if state is None else state

    def _was_dead_step(self, action: int | None) -> None:
        if action is not None:  # PettingZoo's own check raises a bare ValueError
            raise IllegalActionError(
                f"{self.agent_selection}'s game is over: the only valid action is None (its final step), got "
                f"{action!r}; call reset() to start a new game"
            )
        super()._was_dead_step(action)

    def _next_state(self, agent: str, action: int | None) -> State:
        action = checked_live_action(agent, action, self._num_actions)
        if self._declared_falsely and action == DECLARE:
            raise IllegalActionError(
                "a false declaration cannot be repeated before the next placement or give (penalty policy)"
            )
        return step(self.variant, self.game_state, action)

    def _play(self, agent: str, state: State, declared: bool) -> None:
        before, self.game_state = self.game_state, state
        self._declared_falsely = False
        if state.occupied != before.occupied:
            self._last_placed = (state.occupied ^ before.occupied).bit_length() - 1
        if state.over:
            outcome = Outcome.FALSE_DECLARATION if declared and not before.claimable else Outcome.WIN
            self._finish(state.winner, outcome)
        elif declared:  # a false declaration under the penalty policy: nothing else changed
            self.rewards[agent] = self.false_declaration_penalty
            self._declared_falsely = True

    def _forfeit(self, agent: str) -> None:
        self._forfeited_by = agent
        self._finish(1 - self.seats.index(agent), Outcome.TIME_LIMIT)

    def _finish(self, winner: int, outcome: Outcome) -> None:
        """End the game: ``winner`` is a core player or ``NO_WINNER``."""
        if winner == NO_WINNER:
            self.infos = _infos(Outcome.DRAW, NO_WINNER)
        else:
            self.infos = _infos(outcome, AGENTS.index(self.seats[winner]))
            self.rewards[self.seats[winner]] = 1.0
            self.rewards[self.seats[1 - winner]] = -1.0
        self._ended = True
        self.terminations = dict.fromkeys(self.agents, True)

    def _hand_over(self) -> None:
        """Select the agent to act next and start its clock. (The infos stay those of :meth:`reset` until the
        game ends: nothing in play changes them.)"""
        self.agent_selection = self.seats[self.game_state.to_move]
        if self.time_limit is not None:
            self._handed_over_at = self.clock()

    def _forfeit_status(self) -> str | None:
        if self._forfeited_by is None:
            return None
        winner = self.seats[1 - self.seats.index(self._forfeited_by)]
        return f"{self._forfeited_by} exceeded the time limit of {self.time_limit:g} s: {winner} wins"

    def _show(self, image: np.ndarray) -> None:
        """Show ``image`` in a matplotlib window, or print the text board where no window can be opened."""
        import matplotlib
        import matplotlib.pyplot as plt

        if matplotlib.get_backend().lower() in _NON_INTERACTIVE_BACKENDS:
            print(render_text(self.variant, self.game_state, self.seats, self._forfeit_status()))
            return
        if self._figure is None:
            height, width = image.shape[:2]
            self._figure = plt.figure(self.metadata["name"], figsize=(width / 100, height / 100), dpi=100)
            self._axes_image = self._figure.add_axes((0, 0, 1, 1)).imshow(image)
            self._figure.axes[0].set_axis_off()
        else:
            self._axes_image.set_data(image)
        plt.pause(1 / self.metadata["render_fps"])


PYTHON_SECONDS = 0.5
"""A process writes its observations in Python (:func:`write_observation_in_python`: 30-120 microseconds each,
a few milliseconds for ``tempo``) until they have taken this long: about what importing numba and loading the
compiled kernel costs, so that a process stepping a few games never pays it, and one that steps on switches to
the kernel having spent at most twice the better choice made in hindsight (the ski-rental rule)."""
_python_seconds_left = [PYTHON_SECONDS]
_compiled_writer: list[Callable[..., None]] = []
""":func:`quarto_env.fast.write_observation` once it is in use: kept here, as an ``import`` statement in every
call would cost about a microsecond of the turn's thirty."""


def observe_into(
    planes: np.ndarray, mask: np.ndarray, level: int, state: State, variant: Variant, acting: bool
) -> None:
    """Write the observation of ``state`` under ``variant`` up to ``level`` into ``planes`` (``(channels, 16)``,
    every plane written) and its action mask into ``mask`` (``int8``; the legal actions when ``acting``, else
    zeros): the same functions run as Python while numba is not loaded and :data:`PYTHON_SECONDS` are not spent,
    else compiled (:func:`quarto_env.fast.write_observation`). Either way the same planes."""
    if not _compiled_writer:
        if _python_seconds_left[0] > 0 and "numba" not in sys.modules:
            start = time.perf_counter()
            write_observation_in_python(planes, mask, level, state, variant, acting)
            _python_seconds_left[0] -= time.perf_counter() - start
            return
        from quarto_env.fast import write_observation

        _compiled_writer.append(write_observation)
    _compiled_writer[0](
        planes, mask, level, compiled_fields(state), variant.groups, variant.counted, variant.declaration, acting
    )


def write_observation_in_python(
    planes: np.ndarray, mask: np.ndarray, level: int, state: State, variant: Variant, acting: bool
) -> None:
    """:func:`quarto_env.fast.write_observation`'s work by the same functions run as Python, the position as the
    kernel takes it (:func:`~quarto_env.core.compiled_fields`): the same planes (the tests compare them on every
    kind and variant)."""
    write_planes(planes, level, *compiled_fields(state), variant.groups, variant.counted)
    legal = legal_mask(state.occupied, state.available, state.hand, state.over, variant.declaration) if acting else 0
    mask[:] = [(legal >> action) & 1 for action in range(len(mask))]


_NON_INTERACTIVE_BACKENDS = {"agg", "cairo", "pdf", "pgf", "ps", "svg", "template"}


def checked_live_action(agent: str, action: object, num_actions: int) -> int:
    """``action`` of ``agent``, which is still playing, as an ``int`` in ``0..num_actions - 1``: otherwise
    :class:`~quarto_env.errors.IllegalActionError` naming the action and the range -- an
    :class:`~quarto_env.errors.ActionTypeError` (also a ``TypeError``) for ``None`` or a non-integer."""
    if action is None:
        raise ActionTypeError(
            f"{agent} is still playing: step() needs an action 0-{num_actions - 1}, got None "
            "(None is only the final step of an agent whose game is over)"
        )
    return checked_action(action, num_actions)


def _infos(outcome: Outcome, winner: int) -> dict[str, dict[str, int]]:
    """Both agents' infos, the same numbers for each: ``winner`` is an index into ``AGENTS`` or ``NO_WINNER``."""
    return {agent: {"outcome": int(outcome), "winner": winner} for agent in AGENTS}


def _check_time_limit(value: float | None) -> float | None:
    if value is None:
        return None
    return float(checked_number(value, "time_limit (None or seconds)", above=0))


def _check_render_mode(value: str | None, modes: list[str]) -> str | None:
    if value is not None and value not in modes:
        raise QuartoValueError(f"render_mode must be None or one of {', '.join(map(repr, modes))}; got {value!r}")
    if value == "human":  # its window is matplotlib's, which comes with the train extra
        require("train", 'render_mode="human"', "matplotlib")
    return value
