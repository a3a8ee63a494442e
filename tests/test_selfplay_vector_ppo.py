"""The single-file self-play PPO example on VectorQuarto: a tiny run writes its folder, and each seat's rewards
land on its own last transition."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from quarto_env import VectorQuarto

pytest.importorskip("torch")
pytest.importorskip("tensorboard")

from experiments.training import selfplay_vector_ppo as sp


def test_final_rewards_go_to_each_seats_last_transition() -> None:
    """Game 0: seat 1 gave at step 0, seat 0 placed and won at step 1 (its own placement): +1 on step 1 (seat 0's
    last), -1 on step 0 (seat 1's last), both marked ended; game 1 goes on and gets nothing."""
    rewards_buf = np.zeros((3, 2), dtype=np.float32)
    ended_buf = np.zeros((3, 2), dtype=np.float32)
    last = np.array([[1, 0], [2, 1]])  # per game, per seat: the step of its latest transition
    rewards = np.array([[1.0, -1.0], [0.0, 0.0]], dtype=np.float32)
    terminated = np.array([True, False])
    sp.credit_rewards(rewards_buf, ended_buf, last, rewards, terminated)
    assert rewards_buf[:, 0].tolist() == [-1.0, 1.0, 0.0]
    assert ended_buf[:, 0].tolist() == [1.0, 1.0, 0.0]
    assert not rewards_buf[:, 1].any() and not ended_buf[:, 1].any()
    assert last.tolist() == [[-1, -1], [2, 1]]


def test_reward_of_a_seat_without_a_transition_in_the_rollout_is_dropped() -> None:
    """Its last transition was in the previous rollout, which bootstrapped it."""
    rewards_buf = np.zeros((2, 1), dtype=np.float32)
    ended_buf = np.zeros((2, 1), dtype=np.float32)
    last = np.array([[0, -1]])
    sp.credit_rewards(rewards_buf, ended_buf, last, np.array([[1.0, -1.0]]), np.array([True]))
    assert rewards_buf[:, 0].tolist() == [1.0, 0.0] and ended_buf[:, 0].tolist() == [1.0, 0.0]


def test_advantages_follow_each_seats_own_trajectory() -> None:
    """One game, seats 1, 0, 0 act at steps 0-2; seat 0 wins at step 2. gamma = lambda = 1: every advantage is
    the seat's final reward minus the transition's value."""
    seats = np.array([[1], [0], [0]])
    rewards = np.array([[-1.0], [0.0], [1.0]], dtype=np.float32)
    ended = np.array([[1.0], [0.0], [1.0]], dtype=np.float32)
    values = np.array([[0.2], [0.5], [0.7]], dtype=np.float32)
    advantages = sp.per_seat_advantages(rewards, values, seats, ended, np.full((1, 2), 9.0), 1.0, 1.0)
    assert advantages[:, 0] == pytest.approx([-1.2, 0.5, 0.3])


def test_pending_transitions_bootstrap() -> None:
    seats = np.array([[0], [1]])
    values = np.array([[0.1], [0.3]], dtype=np.float32)
    zeros = np.zeros((2, 1), dtype=np.float32)
    advantages = sp.per_seat_advantages(zeros, values, seats, zeros, np.array([[0.4, -0.4]]), 1.0, 1.0)
    assert advantages[:, 0] == pytest.approx([0.3, -0.7])


def test_tiny_run_writes_its_folder(tmp_path: Path, one_torch_thread: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    made = []
    monkeypatch.setattr(
        sp, "VectorQuarto", lambda *args, **kwargs: made.append(kwargs) or VectorQuarto(*args, **kwargs)
    )

    argv = ["--num-envs", "8", "--num-steps", "16", "--total-timesteps", "384", "--eval-games", "8"]
    argv += ["--width", "32", "--env-threads", "2", "--runs-dir", str(tmp_path)]
    run_dir = sp.train(sp.parse_config(argv), argv)
    assert run_dir.parent == tmp_path and run_dir.name.startswith("selfplay_vector_ppo__1__")
    config = json.loads((run_dir / "config.json").read_text())
    assert config["num_envs"] == 8 and config["observation"] == "parity" and config["env_threads"] == 2
    assert [kwargs["threads"] for kwargs in made] == [2]  # the games are stepped on those threads
    assert "--num-envs 8" in (run_dir / "command.txt").read_text()
    events = EventAccumulator(str(run_dir))
    events.Reload()
    tags = events.Tags()["scalars"]
    for prefix in ("charts/", "losses/", "eval/"):
        assert any(tag.startswith(prefix) for tag in tags), (prefix, tags)
    scores = events.Scalars("eval/greedy_score")
    assert len(scores) == 2 and all(0 <= s.value <= 1 for s in scores)  # at the start and at the end


@pytest.mark.slow
def test_short_run_reaches_the_goal_against_random_and_greedy(tmp_path: Path, one_torch_thread: None) -> None:
    """The example's goal (>= 0.95 against random, >= 0.80 against greedy within 10 minutes), on a step budget
    rather than a clock, so that a loaded machine does not change the result: 100 rollouts of the default 128 x 32
    steps (the figures of one run are in the README)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    argv = ["--total-timesteps", str(100 * 128 * 32), "--total-seconds", "3600", "--eval-every", "3600"]
    run_dir = sp.train(sp.parse_config([*argv, "--runs-dir", str(tmp_path)]), argv)
    events = EventAccumulator(str(run_dir))
    events.Reload()
    final = {opponent: events.Scalars(f"eval/{opponent}_score")[-1] for opponent in ("random", "greedy")}
    assert final["random"].step >= 100 * 128 * 32
    assert final["random"].value >= 0.95 and final["greedy"].value >= 0.80, final
