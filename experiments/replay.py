"""``quarto replay``: step through a recorded game, or write it as an animated GIF or PNG frames.

Example usage::

    quarto replay runs/tournament__0__20260101-120000/games.jsonl --game 3
    quarto replay games.jsonl --game 3 --gif game3.gif --frames frames/

A record is one line of a ``games.jsonl`` file (written by ``quarto tournament`` and ``quarto play
--save``; the format is in :mod:`experiments.arena_io`). The game is replayed through the rules core from its
random ``opening`` (if it has one) and its actions; where the record also lists the positions, each is
checked against the replay, so a record that does not match the rules is reported instead of shown wrongly.

Interactively, each move is shown as the environment's text picture; press Enter for the next move, ``q``
then Enter to stop. With ``--gif`` or ``--frames`` the pictures (:func:`quarto_env.render.render_image`) are
written instead, one per position, and nothing waits for the keyboard.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from experiments.play import describe_action
from quarto_env.checks import atomic_write
from quarto_env.core import INITIAL_STATE, RulesError, State, Variant, step
from quarto_env.notation import format_position
from quarto_env.render import render_image, render_text


class RecordError(ValueError):
    """A game record that cannot be read or replayed."""


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``quarto replay``."""
    parser = argparse.ArgumentParser(
        prog="quarto replay", description="Step through a recorded game, or write it as a GIF or PNG frames."
    )
    parser.add_argument("file", type=Path, help="a games.jsonl file")
    parser.add_argument("--game", type=int, default=0, help="which line of the file, from 0 (default 0)")
    parser.add_argument("--gif", type=Path, default=None, metavar="OUT.gif", help="write an animated GIF")
    parser.add_argument("--frames", type=Path, default=None, metavar="DIR", help="write PNG frames into DIR")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per GIF frame (default 1)")
    parser.add_argument("--no-pause", action="store_true", help="print every move without waiting for Enter")
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto replay``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.delay <= 0:
        parser.error(f"--delay must be > 0 seconds, got {args.delay}")
    try:
        record = read_record(args.file, args.game)
        frames = list(replay_frames(record))
    except RecordError as error:
        print(f"quarto replay: {error}", file=sys.stderr)
        return 1
    variant = record_variant(record)
    names = (str(record["seats"][0]), str(record["seats"][1]))
    if args.gif or args.frames:
        pictures = [render_image(variant, state, names, status) for state, status in frames]
        if args.frames:
            write_frames(pictures, args.frames)
            print(f"{len(pictures)} frames written to {args.frames}")
        if args.gif:
            write_gif(pictures, args.gif, args.delay)
            print(f"animated GIF of {len(pictures)} frames written to {args.gif}")
        return 0
    show(variant, names, frames, pause=not args.no_pause)
    return 0


def read_record(path: Path, index: int) -> dict:
    """Line ``index`` (from 0) of the ``games.jsonl`` file ``path``, as a dict."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as error:
        raise RecordError(f"cannot read {path}: {error.strerror}") from None
    if not 0 <= index < len(lines):
        raise RecordError(f"{path} has {len(lines)} game(s): --game must be 0-{len(lines) - 1}, got {index}")
    try:
        record = json.loads(lines[index])
    except json.JSONDecodeError as error:
        raise RecordError(f"{path} line {index + 1} is not JSON: {error.msg}") from None
    missing = [key for key in ("variant", "seats", "actions") if key not in record]
    if missing:
        raise RecordError(f"{path} line {index + 1} is not a game record: missing {', '.join(missing)}")
    return record


def record_variant(record: dict) -> Variant:
    """The rule variant a record was played under."""
    try:
        return Variant.make(**record["variant"])
    except (TypeError, RulesError) as error:
        raise RecordError(f"the record's variant {record['variant']} is not valid: {error}") from None


def replay_frames(record: dict) -> Iterator[tuple[State, str | None]]:
    """Each position of the game with a caption: the move that led to it (``None`` at the start, where the
    picture's own status line says who acts). The last caption tells how the game ended, a time forfeit
    included, which no state records."""
    variant = record_variant(record)
    names = record["seats"]
    opening = list(record.get("opening", []))
    moves = opening + list(record["actions"])
    positions = record.get("positions")
    state = INITIAL_STATE
    yield state, (None if moves else outcome(record, state))
    for ply, action in enumerate(moves):
        move = ply - len(opening)  # index among the agents' moves; negative in the opening
        if move >= 0 and positions is not None and move < len(positions) and positions[move] != format_position(state):
            raise RecordError(
                f"move {move}: the record has position {positions[move]!r}, the replay {format_position(state)!r}"
            )
        try:
            after = step(variant, state, action)
        except RulesError as error:
            raise RecordError(f"move {ply} ({action}) is illegal: {error}") from None
        label = f"opening move {ply + 1} (random)" if move < 0 else f"move {ply + 1}"
        caption = f"{label}: {names[state.to_move]} {describe_action(state, action)}"
        if ply == len(moves) - 1:
            caption += f" -- {outcome(record, after)}"
        yield after, caption
        state = after


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
