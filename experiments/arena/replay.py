"""``quarto replay``: step through a recorded game, or write it as an animated GIF or PNG frames.

Example usage::

    quarto replay runs/tournament__0__20260101-120000/games.jsonl --game 3
    quarto replay games.jsonl --game 3 --gif game3.gif --frames frames/
    quarto replay games.jsonl --html games.html --grade

A record is one line of a ``games.jsonl`` file (written by ``quarto tournament`` and ``quarto play
--save``; the format is in :mod:`experiments.arena.records`). Before anything is shown, the record is checked: the
kind and range of every field (:func:`experiments.arena.records.check_record`), then a replay through the rules
core from its random ``opening`` (if it has one) and its actions, which must be legal, pass through the
positions the record lists, and end as its ``end`` and ``winner`` say. A record that fails is reported in one
line naming the file's line and the game (exit status 2), instead of being shown wrongly. So are ``--gif`` and
``--frames`` paths that cannot be written, before anything is rendered.

Interactively, each move is shown as the environment's text picture; press Enter for the next move, ``q``
then Enter to stop. With ``--gif`` or ``--frames`` the pictures (:func:`quarto_env.render.render_image`) are
written instead, one per position, and nothing waits for the keyboard. With ``--html`` every game of the file is
checked and written into one self-contained HTML page (:mod:`experiments.arena.viewer`), with ``--grade`` the
exact solver's verdict on each move: one value-only solve per position, the games shared among ``--jobs`` worker
processes (default: all cores), a progress bar on stderr (:func:`experiments.arena.viewer.graded_verdicts`).
Rules with no opening book (the declaration variant) are refused for ``--grade``, whose early positions would
take the solver minutes each.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agents.storage.files import atomic_write, atomic_write_text, input_file
from experiments.arena.records import RecordError, check_record, record_variant
from experiments.evaluation.moves import describe_action
from experiments.options import (
    CommandParser,
    add_integer_argument,
    add_jobs_argument,
    add_number_argument,
    add_progress_argument,
    all_cores,
    capped_jobs,
    refuse_unused,
)
from experiments.output import add_overwrite_argument, claim_if_asked, claim_output
from quarto_env.checks import shortened
from quarto_env.core import INITIAL_STATE, NO_WINNER, RulesError, State, Variant, step
from quarto_env.notation import format_position
from quarto_env.render import render_image, render_text

if TYPE_CHECKING:
    from experiments.arena.viewer import ViewedGame

__all__ = ["RecordError", "load_game", "load_games", "main", "read_record", "replay_frames"]

MIN_DELAY, MAX_DELAY = 0.01, 60.0
"""Seconds per GIF frame: a GIF counts in hundredths of a second and holds a frame at most 655 s (the last
frame shows three times as long)."""

Frame = tuple[State, str | None]
"""A position and its caption: the move that led to it, or ``None``."""


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``quarto replay``."""
    parser = CommandParser(
        prog="quarto replay",
        description="Step through a recorded game, or write it as a GIF or PNG frames, or write every game of the "
        "file into one HTML page (--html) to step through in a browser, offline.",
    )
    parser.add_argument("file", type=Path, help="a games.jsonl file")
    add_integer_argument(
        parser, "--game", 0, "which game of the file, from 0; blank lines do not count", fewest=0, most=None
    )
    parser.add_argument("--gif", type=Path, default=None, metavar="OUT.gif", help="write an animated GIF")
    parser.add_argument("--frames", type=Path, default=None, metavar="DIR", help="write PNG frames into DIR")
    delay = f"seconds per GIF frame, {MIN_DELAY:g}-{MAX_DELAY:g}"
    add_number_argument(parser, "--delay", 1.0, delay, minimum=MIN_DELAY, maximum=MAX_DELAY)
    parser.add_argument("--no-pause", action="store_true", help="print every move without waiting for Enter")
    parser.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="OUT.html",
        help="write one self-contained page of every game of the file (game list, board with buttons and arrow "
        "keys, move list); it opens at --game; #game=G&move=M in its address shows that position",
    )
    parser.add_argument(
        "--grade",
        action="store_true",
        help="with --html: the exact solver's verdict on each move (kept, won->drawn, won->lost, drawn->lost); "
        "needs the rules' opening book (not the declaration variant)",
    )
    add_jobs_argument(parser, "with --grade: worker processes that solve the games (default: all cores)", all_cores())
    add_progress_argument(parser, "progress bar of --grade")
    add_overwrite_argument(parser, "--gif, --frames or --html")
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto replay``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.grade and not args.html:
        parser.error("--grade grades the moves of the --html page: give --html OUT.html")
    if args.grade:
        args.jobs = capped_jobs(parser, args.jobs)
    else:
        refuse_unused(parser, args, "--grade", "--jobs")
    if args.html and (args.gif or args.frames):
        parser.error("--html writes a page of every game: use it without --gif and --frames")
    if not args.gif:
        refuse_unused(parser, args, "--gif", "--delay")  # the terminal's replay steps on Enter
    if args.html:
        return write_page(parser, args)
    try:
        record, frames = load_game(args.file, args.game)
    except RecordError as error:
        print(f"quarto replay: {error}", file=sys.stderr)
        return 2
    variant = record_variant(record)
    names = (record["seats"][0], record["seats"][1])
    if not (args.gif or args.frames):
        show(variant, names, frames, pause=not args.no_pause)
        return 0
    # Claimed before rendering: a path that cannot be written, or holds a result, is told at once.
    with (
        claim_if_asked(args.gif, "file", option="--gif", overwrite=args.overwrite, prog=parser.prog),
        claim_if_asked(args.frames, "folder", option="--frames", overwrite=args.overwrite, prog=parser.prog) as staged,
    ):
        pictures = [render_image(variant, state, names, status) for state, status in frames]
        if staged is not None:
            write_frames(pictures, staged.staging)  # the folder appears whole, by one rename
        if args.gif:
            write_gif(pictures, args.gif, args.delay)
    if args.frames:
        print(f"{len(pictures)} frames written to {args.frames}")
    if args.gif:
        print(f"animated GIF of {len(pictures)} frames written to {args.gif}")
    return 0


