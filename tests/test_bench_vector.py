"""``quarto bench vector``: the run without pgx (one line naming the extra, absolute figures, the JSON record),
its table, and JAX kept to the benchmark's optional path. No test asserts on wall time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.bench import vector

REPO = Path(__file__).resolve().parent.parent
SMALL = ["--batches", "1", "3", "--observations", "none", "parity", "--seconds", "0.01", "--rounds", "2"]


def test_without_pgx_it_says_what_to_install_and_writes_absolute_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vector, "pgx_installed", lambda: False)
    out = tmp_path / "vector.json"
    assert vector.main([*SMALL, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count(vector.INSTALL_HINT) == 1 and "pip install 'quarto-env[bench]'" in printed
    rows = printed.replace(vector.INSTALL_HINT, "")
    assert not re.search(r"^pgx ", rows, re.MULTILINE) and "(1.00)" not in rows  # no pgx rows, no ratios
    record = json.loads(out.read_text())
    assert record["command"] == "quarto bench vector " + " ".join([*SMALL, "--out", str(out)])
    assert record["config"]["batches"] == [1, 3] and record["config"]["with_pgx"] is False
    medians = record["results"]["median_steps_per_second"]
    paths = ["VectorQuarto none", "VectorQuarto parity", "VectorQuarto none, numpy sampler", "GameBatch loop, none"]
    assert list(medians) == paths
    assert all(medians[path][batch] > 0 for path in paths for batch in ("1", "3"))
    assert all(len(record["results"]["steps_per_second"][path]["3"]) == 2 for path in paths)  # one per round
    assert record["results"]["ratio_to_pgx connect_four"] == {}


def test_threads_add_a_row_per_kind_and_count(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vector, "pgx_installed", lambda: False)
    assert vector.main([*SMALL, "--threads", "1", "2", "1"]) == 0
    rows = [line.split("  ")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("VectorQuarto")]
    threaded = ["VectorQuarto none, 2 threads", "VectorQuarto parity, 2 threads"]
    assert rows == ["VectorQuarto none", "VectorQuarto parity", *threaded, "VectorQuarto none, numpy sampler"]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux only")
def test_pgx_one_core_starts_jax_on_one_core_and_gives_the_cores_back(monkeypatch: pytest.MonkeyPatch) -> None:
    cores, seen = os.sched_getaffinity(0), []
    monkeypatch.setattr(vector, "PgxRunner", lambda game, batch, seed, fused: (game, batch))
    monkeypatch.setattr(vector, "warm_up", lambda runner: seen.append((runner, os.sched_getaffinity(0))))
    vector.start_jax_on_one_core([1, 64], seed=0)
    assert seen == [(("connect_four", 1), {min(cores)}), (("connect_four", 64), {min(cores)})]
    assert os.sched_getaffinity(0) == cores


def test_pgx_one_core_is_refused_in_one_line_without_affinity(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    with pytest.raises(SystemExit) as exit_:
        vector.main([*SMALL, "--pgx-one-core"])
    assert exit_.value.code == 2
    assert "--pgx-one-core needs os.sched_setaffinity (Linux)" in capsys.readouterr().err


def test_no_pgx_leaves_pgx_out_without_the_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vector, "pgx_installed", lambda: True)  # as if installed: --no-pgx must not look further
    monkeypatch.setattr(vector, "pgx_paths", lambda: pytest.fail("pgx's paths made under --no-pgx"))
    assert vector.main([*SMALL, "--no-pgx"]) == 0
    assert vector.INSTALL_HINT not in capsys.readouterr().out


def test_the_table_shows_ratios_where_pgx_was_measured() -> None:
    medians = {"pgx connect_four": {1: 100.0, 64: 2000.0}, "VectorQuarto none": {1: 250.0, 64: 10000.0}}
    ratios = {name: vector._ratios(by_batch, medians["pgx connect_four"]) for name, by_batch in medians.items()}
    table = vector.results_table(medians, ratios, [1, 64])
    assert re.search(r"VectorQuarto none\s+250 \(2\.50\)\s+10,000 \(5\.00\)", table), table
    assert "ratio to pgx connect_four" in table
    assert "(2.50)" not in vector.results_table(medians, {}, [1, 64])


JAX_HOMES = (
    "quarto_env/jax/",  # the rules in JAX (the jax extra)
    "agents/networks/jax_network.py",
    "experiments/training/alphazero_jax.py",  # backend: jax
    "experiments/training/alphazero_jax_timing.py",  # its speed
    "experiments/bench/vector.py",  # pgx, the peer
    "experiments/bench/jax.py",
    "experiments/bench/jax_check.py",
)
"""The only modules that import JAX or pgx: the jax extra's own and the benchmarks that compare against pgx."""


def test_only_the_jax_extra_and_the_benchmarks_import_jax_or_pgx() -> None:
    pattern = re.compile(r"^\s*(import|from)\s+(jax|pgx)\b", re.MULTILINE)
    importers = [
        path.relative_to(REPO).as_posix()
        for package in ("quarto_env", "agents", "experiments")
        for path in (REPO / package).rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    strays = [path for path in importers if not path.startswith(JAX_HOMES)]
    assert not strays and "experiments/bench/vector.py" in importers


def test_a_run_without_pgx_loads_no_jax() -> None:
    code = (
        "import sys; from experiments.bench import vector; "
        f"vector.main({[*SMALL, '--no-pgx']!r}); "
        "assert not {'jax', 'pgx'} & set(sys.modules), 'JAX was imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, timeout=300)


@pytest.mark.bench
@pytest.mark.slow
def test_with_pgx_every_path_is_a_ratio_to_pgx_connect_four(tmp_path: Path) -> None:
    pytest.importorskip("pgx")  # the optional extra: pip install -e ".[bench]"
    out = tmp_path / "vector.json"
    assert (
        vector.main(
            ["--batches", "2", "--observations", "none", "--seconds", "0.01", "--rounds", "1", "--out", str(out)]
        )
        == 0
    )
    record = json.loads(out.read_text())
    ratios = record["results"]["ratio_to_pgx connect_four"]
    assert set(ratios) >= {"pgx connect_four", "pgx tic_tac_toe", "pgx connect_four, a call per step"}
    assert ratios["pgx connect_four"]["2"] == 1.0 and all(r["2"] > 0 for r in ratios.values())
    assert record["config"]["with_pgx"] is True and record["config"]["jax_backend"]
