"""``quarto play``: play a game in the terminal against an agent.

Example usage::

    quarto play --opponent minimax:depth=3 --first you
    quarto play --opponent mcts:time=1 --squares --save my_game.jsonl
    quarto play --opponent greedy --save my_game.jsonl --overwrite   # replace an earlier game

The board is the environment's text picture (:func:`quarto_env.render.render_text`): every piece shows its
hex digit and a four-letter code with one letter per attribute, the piece in hand and the pieces left are
listed under the board, empty squares show their numbers, and the columns are labelled ``a``-``d``, the rows
``1``-``4``. Moves are typed simply:

* a **square**: its number ``0``-``15``, or its column letter and row number as labelled, ``a1``-``d4`` (``a1``
  is square 0, top left; ``d4`` square 15, bottom right);
* a **piece**: its hex digit ``0``-``f``, or its code such as ``TDSH`` or ``slrf`` (letters in the order
  height, colour, shape, top; case does not matter);
* ``declare`` (or ``quarto``) in the declaration variant, ``help``, ``quit``.

Wrong input is explained and asked again; the game never crashes on it, nor on end of input (Ctrl-D).
``--save FILE`` is checked before the game starts (not a folder, not a device, a place that can be written;
an existing file is replaced only with ``--overwrite``), so that a game is never played only to be lost.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from agents.base import Agent
from agents.match import GameRecord
from agents.storage.files import atomic_write_text
from experiments.arena.records import record_line
from experiments.evaluation.moves import describe_action
from experiments.options import (
    CommandParser,
    add_out_argument,
    add_progress_and_variant_arguments,
    add_seed_argument,
    agent_or_exit,
    check_specs,
    parse_command,
)
from experiments.output import add_overwrite_argument, claim_if_asked
from quarto_env.core import DECLARE, INITIAL_STATE, NO_WINNER, NUM_SQUARES, State, Variant, legal_actions, step
from quarto_env.errors import QuartoValueError
from quarto_env.notation import format_position
from quarto_env.render import COLUMN_LABELS, HEX, PIECE_LETTERS, piece_code, render_text, square_name

FIRST_CHOICES = ("you", "agent", "random")
HUMAN = "you"


class QuitGame(Exception):
    """The player asked to stop, or the input ended."""


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``quarto play``."""
    parser = CommandParser(
        prog="quarto play",
        description="Play Quarto in the terminal against an agent.",
        epilog="Type 'help' during the game for the move syntax.",
    )
    parser.add_argument("--opponent", required=True, metavar="SPEC", help="the agent to play, e.g. minimax:depth=3")
    parser.add_argument("--first", choices=FIRST_CHOICES, default="random", help="who gives the first piece")
    add_seed_argument(parser, "seed of the agent and of --first random", default=None)
    add_out_argument(
        parser, "--save", type=Path, default=None, metavar="FILE", help="write the game as a games.jsonl line here"
    )
    add_overwrite_argument(parser)
    # play draws no bar; the flag is taken all the same, so that one command line serves every command
    add_progress_and_variant_arguments(parser, "progress bar (play draws none)")
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto play``."""
    parser, args, variant = parse_command(build_parser, argv)
    check_specs(parser, [args.opponent])
    with claim_if_asked(args.out, "file", overwrite=args.overwrite, prog=parser.prog):  # held while playing
        return _play_and_save(parser, args, variant)


def _play_and_save(parser: argparse.ArgumentParser, args: argparse.Namespace, variant: Variant) -> int:
    """Play the game of the command line and save it to ``--out`` if given; the exit status."""
    rng = np.random.default_rng(args.seed)
    human_first = args.first == "you" or (args.first == "random" and bool(rng.integers(2)))
    human_player = 0 if human_first else 1
    agent = agent_or_exit(parser, args.opponent, variant, seed=int(rng.integers(2**32)))
    names = (HUMAN, f"agent {args.opponent}") if human_first else (f"agent {args.opponent}", HUMAN)
    print(f"You play {'first: you give the first piece' if human_first else 'second: the agent gives first'}.")
    print("Type 'help' for how to enter moves.\n")
    try:
        record = play(variant, agent, human_player, names)
    except KeyboardInterrupt:
        print("\ninterrupted -- game abandoned.")
        return 130
    if args.out:
        return save_game(args.out, record_line(record, variant))
    return 0


def save_game(path: Path, line: str) -> int:
    """Write the game's record ``line`` to ``path``; returns the exit status (1, with a message, if it fails)."""
    try:
        atomic_write_text(path, line)
    except OSError as error:  # the disk filled up, or the folder went away, during the game
        print(f"quarto play: the game could not be saved to {path}: {error.strerror or error}", file=sys.stderr)
        print(f"the record: {line}", end="", file=sys.stderr)
        return 1
    print(f"game saved to {path} (quarto replay {path})")
    return 0