# ---------------------------------------------------------------------------------------------------------
# Reading and checking a record
# ---------------------------------------------------------------------------------------------------------
def load_game(path: Path, index: int) -> tuple[dict, list[Frame]]:
    """Game ``index`` of the ``games.jsonl`` file ``path``, checked and replayed: the record and its frames
    (:func:`replay_frames`). :class:`RecordError` says what is wrong, naming the line and the game."""
    record, line = read_record(path, index)
    try:
        return record, replay_frames(record)
    except RecordError as error:
        raise RecordError(f"{path} line {line} (game {index}): {error}") from None


def load_games(path: Path) -> list[tuple[dict, list[Frame]]]:
    """Every game of the ``games.jsonl`` file ``path``, checked and replayed as by :func:`load_game`; the first
    bad one raises :class:`RecordError`."""
    games = []
    for index, (number, line) in enumerate(_record_lines(path)):
        record = _checked_record(path, number, index, line)
        try:
            games.append((record, replay_frames(record)))
        except RecordError as error:
            raise RecordError(f"{path} line {number} (game {index}): {error}") from None
    return games


def read_record(path: Path, index: int) -> tuple[dict, int]:
    """Game ``index`` (from 0, blank lines skipped) of the ``games.jsonl`` file ``path``, as a dict whose fields
    :func:`experiments.arena.records.check_record` has checked, and the number of its line (from 1);
    :class:`RecordError` names the line and the game of a bad record."""
    lines = _record_lines(path)
    if index >= len(lines):
        raise RecordError(f"{path} has {len(lines)} game(s): --game must be 0-{len(lines) - 1}, got {index}")
    number, line = lines[index]
    return _checked_record(path, number, index, line), number


def _record_lines(path: Path) -> list[tuple[int, bytes]]:
    """The non-blank lines of ``path`` with their numbers (from 1); :class:`RecordError` if there are none."""
    lines = [(number, line) for number, line in enumerate(_read_lines(path), 1) if line.strip()]
    if not lines:
        raise RecordError(f"{path} holds no game record: it is empty")
    return lines


def _checked_record(path: Path, number: int, index: int, line: bytes) -> dict:
    """The record on line ``number`` (game ``index``) of ``path``, its fields checked."""
    try:
        record = _parse_json(line)
        check_record(record)
    except RecordError as error:
        raise RecordError(f"{path} line {number} (game {index}): {error}") from None
    return record


