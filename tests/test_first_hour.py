"""What a newcomer meets in the first hour (issue 50, item 6): Ctrl-C at any point of ``quarto train`` tells one
story that ``--resume`` keeps, ``quarto replay --grade`` shows progress and grades in batches, ``quarto evaluate``
takes agent specs and checks every spec before it loads one, and the README says how long its tests take and
names every TensorBoard group.

The interrupts are raised inside the library (a ``KeyboardInterrupt`` where Ctrl-C would raise it), at each point
of a run: its start-up (before and after ``config.yaml``), step 0, mid-run before the first checkpoint, and after
one; ``tests/fault_run.py`` sends real SIGINTs (its ``newcomer`` cases)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.networks.checkpoints import read_metadata
from tests.conftest import TINY_TRAINING

TINY = [
    *(o for o in TINY_TRAINING if not o.startswith(("grade_positions", "eval_opponents", "final_eval_games"))),
    "grade_positions=0",
    "eval_opponents=[random]",
    "final_eval_games=2",
    "total_steps=512",
    "checkpoint_every=100000",  # as the default config: no scheduled checkpoint before the run's end
]
"""A PPO run of 512 steps in rollouts of 128, whose first scheduled checkpoint lies past its end."""
ROLLOUT = 128
"""The tiny run's num_games * n_steps."""


def train(argv: list[str]) -> tuple[int, str, str]:
    """``quarto train ARGV`` in this process: its status, stdout and stderr."""
    from experiments.training import train as train_module

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = train_module.main(argv)
    return status, out.getvalue(), err.getvalue()


def interrupt_when(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, when: Callable[..., bool]) -> None:
    """Make ``owner.name`` raise ``KeyboardInterrupt`` (as Ctrl-C does) on the first call for which ``when(*args)``
    holds; once only, so that the resume runs it as it is."""
    original = getattr(owner, name)
    fired = []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        if not fired and when(*args, **kwargs):
            fired.append(True)
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, interrupted)


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def resume_story(run_dir: Path, step: int) -> str:
    return (
        f"quarto train: interrupted; checkpoints/latest.zip holds it at step {step:,}: continue it with: "
        f"quarto train --resume {run_dir}"
    )


def resumes_to_the_end(run_dir: Path) -> str:
    """``quarto train --resume RUN`` finishes the run; returns what it printed."""
    status, out, err = train(["--resume", str(run_dir), "--no-progress"])
    assert status == 0, err
    assert (run_dir / "checkpoints" / "final.zip").is_file()
    return out


# ---------------------------------------------------------------------------------------------------------
# Ctrl-C at any point tells one story, and --resume keeps it
# ---------------------------------------------------------------------------------------------------------
def test_ctrl_c_before_the_run_folder_is_written_says_nothing_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.training import run

    interrupt_when(monkeypatch, run, "announce_run", lambda *args: True)  # the first line of a run
    run_dir = tmp_path / "run"
    status, _, err = train([*TINY, "--out", str(run_dir), "--no-progress"])
    assert status == 130
    assert last_line(err) == (
        "quarto train: interrupted; the run had not started: nothing was written; the same command starts it"
    )
    assert not (run_dir / "config.yaml").exists()
    status, _, err = train([*TINY, "--out", str(run_dir), "--no-progress"])  # the same command
    assert status == 0, err


def test_ctrl_c_before_the_first_checkpoint_file_resumes_from_step_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after ``config.yaml`` but before the backend could save (``command.txt`` half written): the same
    command is refused with '--resume continues it', and the resume does, from step 0."""
    from experiments.training import train as train_module

    interrupt_when(monkeypatch, train_module, "record_command", lambda *args, **kwargs: True)
    run_dir = tmp_path / "run"
    status, _, err = train([*TINY, "--out", str(run_dir), "--no-progress"])
    assert status == 130
    assert last_line(err) == (
        f"quarto train: interrupted; it has no checkpoint yet: quarto train --resume {run_dir} starts it from step 0"
    )
    status, _, err = train([*TINY, "--out", str(run_dir), "--no-progress"])
    assert status == 2 and f"quarto train --resume {run_dir} continues it" in err
    printed = resumes_to_the_end(run_dir)
    assert f"resuming {run_dir} from step 0: it stopped before its first checkpoint" in printed


@pytest.mark.parametrize(
    ("stop_at", "saved_at"),
    [
        (0, 0),  # the first rollout: nothing learned yet
        (3 * ROLLOUT + 40, 3 * ROLLOUT),  # mid-rollout: the rollout being collected is counted out
    ],
    ids=["step 0", "mid-run"],
)
def test_ctrl_c_in_a_ppo_run_saves_latest_zip_and_resume_goes_on_from_it(
    stop_at: int, saved_at: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.training import sb3_ppo

    interrupt_when(
        monkeypatch, sb3_ppo.TrainingCallback, "_on_step", lambda callback: callback.num_timesteps >= stop_at
    )
    run_dir = tmp_path / "run"
    status, _, err = train([*TINY, "--out", str(run_dir), "--no-progress"])
    assert status == 130
    assert last_line(err) == resume_story(run_dir, saved_at)
    assert read_metadata(run_dir / "checkpoints" / "latest.zip")["num_timesteps"] == saved_at
    printed = resumes_to_the_end(run_dir)
    if saved_at:
        assert f"resuming {run_dir} at step {saved_at:,}" in printed


def test_ctrl_c_after_a_checkpoint_keeps_the_steps_since(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduled checkpoint at 256; stopped in the update after the rollout that ends at 384 (a whole
    rollout, counted in): latest.zip holds step 384, not 256."""
    from experiments.training import sb3_ppo

    def third_update(model: Any) -> bool:
        return model.num_timesteps >= 3 * ROLLOUT

    interrupt_when(monkeypatch, sb3_ppo.MaskablePPO, "train", third_update)
    run_dir = tmp_path / "run"
    status, _, err = train([*TINY, "checkpoint_every=256", "--out", str(run_dir), "--no-progress"])
    assert status == 130
    assert (run_dir / "checkpoints" / "step_000000256.zip").is_file()
    assert last_line(err) == resume_story(run_dir, 3 * ROLLOUT)
    resumes_to_the_end(run_dir)


