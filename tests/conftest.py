"""Shared test setup: a headless matplotlib, and the ``variant_flags`` parameter -- every combination of the
environment's variant flags, for the tests that take it."""

from __future__ import annotations

import itertools
import os

import pytest

# The "human" render mode opens a window when matplotlib has an interactive backend: never in the tests.
os.environ.setdefault("MPLBACKEND", "Agg")

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
