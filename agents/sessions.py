"""Self-play and arena sessions: the batched search of :mod:`agents.puct`, driven by any framework's network.

A session owns its games and their search trees; the caller owns the network. The session hands out batches of
leaves to evaluate -- observation planes in any of :mod:`quarto_env.observation`'s kinds, the legal actions, and
which model should evaluate them -- and takes back policy logits and values, checked before the search uses
them. Nothing here imports torch: a numpy function, a JAX model on a GPU or a served model drives the same
search as the AlphaZero trainer, which runs on these sessions itself (docs/sessions.md has the contract)::

    session = SelfPlaySession(8, SearchOptions(simulations=32), observation="tempo", seed=0)
    while not session.done:
        batch = session.pending()                       # a LeafBatch
        logits, values = my_network(batch.observations)  # (n, 16) and (n,), floating point
        session.submit(logits, values)
    samples = session.samples()                          # training samples of the finished games
    session.games                                        # the finished games' records (quarto replay)

- :class:`SelfPlaySession`: ``num_games`` self-play games (or, with ``num_games=None``, games without end, as the
  trainer plays them), ``parallel`` at a time; every searched position becomes a training sample once its game
  ends (:class:`Samples`).
- :class:`ArenaSession`: a match of two models, ``num_pairs`` pairs of games from shared random openings, the
  seats swapped between the two games of a pair; each batch says which model (slot 0 or 1) evaluates it.
- :class:`SearchSession`: one search of positions given to it: the ``az:`` agent's move, or an analysis.

:meth:`Session.run` drives a session with one evaluator per model (``batch -> (logits, values)``), and
:meth:`Session.play_round` one round of moves at a time (the trainer's rhythm: it trains between rounds).
:mod:`agents.sample_files` writes the samples as a versioned, sharded dataset. :class:`SearchOptions` lives in
:mod:`agents.search_options` and :class:`LeafBatch` in :mod:`agents.leaf_batch`; both are imported from here too.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

import numpy as np

from agents.gumbel_root import GumbelRoot
from agents.leaf_batch import LeafBatch
from agents.match import DEFAULT_OPENING_PLIES, MAX_OPENING_PLIES, GameRecord, opening_state, random_opening
from agents.puct import (
    BatchedSearch,
    SearchResult,
    encode_positions,
    forced_actions,
)
from agents.search_options import SearchOptions
from quarto_env.checks import checked_number
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
from quarto_env.errors import CallOrderError, QuartoValueError
from quarto_env.notation import format_position
from quarto_env.observation import DEFAULT_OBSERVATION, ObservationKind, observation_kind
from quarto_env.vector import GameBatch

Seed = int | np.random.Generator | None
"""A seed, or a generator to draw from (shared with the caller: the trainer's draws interleave with its own)."""


def _kinds(observation: str | ObservationKind | Sequence[str | ObservationKind]) -> tuple[ObservationKind, ...]:
    """One observation kind per model: one for both, or a pair."""
    if isinstance(observation, str | ObservationKind):
        return (observation_kind(observation),) * 2
    return tuple(observation_kind(kind) for kind in _pair(observation, "observation"))


def _pair(values: Any, name: str) -> tuple[Any, Any]:
    if not isinstance(values, Sequence) or len(values) != 2:
        raise QuartoValueError(f"{name} must be one value or a pair (one per model), got {values!r}")
    return values[0], values[1]


# ---------------------------------------------------------------------------------------------------------
# The protocol: batches of leaves out (agents.leaf_batch), evaluations in
# ---------------------------------------------------------------------------------------------------------
Evaluation = tuple[np.ndarray, np.ndarray]
BatchEvaluator = Callable[[LeafBatch], tuple[Any, Any]]
"""A model as :meth:`Session.run` calls it: a batch -> ``(logits, values)``."""
Events = Generator["LeafBatch | SearchResult", Evaluation | None, None]
"""A session's play: it yields batches (and, as each round of moves ends, the round's search result) and is sent
the evaluation of each batch."""


RunSession = TypeVar("RunSession", bound="Session")


class Session:
    """The protocol every session follows: :attr:`done`, :meth:`pending`, :meth:`submit` (see the module)."""

    models = 1
    """How many models evaluate the session's batches (an arena's two)."""

    def __init__(self) -> None:
        self.batches = 0
        """Batches handed out so far."""
        self.rounds = 0
        """Rounds of moves played so far."""
        self.last_result: SearchResult | None = None
        """The search result of the last round of moves."""
        self._events: Events = self._play()
        self._batch: LeafBatch | None = None
        self._over = False

    def _play(self) -> Events:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        """Whether every game has ended: no batch is pending, and none will be."""
        self._advance()
        return self._over

    def pending(self) -> LeafBatch:
        """The batch to evaluate now (the same one until it is submitted); :class:`CallOrderError` once done."""
        self._advance()
        if self._batch is None:
            raise CallOrderError("the session is done: every game has ended, no batch is pending")
        return self._batch

    def submit(self, logits: object, values: object) -> None:
        """The evaluation of the pending batch: policy logits ``(n, 16)`` and values ``(n,)`` (for the player to
        move at each leaf, in [-1, 1]), floating point, as numpy arrays or anything :func:`numpy.asarray` takes.
        Checked first (:meth:`LeafBatch.checked`: :class:`EvaluationError`, and the session is left as it was);
        then the search goes on to the next batch."""
        if self._batch is None:
            raise CallOrderError("no batch is pending: call pending() first, and submit once per batch")
        evaluation = self._batch.checked(logits, values)
        self._batch.close()
        self._batch = None
        self._next(evaluation)

    def run(self: RunSession, *evaluators: BatchEvaluator) -> RunSession:
        """Play to the end, each batch evaluated by ``evaluators[batch.model]`` (one per model); returns itself."""
        self._check_evaluators(evaluators)
        while not self.done:
            batch = self.pending()
            self.submit(*evaluators[batch.model](batch))
        return self

    def play_round(self, *evaluators: BatchEvaluator) -> SearchResult | None:
        """Play one round of moves -- the forced moves, then a searched move in every game -- its batches
        evaluated by ``evaluators[batch.model]``; the round's search result (the last model's in an arena), or
        ``None`` when the session is done."""
        self._check_evaluators(evaluators)
        rounds = self.rounds
        while self.rounds == rounds and not self._over:
            if self._batch is None:
                self._next(None)
            else:
                batch = self._batch
                self.submit(*evaluators[batch.model](batch))
        return self.last_result if self.rounds > rounds else None

    def _check_evaluators(self, evaluators: tuple[BatchEvaluator, ...]) -> None:
        if len(evaluators) != self.models:
            raise QuartoValueError(
                f"this session takes {self.models} evaluator(s), one per model; got {len(evaluators)}"
            )

    def _advance(self) -> None:
        """Play on to the next batch (through the ends of rounds), unless one is pending or the session is done."""
        while self._batch is None and not self._over:
            self._next(None)

    def _next(self, evaluation: Evaluation | None) -> None:
        """One step of :meth:`_play`: to its next batch, or to the end of a round of moves, or to its end."""
        try:
            event = next(self._events) if evaluation is None else self._events.send(evaluation)
        except StopIteration:
            self._over = True
            return
        if isinstance(event, LeafBatch):
            self._batch = event
        else:
            self.rounds += 1
            self.last_result = event

    def _search(
        self,
        search: BatchedSearch,
        roots: np.ndarray,
        sims: int,
        games: np.ndarray,
        model: int = 0,
        **options: Any,
    ) -> Generator[LeafBatch, Evaluation | None, SearchResult]:
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
            result: SearchResult = finished.value
            return result


class SearchSession(Session):
    """One search of the positions ``roots`` (``(n, NUM_FIELDS)``, rows of :func:`quarto_env.core.position_array`,
    each with a real choice: :func:`agents.puct.forced_action`) with ``search``'s trees, as
    :meth:`agents.puct.BatchedSearch.rounds` takes them; :attr:`result` once done. The ``az:`` agent's move, the
    trainer's evaluation games, or an analysis."""

    def __init__(self, search: BatchedSearch, roots: np.ndarray, sims: int, **options: Any) -> None:
        self.search, self.roots, self.sims, self.options = search, roots, sims, options
        self._result: SearchResult | None = None
        super().__init__()

    @property
    def result(self) -> SearchResult:
        """What the search found; :class:`CallOrderError` before its last batch is evaluated."""
        if self._result is None:
            raise CallOrderError("the search is not finished: evaluate its batches first (run(), or pending/submit)")
        return self._result

    def _play(self) -> Events:
        games = np.arange(len(self.roots))
        self._result = yield from self._search(self.search, self.roots, self.sims, games, **self.options)


# ---------------------------------------------------------------------------------------------------------
# What sessions produce: samples and game records
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Samples:
    """Training samples, one row per searched position of a finished game (``n`` rows)."""

    positions: np.ndarray
    """``(n, NUM_FIELDS)`` int64: the position (a row of :func:`quarto_env.core.position_array`)."""
    policy: np.ndarray
    """``(n, 16)`` float32: the improved policy, the search's target (:attr:`SearchOptions.targets`); rows sum to 1
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
        """The length of every finished game, in the order they ended (the trainer empties it as it logs it)."""
        self.decisive: list[bool] = []
        super().__init__()

    def _playing(self) -> np.ndarray:
        return np.flatnonzero(self.game_of >= 0)

    def _play_forced(self) -> np.ndarray:
        """Play every forced move (:func:`agents.puct.forced_actions`) of the games in play until each needs a
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
    :func:`agents.puct.forced_action`), then one searched move in each: a full search (``simulations``, Dirichlet
    noise under a PUCT root) whose positions become samples when their game ends, or, with ``full_search_share``
    below 1, a cheap one (``cheap_simulations``, no noise) that keeps nothing. The move is sampled from the visits
    over a game's first ``temperature_plies`` actions, else the most visited; a Gumbel root plays its choice.

    :param num_games: games to play in all; ``None``: without end (a finished game's slot starts a new one), as
        the trainer plays; then ``parallel`` is required.
    :param options: the search (:class:`SearchOptions`).
    :param observation: the kind of the batches' planes (:data:`quarto_env.observation.OBSERVATION_KINDS`).
    :param variant: the rules.
    :param seed: the seed of the noise and the sampled moves, or a generator to draw from.
    :param parallel: games played side by side (each round's batches have up to this many leaves).
    :param records: keep every finished game's record (:attr:`games`); off for endless play, which would pile
        them up.
    """

    def __init__(
        self,
        num_games: int | None,
        options: SearchOptions = SearchOptions(),
        observation: str | ObservationKind = DEFAULT_OBSERVATION,
        variant: Variant = STANDARD,
        seed: Seed = None,
        parallel: int | None = None,
        records: bool = True,
    ) -> None:
        if num_games is not None:
            checked_number(num_games, "num_games", minimum=1, integer=True)
        if parallel is None:
            if num_games is None:
                raise QuartoValueError("endless self-play (num_games=None) needs parallel, the games side by side")
            parallel = num_games
        checked_number(parallel, "parallel", minimum=1, integer=True)
        slots = parallel if num_games is None else min(parallel, num_games)
        self.num_games = num_games
        self.options = options
        self.kind = observation_kind(observation)
        self.search = BatchedSearch(variant, self.kind, None, slots, options.most_simulations, options.c_puct)
        self.model_version = 0
        """The version of the model now evaluating (set it as the model changes): every sample carries it."""
        self.started = self.finished = 0
        self.stored_rounds = self.cheap_rounds = 0
        """Rounds searched fully (their positions kept) and cheaply (kept nothing)."""
        self.search_seconds = 0.0
        """Wall time inside searches, the evaluations included."""
        self._stored: list[list[tuple[np.ndarray, np.ndarray, float, int, int]]] = [[] for _ in range(slots)]
        self._samples: list[tuple[np.ndarray, ...]] = []
        super().__init__(variant, slots, np.random.default_rng(seed), records)
        for slot in range(slots):
            self._next_game(slot)

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
    best action played (:meth:`agents.puct.SearchResult.best`); each round searches model 0's games, then model
    1's, and each batch says which (:attr:`LeafBatch.model`).

    :param options: one :class:`SearchOptions` for both models, or a pair (their ``simulations``, ``root``,
        ``c_puct`` and ``gumbel_actions`` apply).
    :param observation: one kind for both models, or a pair.
    :param names: the models' names in the game records.
    """

    models = 2

    def __init__(
        self,
        num_pairs: int,
        options: SearchOptions | Sequence[SearchOptions] = SearchOptions(),
        observation: str | ObservationKind | Sequence[str | ObservationKind] = DEFAULT_OBSERVATION,
        variant: Variant = STANDARD,
        seed: Seed = None,
        names: tuple[str, str] = ("model 0", "model 1"),
        opening_plies: int = DEFAULT_OPENING_PLIES,
    ) -> None:
        checked_number(num_pairs, "num_pairs", minimum=1, integer=True)
        checked_number(opening_plies, "opening_plies", minimum=0, maximum=MAX_OPENING_PLIES, integer=True)
        both = _pair(options, "options") if not isinstance(options, SearchOptions) else (options, options)
        self.options: tuple[SearchOptions, SearchOptions] = both
        self.kinds = _kinds(observation)
        self.names = _pair(names, "names")
        games = 2 * num_pairs
        self.searches = [
            BatchedSearch(variant, kind, None, games, max(option.simulations, 1), option.c_puct)
            for kind, option in zip(self.kinds, self.options, strict=True)
        ]
        super().__init__(variant, games, np.random.default_rng(seed), records=True)
        self.openings = [random_opening(variant, opening_plies, self.rng) for _ in range(num_pairs)]
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
