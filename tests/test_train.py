"""``quarto train`` on tiny budgets: config validation, the run folder, checkpoints as agents, clear errors for
wrong-variant and corrupt checkpoints, resuming (also after SIGKILL), reproducibility, and any variant."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch as th
import yaml

from agents.base import make_agent
from agents.checkpoints import CheckpointError, read_metadata
from agents.match import play_game
from agents.ppo import load_policy
from experiments.training import train as train_module
from experiments.training.config import ConfigError, TrainConfig, config_from_dict, describe_fields, load_config
from quarto_env.core import Variant

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(CONFIGS.rglob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_is_valid(path: Path) -> None:
    config = load_config(path)
    assert config.total_steps > 0 and config.resolved_variant() is not None


def test_field_documentation_covers_every_field() -> None:
    text = describe_fields()
    for name in TrainConfig().to_dict():
        assert f"\n{name} (" in "\n" + text
    assert "Learner decisions to train for" in text


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("totl_steps=10", r"unknown config key\(s\) totl_steps; allowed: .*total_steps"),
        ("total_steps=many", r"total_steps must be int, got 'many'"),
        ("total_steps=1.5", r"total_steps must be int, got 1.5"),
        ("num_games=true", r"num_games must be int, got True"),
        ("net_arch=[64, x]", r"net_arch must be list\[int\]"),
        ("learning_rate=-1", r"learning_rate must be a finite number > 0 and <= 1, got -1"),
        ("gamma=1.5", r"gamma must be a finite number > 0 and <= 1, got 1.5"),
        ("observation=pixels", r"observation must be one of \('raw', 'tactical', 'lookahead', 'parity'\)"),
        ("policy=cnn", r"policy must be one of \('mlp', 'slots'\)"),
        ("batch_size=100000", r"batch_size must be <= num_games \* n_steps = 4096"),
        ("variant.attributes=size", r"variant is not a valid rule variant .*unknown attribute"),
        ("opponents.alphazero=1", r"unknown agent kind 'alphazero'"),
        ("opponents={random: -1}", r"opponents.random must be a finite number >= 0, got -1"),
        ("opponents={random: 0}", r"opponents must give weights with a positive, finite sum"),
        ("eval_opponents=[greedy:depth=3]", r"bad option 'depth=3'"),
        ("seed", r"override 'seed' must be KEY=VALUE"),
        ("seed.x=1", r"only variant.KEY and opponents.SPEC take a dotted key"),
    ],
)
def test_bad_config_values_are_errors_naming_the_field(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_overrides_reach_nested_fields_and_keep_the_rest() -> None:
    overrides = ["variant.squares=true", "opponents.greedy=0.7", "learning_rate=1e-3", "total_steps=2e6"]
    config = load_config(None, overrides)
    assert config.resolved_variant() == Variant.make(squares=True)
    assert config.opponents == {"snapshots": 0.4, "minimax:depth=2": 0.3, "greedy": 0.7, "random": 0.1}
    assert config.learning_rate == 1e-3 and isinstance(config.learning_rate, float)
    assert config.total_steps == 2_000_000 and isinstance(config.total_steps, int)


def test_config_files_must_exist_and_hold_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(listing)
    with pytest.raises(ConfigError, match="unknown config key"):
        config_from_dict({"learning-rate": 1})


# ---------------------------------------------------------------------------------------------------------
# A tiny run, end to end
# ---------------------------------------------------------------------------------------------------------
def test_quarto_train_writes_the_run_folder_and_prints_the_table(tiny_run: tuple[Path, str]) -> None:
    run_dir, output = tiny_run
    assert "final evaluation" in output and "greedy" in output and "random" in output
    assert f"tensorboard --logdir {run_dir / 'tb'}" in output
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config_from_dict(saved).total_steps == 1024
    assert "quarto train total_steps=1024" in (run_dir / "command.txt").read_text()
    assert list((run_dir / "tb").glob("events.out.tfevents.*"))
    names = {p.name for p in (run_dir / "checkpoints").iterdir()}
    assert {"latest.zip", "best.zip", "final.zip", "step_000000512.zip"} <= names
    assert not [n for n in names if n.endswith(".tmp")]  # atomic writes leave no temporary files
    assert (run_dir / "final_eval.json").is_file()


def test_checkpoint_loads_as_an_agent_and_plays_legally(tiny_run: tuple[Path, str]) -> None:
    run_dir, _ = tiny_run
    final = run_dir / "checkpoints" / "final.zip"
    metadata = read_metadata(final)
    assert metadata["variant"] == Variant.make().to_dict()
    assert metadata["num_timesteps"] >= 1024 and metadata["observation"] == TrainConfig().observation
    assert {"torch", "stable_baselines3", "sb3_contrib"} <= set(metadata["versions"])
    variant = Variant.make()
    for spec in (f"ppo:{final}", f"ppo:path={run_dir},deterministic=false"):
        agent = make_agent(spec, variant, seed=0)
        record = play_game(variant, [agent, make_agent("random", variant, 1)])  # step() rejects illegal actions
        assert record.end in ("win", "draw") and len(record.actions) >= 8


def test_evaluate_and_plot_curves_read_a_run(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from experiments.training import evaluate
    from experiments.training import plot as plot_curves

    run_dir, _ = tiny_run
    assert evaluate.main([str(run_dir / "checkpoints" / "final.zip"), "--games", "8", "--opponents", "greedy"]) == 0
    output = capsys.readouterr().out
    assert output.count("greedy") == 2 and "argmax" in output and "sampled" in output
    assert plot_curves.main([str(run_dir), "-o", str(tmp_path / "curves.png"), "--sampled"]) == 0
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(plot_curves.score_curves(run_dir)) == {
        "random",
        "greedy",
        "random (sampled policy)",
        "greedy (sampled policy)",
        "value lost",  # the run grades its decisions (grade_positions)
    }


def test_wrong_variant_and_corrupt_checkpoints_are_clear_errors(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    final = tiny_run[0] / "checkpoints" / "final.zip"
    with pytest.raises(CheckpointError, match="trained for rule variant 'standard', not 'squares'"):
        make_agent(f"ppo:{final}", Variant.make(squares=True))
    for size in (10, final.stat().st_size // 2, final.stat().st_size - 10):
        truncated = tmp_path / f"truncated{size}.zip"
        truncated.write_bytes(final.read_bytes()[:size])
        with pytest.raises(CheckpointError, match="corrupt or truncated"):
            load_policy(truncated)
    flipped = bytearray(final.read_bytes())
    flipped[len(flipped) // 3] ^= 0xFF  # one damaged byte inside an entry: its CRC check fails
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="corrupt"):
        load_policy(damaged)
    foreign = tmp_path / "foreign.zip"
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("data", "{}")
    with pytest.raises(CheckpointError, match="not written by quarto train"):
        load_policy(foreign)
    with pytest.raises(CheckpointError, match="does not exist"):
        make_agent(f"ppo:{tmp_path / 'missing.zip'}")


def tensorboard_steps(run_dir: Path, tag: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return [event.step for event in events.Scalars(tag)]


def test_evaluations_grade_the_learner_with_the_exact_solver(tiny_run: tuple[Path, str]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = tiny_run
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    for tag in ("eval/grade/value_lost", "eval/grade/value_lost_place", "eval/grade/value_lost_give"):
        values = [event.value for event in events.Scalars(tag)]
        assert len(values) == len(tensorboard_steps(run_dir, "eval/score")) >= 1
        assert all(0.0 <= v <= 1.0 for v in values)


def test_resume_continues_the_step_count_and_the_curves(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    source, _ = tiny_run
    run_dir = tmp_path / "resumed"
    import shutil

    shutil.copytree(source, run_dir)
    before = tensorboard_steps(run_dir, "charts/SPS")
    assert train_module.main(["--resume", str(run_dir), "total_steps=1536"]) == 0
    assert read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"] >= 1536
    after = tensorboard_steps(run_dir, "charts/SPS")
    added = sorted(set(after) - set(before))
    assert added and min(added) > max(before)  # the new points continue the old curve
    assert (run_dir / "command.txt").read_text().count("quarto train") == 2


def test_resuming_a_run_without_checkpoint_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "no-checkpoint"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("total_steps: 1000\n")
    assert train_module.main(["--resume", str(run_dir)]) == 2
    assert "latest.zip' does not exist" in capsys.readouterr().err
    assert train_module.main(["--run-dir", str(run_dir)]) == 2  # a fresh run never overwrites a folder's run
    assert "already holds a run: continue it with --resume" in capsys.readouterr().err


def test_same_seed_same_weights(tmp_path: Path) -> None:
    overrides = ["total_steps=256", "num_games=8", "n_steps=16", "batch_size=64", "eval_every=100000"]
    weights = []
    for name in ("a", "b"):
        config = load_config(None, [*overrides, "final_eval_games=2"])
        final = train_module.train(config, tmp_path / name)
        weights.append(load_policy(final).policy.state_dict())
    for key in weights[0]:
        assert th.equal(weights[0][key], weights[1][key]), key


@pytest.mark.parametrize(
    "variant",
    [["variant.squares=true", "variant.declaration=true"], ["variant.attributes=2", "policy=mlp"]],
    ids=["squares+declaration", "two-attributes-mlp"],
)
def test_any_rule_variant_trains(variant: list[str], tiny: list[str], tmp_path: Path) -> None:
    config = load_config(None, [*tiny[1:5], "total_steps=256", "final_eval_games=4", *variant])
    final = train_module.train(config, tmp_path / "run")
    assert Variant.make(**read_metadata(final)["variant"]) == config.resolved_variant()


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_from_its_last_checkpoint(tiny: list[str], tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    overrides = [*tiny[1:], "total_steps=1000000", "checkpoint_every=256", "eval_every=1000000"]
    command = [sys.executable, "-m", "experiments.cli", "train", *overrides, "--run-dir", str(run_dir)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest = run_dir / "checkpoints" / "latest.zip"
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (latest.is_file() and read_metadata(latest)["num_timesteps"] >= 768):
            time.sleep(0.2)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    killed_at = read_metadata(latest)["num_timesteps"]  # the file is whole: written atomically
    assert killed_at >= 768
    assert train_module.main(["--resume", str(run_dir), f"total_steps={killed_at + 256}", "final_eval_games=2"]) == 0
    final = read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"]
    assert killed_at + 256 <= final <= killed_at + 256 + 128  # continued from the checkpoint, one rollout at most
