"""Many Quarto games side by side: :class:`VectorQuarto`, the batched self-play API, and :class:`GameBatch`,
the engine of ``quarto train``.

# ``VectorQuarto``: ``quarto_v1`` for thousands of games at once

| Creation     | ``VectorQuarto(num_envs, observation="tactical", seed=None, threads=1, **flags)``        |
|--------------|------------------------------------------------------------------------------------------|
| Seats        | ``0`` (``player_0``) and ``1`` (``player_1``), both exposed: the caller plays both       |
| Actions      | ``int`` array ``(num_envs,)``: 0-15, and 16 ("Quarto!") with ``declaration=True``        |
| Observations | ``int8`` ``(num_envs, channels, 16)``: quarto_v1's planes (``None``: no planes)          |
| Masks        | ``info["action_mask"]``: ``int8`` ``(num_envs, num_actions)``, of the seat to act        |
| Seat to act  | ``info["current_player"]``: ``int8`` ``(num_envs,)``, 0 or 1                             |
| Rewards      | ``float32`` ``(num_envs, 2)``: column ``s`` is seat ``s``'s                              |
| Terminated   | ``bool`` ``(num_envs,)``; ``truncated`` is all ``False`` (a game ends within 65 actions) |
| Auto-reset   | in the same step (Gymnasium's ``AutoresetMode.SAME_STEP``, as pgx and EnvPool)           |

It plays the games of :mod:`quarto_env.env` -- the same rules, variant flags, observation planes, masks and
rewards -- for ``num_envs`` games at once, with numpy arrays in and out and no Python per game: each
:meth:`~VectorQuarto.step` is **one compiled call** that checks every action, plays it, rewards both seats,
starts a new game wherever one ended, and writes the masks and planes. It is the API for writing one's own
self-play algorithm: one network can play both seats (Quarto is impartial, so both see the same planes), or two
networks can play each other, each acting where ``info["current_player"]`` is its seat.

## Turns and actions

As in ``quarto_v1``: the first action of a game is a give; then each player **places** the piece it was given
(action = a square, ``4 * row + col``) and **gives** one (action = a piece), so the same seat acts twice in a
row -- read ``info["current_player"]``, never assume alternation. ``actions[i]`` must be legal in env ``i``:
``info["action_mask"][i]`` shows which are (the empty squares, the pieces left, and the declaration at every
decision of the declaration variant, except right after an ignored false one).

## Both seats

Seat ``s`` is ``player_s``. ``info["current_player"][i]`` is the seat to act in env ``i``, and ``rewards[i, s]``
what seat ``s`` got from the step, whichever seat acted: a game's result comes to both seats in the step that
ends it -- also to the seat that did not act (its last action was a step or more earlier). A learner that keeps
each seat's transitions adds ``rewards[i, s]`` to seat ``s``'s latest one. Self-play with one network feeds it
every row; two networks (or a learner and a frozen opponent) act each on its own rows::

    mine = info["current_player"] == learner_seat
    actions = np.where(mine, learner(obs, info["action_mask"]), opponent(obs, info["action_mask"]))

## Observations

``observation=`` takes every kind of ``quarto_v1`` -- ``raw`` (17 channels), ``tactical`` (19, the default),
``lookahead`` (21), ``parity`` (23), ``tempo`` (27); see :mod:`quarto_env.observation` -- and the planes are
exactly the env's for the same position (the same kernel writes them). ``observation=None`` writes no planes at
all, for an agent that reads the positions themselves (:meth:`~VectorQuarto.state`, :attr:`VectorQuarto.games`):
the fastest.

Each step's planes are the caller's to keep: a later step never writes into an array the caller still holds
(or a view or tensor of it). Arrays it has let go of are used again (:class:`RecycledArrays`), so a loop that
keeps the last step's outputs pays no fresh memory each step.

## Rewards

``rewards[i]`` is what the step gave each seat in env ``i``: ``+1`` to the winner and ``-1`` to the loser when
the game ends with a win (whoever acted), ``0`` to both at a draw and while the game goes on. In the
declaration variant with ``false_declaration="penalty"``, a declaration with nothing to claim gives its seat
``false_declaration_penalty`` (default -0.1) and the game goes on, the same seat to act; it may not declare
again before its next placement or give (the mask says so). With ``false_declaration="lose"`` (the default) it
loses: -1 for it, +1 for the other.

## Auto-reset

A game that ends is replaced in the same step: for the rows where ``terminated`` is ``True``, ``rewards`` and
``terminated`` are the finished game's, while the returned observations, ``info["action_mask"]`` and
``info["current_player"]`` are already the new game's (its opening: nothing on the board, a give to make).
The finished game's last planes are in ``info["final_observation"]`` (the rows of the other envs are zeros;
absent with ``observation=None``), an array that is read-only, as the step keeps its zeros: it clears only the rows
it wrote when it next uses the array. So a learner never steps a finished game: it bootstraps nothing across
``terminated``, and the next action of that row is the new game's first give.

## Seeding and who gives first

Each env draws who gives first in each of its games (``first_player="random"``, as ``quarto_v1`` draws it at
each reset) from its own random stream; ``seed`` seeds all the streams (``numpy.random.SeedSequence``), so the
same seed and the same actions give the same games, and a different seed other first players. ``reset(seed)``
restarts the streams; ``reset()`` goes on drawing from where they are, and ``VectorQuarto(n, seed=s).reset()``
is ``VectorQuarto(n).reset(seed=s)``. ``first_player=0`` or ``1`` (or ``"player_0"``, ``"player_1"``) fixes the
seat that gives first in every game instead. In the rules core's terms (:meth:`~VectorQuarto.state`),
``first_seats[i]`` is the seat playing as player 0 in env ``i``.

## Variant flags and errors

Every rules flag of ``quarto_v1`` -- ``attributes``, ``squares``, ``declaration``, ``false_declaration``,
``false_declaration_penalty``, ``first_player`` -- with the same values, defaults and checks; ``time_limit``,
``render_mode`` and ``clock`` belong to the single-game env. A bad value, an unknown flag or observation kind
raises an error that names the allowed values. :meth:`~VectorQuarto.step` refuses actions of another shape
than ``(num_envs,)`` or of a non-integer dtype, and an illegal action raises
:class:`~quarto_env.core.IllegalActionError` (a ``ValueError``) naming the envs and their actions, before any
game has changed.

## Threads

``threads=n`` plays each step's envs in ``n`` shares at once, on numba's parallel loop (``prange``) and
its threading layer: a machine's cores work on one batch (``quarto bench vector --threads`` measures it). The
outputs are the same bit for bit as with ``threads=1`` (each env's rows are its share's alone, and each env
draws from its own stream); only the time changes, and it pays where a step is long, with planes such as
``tempo`` at a thousand envs. Each share checks its own actions first (a step with an illegal one still changes
nothing), then plays them: every thread works on the same envs step after step, whose rows stay in its core's
cache. :class:`RandomLegalActions` takes ``threads`` too, with the same shares. ``threads`` above the machine's
cores (``NUMBA_NUM_THREADS``) only cuts the batch finer; ``reset`` stays on one thread.

Two things come from numba's threading layer (see numba's "Threading layers" page). Its GNU OpenMP layer, the one
numba picks where TBB is not installed, does not survive a ``fork``: a process forked after stepping on threads
gets :class:`~quarto_env.errors.ThreadsError` from a step on threads instead of being ended (start such
processes with ``spawn`` or ``forkserver``, or step with ``threads=1`` there). And its fallback ``workqueue``
layer cannot run two parallel loops at once: step envs on threads from one Python thread at a time there.

## Example: random self-play, both seats

```python
import numpy as np
from quarto_env import VectorQuarto

envs = VectorQuarto(1024, observation="parity", seed=0)
obs, info = envs.reset()
rng = np.random.default_rng(0)
scores = np.zeros(2)  # per seat: player_0, player_1
for _ in range(1000):
    mask = info["action_mask"]  # the legal actions of the seat to act, info["current_player"]
    actions = np.argmax(rng.random(mask.shape) * mask, axis=1)  # a network would read obs here
    obs, rewards, terminated, truncated, info = envs.step(actions)
    scores += rewards[terminated].sum(axis=0)  # +1 / -1 per finished game, 0 for a draw
```

## Changes

* ``threads``: a step's envs checked and played in shares on numba's threads, the outputs unchanged; the same for
  ``RandomLegalActions``' draws.
* ``info["final_observation"]`` is read-only (its values are unchanged): the step keeps the array's other rows
  zero by clearing only the rows it wrote there, and a caller's write would break that. Copy it to change it.

# ``RandomLegalActions``: uniformly random legal actions, compiled

``RandomLegalActions(num_envs, seed=None, threads=1)`` draws one uniformly random legal action per env from a mask,
in one compiled call: ``actions = sample(info["action_mask"])`` (with ``threads``, in shares at once, as
:class:`VectorQuarto`'s; the same draws). Each env has its own random stream (SplitMix64, seeded
by ``numpy.random.SeedSequence(seed)``), so the same seed gives the same draws. It is the random player of a
batched loop, or a baseline's exploration. numpy's ``np.argmax(rng.random(mask.shape) * mask, axis=1)`` costs
more than a whole :meth:`VectorQuarto.step` without planes at a thousand envs; this, about a third of such a step
(``quarto bench vector`` measures both). The mask is any
``(num_envs, num_actions)`` array of 0/1 (``bool`` or integers, at most 64 actions); a row without a legal
action raises a ``ValueError`` naming it.

# ``GameBatch``: the training engine

:class:`GameBatch` holds ``N`` games as one ``(N, 8)`` array, a row of the fields of
:class:`quarto_env.core.State` per game (:func:`quarto_env.core.position_array`), and applies actions, computes
legal-action masks and writes observation planes for any subset of the games in one call each; it neither
rewards nor resets by itself (self-play training does that, with its opponents in the loop:
:mod:`experiments.training.selfplay`). :meth:`GameBatch.observe` writes the planes of any kind with the same
kernel as the env, so training sees exactly what ``quarto_env.env(observation=kind)`` shows.

All the kernels call the rules core's ``register_jitable`` functions (``apply_action``, ``legal_mask``, ...) and
the planes of :mod:`quarto_env.observation`, so the batched games follow exactly the rules of
:func:`quarto_env.core.step`. They allocate nothing and are compiled without reference counting
(:func:`quarto_env.kernel.kernel`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numba
import numpy as np
from numba import prange
from numba.extending import register_jitable

from quarto_env.checks import checked_seed
from quarto_env.core import (
    DECLARE,
    FIELD_AVAILABLE,
    FIELD_CLAIMABLE,
    FIELD_HAND,
    FIELD_LANES,
    FIELD_OCCUPIED,
    FIELD_OVER,
    FIELD_TO_MOVE,
    FIELD_WINNER,
    INITIAL_STATE,
    NO_WINNER,
    NUM_FIELDS,
    IllegalActionError,
    State,
    Variant,
    compiled_fields,
    count_bits,
    legal_mask,
    position_fields,
    set_bit_number,
    state_of_row,
    step_position,
    useful_mask,
)
from quarto_env.errors import ActionTypeError, CallOrderError, QuartoTypeError, QuartoValueError, ThreadsError
from quarto_env.fast import next_word, random_below
from quarto_env.flags import RuleFlags
from quarto_env.kernel import kernel
from quarto_env.observation import DEFAULT_OBSERVATION, ObservationKind, observation_kind, write_plane_words

NO_OBSERVATION = -1
"""The observation level the kernels take for ``observation=None``: no planes."""
MAX_ENVS_NAMED = 8
"""The most envs an illegal-action error lists."""
MAX_SAMPLED_ACTIONS = 64
"""The most actions :class:`RandomLegalActions` draws from: one bit each of a 64-bit word."""
FALLBACK_MEMORY_BYTES = 2**34
"""The memory assumed where the system does not say how much it has (``os.sysconf`` is POSIX only): 16 GiB,
a small machine's, so that the bound it sets errs towards refusing early rather than swapping."""


