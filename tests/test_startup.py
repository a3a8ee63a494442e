"""Start-up: what a new process pays to import quarto_env and take its first env step or MCTS move (``quarto bench
startup``), and the post-import hooks that keep numba out of it (:mod:`quarto_env.jitable`)."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarto_env.core import Variant, compiled_fields
from quarto_env.env import PYTHON_SECONDS, write_observation_in_python
from quarto_env.fast import write_observation
from quarto_env.jitable import when_imported
from quarto_env.observation import OBSERVATION_KINDS, ObservationKind
from tests.test_mcts import VARIANTS, random_position


class FakeRun:
    """``subprocess.run`` for the bench: records each timed process and answers ``import quartors`` as ``peer``
    (a Python's path, or ``None``: none imports it), without starting anything."""

    def __init__(self, peer: str | None) -> None:
        self.peer = peer
        self.timed: list[tuple[str, str, dict[str, str], bool]] = []

    def __call__(self, command: list[str], **options: Any) -> subprocess.CompletedProcess:
        python, _, script = command
        if script == "import quartors":
            return subprocess.CompletedProcess(command, 0 if python == self.peer else 1)
        environment = options["env"]
        cache = environment.get("NUMBA_CACHE_DIR")
        self.timed.append((python, script, environment, cache is not None and Path(cache).is_dir()))
        return subprocess.CompletedProcess(command, 0)


def run_bench(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], peer: str | None, *argv: str):  # type: ignore[no-untyped-def]
    from experiments.bench import startup

    fake = FakeRun(peer)
    monkeypatch.setattr(startup.subprocess, "run", fake)
    monkeypatch.setattr(startup.shutil, "which", lambda name: None)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert startup.main(list(argv)) == 0
    return fake, capsys.readouterr().out.splitlines()


def test_quarto_bench_startup_times_our_rows_warm_and_cold_and_the_peers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.bench.startup import FIRST_STEP, PROJECT_ROOT

    fake, lines = run_bench(
        monkeypatch,
        capsys,
        "/peer/python",
        "--runs",
        "2",
        "--peer-python",
        "/peer/python",
        "--sims",
        "7",
        "--peer-sims",
        "9",
    )
    names = [line[:40].strip() for line in lines[2:8]]
    assert names == [
        "first env step, warm",
        "first env step, cold",
        "first MCTS move, warm (7 sims)",
        "first MCTS move, cold (7 sims)",
        "quartors first step",
        "quartors first search (9 sims)",
    ]
    for line in lines[2:8]:  # wall and CPU seconds: a median, then the fastest and the slowest run, each
        assert len(re.findall(r"\d+\.\d+", line)) == 6
    assert [line.split(":")[0] for line in lines[-3:]] == ["ours / quartors"] * 3
    # 4 warm rows filled once, then 2 rounds of the 6 rows in alternation
    assert len(fake.timed) == 4 + 2 * 6
    rounds = fake.timed[4:]
    assert [python for python, *_ in rounds[:6]] == [sys.executable] * 4 + ["/peer/python"] * 2
    assert [script for _, script, *_ in rounds[6:]] == [script for _, script, *_ in rounds[:6]]  # the same order
    assert "UCTAgent(seed=0, sims=7)" in rounds[2][1] and "simulations=9" in rounds[5][1] and rounds[0][1] == FIRST_STEP
    caches = [environment.get("NUMBA_CACHE_DIR") for _, _, environment, _ in rounds]
    cold = [index % 6 in (1, 3) for index in range(len(rounds))]
    assert [cache is not None for cache in caches] == cold  # an empty cache of its own for each cold run
    assert all(existed for (*_, existed), is_cold in zip(rounds, cold, strict=True) if is_cold)
    assert len({cache for cache in caches if cache}) == 4
    for _, _, environment, _ in fake.timed:
        assert "PYTHONDONTWRITEBYTECODE" not in environment
        assert environment["PYTHONPATH"].split(os.pathsep)[0] == PROJECT_ROOT


def test_quarto_bench_startup_without_the_peer_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.bench.startup import PEER_MISSING

    fake, lines = run_bench(monkeypatch, capsys, None, "--runs", "1")
    assert len(lines) == 2 + 4 + 2 and lines[6] == PEER_MISSING
    assert not any("quartors" in line for line in lines[2:6]) and not any("ours /" in line for line in lines)
    assert {python for python, *_ in fake.timed} == {sys.executable}


