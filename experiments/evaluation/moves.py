"""One move in words: what it does (:func:`describe_action`) and, against the exact solver's values, what it threw
away (:func:`move_verdict`). The terminal game, the replays, the HTML viewer and the training runs' sample games
all say a move this way.

Whole games are graded from the value of each position alone (:func:`graded_games`): a move keeps the value of
the position it leaves exactly when the position it reaches is worth as much to its player, so one value-only
solve per position gives every verdict -- where valuing every legal action of each position would take one or
two searches per action. The positions are valued in batches: a game at a time by the process's solver (its
table kept from one position to the next, its opening book, the value cache of :mod:`agents.solver.value_cache`), the
games shared among ``jobs`` worker processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from tqdm import tqdm

from quarto_env.core import DECLARE, NO_WINNER, State, Variant
from quarto_env.render import HEX, describe_piece, piece_code, square_name

if TYPE_CHECKING:
    from agents.solver.minimax import Solver

VALUE_NAMES = {1: "won", 0: "drawn", -1: "lost"}
"""A position's value under perfect play, for the player to move, in the verdicts' words."""

KEPT = "kept"
"""The verdict on a move that keeps the position's value."""


def describe_action(state: State, action: int) -> str:
    """What ``action`` does in ``state``, in words."""
    if action == DECLARE:
        return 'declares "Quarto!"'
    if state.placing:
        return f"places piece {HEX[state.hand]} {piece_code(state.hand)} on square {action} ({square_name(action)})"
    return f"gives piece {describe_piece(action)}"


def move_verdict(values: dict[int, int], action: int) -> str:
    """``kept`` if ``action`` is worth the best of ``values`` (``{action: value}`` of every legal action, for the
    player to move), else the value the move threw away: ``won->drawn``, ``won->lost`` or ``drawn->lost``."""
    return value_verdict(max(values.values()), values[action])


def value_verdict(best: int, chosen: int) -> str:
    """The verdict on a move worth ``chosen`` in a position worth ``best``, both for the player who moved."""
    return KEPT if chosen >= best else f"{VALUE_NAMES[best]}->{VALUE_NAMES[chosen]}"


# ---------------------------------------------------------------------------------------------------------
# Whole games
# ---------------------------------------------------------------------------------------------------------
GameMoves = tuple[Variant, Sequence[State], int]
"""A game to grade: its rules, every position from the first (``len(actions) + 1`` of them), and the index of
the first move to grade (those before, a random opening, are not)."""


def graded_games(games: Sequence[GameMoves], jobs: int = 1, progress: bool = False) -> list[list[str | None]]:
    """The verdict on each move of each game (``None`` for the moves before its first graded one), from the exact
    value of the positions (:func:`game_values`), valued a game at a time in ``jobs`` worker processes (one: in
    this process); ``progress``: a bar on stderr counting the positions valued. The rules must have a shipped
    opening book (the early positions would take the solver minutes each)."""
    tasks = [(variant, list(states[first:])) for variant, states, first in games]
    with tqdm(
        total=sum(len(states) for _, states in tasks), desc="grading", unit="pos", disable=not progress, leave=False
    ) as bar:
        values = _valued(tasks, jobs, bar)
    ungraded: list[str | None] = [None]  # the random opening's moves
    return [
        ungraded * first + _verdicts(states[first:], game_values)
        for (_, states, first), game_values in zip(games, values, strict=True)
    ]


def game_values(variant: Variant, states: Sequence[State], bar: tqdm | None = None) -> list[int | None]:
    """The exact value of each position of ``states`` for its player to move (``None`` for one that is over), by
    the process's solver for ``variant`` (:func:`agents.solver.minimax.default_solver`): its table carries from one
    position of the game to the next, and it starts from the value cache and the opening book."""
    from agents.solver.minimax import default_solver  # the compiled solver loads only when a game is graded

    solver = default_solver(variant)
    values: list[int | None] = []
    with _harvested_once(solver):
        for state in states:
            values.append(None if state.over else solver.solve(state, value_only=True).value)
            if bar is not None:
                bar.update(1)
    return values


@contextlib.contextmanager
def _harvested_once(solver: Solver) -> Iterator[None]:
    """Within the block, ``solver`` gives its value cache what it proved once, at the end, instead of after each
    solve that took a while: under load every solve takes a while, and each harvest scans the whole table (a third
    of the time of grading 30 games, harvested after each solve)."""
    cache, solver.cache = solver.cache, None
    try:
        yield
    finally:
        solver.cache = cache
        if cache is not None:
            cache.harvest(solver.table)


def _valued(tasks: list[tuple[Variant, list[State]]], jobs: int, bar: tqdm) -> list[list[int | None]]:
    """:func:`game_values` of each task, in this process or in ``jobs`` workers (a game each at a time; the bar
    moves a game at a time)."""
    workers = min(jobs, len(tasks))
    if workers <= 1:
        return [game_values(variant, states, bar) for variant, states in tasks]
    from agents.solver.labels import worker_pool  # spawned workers that leave Ctrl-C to this process

    values: list[list[int | None]] = [[] for _ in tasks]
    with worker_pool(workers) as pool:
        for index, game in pool.imap_unordered(_game_values_task, list(enumerate(tasks))):
            values[index] = game
            bar.update(len(game))
    return values


def _game_values_task(task: tuple[int, tuple[Variant, list[State]]]) -> tuple[int, list[int | None]]:
    """A worker's job: the values of one game's positions, with the game's index."""
    index, (variant, states) = task
    return index, game_values(variant, states)


def _verdicts(states: Sequence[State], values: Sequence[int | None]) -> list[str | None]:
    """The verdict on each move between ``states``, from their values: the move keeps the value of the position
    it leaves if the position it reaches is worth as much to the player who moved."""
    verdicts: list[str | None] = []
    for before, after, best, reached in zip(states[:-1], states[1:], values[:-1], values[1:], strict=True):
        assert best is not None  # a position that is over has no move after it
        verdicts.append(value_verdict(best, _worth_to_mover(before, after, reached)))
    return verdicts


def _worth_to_mover(before: State, after: State, value: int | None) -> int:
    """What the position ``after`` (whose value is ``value`` for its player to move, ``None`` if it is over) is
    worth to the player who moved from ``before``: the result of a game that ended, else the value, from that
    player's side."""
    if after.over:
        return 0 if after.winner == NO_WINNER else (1 if after.winner == before.to_move else -1)
    assert value is not None
    return value if after.to_move == before.to_move else -value
