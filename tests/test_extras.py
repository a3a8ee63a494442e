"""Which extra a missing module belongs to, and the one line that names it (quarto_env.extras). The installed
wheel without any extra is tested end to end in tests/test_wheel.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from quarto_env.extras import EXTRA_MODULES, MissingExtra, as_missing_extra, missing_module, require

REPO = Path(__file__).resolve().parent.parent

DISTRIBUTION_OF_MODULE = {"yaml": "pyyaml", "sb3_contrib": "sb3-contrib", "stable_baselines3": "stable-baselines3"}
"""Import names whose distribution on the package index is spelled otherwise."""


def test_every_module_of_an_extra_is_in_that_extra_in_pyproject() -> None:
    pyproject = REPO.joinpath("pyproject.toml").read_text()
    for extra, modules in EXTRA_MODULES.items():
        block = re.search(rf"^{extra} = \[(.*?)\]$", pyproject, re.M | re.S)
        assert block is not None, extra
        for module in modules:
            assert f'"{DISTRIBUTION_OF_MODULE.get(module, module)}' in block.group(1), (extra, module)


def test_a_missing_module_of_an_extra_names_the_extra_and_the_install() -> None:
    error = ModuleNotFoundError("No module named 'torch.nn'", name="torch.nn")
    missing = as_missing_extra(error, "agent kind 'ppo'")
    assert isinstance(missing, MissingExtra) and missing.extra == "train"
    assert str(missing) == (
        "agent kind 'ppo' needs the 'train' extra (torch is not installed): pip install 'quarto-env[train]' "
        "(from a checkout: pip install -e '.[train]')"
    )


def test_a_module_of_no_extra_is_a_real_error() -> None:
    assert as_missing_extra(ModuleNotFoundError("No module named 'nothere'", name="nothere"), "x") is None


def test_require_looks_the_modules_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EXTRA_MODULES, "fake", ("json", "surely_not_a_module_here"))
    assert missing_module("fake") == "surely_not_a_module_here"
    with pytest.raises(MissingExtra, match=r"^quarto x needs the 'fake' extra \(surely_not_a_module_here"):
        require("fake", "quarto x")
    monkeypatch.setitem(EXTRA_MODULES, "fake", ("json",))
    require("fake", "quarto x")
