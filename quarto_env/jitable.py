"""Functions that run as Python and compile into numba kernels, without importing numba until a kernel needs it.

Importing numba costs about half a second of CPU; the rules core, the observation planes and the PettingZoo env
need none of it to play in Python. ``@jitable`` marks a function that compiled kernels call, as numba's
``register_jitable`` does, but registers it with numba only once numba is imported (at once if it already is),
through a post-import hook: before any kernel can be compiled, so every kernel sees every jitable function.
:func:`when_numba_loads` runs any other such registration (a compiled twin of a Python function) the same way,
and :func:`when_imported` any action on another module's import (the package registers its envs with Gymnasium
and PettingZoo so).

The hooks are a finder at the head of ``sys.meta_path`` (:class:`_AfterImport`): it finds nothing itself, but for
a module that an action waits for, it has the other finders find it and runs the actions once its code has run.
It replaces ``wrapt``'s post-import hooks, whose import (``asyncio`` with it) cost a fifth of a warm start-up.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, TypeVar

Function = TypeVar("Function", bound=Callable[..., Any])
Action = Callable[[ModuleType], object]

_waiting: dict[str, list[Action]] = {}
"""Module name -> the actions to run once it is imported."""


def when_imported(name: str, action: Action) -> None:
    """Run ``action(module)`` as soon as the module ``name`` is imported (after its code has run), or now if it
    already is."""
    module = sys.modules.get(name)
    if module is not None:
        action(module)
        return
    _waiting.setdefault(name, []).append(action)
    if not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def when_numba_loads(action: Action) -> None:
    """Run ``action(numba)`` as soon as numba is imported, or now if it already is."""
    when_imported("numba", action)


def jitable(function: Function) -> Function:
    """``function`` unchanged, registered with numba's ``register_jitable`` once numba is imported: compiled
    kernels call it (compiled in), Python calls it as it is."""

    def register(numba: ModuleType) -> None:
        from numba.extending import register_jitable

        register_jitable(function)

    when_numba_loads(register)
    return function


class _AfterImport:
    """Finds the modules that actions wait for through the finders after it, their loader wrapped to run the
    actions once the module's code has run; finds nothing else. A meta path finder by its ``find_spec`` alone, as
    the import system asks: ``importlib.abc``'s base classes would import ``importlib.resources``, which nothing
    else of a first env step needs (docs/results.md has the start-up's figures)."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in _waiting or self not in sys.meta_path:
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1 :]:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(name, path, target) if find_spec is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Announcing(spec.loader)
                return spec
        return None


class _Announcing:
    """A module's own loader, that runs the actions waiting for the module once it has executed it."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader  # the module and its spec show its own loader, as if nothing came between
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        for action in _waiting.pop(module.__name__, []):
            action(module)
