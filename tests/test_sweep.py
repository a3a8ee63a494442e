"""``quarto sweep``: its arguments and errors, the statistics over seeds, and a real sweep on a local Ray."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import importlib.util
import io
import json
import math
import os
import re
import statistics
from pathlib import Path

import numpy as np
import pytest

from experiments.output import LOCK_FILE, hold_lock
from experiments.training import ray_runtime, sweep, sweep_stats
from experiments.training.ray_runtime import RayStartError, check_address
from experiments.training.sweep import SweepError, parse_sets, plan_trials, split_values
from experiments.training.sweep_stats import summarize
from experiments.training.train import RAY_INSTALL

FinishedSweep = tuple[Path, list[tuple[int, str, str]]]


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = sweep.main(argv)
    return status, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------------------
def test_split_values_keeps_bracketed_commas() -> None:
    assert split_values("1e-4,3e-4") == ["1e-4", "3e-4"]
    assert split_values("[32],[64,64]") == ["[32]", "[64,64]"]
    assert split_values("{a: 1, b: 2},x") == ["{a: 1, b: 2}", "x"]


def test_grid_of_sets_and_seeds() -> None:
    sets = parse_sets(["learning_rate=1e-4,3e-4", "total_steps=5e5", "opponents.minimax:depth=2=0.1,0.5"])
    assert sets[2] == ("opponents.minimax:depth=2", ["0.1", "0.5"])
    trials = plan_trials(sets, [0, 1])
    assert len(trials) == 2 * 2 * 2
    assert trials[0].overrides == ("total_steps=5e5", "learning_rate=1e-4", "opponents.minimax:depth=2=0.1", "seed=0")
    assert trials[0].setting == "learning_rate=1e-4 opponents.minimax:depth=2=0.1"
    assert len({t.name for t in trials}) == len(trials)
    assert all("/" not in t.name and " " not in t.name for t in trials)
    assert [t.name for t in plan_trials([], [3])] == ["seed=3"]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("learning_rate", "must be KEY=VALUE"),
        ("=1", "must be KEY=VALUE"),
        ("learning_rate=", "must be KEY=VALUE"),
        ("learning_rate=1e-4,,3e-4", "has an empty value"),
        ("learning_rate=1e-4,1e-4", "repeats a value"),
        ("seed=1,2", "given by --seeds"),
    ],
)
def test_bad_set_is_refused(item: str, message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_sets([item])


def test_a_key_set_twice_is_refused() -> None:
    with pytest.raises(SweepError, match="given twice"):
        parse_sets(["learning_rate=1e-4", "learning_rate=3e-4"])


@pytest.mark.parametrize("address", [None, "auto", "10.0.0.5:6379", "head-node:6379", "ray://10.0.0.5:10001"])
def test_good_addresses(address: str | None) -> None:
    assert check_address(address) == address


@pytest.mark.parametrize("address", ["", "localhost", "10.0.0.5:99999", "http://10.0.0.5:6379", "a b:1", "host:"])
def test_bad_address_is_refused(address: str) -> None:
    with pytest.raises(RayStartError, match="not a Ray address: give auto"):
        check_address(address)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--set", "learning_rate=1e-4,oops"], r"trial learning_rate=oops__seed=0: .*learning_rate must be float"),
        (["--set", "no_such_field=1,2"], r"unknown config key\(s\) no_such_field; allowed: .*learning_rate"),
        (["--set", "learning_rate=0,1e-4"], r"learning_rate must be a finite number > 0 and <= 1, got 0.0"),
        (["--set", "opponents.nobody=1"], r"unknown agent kind 'nobody'.*the kinds are random"),
        (["--address", "localhost"], r"--address 'localhost' is not a Ray address"),
        (["--address", "127.0.0.1:1"], r"cannot reach a Ray head at 127.0.0.1:1 \(Connection refused\)"),
        (["--seeds", "0", "x"], r"--seeds takes integers"),
        (["--seeds", "1", "1"], r"--seeds repeats a seed"),
        (["--seeds", "-1"], r"seed must be an integer >= 0 and <= 4294967295, got -1"),
    ],
)
def test_bad_command_lines_exit_2_before_ray(tmp_path: Path, argv: list[str], message: str) -> None:
    base = ["configs/default.yaml", "--seeds", "0", "--out", str(tmp_path / "sweep")]
    if "127.0.0.1:1" in argv and importlib.util.find_spec("ray") is None:
        message = r"a sweep needs the ray extra .*install it with " + re.escape(RAY_INSTALL)  # checked first
    status, _, err = run_main(base + argv if "--seeds" not in argv else ["configs/default.yaml", *argv])
    assert status == 2
    assert err.count("\n") == 1
    assert re.search(message, err), err
    assert not (tmp_path / "sweep" / "sweep.json").exists()


def test_resume_needs_a_sweep_folder(tmp_path: Path) -> None:
    status, _, err = run_main(["--resume", str(tmp_path)])
    assert status == 2
    assert "no sweep.json there" in err
    for other in ('{"config": null}', "[1]", '{"sets": 5, "seeds": [0]}'):
        (tmp_path / "sweep.json").write_text(other)
        status, _, err = run_main(["--resume", str(tmp_path)])
        assert status == 2 and err.count("\n") == 1 and "is not a sweep's settings" in err, err
    status, _, err = run_main(["--resume", str(tmp_path), "--seeds", "0"])
    assert status == 2
    assert "drop --seeds" in err


def test_missing_config_is_refused_naming_the_shipped_ones(tmp_path: Path) -> None:
    status, _, err = run_main([str(tmp_path / "nope.yaml"), "--seeds", "0"])
    assert status == 2 and err.count("\n") == 1
    assert "does not exist; the shipped configs (--config NAME): " in err and "quick" in err


def test_a_sweep_folder_in_use_is_refused_naming_its_holder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "check_ray", lambda address: None)  # refused before Ray is needed
    monkeypatch.setattr(sweep, "_run_on_ray", lambda *args: pytest.fail("a second sweep ran"))
    out = tmp_path / "sweep"
    out.mkdir()
    with hold_lock(out / LOCK_FILE, "the first sweep"):
        status, _, err = run_main(["configs/default.yaml", "--seeds", "0", "--out", str(out)])
    assert status == 2 and err.count("\n") == 1
    assert f"sweep folder {str(out)!r} is in use by another writer in this process (pid {os.getpid()}" in err
    assert list(out.iterdir()) == []


def test_a_sweep_started_meanwhile_is_not_written_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "sweep"
    lock = sweep.hold_lock

    def started_while_waiting_for_the_lock(path: Path, named: str) -> contextlib.AbstractContextManager[None]:
        (out / sweep.SWEEP_FILE).write_text("{}")  # another sweep, between the first check and the lock
        return lock(path, named)

    monkeypatch.setattr(sweep, "check_ray", lambda address: None)
    monkeypatch.setattr(sweep, "hold_lock", started_while_waiting_for_the_lock)
    monkeypatch.setattr(sweep, "_run_on_ray", lambda *args: pytest.fail("the second sweep ran"))
    status, _, err = run_main(["configs/default.yaml", "--seeds", "0", "--out", str(out)])
    assert status == 2 and f"already holds a sweep: `quarto sweep --resume {out}` finishes it" in err
    assert (out / sweep.SWEEP_FILE).read_text() == "{}"


@pytest.mark.ray
def test_a_sweep_that_ray_refuses_leaves_no_sweep_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    import ray

    def refuse(**_: object) -> None:
        raise ConnectionError("no head")

    monkeypatch.setattr(ray, "init", refuse)
    out = tmp_path / "sweep"
    for _ in range(2):  # the same command again is not refused as a second sweep in the folder
        status, _, err = run_main(["configs/default.yaml", "--seeds", "0", "--out", str(out)])
        assert status == 2 and err == "quarto sweep: cannot start or reach Ray at a local Ray: no head\n"
        assert not (out / "sweep.json").exists() and not (out / "command.txt").exists()


@pytest.mark.ray
def test_a_refused_token_names_ray_auth_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    import ray

    def refuse(**_: object) -> None:  # what Ray 2.60 does where the head requires a token: its core logs, then
        for _ in range(3):  # a bare ConnectionError
            os.write(
                2,
                b"gcs_client.cc:210: Failed to get cluster ID from GCS server: Unauthenticated: RPC error: "
                b"InvalidAuthToken: Authentication token is missing or incorrect\n",
            )
        raise ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6390")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(sweep, "check_reachable", lambda address: None)
    monkeypatch.setattr(ray_runtime, "check_reachable", lambda address: None)
    status, _, err = run_main(["configs/default.yaml", "--seeds", "0", "--out", str(tmp_path), "--address", "h:6390"])
    assert status == 2 and err.count("\n") == 1, err  # Ray's own lines on fd 2 held back
    assert "refused this process (InvalidAuthToken)" in err and "RAY_AUTH_MODE=token" in err
    assert not (tmp_path / "sweep.json").exists()


@pytest.mark.ray
@pytest.mark.slow
def test_trials_that_want_more_gpus_than_the_cluster_are_refused_once_ray_is_up(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    argv = ["configs/rllib.yaml", "--seeds", "0", "--out", str(out), "--set", "gpus_per_learner=0,1"]
    status, _, err = run_main(argv)
    (ours,) = [line for line in err.splitlines() if line.startswith("quarto sweep")]  # besides Ray's token note
    assert status == 2
    assert "trial gpus_per_learner=1__seed=0: config field rllib.gpus_per_learner must fit the Ray" in ours
    assert not out.exists()  # refused after its claim: the folder it made is gone


@pytest.mark.ray
def test_rllib_trials_reserve_their_env_runners_and_learners(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    config = Path(__file__).resolve().parent.parent / "configs"
    rllib = {"config": str(config / "rllib.yaml"), "overrides": ["num_env_runners=2", "num_learners=1", "seed=0"]}
    factory = sweep.trial_resources({"trial": rllib}, cpus_per_trial=1.5)
    assert factory.bundles == [{"CPU": 1.5}, {"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}]
    sb3 = {"config": str(config / "default.yaml"), "overrides": ["num_env_runners=2", "seed=0"]}  # ignored by sb3
    assert sweep.trial_resources({"trial": sb3}, cpus_per_trial=2).bundles == [{"CPU": 2}]


# ---------------------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------------------
T_975 = {1: 12.7062, 2: 4.3027, 3: 3.1824}
"""Student's t quantiles at 97.5% by degrees of freedom, from a printed table (not from SciPy, which computes the
summary)."""


@pytest.mark.ray
def test_summary_against_hand_computed_values() -> None:
    pytest.importorskip("scipy")  # the statistics come with the ray extra
    values = [0.2, 0.4, 0.9, 1.0]
    summary = summarize(values)
    assert summary.mean == pytest.approx(0.625)
    assert summary.iqm == pytest.approx((0.4 + 0.9) / 2)  # the lowest and the highest quarter cut
    half = T_975[3] * statistics.stdev(values) / math.sqrt(4)
    assert (summary.low, summary.high) == pytest.approx((0.625 - half, 0.625 + half), abs=1e-4)


@pytest.mark.ray
def test_few_seeds_give_a_t_interval_wider_than_their_range() -> None:
    """Over three seeds the percentile bootstrap gave the seeds' range, which holds the mean three times in four."""
    pytest.importorskip("scipy")  # the statistics come with the ray extra
    summary = summarize([0.9, 1.0])
    assert summary.mean == pytest.approx(0.95) and summary.high - summary.mean == pytest.approx(
        T_975[1] * 0.05, abs=1e-3
    )
    three = summarize([0.86, 0.89, 0.88])
    assert three.low < 0.86 and three.high > 0.89
    assert summarize([0.5]) == sweep_stats.Summary(0.5, 0.5, 0.5, 0.5)
    assert summarize([1.0, 1.0, 1.0]) == sweep_stats.Summary(1.0, 1.0, 1.0, 1.0)
    cut = summarize([0.9, 1.0], (0.0, 1.0))  # a score's interval stays within 0 to 1
    assert cut.high == 1.0 and cut.low == summary.low


