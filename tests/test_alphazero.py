"""The AlphaZero-style search, network, agent and checkpoints (agents/alphazero.py) and the symmetries and buffer
of its training loop (experiments/alphazero.py); the training runs themselves are in test_train_alphazero.py."""

from __future__ import annotations

import functools
import io
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th

from agents.alphazero import AlphaZeroAgent, load_network, save_checkpoint
from agents.match import play_game
from agents.networks.checkpoints import CheckpointError, CheckpointHeader
from agents.networks.onnx_runtime import onnx_available
from agents.networks.policy_value import PolicyValueNetwork, device_of, resolve_device
from agents.specs import DEFAULT_PUCT_SIMULATIONS, MAX_PUCT_SIMULATIONS, SpecError, make_agent
from agents.tree.choices import DEFAULT_UCT_SIMULATIONS
from agents.tree.puct import PUCTSearch, candidates, encode_positions, forced_action
from experiments.training.az_selfplay import ReplayBuffer
from quarto_env.core import (
    DECLARE,
    FIELD_HAND,
    FIELD_LANES,
    INITIAL_STATE,
    NO_PIECE,
    NO_WINNER,
    NUM_ACTIONS,
    STANDARD,
    State,
    Variant,
    bits,
    compiled_fields,
    legal_actions,
    position_array,
    safe_gives,
    step,
    winning_squares_for,
)
from quarto_env.observation import observation_kind
from quarto_env.symmetry import Symmetries
from tests.test_mcts import random_position


# ---------------------------------------------------------------------------------------------------------
# Helpers: a brute-force reference and deterministic evaluators
# ---------------------------------------------------------------------------------------------------------
def exact_value(variant: Variant, state: State) -> int:
    """The value for the player to move, by plain negamax over ``core.step`` (no shortcuts, no tables)."""
    return _negamax(variant, state)


@functools.cache
def _negamax(variant: Variant, state: State) -> int:
    if state.over:
        return 0 if state.winner == NO_WINNER else (1 if state.winner == state.to_move else -1)
    best = -2
    for action in legal_actions(variant, state):
        if action == DECLARE and not state.claimable:
            continue
        after = step(variant, state, action)
        if after.over:
            value = 0 if after.winner == NO_WINNER else (1 if after.winner == state.to_move else -1)
        else:
            value = _negamax(variant, after) * (1 if after.to_move == state.to_move else -1)
        best = max(best, value)
    return best


def uniform(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Equal priors and a value of 0 everywhere: the search alone."""
    return np.zeros((len(planes), NUM_ACTIONS), np.float32), np.zeros(len(planes), np.float32)


def hashed(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Priors and values that depend on each position alone, computed exactly in integers: the same whatever
    else is in the batch."""
    weights = np.arange(1, planes.shape[1] + 1, dtype=np.int64)[None, :, None]
    scores = (planes.astype(np.int64) * weights).sum(1) % 7
    values = (planes.astype(np.int64).sum((1, 2)) % 5 - 2) / 2
    return scores.astype(np.float32), values.astype(np.float32)


def endgame(variant: Variant, seed: int, empty: int) -> State:
    """A position with ``empty`` empty squares and a real choice for the player to move."""
    for attempt in range(1000):
        state = random_position(variant, seed * 1000 + attempt, 2 * (16 - empty) + 1)
        if state.over or state.num_empty != empty or state.claimable:
            continue
        action, _ = forced_action(*compiled_fields(state)[:4], 0, variant.group_array, variant.counted)
        if action < 0:
            return state
    raise AssertionError("no such position")


# ---------------------------------------------------------------------------------------------------------
# Rules shortcuts
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(40))
def test_candidates_follow_the_rules_core(seed: int) -> None:
    variant = Variant.make(squares=seed % 2 == 1, attributes=4 - seed % 3)
    state = random_position(variant, seed, seed % 24)
    if state.over:
        return
    mask, terminal, value = candidates(*compiled_fields(state)[:4], variant.group_array, variant.counted)
    if state.placing:
        wins = winning_squares_for(variant, state, state.hand)
        assert terminal == bool(wins) and (value == 1.0) == bool(wins)
        assert terminal or mask == sum(1 << s for s in range(16) if state.piece_at(s) == NO_PIECE)
    else:
        safe = safe_gives(variant, state)
        assert terminal == (safe == 0) and (value == -1.0) == (safe == 0)
        assert terminal or mask == safe


