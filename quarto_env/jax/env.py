"""``quarto_v1`` as a ``pgx.Env``: :class:`QuartoEnv` and its :class:`State` (the page is ``docs/jax.md``).

The same game as :func:`quarto_env.env`, seat for seat: player ``i`` is ``player_i``, a turn is a placement then
a give by the same player, the first action is a give, action 16 declares in the declaration variant. The rules
are :mod:`quarto_env.jax.rules`; this module adds pgx's contract around them (rewards per seat, the mask all True
once the game is over, an illegal action ends the game) and the conversions to and from the compiled core's
position arrays (:func:`quarto_env.core.position_array`).
"""

from __future__ import annotations

import functools
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
import pgx.core
from pgx._src.struct import dataclass

import quarto_env.jax.rules as rules
from quarto_env.core import NUM_FIELDS, NUM_SQUARES, state_of_row
from quarto_env.errors import ActionTypeError, QuartoValueError
from quarto_env.flags import RuleFlags
from quarto_env.observation import DEFAULT_OBSERVATION, observation_kind

ENV_ID = "quarto"
VERSION = "v1"
"""The version of ``quarto_v1`` this env plays (docs/environment.md's history)."""

FALSE = jnp.bool_(False)
TRUE = jnp.bool_(True)


@dataclass
class State(pgx.core.State):
    """A position of :class:`QuartoEnv`: pgx's six public fields, and the position in private ones."""

    current_player: jax.Array = jnp.int32(0)
    """The seat to act: 0 is ``player_0``. It changes after a give, not after a placement."""
    observation: jax.Array = jnp.zeros((19, 16), dtype=jnp.bool_)
    rewards: jax.Array = jnp.zeros(2, dtype=jnp.float32)
    """What the last step gave each seat: +1/-1 at a win, the penalty of an ignored false declaration."""
    terminated: jax.Array = FALSE
    truncated: jax.Array = FALSE
    legal_action_mask: jax.Array = jnp.ones(16, dtype=jnp.bool_)
    _step_count: jax.Array = jnp.int32(0)
    _lanes: jax.Array = jnp.zeros(4, dtype=jnp.int32)
    """The board's attribute lanes: bit ``s`` of ``_lanes[k]`` is set when the piece on square ``s`` has
    attribute ``k`` (:mod:`quarto_env.jax.rules`)."""
    _occupied: jax.Array = jnp.int32(0)
    """The mask of occupied squares."""
    _hand: jax.Array = jnp.int32(-1)
    """The piece to place, ``-1`` when the next action is a give."""
    _available: jax.Array = jnp.int32(0xFFFF)
    """The mask of pieces that can be given."""
    _to_move: jax.Array = jnp.int32(0)
    """The core's player to act (0 gave first)."""
    _first: jax.Array = jnp.int32(0)
    """The seat playing as the core's player 0: ``current_player == _to_move ^ _first``."""
    _claimable: jax.Array = jnp.int32(0)
    _winner: jax.Array = jnp.int32(-1)
    """The core's player who won, ``-1`` while playing and after a draw."""
    _declared_falsely: jax.Array = FALSE
    """An ignored false declaration (penalty policy) was the last action: the declaration is masked."""

    @property
    def env_id(self) -> Any:
        return ENV_ID

    def _repr_html_(self) -> None:
        """No picture of its own (a notebook shows the plain repr): pgx's drawing knows pgx's games alone, and a
        position does not know its variant. :meth:`QuartoEnv.svg` draws one."""
        return None

    def to_svg(self, **_: Any) -> str:
        raise QuartoValueError("a State does not know its rule variant: draw it with env.svg(state)")

    def save_svg(self, filename: Any, **_: Any) -> None:
        raise QuartoValueError("a State does not know its rule variant: write env.svg(state) to the file")