def _read_lines(path: Path) -> list[bytes]:
    """The lines of ``path`` as bytes (each is decoded alone, so that a bad byte is told with its line); a named
    pipe, which would wait for a writer, or a device such as ``/dev/zero``, which would be read for ever, is
    refused (:func:`agents.storage.files.input_file`)."""
    input_file(path, "games file", RecordError)
    try:
        return path.read_bytes().split(b"\n")
    except OSError as error:
        raise RecordError(f"cannot read {path}: {error.strerror or error}") from None


def _parse_json(line: bytes) -> Any:
    try:
        return json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise RecordError(f"not UTF-8 text (byte {error.start + 1} of the line)") from None
    except json.JSONDecodeError as error:
        raise RecordError(f"not JSON: {error.msg} at character {error.pos + 1}") from None
    except (ValueError, RecursionError) as error:  # an integer of over 4300 digits, arrays nested too deep
        raise RecordError(f"JSON that cannot be read ({type(error).__name__})") from None


# ---------------------------------------------------------------------------------------------------------
# Replaying
# ---------------------------------------------------------------------------------------------------------
def replay_frames(record: dict) -> list[Frame]:
    """Each position of the game with a caption: the move that led to it (``None`` at the start, where the
    picture's own status line says who acts). The last caption tells how the game ended, a time forfeit
    included, which no state records. :class:`RecordError` if the actions are illegal, or do not agree with
    the record's positions, ``end`` or ``winner``."""
    variant = record_variant(record)
    opening, actions = record.get("opening", []), record["actions"]
    states = _replay(variant, opening, actions)
    _check_positions(record.get("positions", []), states[len(opening) :])
    _check_outcome(record, states[-1])
    names = record["seats"]
    frames: list[Frame] = [(INITIAL_STATE, None)]
    for ply, (before, action, after) in enumerate(zip(states[:-1], opening + actions, states[1:], strict=True)):
        label = f"opening move {ply + 1} (random)" if ply < len(opening) else f"move {ply + 1}"
        frames.append((after, f"{label}: {names[before.to_move]} {describe_action(before, action)}"))
    last, caption = frames[-1]
    frames[-1] = (last, f"{caption} -- {outcome(record, last)}" if caption else outcome(record, last))
    return frames


def _replay(variant: Variant, opening: list[int], actions: list[int]) -> list[State]:
    """The states from the opening position through every action; :class:`RecordError` names an illegal one."""
    states = [INITIAL_STATE]
    for key, moves in (("opening", opening), ("actions", actions)):
        for index, action in enumerate(moves):
            try:
                states.append(step(variant, states[-1], action))
            except RulesError as error:
                raise RecordError(f"{key}[{index}] = {action} is illegal: {error}") from None
    return states


def _check_positions(positions: list[str], states: list[State]) -> None:
    """``positions[i]`` is the position before the agents' move ``i``; after a forfeit, one more is listed."""
    if len(positions) > len(states):
        raise RecordError(f"{len(positions)} positions for {len(states) - 1} actions: at most one more than actions")
    for index, (text, state) in enumerate(zip(positions, states, strict=False)):
        if text != format_position(state):
            raise RecordError(
                f"positions[{index}] is {shortened(text)!r}, but the actions lead to {format_position(state)!r}"
            )


def _check_outcome(record: dict, final: State) -> None:
    """The record's ``end`` and ``winner`` agree with where its actions lead."""
    end, winner = record.get("end"), record.get("winner", NO_WINNER)
    if end in ("forfeit", "abandoned") or (end is None and not final.over):
        if final.over:
            raise RecordError(f"the record ends in {end!r}, but its actions end the game: {_result(final)}")
        if end == "forfeit" and winner != 1 - final.to_move:
            raise RecordError(f"player {winner} was to move: only player {1 - winner} can win by its forfeit")
    elif not final.over:
        raise RecordError(f"the record ends in {end!r}, but its actions stop before the game is over")
    elif "winner" in record and winner != final.winner:
        raise RecordError(f"the record has winner {winner}, but its actions end the game: {_result(final)}")


def _result(final: State) -> str:
    return "a draw" if final.winner == NO_WINNER else f"player {final.winner} wins"