@pytest.mark.parametrize("seed", range(20))
def test_forced_actions_are_legal_and_keep_the_value(seed: int) -> None:
    state = random_position(STANDARD, seed, 18 + seed % 8)
    if state.over:
        return
    action, mask = forced_action(*compiled_fields(state)[:4], 0, STANDARD.group_array, STANDARD.counted)
    if action < 0:
        assert bin(mask).count("1") >= 2
        return
    assert action in legal_actions(STANDARD, state)
    after = step(STANDARD, state, action)
    sign = 1 if after.over or after.to_move == state.to_move else -1
    reached = (
        (0 if after.winner == NO_WINNER else (1 if after.winner == state.to_move else -1))
        if after.over
        else sign * exact_value(STANDARD, after)
    )
    assert reached == exact_value(STANDARD, state)


def test_a_claimable_group_is_declared() -> None:
    variant = Variant.make(declaration=True)
    state = State()
    for action in (0, 0, 1, 1, 2, 2, 3):  # pieces 0-3 share "short, light, round, solid" on the top row
        state = step(variant, state, action)
    state = step(variant, state, 3)
    assert state.claimable and not state.over
    agent = AlphaZeroAgent(
        variant, 0, network=PolicyValueNetwork(observation_kind("parity"), list(variant.groups), 8), sims=8
    )
    assert agent.act(state) == DECLARE


# ---------------------------------------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_the_root_value_approaches_the_exact_value(seed: int) -> None:
    variant = STANDARD if seed < 6 else Variant.make(squares=True)
    state = endgame(variant, seed, 5)
    search = PUCTSearch(variant, observation_kind("raw"), uniform, 1, 4000)
    result = search.run(position_array([state]), 4000)
    exact = exact_value(variant, state)
    assert abs(float(result.root_value[0]) - exact) < 0.2
    best = int(result.best()[0])
    after = step(variant, state, best)
    sign = 1 if after.over or after.to_move == state.to_move else -1
    assert sign * exact_value(variant, after) == exact  # the most visited action keeps the value


def test_visits_add_up_and_stay_on_candidates() -> None:
    states = [endgame(STANDARD, seed, 8) for seed in range(6)] + [INITIAL_STATE]
    search = PUCTSearch(STANDARD, observation_kind("parity"), hashed, len(states), 50)
    result = search.run(position_array(states), 50)
    for state, visits in zip(states, result.visits, strict=True):
        mask = candidates(*compiled_fields(state)[:4], STANDARD.group_array, STANDARD.counted)[0]
        assert visits.sum() == 50
        assert set(np.flatnonzero(visits)) <= set(bits(int(mask)))
    assert np.allclose(result.policy().sum(1), 1.0)


def test_the_batched_search_agrees_with_one_game_searches() -> None:
    states = [endgame(STANDARD, seed, 6 + seed % 5) for seed in range(10)]
    together = PUCTSearch(STANDARD, observation_kind("parity"), hashed, len(states), 120).run(
        position_array(states), 120
    )
    alone = PUCTSearch(STANDARD, observation_kind("parity"), hashed, 1, 120)
    for i, state in enumerate(states):
        single = alone.run(position_array([state]), 120)
        assert np.array_equal(single.visits[0], together.visits[i])
        assert single.root_value[0] == pytest.approx(together.root_value[i], abs=1e-6)


def test_noise_changes_the_searched_priors_and_keeps_a_distribution() -> None:
    search = PUCTSearch(STANDARD, observation_kind("parity"), uniform, 2, 10)
    result = search.run(position_array([INITIAL_STATE] * 2), 10, noise=(0.3, 0.25, np.random.default_rng(0)))
    searched = search.prior[:2, 0]  # the priors the search used
    assert np.allclose(searched.sum(1), 1.0)
    assert not np.allclose(searched, 1 / 16)
    assert np.allclose(result.prior, 1 / 16)  # the result reports the network's, before the noise


def test_a_time_budget_replaces_the_simulation_count() -> None:
    network = PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 8)
    agent = AlphaZeroAgent(STANDARD, 0, network=network, time=0.2)
    agent.act(INITIAL_STATE)
    assert agent.last_result is not None and 1 < agent.last_result.sims < MAX_PUCT_SIMULATIONS


