"""Which extra a missing module belongs to, and the one line that names it (quarto_env.extras). The installed
wheel without any extra is tested end to end in tests/test_wheel.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from quarto_env.extras import EXTRA_MODULES, MissingExtra, as_missing_extra, missing_module, require

REPO = Path(__file__).resolve().parent.parent

DISTRIBUTION_OF_MODULE = {"yaml": "pyyaml", "sb3_contrib": "sb3-contrib", "stable_baselines3": "stable-baselines3"}
"""Import names whose distribution on the package index is spelled otherwise."""


def test_the_modules_of_each_extra_are_the_packages_pyproject_declares() -> None:
    """pyproject.toml declares the extras; EXTRA_MODULES is the same lists as import names, both ways: a package
    added to an extra there and not here (or the reverse) fails."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11's
    extras = tomllib.loads(REPO.joinpath("pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras) - {"dev"} == set(EXTRA_MODULES)  # dev is the tests', not a feature's
    for extra, requirements in extras.items():
        if extra == "dev":
            continue
        names = [re.split(r"[\[<>=!~; ]", requirement)[0] for requirement in requirements]  # ray[rllib]==2.60.0: ray
        packages = {name.lower() for name in names if name != "quarto-env"}  # another extra's: its own line
        assert packages == {DISTRIBUTION_OF_MODULE.get(module, module) for module in EXTRA_MODULES[extra]}, extra


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


@pytest.mark.parametrize("command", [["train"], ["bench", "train"], ["evaluate"]])
def test_help_of_a_command_without_its_extra_says_what_it_does_and_what_to_install(command: list[str]) -> None:
    """Without torch, ``quarto train --help`` cannot build its parser: it prints the command's line and the install,
    exit status 0; run, the command is refused in one line, exit status 2."""
    script = "import sys; sys.modules['torch'] = None; from experiments.cli import main; sys.exit(main(sys.argv[1:]))"
    helped = subprocess.run([sys.executable, "-c", script, *command, "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and helped.stderr == "", helped.stderr
    assert f"usage: quarto {' '.join(command)} [ARGS...]" in helped.stdout
    assert "needs the 'train' extra" in helped.stdout and "pip install 'quarto-env[train]'" in helped.stdout
    refused = subprocess.run([sys.executable, "-c", script, *command], capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "needs the 'train' extra" in refused.stderr
