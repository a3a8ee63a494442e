"""The sample games of a training run's evaluations (the config's ``sample_games``), graded move by move for
TensorBoard.

They are no extra games: an evaluation keeps its first ``sample_games`` games against the last of
``eval_opponents`` whole (:func:`experiments.evaluation.games.evaluate`, ``keep_games``), played by the
learner's first way of playing (its most likely action, or its search). The evaluation's openings come from the
config's seed, so the same openings -- and, where neither player has changed, the same games -- recur at every
evaluation of the run: a researcher watches the learner's mistakes move later and thin out in TensorBoard's step
slider.

:func:`graded_games` replays them and marks each of the learner's decisions with the exact solver's verdict
(:func:`experiments.evaluation.moves.move_verdict`: ``kept``, ``won->drawn``, ``won->lost`` or ``drawn->lost``) where
the solver is fast (:func:`fast_to_grade`: at most :data:`GRADED_MAX_EMPTY` empty squares, or a position that
the rules' opening book values in one lookup), and ``not graded`` elsewhere: without a book (the declaration
variant), or at 11 and 12 empty squares under the standard rules (whose book stops at 12), valuing every action
takes the solver up to seconds, minutes for the earliest positions. The opponent's moves and the random
opening are not graded. :func:`game_markdown` writes one game as Markdown for TensorBoard's Text tab,
:func:`mistake_picture` the position of the learner's first value-losing decision for its Images tab.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from agents.solver.book import shipped_book
from experiments.evaluation.games import SEAT_NAMES, KeptGame
from experiments.evaluation.grading import DEFAULT_MAX_EMPTY, PositionValues
from experiments.evaluation.moves import KEPT, describe_action, move_verdict
from experiments.evaluation.tables import markdown_table
from quarto_env.core import INITIAL_STATE, NO_WINNER, State, Variant, step
from quarto_env.notation import format_position
from quarto_env.render import render_image

GRADED_MAX_EMPTY = DEFAULT_MAX_EMPTY
"""The most empty squares of a decision that the exact solver grades by searching (outside the opening book):
``quarto grade``'s default, where it values every action fast (docs/solver.md)."""
NOT_GRADED = "not graded"
"""The mark of a learner's decision where the solver would be slow (:func:`fast_to_grade`)."""
LEARNER = "learner"
OPENING = "opening (random)"


@dataclasses.dataclass(frozen=True)
class SampleMove:
    """One action of a sample game: who played it, in which position, and the solver's verdict on it."""

    mover: str
    """``learner``, the opponent's spec, or :data:`OPENING` for the random opening's actions."""
    before: State
    action: int
    verdict: str | None
    """On the learner's decisions: ``kept``, ``won->drawn``, ``won->lost``, ``drawn->lost`` or :data:`NOT_GRADED`;
    ``None`` on the others'."""

    @property
    def lost_value(self) -> bool:
        """Whether the solver found that this move loses value."""
        return self.verdict not in (None, KEPT, NOT_GRADED)


@dataclasses.dataclass(frozen=True)
class SampleGame:
    """One sample game, replayed and graded."""

    opponent: str
    learner_seat: int
    moves: list[SampleMove]
    final: State

    @property
    def names(self) -> tuple[str, str]:
        """The players by seat (player 0 gives first)."""
        return (LEARNER, self.opponent) if self.learner_seat == 0 else (self.opponent, LEARNER)

    @property
    def first_mistake(self) -> int | None:
        """The index in :attr:`moves` of the learner's first value-losing decision, if it made one."""
        return next((ply for ply, move in enumerate(self.moves) if move.lost_value), None)

    def result(self) -> str:
        """How the game ended, for the learner."""
        if self.final.winner == NO_WINNER:
            return "draw" if self.final.over else "unfinished"
        return "the learner wins" if self.final.winner == self.learner_seat else f"{self.opponent} wins"


def fast_to_grade(variant: Variant, state: State) -> bool:
    """Whether the exact solver values every action of ``state`` fast: at most :data:`GRADED_MAX_EMPTY` empty
    squares, or a position the rules' shipped opening book covers (:meth:`agents.solver.book.OpeningBook.covers`)."""
    book = shipped_book(variant)
    return state.num_empty <= GRADED_MAX_EMPTY or (book is not None and book.covers(state))


def graded_games(kept: list[KeptGame], opponent: str, variant: Variant, values: PositionValues) -> list[SampleGame]:
    """The ``kept`` games of an evaluation against ``opponent``, replayed from the empty board, with each of the
    learner's decisions graded by ``values`` (the exact solver, cached over the run) where it is fast
    (:func:`fast_to_grade`)."""
    games = []
    for game in kept:
        state, moves = INITIAL_STATE, []
        for ply, action in enumerate((*game.opening, *game.actions)):
            if ply < len(game.opening):
                mover, verdict = OPENING, None
            elif state.to_move == game.learner_seat:
                graded = fast_to_grade(variant, state)
                mover, verdict = LEARNER, move_verdict(values.action_values(state), action) if graded else NOT_GRADED
            else:
                mover, verdict = opponent, None
            moves.append(SampleMove(mover, state, action, verdict))
            state = step(variant, state, action)
        games.append(SampleGame(opponent, game.learner_seat, moves, state))
    return games


def game_markdown(game: SampleGame) -> str:
    """``game`` as Markdown: a line with the players, the result and the count of value-losing decisions, then a
    table of the moves -- each in words, the position it leads to in the project's notation, and the solver's
    verdict on the learner's decisions (the value-losing ones in bold)."""
    learner_moves = [move for move in game.moves if move.mover == LEARNER]
    graded = [move for move in learner_moves if move.verdict != NOT_GRADED]
    lost = sum(move.lost_value for move in graded)
    mistake = game.first_mistake
    first = f", the first at move {mistake + 1}" if mistake is not None else ""
    head = (
        f"**learner ({SEAT_NAMES[game.learner_seat]}) vs {game.opponent}**: {game.result()}. "
        f"The solver graded {len(graded)} of the learner's {len(learner_moves)} decisions: "
        f"{lost} lost value{first}."
    )
    rows = []
    after_states = [*(move.before for move in game.moves[1:]), game.final]
    for number, (move, after) in enumerate(zip(game.moves, after_states, strict=True), 1):
        verdict = move.verdict or ""
        rows.append(
            [
                str(number),
                move.mover,
                describe_action(move.before, move.action),
                f"`{format_position(after)}`",
                f"**{verdict}**" if move.lost_value else verdict,
            ]
        )
    return head + "\n\n" + markdown_table(["move", "player", "action", "position after", "solver"], rows)


def mistake_picture(game: SampleGame, variant: Variant) -> np.ndarray:
    """The position of the learner's first value-losing decision, before it, with the move and the verdict as its
    caption; the final position when the learner made none. ``(H, W, 3)`` RGB."""
    ply = game.first_mistake
    if ply is None:
        return render_image(variant, game.final, game.names, f"no value-losing decision found: {game.result()}")
    move = game.moves[ply]
    caption = f"move {ply + 1}: learner {describe_action(move.before, move.action)} -- {move.verdict}"
    return render_image(variant, move.before, game.names, caption)
