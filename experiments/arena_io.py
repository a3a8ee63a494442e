"""Pieces shared by the arena commands (``tournament``, ``grade``, ``play``, ``replay``): the rule-variant
flags, numeric options and output folders checked with a one-line message, warnings, the run folder's
``config.json`` + ``command.txt``, and the game-record line.

A **game record** is one JSON object per line (``games.jsonl``), read by ``quarto replay``: the fields of
:class:`agents.match.GameRecord` (``seats``, ``actions``, ``winner``, ``end``, ``move_seconds``,
``positions``), the rule ``variant`` (``Variant.to_dict``), and whatever the writer adds (a tournament adds
its schedule: ``game``, ``pair``, ``round``, ``seed``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.base import Agent, SpecError, make_agent, parse_spec
from agents.match import GameRecord
from quarto_env.checks import (
    OutputPathError,
    atomic_write_text,
    checked_number,
    number_argument,
    output_folder,
    shortened,
)
from quarto_env.core import ATTRIBUTES, DECLARE, FALSE_DECLARATION_POLICIES, NO_WINNER, STANDARD, RulesError, Variant


def add_variant_arguments(parser: argparse.ArgumentParser, several_words: bool = False) -> None:
    """Add ``--attributes``, ``--squares``, ``--declaration`` and ``--false-declaration`` to ``parser``: the one
    spelling of the rule variant of every command that takes one. ``--attributes`` takes a count 1-4 or names
    joined by commas (``colour,shape``); with ``several_words`` (commands whose positional arguments come
    first, such as ``solve``) also names as separate words (``colour shape``). Commands that take a list of
    agents after their options keep one word, so that ``--attributes colour random greedy`` reads two agents."""
    group = parser.add_argument_group("rule variant (default: standard Quarto)")
    names = f"names among {','.join(ATTRIBUTES)}"
    group.add_argument(
        "--attributes",
        nargs="+" if several_words else None,
        type=_attribute_word,
        default=None,
        metavar="A",
        help=f"attributes that count for a win: a count 1-4, or {names} joined by commas"
        + (" or given as separate words" if several_words else "")
        + " (default: all)",
    )
    group.add_argument("--squares", action="store_true", help="the 2x2 blocks are groups too (advanced variant)")
    group.add_argument("--declaration", action="store_true", help='a win must be declared ("Quarto!")')
    group.add_argument(
        "--false-declaration",
        choices=FALSE_DECLARATION_POLICIES,
        default="lose",
        help="with --declaration: what a declaration with nothing to claim does (default: lose)",
    )


def check_specs(parser: argparse.ArgumentParser, specs: list[str]) -> None:
    """Exit with a usage error naming the first spec that names no known agent kind or option."""
    for spec in specs:
        try:
            parse_spec(spec)
        except SpecError as error:
            parser.error(str(error))


def agent_or_exit(parser: argparse.ArgumentParser, spec: str, variant: Variant, seed: int | None) -> Agent:
    """``make_agent(spec, variant, seed)``; a bad spec or an agent that cannot be built (a missing checkpoint)
    exits with a usage error naming the problem."""
    try:
        return make_agent(spec, variant, seed)
    except (SpecError, ValueError, OSError) as error:
        parser.error(f"agent {spec!r} cannot be built: {error}")


def variant_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Variant:
    """The variant named by the flags of :func:`add_variant_arguments`; a value the rules refuse (an unknown
    attribute, ``--false-declaration penalty`` without ``--declaration``) exits with a one-line usage error."""
    try:
        return Variant.make(_attributes(args.attributes), args.squares, args.declaration, args.false_declaration)
    except RulesError as error:
        parser.error(str(error))


def _attributes(words: list[str] | str | None) -> int | list[str] | None:
    """What the word(s) of ``--attributes`` name: ``None`` (all), a count, or attribute names."""
    if words is None:
        return None
    if isinstance(words, str):
        words = [words]
    if len(words) == 1 and words[0].strip().isdecimal():
        return int(words[0])
    return [name for word in words for name in word.replace("+", ",").split(",") if name]


def _attribute_word(word: str) -> str:
    """One word of ``--attributes``, checked alone: a bad one is named at once, also when it is a positional
    argument that the list swallowed (argparse would only say that the positional is missing)."""
    try:
        Variant.make(_attributes([word]))
    except RulesError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return word


MAX_SEED = 2**32 - 1
"""The largest seed of the arena commands: numpy's legacy range, as for ``quarto train``."""
SEED = number_argument("seed", minimum=0, maximum=MAX_SEED, integer=True)
"""The argparse ``type=`` of ``--seed``."""