class QuartoEnv(pgx.core.Env):
    """Quarto for pgx, any rule variant: ``quarto_env.jax.env(**flags)`` makes one (the flags of
    ``quarto_env.env``, and ``observation=`` one of its kinds)."""

    def __init__(self, observation: str = DEFAULT_OBSERVATION, **flags: Any) -> None:
        super().__init__()
        self.flags = RuleFlags.of(flags, "quarto_env.jax.env")
        self.variant = self.flags.variant
        self.observation_kind = observation_kind(observation)
        self.tables = rules.Tables.of(self.variant)

    def __repr__(self) -> str:
        return f"QuartoEnv({self.variant.describe()}, observation={self.observation_kind.name!r})"

    @property
    def id(self) -> Any:
        return ENV_ID

    @property
    def version(self) -> str:
        return VERSION

    @property
    def num_players(self) -> int:
        return 2

    @property
    def num_actions(self) -> int:
        return self.variant.num_actions

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return self.observation_kind.shape

    def init(self, key: jax.Array) -> State:
        return super().init(key)  # type: ignore[return-value]

    def step(self, state: pgx.core.State, action: jax.Array, key: jax.Array | None = None) -> State:
        """pgx's ``Env.step``, the same contract written as one pass of selects: an ended game stays as it is
        with zero rewards; an illegal action -- masked, or outside ``0..num_actions - 1``, which pgx's indexing
        would clamp to a legal one -- ends the game with -1 for the seat that took it and +1 for the other, the
        position unchanged; once ended, every action is marked legal. pgx's own step nests three ``lax.cond``
        around the game's step, which ``vmap`` turns into selects of the whole state each: one pass
        costs less (``quarto bench jax``; figures in docs/results.md). An action of the wrong type or shape, and a
        batch of states (step one game; ``jax.vmap(env.step)`` steps a batch), are refused before any tracing, in
        one line."""
        state = cast(State, state)
        action = checked_action_array(action, state, self.num_actions)
        in_range = (action >= 0) & (action < self.num_actions)
        legal = in_range & jnp.any(state.legal_action_mask & (jnp.arange(self.num_actions) == action))
        done = state.terminated | state.truncated
        illegal = ~done & ~legal
        played = self._step(state, jnp.clip(action, 0, self.num_actions - 1), key)
        kept = done | illegal  # the position stays as it was
        after = jax.tree.map(
            lambda old, new: jnp.where(kept, old, new), state, played.replace(observation=state.observation)
        )
        actor = jnp.arange(2) == state.current_player
        rewards = jnp.where(illegal, jnp.where(actor, -1.0, 1.0), jnp.where(done, 0.0, played.rewards))
        terminated = jnp.where(done, state.terminated, illegal | played.terminated)  # a truncated game stays so
        after = after.replace(  # type: ignore[attr-defined]
            rewards=rewards.astype(jnp.float32),
            terminated=terminated,
            legal_action_mask=jnp.where(done, state.legal_action_mask, played.legal_action_mask | terminated),
            _step_count=state._step_count + (~done).astype(jnp.int32),
        )
        # Observed once, from the position chosen (a kept one observes as it did): no select of the planes.
        return after.replace(observation=self.observe(after))  # type: ignore[no-any-return]

    def _init(self, key: jax.Array) -> State:
        seat = self.flags.first_seat
        first = jax.random.bernoulli(key).astype(jnp.int32) if seat is None else jnp.int32(seat)
        state = State(current_player=first, _first=first)  # type: ignore[call-arg]
        return state.replace(legal_action_mask=self._legal(state))  # type: ignore[attr-defined,no-any-return]

    def _step(self, state: pgx.core.State, action: jax.Array, key: Any) -> State:
        state = cast(State, state)
        lanes, occupied, hand, available, to_move, claimable, winner, over, declared_falsely = rules.play(
            self.tables, state._lanes, state._occupied, state._hand, state._available, state._to_move,
            state._claimable, action,
        )  # fmt: skip
        seat_of_winner = winner ^ state._first
        won = jnp.where(jnp.arange(2) == seat_of_winner, 1.0, -1.0)
        rewards = jnp.where(winner >= 0, won, 0.0).astype(jnp.float32)
        penalty = jnp.where(jnp.arange(2) == state.current_player, self.flags.penalty, 0.0)
        rewards = jnp.where(declared_falsely, penalty, rewards).astype(jnp.float32)
        state = state.replace(  # type: ignore[attr-defined]
            current_player=to_move ^ state._first,
            rewards=rewards,
            terminated=over,
            _lanes=lanes,
            _occupied=occupied,
            _hand=hand,
            _available=available,
            _to_move=to_move,
            _claimable=claimable,
            _winner=winner,
            _declared_falsely=declared_falsely,
        )
        return state.replace(legal_action_mask=self._legal(state))  # type: ignore[no-any-return]

    def _legal(self, state: State) -> jax.Array:
        return rules.legal_actions(
            self.tables, state._occupied, state._hand, state._available, state.terminated, state._declared_falsely
        )

    def _observe(self, state: pgx.core.State, player_id: jax.Array) -> jax.Array:
        # Quarto is impartial: both seats see the same planes, the position and the phase.
        state = cast(State, state)
        level = self.observation_kind.level
        return rules.planes(
            self.tables, level, state._lanes, state._occupied, state._hand, state._available, state._claimable
        )

    def svg(self, state: State) -> str:
        """One game's position drawn as :func:`quarto_env.render.svg_board` draws the AEC env's, under this env's
        rules (``IPython.display.SVG(env.svg(state))`` in a notebook); a batch is refused."""
        from quarto_env.render import svg_board  # only where a picture is asked for

        if np.shape(state.terminated):
            raise QuartoValueError(
                f"env.svg draws one game; this state holds a batch of shape {np.shape(state.terminated)}"
            )
        (row,), _ = self.to_positions(jax.tree.map(lambda field: field[None], state))
        return svg_board(self.variant, state_of_row(row))

    # -----------------------------------------------------------------------------------------------------
    # The compiled core's positions
    # -----------------------------------------------------------------------------------------------------
    def to_positions(self, state: State) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, first_seats)``: the games of ``state`` (one, or a batch of any shape) as rows of
        :func:`quarto_env.core.position_array` (shape ``batch + (8,)``) and the seat playing the core's player 0
        in each (``batch``)."""
        fields = (state._lanes, state._occupied, state._available, state._hand, state._to_move, state._claimable)
        lanes, occupied, available, hand, to_move, claimable, winner, over, first = (
            np.asarray(a) for a in jax.device_get((*fields, state._winner, state.terminated, state._first))
        )
        packed = (lanes.astype(np.uint64) << (16 * np.arange(4, dtype=np.uint64))).sum(-1, dtype=np.uint64)
        rows = np.stack(
            [packed.view(np.int64), occupied, available, hand, to_move, claimable, winner, over], axis=-1
        ).astype(np.int64)
        return rows, first.astype(np.int64)

    def from_positions(self, positions: Any, first_seats: Any = 0) -> State:
        """The games in ``positions`` (rows of :func:`quarto_env.core.position_array`, shape ``batch + (8,)``) as
        a :class:`State` of that batch shape, ``first_seats`` (broadcast to the batch) the seat playing the core's
        player 0. Rewards are zero; an ended game's mask is all True."""
        rows = np.asarray(positions, dtype=np.int64)
        if rows.ndim < 1 or rows.shape[-1] != NUM_FIELDS:
            raise QuartoValueError(
                f"positions must have {NUM_FIELDS} fields in their last axis, got shape {rows.shape}"
            )
        batch = rows.shape[:-1]
        lanes = (rows[..., :1].view(np.uint64) >> (16 * np.arange(4, dtype=np.uint64))) & np.uint64(0xFFFF)
        first = np.broadcast_to(np.asarray(first_seats, dtype=np.int32), batch)
        if not np.isin(first, (0, 1)).all():
            raise QuartoValueError(f"first_seats must be 0 or 1, got {np.unique(first).tolist()}")
        occupied, available, hand, to_move = rows[..., 1], rows[..., 2], rows[..., 3], rows[..., 4]
        steps = (NUM_SQUARES - _popcount(available)) + _popcount(occupied)

        fields = [
            lanes,
            occupied,
            hand,
            available,
            to_move,
            rows[..., 5],
            rows[..., 6],
            rows[..., 7] != 0,
            first,
            steps,
        ]
        arrays = [jnp.asarray(f) if f.dtype == bool else jnp.asarray(f.astype(np.int64), jnp.int32) for f in fields]
        return self._state_of_fields(len(batch))(*arrays)  # type: ignore[no-any-return]

    @functools.cache  # noqa: B019 -- one compiled function per env and batch rank, kept while the env lives
    def _state_of_fields(self, rank: int) -> Any:
        """The jitted function from the fields of :meth:`from_positions` to a :class:`State`, ``vmap``-ed ``rank``
        times (the planes of a batch of positions: eager, one batch costs seconds)."""

        def one(lanes, occupied, hand, available, to_move, claimable, winner, over, first, steps):  # type: ignore[no-untyped-def]
            state = State(  # type: ignore[call-arg]
                current_player=to_move ^ first,
                terminated=over,
                _step_count=steps,
                _lanes=lanes,
                _occupied=occupied,
                _hand=hand,
                _available=available,
                _to_move=to_move,
                _first=first,
                _claimable=claimable,
                _winner=winner,
            )
            state = state.replace(legal_action_mask=self._legal(state) | over)  # type: ignore[attr-defined]
            return state.replace(observation=self.observe(state))

        make = one
        for _ in range(rank):
            make = jax.vmap(make)
        return jax.jit(make)