@pytest.mark.parametrize(
    "spec",
    [
        "az:pretrained,sims=4,time=1",
        "mcts:sims=10,time=1",
        f"az:pretrained,sims={DEFAULT_PUCT_SIMULATIONS},time=1",  # the default's value, named, is refused too
        f"mcts:sims={DEFAULT_UCT_SIMULATIONS},time=1",
    ],
)
def test_a_time_budget_with_simulations_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="a time budget replaces sims; give one of them"):
        make_agent(spec, STANDARD, seed=0)


# ---------------------------------------------------------------------------------------------------------
# Symmetries and the buffer
# ---------------------------------------------------------------------------------------------------------
def test_the_symmetry_counts() -> None:
    assert Symmetries(STANDARD).count == 32 * 384
    assert Symmetries(Variant.make(squares=True)).count == 8 * 384
    assert Symmetries(Variant.make(attributes=1)).count == 32 * 2


@pytest.mark.parametrize("squares", [False, True])
def test_symmetric_positions_keep_their_value_and_candidates(squares: bool) -> None:
    variant = Variant.make(squares=squares)
    symmetries = Symmetries(variant)
    rng = np.random.default_rng(1)
    for seed in range(6):
        state = endgame(variant, seed, 5)
        fields = position_array([state])
        mask = candidates(*fields[0][:4], variant.group_array, variant.counted)[0]
        policy = np.array([[float(mask >> a & 1) * (a + 1) for a in range(NUM_ACTIONS)]], np.float32)
        moved, moved_policy = symmetries.apply(fields, policy, rng)
        lanes = int(moved[0, 0]) & (1 << 64) - 1
        image = State(lanes, *(int(x) for x in moved[0, 1:5]))
        assert exact_value(variant, image) == exact_value(variant, state)
        moved_mask = candidates(*moved[0][:4], variant.group_array, variant.counted)[0]
        assert set(np.flatnonzero(moved_policy[0])) == set(bits(int(moved_mask)))
        assert sorted(moved_policy[0]) == sorted(policy[0])


def test_the_identity_symmetry_changes_nothing() -> None:
    symmetries = Symmetries(STANDARD)
    identity_label = next(
        i
        for i, (s, f) in enumerate(zip(symmetries.sources, symmetries.flips, strict=False))
        if list(s) == [0, 1, 2, 3] and not f.any()
    )
    states = [endgame(STANDARD, seed, 7) for seed in range(4)]
    fields = position_array(states)
    policy = np.random.default_rng(0).random((4, NUM_ACTIONS)).astype(np.float32)
    zeros = np.zeros(4, dtype=np.int64)
    moved, moved_policy = symmetries.apply_chosen(fields, policy, zeros, zeros + identity_label)
    assert np.array_equal(moved, fields) and np.array_equal(moved_policy, policy)


def test_encoded_planes_match_the_env_observation() -> None:
    from quarto_env.observation import observe

    states = [endgame(STANDARD, seed, 9) for seed in range(5)]
    kind = observation_kind("parity")
    planes, _ = encode_positions(position_array(states), kind, STANDARD)
    for state, plane in zip(states, planes, strict=True):
        assert np.array_equal(plane, observe(STANDARD, state, "parity"))


def test_the_buffer_keeps_the_newest_and_round_trips() -> None:
    buffer = ReplayBuffer(5)
    positions = position_array([endgame(STANDARD, seed, 9) for seed in range(7)])
    outcome = np.arange(7, dtype=np.float32) / 8
    buffer.add(positions, np.zeros((7, NUM_ACTIONS), np.float32), outcome, -outcome / 10)
    assert buffer.size == 5 and sorted(buffer.outcome * 8) == [2, 3, 4, 5, 6]
    copy = ReplayBuffer(5)
    copy.load_bytes(buffer.to_bytes(), STANDARD)
    assert sorted(copy.outcome * 8) == [2, 3, 4, 5, 6] and copy.size == 5
    assert np.allclose(copy.root_value[: copy.size], -copy.outcome[: copy.size] / 10)
    assert {tuple(row) for row in copy.positions} == {tuple(row) for row in positions[2:]}
    smaller = ReplayBuffer(3)
    smaller.load_bytes(buffer.to_bytes(), STANDARD)
    assert sorted(smaller.outcome * 8) == [4, 5, 6]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("hand", 99, "row 1 is no position in play under the run's rules: it has a field out of range"),
        ("lanes", -1, "row 1 is no position in play under the run's rules: it has attributes on an empty square"),
        ("outcome", np.nan, "outcome targets beyond [-1, 1] or not finite"),
        ("policy", -0.5, "policy targets beyond [0, 1] or not finite"),
    ],
)
def test_a_damaged_buffer_is_refused_naming_its_first_problem(field: str, value: float, problem: str) -> None:
    buffer = ReplayBuffer(3)  # a resealed checkpoint could carry such rows, which the compiled code would misread
    buffer.add(position_array([endgame(STANDARD, seed, 9) for seed in range(3)]), np.zeros((3, 16), np.float32),
               np.zeros(3, np.float32), np.zeros(3, np.float32))  # fmt: skip
    arrays = dict(np.load(io.BytesIO(buffer.to_bytes()), allow_pickle=False))
    if field in ("hand", "lanes"):
        arrays["fields"][1, FIELD_HAND if field == "hand" else FIELD_LANES] = value
    else:
        arrays[field][1] = value
    damaged = io.BytesIO()
    np.savez(damaged, **arrays)
    with pytest.raises(ValueError) as refused:
        ReplayBuffer(3).load_bytes(damaged.getvalue(), STANDARD)
    assert str(refused.value).startswith(problem)