def output_folder_or_exit(parser: argparse.ArgumentParser, path: Path, option: str) -> Path:
    """``path`` created as a writable output folder, checked before any work starts; a file, a device such as
    ``/dev/null`` or an unwritable place exits with a usage error naming ``option``."""
    try:
        return output_folder(path, option)
    except OutputPathError as error:
        parser.error(str(error))


def warn(parser: argparse.ArgumentParser, message: str) -> None:
    """Print ``PROG: warning: message`` on stderr: something the user should know, that does not stop the run."""
    print(f"{parser.prog}: warning: {message}", file=sys.stderr)


def save_run_config(folder: Path, command: str, argv: list[str], config: dict[str, Any]) -> None:
    """Write ``config.json`` (the resolved configuration, plus the code version under ``"code"``) and
    ``command.txt`` (the command line) in ``folder``."""
    config = {**config, "code": code_version()}
    atomic_write_text(folder / "config.json", json.dumps(config, indent=2, sort_keys=True) + "\n")
    line = shlex.join(["quarto", command, *argv])
    atomic_write_text(folder / "command.txt", f"{line}\n# python {sys.version.split()[0]}, cwd {os.getcwd()}\n")


def code_version(root: Path | None = None) -> dict[str, Any]:
    """The git commit of the code in ``root`` (default: this checkout) and whether tracked files differ from it:
    the same seed gives the same games only with the same code (``None`` fields outside a git checkout).

    Only reads the repository: the commit comes from ``.git``'s files, the changes from ``git status
    --no-optional-locks``, which neither refreshes nor locks the index (a plain ``git status`` rewrites it and
    changes ``.git``'s mtime)."""
    root = root or Path(__file__).resolve().parent.parent
    git_dir = _git_dir(root)
    if git_dir is None:
        return {"commit": None, "uncommitted_changes": None}
    return {"commit": _head_commit(git_dir), "uncommitted_changes": _has_uncommitted_changes(root)}


def _git_dir(root: Path) -> Path | None:
    """``root/.git``, or the folder a ``.git`` file points to (a worktree or a submodule)."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (root / text.removeprefix("gitdir:").strip()).resolve() if text.startswith("gitdir:") else None


def _head_commit(git_dir: Path) -> str | None:
    """The commit HEAD names, read from ``HEAD``, the ref's file or ``packed-refs``; ``None`` if unreadable."""
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        common = git_dir / (git_dir / "commondir").read_text().strip() if (git_dir / "commondir").exists() else git_dir
        if not head.startswith("ref:"):
            return _commit_or_none(head)  # a detached HEAD holds the commit itself
        ref = head.removeprefix("ref:").strip()
        for folder in (git_dir, common):
            if (folder / ref).is_file():
                return _commit_or_none((folder / ref).read_text(encoding="utf-8").strip())
        packed = (common / "packed-refs").read_text(encoding="utf-8") if (common / "packed-refs").exists() else ""
    except (OSError, UnicodeDecodeError):
        return None
    for line in packed.splitlines():
        commit, _, name = line.partition(" ")
        if name == ref:
            return _commit_or_none(commit)
    return None  # a branch without commits yet


def _commit_or_none(text: str) -> str | None:
    is_hash = len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)  # SHA-1 or SHA-256
    return text if is_hash else None


