"""Self-play sessions (:class:`SelfPlaySession`) and what they produce: training samples (:class:`Samples`) and
the counters the trainer logs (:class:`SelfPlayCounters`). Their contract is in :mod:`agents.tree.sessions`."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from agents.tree.gumbel_root import GumbelRoot
from agents.tree.options import PUCTOptions
from agents.tree.puct import PUCTSearch, encode_positions
from agents.tree.session_base import Events, GamesSession, Seed, checked_games, checked_options, seed_generator
from quarto_env.checks import checked_number, shortened
from quarto_env.core import FIELD_TO_MOVE, NO_WINNER, NUM_ACTIONS, NUM_FIELDS, STANDARD, Variant, checked_variant
from quarto_env.errors import QuartoTypeError, QuartoValueError
from quarto_env.observation import DEFAULT_OBSERVATION, ObservationKind, observation_kind

MAX_COUNT = 10**15
"""The most games a self-play session plays, and its highest model version: far beyond any run, and exact in
the float64 a logger may turn them into."""


SHARD_NAMES = {"outcome": "value"}
"""The fields of :class:`Samples` that a dataset's shards name otherwise: the names the files were first written
with, kept so that every dataset reads."""


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise QuartoTypeError(f"{name} must be True or False, got {shortened(repr(value))}")
    return value


# ---------------------------------------------------------------------------------------------------------
# What self-play produces: samples
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Samples:
    """Training samples, one row per searched position of a finished game (``n`` rows)."""

    positions: np.ndarray
    """``(n, NUM_FIELDS)`` int64: the position (a row of :func:`quarto_env.core.position_array`)."""
    policy: np.ndarray
    """``(n, 16)`` float32: the improved policy, the search's target (:attr:`PUCTOptions.targets`); rows sum to 1
    over the legal actions."""
    outcome: np.ndarray
    """``(n,)`` float32: the game's outcome for the player to move, +1 won, 0 drawn, -1 lost (a dataset stores it
    as ``value``: :meth:`arrays`)."""
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
        """Every field as an array, observations and legal masks included: what a dataset shard holds, under the
        names its files keep (:data:`SHARD_NAMES`)."""
        fields = ("positions", "policy", "outcome", "root_value", "game", "ply", "model_version")
        arrays = {"observations": self.observations, "legal": self.legal, **{f: getattr(self, f) for f in fields}}
        return {SHARD_NAMES.get(name, name): array for name, array in arrays.items()}


# ---------------------------------------------------------------------------------------------------------
# Self-play
# ---------------------------------------------------------------------------------------------------------
class SelfPlaySession(GamesSession):
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
        options = self.options = checked_options(options)
        self.kind = observation_kind(observation)
        variant, rng, records = checked_variant(variant), seed_generator(seed), _flag(records, "records")
        sims = options.most_simulations
        game_bytes = PUCTSearch.bytes_per_game(self.kind, sims)
        owner = f"SelfPlaySession ({sims:,} simulations, {self.kind.name} planes)"
        name = "parallel" if parallel is not None else "num_games, all side by side without parallel,"
        slots = checked_games(parallel if parallel is not None else num_games, name, game_bytes, owner)
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
        positions, policy, outcome, root_value, game, ply, version = (
            np.concatenate(c) for c in zip(*parts, strict=True)
        )
        return Samples(positions, policy, outcome, root_value, game, ply, version, self.kind, self.variant)

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
            root_value = np.array([root for _, _, root, *_ in stored], dtype=np.float32)
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