def test_ctrl_c_in_an_alphazero_run_saves_latest_zip_and_resume_goes_on_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped in the third round of self-play (each adds num_games = 16 positions), before the first
    checkpoint: latest.zip holds the two rounds stored."""
    from experiments.training import alphazero
    from tests.test_train_alphazero import TINY_ALPHAZERO

    rounds = []

    def third_round(*args: Any) -> bool:
        rounds.append(True)
        return len(rounds) == 3

    interrupt_when(monkeypatch, alphazero, "play_rounds", third_round)
    run_dir = tmp_path / "az"
    argv = [*TINY_ALPHAZERO, "grade_positions=0", "exact_outcome_empties=0", "total_steps=96"]
    status, _, err = train([*argv, "--out", str(run_dir), "--no-progress"])
    assert status == 130
    assert last_line(err) == resume_story(run_dir, 32)
    printed = resumes_to_the_end(run_dir)
    assert f"resuming {run_dir} at step 32" in printed


def test_a_resume_without_latest_zip_goes_on_from_the_checkpoint_beside_it(tmp_path: Path) -> None:
    """A run killed before its first scheduled checkpoint keeps the best.zip of its evaluation at step 0: the
    resume takes it, as it takes one beside a damaged latest.zip; a run with no checkpoint at all has none."""
    from experiments.training.alphazero import write_untrained_checkpoint
    from experiments.training.config_file import load_config
    from experiments.training.run import has_checkpoint, resume_checkpoint

    config = load_config(Path("configs/alphazero.yaml"), ["net_arch=[8]"])
    untrained = write_untrained_checkpoint(config, tmp_path)  # a reference, not one of the run's checkpoints
    assert not has_checkpoint(tmp_path)
    untrained.rename(tmp_path / "checkpoints" / "best.zip")
    assert has_checkpoint(tmp_path)
    checkpoint, _, missing = resume_checkpoint(tmp_path)
    assert checkpoint.name == "best.zip" and missing is not None and "latest.zip' is missing" in str(missing)


# ---------------------------------------------------------------------------------------------------------
# quarto replay --html --grade: a progress bar, one value-only solve per position, both cores
# ---------------------------------------------------------------------------------------------------------
def scripted_games(tmp_path: Path, seeds: range) -> Path:
    """A games file of scripted games (eight pieces placed at random, then greedy against random)."""
    import json

    from tests.test_viewer import _scripted_game

    path = tmp_path / "games.jsonl"
    path.write_text("".join(json.dumps(_scripted_game(seed)) + "\n" for seed in seeds))
    return path


def test_replay_grade_shows_progress_on_stderr_and_solves_each_position_once_by_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grading batch: no position's every action is valued (a search or two per action), each position is
    solved once for its value, and a bar on stderr counts them (--no-progress hides it)."""
    from agents.solver.minimax import Solver
    from experiments.arena import replay

    games = scripted_games(tmp_path, range(2))
    solves: list[tuple[Any, bool, bool]] = []
    original = Solver.solve

    def counted(self: Solver, state: Any, all_moves: bool = False, value_only: bool = False) -> Any:
        solves.append((state, all_moves, value_only))
        return original(self, state, all_moves, value_only)

    monkeypatch.setattr(Solver, "solve", counted)
    page = tmp_path / "page.html"
    assert replay.main([str(games), "--html", str(page), "--grade", "--jobs", "1"]) == 0
    assert "grading" in capsys.readouterr().err  # the bar's label
    assert solves and all(value_only and not all_moves for _, all_moves, value_only in solves)
    assert len({state for state, _, _ in solves}) == len(solves)  # none twice
    assert replay.main([str(games), "--html", str(page), "--grade", "--jobs", "1", "--overwrite", "--no-progress"]) == 0
    assert "grading" not in capsys.readouterr().err


