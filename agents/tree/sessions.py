"""Self-play and arena sessions: the batched search of :mod:`agents.tree.puct`, driven by any framework's network.

A session owns its games and their search trees; the caller owns the network. The session hands out batches of
leaves to evaluate -- observation planes in any of :mod:`quarto_env.observation`'s kinds, the legal actions, and
which model should evaluate them -- and takes back policy logits and values, checked before the search uses
them. Nothing here imports torch: a numpy function, a JAX model on a GPU or a served model drives the same
search as the AlphaZero trainer, which runs on these sessions itself (docs/sessions.md has the contract)::

    session = SelfPlaySession(8, PUCTOptions(simulations=32), observation="tempo", seed=0)
    while not session.done:
        batch = session.pending()                       # a LeafBatch
        logits, values = my_network(batch.observations)  # (n, 16) and (n,), floating point
        session.submit(logits, values, batch=batch)      # batch=: tied to it (optional)
    samples = session.samples()                          # training samples of the finished games
    session.games                                        # the finished games' records (quarto replay)

- :class:`SelfPlaySession`: ``num_games`` self-play games (or, with ``num_games=None``, games without end, as the
  trainer plays them), ``parallel`` at a time; every searched position becomes a training sample once its game
  ends (:class:`Samples`).
- :class:`ArenaSession`: a match of two models, ``num_pairs`` pairs of games from shared random openings, the
  seats swapped between the two games of a pair; each batch says which model (slot 0 or 1) evaluates it.
- :class:`PUCTSession`: one search of positions given to it: the ``az:`` agent's move, or an analysis.

Failures are one line, and lose nothing: an evaluation the search cannot use (or an evaluator of :meth:`Session.run`
that raises or returns no ``(logits, values)`` pair) is an :class:`~quarto_env.errors.EvaluationError` naming the
batch, which stays pending, to be submitted again; a submit for a batch that :meth:`Session.pending` did not hand
out (a second submit for one batch) is a :class:`~quarto_env.errors.CallOrderError`; an exception or an interrupt
inside the search itself (not in the evaluator) stops the session, and its next use says so. Arguments are checked
when given, counts against this machine's memory before anything is allocated.

:meth:`Session.run` drives a session with one evaluator per model (``batch -> (logits, values)``), and
:meth:`Session.play_round` one round of moves at a time (the trainer's rhythm: it trains between rounds).
:mod:`agents.tree.sample_files` writes the samples as a versioned, sharded dataset. :class:`PUCTOptions` lives in
:mod:`agents.tree.options` and :class:`LeafBatch` in :mod:`agents.tree.leaf_batch`; both are imported from here too.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from agents.match import DEFAULT_OPENING_PLIES, MAX_OPENING_PLIES, GameRecord, opening_state, random_opening
from agents.tree.gumbel_root import GumbelRoot
from agents.tree.leaf_batch import LeafBatch
from agents.tree.options import PUCTOptions
from agents.tree.puct import (
    PUCTResult,
    PUCTSearch,
    encode_positions,
    forced_actions,
)
from quarto_env.checks import checked_number, one_line, shortened
from quarto_env.core import (
    FIELD_TO_MOVE,
    INITIAL_STATE,
    NO_WINNER,
    NUM_ACTIONS,
    NUM_FIELDS,
    STANDARD,
    Variant,
    step,
)
from quarto_env.errors import CallOrderError, EvaluationError, QuartoTypeError, QuartoValueError, RulesError
from quarto_env.notation import format_position
from quarto_env.observation import DEFAULT_OBSERVATION, ObservationKind, observation_kind
from quarto_env.vector import GameBatch, memory_bytes

Seed = int | np.random.Generator | None
"""A seed, or a generator to draw from (shared with the caller: the trainer's draws interleave with its own)."""


# ---------------------------------------------------------------------------------------------------------
# The arguments, checked before anything is allocated
# ---------------------------------------------------------------------------------------------------------
MAX_COUNT = 10**15
"""The most games a self-play session plays, and its highest model version: far beyond any run, and exact in
the float64 a logger may turn them into."""
VARIANT_FLAGS = tuple(field.name for field in dataclasses.fields(Variant))
"""The keywords of :meth:`Variant.make`: what a mapping given as a session's ``variant`` may name."""


def checked_variant(variant: object) -> Variant:
    """The rules a session's ``variant`` names: a :class:`Variant`, a mapping of its flags as configs write it
    (``{"squares": True}``, the keywords of :meth:`Variant.make`) or ``None`` for standard Quarto."""
    if variant is None:
        return STANDARD
    if isinstance(variant, Variant):
        return variant
    if not isinstance(variant, Mapping):
        raise QuartoTypeError(
            f"variant must be a Variant, a mapping of its flags (e.g. {{'squares': True}}) or None, got "
            f"{type(variant).__name__} {shortened(repr(variant))}"
        )
    unknown = sorted(map(str, set(variant) - set(VARIANT_FLAGS)))
    if unknown:
        raise QuartoTypeError(f"variant has no flag {', '.join(unknown)}; its flags: {', '.join(VARIANT_FLAGS)}")
    try:
        return Variant.make(**variant)
    except (RulesError, TypeError) as error:  # TypeError: attributes of a type no rule knows
        raise RulesError(f"variant {shortened(repr(dict(variant)))} is not a rule variant: {one_line(error)}") from None


def _generator(seed: object) -> np.random.Generator:
    """The generator a :data:`Seed` names."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
        raise QuartoTypeError(f"seed must be an integer >= 0, a numpy Generator or None, got {shortened(repr(seed))}")
    if seed is not None and seed < 0:
        raise QuartoValueError(f"seed must be an integer >= 0, a numpy Generator or None, got {seed}")
    return np.random.default_rng(seed)


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise QuartoTypeError(f"{name} must be True or False, got {shortened(repr(value))}")
    return value


def _options(options: object, name: str = "options") -> PUCTOptions:
    if not isinstance(options, PUCTOptions):
        raise QuartoTypeError(
            f"{name} must be a PUCTOptions (e.g. PUCTOptions(simulations=32)), got {type(options).__name__}"
        )
    return options


def _kinds(observation: str | ObservationKind | Sequence[str | ObservationKind]) -> tuple[ObservationKind, ...]:
    """One observation kind per model: one for both, or a pair."""
    if isinstance(observation, str | ObservationKind):
        return (observation_kind(observation),) * 2
    return tuple(observation_kind(kind) for kind in _pair(observation, "observation"))


def _pair(values: Any, name: str) -> tuple[Any, Any]:
    if isinstance(values, str) or not isinstance(values, Sequence) or len(values) != 2:
        raise QuartoValueError(f"{name} must be one value or a pair (one per model), got {shortened(repr(values))}")
    return values[0], values[1]


def _checked_games(count: object, name: str, unit_bytes: int, owner: str, unit: str = "game") -> int:
    """``count`` (an integer >= 1) of games (or pairs: ``unit``) whose search trees take ``unit_bytes`` each, if
    they fit in this machine's memory: checked before the trees are allocated, so that a huge count is one line
    rather than numpy's ``MemoryError`` (as :func:`quarto_env.vector.checked_num_envs` does for the env's)."""
    games = int(checked_number(count, name, minimum=1, integer=True))
    memory = memory_bytes()
    gib = f"{memory / 2**30:.1f} GiB"
    bound = memory // unit_bytes
    if bound < 1:
        raise QuartoValueError(
            f"{owner}: one {unit}'s search trees take {unit_bytes:,} bytes, more than this machine's {gib} of "
            "memory: search fewer simulations"
        )
    if games > bound:
        raise QuartoValueError(
            f"{owner}: {name} must be an integer >= 1 and <= {bound:,} here, got {games:,}: each {unit}'s search "
            f"trees take {unit_bytes:,} bytes, and {bound:,} fill this machine's {gib} of memory"
        )
    return games


def _described(error: BaseException) -> str:
    """An exception in a few words: ``KeyboardInterrupt``, ``ZeroDivisionError (division by zero)``."""
    message = one_line(error)
    return f"{type(error).__name__} ({message})" if message else type(error).__name__


def _shape_of(value: object) -> str:
    """What an evaluator returned, for a message: ``None``, ``a tuple of 3``, ``a dict``."""
    if value is None:
        return "None"
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


# ---------------------------------------------------------------------------------------------------------
# The protocol: batches of leaves out (agents.tree.leaf_batch), evaluations in
# ---------------------------------------------------------------------------------------------------------
Evaluation = tuple[np.ndarray, np.ndarray]
BatchEvaluator = Callable[[LeafBatch], tuple[Any, Any]]
"""A model as :meth:`Session.run` calls it: a batch -> ``(logits, values)``."""
Events = Generator["LeafBatch | PUCTResult", Evaluation | None, None]
"""A session's play: it yields batches (and, as each round of moves ends, the round's search result) and is sent
the evaluation of each batch."""


RunSession = TypeVar("RunSession", bound="Session")


class Session:
    """The protocol every session follows: :attr:`done`, :meth:`pending`, :meth:`submit` (see the module)."""

    models = 1
    """How many models evaluate the session's batches (an arena's two)."""

    def __init__(self) -> None:
        self.batches = 0
        """Batches made so far, the pending one included (their :attr:`LeafBatch.index` counts from 0)."""
        self.rounds = 0
        """Rounds of moves played so far."""
        self.last_result: PUCTResult | None = None
        """The search result of the last round of moves."""
        self._events: Events = self._play()
        self._batch: LeafBatch | None = None
        self._handed_out = False
        """Whether :meth:`pending` gave the caller :attr:`_batch`: only a batch the caller has seen takes an
        evaluation."""
        self._submitted: int | None = None
        """The number of the last batch submitted."""
        self._stopped: str | None = None
        """What stopped the search inside its play (an exception or an interrupt): it cannot go on."""
        self._over = False

    def _play(self) -> Events:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        """Whether every game has ended: no batch is pending, and none will be. Asking plays on to the next batch;
        :class:`CallOrderError` if an exception stopped the search (see the module)."""
        self._advance()
        return self._over

    def pending(self) -> LeafBatch:
        """The batch to evaluate now (the same one until it is submitted); :class:`CallOrderError` once done."""
        self._advance()
        if self._batch is None:
            raise CallOrderError("the session is done: every game has ended, no batch is pending")
        self._handed_out = True
        return self._batch

    def submit(self, logits: object, values: object, *, batch: LeafBatch | int | np.integer | None = None) -> None:
        """The evaluation of the pending batch: policy logits ``(n, 16)`` and values ``(n,)`` (for the player to
        move at each leaf, in [-1, 1]), floating point, as numpy arrays or anything :func:`numpy.asarray` takes.

        ``batch``, the :class:`LeafBatch` that :meth:`pending` returned (or its :attr:`~LeafBatch.index`), ties
        the evaluation to it: :class:`CallOrderError` unless it is the pending one. Without it the evaluation is
        for the batch :meth:`pending` last returned, once: a second submit is a :class:`CallOrderError` too.
        Checked first (:meth:`LeafBatch.checked`: :class:`EvaluationError`, and the batch stays pending: submit
        again); then the search goes on to the next batch."""
        pending = self._submittable(batch)
        evaluation = pending.checked(logits, values)
        self._submitted = pending.index
        self._next(evaluation)

    def run(self: RunSession, *evaluators: BatchEvaluator) -> RunSession:
        """Play to the end, each batch evaluated by ``evaluators[batch.model]`` (one per model); returns itself.
        An evaluator that raises, or returns no ``(logits, values)`` pair, is an :class:`EvaluationError` naming
        the batch, which stays pending: ``run`` again goes on from it."""
        self._check_evaluators(evaluators)
        while not self.done:
            self._evaluate(self.pending(), evaluators)
        return self

    def play_round(self, *evaluators: BatchEvaluator) -> PUCTResult | None:
        """Play one round of moves -- the forced moves, then a searched move in every game -- its batches
        evaluated by ``evaluators[batch.model]`` (failures as :meth:`run`'s); the round's search result (the last
        model's in an arena), or ``None`` when the session is done."""
        self._check_evaluators(evaluators)
        rounds = self.rounds
        while self.rounds == rounds and not self._over:
            if self._batch is None:
                self._next(None)
            else:
                self._evaluate(self.pending(), evaluators)
        return self.last_result if self.rounds > rounds else None

    def _check_evaluators(self, evaluators: tuple[BatchEvaluator, ...]) -> None:
        if len(evaluators) != self.models:
            raise QuartoValueError(
                f"this session takes {self.models} evaluator(s), one per model; got {len(evaluators)}"
            )
        for model, evaluator in enumerate(evaluators):
            if not callable(evaluator):
                raise QuartoTypeError(
                    f"evaluator {model} must be callable, batch -> (logits, values); got {type(evaluator).__name__}"
                )

    def _evaluate(self, batch: LeafBatch, evaluators: tuple[BatchEvaluator, ...]) -> None:
        """Evaluate ``batch`` (handed out) with its model's evaluator, and submit the evaluation."""
        try:
            evaluation = evaluators[batch.model](batch)
        except Exception as error:  # the caller's network: its own error is the cause, kept in the chain
            raise EvaluationError(f"{batch.label}: the evaluator raised {_described(error)}") from error
        if not isinstance(evaluation, tuple | list) or len(evaluation) != 2:
            raise EvaluationError(
                f"{batch.label}: the evaluator must return a pair (logits, values), got {_shape_of(evaluation)}"
            )
        self.submit(*evaluation, batch=batch)

    def _submittable(self, batch: object) -> LeafBatch:
        """The pending batch, if :meth:`pending` handed it out and ``batch`` (when given) names it."""
        self._check_going()
        pending = self._batch if self._handed_out else None
        if pending is None:
            if self._submitted is None:
                raise CallOrderError("no batch is pending: call pending() first, and submit once per batch")
            raise CallOrderError(
                f"batch {self._submitted} is submitted already: call pending() for the next batch (submit once per "
                "batch)"
            )
        if batch is None or batch is pending:
            return pending
        if isinstance(batch, LeafBatch):  # a stale one, or one of another session (perhaps of the same number)
            named = f"batch {batch.index}" + (" of another session" if batch.index == pending.index else "")
        elif isinstance(batch, int | np.integer) and not isinstance(batch, bool):
            if batch == pending.index:
                return pending
            named = f"batch {batch}"
        else:
            raise QuartoTypeError(
                f"batch must be the LeafBatch that pending() returned, or its index; got {type(batch).__name__}"
            )
        raise CallOrderError(
            f"the evaluation is for {named}, but the pending batch is {pending.label}: submit each batch's "
            "evaluation once, with the batch pending() returned"
        )

    def _check_going(self) -> None:
        if self._stopped is not None:
            raise CallOrderError(
                f"the session cannot go on: {self._stopped} stopped its search; what it finished is kept "
                "(samples(), games), start a new session for the rest"
            )

    def _advance(self) -> None:
        """Play on to the next batch (through the ends of rounds), unless one is pending or the session is done."""
        self._check_going()
        while self._batch is None and not self._over:
            self._next(None)

    def _next(self, evaluation: Evaluation | None) -> None:
        """One step of :meth:`_play` -- with the evaluation of the pending batch, if one is -- to its next batch,
        or to the end of a round of moves, or to its end."""
        self._check_going()
        # Until the step is recorded below: an interrupt in between would lose it (the play waits for the
        # evaluation of a batch the session no longer holds), so it stops the session instead.
        self._stopped = "an interrupt"
        try:
            event = next(self._events) if evaluation is None else self._events.send(evaluation)
        except StopIteration:
            self._over = True
            event = None
        except BaseException as error:  # an interrupt or a bug inside the play: its generator is gone with it
            self._stopped = _described(error)
            raise
        if self._batch is not None:  # evaluated: the search moved on, and what the batch did not read is gone
            self._batch.close()
        self._batch = event if isinstance(event, LeafBatch) else None
        self._handed_out = False
        if isinstance(event, PUCTResult):
            self.rounds += 1
            self.last_result = event
        self._stopped = None

    def _search(
        self,
        search: PUCTSearch,
        roots: np.ndarray,
        sims: int,
        games: np.ndarray,
        model: int = 0,
        **options: Any,
    ) -> Generator[LeafBatch, Evaluation | None, PUCTResult]:
        """One search of ``roots`` (the positions of the session's ``games``) by ``model``, each round's leaves
        handed out as a batch; its result."""
        rounds = search.rounds(roots, sims, **options)
        try:
            planes = next(rounds)
            while True:
                batch = LeafBatch(self.batches, model, search, planes, games)
                self.batches += 1
                evaluation = yield batch
                planes = rounds.send(evaluation)  # type: ignore[arg-type]
        except StopIteration as finished:
            result: PUCTResult = finished.value
            return result


class PUCTSession(Session):
    """One search of the positions ``roots`` (``(n, NUM_FIELDS)``, rows of :func:`quarto_env.core.position_array`,
    each with a real choice: :func:`agents.tree.puct.forced_action`) with ``search``'s trees, as
    :meth:`agents.tree.puct.PUCTSearch.rounds` takes them; :attr:`result` once done. The ``az:`` agent's move, the
    trainer's evaluation games, or an analysis."""

    def __init__(self, search: PUCTSearch, roots: np.ndarray, sims: int, **options: Any) -> None:
        if not isinstance(search, PUCTSearch):
            raise QuartoTypeError(f"search must be an agents.tree.puct.PUCTSearch, got {type(search).__name__}")
        roots = _checked_roots(roots, search.max_games)
        sims = int(checked_number(sims, "sims", minimum=0, integer=True))
        try:  # here rather than at the first batch, where the search would stop the session
            inspect.signature(search.rounds).bind(roots, sims, **options)
        except TypeError as error:
            raise QuartoTypeError(f"PUCTSession: {error}; the search takes noise, seconds and gumbel") from None
        self.search, self.roots, self.sims, self.options = search, roots, sims, options
        self._result: PUCTResult | None = None
        super().__init__()

    @property
    def result(self) -> PUCTResult:
        """What the search found; :class:`CallOrderError` before its last batch is evaluated."""
        if self._result is None:
            raise CallOrderError("the search is not finished: evaluate its batches first (run(), or pending/submit)")
        return self._result

    def _play(self) -> Events:
        games = np.arange(len(self.roots))
        self._result = yield from self._search(self.search, self.roots, self.sims, games, **self.options)


def _checked_roots(roots: object, most: int) -> np.ndarray:
    """``roots`` as ``(n, NUM_FIELDS)`` integer rows, 1 <= n <= ``most``: what a search of them takes."""
    array = np.asarray(roots)
    if array.dtype.kind not in "iu" or array.ndim != 2 or array.shape[1] != NUM_FIELDS:
        raise QuartoValueError(
            f"roots must be integer rows of quarto_env.core.position_array, shape (n, {NUM_FIELDS}); got "
            f"{array.dtype} of shape {array.shape}"
        )
    checked_number(len(array), "the number of roots", minimum=1, maximum=most, integer=True)
    return array.astype(np.int64, copy=False)


# ---------------------------------------------------------------------------------------------------------
# What sessions produce: samples and game records
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Samples:
    """Training samples, one row per searched position of a finished game (``n`` rows)."""

    positions: np.ndarray
    """``(n, NUM_FIELDS)`` int64: the position (a row of :func:`quarto_env.core.position_array`)."""
    policy: np.ndarray
    """``(n, 16)`` float32: the improved policy, the search's target (:attr:`PUCTOptions.targets`); rows sum to 1
    over the legal actions."""
    value: np.ndarray
    """``(n,)`` float32: the game's outcome for the player to move, +1 won, 0 drawn, -1 lost."""
    root_value: np.ndarray
    """``(n,)`` float32: the search's mean backed-up value at the position, for the player to move."""
    game: np.ndarray
    """``(n,)`` int64: the session's number of the game."""
    ply: np.ndarray
    """``(n,)`` int64: the actions played in the game before the position."""
    model_version: np.ndarray
    """``(n,)`` int64: the session's :attr:`~SelfPlaySession.model_version` when the position was searched."""
    kind: ObservationKind
    variant: Variant

    def __len__(self) -> int:
        return len(self.positions)

    @functools.cached_property
    def _planes(self) -> tuple[np.ndarray, np.ndarray]:
        return encode_positions(self.positions, self.kind, self.variant)

    @property
    def observations(self) -> np.ndarray:
        """``(n, channels, 16)`` int8: the planes of the session's observation kind, as the search's batches."""
        return self._planes[0]

    @property
    def legal(self) -> np.ndarray:
        """``(n, 16)`` bool: the actions the search considered (the policy's support)."""
        return self._planes[1]

    def arrays(self) -> dict[str, np.ndarray]:
        """Every field as an array, observations and legal masks included (what a dataset shard holds)."""
        fields = ("positions", "policy", "value", "root_value", "game", "ply", "model_version")
        return {"observations": self.observations, "legal": self.legal, **{f: getattr(self, f) for f in fields}}


@dataclasses.dataclass
class FinishedGame:
    """A game a session finished: its record (:class:`agents.match.GameRecord`, positions included), the random
    opening it started from, and the session's number for it."""

    game: int
    record: GameRecord
    opening: tuple[int, ...] = ()

    @property
    def extra(self) -> dict[str, Any]:
        """The fields a ``games.jsonl`` line adds to the record: ``game`` and ``opening``. The line itself is
        :func:`experiments.arena.records.record_line`'s, ``record_line(game.record, variant, **game.extra)``: the
        format ``quarto replay`` reads."""
        return {"game": self.game, "opening": list(self.opening)}


def _finished_game(
    game: int, seats: tuple[str, str], actions: list[int], winner: int, opening: tuple[int, ...], variant: Variant
) -> FinishedGame:
    """The record of a game played from ``opening`` by ``actions``: the positions replayed through the rules."""
    state, positions = opening_state(variant, opening) if opening else INITIAL_STATE, []
    for action in actions:
        positions.append(format_position(state))
        state = step(variant, state, action)
    end = "draw" if winner == NO_WINNER else "win"
    return FinishedGame(game, GameRecord(seats, list(actions), winner, end, positions=positions), opening)


class _PlaysGames(Session):
    """What self-play and arena sessions share: the games (a :class:`GameBatch`, a slot per game in play), their
    forced moves, and the records of the finished ones."""

    def __init__(self, variant: Variant, slots: int, rng: np.random.Generator, records: bool) -> None:
        self.variant = variant
        self.rng = rng
        self.boards = GameBatch(variant, slots)
        """The games in play, one slot each, as they stand (during a search: at its roots)."""
        self.plies = np.zeros(slots, dtype=np.int64)
        """Actions played so far in each slot's game."""
        self.game_of = np.full(slots, -1, dtype=np.int64)
        """The session's number of each slot's game; -1 for a slot left idle."""
        self.keep_records = records
        self.games: list[FinishedGame] = []
        """The finished games, in the order they ended (none kept with ``records=False``)."""
        self._actions: list[list[int]] = [[] for _ in range(slots)]
        self.lengths: list[int] = []
        """The length of every finished game, in the order they ended (:meth:`SelfPlaySession.take_counters`
        empties it)."""
        self.decisive: list[bool] = []
        super().__init__()

    def _playing(self) -> np.ndarray:
        return np.flatnonzero(self.game_of >= 0)

    def _play_forced(self) -> np.ndarray:
        """Play every forced move (:func:`agents.tree.puct.forced_actions`) of the games in play until each needs a
        search; returns the slots in play."""
        while True:
            playing = self._playing()
            if not len(playing):
                return playing
            forced = forced_actions(self.boards, playing)
            moving = np.flatnonzero(forced >= 0)
            if not len(moving):
                return playing
            self._step(playing[moving], forced[moving])

    def _step(self, slots: np.ndarray, actions: np.ndarray) -> None:
        """Play ``actions`` in ``slots``; the games that end are finished (:meth:`_finish`)."""
        self.boards.step(slots, actions)
        self.plies[slots] += 1
        if self.keep_records:
            for slot, action in zip(slots.tolist(), actions.tolist(), strict=True):
                self._actions[slot].append(action)
        for slot in slots[self.boards.over[slots]]:
            winner = int(self.boards.winner[slot])
            self._finish(slot, winner)
            self.lengths.append(int(self.plies[slot]))
            self.decisive.append(winner != NO_WINNER)
            if self.keep_records:
                seats, opening = self._seats(slot), self._opening(slot)
                self.games.append(
                    _finished_game(int(self.game_of[slot]), seats, self._actions[slot], winner, opening, self.variant)
                )
            self._actions[slot] = []
            self.boards.reset(np.array([slot]))
            self.plies[slot] = 0
            self.game_of[slot] = -1
            self._next_game(slot)

    def _finish(self, slot: int, winner: int) -> None:
        """What a game's end means besides its record (self-play: its samples)."""

    def _next_game(self, slot: int) -> None:
        """Start the next game in ``slot``, or leave it idle."""

    def _seats(self, slot: int) -> tuple[str, str]:
        raise NotImplementedError

    def _opening(self, slot: int) -> tuple[int, ...]:
        return ()


# ---------------------------------------------------------------------------------------------------------
# Self-play
# ---------------------------------------------------------------------------------------------------------
class SelfPlaySession(_PlaysGames):
    """Self-play of one model with the batched search: ``num_games`` games, ``parallel`` at a time (all of them by
    default), a batch holding one leaf of every game in play.

    A round of moves plays the forced moves of every game (a win, the only safe piece, a claim:
    :func:`agents.tree.puct.forced_action`), then one searched move in each: a full search (``simulations``, Dirichlet
    noise under a PUCT root) whose positions become samples when their game ends, or, with ``full_search_share``
    below 1, a cheap one (``cheap_simulations``, no noise) that keeps nothing. The move is sampled from the visits
    over a game's first ``temperature_plies`` actions, else the most visited; a Gumbel root plays its choice.

    :param num_games: games to play in all; ``None``: without end (a finished game's slot starts a new one), as
        the trainer plays; then ``parallel`` is required.
    :param options: the search (:class:`PUCTOptions`).
    :param observation: the kind of the batches' planes (:data:`quarto_env.observation.OBSERVATION_KINDS`).
    :param variant: the rules: a :class:`Variant`, a mapping of its flags (``{"squares": True}``, as configs
        write it) or ``None``, standard Quarto (:func:`checked_variant`).
    :param seed: the seed of the noise and the sampled moves (an integer >= 0), or a generator to draw from.
    :param parallel: games played side by side (each round's batches have up to this many leaves); their search
        trees must fit in this machine's memory, which is checked first.
    :param records: keep every finished game's record (:attr:`games`); off for endless play, which would pile
        them up.
    """

    def __init__(
        self,
        num_games: int | None,
        options: PUCTOptions = PUCTOptions(),
        observation: str | ObservationKind = DEFAULT_OBSERVATION,
        variant: Variant | Mapping[str, Any] | None = STANDARD,
        seed: Seed = None,
        parallel: int | None = None,
        records: bool = True,
    ) -> None:
        if num_games is not None:
            checked_number(num_games, "num_games", minimum=1, maximum=MAX_COUNT, integer=True)
        if parallel is None and num_games is None:
            raise QuartoValueError("endless self-play (num_games=None) needs parallel, the games side by side")
        options = self.options = _options(options)
        self.kind = observation_kind(observation)
        variant, rng, records = checked_variant(variant), _generator(seed), _flag(records, "records")
        sims = options.most_simulations
        game_bytes = PUCTSearch.bytes_per_game(self.kind, sims)
        owner = f"SelfPlaySession ({sims:,} simulations, {self.kind.name} planes)"
        name = "parallel" if parallel is not None else "num_games, all side by side without parallel,"
        slots = _checked_games(parallel if parallel is not None else num_games, name, game_bytes, owner)
        if num_games is not None:
            slots = min(slots, int(num_games))
        self.num_games = None if num_games is None else int(num_games)
        self.parallel = slots
        """Games played side by side: a round's batches have up to this many leaves."""
        self.search = PUCTSearch(variant, self.kind, None, slots, sims, options.c_puct)
        self.model_version = 0
        self.started = self.finished = 0
        self.stored_rounds = self.cheap_rounds = 0
        """Rounds searched fully (their positions kept) and cheaply (kept nothing)."""
        self.search_seconds = 0.0
        """Wall time inside searches, the evaluations included."""
        self._stored: list[list[tuple[np.ndarray, np.ndarray, float, int, int]]] = [[] for _ in range(slots)]
        self._samples: list[tuple[np.ndarray, ...]] = []
        super().__init__(variant, slots, rng, records)
        for slot in range(slots):
            self._next_game(slot)

    @property
    def model_version(self) -> int:
        """The version of the model now evaluating (set it as the model changes: an integer >= 0, checked when
        set): every sample carries the version of the model that searched it."""
        return self._model_version

    @model_version.setter
    def model_version(self, version: object) -> None:
        self._model_version = int(checked_number(version, "model_version", minimum=0, maximum=MAX_COUNT, integer=True))

    def take_counters(self) -> SelfPlayCounters:
        """What the session counted since the last call -- rounds, the ended games' lengths, the search's
        simulations and timings -- and the counters start again from zero: the trainer logs them this way."""
        search = self.search
        counters = SelfPlayCounters(
            stored_rounds=self.stored_rounds,
            cheap_rounds=self.cheap_rounds,
            lengths=self.lengths,
            decisive=self.decisive,
            simulations=search.simulations,
            evaluations=search.evaluations,
            tree_seconds=search.tree_seconds,
            network_seconds=search.network_seconds,
            search_seconds=self.search_seconds,
        )
        self.stored_rounds = self.cheap_rounds = 0
        self.lengths, self.decisive = [], []
        search.simulations = search.evaluations = 0  # the session's own search: no one else counts on it
        search.tree_seconds = search.network_seconds = self.search_seconds = 0.0
        return counters

    @property
    def waiting(self) -> np.ndarray:
        """``(parallel,)`` the searched positions of each slot's game that wait for its end to become samples."""
        return np.array([len(stored) for stored in self._stored])

    def samples(self) -> Samples:
        """The samples of the games finished since the last call, in the order the games ended."""
        parts = self._samples or [_no_samples()]
        self._samples = []
        positions, policy, value, root_value, game, ply, version = (np.concatenate(c) for c in zip(*parts, strict=True))
        return Samples(positions, policy, value, root_value, game, ply, version, self.kind, self.variant)

    def _play(self) -> Events:
        options, rng = self.options, self.rng
        while len(playing := self._play_forced()):
            roots = self.boards.positions[playing]  # a copy: the positions as the search starts from them
            # One draw per round, and none when every round is full: the trainer's default draws what it drew.
            full = options.full_search_share >= 1 or rng.random() < options.full_search_share
            gumbel = GumbelRoot(options.gumbel_actions, rng) if options.root == "gumbel" else None
            noisy = full and gumbel is None and options.dirichlet_alpha is not None
            noise = (options.dirichlet_alpha, options.dirichlet_fraction, rng) if noisy else None
            sims = options.simulations if full else options.cheap_simulations
            tick = time.perf_counter()
            games = self.game_of[playing]
            result = yield from self._search(self.search, roots, sims, games, noise=noise, gumbel=gumbel)
            self.search_seconds += time.perf_counter() - tick
            if full:
                self.stored_rounds += 1
                self._store(playing, roots, options.policy_target(result), result.root_value)
            else:
                self.cheap_rounds += 1
            if gumbel is not None:
                self._step(playing, result.best())  # the Gumbel root's choice: a sample of its improved policy
            else:
                sampling = self.plies[playing] < options.temperature_plies
                self._step(playing, np.where(sampling, _sampled(result.policy(), rng), result.best()))
            yield result

    def _store(self, slots: np.ndarray, roots: np.ndarray, target: np.ndarray, root_value: np.ndarray) -> None:
        for i, slot in enumerate(slots):
            self._stored[slot].append(
                (roots[i], target[i], float(root_value[i]), int(self.plies[slot]), self.model_version)
            )

    def _finish(self, slot: int, winner: int) -> None:
        stored = self._stored[slot]
        if stored:
            positions = np.stack([position for position, *_ in stored])
            policy = np.stack([target for _, target, *_ in stored])
            root_value = np.array([value for _, _, value, *_ in stored], dtype=np.float32)
            to_move = positions[:, FIELD_TO_MOVE]
            outcome = np.where(winner == NO_WINNER, 0.0, np.where(to_move == winner, 1.0, -1.0)).astype(np.float32)
            game = np.full(len(stored), self.game_of[slot], dtype=np.int64)
            ply = np.array([p for *_, p, _ in stored], dtype=np.int64)
            version = np.array([v for *_, v in stored], dtype=np.int64)
            self._samples.append((positions, policy, outcome, root_value, game, ply, version))
        self._stored[slot] = []
        self.finished += 1

    def _next_game(self, slot: int) -> None:
        if self.num_games is None or self.started < self.num_games:
            self.game_of[slot] = self.started
            self.started += 1

    def _seats(self, slot: int) -> tuple[str, str]:
        return ("self-play", "self-play")


@dataclasses.dataclass
class SelfPlayCounters:
    """What a :class:`SelfPlaySession` counted between two calls of :meth:`~SelfPlaySession.take_counters`."""

    stored_rounds: int
    """Rounds of moves searched fully: their positions are (or become) samples."""
    cheap_rounds: int
    """Rounds searched cheaply (playout-cap randomisation): nothing kept."""
    lengths: list[int]
    """The length of each game that ended, in the order they ended."""
    decisive: list[bool]
    """Whether each of those games had a winner."""
    simulations: int
    """Simulations run: one per game in play per search round."""
    evaluations: int
    """Leaves handed out for evaluation."""
    tree_seconds: float
    """Time in the search's tree kernels."""
    network_seconds: float
    """Time between a batch handed out and its evaluation back: the caller's network."""
    search_seconds: float
    """Wall time inside searches, the evaluations included."""


def _no_samples() -> tuple[np.ndarray, ...]:
    floats, ints = np.zeros(0, np.float32), np.zeros(0, np.int64)
    return (
        np.zeros((0, NUM_FIELDS), np.int64),
        np.zeros((0, NUM_ACTIONS), np.float32),
        floats,
        floats,
        ints,
        ints,
        ints,
    )


def _sampled(policy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row drawn from the visit distribution."""
    cumulative = np.cumsum(policy, axis=1)
    draws = rng.random(len(policy))[:, None] * cumulative[:, -1:]
    return np.minimum((cumulative <= draws).sum(1), NUM_ACTIONS - 1)


# ---------------------------------------------------------------------------------------------------------
# Two-model matches
# ---------------------------------------------------------------------------------------------------------
class ArenaSession(_PlaysGames):
    """A match of two models: ``num_pairs`` pairs of games, each pair from its own random opening of
    ``opening_plies`` actions, model 0 giving first in the pair's first game (even numbers) and model 1 in its
    second (odd numbers). Every move the rules do not force is searched without noise by the model to move, its
    best action played (:meth:`agents.tree.puct.PUCTResult.best`); each round searches model 0's games, then model
    1's, and each batch says which (:attr:`LeafBatch.model`).

    :param options: one :class:`PUCTOptions` for both models, or a pair (their ``simulations``, ``root``,
        ``c_puct`` and ``gumbel_actions`` apply).
    :param observation: one kind for both models, or a pair.
    :param variant: the rules, as :class:`SelfPlaySession` takes them.
    :param names: the models' names in the game records.
    """

    models = 2

    def __init__(
        self,
        num_pairs: int,
        options: PUCTOptions | Sequence[PUCTOptions] = PUCTOptions(),
        observation: str | ObservationKind | Sequence[str | ObservationKind] = DEFAULT_OBSERVATION,
        variant: Variant | Mapping[str, Any] | None = STANDARD,
        seed: Seed = None,
        names: tuple[str, str] = ("model 0", "model 1"),
        opening_plies: int = DEFAULT_OPENING_PLIES,
    ) -> None:
        checked_number(opening_plies, "opening_plies", minimum=0, maximum=MAX_OPENING_PLIES, integer=True)
        pair = (options, options) if isinstance(options, PUCTOptions) else _pair(options, "options")
        self.options: tuple[PUCTOptions, PUCTOptions] = (_options(pair[0]), _options(pair[1]))
        self.kinds = _kinds(observation)
        if not isinstance(names, tuple | list) or len(names) != 2 or not all(isinstance(n, str) for n in names):
            raise QuartoTypeError(f"names must be a pair of strings, one per model; got {shortened(repr(names))}")
        self.names = (names[0], names[1])
        variant, rng = checked_variant(variant), _generator(seed)
        sims = [max(option.simulations, 1) for option in self.options]
        pair_bytes = 2 * sum(PUCTSearch.bytes_per_game(k, n) for k, n in zip(self.kinds, sims, strict=True))
        owner = f"ArenaSession ({sims[0]:,} and {sims[1]:,} simulations)"
        pairs = _checked_games(num_pairs, "num_pairs", pair_bytes, owner, unit="pair")
        games = 2 * pairs
        self.searches = [
            PUCTSearch(variant, kind, None, games, n, option.c_puct)
            for kind, n, option in zip(self.kinds, sims, self.options, strict=True)
        ]
        super().__init__(variant, games, rng, records=True)
        self.openings = [random_opening(variant, opening_plies, self.rng) for _ in range(pairs)]
        for game in range(games):
            self.game_of[game] = game
            self.boards.set_state(np.array([game]), opening_state(variant, self.openings[game // 2]))
        self.winners: dict[int, int] = {}
        """The winner of each finished game (a player, or ``NO_WINNER``), by game number."""

    def model_to_move(self, slots: np.ndarray) -> np.ndarray:
        """The model to move in each of the games ``slots``."""
        return self.boards.to_move[slots] ^ (slots % 2)

    def summary(self) -> dict[str, Any]:
        """Model 0's wins, draws and losses over the finished games, and its score (a draw counts one half)."""
        wins = sum(int(winner == game % 2) for game, winner in self.winners.items())  # model 0 is player game % 2
        draws = sum(winner == NO_WINNER for winner in self.winners.values())
        games = len(self.winners)
        return {
            "games": games,
            "wins": wins,
            "draws": draws,
            "losses": games - wins - draws,
            "score": (wins + draws / 2) / games if games else float("nan"),
        }

    def _play(self) -> Events:
        while len(playing := self._play_forced()):
            actions = np.zeros(len(playing), dtype=np.int64)
            to_move = self.model_to_move(playing)
            result = None
            for model in (0, 1):
                chosen = np.flatnonzero(to_move == model)
                if not len(chosen):
                    continue
                options, slots = self.options[model], playing[chosen]
                gumbel = GumbelRoot(options.gumbel_actions) if options.root == "gumbel" else None
                roots = self.boards.positions[slots]
                result = yield from self._search(
                    self.searches[model], roots, options.simulations, slots, model, gumbel=gumbel
                )
                actions[chosen] = result.best()
            self._step(playing, actions)
            if result is not None:  # always: a game in play after the forced moves has a move to search
                yield result

    def _finish(self, slot: int, winner: int) -> None:
        self.winners[slot] = winner

    def _seats(self, slot: int) -> tuple[str, str]:
        first, second = self.names
        return (first, second) if slot % 2 == 0 else (second, first)

    def _opening(self, slot: int) -> tuple[int, ...]:
        return self.openings[slot // 2]
