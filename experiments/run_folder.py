"""The run folder of every ``quarto`` command that writes one: its default name and what a command records in it
-- ``config.json`` (the settings, the command line and the code's version) and its line in ``command.txt`` (in a
folder that later commands continue, every command's line, each with the time it started and the code's version:
:func:`record_command`).

Default names are ``runs/<name>__<seed>__<time>`` (:func:`default_run_folder`): ``quarto train`` names the
folder after its config's name and seed, ``quarto grade`` and ``quarto tournament`` after themselves and their
seed, ``quarto sweep`` after its config's name under ``runs/sweeps/`` (a sweep has many seeds). The lock that keeps
a second writer out, and the refusal of a folder that already holds a result, are :mod:`experiments.output`'s.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.storage.files import atomic_write_text

RUNS_DIR = Path("runs")
"""Where the default run folders are made, relative to the working directory."""
COMMAND_FILE = "command.txt"
FINAL_TABLE_FILE = "final_eval.json"
"""A training run's final table (:func:`experiments.evaluation.log.write_final_eval`): there once the run is done."""


def default_run_folder(name: str, seed: int | None = None, parent: Path = RUNS_DIR) -> Path:
    """``parent/<name>__<seed>__<time>`` (``<name>__<time>`` without a seed), the time as ``YYYYmmdd-HHMMSS``."""
    parts = [name, *([] if seed is None else [str(seed)]), time.strftime("%Y%m%d-%H%M%S")]
    return parent / "__".join(parts)


def command_line(command: str, argv: Sequence[str]) -> str:
    """``quarto COMMAND ARGV...``, quoted so that a shell reads it back the same."""
    return shlex.join(["quarto", command, *argv])


def record_command(folder: Path, line: str, *, history: bool) -> None:
    """Record the :func:`command_line` ``line`` in ``folder``'s ``command.txt``. ``history``: append it after the
    time it started and before a comment naming the code's version (:func:`describe_code_version`), one line
    per command, in the folders that later commands continue (``quarto train --resume``, ``quarto sweep
    --resume``): each command records the code it ran. Otherwise write the file anew: the line and a comment
    naming the Python version and the working directory, in a folder that holds one command's results
    (``quarto grade``, ``quarto tournament``: their ``config.json`` holds the code's version), rewritten whole by
    the next one."""
    if not history:
        atomic_write_text(folder / COMMAND_FILE, f"{line}\n# python {sys.version.split()[0]}, cwd {os.getcwd()}\n")
        return
    code = describe_code_version(code_version())
    with open(folder / COMMAND_FILE, "a", encoding="utf-8") as file:
        file.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}  {line}  # code {code}\n")


def save_run_config(folder: Path, command: str, argv: list[str], config: dict[str, Any]) -> None:
    """Write ``config.json`` (the resolved configuration, plus the code version under ``"code"``) in ``folder``
    and the command line in its ``command.txt``."""
    config = {**config, "code": code_version()}
    atomic_write_text(folder / "config.json", json.dumps(config, indent=2, sort_keys=True) + "\n")
    record_command(folder, command_line(command, argv), history=False)


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


def describe_code_version(version: dict[str, Any]) -> str:
    """A :func:`code_version` in words: ``commit 9fc64e9...`` (all of it) and ``, uncommitted changes`` if tracked
    files differ from it (``, changes unknown`` without a ``git`` to ask); ``not a git checkout`` outside one."""
    if version["commit"] is None:
        return "not a git checkout"
    changes = {True: ", uncommitted changes", False: "", None: ", changes unknown"}[version["uncommitted_changes"]]
    return f"commit {version['commit']}{changes}"


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