def test_evaluation_steps_snap_to_their_interval() -> None:
    assert [sweep_stats.snapped(step, 250_000) for step in (250_048, 1_000_064, 1_003_520, 1_500_160, 1_503_680)] == [
        250_000,
        1_000_000,
        1_000_000,
        1_500_000,
        1_500_000,
    ]
    assert sweep_stats.snapped(7, 512) == 0 and sweep_stats.snapped(300, 512) == 512


def test_the_last_evaluation_is_a_point_of_its_own() -> None:
    """Every run evaluates at its end (the first step at or past total_steps): that point is total_steps, and it
    neither replaces the evaluation before it nor lands past the end (an audit: 943 and 1,012 both went to 900
    with total_steps=1000 and eval_every=300; 400k went to 500k with eval_every=250k)."""
    logged = (0, 340, 604, 943, 1_012)
    assert [sweep_stats.snapped(step, 300, (), 1_000) for step in logged] == [0, 300, 600, 900, 1_000]
    assert sweep_stats.snapped(401_408, 250_000, (), 400_000) == 400_000
    assert sweep_stats.snapped(250_880, 250_000, (), 300_000) == 250_000  # not pulled to the last point
    assert sweep_stats.snapped(1_055, 300, (), 1_000) == sweep_stats.snapped(1_012, 300, (), 1_000) == 1_000