# ---------------------------------------------------------------------------------------------------------
# Checkpoints and the agent spec
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    th.manual_seed(0)
    network = PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 16)
    path = tmp_path_factory.mktemp("az") / "net.zip"
    save_checkpoint(path, network, CheckpointHeader(STANDARD, network.kind.name, 1234), {"config": {"name": "test"}})
    return path


def test_a_checkpoint_round_trips(checkpoint: Path) -> None:
    network, metadata = load_network(checkpoint)
    assert metadata["algorithm"] == "alphazero" and metadata["num_timesteps"] == 1234
    assert metadata["env_kwargs"]["observation"] == "parity"
    th.manual_seed(0)
    fresh = PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 16)
    for name, tensor in fresh.state_dict().items():
        assert th.equal(tensor, network.state_dict()[name])


@pytest.mark.parametrize("flags", [{}, {"squares": True}, {"declaration": True}, {"attributes": 2}])
def test_az_plays_legal_games_in_every_variant(checkpoint: Path, tmp_path: Path, flags: dict) -> None:
    variant = Variant.make(**flags)
    path = checkpoint
    if variant != STANDARD:
        path = tmp_path / "variant.zip"
        network = PolicyValueNetwork(observation_kind("parity"), list(variant.groups), 8)
        save_checkpoint(path, network, CheckpointHeader(variant, "parity", 0), {})
    for spec in (f"az:{path},sims=16", f"az:{path},sims=0", f"az:{path},sims=8,temperature=1"):
        agent = make_agent(spec, variant, seed=0)
        record = play_game(variant, [agent, make_agent("random", variant, 1)])
        assert record.end in ("win", "draw")


def test_a_run_folder_means_its_final_checkpoint(checkpoint: Path, tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "final.zip").write_bytes(checkpoint.read_bytes())
    assert make_agent(f"az:{tmp_path}", STANDARD, 0).act(INITIAL_STATE) in range(16)


def test_a_run_folder_still_training_means_its_latest_checkpoint_also_for_evaluate(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.training import evaluate

    latest = tmp_path / "checkpoints" / "latest.zip"
    latest.parent.mkdir()
    latest.write_bytes(checkpoint.read_bytes())
    assert make_agent(f"az:{tmp_path},sims=2", STANDARD, 0).act(INITIAL_STATE) in range(16)
    loaded: list[Path] = []

    def spy(path: str, variant: Variant, device: str) -> PolicyValueNetwork:
        loaded.append(Path(path))
        return load_network(path, variant, device)[0]

    monkeypatch.setattr(evaluate, "load_network_of_either_backend", spy)
    assert evaluate.main([str(tmp_path), "--opponents", "random", "--games", "2", "--sims", "2"]) == 0
    assert loaded == [latest]


def test_a_checkpoint_loads_onto_the_device_asked_for(checkpoint: Path) -> None:
    network, _ = load_network(checkpoint, device="cpu")
    assert device_of(network) == th.device("cpu")
    logits, values = network.evaluate(np.zeros((2, *network.kind.shape), dtype=np.int8))
    assert logits.shape == (2, NUM_ACTIONS) and values.shape == (2,)  # numpy arrays back, whatever the device
    agent = make_agent(f"az:{checkpoint},sims=4,device=auto", STANDARD, 0)
    assert device_of(agent.network) == resolve_device("auto") and agent.act(INITIAL_STATE) in range(16)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("az", "needs a checkpoint"),
        ("az:/no/such/file.zip", "does not exist"),
        ("az:{path},sims=-1", "sims"),
        ("az:{path},sims=1e9", "sims"),
        ("az:{path},temperature=nan", "temperature"),
        ("az:{path},time=0", "time"),
        ("az:{path},c=0", "c"),
        ("az:{path},depth=3", "bad option"),
    ],
)
def test_bad_az_specs_are_refused_clearly(checkpoint: Path, spec: str, message: str) -> None:
    with pytest.raises((SpecError, CheckpointError), match=message):
        make_agent(spec.format(path=checkpoint), STANDARD, 0)


