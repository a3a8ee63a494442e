"""``quarto train`` with ``algorithm: alphazero`` (experiments/alphazero.py): the run folder, the checkpoints
and ``az:RUN``, the TensorBoard tags, ``--resume`` (also after SIGKILL), reproducibility and the config's checks."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest
import torch as th
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.alphazero import load_network
from agents.networks.checkpoints import read_metadata
from agents.networks.policy_value import NETWORK_DESIGNS
from agents.specs import make_agent
from experiments.training import alphazero
from experiments.training import train as train_module
from experiments.training.alphazero import untrained_network
from experiments.training.config import ConfigError
from experiments.training.config_file import load_config
from quarto_env.core import INITIAL_STATE, STANDARD, Variant
from tests.test_checkpoints import metadata_reads_of_a_resume
from tests.test_network_probe import count_fast_batches
from tests.test_train import kill_once_checkpointed

CONFIG = str(Path(__file__).resolve().parent.parent / "configs" / "alphazero.yaml")
TINY_ALPHAZERO = [
    "--config",
    CONFIG,
    "total_steps=512",
    "num_games=16",
    "sims=8",
    "net_arch=[8]",
    "buffer_size=2000",
    "batch_size=32",
    "eval_every=256",
    "eval_games=4",
    "eval_sims=4",
    "final_eval_games=4",
    "eval_opponents=[random]",
    "grade_positions=4",
    "checkpoint_every=256",
    "exact_outcome_empties=6",  # the late outcomes rescored by the solver: charts/exact_outcome_changed
]


def train(argv: list[str]) -> tuple[int, str]:
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = train_module.main(argv)
    return status, output.getvalue()


@pytest.fixture(scope="module")
def az_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run_dir = tmp_path_factory.mktemp("az") / "run"
    status, printed = train([*TINY_ALPHAZERO, "--run-dir", str(run_dir)])
    assert status == 0
    return run_dir, printed


def scalar_steps(run_dir: Path, tag: str) -> list[int]:
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return [event.step for event in events.Scalars(tag)]


def test_a_run_writes_its_folder_like_ppo(az_run: tuple[Path, str]) -> None:
    run_dir, printed = az_run
    for name in ("config.yaml", "command.txt", "final_eval.json"):
        assert (run_dir / name).is_file()
    checkpoints = {p.name for p in (run_dir / "checkpoints").iterdir()}
    assert {"latest.zip", "final.zip", "best.zip", "step_000000256.zip", "untrained.zip"} <= checkpoints
    assert "algorithm: alphazero" in (run_dir / "config.yaml").read_text()
    summary = json.loads((run_dir / "final_eval.json").read_text())
    assert summary["num_timesteps"] >= 512 and summary["results"][0]["games"] == 4
    assert "agent spec: az:" in printed


def test_the_run_logs_search_losses_and_evaluations(az_run: tuple[Path, str]) -> None:
    run_dir, _ = az_run
    for tag in (
        "charts/sims_per_s",
        "charts/games_per_s",
        "charts/positions_per_s",
        "charts/buffer_size",
        "charts/tree_share",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/policy_agreement",
        "eval/random/score",
        "eval/random/first/win",
        "eval/grade/value_lost",
        "eval/score",
        "charts/exact_outcome_changed",
    ):
        assert scalar_steps(run_dir, tag), tag


def test_the_speed_charts_leave_the_evaluations_time_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that jumps by 1,000 s inside every evaluation: the positions a second over the periods between
    them would then be below one with the evaluations' time counted, and are far above one without it."""
    import time

    from experiments.evaluation.log import EvaluationLog

    jumped = [0.0]
    monkeypatch.setattr(alphazero.time, "perf_counter", lambda: time.perf_counter_ns() / 1e9 + jumped[0])
    evaluate = EvaluationLog.evaluate

    def slow_evaluation(*args: object, **kwargs: object) -> object:
        jumped[0] += 1000.0
        return evaluate(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(EvaluationLog, "evaluate", slow_evaluation)
    run_dir = tmp_path / "run"
    assert train([*TINY_ALPHAZERO, "early_evals=[0]", "grade_positions=0", "--run-dir", str(run_dir)])[0] == 0
    rates = scalar_values(run_dir, "charts/positions_per_s")
    assert len(rates) >= 2 and min(rates) > 1, rates


def scalar_values(run_dir: Path, tag: str) -> list[float]:
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return [event.value for event in events.Scalars(tag)]


def test_every_evaluation_grades_the_search_its_policy_and_an_untrained_networks_search(
    az_run: tuple[Path, str],
) -> None:
    from tensorboard.plugins.custom_scalar import layout_pb2

    run_dir, _ = az_run
    steps = scalar_steps(run_dir, "eval/score")
    for prefix in ("eval/grade/", "eval/grade/policy/", "eval/grade/untrained/"):
        assert scalar_steps(run_dir, prefix + "value_lost") == steps
        assert all(0 <= v <= 1 for v in scalar_values(run_dir, prefix + "value_lost"))
    assert len(set(scalar_values(run_dir, "eval/grade/untrained/value_lost"))) == 1  # graded once, logged each time
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    buckets = [tag for tag in events.Tags()["scalars"] if tag.startswith("eval/grade/value_lost_empty_")]
    assert buckets and all(scalar_steps(run_dir, tag) == steps for tag in buckets)
    (saved,) = events.Tensors("custom_scalars__config__")
    (learning,) = layout_pb2.Layout.FromString(saved.tensor_proto.string_val[0]).category
    grade_chart = next(chart for chart in learning.chart if chart.title.startswith("value-losing"))
    assert list(grade_chart.multiline.tag) == [
        "eval/grade/value_lost",
        "eval/grade/policy/value_lost",
        "eval/grade/untrained/value_lost",
    ]


def test_the_final_table_grades_the_final_search_its_policy_and_the_untrained_reference(
    az_run: tuple[Path, str],
) -> None:
    run_dir, printed = az_run
    grades = json.loads((run_dir / "final_eval.json").read_text())["grades"]
    assert set(grades) == {"learner", "policy", "search8", "untrained"}  # sims=8 differs from eval_sims=4
    for summary in grades.values():
        share, low, high, count = summary["all"]
        assert count == 4 and low <= share <= high and 0 <= share <= 1
    # the untrained reference is the one every evaluation logged, graded once
    assert grades["untrained"]["all"][0] == pytest.approx(scalar_values(run_dir, "eval/grade/untrained/value_lost")[-1])
    assert "value-losing decisions, graded by the exact solver" in printed


def test_the_run_evaluates_its_untrained_network_first_and_plots_its_search(az_run: tuple[Path, str]) -> None:
    from experiments.training import plot

    run_dir, printed = az_run
    assert printed.startswith(f"run folder: {run_dir}\nTensorBoard: tensorboard --logdir {run_dir / 'tb'}")
    assert scalar_steps(run_dir, "eval/score") == [0, 256, 512]  # step 0, every eval_every, and the last step
    (shown,) = plot.panels({"az": plot.score_curves(run_dir)}, argmax=False)
    # No sampled policy in its evaluations: the panel draws its search's curve, and says so.
    assert shown[0].title == "vs random" and shown[0].lines[0][0] == "az (no sampled curve: eval/)"


def test_the_untrained_reference_is_a_checkpoint_of_step_0(az_run: tuple[Path, str]) -> None:
    run_dir, _ = az_run
    config = load_config(run_dir / "config.yaml")
    untrained, metadata = load_network(run_dir / "checkpoints" / "untrained.zip")
    expected = untrained_network(config, config.variant).state_dict()
    final = load_network(run_dir)[0].state_dict()
    assert metadata["num_timesteps"] == 0 and metadata["reference"] == "untrained"
    assert all(th.equal(untrained.state_dict()[key], expected[key]) for key in expected)
    assert not all(th.equal(final[key], expected[key]) for key in expected)
    agent = make_agent(f"az:{run_dir / 'checkpoints' / 'untrained.zip'},sims=4", STANDARD, 0)
    assert agent.act(INITIAL_STATE) in range(16)


def test_the_run_folder_plays_as_an_az_agent(az_run: tuple[Path, str]) -> None:
    run_dir, _ = az_run
    agent = make_agent(f"az:{run_dir},sims=4", STANDARD, 0)
    assert agent.act(INITIAL_STATE) in range(16)
    network, metadata = load_network(run_dir)
    assert metadata["config"]["algorithm"] == "alphazero" and network.width == 8


def test_evaluate_plays_the_search_and_the_policy(az_run: tuple[Path, str], capsys) -> None:  # type: ignore[no-untyped-def]
    from experiments.training import evaluate

    checkpoint = str(az_run[0] / "checkpoints" / "final.zip")
    argv = [checkpoint, "--opponents", "random", "--games", "6", "--sims", "4", "0", "--opening-plies", "2"]
    assert evaluate.main(argv) == 0
    printed = capsys.readouterr().out
    assert "search 4" in printed and "policy" in printed and printed.count("random") >= 2


def test_resume_continues_the_steps_and_the_curves(az_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir = tmp_path / "resumed"
    shutil.copytree(az_run[0], run_dir)
    before = scalar_steps(run_dir, "charts/buffer_size")
    status, printed = train(["--resume", str(run_dir), "total_steps=1000"])
    assert status == 0 and "resuming" in printed
    assert "total_steps=1000 rounds up to 1,008 (each round of self-play adds num_games = 16)" in printed
    assert scalar_steps(run_dir, "eval/score") == [0, 256, 512, 768, 1008]  # none again
    assert read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"] == 1008
    added = sorted(set(scalar_steps(run_dir, "charts/buffer_size")) - set(before))
    assert added and min(added) > max(before)
    assert (run_dir / "command.txt").read_text().count("quarto train") == 2


def test_resume_refuses_to_change_the_algorithm(az_run: tuple[Path, str], tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "resumed"
    shutil.copytree(az_run[0], run_dir)
    assert train_module.main(["--resume", str(run_dir), "algorithm=ppo", "backend=sb3"]) == 2
    assert "algorithm cannot change on --resume" in capsys.readouterr().err


def test_a_resume_reads_the_checkpoints_metadata_once(
    az_run: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert metadata_reads_of_a_resume(az_run[0], tmp_path, monkeypatch, alphazero.start) == ["latest.zip"]


def test_same_seed_same_network(tmp_path: Path) -> None:
    weights = []
    for name in ("a", "b"):
        status, _ = train([*TINY_ALPHAZERO, "total_steps=128", "eval_every=100000", "--run-dir", str(tmp_path / name)])
        assert status == 0
        weights.append(load_network(tmp_path / name)[0].state_dict())
    for key in weights[0]:
        assert th.equal(weights[0][key], weights[1][key]), key


def test_the_fast_evaluation_leaves_a_run_bit_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 64 games: self-play's batches reach the fast path; the second run evaluates by the forward pass alone (the
    # config's alphazero.leaf_evaluation reaching the searches).
    fast_batches = count_fast_batches(monkeypatch)
    weights = []
    for path in ("fast", "forward"):
        overrides = ["num_games=64", "total_steps=256", "eval_every=100000", f"alphazero.leaf_evaluation={path}"]
        status, _ = train([*TINY_ALPHAZERO, *overrides, "--run-dir", str(tmp_path / path)])
        assert status == 0
        weights.append(load_network(tmp_path / path)[0].state_dict())
        if path == "fast":
            assert fast_batches, "the run never took the fast path"
            fast_batches.clear()
    assert not fast_batches
    for key in weights[0]:
        assert th.equal(weights[0][key], weights[1][key]), key


def test_a_variant_trains(tmp_path: Path) -> None:
    overrides = ["variant.squares=true", "variant.declaration=true", "total_steps=128", "eval_every=100000"]
    status, _ = train([*TINY_ALPHAZERO, *overrides, "--run-dir", str(tmp_path / "run")])
    assert status == 0
    assert Variant.make(**read_metadata(tmp_path / "run" / "checkpoints" / "final.zip")["variant"]) == Variant.make(
        squares=True, declaration=True
    )


def test_a_gumbel_run_trains_and_evaluates_with_its_root(tmp_path: Path) -> None:
    overrides = ["root=gumbel", "gumbel_actions=4", "policy_target=completed_q", "total_steps=128", "eval_every=100000"]
    status, _ = train([*TINY_ALPHAZERO, *overrides, "--run-dir", str(tmp_path / "run")])
    assert status == 0
    final = json.loads((tmp_path / "run" / "final_eval.json").read_text())
    assert final["grades"] and final["results"][0]["games"] == 4
    config = load_config(tmp_path / "run" / "config.yaml")
    assert (config.alphazero.root, config.alphazero.gumbel_actions) == ("gumbel", 4)


def test_a_hand_network_run_checkpoints_its_design(tmp_path: Path) -> None:
    overrides = ["network_design=hand", "total_steps=128", "eval_every=100000"]
    status, _ = train([*TINY_ALPHAZERO, *overrides, "--run-dir", str(tmp_path / "run")])
    assert status == 0
    network, _ = load_network(tmp_path / "run")
    assert network.design == "hand"
    agent = make_agent(f"az:{tmp_path / 'run'},sims=4", STANDARD, seed=0)
    assert agent.act(INITIAL_STATE) in range(16)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm=dqn", "algorithm must be one of"),
        ("policy=mlp", "must be slots with algorithm alphazero"),
        ("sims=0", "sims"),
        ("dirichlet_fraction=1.5", "dirichlet_fraction"),
        ("batch_size=300000", "alphazero.batch_size must be <= alphazero.buffer_size"),
        ("eval_opening_plies=8", "eval_opening_plies"),
        ("network_design=wide", re.escape(f"network_design must be one of {NETWORK_DESIGNS}")),
        ("root=halving", r"root must be one of \('puct', 'gumbel'\)"),
    ],
)
def test_bad_alphazero_fields_are_refused(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(CONFIG, [override])


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    overrides = [*TINY_ALPHAZERO, "total_steps=1000000", "checkpoint_every=128", "eval_every=1000000"]
    killed_at = kill_once_checkpointed(overrides, run_dir, 384, seconds=120)
    assert killed_at >= 384
    status, _ = train(["--resume", str(run_dir), f"total_steps={killed_at + 128}", "final_eval_games=2"])
    assert status == 0
    final = read_metadata(run_dir / "checkpoints" / "final.zip")
    assert killed_at + 128 <= final["num_timesteps"] <= killed_at + 128 + 16
    assert final["games_played"] > 0
