"""Pieces shared by the arena commands (``tournament``, ``grade``, ``play``, ``replay``): the rule-variant
flags, the run folder's ``config.json`` + ``command.txt``, and the game-record line.

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
from pathlib import Path
from typing import Any

from agents.base import Agent, SpecError, make_agent, parse_spec
from agents.match import GameRecord
from quarto_env.checks import atomic_write_text
from quarto_env.core import ATTRIBUTES, FALSE_DECLARATION_POLICIES, RulesError, Variant


def add_variant_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--attributes``, ``--squares``, ``--declaration`` and ``--false-declaration`` to ``parser``."""
    group = parser.add_argument_group("rule variant (default: standard Quarto)")
    group.add_argument(
        "--attributes",
        default=None,
        metavar="A",
        help=f"attributes that count for a win: a count 1-4 or names among {','.join(ATTRIBUTES)} (default: all)",
    )
    group.add_argument("--squares", action="store_true", help="the 2x2 blocks are groups too (advanced variant)")
    group.add_argument("--declaration", action="store_true", help='a win must be declared ("Quarto!")')
    group.add_argument(
        "--false-declaration",
        choices=FALSE_DECLARATION_POLICIES,
        default="lose",
        help="what a declaration with nothing to claim does (default: lose)",
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
    """The variant named by the flags of :func:`add_variant_arguments`; a bad value exits with a usage error."""
    attributes: int | str | None = args.attributes
    if isinstance(attributes, str) and attributes.isdigit():
        attributes = int(attributes)
    try:
        return Variant.make(attributes, args.squares, args.declaration, args.false_declaration)
    except RulesError as error:
        parser.error(str(error))


def save_run_config(folder: Path, command: str, argv: list[str], config: dict[str, Any]) -> None:
    """Write ``config.json`` (the resolved configuration, plus the code version under ``"code"``) and
    ``command.txt`` (the command line) in ``folder``."""
    config = {**config, "code": code_version()}
    atomic_write_text(folder / "config.json", json.dumps(config, indent=2, sort_keys=True) + "\n")
    line = shlex.join(["quarto", command, *argv])
    atomic_write_text(folder / "command.txt", f"{line}\n# python {sys.version.split()[0]}, cwd {os.getcwd()}\n")


def code_version() -> dict[str, Any]:
    """The git commit of the code and whether the checkout had uncommitted changes: the same seed gives the same
    games only with the same code (``None`` fields outside a git checkout)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "uncommitted_changes": None if changes is None else bool(changes)}


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def record_line(record: GameRecord, variant: Variant, **extra: Any) -> str:
    """One ``games.jsonl`` line (with its newline) for ``record`` played under ``variant``."""
    return json.dumps({**extra, "variant": variant.to_dict(), **record.to_dict()}) + "\n"
