"""``quarto_env.vector.RandomLegalActions``: the compiled sampler of uniformly random legal actions."""

from __future__ import annotations

import numpy as np
import pytest

from quarto_env.vector import RandomLegalActions, VectorQuarto


def random_masks(rng: np.random.Generator, num_envs: int, num_actions: int) -> np.ndarray:
    masks = rng.random((num_envs, num_actions)) < 0.4
    masks[np.arange(num_envs), rng.integers(num_actions, size=num_envs)] = True  # at least one legal action
    return masks


@pytest.mark.parametrize("num_actions", [1, 16, 17, 64])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int64])
def test_only_legal_actions_and_every_one_of_them_uniformly(num_actions: int, dtype: type) -> None:
    masks = random_masks(np.random.default_rng(num_actions), 8, num_actions).astype(dtype)
    sample = RandomLegalActions(8, seed=1)
    draws = 4000
    counts = np.zeros((8, num_actions), dtype=np.int64)
    for _ in range(draws):
        actions = sample(masks)
        assert actions.dtype == np.int64 and actions.shape == (8,)
        counts[np.arange(8), actions] += 1
    assert not counts[masks == 0].any(), "an illegal action was drawn"
    assert (counts[masks != 0] > 0).all(), "a legal action was never drawn"
    # each legal action's count within 5 standard deviations of its expectation, draws / legal actions of its row
    expected = np.broadcast_to(draws / masks.sum(axis=1, keepdims=True), counts.shape)[masks != 0]
    assert (np.abs(counts[masks != 0] - expected) / np.sqrt(expected)).max() < 5


def test_it_plays_legal_actions_in_vector_quarto() -> None:
    envs = VectorQuarto(64, observation=None, seed=0, declaration=True)
    _, info = envs.reset()
    sample = RandomLegalActions(64, seed=0)
    for _ in range(300):  # raises on an illegal action
        _, _, _, _, info = envs.step(sample(info["action_mask"]))


def test_the_same_seed_draws_the_same_actions() -> None:
    masks = random_masks(np.random.default_rng(0), 32, 16)
    first, again, other = RandomLegalActions(32, seed=5), RandomLegalActions(32, seed=5), RandomLegalActions(32, 6)
    draws = [(first(masks), again(masks), other(masks)) for _ in range(20)]
    assert all((a == b).all() for a, b, _ in draws)
    assert any((a != c).any() for a, _, c in draws)


@pytest.mark.parametrize(("num_envs", "threads"), [(33, 2), (5, 3), (2, 4)])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8])
def test_threads_draw_the_same_actions(num_envs: int, threads: int, dtype: type) -> None:
    masks = random_masks(np.random.default_rng(num_envs), num_envs, 17).astype(dtype)
    alone, shared = RandomLegalActions(num_envs, seed=3), RandomLegalActions(num_envs, seed=3, threads=threads)
    for _ in range(20):
        assert np.array_equal(alone(masks), shared(masks))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("empty_rows", [[2], [3, 1], [3]])
def test_a_row_without_a_legal_action_is_named(threads: int, empty_rows: list[int]) -> None:
    masks = np.ones((4, 16), dtype=np.int8)
    masks[empty_rows] = 0
    with pytest.raises(ValueError, match=f"action_mask row {min(empty_rows)} has no legal action"):
        RandomLegalActions(4, threads=threads)(masks)


@pytest.mark.parametrize(
    ("masks", "error", "message"),
    [
        (
            np.ones((3, 16), dtype=np.int8),
            ValueError,
            r"shape \(4, num_actions\) with 1-64 actions; got shape \(3, 16\)",
        ),
        (np.ones((4, 65), dtype=np.int8), ValueError, r"got shape \(4, 65\)"),
        (np.ones(4, dtype=np.int8), ValueError, r"got shape \(4,\)"),
        (np.ones((4, 16)), TypeError, "bool or integers"),
    ],
)
def test_a_bad_mask_is_refused_in_one_line(masks: np.ndarray, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        RandomLegalActions(4)(masks)


@pytest.mark.parametrize(("num_envs", "seed"), [(0, None), (2.5, None), (4, -1), (4, 1.5)])
def test_bad_sizes_and_seeds_are_refused(num_envs: object, seed: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        RandomLegalActions(num_envs, seed)  # type: ignore[arg-type]


@pytest.mark.parametrize("threads", [0, -2, 1.5, True])
def test_bad_threads_are_refused_in_one_line(threads: object) -> None:
    with pytest.raises(ValueError, match=r"RandomLegalActions: threads must be an integer >= 1 \(this machine has"):
        RandomLegalActions(4, threads=threads)  # type: ignore[arg-type]
