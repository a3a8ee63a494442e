"""Arena sessions: a match of two models (:class:`ArenaSession`). Its contract is in :mod:`agents.tree.sessions`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agents.match import DEFAULT_OPENING_PLIES, MAX_OPENING_PLIES, opening_state, random_opening
from agents.tree.gumbel_root import GumbelRoot
from agents.tree.options import PUCTOptions
from agents.tree.puct import PUCTSearch
from agents.tree.session_base import Events, GamesSession, Seed, checked_games, checked_options, seed_generator
from quarto_env.checks import checked_number, shortened
from quarto_env.core import NO_WINNER, STANDARD, Variant, checked_variant
from quarto_env.errors import QuartoTypeError, QuartoValueError
from quarto_env.observation import DEFAULT_OBSERVATION, ObservationKind, observation_kind


def _kinds(observation: str | ObservationKind | Sequence[str | ObservationKind]) -> tuple[ObservationKind, ...]:
    """One observation kind per model: one for both, or a pair."""
    if isinstance(observation, str | ObservationKind):
        return (observation_kind(observation),) * 2
    return tuple(observation_kind(kind) for kind in _pair(observation, "observation"))


def _pair(values: Any, name: str) -> tuple[Any, Any]:
    if isinstance(values, str) or not isinstance(values, Sequence) or len(values) != 2:
        raise QuartoValueError(f"{name} must be one value or a pair (one per model), got {shortened(repr(values))}")
    return values[0], values[1]


# ---------------------------------------------------------------------------------------------------------
# Two-model matches
# ---------------------------------------------------------------------------------------------------------
class ArenaSession(GamesSession):
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
        opening_plies = int(
            checked_number(opening_plies, "opening_plies", minimum=0, maximum=MAX_OPENING_PLIES, integer=True)
        )
        pair = (options, options) if isinstance(options, PUCTOptions) else _pair(options, "options")
        self.options: tuple[PUCTOptions, PUCTOptions] = (checked_options(pair[0]), checked_options(pair[1]))
        self.kinds = _kinds(observation)
        if not isinstance(names, tuple | list) or len(names) != 2 or not all(isinstance(n, str) for n in names):
            raise QuartoTypeError(f"names must be a pair of strings, one per model; got {shortened(repr(names))}")
        self.names = (names[0], names[1])
        variant, rng = checked_variant(variant), seed_generator(seed)
        sims = [max(option.simulations, 1) for option in self.options]
        pair_bytes = 2 * sum(PUCTSearch.bytes_per_game(k, n) for k, n in zip(self.kinds, sims, strict=True))
        owner = f"ArenaSession ({sims[0]:,} and {sims[1]:,} simulations)"
        pairs = checked_games(num_pairs, "num_pairs", pair_bytes, owner, unit="pair")
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
