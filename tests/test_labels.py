"""The labeller (agents/solver/labels.py) and ``quarto dataset --sample`` on top of it: every label against values found
another way (brute force, or the solver on each child alone), the compiled symmetry keys against their
definition, the same file for ``--jobs 1`` and ``--jobs 2``, a run interrupted (Ctrl-C, then a kill) that the
same command finishes into the file of an uninterrupted run, and bad arguments refused before anything is
written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from agents.solver import labels
from agents.solver.minimax import Solver
from agents.storage.files import is_temporary_name
from agents.suites import PositionSource, collect_positions
from experiments.training import dataset
from experiments.training.dataset import ARRAYS, load_dataset, main, parts_folder
from quarto_env.core import NUM_ACTIONS, STANDARD, State, Variant, legal_actions, position_array, step
from quarto_env.symmetry import LANE_MASK, Symmetries
from tests.test_grade import reference_action_values

ROOT = Path(__file__).resolve().parents[1]


def positions(stages: tuple[int, ...], per_stage: int, seed: int) -> list[State]:
    return collect_positions(STANDARD, per_stage, seed, PositionSource(("random", "greedy"), stages, games=60))


def solver_alone(state: State) -> dict[int, int]:
    """Each action's value from a fresh solver's :meth:`~agents.solver.minimax.Solver.value` of its child alone (no
    book, no cache, no bound from the position's own value)."""
    values = {}
    for action in legal_actions(STANDARD, state):
        child = step(STANDARD, state, action)
        if child.over:
            values[action] = 0 if child.winner < 0 else (1 if child.winner == state.to_move else -1)
        else:
            value = Solver(STANDARD, table_bits=16).value(child)
            values[action] = value if child.to_move == state.to_move else -value
    return values


def test_small_positions_are_labelled_as_brute_force_values_them() -> None:
    states = positions((6, 5, 4), 8, seed=1)
    rows = labels.label_positions(STANDARD, states)
    values = [labels.values_of_row(row) for row in rows]
    assert values == [reference_action_values(STANDARD, state) for state in states]
    assert {max(v.values()) for v in values} == {-1, 0, 1}  # won, drawn and lost positions all checked


def test_rows_fit_only_when_they_label_exactly_the_legal_actions_with_a_value() -> None:
    states = positions((6, 5), 4, seed=3)
    rows = labels.label_positions(STANDARD, states)
    legal = np.array([[a in legal_actions(STANDARD, s) for a in range(NUM_ACTIONS)] for s in states])
    assert labels.rows_label_legal_actions(legal, rows).all() and labels._labels_fit(STANDARD, states, rows)
    row = int(np.flatnonzero(~legal.all(axis=1))[0])  # a position with a masked action
    masked, playable = int(np.flatnonzero(~legal[row])[0]), int(np.flatnonzero(legal[row])[0])
    for action, label in [(masked, 0), (playable, labels.ILLEGAL), (playable, 2)]:
        lying = rows.copy()
        lying[row, action] = label
        fits = labels.rows_label_legal_actions(legal, lying)
        assert np.flatnonzero(~fits).tolist() == [row] and not labels._labels_fit(STANDARD, states, lying)


def test_larger_positions_are_labelled_as_the_solver_values_each_child_alone() -> None:
    states = positions((9, 8), 6, seed=2)
    rows = labels.label_positions(STANDARD, states)
    values = [labels.values_of_row(row) for row in rows]
    assert values == [solver_alone(state) for state in states]
    assert {max(v.values()) for v in values} >= {0, 1} and any(min(v.values()) < max(v.values()) for v in values)
    illegal = rows == labels.ILLEGAL
    masks = np.array([[a in legal_actions(STANDARD, s) for a in range(NUM_ACTIONS)] for s in states])
    np.testing.assert_array_equal(illegal, ~masks)


@pytest.mark.parametrize("variant", [STANDARD, Variant.make(squares=True), Variant.make(attributes=2)])
def test_compiled_keys_are_the_smallest_image_under_every_symmetry(variant: Variant) -> None:
    symmetries = Symmetries(variant)
    rng = np.random.default_rng(4)
    states = []
    for _ in range(8):
        state = State()
        while not state.over:
            states.append(state)
            actions = legal_actions(variant, state)
            state = step(variant, state, int(actions[rng.integers(len(actions))]))
    rows = position_array(states[:: max(1, len(states) // 60)])
    for row, key in zip(rows, symmetries.position_keys(rows).tolist(), strict=True):
        boards, relabellings = np.divmod(np.arange(symmetries.count), len(symmetries.sources))
        copies = np.repeat(row[None, :], symmetries.count, axis=0)
        images, _ = symmetries.apply_chosen(copies, np.zeros((symmetries.count, NUM_ACTIONS)), boards, relabellings)
        kept_lanes = sum(LANE_MASK << (16 * k) for k in range(4) if variant.counted >> k & 1)
        lanes = [(int(x) & kept_lanes) - ((int(x) & kept_lanes) >> 63 << 64) for x in images[:, 0]]
        hands = [-1 if h < 0 else int(h) & variant.counted for h in images[:, 3]]
        assert tuple(key) == min(zip(images[:, 1].tolist(), lanes, hands, strict=True))


# ---------------------------------------------------------------------------------------------------------
# quarto dataset --sample: jobs, resuming, bad arguments
# ---------------------------------------------------------------------------------------------------------
SAMPLE = ["--sample", "12", "--games", "40", "--min-empty", "4", "--max-empty", "8", "--seed", "5", "--no-progress"]


def written(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    arrays, header = load_dataset(path)
    return arrays, {key: value for key, value in header.items() if key != "code"}


def test_the_file_is_the_same_for_one_job_and_two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labels, "SHARD_POSITIONS", 7)  # several shards, labelled by both workers
    assert main([*SAMPLE, "--out", str(tmp_path / "one.npz")]) == 0
    assert main([*SAMPLE, "--jobs", "2", "--out", str(tmp_path / "two.npz")]) == 0
    (one, one_header), (two, two_header) = written(tmp_path / "one.npz"), written(tmp_path / "two.npz")
    assert one_header == two_header and one_header["count"] > 40
    assert all(np.array_equal(one[name], two[name]) for name in ARRAYS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.npz", "two.npz"]  # no parts folder left


def test_a_resumed_run_labels_only_what_was_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labels, "SHARD_POSITIONS", 5)
    assert main([*SAMPLE, "--out", str(tmp_path / "whole.npz")]) == 0
    out = tmp_path / "resumed.npz"
    solve = labels.action_values
    calls = []

    def interrupted_after_twelve(variant: Variant, state: State) -> dict[int, int]:
        if len(calls) == 12:
            raise KeyboardInterrupt
        calls.append(state)
        return solve(variant, state)

    monkeypatch.setattr(labels, "action_values", interrupted_after_twelve)
    with pytest.raises(KeyboardInterrupt):
        main([*SAMPLE, "--out", str(out)])
    assert not out.exists() and len(list(parts_folder(out).glob("shard-*.npy"))) == 2
    # What a kill in the middle of writing the third shard leaves: half a file under atomic_write's name.
    half_written = parts_folder(out) / ".shard-00002.npy.k1ll3d.tmp.npy"
    half_written.write_bytes(b"\x93NUMPY")
    assert is_temporary_name(half_written.name)

    def no_games(*args: object, **kwargs: object) -> None:
        raise AssertionError("the positions are read back, not collected again")

    calls.clear()
    monkeypatch.setattr(labels, "action_values", lambda variant, state: calls.append(state) or solve(variant, state))
    monkeypatch.setattr(dataset, "collect_positions", no_games)
    assert main([*SAMPLE, "--out", str(out)]) == 0
    (whole, whole_header), (resumed, resumed_header) = written(tmp_path / "whole.npz"), written(out)
    assert len(calls) == whole_header["count"] - 10  # two shards of five were kept
    assert resumed_header == whole_header and all(np.array_equal(whole[n], resumed[n]) for n in ARRAYS)
    assert not parts_folder(out).exists()


def _ctrl_c_as_in_a_terminal() -> None:
    # A child inherits an ignored SIGINT, and Python then keeps ignoring it: pytest-xdist's workers ignore it, so
    # the interrupted command would run to the end. A terminal's command has the default handler.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_then_a_kill_then_the_same_command_gives_the_uninterrupted_file(tmp_path: Path) -> None:
    argv = ["--sample", "300", "--games", "360", "--min-empty", "8", "--max-empty", "9", "--seed", "2", "--jobs", "2"]
    command = [sys.executable, "-m", "experiments.cli", "dataset", *argv, "--no-progress"]
    out = tmp_path / "data.npz"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}

    def started_until_a_shard_is_written(shards: int) -> subprocess.Popen[str]:
        run = subprocess.Popen(
            [*command, "--out", str(out)],
            cwd=ROOT,
            env=environment,
            text=True,
            stderr=subprocess.PIPE,
            preexec_fn=_ctrl_c_as_in_a_terminal,
        )
        deadline = time.monotonic() + 240
        while len(list(parts_folder(out).glob("shard-*.npy"))) < shards and run.poll() is None:
            assert time.monotonic() < deadline, "no shard written in four minutes"
            time.sleep(0.05)
        assert run.poll() is None, "the run finished before it could be interrupted: give it more positions"
        return run

    run = started_until_a_shard_is_written(1)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130 and "the same command continues from them" in stderr
    run = started_until_a_shard_is_written(len(list(parts_folder(out).glob("shard-*.npy"))) + 1)
    run.kill()
    run.communicate(timeout=60)
    assert not out.exists()
    finished = subprocess.run([*command, "--out", str(out)], cwd=ROOT, env=environment, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert main([*argv, "--jobs", "1", "--no-progress", "--out", str(tmp_path / "whole.npz")]) == 0
    (whole, whole_header), (resumed, resumed_header) = written(tmp_path / "whole.npz"), written(out)
    assert resumed_header == whole_header and whole_header["count"] > 2 * labels.SHARD_POSITIONS
    assert all(np.array_equal(whole[name], resumed[name]) for name in ARRAYS)
    assert not parts_folder(out).exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--sample", "5", "--jobs", "0"], "jobs"),
        (["--sample", "5", "--jobs", "two"], "jobs"),
        (["--sample", "0"], "sample"),
        (["--sample", "5", "--min-empty", "9", "--max-empty", "6"], "--min-empty 9 is above --max-empty 6"),
        (["--sample", "5", "--declaration"], "--declaration"),
    ],
)
def test_bad_arguments_are_one_line_and_write_nothing(
    arguments: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*arguments, "--out", str(tmp_path / "data.npz")])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("quarto dataset: ") and message in error  # "error:" too where argparse refuses
    assert list(tmp_path.iterdir()) == []