def test_quarto_bench_startup_compiled_times_quarto_compile_then_the_first_move_in_its_cache(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.bench.startup import COMPILE

    fake, lines = run_bench(monkeypatch, capsys, None, "--runs", "2", "--sims", "7", "--compiled")
    assert lines[1].startswith("quarto compile, from an empty cache: wall ")
    assert lines[7].startswith("first MCTS move, compiled (7 sims)")
    compile_run, *rest = fake.timed
    (_, script, environment, existed), rounds = compile_run, rest[2:]  # 2 warm rows filled, not the compiled one
    assert script == COMPILE and existed
    compiled_runs = rounds[4::5]
    assert len(compiled_runs) == 2 and all(run[1] == rounds[2][1] for run in compiled_runs)  # the first move's
    assert {run[2]["NUMBA_CACHE_DIR"] for run in compiled_runs} == {environment["NUMBA_CACHE_DIR"]}


def test_quarto_bench_startup_finds_the_peer_in_this_python(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, lines = run_bench(monkeypatch, capsys, sys.executable, "--runs", "1")
    assert lines[6].startswith("quartors first step") and lines[7].startswith("quartors first search (3,200 sims)")


@pytest.mark.parametrize("argv", [["--peer-python", "/no/such/python"], ["--runs", "0"], ["--sims", "0"]])
def test_quarto_bench_startup_refuses_bad_options_in_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.bench.startup import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("quarto bench startup:") and "\n" not in error and argv[0] in error


@pytest.mark.slow
def test_the_timed_scripts_run_in_a_new_process() -> None:
    from experiments.bench import startup

    environment = startup.child_environment(os.environ)
    for row in startup.table_rows(sims=3, peer_sims=3, peer=startup.find_peer_python(), floors=True):
        if row.cold:  # the same scripts as warm rows, in an empty numba cache: a compilation of every kernel
            continue
        wall, cpu = startup.time_process(row, environment)
        assert wall > 0 and cpu > 0


def test_an_action_waits_for_its_module_and_runs_at_once_once_it_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "quarto_startup_probe"
    (tmp_path / f"{name}.py").write_text("ANSWER = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    seen: list[tuple[str, int]] = []
    when_imported(name, lambda module: seen.append(("first", module.ANSWER)))
    when_imported(name, lambda module: seen.append(("second", module.ANSWER)))
    assert seen == []
    module = importlib.import_module(name)
    assert seen == [("first", 42), ("second", 42)]  # once its code has run, in order
    spec = module.__spec__
    assert (
        type(module.__loader__).__name__ == "SourceFileLoader" and spec is not None and spec.loader is module.__loader__
    )
    when_imported(name, lambda module: seen.append(("late", module.ANSWER)))
    assert seen[-1] == ("late", 42)  # already imported: at once
    importlib.reload(module)
    assert len(seen) == 3  # each action ran once


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


def test_quarto_bench_startup_floors_times_each_python_alone_and_our_dependencies(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.bench.startup import DEPENDENCY_IMPORTS, NOTHING

    fake, lines = run_bench(
        monkeypatch, capsys, "/peer/python", "--runs", "1", "--floors", "--peer-python", "/peer/python"
    )
    assert [line[:40].strip() for line in lines[8:11]] == [
        "our Python alone",
        "our dependencies' imports alone",
        "quartors' Python alone",
    ]
    rounds = fake.timed[-9:]
    assert [(python, script) for python, script, *_ in rounds[6:]] == [
        (sys.executable, NOTHING),
        (sys.executable, DEPENDENCY_IMPORTS),
        ("/peer/python", NOTHING),
    ]
    assert lines[-1].startswith("ours / quartors: our dependencies' imports alone / first step: wall ")


def test_the_dependency_floor_imports_every_other_project_the_env_imports() -> None:
    import ast

    from experiments.bench.startup import DEPENDENCY_IMPORTS, PROJECT_ROOT

    def top_level_imports(source: str) -> set[str]:
        found = set()
        for node in ast.parse(source).body:
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
        return found

    env_source = (Path(PROJECT_ROOT) / "quarto_env" / "env.py").read_text()
    others = {name for name in top_level_imports(env_source) if name not in sys.stdlib_module_names}
    others -= {"quarto_env", "__future__"}
    assert others and others == top_level_imports(DEPENDENCY_IMPORTS)