def _popcount(masks: np.ndarray) -> np.ndarray:
    return np.array([int(m).bit_count() for m in np.ravel(masks)], dtype=np.int32).reshape(np.shape(masks))


def checked_action_array(action: Any, state: pgx.core.State, num_actions: int) -> jax.Array:
    """``action`` as an ``int32`` array for ``state``: an integer of the state's batch shape. Everything checked
    here is static (types and shapes), so it is checked under ``jit`` too, while tracing; values are not, but a
    concrete one outside ``int32`` is brought into it still illegal (a cast would wrap ``2**32 + 3`` to 3)."""
    dtype = getattr(action, "dtype", None)
    if (
        isinstance(action, bool)
        or (dtype is None and not isinstance(action, int))
        or (dtype is not None and not jnp.issubdtype(dtype, jnp.integer))
    ):
        kind = dtype if dtype is not None else type(action).__name__
        raise ActionTypeError(f"an action must be an integer 0-{num_actions - 1} (int32 under jit), got {kind}")
    batch, shape = np.shape(state.terminated), np.shape(action)
    if batch:  # step's selects would broadcast a batch's fields against one game's tables, deep inside
        raise QuartoValueError(
            f"env.step steps one game, and this state holds a batch of shape {batch}; for a batch, step with "
            "jax.vmap(env.step)"
        )
    if shape:
        raise QuartoValueError(
            f"the action's shape {shape} is not the state's (); for a batch, step with jax.vmap(env.step)"
        )
    if isinstance(action, int):
        action = min(max(action, -1), num_actions)
    elif isinstance(action, np.ndarray | np.integer):
        action = np.clip(action, -1 if jnp.issubdtype(action.dtype, jnp.signedinteger) else 0, num_actions)
    return jnp.asarray(action, dtype=jnp.int32)
