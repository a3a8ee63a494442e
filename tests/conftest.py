"""Shared test setup: a headless matplotlib, the ``variant_flags`` parameter -- every combination of the
environment's variant flags, for the tests that take it -- and one tiny ``quarto train`` run (``tiny_run``),
made once per test process (each xdist worker) for the modules that read a run folder or a checkpoint."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import sys
import tempfile
from pathlib import Path

import pytest

from quarto_env.extras import EXTRA_MODULES, missing_module

# Bytecode caches for the suite's processes -- its workers and every command it starts -- even where the machine
# sets PYTHONDONTWRITEBYTECODE (CI's does): without them each worker rewrites the asserts of every test module
# again, and each child process compiles the project's sources again (docs/results.md, "The test suite", has
# the figures). The caches go to the checkout's __pycache__ folders, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# The "human" render mode opens a window when matplotlib has an interactive backend: never in the tests.
os.environ.setdefault("MPLBACKEND", "Agg")
# On each of xdist's workers, one thread for torch's and OpenMP's pools unless the user chose: the workers already
# use every core between them. (Training itself runs torch on one thread; this is for the rest of the tests.)
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# The solver's value cache lives in a folder of this test session (of each xdist worker), not in the user's home.
os.environ["QUARTO_CACHE_DIR"] = tempfile.mkdtemp(prefix="quarto-test-cache-")

FLAG_COMBINATIONS = [
    {"attributes": attributes, "squares": squares, "first_player": first, **declaration}
    for attributes, squares, declaration, first in itertools.product(
        [None, "colour", 3],  # all four attributes, colour alone, three of them
        [False, True],
        [{}, {"declaration": True}, {"declaration": True, "false_declaration": "penalty"}],
        ["random", "player_1"],
    )
]


def flag_id(flags: dict) -> str:
    """A short test id, e.g. ``attributes=colour,squares=True``."""
    return ",".join(f"{k}={v}" for k, v in flags.items() if v not in (None, False, "random")) or "default"


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook, which names the groups it sees
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every Ray test in one ``xdist_group``, so that one worker runs them one after the other: each starts a Ray
    of its own sized to the machine's cores, and two at once would fight over them.

    On xdist's workers (``--dist loadgroup``, the default), each grouped test's id then gets its groups' suffix, as
    pytest-xdist does, where pytest-xdist's has no effect (pytest 9.2 keeps node ids in ``_id``;
    pytest-dev/pytest-xdist#1386): without it every group would be ignored. And the slow tests outside groups
    come first, so that the longest start early and the two workers finish together (groups go first anyway, and
    keep their order: the Ray tests rely on it)."""
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers under --dist loadgroup
        return
    items.sort(key=lambda item: not item.get_closest_marker("slow") or bool(item.get_closest_marker("xdist_group")))
    for item in items:
        groups = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(groups))
        if groups and not item.nodeid.endswith(suffix):
            grouped = item.nodeid.rsplit("@", 1)[0] if "@" in item.nodeid.rsplit("]", 1)[-1] else item.nodeid
            set_nodeid(item, grouped + suffix)


def set_nodeid(item: pytest.Item, nodeid: str) -> None:
    """Give ``item`` the id ``nodeid``: in ``_id`` (a structured id) from pytest 9.2 on, in ``_nodeid`` before."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest < 9.2
        item._nodeid = nodeid
    else:
        item._id = NodeId.parse(nodeid)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked with an extra (``@pytest.mark.ray``, ``clients``) where that extra is not installed,
    in one line naming it: the README's install runs the suite without them, CI's second pass with them."""
    for marker in item.iter_markers():
        if marker.name in EXTRA_MODULES and (module := missing_module(marker.name)) is not None:
            pytest.skip(f"needs the {marker.name} extra ({module} is not installed)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """A test that skips because a module of an extra is missing (``pytest.importorskip``) without the extra's
    marker fails instead: CI's second pass, with the extras, selects the tests by marker, so an unmarked one
    would never run anywhere."""
    report = yield
    if report.skipped and call.excinfo is not None:
        reason = str(call.excinfo.value)
        for extra, modules in EXTRA_MODULES.items():
            needs_extra = any(f"could not import '{module}'" in reason for module in modules)
            if needs_extra and item.get_closest_marker(extra) is None:
                report.outcome = "failed"
                report.longrepr = f"{item.nodeid} needs the {extra} extra: mark it @pytest.mark.{extra}"
    return report


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "variant_flags" in metafunc.fixturenames:
        metafunc.parametrize("variant_flags", FLAG_COMBINATIONS, ids=flag_id)


@pytest.fixture(scope="module")
def one_torch_thread():  # type: ignore[no-untyped-def]
    """One torch thread, as training uses: more threads only fight over the cores for these small networks."""
    import torch as th  # here, not at the top: most test modules never load torch

    threads = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(threads)


TINY_TRAINING = [
    "total_steps=1024",
    "num_games=8",
    "n_steps=16",
    "batch_size=64",
    "n_epochs=1",
    "snapshot_every=256",
    "eval_every=512",
    "early_evals=[]",  # no evaluation at step 0: the tiny run's curves are 512 and 1024, as the sweep test reads
    "eval_games=8",
    "checkpoint_every=512",
    "final_eval_games=8",
    "eval_opponents=[random,greedy]",
    "grade_positions=12",
]


@pytest.fixture(scope="session")
def tiny() -> list[str]:
    """Config overrides for a ``quarto train`` run of a few seconds (1024 learner steps, the default config)."""
    return list(TINY_TRAINING)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished tiny run: its folder (``checkpoints/`` holds ``latest``, ``best``, ``final`` and
    ``step_000000512`` and ``step_000001024``) and what it printed. Tests that change it work on a copy."""
    from experiments.training import train  # here, not at the top: most test modules never load torch

    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = train.main([*TINY_TRAINING, "--run-dir", str(run_dir)])
    assert status == 0
    return run_dir, output.getvalue()