def game_bytes(kind: ObservationKind | None, num_actions: int) -> int:
    """Bytes of :class:`VectorQuarto`'s arrays per game with planes of ``kind``: the position row, first seat,
    false-declaration mark and random stream it keeps, the arrays of planes and final planes it recycles
    (:attr:`RecycledArrays.KEPT` of each), and twice the rest of what a step allocates (rewards, flags, mask,
    current player and int64 actions), since the caller still holds the previous step's outputs while the next
    one is made."""
    planes = 0 if kind is None else kind.shape[0] * kind.shape[1]
    kept = NUM_FIELDS * 8 + 1 + 1 + 8 + RecycledArrays.KEPT * (2 * planes + 1)  # + the final planes' written rows
    per_step = 2 * 4 + 1 + num_actions + 1 + 1 + 8 + 1
    return kept + 2 * per_step


def memory_bytes() -> int:
    """This machine's physical memory in bytes, or :data:`FALLBACK_MEMORY_BYTES` where the system does not
    say. Physical, not currently free: the bound it sets is the same from one call to the next."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return FALLBACK_MEMORY_BYTES
    return pages * page_size if pages > 0 and page_size > 0 else FALLBACK_MEMORY_BYTES


def checked_num_envs(value: object, bytes_per_game: int, owner: str, purpose: str = "") -> int:
    """``value`` as a count of games of ``bytes_per_game`` each, checked before anything is allocated: an
    integer >= 1 whose games fit in this machine's memory (:func:`memory_bytes`), so that a huge count fails at
    once in one line stating the bound and the bytes per game instead of in numpy's ``MemoryError`` -- or
    worse, swapping -- after gigabytes were taken; :class:`~quarto_env.errors.QuartoValueError` otherwise."""
    memory = memory_bytes()
    bound = max(1, memory // bytes_per_game)
    allowed = f"an integer >= 1 and <= {bound:,}"
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise QuartoValueError(f"{owner}: num_envs must be {allowed}, got {value!r}")
    if value > bound:
        raise QuartoValueError(
            f"{owner}: num_envs must be {allowed}, got {value:,}: each game takes {bytes_per_game:,} bytes of "
            f"arrays{purpose}, and {bound:,} games fill this machine's {memory / 2**30:.1f} GiB of memory"
        )
    return int(value)


class VectorQuarto:
    """``num_envs`` games of ``quarto_v1`` stepped together by one compiled call, both seats exposed; see the
    module docstring for the whole page."""

    def __init__(
        self,
        num_envs: int,
        *,
        observation: str | ObservationKind | None = DEFAULT_OBSERVATION,
        seed: int | None = None,
        threads: int = 1,
        **variant_flags: Any,
    ) -> None:
        self.flags = RuleFlags.of(variant_flags, "VectorQuarto")
        self.threads = checked_threads(threads, "VectorQuarto")
        """The threads that play a step's envs, each its share (see the module docstring)."""
        self.variant = self.flags.variant
        self.false_declaration_penalty = self.flags.penalty
        self.first_seat = self.flags.first_seat
        """The seat that gives first in every game, or ``None``: drawn for each game from the seed."""
        self.observation_kind = observation_kind(observation, optional=True)
        self.num_actions = self.variant.num_actions
        kind = self.observation_kind
        purpose = f" with observation={None if kind is None else kind.name!r}"
        bytes_per_game = game_bytes(kind, self.num_actions)
        self.num_envs = checked_num_envs(num_envs, bytes_per_game, "VectorQuarto", purpose)
        self.games = GameBatch(self.variant, self.num_envs)
        """The positions, a row per env (:attr:`GameBatch.positions`); read them, never write them."""
        self.first_seats = np.zeros(self.num_envs, dtype=np.int8)
        """The seat (0 or 1) that gave first in each env's game: the rules core's player 0 there."""
        self.declared_falsely = np.zeros(self.num_envs, dtype=np.bool_)
        """Penalty policy: the env's last action was a false declaration, which may not be repeated at once."""
        self._streams = np.zeros(self.num_envs, dtype=np.uint64)
        self._seed(seed)
        self._started = False
        level = NO_OBSERVATION if self.observation_kind is None else self.observation_kind.level
        self.step_settings = (level, self.false_declaration_penalty, -1 if self.first_seat is None else self.first_seat)
        """What the step kernels read besides the arrays: ``(level, penalty, first_seat)``, the planes' level
        (:attr:`ObservationKind.level`, or :data:`NO_OBSERVATION`), whether a false declaration costs a penalty,
        and the seat that gives first (-1: drawn for each game)."""
        self._no_planes = np.zeros((0, 0, 0), dtype=np.int8)
        self._plane_arrays = RecycledArrays()
        self._final_planes = FinalPlanes()
        self._no_rows = np.zeros(0, dtype=np.bool_)
        self.shares = EnvShares(self.num_envs, self.threads)
        """How each step's envs are shared among the threads (:class:`EnvShares`)."""

    @property
    def observation_shape(self) -> tuple[int, int] | None:
        """The shape of one env's planes, ``(channels, 16)``; ``None`` with ``observation=None``."""
        return None if self.observation_kind is None else self.observation_kind.shape

    def state(self, env: int) -> State:
        """Env ``env``'s game as a rules-core :class:`~quarto_env.core.State`, whose player 0 is the seat
        ``first_seats[env]``."""
        return self.games.state(env)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray | None, dict[str, np.ndarray]]:
        """Start a new game in every env; returns ``(observations, info)`` (``action_mask``, ``current_player``).
        ``seed`` restarts the draws of who gives first; without it they go on (see the module docstring)."""
        if seed is not None:
            self._seed(seed)
        planes = self._planes()
        masks = np.empty((self.num_envs, self.num_actions), dtype=np.int8)
        current_player = np.empty(self.num_envs, dtype=np.int8)
        _reset_games(self.game_arrays(), self.step_settings, self.variant.compiled, (planes, masks, current_player))
        self._started = True
        observations = None if self.observation_kind is None else planes
        return observations, {"action_mask": masks, "current_player": current_player}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Play ``actions[i]`` in env ``i`` for every env at once; returns ``(observations, rewards, terminated,
        truncated, info)`` as the module docstring describes. An illegal action raises
        :class:`~quarto_env.core.IllegalActionError` naming the envs, and no game changes."""
        if not self._started:
            raise CallOrderError("VectorQuarto.step() before reset(): call reset() first")
        actions = self.checked_actions(actions)
        planes = self._planes()
        final_planes, written = (
            (self._no_planes, self._no_rows)
            if self.observation_kind is None
            else self._final_planes.take((self.num_envs, *self.observation_kind.shape))
        )
        rewards = np.empty((self.num_envs, 2), dtype=np.float32)
        terminated = np.empty(self.num_envs, dtype=np.bool_)
        masks = np.empty((self.num_envs, self.num_actions), dtype=np.int8)
        current_player = np.empty(self.num_envs, dtype=np.int8)
        illegal = np.empty(self.num_envs, dtype=np.bool_)
        outputs = (planes, final_planes, written, rewards, terminated, masks, current_player, illegal)
        # As int64, an unsigned action of 2**63 or more turns negative: out of range, as it should be.
        arguments = (actions.astype(np.int64), self.game_arrays(), self.step_settings, self.variant.compiled, outputs)
        if self.shares.play(*arguments):
            raise IllegalActionError(self._illegal_message(actions, illegal))
        info = {"action_mask": masks, "current_player": current_player}
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        if self.observation_kind is None:
            return None, rewards, terminated, truncated, info
        info["final_observation"] = self._final_planes.hand_out(final_planes, terminated)
        return planes, rewards, terminated, truncated, info

    def _seed(self, seed: int | None) -> None:
        self._streams[:] = np.random.SeedSequence(checked_seed(seed)).generate_state(self.num_envs, dtype=np.uint64)

    def game_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The arrays the compiled kernels play on, a row per env: the positions, the seat that gave first, the
        false-declaration marks and the random streams. Kernels over a subset of the games (the batched
        single-agent env's) read and write them; nothing else should."""
        return self.games.positions, self.first_seats, self.declared_falsely, self._streams

    def _planes(self) -> np.ndarray:
        """An array for the planes of a step or reset, to be written in full: one the caller no longer holds, or a
        new one (:class:`RecycledArrays`)."""
        if self.observation_kind is None:
            return self._no_planes
        return self._plane_arrays.empty((self.num_envs, *self.observation_kind.shape), np.int8)

    def checked_actions(self, actions: object) -> np.ndarray:
        """``actions`` as an integer array of one action per env; ``TypeError``/``ValueError`` otherwise."""
        array = np.asarray(actions)
        if array.dtype.kind not in "iu":
            raise ActionTypeError(
                f"actions must be integers, one per env (a numpy integer array); got dtype {array.dtype}"
            )
        if array.shape != (self.num_envs,):
            raise IllegalActionError(
                f"actions must have shape ({self.num_envs},), one per env; got shape {array.shape}"
            )
        return array

    def _illegal_message(self, actions: np.ndarray, illegal: np.ndarray) -> str:
        envs = np.flatnonzero(illegal)
        named = envs[:MAX_ENVS_NAMED]
        more = f" and {len(envs) - len(named)} more" if len(envs) > len(named) else ""
        first = int(named[0])
        legal = np.flatnonzero(self.games.action_masks(np.array([first]))[0]).tolist()
        if self.declared_falsely[first]:
            legal.remove(DECLARE)
        return (
            f"illegal actions in envs {named.tolist()}{more}: actions {actions[named].tolist()}; "
            f"env {first} allows {legal} (info['action_mask']); no game was played"
        )


