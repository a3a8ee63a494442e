"""The optional extras of the package, and the one line that says which is missing.

``pip install quarto-env`` gives the rules, the environments, the vector API, the solver with its books and
suites, and the baseline agents. Everything else is an extra, declared once -- its packages, and what needs it
-- in ``pyproject.toml``'s ``[project.optional-dependencies]``; :data:`EXTRA_MODULES` says which modules those
packages are imported as (tests/test_extras.py keeps the two equal).

A feature whose extra is missing stops with :class:`MissingExtra`, whose message is one line naming the extra
and the command that installs it; the command line prints it and exits with status 2 before writing anything.
"""

from __future__ import annotations

import importlib.util

from quarto_env.errors import MissingExtra

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "train": ("torch", "stable_baselines3", "sb3_contrib", "tensorboard", "yaml", "rich", "matplotlib"),
    "ray": ("ray", "scipy"),
    "bench": ("pgx", "pygame"),
    "clients": ("torchrl", "tianshou"),
    "jax": ("jax", "pgx", "mctx", "equinox", "optax"),
    "onnx": ("onnxruntime", "onnx"),
}
"""Each extra and the top-level modules its packages in ``pyproject.toml`` are imported as (``pyyaml`` is ``yaml``),
besides another extra's (``ray`` brings ``train``'s too)."""

EXTRA_OF_MODULE = {module: extra for extra, modules in EXTRA_MODULES.items() for module in modules}
"""Which extra brings a top-level module."""


def missing_module(extra: str, modules: tuple[str, ...] = ()) -> str | None:
    """The first of ``modules`` (default: all of ``extra``'s) that cannot be imported here, or ``None``."""
    for module in modules or EXTRA_MODULES[extra]:
        if importlib.util.find_spec(module) is None:
            return module
    return None


def require(extra: str, purpose: str, *modules: str) -> None:
    """Raise :class:`MissingExtra` naming ``purpose`` unless ``modules`` of ``extra`` (default: all of them) can
    be imported. Only looks the modules up (no import), so it costs nothing where they are installed."""
    module = missing_module(extra, modules)
    if module is not None:
        raise MissingExtra(purpose, extra, module)


def as_missing_extra(error: ModuleNotFoundError, purpose: str) -> MissingExtra | None:
    """The :class:`MissingExtra` that ``error`` means, when the module it failed to find belongs to an extra
    (``None`` for any other module: a real bug, to be raised as it is)."""
    top = (error.name or "").partition(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    return MissingExtra(purpose, extra, top) if extra else None
