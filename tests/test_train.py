"""``quarto train`` on tiny budgets: config validation, the run folder, checkpoints as agents, clear errors for
wrong-variant and corrupt checkpoints, resuming (also after SIGKILL), reproducibility, and any variant."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from unittest import mock

import pytest
import torch as th
import yaml
from tqdm import tqdm

from agents.match import play_game
from agents.networks.checkpoints import CheckpointError, read_metadata
from agents.ppo import load_policy
from agents.specs import make_agent
from experiments.evaluation.games import EvalResult
from experiments.training import train as train_module
from experiments.training.config import SECTIONS, ConfigError, TrainConfig, describe_fields
from experiments.training.config_file import config_from_dict, load_config
from experiments.training.run import Schedule, stopping_step
from experiments.training.shipped_configs import CONFIGS
from quarto_env.core import INITIAL_STATE, Variant

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(CONFIGS.rglob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_is_valid(path: Path) -> None:
    config = load_config(path)
    assert config.total_steps > 0 and config.variant is not None


def test_field_documentation_covers_every_field() -> None:
    text = describe_fields()
    for name, value in TrainConfig().to_dict().items():
        for shown in [f"{name}.{field}" for field in value] if name in SECTIONS else [name]:
            assert f"\n{shown} (" in "\n" + text
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
        ("observation=pixels", r"observation: unknown observation kind 'pixels'; allowed: raw, tactical, lookahead, "),
        ("policy=cnn", r"policy must be one of \('mlp', 'slots'\)"),
        ("batch_size=100000", r"ppo.batch_size must be <= num_games \* ppo.n_steps = 4096"),
        ("variant.attributes=size", r"variant is not a valid rule variant .*unknown attribute"),
        ("opponents.alphazero=1", r"unknown agent kind 'alphazero'"),
        ("opponents={random: -1}", r"opponents.random must be a finite number >= 0, got -1"),
        ("opponents={random: 0}", r"opponents must give weights with a positive, finite sum"),
        ("eval_opponents=[greedy:depth=3]", r"bad option 'depth=3'"),
        ("early_evals=[0, 20000, 10000]", r"early_evals must list learner steps >= 0 in increasing order, e\.g\."),
        ("early_evals=[-1, 5]", r"early_evals must list learner steps >= 0 in increasing order"),
        ("early_evals=[8, 8]", r"early_evals must list learner steps >= 0 in increasing order"),
        ("early_evals=16384", r"early_evals must be list\[int\], got 16384"),
        ("seed", r"override 'seed' must be KEY=VALUE"),
        ("seed.x=1", r"seed takes no dotted key; a dotted key is SECTION.FIELD \(ppo.n_steps=..."),
    ],
)
def test_bad_config_values_are_errors_naming_the_field(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_overrides_reach_nested_fields_and_keep_the_rest() -> None:
    overrides = ["variant.squares=true", "opponents.greedy=0.7", "learning_rate=1e-3", "total_steps=2e6"]
    config = load_config(None, overrides)
    assert config.variant == Variant.make(squares=True)
    assert config.ppo.opponents == {"snapshots": 0.4, "minimax:depth=2": 0.3, "greedy": 0.7, "random": 0.1}
    assert config.ppo.learning_rate == 1e-3 and isinstance(config.ppo.learning_rate, float)
    assert config.total_steps == 2_000_000 and isinstance(config.total_steps, int)


def test_evaluations_start_from_the_tournaments_openings_and_at_step_0() -> None:
    from experiments.arena import tournament

    config = TrainConfig()
    assert config.eval_opening_plies == tournament.DEFAULT_OPENING_PLIES == 4
    assert config.early_evals == [0, 16_384, 32_768, 65_536, 131_072]
    assert load_config(None, ["early_evals=[0, 1e3]"]).early_evals == [0, 1000]  # YAML's 1e3 is a number too


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
# The schedule, the progress bar and what a run says before it
# ---------------------------------------------------------------------------------------------------------
def due_steps(schedule: Schedule, steps: range) -> dict[str, list[int]]:
    """The steps at which each task fell due, the run stepping through ``steps``."""
    seen: dict[str, list[int]] = {}
    for step in steps:
        for task in sorted(schedule.due(step)):
            seen.setdefault(task, []).append(step)
    return seen


SCHEDULE = ["early_evals=[0, 100, 200, 400]", "eval_every=1000", "checkpoint_every=1000", "snapshot_every=300"]


def test_a_fresh_run_evaluates_at_0_then_at_its_early_steps_then_every_eval_every() -> None:
    config = load_config(None, SCHEDULE)
    seen = due_steps(Schedule(config, 0), range(0, 2001, 50))
    assert seen["evaluation"] == [0, 100, 200, 400, 1000, 2000]
    assert seen["checkpoint"] == [1000, 2000] and seen["snapshot"] == [300, 600, 900, 1200, 1500, 1800]
    # Steps in leaps: each point at the first step at or past it, once however many one leap passes.
    assert due_steps(Schedule(config, 0), range(0, 2049, 256))["evaluation"] == [0, 256, 512, 1024, 2048]


def test_a_resumed_run_skips_the_evaluations_before_its_step() -> None:
    config = load_config(None, SCHEDULE)
    assert due_steps(Schedule(config, 200), range(200, 2001, 50))["evaluation"] == [400, 1000, 2000]
    assert due_steps(Schedule(config, 1000), range(1000, 2001, 50))["evaluation"] == [2000]
    assert "evaluation" not in due_steps(Schedule(load_config(None, ["early_evals=[]"]), 0), range(0, 1000, 50))


def test_total_steps_rounding_up_is_said_once_before_training(capsys: pytest.CaptureFixture) -> None:
    config = load_config(None, ["total_steps=5000"])
    leaps = "PPO trains whole rollouts of num_games * n_steps = {leap}"
    assert stopping_step(config, 0, 4096, leaps) == 8192
    printed = "total_steps=5000 rounds up to 8,192 (PPO trains whole rollouts of num_games * n_steps = 4,096)\n"
    assert capsys.readouterr().out == printed
    assert stopping_step(config, 904, 4096, leaps) == 5000  # a resumed run's leaps land on it
    assert stopping_step(config, 6000, 4096, leaps) == 6000  # resumed past it: no training
    assert capsys.readouterr().out == ""


def test_an_evaluation_stays_off_the_progress_bars_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.evaluation import log
    from experiments.training import run

    def slow_evaluation(*args: object) -> list[EvalResult]:
        time.sleep(0.6)
        return [EvalResult("random", {0: (1, 0, 0), 1: (0, 1, 0)}, INITIAL_STATE, True, "argmax")]

    monkeypatch.setattr(log, "evaluate_learner", slow_evaluation)
    bar = run.progress_bar(0, 1000, "step")
    bar.fp = io.StringIO()
    bar.update(500)
    elapsed = bar.format_dict["elapsed"]
    writer = mock.Mock()  # the run's TensorBoard writer: what it records does not matter here
    results, improved = run.evaluation_log(TrainConfig()).evaluate([], bar, writer, 500)
    assert bar.format_dict["elapsed"] - elapsed < 0.3  # the ETA reckons with training time alone
    assert improved and results[0].score() == 0.75
    assert re.fullmatch(r"eval argmax: random 0\.75 \(\d s\)", bar.postfix)  # how long the evaluation took
    bar.close()
    with log.paused(tqdm(disable=True)):  # TQDM_DISABLE=1: no bar, no clock to stop
        pass


def test_numba_compiling_is_announced_once(capsys: pytest.CaptureFixture) -> None:
    import numba
    from numba.core import event

    from experiments.training.run import COMPILING, CompileNotice, watch_compiles

    watch_compiles().told = True  # the process's own notice, registered by earlier runs in this process: quiet
    with event.install_listener("numba:compile", CompileNotice()):
        assert numba.njit(lambda x: x + 1)(1) == 2  # two new functions, compiled now
        assert numba.njit(lambda x: x * 3)(2) == 6
    assert capsys.readouterr().out.count(COMPILING) == 1


# ---------------------------------------------------------------------------------------------------------
# A tiny run, end to end
# ---------------------------------------------------------------------------------------------------------
def test_quarto_train_writes_the_run_folder_and_prints_the_table(tiny_run: tuple[Path, str]) -> None:
    run_dir, output = tiny_run
    assert "final evaluation" in output and "greedy" in output and "random" in output
    tensorboard = f"TensorBoard: tensorboard --logdir {run_dir / 'tb'}   (then open http://localhost:6006)"
    assert output.splitlines()[:2] == [f"run folder: {run_dir}", tensorboard]  # said first, and again at the end
    assert output.splitlines()[-1] == tensorboard and "rounds up" not in output  # 1024: whole rollouts of 128
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
    assert metadata["num_timesteps"] >= 1024 and metadata["observation"] == TrainConfig().observation.name
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
    # Wilson's interval, as the tournament's: of some width at 20 wins in 20, within [0, 1] at 1 win in 3
    unbeaten = EvalResult("greedy", {0: (10, 0, 0), 1: (10, 0, 0)}, INITIAL_STATE, True)
    assert evaluate.interval_95(unbeaten) == "[0.839, 1.000]"
    assert (
        evaluate.interval_95(EvalResult("greedy", {0: (1, 0, 1), 1: (0, 0, 1)}, INITIAL_STATE, True))
        == "[0.061, 0.792]"
    )
    for options in ([], ["--argmax"], ["--sampled"]):  # --sampled: the default now, still accepted
        assert plot_curves.main([str(run_dir), "-o", str(tmp_path / "curves.png"), "--overwrite", *options]) == 0
        assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curves = plot_curves.score_curves(run_dir)
    assert set(curves) == {
        "random",
        "greedy",
        "random (sampled policy)",
        "greedy (sampled policy)",
        "value lost",  # the run grades its decisions (grade_positions)
    }
    (shown,) = plot_curves.panels({"tiny": curves}, argmax=False)  # by default, the curves that show learning
    assert [(panel.title, panel.lines) for panel in shown] == [
        ("vs random (sampled policy)", [("tiny", curves["random (sampled policy)"])]),
        ("vs greedy (sampled policy)", [("tiny", curves["greedy (sampled policy)"])]),
        ("value-losing decisions (solver-graded)", [("tiny", curves["value lost"])]),
    ]
    _, argmax = plot_curves.panels({"tiny": curves}, argmax=True)
    assert [panel.lines for panel in argmax] == [[("tiny", curves["random"])], [("tiny", curves["greedy"])]]


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


def test_tensorboard_shows_the_curves_that_show_learning_side_by_side(tiny_run: tuple[Path, str]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.custom_scalar import layout_pb2

    events = EventAccumulator(str(tiny_run[0] / "tb"))
    events.Reload()
    (saved,) = events.Tensors("custom_scalars__config__")  # the Custom Scalars tab's layout
    (learning,) = layout_pb2.Layout.FromString(saved.tensor_proto.string_val[0]).category
    charts = {chart.title: list(chart.multiline.tag) for chart in learning.chart}
    assert learning.title == "learning" and charts == {
        "vs random": ["eval_sampled/random/score", "eval/random/score"],
        "vs greedy": ["eval_sampled/greedy/score", "eval/greedy/score"],
        "value-losing decisions (solver-graded)": ["eval/grade/value_lost"],
    }
    assert {tag for tags in charts.values() for tag in tags} <= set(events.Tags()["scalars"])  # none empty


def test_losses_are_under_the_losses_group_of_every_backend(tiny_run: tuple[Path, str]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tiny_run[0] / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"losses/policy_loss", "losses/value_loss", "losses/entropy_loss", "charts/learning_rate"} <= tags
    assert not [tag for tag in tags if tag.startswith("train/")]  # SB3's own group name, before 2026-12-05
    # Each update's losses at the step of the rollout it trained on (SB3 writes them a rollout later), once.
    rollouts = list(range(128, 1025, 128))  # num_games * n_steps = 128, up to total_steps=1024
    assert tensorboard_steps(tiny_run[0], "losses/policy_loss") == rollouts
    assert tensorboard_steps(tiny_run[0], "charts/learning_rate") == rollouts
    assert "charts/n_updates" not in tags  # SB3 keeps it out of TensorBoard (exclude="tensorboard")


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


def test_a_resume_hides_what_a_killed_process_wrote_after_its_checkpoint(
    tiny_run: tuple[Path, str], tmp_path: Path
) -> None:
    """A process killed after its checkpoint (``kill -9``) leaves points past its step, which the resumed run
    writes again, or not at all where its schedule differs: each tag ends with one point a step, the resumed
    run's, and none the killed process left."""
    import shutil

    from torch.utils.tensorboard import SummaryWriter

    run_dir = tmp_path / "killed"
    shutil.copytree(tiny_run[0], run_dir)
    orphans = SummaryWriter(str(run_dir / "tb"))  # what the killed process wrote after step 1024
    for step in (1152, 1280):
        orphans.add_scalar("charts/SPS", -1.0, step)
    orphans.add_scalar("eval/score", -1.0, 1100)
    orphans.close()
    time.sleep(1.1)  # event files are read in the order of their names, which begin with the second they were made
    assert train_module.main(["--resume", str(run_dir), "total_steps=1536"]) == 0
    sps, score = tensorboard_steps(run_dir, "charts/SPS"), tensorboard_steps(run_dir, "eval/score")
    assert len(sps) == len(set(sps)) and {1152, 1280} <= set(sps)  # written again, once
    assert score == [512, 1024, 1536]  # the orphan at 1100 is gone