def checked_threads(value: object, owner: str) -> int:
    """``value`` as a count of threads: an integer >= 1; :class:`~quarto_env.errors.QuartoValueError` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        cores = os.cpu_count() or 1
        raise QuartoValueError(
            f"{owner}: threads must be an integer >= 1 (this machine has {cores} cores), got {value!r}"
        )
    return int(value)


class EnvShares:
    """How a batch's envs are shared among threads: in one compiled call, or, with ``threads`` > 1, cut into
    ``threads`` consecutive shares that numba's parallel loop (``prange``, on numba's threading layer) runs at
    once -- :meth:`VectorQuarto.step`'s checks and plays, the Gymnasium vector env's planes, the draws of
    :class:`RandomLegalActions`. Each env's rows are written by its share alone, and each env draws from its own
    random stream, so the outputs are the same bit for bit whatever the count of threads.

    A step's shares check their own actions rather than one thread checking all: a check reads the positions,
    and those of another thread's share sit in its core's cache (figures in docs/results.md)."""

    def __init__(self, num_envs: int, threads: int) -> None:
        self.bounds = np.linspace(0, num_envs, min(threads, num_envs) + 1).astype(np.int64)
        """The first env of each share, as equal as can be (fewer shares than threads when there are fewer envs),
        and ``num_envs`` last: share ``k`` is envs ``bounds[k]`` to ``bounds[k + 1] - 1``."""
        self.bounds.flags.writeable = False
        self._illegal = np.zeros(len(self.bounds) - 1, dtype=np.int64)

    def on_threads(self) -> bool:
        """Whether there is more than one share; if so, and this process cannot start threads,
        :class:`~quarto_env.errors.ThreadsError` (:func:`refuse_forked_threads`)."""
        if len(self.bounds) <= 2:
            return False
        refuse_forked_threads()
        return True

    def play(self, actions: np.ndarray, *arguments: Any) -> int:
        """Check and play a step (the arguments of ``_step_games``); returns the number of illegal actions, and
        then nothing has changed."""
        if not self.on_threads():
            return int(_step_games(actions, *arguments))
        games, _, rules, outputs = arguments
        _check_shares(self.bounds, self._illegal, actions, games, rules, outputs)
        num_illegal = int(self._illegal.sum())
        if num_illegal == 0:
            _play_shares(self.bounds, actions, *arguments)
        return num_illegal

    def observe(self, games: tuple[np.ndarray, ...], level: int, rules: tuple, outputs: tuple) -> None:
        """Every env's legal actions, seat to act and planes (``outputs``: planes, masks, current player): for the
        envs that step their games with kernels of their own (the Gymnasium vector env's)."""
        if self.on_threads():
            _observe_shares(self.bounds, games, level, rules, *outputs)
        else:
            _observe_envs(games, level, rules, *outputs)


_threads_started_by = [0]
"""The id of the process that first played a step on threads (0: none has), copied into a forked child."""


def refuse_forked_threads() -> None:
    """Raise :class:`~quarto_env.errors.ThreadsError` in a process forked from one that had played steps on
    threads, where numba's OpenMP layer would end the process (GNU OpenMP does not survive a ``fork``); else note
    that this process plays on threads."""
    if _threads_started_by[0] == 0:
        _threads_started_by[0] = os.getpid()
    elif _threads_started_by[0] != os.getpid() and numba.threading_layer() == "omp":
        raise ThreadsError(
            "threads > 1 (VectorQuarto, RandomLegalActions): this process was forked from one that ran them on "
            "threads, and numba's OpenMP layer cannot start threads in it; start processes with 'spawn' or "
            "'forkserver', or use threads=1"
        )


class RecycledArrays:
    """Arrays of one shape handed out as new, recycled once the caller has let go of them.

    A step's planes are arrays the caller may keep, so each step hands out others. But a fresh array of planes per
    step costs more than writing it: at a thousand envs each is a few hundred kilobytes, which glibc's ``malloc``
    maps from the system, and a caller that holds the last step's planes while the next is made (as every loop
    ``obs, ... = envs.step(...)`` does) makes it give the memory back and fault it in again page by page, step
    after step (docs/results.md has the figures). :meth:`empty` therefore hands out again an array of its last
    few that nothing else refers to -- its reference count says so: no variable, container, view or tensor of the
    caller holds it -- else a new one. Either way the caller gets an array no one else sees, and writes it in full.
    """

    KEPT = 3
    """The arrays kept for reuse: the caller's current ones, the last step's it still holds, and one to write."""

    def __init__(self) -> None:
        self._arrays: list[np.ndarray] = []

    @property
    def kept(self) -> tuple[np.ndarray, ...]:
        """The arrays kept for reuse, the newest first."""
        return tuple(self._arrays)

    def empty(self, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        """An array of ``shape`` and ``dtype``, its contents undefined (as ``np.empty``), that no one else holds."""
        for index in range(len(self._arrays)):
            if _references(self._arrays, index) <= _UNHELD:
                array = self._arrays[index]
                if array.shape == shape and array.dtype == dtype:
                    return array
        array = np.empty(shape, dtype)
        self._arrays = [array, *self._arrays[: self.KEPT - 1]]
        return array


class FinalPlanes:
    """The arrays of a step's final planes (``info["final_observation"]``): recycled (:class:`RecycledArrays`), and
    zero but in the rows of the games that ended in the step that wrote them.

    Zeroing every other row at every step cost as much as writing the planes of the step (docs/results.md). So each
    array keeps the rows its last step wrote, and the next step that takes it clears those alone. That needs the
    rows left zero to stay so while the caller holds the array: it is handed out read-only."""

    def __init__(self) -> None:
        self._arrays = RecycledArrays()
        self._written: dict[int, np.ndarray] = {}
        """The rows holding planes, by the ``id`` of the array, for the arrays :attr:`_arrays` keeps (their ids are
        those of live arrays, so no new array takes one)."""

    def take(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """A writable ``int8`` array of ``shape`` that no one else holds, and a flag per row: whether the row may
        hold planes (every row of a new array, whose contents are undefined)."""
        array = self._arrays.empty(shape, np.int8)
        kept = {id(other) for other in self._arrays.kept}
        self._written = {key: rows for key, rows in self._written.items() if key in kept}
        array.flags.writeable = True  # it owns its memory, so numpy allows it
        written = self._written.get(id(array))
        return array, np.ones(shape[0], np.bool_) if written is None else written

    def hand_out(self, array: np.ndarray, written: np.ndarray) -> np.ndarray:
        """``array``, read-only, once a step has written planes in the rows ``written`` (a flag per row) and zeros in
        every other."""
        self._written[id(array)] = written.copy()
        array.flags.writeable = False
        return array


def _references(arrays: list[np.ndarray], index: int) -> int:
    """The references to ``arrays[index]``, counted as :meth:`RecycledArrays.empty` counts them."""
    return sys.getrefcount(arrays[index])


_UNHELD = _references([np.empty(0)], 0)
"""The count of :func:`_references` for an array that only its list holds, measured rather than assumed: what
``sys.getrefcount`` adds for its own argument depends on the Python version."""


class RandomLegalActions:
    """A uniformly random legal action per env, drawn by one compiled call from each env's own random stream;
    see the module docstring."""

    def __init__(self, num_envs: int, seed: int | None = None, threads: int = 1) -> None:
        self.num_envs = checked_num_envs(num_envs, 2 * 8, "RandomLegalActions")  # a random stream, an action
        self.threads = checked_threads(threads, "RandomLegalActions")
        """The threads that draw, each for its share of the envs (as :class:`VectorQuarto`'s)."""
        self._streams = np.random.SeedSequence(checked_seed(seed)).generate_state(self.num_envs, dtype=np.uint64)
        self._actions = np.empty(self.num_envs, dtype=np.int64)
        self._shares = EnvShares(self.num_envs, self.threads)
        self._empty_rows = np.zeros(len(self._shares.bounds) - 1, dtype=np.int64)

    def __call__(self, action_mask: np.ndarray) -> np.ndarray:
        """One legal action per row of ``action_mask`` (``(num_envs, num_actions)``, non-zero where legal), as a
        new ``int64`` array of shape ``(num_envs,)``."""
        masks = self._checked_masks(action_mask)
        if not self._shares.on_threads():
            empty_row = _random_legal_actions(masks, self._streams, self._actions)
        else:
            _draw_shares(self._shares.bounds, self._empty_rows, masks, self._streams, self._actions)
            empty_rows = self._empty_rows[self._empty_rows >= 0]  # each share's first, in order
            empty_row = empty_rows[0] if len(empty_rows) else -1
        if empty_row >= 0:
            raise QuartoValueError(f"action_mask row {empty_row} has no legal action: nothing to draw from")
        return self._actions.copy()

    def _checked_masks(self, action_mask: np.ndarray) -> np.ndarray:
        masks = np.asarray(action_mask)
        if masks.dtype.kind not in "biu":
            raise QuartoTypeError(f"action_mask must be bool or integers (0/1); got dtype {masks.dtype}")
        if masks.ndim != 2 or masks.shape[0] != self.num_envs or not 1 <= masks.shape[1] <= MAX_SAMPLED_ACTIONS:
            raise QuartoValueError(
                f"action_mask must have shape ({self.num_envs}, num_actions) with 1-{MAX_SAMPLED_ACTIONS} actions; "
                f"got shape {masks.shape}"
            )
        return masks


class GameBatch:
    """``num_games`` independent games of one rule variant, as one array (a row per game).

    :attr:`positions` is the ``(num_games, NUM_FIELDS)`` array of :func:`quarto_env.core.position_array`; the
    field properties (``lanes``, ``hand``, ``winner``, ``over``, ...) are its columns. Every method takes
    ``games``, an integer array of game indices, and acts on those games only.
    """

    def __init__(self, variant: Variant, num_games: int) -> None:
        if num_games < 1:
            raise QuartoValueError(f"num_games must be >= 1, got {num_games}")
        self.variant = variant
        self.num_games = num_games
        self.num_actions = variant.num_actions
        self.positions = np.zeros((num_games, NUM_FIELDS), dtype=np.int64)
        self.reset(self.all_games)

    lanes = property(lambda self: self.positions[:, FIELD_LANES])
    occupied = property(lambda self: self.positions[:, FIELD_OCCUPIED])
    available = property(lambda self: self.positions[:, FIELD_AVAILABLE])
    hand = property(lambda self: self.positions[:, FIELD_HAND])
    to_move = property(lambda self: self.positions[:, FIELD_TO_MOVE])
    claimable = property(lambda self: self.positions[:, FIELD_CLAIMABLE])
    winner = property(lambda self: self.positions[:, FIELD_WINNER])
    over = property(lambda self: self.positions[:, FIELD_OVER] != 0, doc="Whether each game has ended (a copy).")

    @property
    def all_games(self) -> np.ndarray:
        """The indices of every game."""
        return np.arange(self.num_games)

    def reset(self, games: np.ndarray) -> None:
        """Put ``games`` back to the opening position."""
        self.set_state(games, State())

    def set_state(self, games: np.ndarray, state: State) -> None:
        """Put ``games`` in ``state``."""
        self.positions[games] = compiled_fields(state)  # the array is signed 64-bit, as compiled_fields' lanes

    def state(self, game: int) -> State:
        """Game ``game`` as a rules-core :class:`State`."""
        return state_of_row(self.positions[game])

    @classmethod
    def from_states(cls, variant: Variant, states: list[State]) -> GameBatch:
        """A batch holding ``states``, game ``i`` in ``states[i]``."""
        batch = cls(variant, len(states))
        for game, state in enumerate(states):
            batch.set_state(np.array([game]), state)
        return batch

    def action_masks(self, games: np.ndarray, false_declarations: bool = True) -> np.ndarray:
        """Legal actions of ``games`` as a boolean array of shape ``(len(games), num_actions)``.

        ``false_declarations=False`` leaves the declaration out where nothing can be claimed: it is legal, but
        it either loses or changes nothing, so learners are not offered it (see :mod:`experiments.training.selfplay`).
        """
        masks = np.zeros((len(games), self.num_actions), dtype=np.bool_)
        _action_masks(masks, games, self.positions, self.variant.declaration, false_declarations)
        return masks

    def step(self, games: np.ndarray, actions: np.ndarray) -> None:
        """Apply ``actions[i]`` to game ``games[i]``; raises :class:`IllegalActionError` naming an illegal one."""
        games = np.asarray(games, dtype=np.int64)
        actions = np.asarray(actions, dtype=np.int64)
        masks = self.action_masks(games)
        in_range = (actions >= 0) & (actions < self.num_actions)
        legal = in_range & masks[np.arange(len(games)), np.where(in_range, actions, 0)]
        if not legal.all():
            i = int(np.argmin(legal))
            allowed = np.flatnonzero(masks[i]).tolist()
            raise IllegalActionError(f"game {games[i]}: action {actions[i]} is not legal; legal actions: {allowed}")
        _apply_actions(games, actions, self.positions, self.variant.compiled)

    def observe(self, games: np.ndarray, kind: ObservationKind) -> np.ndarray:
        """Observation planes of ``kind`` (:func:`quarto_env.observation.observation_kind`) for ``games``: ``int8``
        of shape ``(len(games), channels, 16)``."""
        out = np.zeros((len(games), *kind.shape), dtype=np.int8)
        _observe_games(out, kind.level, games, self.positions, self.variant.group_array, self.variant.counted)
        return out

    def returns(self, games: np.ndarray, players: np.ndarray) -> np.ndarray:
        """Final reward of ``players[i]`` in game ``games[i]``: +1 win, -1 loss, 0 draw or still playing."""
        winner = self.winner[games]
        return np.where(winner == NO_WINNER, 0.0, np.where(winner == players, 1.0, -1.0)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------------
# GameBatch's kernels
# ---------------------------------------------------------------------------------------------------------
@kernel
def _action_masks(masks, games, positions, declaration, false_declarations):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        _, occupied, available, hand, _, claimable, _, over = position_fields(positions[games[i]])
        if false_declarations:
            bits = legal_mask(occupied, available, hand, over, declaration)
        else:
            bits = useful_mask(occupied, available, hand, claimable, over, declaration)
        for a in range(masks.shape[1]):
            masks[i, a] = bits >> a & 1


@kernel
def _apply_actions(games, actions, positions, rules):  # type: ignore[no-untyped-def]
    for i in range(len(games)):
        step_position(positions[games[i]], actions[i], rules)


@kernel
def _observe_games(out, level, games, positions, groups, counted):  # type: ignore[no-untyped-def]
    words = out.view(np.uint64)
    for i in range(len(games)):
        write_plane_words(words[i], level, *position_fields(positions[games[i]]), groups, counted)


# ---------------------------------------------------------------------------------------------------------
# VectorQuarto's kernels: one call each for reset and step, over every env
# ---------------------------------------------------------------------------------------------------------
INITIAL_FIELDS = np.array(compiled_fields(INITIAL_STATE), dtype=np.int64)
INITIAL_FIELDS.flags.writeable = False


@kernel
def _step_games(actions, games, settings, rules, outputs):  # type: ignore[no-untyped-def]
    """:meth:`VectorQuarto.step` on one thread: check every action; then play each, reward both seats, start a
    new game where one ended, observe. Returns the number of illegal actions (marked in ``outputs[-1]``): if
    there is one, nothing has changed."""
    num_illegal = check_actions(0, len(actions), actions, games, rules, outputs)
    if num_illegal == 0:
        play_envs(0, len(actions), actions, games, settings, rules, outputs)
    return num_illegal


@kernel(parallel=True)
def _check_shares(bounds, illegal_counts, actions, games, rules, outputs):  # type: ignore[no-untyped-def]
    """:func:`check_actions` for each share of the envs (``bounds``, :class:`EnvShares`), the shares at once, each
    count of illegal actions into ``illegal_counts``."""
    for share in prange(len(bounds) - 1):
        illegal_counts[share] = check_actions(bounds[share], bounds[share + 1], actions, games, rules, outputs)


@kernel(parallel=True)
def _play_shares(bounds, actions, games, settings, rules, outputs):  # type: ignore[no-untyped-def]
    """:func:`play_envs` for each share of the envs (``bounds``, :class:`EnvShares`), the shares at once."""
    for share in prange(len(bounds) - 1):
        play_envs(bounds[share], bounds[share + 1], actions, games, settings, rules, outputs)


@kernel
def _observe_envs(games, level, rules, planes, masks, current_player):  # type: ignore[no-untyped-def]
    observe_envs(0, len(games[0]), games, level, rules, planes, masks, current_player)


@kernel(parallel=True)
def _observe_shares(bounds, games, level, rules, planes, masks, current_player):  # type: ignore[no-untyped-def]
    """:func:`observe_envs` for each share of the envs (``bounds``, :class:`EnvShares`), the shares at once."""
    for share in prange(len(bounds) - 1):
        observe_envs(bounds[share], bounds[share + 1], games, level, rules, planes, masks, current_player)


@register_jitable
def check_actions(first, last, actions, games, rules, outputs):  # type: ignore[no-untyped-def]
    """Mark in ``outputs[-1]`` which of envs ``first`` to ``last - 1`` have an illegal action; returns how many."""
    positions, _, declared_falsely, _ = games
    masks, illegal = outputs[5], outputs[-1]
    num_illegal = 0
    for i in range(first, last):
        action = actions[i]
        legal = legal_action_bits(positions[i], declared_falsely[i], rules[2])
        illegal[i] = action < 0 or action >= masks.shape[1] or not legal >> action & 1
        num_illegal += illegal[i]
    return num_illegal


@register_jitable
def play_envs(first, last, actions, games, settings, rules, outputs):  # type: ignore[no-untyped-def]
    """Play the checked actions of envs ``first`` to ``last - 1``, reward both seats, start a new game where one
    ended, observe. Each env's rows are written by this call alone: threads may share the envs out."""
    positions = games[0]
    level, penalty, fixed_first_seat = settings
    planes, final_planes, written, rewards, terminated, masks, current_player, _ = outputs
    final_words = final_planes.view(np.uint64)
    words = planes.view(np.uint64)
    for i in range(first, last):  # one pass, each env's row read once
        play_action(i, actions[i], games, penalty, rules, rewards, terminated)
        if terminated[i]:
            if level != NO_OBSERVATION:
                write_env_planes(final_words[i], level, positions[i], rules)
            start_game(i, games, fixed_first_seat)
        elif level != NO_OBSERVATION and written[i]:
            final_words[i] = 0  # the rows that held planes from the array's last step (FinalPlanes)
        observe_env(i, games, level, rules, words, masks, current_player)


@kernel
def _reset_games(games, settings, rules, outputs):  # type: ignore[no-untyped-def]
    """:meth:`VectorQuarto.reset`: a new game in every env, observed."""
    level, _, fixed_first_seat = settings
    planes, masks, current_player = outputs
    for i in range(len(masks)):
        start_game(i, games, fixed_first_seat)
    observe_envs(0, len(games[0]), games, level, rules, planes, masks, current_player)


# ---------------------------------------------------------------------------------------------------------
# The per-env building blocks of those kernels: numba functions over VectorQuarto's game arrays (``games``:
# positions, first seats, declared_falsely, random streams), public so that other compiled loops over the same
# arrays reuse them (quarto_env.vector_env plays a learner's and an opponent's rows with them).
# ---------------------------------------------------------------------------------------------------------
@register_jitable
def play_action(i, action, games, penalty, rules, rewards, terminated):  # type: ignore[no-untyped-def]
    """Play the legal ``action`` in env ``i`` and reward both seats: +1 and -1 at a win, the penalty for a false
    declaration that the game goes on after."""
    positions, first_seats, declared_falsely, _ = games
    row = positions[i]
    mover = first_seats[i] ^ row[FIELD_TO_MOVE]
    step_position(row, action, rules)
    over = row[FIELD_OVER] != 0
    terminated[i] = over
    declared_falsely[i] = action == DECLARE and not over  # only the penalty policy goes on after a declaration
    rewards[i, 0] = rewards[i, 1] = 0.0
    if declared_falsely[i]:
        rewards[i, mover] = penalty
    if over and row[FIELD_WINNER] != NO_WINNER:
        winner = first_seats[i] ^ row[FIELD_WINNER]
        rewards[i, winner] = 1.0
        rewards[i, 1 - winner] = -1.0


@register_jitable
def start_game(i, games, fixed_first_seat):  # type: ignore[no-untyped-def]
    positions, first_seats, declared_falsely, streams = games
    for field in range(NUM_FIELDS):
        positions[i, field] = INITIAL_FIELDS[field]
    declared_falsely[i] = False
    first_seats[i] = fixed_first_seat if fixed_first_seat >= 0 else _random_bit(streams, i)


@register_jitable
def observe_envs(first, last, games, level, rules, planes, masks, current_player):  # type: ignore[no-untyped-def]
    """The legal actions, seat to act and (unless ``level`` is ``NO_OBSERVATION``) planes of envs ``first`` to
    ``last - 1``."""
    words = planes.view(np.uint64)
    for i in range(first, last):
        observe_env(i, games, level, rules, words, masks, current_player)


@register_jitable
def observe_env(i, games, level, rules, words, masks, current_player):  # type: ignore[no-untyped-def]
    """Env ``i``'s legal actions, seat to act and (unless ``level`` is ``NO_OBSERVATION``) planes, into its rows of
    ``masks``, ``current_player`` and ``words`` (the planes seen as 64-bit words)."""
    positions, first_seats, declared_falsely, _ = games
    legal = legal_action_bits(positions[i], declared_falsely[i], rules[2])
    for action in range(masks.shape[1]):
        masks[i, action] = legal >> action & 1
    current_player[i] = first_seats[i] ^ positions[i, FIELD_TO_MOVE]
    if level != NO_OBSERVATION:
        write_env_planes(words[i], level, positions[i], rules)


@register_jitable
def write_env_planes(words, level, row, rules):  # type: ignore[no-untyped-def]
    """The planes of the position in ``row`` into ``words``, the word view of an env's planes (its row of
    ``planes.view(np.uint64)``), every one written."""
    write_plane_words(words, level, *position_fields(row), rules[0], rules[1])


@register_jitable
def legal_action_bits(row, declared_falsely, declaration):  # type: ignore[no-untyped-def]
    """The legal actions of the position in ``row``, less a declaration right after a false one."""
    _, occupied, available, hand, _, _, _, over = position_fields(row)
    legal = legal_mask(occupied, available, hand, over, declaration)
    return legal & ~(1 << DECLARE) if declared_falsely else legal


@register_jitable
def _random_bit(streams, i):  # type: ignore[no-untyped-def]
    """The next random bit of env ``i``'s stream: one stream per env (:func:`quarto_env.fast.next_word`), so that
    each env's draws depend on its own seed alone."""
    return next_word(streams, i) >> np.uint64(63)


# ---------------------------------------------------------------------------------------------------------
# RandomLegalActions' kernel
# ---------------------------------------------------------------------------------------------------------
@kernel
def _random_legal_actions(masks, streams, actions):  # type: ignore[no-untyped-def]
    """Write a uniformly random legal action of each row of ``masks`` to ``actions``; returns the first row
    without a legal action (then ``actions`` is partly written), or -1."""
    return draw_legal_actions(0, masks.shape[0], masks, streams, actions)


@kernel(parallel=True)
def _draw_shares(bounds, empty_rows, masks, streams, actions):  # type: ignore[no-untyped-def]
    """:func:`draw_legal_actions` for each share of the rows (``bounds``, :class:`EnvShares`), the shares at
    once, each one's first row without a legal action (or -1) into ``empty_rows``."""
    for share in prange(len(bounds) - 1):
        empty_rows[share] = draw_legal_actions(bounds[share], bounds[share + 1], masks, streams, actions)


@register_jitable
def draw_legal_actions(first, last, masks, streams, actions):  # type: ignore[no-untyped-def]
    """:func:`_random_legal_actions` for rows ``first`` to ``last - 1``."""
    for i in range(first, last):
        legal = 0
        for a in range(masks.shape[1]):
            legal |= (masks[i, a] != 0) << a
        count = count_bits(legal)
        if count == 0:
            return i
        actions[i] = set_bit_number(legal, random_below(streams, i, count))
    return -1
