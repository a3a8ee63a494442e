"""
# Many games against a batched opponent: ``QuartoVectorVsAgent``, a Gymnasium ``VectorEnv``

| Creation          | ``gymnasium.make_vec("quarto_env/QuartoVsAgent-v1", num_envs=N, opponent=..., **kwargs)``       |
|                   | (its ``vector_entry_point``), or ``QuartoVectorVsAgent(N, opponent, **kwargs)``                 |
| Agents            | one learner per game; the opponent's moves are played inside ``reset`` and ``step``, batched    |
| Action space      | ``MultiDiscrete([16] * N)``; 17 actions with ``declaration=True`` (action 16 declares)          |
| Observation space | ``Box(0, 1, (N, channels, 16), float32)``: 19 channels by default (``observation=``)            |
| Action masks      | ``envs.action_masks()``: ``bool`` ``(N, actions)``; ``info["action_mask"]`` (``int8``)          |
| Rewards           | ``(N,)`` ``float32``: +1 win, -1 loss, 0 draw at the end; the false-declaration penalty at once |
| Auto-reset        | in the same step: ``metadata["autoreset_mode"]`` is ``AutoresetMode.SAME_STEP``                 |

The vector counterpart of :mod:`quarto_env.single_agent` (``QuartoVsAgent``): ``num_envs`` games of
``quarto_v1`` played by :class:`quarto_env.vector.VectorQuarto`, seen from the learner's seat, with the same
rules, variant flags, observation planes, rewards and illegal-action policy as ``QuartoVsAgent``. The learner
makes every decision of its seat -- it places the piece it was given, then gives one, two ``step`` calls in a
row -- and each ``step`` plays the learner's actions in every game, then the opponent's decisions up to the
learner's next one, **all games at once**: one call of the opponent per round of decisions, over every game
where it is to move, and one compiled call of VectorQuarto's kernels to play them.

## Opponents

| ``opponent``                                  | how it plays the batch                                       |
|-----------------------------------------------|--------------------------------------------------------------|
| ``"random"``                                  | compiled: a uniformly random legal action in each game       |
| ``"greedy"``                                  | compiled: the rule of ``agents.simple.GreedyAgent`` (a win   |
|                                               | at once when it can, never a give that lets the learner win  |
|                                               | at once while a safe piece exists, else random)              |
| a callable ``(observations, masks) ->``       | one call for all its games: ``float32`` planes of the env's  |
| ``actions`` (a snapshot network)              | kind ``(k, channels, 16)``, ``bool`` masks ``(k, actions)``  |
| ``"ppo:PATH"`` (``gymnasium.make_vec``)       | the checkpoint's network, one forward pass for all its games |
|                                               | (its own observation kind; ``PPOAgent.act_batch``)           |
| any other agent spec (``gymnasium.make_vec``) | **slower**: one agent per game, asked game by game in Python |
|                                               | (:class:`PlayerOpponent`)                                    |
| a :class:`BatchedOpponent`                    | anything with its ``seed``, ``start`` and ``act`` methods    |

Constructed directly, ``QuartoVectorVsAgent`` takes the first three and :class:`BatchedOpponent` objects;
agent specs are built by its entry point :func:`agents.envs.vector_vs_agent.make_vector_vs_agent` (``quarto_env``
imports nothing from ``agents``). Like ``QuartoVsAgent``, an opponent that repeats a false declaration under
the penalty rule plays a random action of the mask instead (:class:`PlayerOpponent`); any other illegal
opponent action raises :class:`~quarto_env.core.IllegalActionError`.

## Observations, masks and info

``observations[i]`` are the learner's planes in game ``i`` (``quarto_v1``'s, as ``float32``; any kind of
:mod:`quarto_env.observation`). ``action_masks()`` is the learner's legal actions, ``bool`` of shape
``(num_envs, num_actions)``, the method MaskablePPO looks for; every info holds the same as ``int8`` under
``"action_mask"``, and ``"seat"``, the learner's seat in each game (0 when it gives first).

## Rewards and auto-reset

As ``QuartoVsAgent``: +1 when the learner wins, -1 when it loses -- also when its give let the opponent win,
answered at once by the opponent's winning placement in the same ``step`` -- 0 at a draw, and
``false_declaration_penalty`` for each false declaration of the learner under ``false_declaration="penalty"``
(an opponent's costs the learner nothing). A game that ends is replaced in the same step (Gymnasium's
``AutoresetMode.SAME_STEP``): where ``terminated[i]``, ``rewards[i]`` is the finished game's, while the
observation, mask and seat are already the new game's, whose opening the opponent has played when it gives
first. ``info["final_obs"]`` holds the finished games' last planes (zeros elsewhere), ``info["_final_obs"]``
says which rows do; ``info["final_info"]`` their ``seat`` and ``illegal_action`` (Gymnasium's way: the info's
other keys are already the new games'). ``truncated`` is always ``False``. Should an opponent end a new game
before the learner's first decision (a random opponent's false declaration under ``false_declaration="lose"``),
that game is discarded and another started with the same seats (the learner gives first in half the games).

## Reset options

``reset(options={"position": NOTATION})`` starts every game from a position in the notation of
:mod:`quarto_env.notation`, with the learner as the player to move there (its ``seat`` follows); the games after
those start from the opening as usual.

## Illegal actions

``illegal_action="lose"`` (the default): an action outside the mask ends that game at once with reward -1
(``info["illegal_action"][i]``), the position left as it was. ``"raise"``: ``step`` raises
:class:`~quarto_env.core.IllegalActionError` naming the envs, and no game changes. ``actions`` must be an
integer array of shape ``(num_envs,)``.

## Seeds

``reset(seed=s)`` seeds who gives first in each game (VectorQuarto's streams; under ``learner_seat="random"``
that is the learner's seat) and the opponent's random draws; the same seed and the same learner actions give
the same games. ``reset()`` goes on from where the draws are. ``learner_seat=0`` or ``1`` fixes the seat in
every game. A network opponent that samples draws from torch's generator, which the env does not seed.

## Arguments

``num_envs``; ``opponent`` (above, default ``"random"``); ``learner_seat`` (``"random"``, ``0``, ``1``);
``illegal_action`` (``"lose"``, ``"raise"``); ``observation`` (a kind of ``quarto_v1``, default
``"tactical"``); ``threads`` (default 1: the planes of each step written by that many threads, as
:class:`~quarto_env.vector.VectorQuarto`'s ``threads``; it pays with costly planes such as ``tempo`` and many
games); and the variant flags of ``quarto_v1`` (``attributes``, ``squares``, ``declaration``,
``false_declaration``, ``false_declaration_penalty``). A bad value raises an error naming the allowed ones.

## Training with MaskablePPO (sb3-contrib)

Stable-Baselines3 takes its own ``VecEnv``; :class:`agents.envs.sb3_vector.SB3VectorEnv` adapts this one
(``terminal_observation`` from ``final_obs``, ``action_masks`` passed through, one info dict per env with a finished
game's ``episode`` statistics, which MaskablePPO logs as ``rollout/ep_rew_mean``)::

    import gymnasium
    import quarto_env  # registers quarto_env/QuartoVsAgent-v1 and its vector entry point
    from agents.envs.sb3_vector import SB3VectorEnv
    from sb3_contrib import MaskablePPO

    envs = gymnasium.make_vec("quarto_env/QuartoVsAgent-v1", num_envs=64, opponent="greedy")
    MaskablePPO("MlpPolicy", SB3VectorEnv(envs), seed=0).learn(100_000)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from quarto_env.checks import checked_seed
from quarto_env.core import (
    ALL_SQUARES,
    DECLARE,
    FIELD_OVER,
    FIELD_TO_MOVE,
    NO_PIECE,
    IllegalActionError,
    State,
    Variant,
    winning_pieces,
    winning_squares,
)
from quarto_env.errors import CallOrderError, QuartoTypeError, QuartoValueError
from quarto_env.kernel import kernel
from quarto_env.notation import RESET_OPTIONS, starting_position
from quarto_env.observation import DEFAULT_OBSERVATION, ObservationKind, observation_kind
from quarto_env.single_agent import (
    OPENING_TRIES,
    Player,
    check_illegal_action,
    check_learner_seat,
    every_opening_ended,
)
from quarto_env.vector import (
    MAX_ENVS_NAMED,
    RecycledArrays,
    VectorQuarto,
    checked_num_envs,
    game_bytes,
    legal_action_bits,
    play_action,
    start_game,
    write_env_planes,
)

LEARNER_SEAT, OPPONENT_SEAT = 0, 1
"""The learner plays VectorQuarto's seat 0; who gives first follows from ``learner_seat`` (its ``first_player``)."""
COMPILED_OPPONENTS = ("random", "greedy")
NetworkActions = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""A snapshot network: actions ``(k,)`` for ``float32`` planes ``(k, channels, 16)`` and ``bool`` masks."""


class BatchedOpponent(Protocol):
    """What the env asks of its opponent: a seed, a note of new games, and actions for a batch of games."""

    def seed(self, seed: int) -> None: ...

    def start(self, envs: VectorQuarto, rows: np.ndarray) -> None: ...

    def act(self, envs: VectorQuarto, rows: np.ndarray, masks: np.ndarray) -> np.ndarray: ...


class QuartoVectorVsAgent(gymnasium.vector.VectorEnv):
    """``num_envs`` Quarto games for one learner against a batched opponent; see the module docstring."""

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012 -- Gymnasium reads it

    def __init__(
        self,
        num_envs: int,
        opponent: str | BatchedOpponent | NetworkActions = "random",
        *,
        observation: str | ObservationKind = DEFAULT_OBSERVATION,
        learner_seat: int | str = "random",
        illegal_action: str = "lose",
        threads: int = 1,
        **variant_flags: Any,
    ) -> None:
        kind = observation_kind(observation)
        checked_num_envs(num_envs, _bytes_per_game(kind), "QuartoVectorVsAgent", f" with observation={kind.name!r}")
        first_player = check_learner_seat(learner_seat)  # the learner is seat 0: its seat is who gives first
        self.vector = VectorQuarto(
            num_envs, observation=kind, first_player=first_player, threads=threads, **variant_flags
        )
        """The games underneath (:class:`~quarto_env.vector.VectorQuarto`); read them, never step them."""
        self.illegal_action = check_illegal_action(illegal_action)
        self.opponent = batched_opponent(opponent, kind)
        self.num_envs = self.vector.num_envs
        self.single_observation_space = spaces.Box(0, 1, kind.shape, np.float32)
        self.single_action_space = spaces.Discrete(self.vector.num_actions)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._masks = np.zeros((self.num_envs, self.vector.num_actions), dtype=np.int8)
        # The kernels write int8 planes into these (never handed out); the caller gets them as float32, in arrays
        # recycled once it lets go of them (RecycledArrays says why).
        self._planes = np.zeros((self.num_envs, *kind.shape), dtype=np.int8)
        self._final_planes = np.zeros_like(self._planes)
        self._float_arrays = {name: RecycledArrays() for name in ("observations", "final observations")}
        self._started = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """New games everywhere, the opponent's openings played; ``seed`` seeds them and the opponent's draws."""
        start = _starting_state(options, self.vector.variant)  # checked first: bad options change nothing
        seed = checked_seed(seed)
        super().reset(seed=seed)
        self.vector.reset(seed=seed)
        self.opponent.seed(int(self.np_random.integers(2**63)))
        self.opponent.start(self.vector, np.arange(self.num_envs))
        if start is None:
            self._play_openings()
        else:  # the learner (seat 0) is the core's player to move there
            self.vector.games.set_state(np.arange(self.num_envs), start)
            self.vector.first_seats[:] = start.to_move
        self._started = True
        planes = self._observe()
        return planes, self._info()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The learner's ``actions``, then the opponent's decisions up to the learner's next ones, in every game."""
        if not self._started:
            raise CallOrderError("QuartoVectorVsAgent.step() before reset(): call reset() first")
        actions = self.vector.checked_actions(actions).astype(np.int64)
        rewards = np.zeros(self.num_envs, dtype=np.float32)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        illegal = self._illegal(actions)
        rewards[illegal], terminated[illegal] = -1.0, True
        legal_rows = np.flatnonzero(~illegal)
        self._play(legal_rows, actions[legal_rows], rewards, terminated)
        self._play_opponent(rewards, terminated)
        final_info = {"seat": self.seats, "illegal_action": illegal}  # the finished games', before their restart
        final_planes = self._restart(np.flatnonzero(terminated))
        planes = self._observe()
        info = {
            **self._info(),
            "illegal_action": illegal,
            "final_obs": final_planes,
            "_final_obs": terminated.copy(),
            "final_info": final_info,
            "_final_info": terminated.copy(),
        }
        return planes, rewards, terminated, np.zeros(self.num_envs, dtype=np.bool_), info

    def action_masks(self) -> np.ndarray:
        """The learner's legal actions in every game, ``bool`` ``(num_envs, num_actions)``."""
        return self._masks.astype(bool)

    @property
    def seats(self) -> np.ndarray:
        """The learner's seat in each game: 0 where it gives first, 1 otherwise."""
        return self.vector.first_seats.copy()

    # -----------------------------------------------------------------------------------------------------
    # Helpers
    # -----------------------------------------------------------------------------------------------------
    def _illegal(self, actions: np.ndarray) -> np.ndarray:
        in_range = (actions >= 0) & (actions < self.vector.num_actions)
        picked = self._masks[np.arange(self.num_envs), np.where(in_range, actions, 0)]
        illegal = ~in_range | (picked == 0)
        if illegal.any() and self.illegal_action == "raise":
            envs = np.flatnonzero(illegal)[:MAX_ENVS_NAMED]
            first = int(envs[0])
            raise IllegalActionError(
                f"illegal learner actions in envs {envs.tolist()}: actions {actions[envs].tolist()}; env {first} "
                f"allows {np.flatnonzero(self._masks[first]).tolist()} (action_masks()); no game was played"
            )
        return illegal

    def _play(self, rows: np.ndarray, actions: np.ndarray, rewards: np.ndarray, terminated: np.ndarray) -> None:
        """Play the legal ``actions`` in ``rows``, adding the learner's rewards and marking the games that end."""
        vector = self.vector
        penalty, rules = vector.false_declaration_penalty, vector.variant.compiled
        scratch = (np.zeros((self.num_envs, 2), dtype=np.float32), np.zeros(self.num_envs, dtype=np.bool_))
        _play_rows(rows, actions, vector.game_arrays(), penalty, rules, (rewards, terminated), scratch)

    def _play_opponent(self, rewards: np.ndarray, terminated: np.ndarray) -> None:
        """The opponent's decisions, a batch per round, until the learner is to act or the game is over everywhere."""
        while (rows := self._opponent_rows()).size:
            masks = self._legal_masks(rows)
            actions = np.asarray(self.opponent.act(self.vector, rows, masks), dtype=np.int64).reshape(len(rows))
            in_range = (actions >= 0) & (actions < self.vector.num_actions)
            bad = ~in_range | ~masks[np.arange(len(rows)), np.where(in_range, actions, 0)]
            if bad.any():
                i = int(np.argmax(bad))
                raise IllegalActionError(
                    f"the opponent played the illegal action {actions[i]} in env {rows[i]}; "
                    f"legal: {np.flatnonzero(masks[i]).tolist()}"
                )
            self._play(rows, actions, rewards, terminated)

    def _opponent_rows(self) -> np.ndarray:
        positions = self.vector.games.positions
        to_move = self.vector.first_seats ^ positions[:, FIELD_TO_MOVE]
        return np.flatnonzero((positions[:, FIELD_OVER] == 0) & (to_move == OPPONENT_SEAT))

    def _legal_masks(self, rows: np.ndarray) -> np.ndarray:
        masks = np.zeros((len(rows), self.vector.num_actions), dtype=np.bool_)
        _masks_of(rows, self.vector.game_arrays(), self.vector.variant.declaration, masks)
        return masks

    def _restart(self, rows: np.ndarray) -> np.ndarray:
        """New games in ``rows``, the opponent's openings played; returns the finished games' last planes."""
        self._new_games(rows)
        final_planes = self._as_float("final observations", self._final_planes)  # before the openings restart more
        if rows.size:
            self._play_openings()
        return final_planes

    def _new_games(self, rows: np.ndarray, keep_seats: bool = False) -> None:
        """New games in ``rows`` (``keep_seats``: with the seats of the games they replace), the opponent told;
        the last planes of the games they replace in ``self._final_planes``."""
        vector = self.vector
        self._final_planes[:] = 0
        level, _, fixed_first_seat = vector.step_settings
        seats = vector.first_seats[rows] if keep_seats else np.full(len(rows), fixed_first_seat, dtype=np.int64)
        _start_rows(rows, vector.game_arrays(), seats, level, vector.variant.compiled, self._final_planes)
        if rows.size:
            self.opponent.start(vector, rows)

    def _play_openings(self) -> None:
        """The opponent's first decisions where it gives first; games it ends at once are started again with the
        same seats (drawn again, they would give the learner the first give more often than not), up to
        :data:`~quarto_env.single_agent.OPENING_TRIES` times (an opponent that ends every game first would
        otherwise hold the env forever)."""
        for _ in range(OPENING_TRIES):
            rewards = np.zeros(self.num_envs, dtype=np.float32)
            ended = np.zeros(self.num_envs, dtype=np.bool_)
            self._play_opponent(rewards, ended)
            if not ended.any():
                return
            self._new_games(np.flatnonzero(ended), keep_seats=True)
        raise every_opening_ended(f"the opponent {getattr(self.opponent, 'name', type(self.opponent).__name__)!r}")

    def _observe(self) -> np.ndarray:
        vector = self.vector
        current_player = np.empty(self.num_envs, dtype=np.int8)
        level = vector.step_settings[0]
        vector.shares.observe(
            vector.game_arrays(), level, vector.variant.compiled, (self._planes, self._masks, current_player)
        )
        return self._as_float("observations", self._planes)

    def _as_float(self, name: str, planes: np.ndarray) -> np.ndarray:
        """``planes`` as float32, in an array of ``name``'s that the caller does not hold."""
        floats = self._float_arrays[name].empty(planes.shape, np.float32)
        np.copyto(floats, planes)
        return floats

    def _info(self) -> dict[str, Any]:
        return {"action_mask": self._masks.copy(), "seat": self.seats}