def test_early_evaluation_steps_snap_to_their_own_points_not_to_the_interval() -> None:
    from experiments.training.config import EARLY_EVALS

    early = (0, 16_000, 32_000, 64_000, 128_000)
    logged = (0, 16_384, 32_768, 65_536, 131_072, 250_880, 501_760)
    assert [sweep_stats.snapped(step, 250_000, early) for step in logged] == [*early, 250_000, 500_000]
    assert len({sweep_stats.snapped(step, 250_000, EARLY_EVALS) for step in (0, *EARLY_EVALS)}) == len(
        {0, *EARLY_EVALS}
    )


@pytest.mark.ray
def test_iqm_of_eight_seeds_drops_two_at_each_end() -> None:
    pytest.importorskip("scipy")  # the statistics come with the ray extra
    values = [0.0, 0.1, 0.5, 0.5, 0.6, 0.6, 0.9, 1.0]
    assert summarize(values).iqm == pytest.approx(np.mean([0.5, 0.5, 0.6, 0.6]))


# ---------------------------------------------------------------------------------------------------------
# A real sweep on a local Ray: two seeds of a tiny config; one trial fails (its folder is held), --resume
# finishes it, and the aggregate equals what the trials' own files give.
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory: pytest.TempPathFactory, tiny: list[str]) -> FinishedSweep:
    pytest.importorskip("ray")
    out = tmp_path_factory.mktemp("sweep") / "tiny"
    argv = ["configs/default.yaml", "--seeds", "0", "1", "--out", str(out)]
    sets = [*(item for item in tiny if not item.startswith("grade_positions=")), "grade_positions=0"]
    argv += [arg for item in sets for arg in ("--set", item)]
    held = out / "trials" / "seed=1"
    held.mkdir(parents=True)
    with open(held / ".lock", "a+") as lock:  # quarto train refuses a run folder another process holds
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        first = run_main(argv)
    second = run_main(["--resume", str(out), "--max-concurrent", "1"])
    return out, [first, second]


