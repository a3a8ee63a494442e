"""What the wheel is made of: the packages pyproject.toml lists are the tree's, and the shipped configs are found
by name from any folder. (tests/test_wheel.py installs the wheel and finds them there, in
``experiments/configs/``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.training.config_file import ConfigError, load_config
from experiments.training.shipped_configs import CONFIGS, config_path, shipped_config_names

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
find_packages = pytest.importorskip("setuptools").find_packages
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