def test_a_finished_run_without_its_checkpoints_is_not_silently_trained_again(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``checkpoints/`` gone from a run that wrote its final table: a resume would start from step 0 beside the
    old curves; it is refused in one line, and nothing changes."""
    import shutil

    run_dir = tmp_path / "finished"
    shutil.copytree(tiny_run[0], run_dir)
    shutil.rmtree(run_dir / "checkpoints")
    before = sorted(path.name for path in run_dir.rglob("*"))
    assert train_module.main(["--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has its final table but no checkpoint" in err[0] and "--overwrite" in err[0], err
    assert sorted(path.name for path in run_dir.rglob("*")) == before


def test_a_run_evaluates_from_step_0_and_a_resume_redoes_no_evaluation(tiny: list[str], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    budget = [item for item in tiny if not item.startswith(("early_evals", "grade"))]
    budget.append("early_evals=[0, 128, 256, 384]")
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        assert train_module.main([*budget, "total_steps=200", "--run-dir", str(run_dir)]) == 0
    printed = output.getvalue()
    assert printed.count("rounds up") == 1  # before training, once
    assert "total_steps=200 rounds up to 256 (PPO trains whole rollouts of num_games * n_steps = 128)" in printed
    assert printed.index("rounds up") < printed.index("final evaluation after 256 learner steps")
    assert tensorboard_steps(run_dir, "eval/score") == [0, 128, 256]  # the untrained network first; the last step
    assert train_module.main(["--resume", str(run_dir), "total_steps=512"]) == 0
    assert tensorboard_steps(run_dir, "eval/score") == [0, 128, 256, 384, 512]  # neither 0 nor 256 again


def test_what_a_run_does_between_rollouts_sees_the_network_trained_to_its_step(
    tiny_run: tuple[Path, str], tiny: list[str], tmp_path: Path
) -> None:
    """``step_000000512.zip`` of the tiny run (rollouts of 128 steps) holds the network trained on its first 512
    steps -- the one a run of 512 steps ends with -- not the one before the last of those rollouts' updates."""
    short = train_module.train(load_config(None, [*tiny, "total_steps=512", "final_eval_games=2"]), tmp_path / "short")
    at_512 = load_policy(tiny_run[0] / "checkpoints" / "step_000000512.zip").policy.state_dict()
    trained = load_policy(short).policy.state_dict()
    assert all(th.equal(at_512[key], trained[key]) for key in trained)


def test_a_run_without_checkpoint_is_refused_to_a_new_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``--resume`` trains it from step 0 (tests/test_first_hour.py)."""
    run_dir = tmp_path / "no-checkpoint"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("total_steps: 1000\n")
    assert train_module.main(["--run-dir", str(run_dir)]) == 2  # a fresh run never overwrites a folder's run
    assert "already holds a run (config.yaml): quarto train --resume" in capsys.readouterr().err


def test_same_seed_same_weights(tmp_path: Path) -> None:
    overrides = ["total_steps=256", "num_games=8", "n_steps=16", "batch_size=64", "eval_every=100000", "early_evals=[]"]
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
    config = load_config(None, [*tiny[1:5], "total_steps=256", "early_evals=[]", "final_eval_games=4", *variant])
    final = train_module.train(config, tmp_path / "run")
    assert Variant.make(**read_metadata(final)["variant"]) == config.variant


@pytest.mark.slow
def test_the_quick_config_learns_to_beat_random(tmp_path: Path) -> None:
    """``configs/quick.yaml`` as shipped, the whole run (its time: docs/training.md): the final table plays random
    at 0.90 or better, both ways, and the curves start from the untrained network's score."""
    run_dir = tmp_path / "quick"
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        assert train_module.main(["--config", str(CONFIGS / "quick.yaml"), "--run-dir", str(run_dir)]) == 0
    final = yaml.safe_load((run_dir / "final_eval.json").read_text())
    scores = {result["policy"]: result["score"] for result in final["results"] if result["opponent"] == "random"}
    assert set(scores) == {"argmax", "sampled"} and min(scores.values()) >= 0.90, scores
    assert tensorboard_steps(run_dir, "eval/score")[0] == 0 and "final evaluation after 131,072" in output.getvalue()


def kill_once_checkpointed(argv: list[str], run_dir: Path, steps: int, seconds: float = 60) -> int:
    """Run ``quarto train ARGV --run-dir RUN_DIR`` in a process and SIGKILL it once its ``latest.zip`` holds at
    least ``steps`` learner steps (or after ``seconds``); the steps of that checkpoint, which is whole: written
    atomically."""
    command = [sys.executable, "-m", "experiments.cli", "train", *argv, "--run-dir", str(run_dir)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest = run_dir / "checkpoints" / "latest.zip"
    try:
        deadline = time.time() + seconds
        while time.time() < deadline and not (latest.is_file() and read_metadata(latest)["num_timesteps"] >= steps):
            time.sleep(0.2)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    return int(read_metadata(latest)["num_timesteps"])


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_from_its_last_checkpoint(tiny: list[str], tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    overrides = [*tiny[1:], "total_steps=1000000", "checkpoint_every=256", "eval_every=1000000"]
    killed_at = kill_once_checkpointed(overrides, run_dir, 768)
    assert killed_at >= 768
    assert train_module.main(["--resume", str(run_dir), f"total_steps={killed_at + 256}", "final_eval_games=2"]) == 0
    final = read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"]
    assert killed_at + 256 <= final <= killed_at + 256 + 128  # continued from the checkpoint, one rollout at most
