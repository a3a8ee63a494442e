"""The configs that ship with the project: ``configs/`` of a checkout, which the wheel installs as
``experiments/configs/`` (``pyproject.toml``'s ``package-dir``), found by name from any folder. Apart from
:mod:`experiments.training.config_file`, which reads them, so that finding one needs no YAML reader."""

from __future__ import annotations

import os
from pathlib import Path


def _shipped_configs() -> Path:
    """The folder of the shipped configs: ``configs/`` of a checkout, which the wheel installs as
    ``experiments/configs/`` (``pyproject.toml``'s ``package-dir``)."""
    installed = Path(__file__).resolve().parents[1] / "configs"
    return installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "configs"


CONFIGS = _shipped_configs()
DEFAULT_CONFIG = CONFIGS / "default.yaml"
"""The config ``quarto train`` (and ``quarto bench train``) read when none is given: the defaults."""


def config_path(given: str | Path) -> Path:
    """``given`` as a config file: the file it names, or where it names none, the shipped config of that name --
    ``configs/quick.yaml`` (as the docs write it), ``quick.yaml`` or ``quick`` -- so that the docs' commands run
    from any folder and from an installed wheel. What names neither is returned as given (its error says so)."""
    path = Path(given)
    if os.path.lexists(path) or path.is_absolute():  # not Path.exists: it raises where a folder is unreadable
        return path
    parts = path.parts[1:] if path.parts[:1] == ("configs",) else path.parts
    shipped = CONFIGS.joinpath(*parts) if parts else CONFIGS
    for candidate in (shipped, shipped.with_name(shipped.name + ".yaml")):
        if candidate.is_file():
            return candidate
    return path


def shipped_config_names() -> list[str]:
    """The shipped configs, as :func:`config_path` finds them (``quick``, ``compare/raw-mlp``, ...)."""
    return sorted(str(path.relative_to(CONFIGS).with_suffix("")) for path in CONFIGS.rglob("*.yaml"))
