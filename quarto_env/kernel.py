"""How the project's hot kernels are compiled: :func:`kernel`, numba's ``njit(cache=True)`` without its reference
counting.

Numba counts every array it hands around -- each row read as a view, each array passed to a call -- in and out,
with an atomic increment and decrement of a shared counter. A kernel that allocates nothing needs none of it, and
in the batched step and the solver's search those two instructions cost more than the work around them
(docs/results.md has the measurements). A function compiled this way must not allocate (no ``np.empty``, no
list): numba refuses to compile one that does.
"""

from __future__ import annotations

from typing import Any

import numba


def kernel(*args: Any, **options: Any) -> Any:
    """``numba.njit(*args, cache=True, _nrt=False, **options)``: a decorator, bare (``@kernel``) or with a signature
    and options (``@kernel(signature, nogil=True)``), as ``njit`` is."""
    return numba.njit(*args, cache=True, _nrt=False, **options)  # type: ignore[call-overload]  # an option the stubs omit