@pytest.mark.ray
@pytest.mark.slow
def test_failed_trial_is_reported_and_resume_finishes_it(
    finished_sweep: FinishedSweep,
) -> None:
    out, (first, second) = finished_sweep
    assert first[0] == 1
    assert "1 trial(s) failed: seed=1" in first[2]
    assert f"`quarto sweep --resume {out}` finishes them" in first[2]
    assert second[0] == 0, second[2]
    assert "is in use by another process" in (out / "trials" / "seed=1" / "train.log").read_text()
    for seed in (0, 1):
        run_dir = out / "trials" / f"seed={seed}"
        assert (run_dir / "final_eval.json").exists()
        assert f"seed={seed}" in (run_dir / "command.txt").read_text()
    assert len((out / "command.txt").read_text().splitlines()) == 2
    assert json.loads((out / "sweep.json").read_text())["seeds"] == [0, 1]


@pytest.mark.ray
@pytest.mark.slow
def test_aggregate_equals_the_trials_own_results(finished_sweep: FinishedSweep) -> None:
    out, (_, (_, printed, _)) = finished_sweep
    scores: dict[tuple[str, str], list[float]] = {}
    for seed in (0, 1):
        results = json.loads((out / "trials" / f"seed={seed}" / "final_eval.json").read_text())["results"]
        for result in results:
            scores.setdefault((result["opponent"], result["policy"]), []).append(result["score"])
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    (wall_clock,) = [r for r in rows if r["opponent"] == sweep_stats.WALL_CLOCK]
    minutes = [sweep_stats.training_minutes(out / "trials" / f"seed={seed}") for seed in (0, 1)]
    assert float(wall_clock["mean"]) == pytest.approx(np.mean(minutes)) and 0 < min(minutes) < 10
    rows.remove(wall_clock)
    assert {(r["opponent"], r["policy"]) for r in rows} == set(scores) and len(rows) == len(scores) == 4
    for row in rows:
        pair = scores[row["opponent"], row["policy"]]
        assert int(row["seeds"]) == 2
        assert float(row["mean"]) == pytest.approx(sum(pair) / 2)
        assert float(row["iqm"]) == pytest.approx(sum(pair) / 2)  # a quarter of two seeds rounds down to none
        half = (
            T_975[1] * abs(pair[0] - pair[1]) / 2
        )  # the t-interval of two seeds: their standard error is half the gap
        assert (float(row["low"]), float(row["high"])) == pytest.approx(  # within a score's 0 to 1
            (max(sum(pair) / 2 - half, 0), min(sum(pair) / 2 + half, 1)), abs=1e-4
        )
    table = (out / "results.md").read_text()
    assert table in printed
    assert len(table.splitlines()) == 2 + 4 + 1


