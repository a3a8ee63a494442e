"""Functions that run as Python and compile into numba kernels, without importing numba until a kernel needs it.

Importing numba costs about half a second of CPU; the rules core, the observation planes and the PettingZoo env
need none of it to play in Python. ``@jitable`` marks a function that compiled kernels call, as numba's
``register_jitable`` does, but registers it with numba only once numba is imported (at once if it already is),
through a post-import hook: before any kernel can be compiled, so every kernel sees every jitable function.
:func:`when_numba_loads` runs any other such registration (a compiled twin of a Python function) the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import wrapt

Function = TypeVar("Function", bound=Callable[..., Any])


def when_numba_loads(action: Callable[[Any], object]) -> None:
    """Run ``action(numba)`` as soon as numba is imported, or now if it already is."""
    wrapt.register_post_import_hook(action, "numba")


def jitable(function: Function) -> Function:
    """``function`` unchanged, registered with numba's ``register_jitable`` once numba is imported: compiled
    kernels call it (compiled in), Python calls it as it is."""

    def register(numba: Any) -> None:
        from numba.extending import register_jitable

        register_jitable(function)

    when_numba_loads(register)
    return function
