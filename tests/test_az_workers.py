"""AlphaZero's self-play workers (``workers: N``, experiments/training/az_workers.py): ``workers: 0`` stays the
bit-reproducible single process; a run with Ray workers trains, checkpoints, logs them and resumes; a worker
killed mid-run is restarted; bad ``workers`` values and ``--address`` forms are one line; ``quarto bench az
--workers`` runs; and (slow) the workers of a two-node Ray cluster run on both nodes.

The tests that need Ray share one local Ray of two CPUs (``local_ray``, shut down after the module's last one);
the cluster test, last in the module, shuts it down first and its own cluster after."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import torch as th
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.alphazero import load_network
from agents.networks.checkpoints import read_metadata
from experiments.bench import az as bench_az
from experiments.training import train as train_module
from experiments.training.az_selfplay import new_network
from experiments.training.config_file import config_from_dict
from tests.test_train import kill_once_checkpointed
from tests.test_train_alphazero import train

CONFIG = str(Path(__file__).resolve().parent.parent / "configs" / "alphazero.yaml")
TINY = [
    "--config",
    CONFIG,
    "total_steps=256",
    "num_games=16",
    "sims=8",
    "net_arch=[8]",
    "buffer_size=2000",
    "batch_size=32",
    "early_evals=[]",
    "eval_every=100000",
    "eval_games=4",
    "eval_sims=4",
    "final_eval_games=4",
    "eval_opponents=[random]",
    "grade_positions=0",
    "checkpoint_every=128",
]


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return [(event.step, event.value) for event in events.Scalars(tag)]


def tags(run_dir: Path) -> set[str]:
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return set(events.Tags()["scalars"])


# ---------------------------------------------------------------------------------------------------------
# Without Ray: workers 0, and what is refused before Ray starts
# ---------------------------------------------------------------------------------------------------------
def test_workers_0_runs_are_bit_reproducible(tmp_path: Path) -> None:
    runs = [tmp_path / "a", tmp_path / "b"]
    for run_dir in runs:  # batches of 8: the first finished game already trains, so there are losses to compare
        assert train([*TINY, "workers=0", "batch_size=8", "--run-dir", str(run_dir)])[0] == 0
    first, second = (load_network(run_dir)[0].state_dict() for run_dir in runs)
    for key in first:
        assert th.equal(first[key], second[key]), key
    for tag in ("losses/policy_loss", "losses/value_loss", "charts/game_length", "charts/buffer_size"):
        assert scalars(runs[0], tag) == scalars(runs[1], tag), tag
    assert "charts/weights_staleness" not in tags(runs[0]) and not (runs[0] / "workers.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["workers=-1"], "config field alphazero.workers must be an integer >= 0 and <= 1024, got -1"),
        (["workers=two"], "config field alphazero.workers must be int, got 'two'"),
        (["workers=1", "algorithm=ppo"], "config field alphazero.workers must be 0 with algorithm ppo"),
        (["broadcast_every=0"], "config field alphazero.broadcast_every must be an integer >= 1"),
        # options the rest of the section leaves unused: a run would seem to try them
        (["broadcast_every=4"], "config field alphazero.broadcast_every is used only with workers"),
        (["gumbel_actions=8"], "config field alphazero.gumbel_actions is used only with root gumbel"),
        (["cheap_sims=8"], "config field alphazero.cheap_sims is used only with full_search_share below 1"),
        (["workers=1", "--address", "localhost"], "--address 'localhost' is not a Ray address: give auto"),
        (["workers=1", "--address", "http://h:1"], "is not a Ray address"),
        (["workers=0", "--address", "auto"], "--address auto is for a run on Ray"),
        pytest.param(  # Ray itself answers here: without the extra, the refusal names the extra instead
            ["workers=1", "--address", "127.0.0.1:1"], "cannot reach a Ray head at 127.0.0.1:1", marks=pytest.mark.ray
        ),
    ],
)
def test_bad_workers_and_addresses_are_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.perf_counter()
    assert train_module.main([*TINY, *argv, "--run-dir", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1 and "Traceback" not in error
    assert time.perf_counter() - started < 10
    assert not (tmp_path / "run" / "config.yaml").exists()


@pytest.mark.ray
def test_a_refused_ray_is_one_line_naming_token_auth(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ray = pytest.importorskip("ray")

    def refuse(**_: Any) -> None:  # what Ray 2.60 does where the head requires a token: its core logs on fd 2,
        os.write(2, b"gcs_client.cc:210: RPC error: InvalidAuthToken: Authentication token is missing\n")
        raise ConnectionError("Failed to connect to Ray cluster")  # then raises a bare ConnectionError

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    assert train_module.main([*TINY, "workers=1", "--address", "auto", "--run-dir", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert (
        error.startswith("quarto train: the Ray cluster at auto refused this process (InvalidAuthToken)")
        and "Traceback" not in error
    )
    assert "RAY_AUTH_MODE=token" in error and error.count("\n") == 1
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_help_config_lists_the_workers_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert train_module.main(["--help-config"]) == 0
    listed = capsys.readouterr().out
    assert "workers (int, default 0, range >= 0 and <= 1,024)" in listed and "broadcast_every (int, default 1" in listed


# ---------------------------------------------------------------------------------------------------------
# With a local Ray
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_ray() -> Any:
    """One local Ray of two CPUs for the module's worker tests (a run inside it leaves it up)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        # address="local": a Ray of its own, even where someone's `ray start` cluster runs on this machine (which
        # ray.init() would join, and refuse num_cpus for)
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def workers_run(local_ray: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run_dir = tmp_path_factory.mktemp("workers") / "run"
    status, printed = train([*TINY, "workers=2", "total_steps=512", "--run-dir", str(run_dir)])
    assert status == 0
    return run_dir, printed


@pytest.mark.ray
def test_a_run_with_workers_trains_checkpoints_and_logs_them(workers_run: tuple[Path, str]) -> None:
    run_dir, printed = workers_run
    checkpoints = {p.name for p in (run_dir / "checkpoints").iterdir()}
    assert {"latest.zip", "final.zip", "step_000000256.zip", "step_000000512.zip"} <= checkpoints
    assert read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"] == 512
    assert "agent spec: az:" in printed
    logged = tags(run_dir)
    assert {"charts/worker_0_positions", "charts/worker_1_positions", "charts/weights_staleness"} <= logged
    assert {"losses/policy_loss", "charts/positions_per_s", "eval/score"} <= logged
    workers = json.loads((run_dir / "workers.json").read_text())
    assert [w["worker"] for w in workers] == [0, 1] and sum(w["positions"] for w in workers) >= 512
    assert all(w["restarts"] == 0 and w["node_id"] for w in workers)


@pytest.mark.ray
def test_a_run_with_workers_resumes(workers_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir = tmp_path / "resumed"
    shutil.copytree(workers_run[0], run_dir)
    status, printed = train(["--resume", str(run_dir), "total_steps=640"])
    assert status == 0 and f"resuming {run_dir} at step 512" in printed
    assert read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"] == 640
    assert max(step for step, _ in scalars(run_dir, "charts/buffer_size")) == 640
    assert (run_dir / "command.txt").read_text().count("quarto train") == 2


@pytest.mark.ray
def test_a_killed_worker_is_restarted(local_ray: Any) -> None:
    from experiments.training.az_workers import START_SECONDS, WorkerPool

    config = config_from_dict({"algorithm": "alphazero", "num_games": 4, "sims": 2, "net_arch": [8], "workers": 2})
    lines: list[str] = []
    pool = WorkerPool(config, seed=0, network=new_network(config, config.variant), log=lines.append)
    try:
        assert pool.next_report().searched == 4
        killed = pool.places[0]["pid"]
        os.kill(killed, signal.SIGKILL)
        # The restart waits (inside next_report) for the new worker to start, up to START_SECONDS: on a loaded
        # machine importing torch and loading the kernels alone can take a minute.
        deadline = time.time() + START_SECONDS + 60
        while time.time() < deadline:
            report = pool.next_report()
            if pool.restarts[0] and report.worker == 0:
                break  # the restarted worker plays
        assert pool.restarts == [1, 0] and report.worker == 0
        assert len(lines) == 1 and lines[0].startswith("self-play worker 0 died (")
        assert pool.places[0]["pid"] != killed
    finally:
        pool.close()


@pytest.mark.ray
def test_bench_az_compares_workers(local_ray: Any, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--workers", "1", "--seconds", "0.3", "--rounds", "1", "--games", "4", "--sims", "2", "--width", "8"]
    assert bench_az.main(argv) == 0
    out = capsys.readouterr().out
    assert "ratio to 0 workers" in out and "0 (this process)" in out and "1.00" in out


def test_bench_az_takes_one_games_number_with_workers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_az.main(["--workers", "2", "--games", "4", "8"])
    assert "--games takes one number with --workers" in capsys.readouterr().err


@pytest.mark.ray
@pytest.mark.slow
def test_a_killed_driver_resumes_with_workers(local_ray: Any, tmp_path: Path) -> None:
    """The driver joins the module's Ray (``--address``), so that its SIGKILL leaves no Ray of its own behind: Ray
    ends the actors of a driver that is gone."""
    run_dir = tmp_path / "killed"
    address = local_ray.get_runtime_context().gcs_address
    overrides = [*TINY, "total_steps=1000000", "workers=2", "--address", address]
    killed_at = kill_once_checkpointed(overrides, run_dir, 256, seconds=120)
    assert killed_at >= 256
    status, printed = train(["--resume", str(run_dir), f"total_steps={killed_at + 128}", "final_eval_games=2"])
    assert status == 0 and f"at step {killed_at:,}" in printed
    assert read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"] == killed_at + 128


# ---------------------------------------------------------------------------------------------------------
# A two-node cluster (last: it replaces the module's local Ray)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.ray
@pytest.mark.slow
def test_workers_run_on_both_nodes_of_a_cluster(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    ray.shutdown()  # the module's local Ray, if a test above started it
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        run_dir = tmp_path / "run"
        assert train([*TINY, "workers=2", "total_steps=128", "--run-dir", str(run_dir)])[0] == 0
        workers = json.loads((run_dir / "workers.json").read_text())
        assert len({w["node_id"] for w in workers}) == 2
        assert read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"] == 128
    finally:
        ray.shutdown()
        cluster.shutdown()