@pytest.mark.ray
@pytest.mark.slow
def test_curves_over_seeds(finished_sweep: FinishedSweep) -> None:
    from experiments.training.sweep_stats import read_curves

    out, _ = finished_sweep
    curves = [read_curves(out / "trials" / f"seed={seed}") for seed in (0, 1)]
    with open(out / "curves.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["tag"] == "eval/random/score"]
    assert [int(r["step"]) for r in rows] == sorted(curves[0]["eval/random/score"]) == [512, 1024]
    for row in rows:
        pair = [curve["eval/random/score"][int(row["step"])] for curve in curves]
        assert float(row["mean"]) == pytest.approx(np.mean(pair))
    with open(out / "curves.csv") as f:
        tags = {r["tag"] for r in csv.DictReader(f)}
    assert tags == {"eval/random/score", "eval/greedy/score", "eval_sampled/random/score", "eval_sampled/greedy/score"}
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.ray
@pytest.mark.slow
def test_reusing_out_names_resume(finished_sweep: FinishedSweep) -> None:
    out, _ = finished_sweep
    status, _, err = run_main(["configs/default.yaml", "--seeds", "0", "--out", str(out)])
    assert status == 2
    assert f"quarto sweep --resume {out}" in err


@pytest.mark.ray
@pytest.mark.slow
def test_an_rllib_sweep_on_a_two_node_cluster(tmp_path: Path) -> None:
    """A head and a second node of 2 CPUs each (ray.cluster_utils, one machine): the trial's placement group of
    three bundles (the trial, two env runners) cannot fit on one node, so it spans both. Without the runners'
    bundles in the trial's reservation, every trial with env runners failed (placement group bundle index 1 is
    invalid), on one node too."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from tests.test_rllib import TINY_RLLIB

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        out = tmp_path / "cluster"
        sets = [arg for item in [*TINY_RLLIB[2:], "num_env_runners=2"] for arg in ("--set", item)]
        argv = [TINY_RLLIB[1], "--seeds", "0", "--out", str(out), "--address", cluster.address, *sets]
        status, printed, err = run_main(argv)
        placed = actor_nodes(cluster.address)
    finally:
        cluster.shutdown()
    assert status == 0, err + (out / "trials" / "seed=0" / "train.log").read_text()
    assert json.loads((out / "trials" / "seed=0" / "final_eval.json").read_text())["num_timesteps"] >= 600
    assert "random" in (out / "results.md").read_text() and "(wall clock)" in printed
    print(f"\nnodes of the trial and its env runners: {placed}", end=" ")  # -s shows them
    assert (
        len(placed["MultiAgentEnvRunner"]) == 2 and len({*placed["ImplicitFunc"], *placed["MultiAgentEnvRunner"]}) == 2
    )


def actor_nodes(address: str) -> dict[str, list[str]]:
    """The node (its id's first 8 digits) of every actor the cluster at ``address`` has run, by class name (the
    last part: the trial's is ``ImplicitFunc``, sometimes qualified), from its control store's actor table (dead
    actors stay in it)."""
    import ray

    ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        nodes: dict[str, list[str]] = {}
        for actor in ray._private.state.actors().values():
            name = actor["ActorClassName"].rsplit(".", 1)[-1]
            nodes.setdefault(name, []).append(actor["Address"]["NodeID"][:8])
        return nodes
    finally:
        ray.shutdown()
