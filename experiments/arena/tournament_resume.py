"""Finishing an interrupted tournament (``quarto tournament --resume DIR``): the settings its ``config.json``
fixes, the refusal of a command that would change them, and the games its ``games.jsonl`` already holds, each
checked against the schedule and replayed through the rules. What makes a folder hold a run is said here too
(:func:`holds_tournament`); the folder itself is claimed, locked and checked by :mod:`experiments.output`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.match import GameRecord, opening_state
from agents.storage.files import atomic_write_text
from experiments.arena.records import check_record, unsealed_record
from experiments.arena.schedule import GameJob, PlayedGame
from experiments.options import input_file_or_exit, warn
from experiments.run_folder import code_version
from quarto_env.checks import shortened
from quarto_env.core import RulesError, State, Variant, step
from quarto_env.notation import format_position

ConfigOf = Callable[[argparse.Namespace], dict[str, Any]]
"""The ``config.json`` settings a tournament command line means (the command's own reading of its arguments)."""

GAMES_FILE = "games.jsonl"
SETTINGS_FLAGS = {
    "agents": "the agents",
    "mode": "--mode",
    "games_per_pair": "--games",
    "opening_plies": "--opening-plies",
    "seed": "--seed",
    "time_limit": "--time-limit",
    "anchor": "--anchor",
    "intervals": "--intervals",
    "bootstrap": "--bootstrap",
    "prior_draws": "--prior-draws",
    "variant": "the rule variant",
}
"""The settings that decide a tournament's games and results (``config.json`` keys), and the flag that sets each:
a resumed run must keep them."""
FREE_OPTIONS = ("resume", "out", "overwrite", "jobs", "no_progress", "tensorboard")
"""Options that a resumed run may change: they decide how the games are played, not which."""


def holds_tournament(folder: Path) -> bool:
    """Whether ``folder`` holds a tournament: its ``config.json`` or its ``games.jsonl``."""
    return (folder / "config.json").exists() or (folder / GAMES_FILE).exists()


def resumed_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str], config_of: ConfigOf
) -> argparse.Namespace:
    """The settings of the run in ``args.resume`` (read from its ``config.json``), with this command's free
    options; a setting given here that would change the run's games or results exits naming it."""
    folder = args.resume
    if not os.path.isdir(folder):  # not Path.is_dir, which raises for a name too long to look up
        what = "a file, not a tournament's folder" if os.path.lexists(folder) else "no such folder"
        parser.error(f"--resume {folder}: {what}, so no tournament to finish")
    if args.out is not None and args.out.resolve() != folder.resolve():
        parser.error(f"--resume {folder} writes into that folder; drop --out {args.out}")
    stored = _stored_config(parser, folder)
    run_args = parser.parse_args(stored["argv"])
    run_config = config_of(run_args)
    edited = _differences(stored, run_config)
    if edited:
        parser.error(f"--resume {folder}: its config.json does not match its own command line ({edited})")
    _refuse_changed_settings(parser, args, argv, run_args, run_config, config_of)
    for dest in FREE_OPTIONS:
        setattr(run_args, dest, getattr(args, dest))
    _warn_if_other_code(parser, stored)
    return run_args


def _refuse_changed_settings(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    argv: list[str],
    run_args: argparse.Namespace,
    run_config: dict[str, Any],
    config_of: ConfigOf,
) -> None:
    """Exit naming each setting that ``argv`` gives and that would change the run's games or results."""
    given = _given_options(parser, argv) - set(FREE_OPTIONS)
    if not given:
        return
    asked = argparse.Namespace(**{**vars(run_args), **{dest: getattr(args, dest) for dest in given}})
    changed = _differences(run_config, config_of(asked))
    if changed:
        parser.error(
            f"--resume {args.resume}: this command changes settings of the run: {changed}. Drop those options to "
            "finish the run as it started, or start a new run in another folder"
        )


def _warn_if_other_code(parser: argparse.ArgumentParser, stored: dict[str, Any]) -> None:
    """Warn when the run was started by another commit: its remaining games may not be those it would have played."""
    code = stored.get("code")
    started = code.get("commit") if isinstance(code, dict) else None
    now = code_version()["commit"]
    if started is not None and started != now:
        warn(
            parser,
            f"the run started at commit {started}, this code is {now}: the games left may differ from "
            "those of an uninterrupted run",
        )


def _stored_config(parser: argparse.ArgumentParser, folder: Path) -> dict[str, Any]:
    """The ``config.json`` of the tournament in ``folder``; exits if there is none or it is not a tournament's."""
    path = folder / "config.json"
    if path.exists():  # a pipe or a folder in its place is refused before it is read
        input_file_or_exit(parser, path, f"--resume {folder}: its config.json")
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        parser.error(f"--resume {folder}: no config.json there, so no tournament to finish")
    except (OSError, ValueError) as error:  # unreadable, not UTF-8, not JSON
        parser.error(f"--resume {folder}: config.json cannot be read: {shortened(str(error))}")
    keys = ["argv", *SETTINGS_FLAGS]
    if not isinstance(stored, dict) or not all(key in stored for key in keys) or not _is_text_list(stored["argv"]):
        parser.error(f"--resume {folder}: its config.json is not that of a tournament started by this version")
    return stored


