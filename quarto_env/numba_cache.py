"""Numba's on-disk cache, kept in step with every compiled module of the project.

Numba saves the machine code of each ``cache=True`` function beside its source file and trusts it for as long as
that one file is unchanged. But the machine code of a function includes the functions it calls from other files
-- numba compiles them in -- so after an edit to ``quarto_env/core.py`` alone, the solver in
``agents/solver/kernels.py`` would go on running the old rules, silently.

Here the cache files of a group of source files carry a stamp of the whole group: change any file of it and every
function of the group is compiled again (once; the new code is cached in the same files). :func:`stamp_together`
makes a group; importing :mod:`quarto_env` makes the project's compiled modules one group (:func:`stamp_project`),
as soon as numba is imported.

It works through numba's ``CACHE_LOCATOR_CLASSES`` setting (numba 0.68 and later; with an older numba, or with
``NUMBA_CACHE_LOCATOR_CLASSES`` set by the user, nothing changes). Other libraries' functions are cached as
usual: a locator below stamps only the files of a group.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PROJECT_MODULES = ("quarto_env", "agents", "experiments")
"""The project's packages (folders beside this one's): their modules that mention numba, ``jitable`` (the rules
core's functions that compile into kernels without importing numba, :mod:`quarto_env.jitable`) or
:mod:`quarto_env.kernel` (the kernels' decorator) form one group."""
COMPILED_MARKS = (b"numba", b"jitable", b"quarto_env.kernel")
"""What a source file of the group mentions (see ``PROJECT_MODULES``)."""

_group_stamps: dict[str, bytes] = {}
"""Resolved source path -> the stamp of its group."""


def stamp_together(paths: Iterable[str | Path]) -> None:
    """Make ``paths`` one group: from now on, functions of these files compiled with ``cache=True`` reuse their
    cached code only if no file of the group changed since it was cached. Call it before those functions are
    defined (before their modules are imported)."""
    files = sorted(Path(path).resolve() for path in paths)
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file).encode() + b"\0" + file.read_bytes() + b"\0")
    for file in files:
        _group_stamps[str(file)] = digest.digest()
    _install()


def project_sources() -> list[Path]:
    """The project's source files that mention one of ``COMPILED_MARKS``: those that compile functions or are
    compiled into them."""
    root = Path(__file__).resolve().parent.parent
    paths = [path for package in PROJECT_MODULES for path in sorted((root / package).rglob("*.py"))]
    return [path for path in paths if _mentions_compiling(path.read_bytes())]


def _mentions_compiling(source: bytes) -> bool:
    """Whether a source file's text mentions one of ``COMPILED_MARKS``."""
    return any(mark in source for mark in COMPILED_MARKS)


def stamp_project(numba: Any = None) -> None:
    """Group the project's compiled modules (:func:`project_sources`). ``numba``: the module, as a post-import
    hook is given it (unused). A failure leaves numba's cache as it is, with a warning: as an import hook, it
    must not make numba fail to import."""
    try:
        stamp_together(project_sources())
    except (OSError, ImportError) as error:
        warnings.warn(f"numba's cache is not stamped with the project's sources: {error}", stacklevel=2)


def _install() -> None:
    """Make numba find cache files through group-stamped twins of its locators, in its order, unless the user
    chose locators (``NUMBA_CACHE_LOCATOR_CLASSES``) or this numba cannot take a choice."""
    from numba.core import caching
    from numba.core import config as numba_config

    config: Any = numba_config  # its settings are made at run time
    standard = getattr(getattr(caching, "CacheImpl", None), "_locator_classes", None)
    chosen = getattr(config, "CACHE_LOCATOR_CLASSES", None)  # None: this numba takes no choice; "": numba's own
    if standard is None or chosen != "":
        return
    config.CACHE_LOCATOR_CLASSES = ",".join(f"{__name__}.{_group_stamped(cls).__name__}" for cls in standard)


def _group_stamped(locator: type) -> type:
    """The subclass of numba's ``locator`` whose source stamp adds the stamp of the file's group. It is a global
    of this module: numba imports locators by their dotted names."""
    name = f"GroupStamped{locator.__name__}"
    if name not in globals():

        def get_source_stamp(self: Any) -> Any:
            stamp = locator.get_source_stamp(self)  # type: ignore[attr-defined]
            group = _group_stamps.get(str(Path(getattr(self, "_py_file", "")).resolve()))
            return stamp if group is None else (stamp, group)

        globals()[name] = type(name, (locator,), {"get_source_stamp": get_source_stamp, "__module__": __name__})
    return globals()[name]
