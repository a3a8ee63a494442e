"""Hardening shared by the arena commands: agent specs with a main value and options, exact integers in the
range checks, and a code version recorded without touching the checkout's ``.git``."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import pytest

from agents.specs import SpecError, parse_spec
from experiments.options import MAX_SEED, SEED
from experiments.run_folder import code_version


# ---------------------------------------------------------------------------------------------------------
# Agent specs
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "path", "deterministic"),
    [
        ("ppo:runs/x/best.zip", "runs/x/best.zip", True),
        ("ppo:runs/x/best.zip,deterministic=false", "runs/x/best.zip", False),
        ("ppo:path=runs/x/best.zip,deterministic=false", "runs/x/best.zip", False),
        ("ppo:deterministic=no,path=runs/x", "runs/x", False),
        ("ppo:runs/a,b/best.zip", "runs/a,b/best.zip", True),  # a comma not followed by NAME= stays in the path
        ("ppo:runs/a,b/best.zip,deterministic=0", "runs/a,b/best.zip", False),
        ("ppo:runs/lr=3e-4/best.zip", "runs/lr=3e-4/best.zip", True),  # '=' inside the path, not after a name
    ],
)
def test_a_main_value_can_be_followed_by_options(spec: str, path: str, deterministic: bool) -> None:
    kind, values = parse_spec(spec)
    expected = {"path": path, "checkpoint": "", "deterministic": deterministic, "device": "cpu"}
    assert kind.name == "ppo" and values == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ppo:runs/x/best.zip,deterministic=maybe", "bad value 'maybe' for deterministic"),
        ("ppo:runs/x/best.zip,greedy=true", "bad option 'greedy=true' in spec"),
        ("ppo:a.zip,path=b.zip", "option path given twice"),
        ("minimax:3", "bad option '3' in spec 'minimax:3'"),
        ("minimax:depth=2,depth=3", "option depth given twice"),
        ("minimax:time=nan", "time must be a finite number > 0 and <= 86400, got nan"),
        ("solver:time=nan", "time must be a finite number > 0"),
        ("minimax:time=inf", "time must be a finite number > 0"),
        ("mcts:time=inf", "time must be a finite number > 0"),
        ("mcts:sims=1000001", "sims must be an integer >= 1 and <= 1000000, got 1000001"),
        ("alphazero", "unknown agent kind 'alphazero' in spec 'alphazero'; the kinds are random, greedy"),
    ],
)
def test_bad_specs_get_one_line_messages(spec: str, message: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_spec(spec)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_seeds_are_exact_integers_in_numpys_range() -> None:
    assert SEED(str(MAX_SEED)) == MAX_SEED and SEED("7") == 7 and SEED("7.0") == 7
    for text in ("-1", str(MAX_SEED + 1), "nan", "inf", "1.5", "9" * 400, ""):
        with pytest.raises(argparse.ArgumentTypeError, match="seed must be an integer >= 0 and <= 4294967295"):
            SEED(text)


# ---------------------------------------------------------------------------------------------------------
# The code version, read without writing
# ---------------------------------------------------------------------------------------------------------
def git(folder: Path, *args: str) -> str:
    identity = ["-c", "user.name=test", "-c", "user.email=test@example.com"]
    return subprocess.run(["git", *identity, *args], cwd=folder, capture_output=True, text=True, check=True).stdout


def git_times(folder: Path) -> dict[str, int]:
    """The modification times (ns) of ``.git`` and of every file in it."""
    files = [folder / ".git", *(folder / ".git").rglob("*")]
    return {str(path): path.stat().st_mtime_ns for path in files}


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git(tmp_path, "add", "code.py")
    git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_code_version_reads_the_commit_without_touching_git(repository: Path) -> None:
    head = git(repository, "rev-parse", "HEAD").strip()
    # A file whose mtime changed but not its content: a plain `git status` refreshes the index and rewrites it.
    os.utime(repository / "code.py", ns=(0, (repository / "code.py").stat().st_mtime_ns + 10**9))
    before = git_times(repository)
    assert code_version(repository) == {"commit": head, "uncommitted_changes": False}
    assert git_times(repository) == before
    git(repository, "status")  # the control: what the old code_version did changes .git
    assert git_times(repository) != before


def test_code_version_follows_packed_refs_detached_heads_and_changes(repository: Path, tmp_path: Path) -> None:
    head = git(repository, "rev-parse", "HEAD").strip()
    git(repository, "pack-refs", "--all")
    assert not list((repository / ".git" / "refs" / "heads").iterdir())
    assert code_version(repository)["commit"] == head
    (repository / "code.py").write_text("x = 2\n")
    assert code_version(repository) == {"commit": head, "uncommitted_changes": True}
    git(repository, "commit", "-q", "-am", "second")
    git(repository, "checkout", "-q", "--detach", head)
    assert code_version(repository) == {"commit": head, "uncommitted_changes": False}
    outside = tmp_path / "not-a-checkout"
    outside.mkdir()
    assert code_version(outside) == {"commit": None, "uncommitted_changes": None}


def test_code_version_reads_a_worktree(repository: Path, tmp_path: Path) -> None:
    git(repository, "worktree", "add", "-q", str(tmp_path / "tree"))
    assert (tmp_path / "tree" / ".git").is_file()
    assert code_version(tmp_path / "tree")["commit"] == git(repository, "rev-parse", "HEAD").strip()
