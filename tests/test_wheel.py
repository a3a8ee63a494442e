"""The package as a user installs it: the wheel of this checkout, with the core dependencies only, in a fresh
virtual environment outside the source tree.

There, the data must come from the wheel (the suites and the opening books), the core must work without any
extra (no torch), and a feature that needs an extra must say which in one line. The wheel is built and
installed once for the module; pip finds the core's dependencies in its cache or on the package index.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]  # one worker builds the wheel, once

NOT_SOURCES = (".git", ".venv", "build", "runs", "*.egg-info", "__pycache__", ".*_cache")
"""What the copy of the checkout leaves out: a stale build/ would put files the checkout no longer has in the
wheel."""

CHECKS = """
import numpy as np
import pettingzoo.test
import quarto_env
from agents import make_agent
from agents.solver.book import shipped_book
from agents.suites import shipped_suite_names
from quarto_env.core import STANDARD, State

# the env passes PettingZoo's API test, and the vector API steps
pettingzoo.test.api_test(quarto_env.env(), num_cycles=50)
envs = quarto_env.VectorQuarto(8, seed=0)
obs, info = envs.reset()
for _ in range(40):
    obs, rewards, terminated, truncated, info = envs.step(np.argmax(info["action_mask"], axis=1))

# the book ships, and the solver answers the empty board's first give (the search alone would take minutes)
book = shipped_book(STANDARD)
print("BOOK", len(book), book.value(State()))
print("SOLVER", make_agent("solver", seed=0).act(State()))
print("SUITES", *shipped_suite_names())
try:
    quarto_env.env(render_mode="human")
except ImportError as exc:
    print("HUMAN", exc)
try:
    import torch  # noqa: F401
    print("TORCH present")
except ModuleNotFoundError:
    print("TORCH absent")
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtual environment holding the wheel of this checkout and the core's
    dependencies, nothing else."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # a copy: setuptools builds in a build/ folder beside the sources
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(root), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = root.glob("quarto_env-*.whl")
    venv.create(root / "venv", with_pip=True)
    bin_dir = root / "venv" / "bin"
    subprocess.run([bin_dir / "pip", "install", "-q", str(wheel)], check=True, capture_output=True, timeout=900)
    return bin_dir


def run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_wheel_carries_the_suites_and_books(installed: Path, tmp_path: Path) -> None:
    listing = run(installed / "python", "-m", "pip", "show", "-f", "quarto-env", cwd=tmp_path).stdout
    for data in ("book-standard.npz", "book-squares.npz", "suite-standard-v1.jsonl", "suite-squares-v1.jsonl"):
        assert f"agents/data/{data}" in listing, data


def test_the_wheel_carries_the_configs_the_license_and_the_type_marks(installed: Path, tmp_path: Path) -> None:
    listing = run(installed / "python", "-m", "pip", "show", "-f", "quarto-env", cwd=tmp_path).stdout
    for config in ("quick", "default", "alphazero", "compare/raw-mlp"):  # where quarto train --config NAME looks
        assert f"experiments/configs/{config}.yaml" in listing, config
    assert "quarto_env/py.typed" in listing and "agents/py.typed" in listing
    assert re.search(r"quarto_env-.*\.dist-info/licenses/LICENSE", listing), listing
    # Where the installed code finds them from another folder (pyyaml, the train extra's, is not installed here:
    # the module imports it but does not use it to find a file).
    finds = "import sys, types; sys.modules['yaml'] = types.ModuleType('yaml')\n" + (
        "from experiments.training.shipped_configs import config_path; print(config_path('configs/quick.yaml'))"
    )
    found = run(installed / "python", "-c", finds, cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip().endswith("site-packages/experiments/configs/quick.yaml"), found.stdout


def test_the_core_works_from_the_wheel_without_torch(installed: Path, tmp_path: Path) -> None:
    result = run(installed / "python", "-c", CHECKS, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "TORCH absent" in result.stdout
    assert "HUMAN render_mode=\"human\" needs the 'train' extra (matplotlib is not installed)" in result.stdout
    assert "SUITES squares-v1 standard-v1" in result.stdout
    assert "BOOK 10843 0" in result.stdout  # every canonical give node down to 12 empty; Quarto is a draw
    solver_line = next(line for line in result.stdout.splitlines() if line.startswith("SOLVER"))
    assert 0 <= int(solver_line.split()[1]) < 16


def test_grade_grades_the_shipped_suite(installed: Path, tmp_path: Path) -> None:
    result = run(installed / "quarto", "grade", "random", "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no suite ships" not in result.stderr + result.stdout
    assert "(suite standard-v1;" in result.stdout and "(n=3190)" in result.stdout


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["train", "--config", "configs/quick.yaml"], "train"),
        (["plot", "runs"], "train"),
        (["tournament", "ppo:nowhere", "random", "--games", "2"], "train"),
        (["tournament", "random", "greedy", "--games", "2", "--tensorboard"], "train"),
        (["bench", "env"], "bench"),
    ],
)
def test_a_feature_without_its_extra_is_one_line(installed: Path, tmp_path: Path, argv: list[str], extra: str) -> None:
    result = run(installed / "quarto", *argv, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"the '{extra}' extra" in lines[0], result.stderr
    assert f"quarto-env[{extra}]" in lines[0]
    assert not any(tmp_path.iterdir()), "nothing is written"


def test_the_version_is_the_packages(installed: Path, tmp_path: Path) -> None:
    version = re.search(r'^version = "(.+)"$', REPO.joinpath("pyproject.toml").read_text(), re.M).group(1)  # type: ignore[union-attr]
    result = run(installed / "quarto", "--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == f"quarto-env {version}", result.stdout + result.stderr