def test_checkpoints_of_the_other_algorithm_are_refused(checkpoint: Path, tiny_run: tuple[Path, str]) -> None:
    with pytest.raises(CheckpointError, match="play it with az:PATH"):
        make_agent(f"ppo:{checkpoint}", STANDARD, 0)
    with pytest.raises(CheckpointError, match="play it with ppo:PATH"):
        make_agent(f"az:{tiny_run[0] / 'checkpoints' / 'final.zip'}", STANDARD, 0)


def test_a_checkpoint_of_another_variant_is_refused(checkpoint: Path) -> None:
    with pytest.raises(CheckpointError, match="trained for"):
        make_agent(f"az:{checkpoint}", Variant.make(squares=True), 0)


def test_a_damaged_network_entry_is_refused(checkpoint: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.zip"
    with zipfile.ZipFile(checkpoint) as source, zipfile.ZipFile(damaged, "w") as target:
        for name in source.namelist():
            target.writestr(name, b"junk" if name == "network.pth" else source.read(name))
    with pytest.raises(CheckpointError, match=r"network\.pth"):
        make_agent(f"az:{damaged}", STANDARD, 0)


def test_az_is_an_opponent_of_the_gymnasium_env(checkpoint: Path) -> None:
    from agents.envs.vs_agent import make_vs_agent

    env = make_vs_agent(opponent=f"az:{checkpoint},sims=8")
    _, info = env.reset(seed=0)
    done = False
    while not done:
        action = int(np.flatnonzero(info["action_mask"])[0])
        _observation, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    assert reward in (-1.0, 0.0, 1.0)


def test_bench_az_shows_the_fast_evaluation_giving_the_same_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.bench import az as bench_az

    # 64 games: batches large enough for the fast path (FAST_MIN_BATCH).
    assert bench_az.main(["--games", "64", "--sims", "4", "--seconds", "0.3", "--width", "16"]) == 0
    out = capsys.readouterr().out
    assert "Leaf evaluations A/B: self-play sessions alike, one per path, 64 games side by side" in out
    assert re.search(r"^ +forward +\d+ .*\n +fast +\d+ ", out, re.MULTILINE) and "self-play pos/CPU-s" in out, out
    fast = r"fast against forward: [\d.]+x the wall time; largest \|difference\| of logits and values 0 over "
    assert re.search(fast + r"[1-9][\d,]* batches of the same positions; the same moves", out), out
    if onnx_available():  # close, not bit for bit: the moves may part
        onnx = r"onnx against forward: .* largest \|difference\| of logits and values (\S+) over [1-9]"
        found = re.search(onnx, out)
        assert found and float(found.group(1)) < 1e-5, out
    else:
        assert "onnx: not measured, the onnx extra is not installed" in out


def test_a_config_evaluates_its_leaves_on_the_path_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.training import config as config_module
    from experiments.training.az_selfplay import new_network
    from experiments.training.config_file import config_from_dict
    from quarto_env.errors import ConfigError

    def config(path: str) -> Any:
        return config_from_dict({"algorithm": "alphazero", "alphazero": {"leaf_evaluation": path}})

    assert new_network(config("forward"), STANDARD).evaluation_path == "forward"
    assert new_network(config_from_dict({"algorithm": "alphazero"}), STANDARD).evaluation_path == "fast"
    monkeypatch.setattr(config_module, "onnx_available", lambda: False)
    with pytest.raises(ConfigError, match=r"alphazero.leaf_evaluation needs the onnx extra: pip install"):
        config("onnx")