@pytest.mark.slow
def test_replay_grade_on_two_worker_processes_writes_the_same_page(tmp_path: Path) -> None:
    from experiments.arena import replay

    games = scripted_games(tmp_path, range(4))
    pages = [tmp_path / "one.html", tmp_path / "two.html"]
    for jobs, page in zip(("1", "2"), pages, strict=True):
        assert replay.main([str(games), "--html", str(page), "--grade", "--jobs", jobs, "--no-progress"]) == 0
    assert pages[0].read_text() == pages[1].read_text()


def test_replay_jobs_above_the_cores_is_capped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from experiments.arena import replay

    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    games = scripted_games(tmp_path, range(1))
    assert replay.main([str(games), "--html", str(tmp_path / "p.html"), "--grade", "--jobs", "8"]) == 0
    assert (
        "quarto replay: warning: --jobs 8 is more than the 1 cores of this machine; using 1" in capsys.readouterr().err
    )


# ---------------------------------------------------------------------------------------------------------
# quarto evaluate: agent specs as well as run folders, every spec checked before anything loads
# ---------------------------------------------------------------------------------------------------------
def evaluate(argv: list[str]) -> tuple[int, str, str]:
    from experiments.training import evaluate as evaluate_module

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = evaluate_module.main(argv)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("spec", ["ppo:{run}", "ppo:{run}/checkpoints/final.zip", "ppo:{run},checkpoint=best"])
def test_evaluate_takes_the_agent_spec_that_training_prints(spec: str, tiny_run: tuple[Path, str]) -> None:
    run_dir, printed = tiny_run
    assert f"agent spec: ppo:{run_dir}/checkpoints/final.zip" in printed
    status, out, err = evaluate([spec.format(run=run_dir), "--games", "2", "--opponents", "random"])
    assert status == 0, err
    assert "random" in out and "argmax" in out


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("az:{run}", "holds a ppo network"),  # the kind is the checkpoint's
        ("ppo:{run},deterministic=false", "takes its path and checkpoint alone, not deterministic"),
        ("ppo:{run},checkpoint=bestt", "must be best, final, latest or step_N"),
        ("greedy", "'greedy' plays no checkpoint"),
    ],
)
def test_evaluate_refuses_a_learner_spec_it_cannot_play_in_one_line(
    spec: str, problem: str, tiny_run: tuple[Path, str]
) -> None:
    status, out, err = evaluate([spec.format(run=tiny_run[0]), "--games", "2", "--opponents", "random"])
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and problem in err, err


@pytest.mark.parametrize(
    ("opponent", "problem"),
    [("greedyy", "did you mean 'greedy'?"), ("minimax:dept=2", "bad option 'dept=2'"), ("ppo:nothing", "nothing")],
)
def test_evaluate_checks_every_opponent_before_it_loads_the_learner(
    opponent: str, problem: str, tiny_run: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.training import evaluate as evaluate_module

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the learner's network was loaded before every spec was checked")

    monkeypatch.setattr(evaluate_module, "load_policy", never)
    status, out, err = evaluate([str(tiny_run[0]), "--games", "2", "--opponents", "random", opponent])
    assert status == 2 and out == ""
    assert err.strip().splitlines() == [err.strip()] and f"--opponents: agent {opponent!r}" in err and problem in err


def test_a_mistyped_opponent_is_told_before_a_damaged_learner_is_read(tmp_path: Path) -> None:
    damaged = tmp_path / "final.zip"
    damaged.write_bytes(b"PK\x03\x04 not a checkpoint")
    status, _, err = evaluate([str(damaged), "--opponents", "greedyy"])
    assert status == 2 and "greedyy" in err and "final.zip" not in err


# ---------------------------------------------------------------------------------------------------------
# The README: the test command's duration, every TensorBoard group
# ---------------------------------------------------------------------------------------------------------
README = Path(__file__).resolve().parent.parent / "README.md"


def tensorboard_groups(folder: Path) -> set[str]:
    """The first part of every tag a run's ``tb/`` holds (scalars, images, text), less TensorBoard's own."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    tags = events.Tags()
    found = {tag.split("/")[0] for kind in ("scalars", "images", "tensors") for tag in tags.get(kind, [])}
    return {group for group in found if not group.startswith("custom_scalars")}


def test_the_readme_names_every_tensorboard_group_a_run_writes(tiny_run: tuple[Path, str]) -> None:
    from experiments.evaluation.log import EVAL_PREFIXES

    text = README.read_text()
    groups = tensorboard_groups(tiny_run[0] / "tb") | set(EVAL_PREFIXES) | {"games"}  # games/: with sample_games
    assert {"eval", "eval_sampled", "charts", "losses", "rollout", "time"} <= groups
    missing = sorted(group for group in groups - {"config"} if f"`{group}/`" not in text and f" {group}/" not in text)
    assert not missing, f"the README's TensorBoard list leaves out {missing}"


def test_the_readme_says_how_long_its_test_command_takes_and_where_that_was_measured() -> None:
    import re

    text = README.read_text()
    words = " ".join(text[text.index("## Run the tests") : text.index("## Train with self-play")].split())
    assert re.search(r"\b\d+ min(utes)? on a quiet 2-core machine", words) and "under load" in words
    assert "docs/results.md" in words
    assert "README's test command, `python -m pytest`" in (README.parent / "docs" / "results.md").read_text()