def _has_uncommitted_changes(root: Path) -> bool | None:
    """Whether tracked files differ from the commit, by a ``git status`` that writes nothing; ``None`` without git."""
    command = ["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"]
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(done.stdout.strip())


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def record_line(record: GameRecord, variant: Variant, **extra: Any) -> str:
    """One ``games.jsonl`` line (with its newline) for ``record`` played under ``variant``."""
    return json.dumps({**extra, "variant": variant.to_dict(), **record.to_dict()}) + "\n"


# ---------------------------------------------------------------------------------------------------------
# Reading game records back
# ---------------------------------------------------------------------------------------------------------
RECORD_ENDS = {"win": (0, 1), "forfeit": (0, 1), "draw": (NO_WINNER,), "abandoned": (NO_WINNER,)}
"""How a recorded game can end (``GameRecord.end``, and ``"abandoned"`` from ``quarto play``), and the
``winner`` values each allows."""


class RecordError(ValueError):
    """A game record that cannot be read or replayed."""


def check_record(record: object) -> Variant:
    """The rule variant of ``record`` (one parsed ``games.jsonl`` line) once the kind and range of each field the
    format defines are checked: ``variant``, ``seats``, ``actions``, ``opening``, ``move_seconds``,
    ``positions``, ``winner``, ``end``. :class:`RecordError` names the first bad one. Whether the actions are
    legal and agree with the winner and the positions, only a replay tells (``quarto replay`` does)."""
    if not isinstance(record, dict):
        raise RecordError(f"a game record is a JSON object {{...}}, got {_echo(record)}")
    missing = [key for key in ("variant", "seats", "actions") if key not in record]
    if missing:
        raise RecordError(f"not a game record: missing {', '.join(missing)}")
    variant = record_variant(record)
    _check_list(record, "seats", _is_text, "a list of two names", length=2)
    _check_list(record, "actions", _is_action, f"a list of actions, integers 0-{DECLARE}")
    _check_list(record, "opening", _is_action, f"a list of actions, integers 0-{DECLARE}")
    _check_list(record, "move_seconds", _is_seconds, "a list of seconds, finite numbers >= 0")
    _check_list(record, "positions", _is_text, "a list of position strings")
    _check_end(record)
    return variant


def record_variant(record: dict) -> Variant:
    """The rule variant that ``record`` was played under; :class:`RecordError` if it names none."""
    value = record["variant"]
    if not isinstance(value, dict):
        raise RecordError(f"variant must be a JSON object such as {json.dumps(STANDARD.to_dict())}, got {_echo(value)}")
    try:
        return Variant.make(**value)
    except (TypeError, ValueError) as error:  # an unknown key, or a value the rules refuse
        raise RecordError(f"the variant {_echo(value)} is not valid: {shortened(str(error))}") from None


def _check_list(
    record: dict, key: str, is_item: Callable[[object], bool], allowed: str, length: int | None = None
) -> None:
    value = record.get(key, [])
    if not isinstance(value, list) or not all(map(is_item, value)) or length not in (None, len(value)):
        raise RecordError(f"{key} must be {allowed}, got {_echo(value)}")


def _check_end(record: dict) -> None:
    end, winner = record.get("end"), record.get("winner", NO_WINNER)
    if type(winner) is not int or winner not in (NO_WINNER, 0, 1):
        raise RecordError(f"winner must be 0, 1 or {NO_WINNER} (no winner), got {_echo(winner)}")
    if end is None:
        return
    if not isinstance(end, str) or end not in RECORD_ENDS:
        raise RecordError(f"end must be one of {', '.join(RECORD_ENDS)}, got {_echo(end)}")
    if winner not in RECORD_ENDS[end]:
        allowed = " or ".join(str(w) for w in RECORD_ENDS[end])
        raise RecordError(f"a game that ends in {end!r} has winner {allowed}, got {winner}")


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_action(value: object) -> bool:
    return type(value) is int and 0 <= value <= DECLARE


def _is_seconds(value: object) -> bool:
    try:
        checked_number(value, "seconds", minimum=0)
    except ValueError:
        return False
    return True


def _echo(value: object) -> str:
    """``value`` as JSON, shortened: a message quotes a bad field, not a whole line of junk."""
    return shortened(json.dumps(value, default=repr))
