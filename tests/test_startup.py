"""Start-up: what a new process pays to import quarto_env and take its first env step (``quarto bench startup``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarto_env.core import Variant, compiled_fields
from quarto_env.env import PYTHON_SECONDS, write_observation_in_python
from quarto_env.fast import write_observation
from quarto_env.observation import OBSERVATION_KINDS, ObservationKind
from tests.test_mcts import VARIANTS, random_position


def test_quarto_bench_startup_prints_a_warm_and_a_cold_row(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.bench.startup import main

    assert main(["--runs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["warm", "cold"]
    for line in lines[2:]:  # wall and CPU seconds: a median, then the fastest and the slowest run, each
        seconds = [float(number) for number in re.findall(r"\d+\.\d+", line)]
        assert len(seconds) == 6 and all(value > 0 for value in seconds)


FIRST_STEP = """
import importlib, json, sys
import numpy as np
import quarto_env
importlib.import_module("quarto_env.env")._python_seconds_left[0] = {python_seconds}
env = quarto_env.env()
env.reset(seed=0)
loaded = []
for _ in range({steps}):
    observation, *_ = env.last()
    loaded.append("numba" in sys.modules)
    env.step(int(np.flatnonzero(observation["action_mask"])[0]))
print(json.dumps({{"numba": loaded, "pillow": "PIL" in sys.modules}}))
"""


def first_steps(python_seconds: float, steps: int) -> dict:
    """Whether numba was loaded by each of the first ``steps`` observations of a fresh process (``env.last()``),
    and Pillow after them."""
    script = FIRST_STEP.format(python_seconds=python_seconds, steps=steps)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_package_and_a_first_step_load_neither_numba_nor_pillow() -> None:
    assert first_steps(PYTHON_SECONDS, steps=2) == {"numba": [False, False], "pillow": False}


def test_the_env_loads_the_compiled_kernel_once_its_python_seconds_are_spent() -> None:
    assert first_steps(1e-9, steps=3)["numba"] == [False, True, True]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(VARIANTS),
    st.integers(0, 2**31 - 1),
    st.integers(0, 32),
    st.sampled_from(list(OBSERVATION_KINDS.values())),
    st.booleans(),
)
def test_observations_written_in_python_are_the_compiled_kernels(
    variant: Variant, seed: int, plies: int, kind: ObservationKind, acting: bool
) -> None:
    state = random_position(variant, seed, plies)
    python_planes, compiled_planes = np.zeros(kind.shape, dtype=np.int8), np.zeros(kind.shape, dtype=np.int8)
    python_mask, compiled_mask = np.full(variant.num_actions, 9, np.int8), np.full(variant.num_actions, 9, np.int8)
    write_observation_in_python(python_planes, python_mask, kind.level, state, variant, acting)
    fields = compiled_fields(state)
    groups, counted, declaration = variant.groups, variant.counted, variant.declaration
    write_observation(compiled_planes, compiled_mask, kind.level, fields, groups, counted, declaration, acting)
    np.testing.assert_array_equal(python_planes, compiled_planes)
    np.testing.assert_array_equal(python_mask, compiled_mask)
