"""The base of the sessions (:mod:`agents.tree.sessions` has their contract): the protocol that hands out leaves
and takes their evaluations back (:class:`Session`), one search of given positions (:class:`PUCTSession`), what
self-play and arena sessions share (:class:`GamesSession`: the games, their forced moves and records) and the
checks of the arguments they share.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import numpy as np

from agents.match import GameRecord, opening_state
from agents.tree.leaf_batch import LeafBatch
from agents.tree.options import PUCTOptions
from agents.tree.puct import PUCTResult, PUCTSearch, forced_actions
from quarto_env.checks import checked_number, one_line, shortened
from quarto_env.core import (
    INITIAL_STATE,
    NO_WINNER,
    NUM_FIELDS,
    POSITION_PROBLEMS,
    Variant,
    position_problems,
    state_of_row,
    step,
)
from quarto_env.errors import CallOrderError, EvaluationError, QuartoTypeError, QuartoValueError
from quarto_env.notation import format_position
from quarto_env.vector import GameBatch, memory_bytes

Seed = int | np.random.Generator | None
"""A seed, or a generator to draw from (shared with the caller: the trainer's draws interleave with its own)."""


# ---------------------------------------------------------------------------------------------------------
# The arguments, checked before anything is allocated
# ---------------------------------------------------------------------------------------------------------
def seed_generator(seed: object) -> np.random.Generator:
    """The generator a :data:`Seed` names."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
        raise QuartoTypeError(f"seed must be an integer >= 0, a numpy Generator or None, got {shortened(repr(seed))}")
    if seed is not None and seed < 0:
        raise QuartoValueError(f"seed must be an integer >= 0, a numpy Generator or None, got {seed}")
    return np.random.default_rng(seed)


def checked_options(options: object, name: str = "options") -> PUCTOptions:
    """``options`` if it is a :class:`PUCTOptions`; the error names it ``name``."""
    if not isinstance(options, PUCTOptions):
        raise QuartoTypeError(
            f"{name} must be a PUCTOptions (e.g. PUCTOptions(simulations=32)), got {type(options).__name__}"
        )
    return options


def checked_games(count: object, name: str, unit_bytes: int, owner: str, unit: str = "game") -> int:
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
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" or name == "ndarray" else "a"  # as said: an ndarray, a tuple
    if isinstance(value, tuple | list):
        return f"{article} {name} of {len(value)}"
    return f"{article} {name}"


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
                f"batch {self._submitted} is submitted already: call pending() for the next batch, done() to know "
                "whether one comes (submit once per batch)"
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
        roots = _checked_roots(roots, search)
        sims = int(
            checked_number(
                sims,
                f"sims (the search's trees hold {search.max_sims:,})",
                minimum=0,
                maximum=search.max_sims,
                integer=True,
            )
        )
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


def _checked_roots(roots: object, search: PUCTSearch) -> np.ndarray:
    """``roots`` as ``(n, NUM_FIELDS)`` integer rows, 1 <= n <= the search's ``max_games``: positions in play under
    its rules (:func:`quarto_env.core.position_problems`), each with a choice to search (no forced action)."""
    array = np.asarray(roots)
    if array.dtype.kind not in "iu" or array.ndim != 2 or array.shape[1] != NUM_FIELDS:
        raise QuartoValueError(
            f"roots must be integer rows of quarto_env.core.position_array, shape (n, {NUM_FIELDS}); got "
            f"{array.dtype} of shape {array.shape}"
        )
    checked_number(len(array), "the number of roots", minimum=1, maximum=search.max_games, integer=True)
    array = array.astype(np.int64, copy=False)
    problems = position_problems(search.variant, array)
    if problems.any():
        i = int(np.flatnonzero(problems)[0])
        raise QuartoValueError(
            f"root {i} is no position in play under the search's rules: it {POSITION_PROBLEMS[problems[i]]}"
        )
    batch = GameBatch(search.variant, len(array))
    batch.positions[:] = array
    forced = forced_actions(batch, batch.all_games)
    if (forced >= 0).any():
        i = int(np.flatnonzero(forced >= 0)[0])
        raise QuartoValueError(
            f"root {i} ({format_position(state_of_row(array[i]))}) has no choice to search: the rules dictate action "
            f"{int(forced[i])} (a claim, a win, or the only action that does not lose); search positions with a choice"
        )
    return array


# ---------------------------------------------------------------------------------------------------------
# What the game sessions share: the games in play, their forced moves and the finished games' records
# ---------------------------------------------------------------------------------------------------------
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


class GamesSession(Session):
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
