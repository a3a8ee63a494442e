"""What the wheel ships: the packages pyproject.toml lists are the tree's, and the shipped configs are found by
name from any folder -- in a checkout, and from the wheel, where they live in ``experiments/configs/``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

from experiments.training.config_file import CONFIGS, ConfigError, config_path, load_config, shipped_config_names

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_listed_packages_are_the_trees_and_the_configs() -> None:
    listed = PYPROJECT["tool"]["setuptools"]["packages"]
    found = find_packages(str(ROOT), include=["quarto_env*", "agents*", "experiments*"])
    assert sorted(listed) == sorted([*found, "experiments.configs"]), "a new package is missing from pyproject.toml"
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"experiments.configs": "configs"}


def test_every_config_in_the_checkout_is_shipped() -> None:
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["experiments.configs"]
    shipped = {path for pattern in patterns for path in (ROOT / "configs").glob(pattern)}
    assert shipped == set((ROOT / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("given", ["configs/quick.yaml", "quick.yaml", "quick"])
def test_a_shipped_config_is_found_by_name_from_any_folder(
    given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no configs/ here
    assert config_path(given) == CONFIGS / "quick.yaml"
    assert load_config(given).name == "quick"
    (tmp_path / "quick.yaml").write_text("name: mine\n")  # a file of the user's comes first
    assert load_config("quick.yaml").name == "mine"


def test_a_config_that_is_nowhere_names_the_shipped_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^config file 'quik.yaml' does not exist; the shipped configs") as raised:
        load_config("quik.yaml")
    assert "quick" in str(raised.value) and "compare/raw-mlp" in shipped_config_names()


def test_the_wheel_holds_the_configs_and_the_data(tmp_path: Path) -> None:
    # Built from a copy of the tracked files: an in-tree build would leave build/ in the checkout, whose stale
    # modules a later build takes in.
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False).stdout
    if not tracked:
        pytest.skip("not a git checkout: the tracked files are unknown")
    for name in tracked.decode().split("\0")[:-1]:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for config in ("quick", "default", "alphazero", "compare/raw-mlp"):
        assert f"experiments/configs/{config}.yaml" in names
    assert any(name.startswith("agents/data/pretrained/") for name in names)
    assert {"quarto_env/py.typed", "agents/py.typed"} <= names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not [name for name in names if "__pycache__" in name or name.endswith((".nbi", ".nbc"))]
