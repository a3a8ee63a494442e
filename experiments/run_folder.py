"""What every command that writes a run folder records in it: ``config.json`` (the settings, the command line
and the code's version) and one line per command in ``command.txt``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from quarto_env.checks import (
    atomic_write_text,
)


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