def outcome(record: dict, final: State) -> str:
    """How the recorded game ended, in words."""
    names = record["seats"]
    end = record.get("end")
    if end == "forfeit":
        loser = names[1 - record["winner"]]
        return f"{loser} overran the time limit and forfeits: {names[record['winner']]} wins"
    if end == "abandoned" or not final.over:
        return "the game was stopped here"
    return "draw" if final.winner < 0 else f"{names[final.winner]} wins"


def show(variant: Variant, names: tuple[str, str], frames: list[tuple[State, str | None]], pause: bool) -> None:
    """Print each frame as text, waiting for Enter between them when ``pause``."""
    for number, (state, caption) in enumerate(frames):
        if caption:
            print(caption)
        print(render_text(variant, state, names))
        last = number == len(frames) - 1
        if pause and not last:
            try:
                answer = input(f"[{number}/{len(frames) - 1}] Enter: next move, q: quit > ")
            except (EOFError, KeyboardInterrupt):
                print()
                return
            if answer.strip().lower() in ("q", "quit"):
                return
        print()


def write_frames(pictures: list[np.ndarray], folder: Path) -> None:
    """``frame_000.png``, ``frame_001.png``, ... in ``folder``, each written atomically."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for number, picture in enumerate(pictures):
        image = Image.fromarray(picture)

        def save(temporary: Path, image: Image.Image = image) -> None:
            image.save(temporary, "PNG")

        atomic_write(folder / f"frame_{number:03d}.png", save)


def write_gif(pictures: list[np.ndarray], path: Path, delay: float) -> None:
    """An animated GIF of ``pictures``, ``delay`` seconds each (the last one three times as long)."""
    from PIL import Image

    images = [Image.fromarray(p) for p in pictures]
    durations = [int(1000 * delay)] * (len(images) - 1) + [int(3000 * delay)]

    def save(temporary: Path) -> None:
        images[0].save(temporary, "GIF", save_all=True, append_images=images[1:], duration=durations, loop=0)

    atomic_write(path, save)


def write_page(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--html``: check every game of the file, the output path and, with ``--grade``, that the solver covers
    the rules, all before anything is written; then write the page atomically."""
    from agents.solver.book import shipped_book

    try:
        games = load_games(args.file)
        if args.game >= len(games):
            raise RecordError(
                f"{args.file} has {len(games)} game(s): --game must be 0-{len(games) - 1}, got {args.game}"
            )
    except RecordError as error:
        print(f"quarto replay: {error}", file=sys.stderr)
        return 2
    variants = {record_variant(record) for record, _ in games}
    if args.grade:
        for variant in variants:
            if shipped_book(variant) is None:
                print(
                    f"quarto replay: --grade needs an opening book for {variant.describe()}, and there is none: "
                    "the solver would take minutes on each early position",
                    file=sys.stderr,
                )
                return 2
    with claim_output(args.html, "file", option="--html", overwrite=args.overwrite, prog=parser.prog):
        _write_page(args, games)
    return 0


def _write_page(args: argparse.Namespace, games: list[tuple[dict, list[Frame]]]) -> None:
    """The page of ``games`` with, with ``--grade``, the solver's verdicts, written to the claimed ``--html``."""
    from experiments.arena.viewer import graded_verdicts, viewer_page

    viewed = [_viewed_game(index, record, frames) for index, (record, frames) in enumerate(games)]
    verdicts = graded_verdicts(viewed, args.jobs, progress=not args.no_progress) if args.grade else None
    page = viewer_page(viewed, f"quarto replay: {args.file.name}", verdicts, start_game=args.game)
    atomic_write_text(args.html, page)
    graded = " with the solver's verdicts" if args.grade else ""
    print(f"{len(viewed)} game(s) written to {args.html}{graded} ({len(page.encode('utf-8')):,} bytes)")


def _viewed_game(index: int, record: dict, frames: list[Frame]) -> ViewedGame:
    """Game ``index`` of a file, as the viewer page shows it."""
    from experiments.arena.viewer import ViewedGame

    names = (record["seats"][0], record["seats"][1])
    return ViewedGame(
        title=f"game {index}: {names[0]} vs {names[1]}",
        result=outcome(record, frames[-1][0]),
        names=names,
        variant=record_variant(record),
        states=[state for state, _ in frames],
        actions=record.get("opening", []) + record["actions"],
        captions=[caption or "" for _, caption in frames[1:]],
        first_agent_move=len(record.get("opening", [])),
    )