def _is_text_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _differences(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The settings that differ between two configurations, as ``--seed 7 -> 8; ...``; empty if none."""
    changed = [key for key in SETTINGS_FLAGS if before.get(key) != after.get(key)]
    return "; ".join(
        f"{SETTINGS_FLAGS[key]} {_setting_text(key, before.get(key))} -> {_setting_text(key, after.get(key))}"
        for key in changed
    )


def _setting_text(key: str, value: Any) -> str:
    """A setting as a message shows it: the variant by its rules, the agents by their specs."""
    if key == "agents" and _is_text_list(value):
        return " ".join(value)
    if key == "variant" and isinstance(value, dict):
        try:
            return f"({Variant.make(**value).describe()})"
        except (TypeError, ValueError):  # RulesError is a ValueError
            pass
    return shortened(json.dumps(value))


def _given_options(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The options (argparse destinations) that ``argv`` sets, as opposed to those left at their defaults."""
    unset = object()
    namespace = argparse.Namespace(**{dest: unset for dest in vars(parser.parse_args([]))})
    parser.parse_args(argv, namespace=namespace)
    given = {dest for dest, value in vars(namespace).items() if value is not unset}
    return given - {"agents"} if not namespace.agents else given


def games_already_played(
    parser: argparse.ArgumentParser, folder: Path, names: list[str], variant: Variant, jobs: list[GameJob]
) -> list[PlayedGame]:
    """The games of ``folder``'s ``games.jsonl``, each proved by its seal (:func:`unsealed_record`: not altered
    since it was written, by this format) and checked against the schedule. A torn last line (the run was killed
    while writing it) is dropped with a warning; any other bad line exits naming it."""
    path = folder / GAMES_FILE
    if path.exists():  # a pipe or a folder in its place is refused before it is read
        input_file_or_exit(parser, path, f"--resume {folder}: its {GAMES_FILE}")
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as error:
        parser.error(f"--resume {folder}: {GAMES_FILE} cannot be read: {error}")
    lines = text.split("\n")  # the last item is "" when the file ends with its newline
    played: dict[int, PlayedGame] = {}
    for number, line in enumerate(lines[:-1], 1):
        try:
            data = unsealed_record(json.loads(line), "it")
        except ValueError as error:  # JSONDecodeError and RecordError are ones
            parser.error(
                f"--resume {folder}: {GAMES_FILE} line {number}: {shortened(str(error))}; remove that line to "
                "play its game again"
            )
        try:
            game = _played_game(data, names, variant, jobs)
        except ValueError as error:
            parser.error(f"--resume {folder}: {GAMES_FILE} line {number}: {shortened(str(error))}")
        if game.job.index in played:
            parser.error(f"--resume {folder}: {GAMES_FILE} line {number} repeats game {game.job.index}")
        played[game.job.index] = game
    if lines[-1]:
        warn(parser, f"{path}: dropped its last line, cut short when the run was stopped; that game is played again")
        atomic_write_text(path, "".join(f"{line}\n" for line in lines[:-1]))
    return list(played.values())


def _played_game(data: object, names: list[str], variant: Variant, jobs: list[GameJob]) -> PlayedGame:
    """The game of one ``games.jsonl`` record, once its schedule fields match ``jobs`` and its moves replay
    through the rules to its result; ``ValueError`` says what does not match."""
    check_record(data)
    assert isinstance(data, dict)  # check_record made sure
    index = data.get("game")
    if type(index) is not int or not 0 <= index < len(jobs):
        raise ValueError(f"game must be an index 0-{len(jobs) - 1} of this tournament's schedule, got {index!r}")
    job = jobs[index]
    scheduled = {
        "pair": list(job.pair),
        "round": job.round,
        "seed": job.seed,
        "opening": list(job.opening),
        "seats": [names[s] for s in job.seats],
        "variant": variant.to_dict(),
    }
    wrong = [key for key, value in scheduled.items() if data.get(key) != value]
    if wrong:
        raise ValueError(f"game {index} is not the one this tournament schedules: its {', '.join(wrong)} differ")
    fields = {f.name: data[f.name] for f in dataclasses.fields(GameRecord) if f.name in data}
    record = GameRecord(**{**fields, "seats": tuple(fields["seats"])})
    _check_replay(record, variant, opening_state(variant, job.opening))
    return PlayedGame(job, record)


def _check_replay(record: GameRecord, variant: Variant, state: State) -> None:
    """``ValueError`` unless ``record``'s actions, played from ``state``, pass its positions and end as it says."""
    if len(record.move_seconds) != len(record.positions):
        raise ValueError("it has not one move time per position")
    for move, action in enumerate(record.actions):
        if move >= len(record.positions) or record.positions[move] != format_position(state):
            raise ValueError(f"move {move} does not start from its recorded position")
        try:
            state = step(variant, state, action)
        except RulesError as error:
            raise ValueError(f"move {move}: {error}") from None
    forfeit = record.end == "forfeit" and len(record.positions) == len(record.actions) + 1
    if forfeit and record.positions[-1] == format_position(state) and record.winner == 1 - state.to_move:
        return
    ended = record.end in ("win", "draw") and len(record.positions) == len(record.actions)
    if ended and state.over and record.winner == state.winner:
        return
    raise ValueError("its moves do not lead to its recorded end and winner")
