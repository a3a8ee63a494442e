"""Numba's on-disk cache follows every file a compiled function was built from (quarto_env.numba_cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quarto_env import numba_cache

CALLEE = "import numba\n\n\n@numba.njit(cache=True)\ndef rule():\n    return {answer}\n"
CALLER = "import numba\nfrom callee import rule\n\n\n@numba.njit(cache=True)\ndef answer():\n    return rule()\n"
RUN = """
import json, sys
sys.path.insert(0, {folder!r})
if {grouped}:
    from quarto_env.numba_cache import stamp_together
    stamp_together([{folder!r} + "/callee.py", {folder!r} + "/caller.py"])
import caller
value = caller.answer()
print(json.dumps({{"value": value, "hits": sum(caller.answer.stats.cache_hits.values())}}))
"""


def run_caller(folder: Path, grouped: bool) -> dict:
    """``caller.answer()`` in a fresh process, and how many of its compilations came from the cache. Python writes
    no bytecode there (``-B``): a ``.pyc`` records its source's time in whole seconds and its size, so a callee
    rewritten within the same second at the same size would be imported stale, whatever numba's cache does."""
    script = RUN.format(folder=str(folder), grouped=grouped)
    command = [sys.executable, "-B", "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def write_pair(folder: Path, answer: int) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "callee.py").write_text(CALLEE.format(answer=answer))
    (folder / "caller.py").write_text(CALLER)


def test_a_change_to_a_called_file_recompiles_its_callers(tmp_path: Path) -> None:
    write_pair(tmp_path, 1)
    assert run_caller(tmp_path, grouped=True) == {"value": 1, "hits": 0}
    assert run_caller(tmp_path, grouped=True) == {"value": 1, "hits": 1}, "the cache is still used"
    write_pair(tmp_path, 2)
    assert run_caller(tmp_path, grouped=True) == {"value": 2, "hits": 0}
    assert run_caller(tmp_path, grouped=True) == {"value": 2, "hits": 1}


def test_without_a_group_numba_keeps_the_stale_code(tmp_path: Path) -> None:
    """The hazard the module is for: if this fails, numba follows other files by itself and the module can go."""
    write_pair(tmp_path, 1)
    assert run_caller(tmp_path, grouped=False)["value"] == 1
    write_pair(tmp_path, 2)
    assert run_caller(tmp_path, grouped=False) == {"value": 1, "hits": 1}


def test_the_project_modules_are_one_group() -> None:
    import agents.solver.kernels
    import quarto_env.core

    root = Path(quarto_env.core.__file__).resolve().parent.parent
    sources = {path.relative_to(root).as_posix() for path in numba_cache.project_sources()}
    solver = {"agents/solver/kernels.py", "agents/solver/ordering.py", "agents/solver/table.py"}
    assert {"quarto_env/core.py", "quarto_env/fast.py", "agents/tree/puct.py", *solver} <= sources
    locator = agents.solver.kernels.negamax_give._cache._impl.locator
    assert type(locator).__module__ == numba_cache.__name__
    group_of_core = numba_cache._group_stamps[str(Path(quarto_env.core.__file__).resolve())]
    assert locator.get_source_stamp()[1] == group_of_core


def test_a_users_choice_of_locators_is_kept() -> None:
    chosen = "numba.core.caching.InTreeCacheLocator"
    script = "import json, numba, quarto_env.core; print(json.dumps(numba.config.CACHE_LOCATOR_CLASSES))"
    env = {**os.environ, "NUMBA_CACHE_LOCATOR_CLASSES": chosen}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout) == chosen


def test_a_failure_to_stamp_warns_instead_of_breaking_numbas_import(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable() -> list[Path]:
        raise PermissionError("quarto_env/core.py: permission denied")

    monkeypatch.setattr(numba_cache, "project_sources", unreadable)
    with pytest.warns(UserWarning, match="not stamped.*permission denied"):
        numba_cache.stamp_project()