# ---------------------------------------------------------------------------------------------------------
# Opponents
# ---------------------------------------------------------------------------------------------------------
def batched_opponent(opponent: str | BatchedOpponent | NetworkActions, kind: ObservationKind) -> BatchedOpponent:
    """The env's opponent for ``opponent``: ``"random"``, ``"greedy"``, a :class:`BatchedOpponent`, or a network
    callable (which reads planes of ``kind``)."""
    if isinstance(opponent, str):
        if opponent.strip() not in COMPILED_OPPONENTS:
            raise QuartoValueError(
                f"opponent {opponent!r}: QuartoVectorVsAgent takes 'random', 'greedy', a network callable or a "
                "BatchedOpponent; other agent specs through gymnasium.make_vec or agents.envs.vector_vs_agent"
            )
        return CompiledOpponent(opponent.strip())
    if all(callable(getattr(opponent, name, None)) for name in ("seed", "start", "act")):
        return opponent  # type: ignore[return-value]  # a BatchedOpponent
    if callable(opponent):
        return BatchedNetworkOpponent(opponent, kind)
    raise QuartoTypeError(
        f"opponent must be 'random', 'greedy', a callable (observations, masks) -> actions or a BatchedOpponent; "
        f"got {opponent!r}"
    )


class CompiledOpponent:
    """``random`` or ``greedy``, one compiled call for all the games it moves in."""

    def __init__(self, name: str) -> None:
        if name not in COMPILED_OPPONENTS:
            raise QuartoValueError(f"compiled opponents: {', '.join(COMPILED_OPPONENTS)}; got {name!r}")
        self.name = name
        self.rng = np.random.default_rng()

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def start(self, envs: VectorQuarto, rows: np.ndarray) -> None:
        pass

    def act(self, envs: VectorQuarto, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        allowed = self.allowed(envs, rows)
        actions = np.empty(len(rows), dtype=np.int64)
        _pick_actions(allowed, self.rng.random(len(rows)), actions)
        return actions

    def allowed(self, envs: VectorQuarto, rows: np.ndarray) -> np.ndarray:
        """The bit mask of the actions it draws from in each of ``rows`` (uniformly)."""
        allowed = np.empty(len(rows), dtype=np.int64)
        greedy = self.name == "greedy"
        _allowed_actions(rows, envs.game_arrays(), envs.variant.compiled, greedy, allowed)
        return allowed


class BatchedNetworkOpponent:
    """A network (a callable ``(observations, masks) -> actions``): one call for all the games it moves in, with
    the planes of its own observation kind."""

    def __init__(self, actions: NetworkActions, kind: ObservationKind) -> None:
        self.actions = actions
        self.kind = kind

    def seed(self, seed: int) -> None:
        pass

    def start(self, envs: VectorQuarto, rows: np.ndarray) -> None:
        pass

    def act(self, envs: VectorQuarto, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        return np.asarray(self.actions(envs.games.observe(rows, self.kind).astype(np.float32), masks))


class PlayerOpponent:
    """Players with ``act(state)`` and ``reset()`` (the agents of :mod:`agents`), one per game, asked game by
    game: the slow way, for agents without a batched form."""

    def __init__(self, players: Sequence[Player]) -> None:
        self.players = list(players)
        self.rng = np.random.default_rng()

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        for player, player_seed in zip(self.players, self.rng.integers(2**63, size=len(self.players)), strict=True):
            if hasattr(player, "rng"):
                player.rng = np.random.default_rng(int(player_seed))

    def start(self, envs: VectorQuarto, rows: np.ndarray) -> None:
        for row in rows:
            self.players[row].reset()

    def act(self, envs: VectorQuarto, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        actions = np.array([self.players[row].act(envs.state(int(row))) for row in rows], dtype=np.int64)
        # A repeated false declaration (the core allows it, the env masks it): a random action of the mask.
        if masks.shape[1] > DECLARE:
            for i in np.flatnonzero((actions == DECLARE) & ~masks[:, DECLARE]):
                actions[i] = self.rng.choice(np.flatnonzero(masks[i]))
        return actions


def _starting_state(options: object, variant: Variant) -> State | None:
    state, unknown = starting_position(options, variant, "QuartoVectorVsAgent")
    if unknown:
        raise QuartoValueError(f"unknown reset options {unknown}; QuartoVectorVsAgent knows {list(RESET_OPTIONS)}")
    return state


def _bytes_per_game(kind: ObservationKind) -> int:
    """Bytes per game of the env's arrays: :class:`VectorQuarto`'s; the int8 planes and final planes the kernels
    write, and the float32 arrays of both it recycles (:attr:`~quarto_env.vector.RecycledArrays.KEPT` of each);
    and a step's own twice over (as :func:`~quarto_env.vector.game_bytes` counts them): the mask's copy, the
    rewards and the flags."""
    planes = kind.shape[0] * kind.shape[1]
    recycled = 2 * RecycledArrays.KEPT * 4 * planes
    return game_bytes(kind, DECLARE + 1) + 2 * planes + recycled + 2 * (2 * (DECLARE + 1) + 4 + 3)


# ---------------------------------------------------------------------------------------------------------
# Kernels: VectorQuarto's, over a subset of the games
# ---------------------------------------------------------------------------------------------------------
@kernel
def _play_rows(rows, actions, games, penalty, rules, totals, scratch):  # type: ignore[no-untyped-def]
    rewards, terminated = totals
    step_rewards, step_terminated = scratch
    for k in range(len(rows)):
        i = rows[k]
        play_action(i, actions[k], games, penalty, rules, step_rewards, step_terminated)
        rewards[i] += step_rewards[i, LEARNER_SEAT]
        terminated[i] = terminated[i] or step_terminated[i]


@kernel
def _start_rows(rows, games, seats, level, rules, final_planes):  # type: ignore[no-untyped-def]
    """New games in ``rows``, row ``rows[k]``'s first seat ``seats[k]`` (-1: drawn), the last planes of the games
    they replace in ``final_planes``."""
    positions, final_words = games[0], final_planes.view(np.uint64)
    for k in range(len(rows)):
        write_env_planes(final_words[rows[k]], level, positions[rows[k]], rules)
        start_game(rows[k], games, seats[k])


@kernel
def _masks_of(rows, games, declaration, masks):  # type: ignore[no-untyped-def]
    positions, _, declared_falsely, _ = games
    for k in range(len(rows)):
        legal = legal_action_bits(positions[rows[k]], declared_falsely[rows[k]], declaration)
        for action in range(masks.shape[1]):
            masks[k, action] = legal >> action & 1


@kernel
def _allowed_actions(rows, games, rules, greedy, allowed):  # type: ignore[no-untyped-def]
    """The actions the random (all legal ones) or greedy opponent draws from, as a bit mask per row."""
    positions, _, declared_falsely, _ = games
    groups, counted, declaration = rules[0], rules[1], rules[2]
    for k in range(len(rows)):
        row = positions[rows[k]]
        legal = legal_action_bits(row, declared_falsely[rows[k]], declaration)
        lanes, occupied, available, hand, claimable = row[0], row[1], row[2], row[3], row[5]
        if not greedy:
            allowed[k] = legal
        elif claimable:  # GreedyAgent: declare what can be claimed, win at once, give safely
            allowed[k] = 1 << DECLARE
        elif hand != NO_PIECE:
            wins = winning_squares(lanes, occupied, hand, groups, counted)
            allowed[k] = wins if wins else ALL_SQUARES & ~occupied
        else:
            safe = available & ~winning_pieces(lanes, occupied, groups, counted)
            allowed[k] = safe if safe else available


@kernel
def _pick_actions(allowed, uniforms, actions):  # type: ignore[no-untyped-def]
    """Action ``actions[k]``: the ``floor(uniforms[k] * n)``-th of the ``n`` set bits of ``allowed[k]``."""
    for k in range(len(allowed)):
        count = 0
        for action in range(DECLARE + 1):
            count += allowed[k] >> action & 1
        pick = int(uniforms[k] * count)
        for action in range(DECLARE + 1):
            if allowed[k] >> action & 1:
                if pick == 0:
                    actions[k] = action
                    break
                pick -= 1