def play(variant: Variant, agent: Agent, human_player: int, names: tuple[str, str]) -> GameRecord:
    """Play one game, the person at ``human_player``; returns its record (ended early if they quit)."""
    record = GameRecord(seats=(names[0], names[1]))
    agent.reset()
    state = INITIAL_STATE
    while not state.over:
        if state.to_move == human_player:
            print(f"\n{render_text(variant, state, names)}")
            print(f"position: {format_position(state)}")
            try:
                action = ask_action(variant, state)
            except QuitGame as stop:
                print(f"\n{stop} -- game abandoned.")
                record.end = "abandoned"
                return record
        else:
            action = agent.act(state)
            print(f">>> {names[state.to_move]} {describe_action(state, action)}")
        record.positions.append(format_position(state))
        record.actions.append(int(action))
        state = step(variant, state, action)
    print(f"\n{render_text(variant, state, names)}")
    record.winner = state.winner
    record.end = "draw" if state.winner == NO_WINNER else "win"
    verdict = "draw" if state.winner == NO_WINNER else ("you win!" if state.winner == human_player else "you lose.")
    print(f"\nGame over: {verdict}")
    return record


def ask_action(variant: Variant, state: State) -> int:
    """Read actions from the terminal until one is legal in ``state``; raises :class:`QuitGame` on quit or EOF."""
    prompt = "your move: place on square (0-15 or a1-d4)" if state.placing else "your move: give a piece (0-f or code)"
    if variant.declaration:
        prompt += ", or 'declare'"
    while True:
        try:
            text = input(f"{prompt} > ")
        except EOFError:
            raise QuitGame("input ended") from None
        except KeyboardInterrupt:
            raise QuitGame("interrupted") from None
        word = text.strip()
        if word.lower() in ("quit", "exit", "q"):
            raise QuitGame("you quit")
        if word.lower() in ("help", "h", "?"):
            print(HELP)
            continue
        try:
            return parse_action(variant, state, word)
        except ValueError as error:
            print(f"  {error}")


HELP = """\
  Squares: a number 0-15 (shown on the empty squares), or a1-d4: column a-d from the left, row 1-4 from the top.
  Pieces: the hex digit 0-f, or the code of four letters in the order height, colour, shape, top:
          T tall / s short, D dark / l light, S square / r round, H hollow / f solid (filled); e.g. TDSH, slrf.
  declare (or quarto): claim a winning group, in the declaration variant.
  quit: leave the game."""


def parse_action(variant: Variant, state: State, word: str) -> int:
    """The action that ``word`` names in ``state`` (case-insensitive); ``ValueError`` says what is wrong and what
    is allowed."""
    if word.lower() in ("declare", "quarto", "quarto!"):
        if not variant.declaration:
            raise QuartoValueError("there is no declaring in this variant (start with --declaration to play it)")
        return DECLARE
    if not word:
        raise QuartoValueError("please type a move (or 'help')")
    legal = legal_actions(variant, state)
    if state.placing:
        square = parse_square(word)
        if square not in legal:
            free = " ".join(str(s) for s in legal if s < NUM_SQUARES)
            raise QuartoValueError(f"square {square} ({square_name(square)}) is taken; empty squares: {free}")
        return square
    piece = parse_piece(word)
    if piece not in legal:
        left = " ".join(HEX[p] for p in legal if p < NUM_SQUARES)
        raise QuartoValueError(f"piece {HEX[piece]} ({piece_code(piece)}) is not available; pieces left: {left}")
    return piece


def parse_square(word: str) -> int:
    """A square from ``0``-``15`` or ``a1``-``d4``."""
    if word.isdigit():
        if int(word) < NUM_SQUARES:
            return int(word)
        raise QuartoValueError(f"square {word} does not exist: squares are 0-15 or a1-d4")
    column, row = word[:1].lower(), word[1:]
    if len(word) == 2 and column in COLUMN_LABELS and row in ("1", "2", "3", "4"):
        return 4 * (int(row) - 1) + COLUMN_LABELS.index(column)
    raise QuartoValueError(f"{word!r} is not a square: type a number 0-15 or a column a-d and a row 1-4, e.g. b3")


def parse_piece(word: str) -> int:
    """A piece from its hex digit or its four-letter code (case-insensitive)."""
    if len(word) == 1 and word.lower() in HEX:
        return HEX.index(word.lower())
    if len(word) == 4:
        piece = 0
        for k, letter in enumerate(word.lower()):
            values = [v.lower() for v in PIECE_LETTERS[k]]
            if letter not in values:
                break
            piece |= values.index(letter) << k
        else:
            return piece
    raise QuartoValueError(f"{word!r} is not a piece: type its hex digit 0-f, or a code like TDSH (see 'help')")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
