"""Quarto for reinforcement learning: a fast rules core, the PettingZoo AEC environment ``quarto_v1`` and a
Gymnasium single-agent environment against a fixed opponent.

- ``quarto_env.env(**flags)`` is the AEC environment wrapped like PettingZoo's classic games, ``quarto_env.raw_env``
  the bare one; ``pettingzoo.make("aec", "quarto_v1", **flags)`` works too, where the installed PettingZoo has a
  registry; ``pettingzoo.make("aec", "quarto_v0")`` raises PettingZoo's ``DeprecatedEnv``, pointing to
  ``quarto_v1``.
- ``gymnasium.make("quarto_env/QuartoVsAgent-v1", opponent="greedy", **flags)`` is the single-agent env
  (:mod:`quarto_env.single_agent`); ``gymnasium.make_vec`` of the same id, with ``num_envs=``, its batched
  ``VectorEnv`` (:mod:`quarto_env.vector_env`). ``"quarto_env:quarto_env/QuartoVsAgent-v1"`` works without
  importing this package first: Gymnasium imports it.
- ``quarto_env.VectorQuarto(num_envs, **flags)`` steps thousands of ``quarto_v1`` games at once, both seats
  exposed, for one's own self-play algorithm (:mod:`quarto_env.vector`).
- ``Outcome`` and ``NO_WINNER`` are the codes of ``info["outcome"]`` and ``info["winner"]``
  (:mod:`quarto_env.outcome`).
- ``QuartoError`` is the base class of every error the project raises, exported here with the specific ones
  (``IllegalActionError``, ``RulesError``, ``PositionError``, ``SpecError``, ``CheckpointError``,
  ``DatasetError``, ``CallOrderError``, ...), each also the ``ValueError``, ``TypeError`` or ``RuntimeError``
  it is (:mod:`quarto_env.errors`).

The ground floor -- :mod:`quarto_env.core` (the rules), :mod:`quarto_env.notation` and
:mod:`quarto_env.symmetry` -- imports no RL framework, no torch and no plotting library, so importing this
package loads none of them either: ``env``, ``raw_env`` and ``VectorQuarto`` are imported on first use, and the
two registrations above run as soon as Gymnasium or PettingZoo is imported (at once if it already is), through
post-import hooks (:func:`quarto_env.jitable.when_imported`).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from quarto_env.errors import (
    ActionTypeError,
    CallOrderError,
    CheckpointError,
    DatasetError,
    EvaluationError,
    IllegalActionError,
    PositionError,
    QuartoError,
    QuartoTypeError,
    QuartoValueError,
    RulesError,
    SpecError,
    ThreadsError,
)
from quarto_env.extras import MissingExtra
from quarto_env.jitable import when_imported, when_numba_loads
from quarto_env.outcome import NO_WINNER, Outcome

if TYPE_CHECKING:
    from quarto_env.env import env, raw_env
    from quarto_env.vector import VectorQuarto

    __version__: str

__all__ = [
    "GYMNASIUM_ENV_ID",
    "NO_WINNER",
    "PETTINGZOO_ENV_ID",
    "ActionTypeError",
    "CallOrderError",
    "CheckpointError",
    "DatasetError",
    "EvaluationError",
    "IllegalActionError",
    "MissingExtra",
    "Outcome",
    "PositionError",
    "QuartoError",
    "QuartoTypeError",
    "QuartoValueError",
    "RulesError",
    "SpecError",
    "ThreadsError",
    "VectorQuarto",
    "__version__",
    "env",
    "raw_env",
]

_PETTINGZOO_NAME, _PETTINGZOO_VERSION = "quarto", 1  # PettingZoo's convention: a version per API change
PETTINGZOO_ENV_ID = f"{_PETTINGZOO_NAME}_v{_PETTINGZOO_VERSION}"
GYMNASIUM_ENV_ID = "quarto_env/QuartoVsAgent-v1"
DISTRIBUTION = "quarto-env"
"""The name this project is installed under (pyproject.toml's ``name``)."""
UNKNOWN_VERSION = "0+unknown"
"""``__version__`` of a checkout imported without being installed: no metadata says its version."""


class _Package(types.ModuleType):
    """This package, with ``env``, ``raw_env`` and ``VectorQuarto`` loaded on first use.

    ``quarto_env.env`` is always the function: once the submodule of the same name is loaded, the import system
    binds it here, and the setter below leaves the function in place (``sys.modules["quarto_env.env"]`` is the
    module); any other assignment is refused.

    Why a module class and not a module-level ``__getattr__`` (PEP 562): ``__getattr__`` is asked only for a name
    the module lacks, and the import system sets ``quarto_env.env`` to the submodule as soon as anything imports
    ``quarto_env.env`` (``agents`` does, and so do users, with ``from quarto_env.env import raw_env``); from then
    on ``quarto_env.env()`` would call a module. PEP 562 has no ``__setattr__``: only a property of the module's
    class can refuse that binding (``tests/test_core.py`` pins it, in a fresh interpreter)."""

    @property
    def env(self) -> Any:
        return importlib.import_module("quarto_env.env").env

    @env.setter
    def env(self, value: Any) -> None:
        if value is not sys.modules.get("quarto_env.env"):  # the import system binding the submodule is ignored
            raise AttributeError("quarto_env.env is the environment's factory; it cannot be reassigned")

    @property
    def raw_env(self) -> Any:
        return importlib.import_module("quarto_env.env").raw_env

    @property
    def VectorQuarto(self) -> Any:
        return importlib.import_module("quarto_env.vector").VectorQuarto

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Pickled as its name, imported again where it is read: cloudpickle pickles a module by reference only
        # when its type is exactly ModuleType, so an env factory that names quarto_env (a torchrl ParallelEnv's, a
        # spawned worker's) would fail with "cannot pickle '_Package' object".
        return importlib.import_module, (self.__name__,)

    @property
    def __version__(self) -> str:
        """The installed version, read from the package metadata: pyproject.toml's ``version`` is the one source
        (no second copy here to forget); :data:`UNKNOWN_VERSION` where the package is not installed."""
        import importlib.metadata  # here: most imports of the package never ask

        try:
            return importlib.metadata.version(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            return UNKNOWN_VERSION


sys.modules[__name__].__class__ = _Package


def _register_with_gymnasium(gymnasium: Any) -> None:
    if GYMNASIUM_ENV_ID not in gymnasium.registry:
        gymnasium.register(  # each entry point builds the opponent from its agent spec
            GYMNASIUM_ENV_ID,
            entry_point="agents.envs.vs_agent:make_vs_agent",
            vector_entry_point="agents.envs.vector_vs_agent:make_vector_vs_agent",  # gymnasium.make_vec: batched games
        )


def _register_with_pettingzoo(pettingzoo: Any) -> None:
    if not hasattr(pettingzoo, "aec_registry"):  # PettingZoo before 1.27: quarto_env.env() is the way in
        return
    from pettingzoo.utils.deprecated_module import DeprecatedModule

    name, version = _PETTINGZOO_NAME, _PETTINGZOO_VERSION
    registered = {(spec.name, spec.version) for spec in pettingzoo.aec_registry.values()}
    if (name, version) not in registered:
        pettingzoo.register("aec", PETTINGZOO_ENV_ID, entry_point="quarto_env.env:env")
    for old in range(version):
        if (name, old) not in registered:  # PettingZoo's own retired-version stub: its env() raises DeprecatedEnv,
            # "quarto_v0 is now deprecated, use quarto_v1 instead", whatever the arguments
            pettingzoo.register("aec", f"{name}_v{old}", entry_point=DeprecatedModule(name, old, version).env)


when_imported("gymnasium", _register_with_gymnasium)
when_imported("pettingzoo", _register_with_pettingzoo)
# Before any of the project's functions is compiled, so that their cached machine code follows every file it
# was compiled from (see quarto_env.numba_cache).
when_numba_loads(lambda numba: importlib.import_module("quarto_env.numba_cache").stamp_project(numba))
