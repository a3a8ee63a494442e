"""``backend: jax`` for ``algorithm: alphazero`` (experiments.training.alphazero_jax, agents.networks.jax_network): the
sign of a value in the search's recurrent function and in the self-play targets, pinned on positions the solver
values; a tiny run end to end (its folder, its checkpoints), its resume, ``az:RUN`` playing it, and the refusals:
a checkpoint of the other backend, the options that mean nothing on JAX, the missing extra. Skipped without the
jax extra. The run's jitted iteration compiles once for the whole module (about 20 seconds on a CPU)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("mctx")
pytest.importorskip("equinox")
pytest.importorskip("optax")
pytest.importorskip("quarto_env.jax")

import jax
import jax.numpy as jnp

from agents.alphazero import load_network as load_torch_network
from agents.alphazero import save_checkpoint as save_torch_checkpoint
from agents.networks import jax_network
from agents.networks.checkpoints import CheckpointError, CheckpointHeader, entry_bytes
from agents.networks.policy_value import PolicyValueNetwork
from agents.solver.minimax import Solver
from agents.specs import make_agent
from experiments.training import alphazero_jax, alphazero_jax_timing
from experiments.training.config import ConfigError, TrainConfig
from experiments.training.config_file import load_config
from experiments.training.train import main as train_main
from experiments.training.train import train
from quarto_env import extras
from quarto_env.core import State, Variant, legal_actions, position_array, state_of_row, step
from quarto_env.extras import MissingExtra
from quarto_env.observation import observation_kind

pytestmark = [pytest.mark.jax, pytest.mark.xdist_group("alphazero_jax")]
"""One worker runs them all: the tiny run, and the jitted iteration it compiles, are made once."""

STANDARD = Variant.make()
TINY = [
    "algorithm=alphazero",
    "backend=jax",
    "policy=slots",
    "net_arch=[8]",
    "observation=raw",
    "num_games=4",
    "total_steps=256",
    "eval_every=128",
    "checkpoint_every=128",
    "eval_games=2",
    "final_eval_games=2",
    "eval_opponents=[random]",
    "grade_positions=4",
    "alphazero.rollout_steps=32",
    "alphazero.sims=4",
    "alphazero.eval_sims=4",
    "alphazero.augment=false",
    "alphazero.batch_size=16",
    "alphazero.buffer_size=512",
]
"""A run of 2 iterations of 4 games of 32 searched actions, and the evaluations at their smallest."""


def tiny_config(*overrides: str) -> TrainConfig:
    return load_config(None, [*TINY, *overrides])


def jax_env(variant: Variant = STANDARD) -> alphazero_jax.QuartoEnv:
    return alphazero_jax.jax_env("raw", **alphazero_jax._rule_flags(variant))


# ---------------------------------------------------------------------------------------------------------
# The sign of a value
# ---------------------------------------------------------------------------------------------------------
def endgame(seed: int, empty: int) -> State:
    """A position reached by random play with ``empty`` empty squares, placing, and not over."""
    rng = np.random.default_rng(seed)
    while True:
        state = State()
        while not state.over and state.num_empty > empty:
            state = step(STANDARD, state, int(rng.choice(legal_actions(STANDARD, state))))
        if not state.over:
            state = step(STANDARD, state, int(rng.choice(legal_actions(STANDARD, state))))  # the give before
            if not state.over and state.placing and state.num_empty == empty:
                return state


def positions_in_both_phases(count: int, empty: int) -> list[State]:
    """Endgames with ``empty`` empty squares and a real choice: placing ones, and the giving positions after one
    of their non-winning placements (the same player then gives)."""
    positions = []
    for seed in range(count):
        placing = endgame(seed, empty)
        positions.append(placing)
        after = [step(STANDARD, placing, a) for a in legal_actions(STANDARD, placing)]
        positions += [state for state in after if not state.over][:1]
    return positions


@pytest.mark.slow
def test_the_recurrent_function_backs_up_the_solvers_value_for_the_player_who_acted() -> None:
    """For every legal action of positions in both phases, the recurrent function's ``reward + discount *
    exact value of the child`` is the solver's value of that action for the player who took it: the discount is
    +1 after a placement that does not end the game (the same player gives next), -1 after a give, 0 at the end."""
    env = jax_env()
    network = jax_network.new_network(observation_kind("raw"), STANDARD, 8, 0)
    recurrent = jax.jit(alphazero_jax.recurrent_fn(env))
    solver = Solver(STANDARD, book=None)
    discounts = set()
    for first_seat in (0, 1):
        for position in positions_in_both_phases(6, 7):
            actions = legal_actions(STANDARD, position)
            padded = actions + actions[:1] * (16 - len(actions))  # one batch shape: one compile
            parents = env.from_positions(position_array([position] * 16), first_seat)
            output, children = recurrent(network, jax.random.key(0), jnp.asarray(padded, jnp.int32), parents)
            exact = solver.solve(position, all_moves=True).action_values
            assert exact is not None
            child_rows, _ = env.to_positions(children)
            for i, action in enumerate(actions):
                child = state_of_row(child_rows[i])
                assert child == step(STANDARD, position, action)
                child_value = 0 if child.over else solver.value(child)
                backed_up = float(output.reward[i]) + float(output.discount[i]) * child_value
                assert backed_up == exact[action], (position, action)
                discounts.add(float(output.discount[i]))
                if not child.over:
                    assert float(output.discount[i]) == (1.0 if position.placing else -1.0)
    assert discounts == {-1.0, 0.0, 1.0}


def perfect_game(env: alphazero_jax.QuartoEnv, position: State, first_seat: int, seed: int) -> dict[str, list]:
    """A game from ``position`` in the JAX env with both players keeping the solver's value: per position, the
    seat to move, what the action gave each seat, whether it ended the game, and the solver's value there."""
    solver, rng = Solver(STANDARD, book=None), np.random.default_rng(seed)
    state = env.from_positions(position_array([position])[0], first_seat)
    jax_step = jax.jit(env.step)
    game: dict[str, list] = {"player": [], "rewards": [], "ended": [], "value": []}
    while not position.over:
        value, action = solver.random_best_action(position, rng)
        game["player"].append(int(state.current_player))
        game["value"].append(value)
        state = jax_step(state, jnp.int32(action))
        position = step(STANDARD, position, action)
        game["rewards"].append(np.asarray(state.rewards))
        game["ended"].append(bool(state.terminated))
    assert game["ended"][-1]
    return game


@pytest.mark.slow
def test_the_value_targets_of_a_perfect_game_are_the_solvers_values() -> None:
    """Self-play's value target of every position of a game played perfectly, from the final rewards, is the
    solver's value of that position for the player to move there, in both phases and from both first seats
    (several games side by side, their ends at different rows, one lane unfinished and so unknown)."""
    env, solver = jax_env(), Solver(STANDARD, book=None)
    decisive = [position for position in positions_in_both_phases(12, 8) if solver.value(position) != 0]
    games = [perfect_game(env, position, seed % 2, seed) for seed, position in enumerate(decisive[:6])]
    length = max(len(g["player"]) for g in games) + 1
    players = np.zeros((length, len(games) + 1), np.int32)
    rewards = np.zeros((length, len(games) + 1, 2), np.float32)
    ended = np.zeros((length, len(games) + 1), bool)
    for lane, game in enumerate(games):
        n = len(game["player"])
        players[:n, lane], rewards[:n, lane], ended[:n, lane] = game["player"], game["rewards"], game["ended"]
    targets, known = alphazero_jax.value_targets(jnp.asarray(players), jnp.asarray(rewards), jnp.asarray(ended))
    values = set()
    for lane, game in enumerate(games):
        n = len(game["player"])
        assert np.all(np.asarray(known)[:n, lane])
        assert np.asarray(targets)[:n, lane].tolist() == [float(v) for v in game["value"]]
        values |= set(game["value"])
    assert not np.asarray(known)[:, -1].any()  # the lane whose game never ended
    assert {-1, 1} <= values and len(games) == 6


def test_the_replay_buffer_keeps_the_newest_rows_through_a_checkpoint() -> None:
    buffer = alphazero_jax.Replay.empty(8, (3, 16), 16)
    zero = jnp.int32(0)
    rows = alphazero_jax.Replay(
        jnp.ones((6, 3, 16), bool), jnp.ones((6, 16), bool), jnp.zeros((6, 16)), jnp.arange(6.0) / 8,
        -jnp.arange(6.0) / 8, zero, zero,
    )  # fmt: skip
    buffer = buffer.add(rows, jnp.asarray([1, 1, 0, 1, 1, 1], bool)).add(rows, jnp.ones(6, bool))
    assert int(buffer.size) == 8  # 11 rows: the 3 oldest went
    smaller = alphazero_jax.Replay.empty(5, (3, 16), 16).loaded(buffer.to_bytes())
    assert (np.asarray(smaller.outcome) * 8).tolist() == [1, 2, 3, 4, 5] and int(smaller.size) == 5
    larger = alphazero_jax.Replay.empty(20, (3, 16), 16).loaded(buffer.to_bytes())
    assert (np.asarray(larger.root_value)[:8] * 8).tolist() == [-4, -5, 0, -1, -2, -3, -4, -5]
    assert int(larger.next) == 8
    with pytest.raises(ValueError, match="the buffer's planes has shape"):
        alphazero_jax.Replay.empty(8, (4, 16), 16).loaded(buffer.to_bytes())
    arrays = dict(np.load(io.BytesIO(buffer.to_bytes()), allow_pickle=False))
    arrays["outcome"][2] = np.nan  # a resealed checkpoint could carry it
    damaged = io.BytesIO()
    np.savez(damaged, **arrays)
    with pytest.raises(ValueError, match=r"outcome targets beyond \[-1, 1\] or not finite"):
        alphazero_jax.Replay.empty(8, (3, 16), 16).loaded(damaged.getvalue())


# ---------------------------------------------------------------------------------------------------------
# A run end to end, its resume, az:RUN
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("jax") / "run"
    train(tiny_config(), run_dir)
    return run_dir


@pytest.mark.slow
def test_a_tiny_run_writes_the_run_folder_and_its_checkpoints(tiny_run: Path) -> None:
    names = sorted(path.name for path in (tiny_run / "checkpoints").iterdir())
    assert names == [
        "best.zip",
        "final.zip",
        "latest.zip",
        "step_000000128.zip",
        "step_000000256.zip",
        "untrained.zip",
    ]
    assert {"config.yaml", "command.txt", "final_eval.json", "tb"} <= {p.name for p in tiny_run.iterdir()}
    final = tiny_run / "checkpoints" / "final.zip"
    network, info = jax_network.load_network(final, STANDARD)
    assert info["backend"] == "jax" and info["algorithm"] == "alphazero" and info["num_timesteps"] == 256
    arrays = jax_network.read_arrays(entry_bytes(final, jax_network.NETWORK_ENTRY))  # no pickle
    assert set(arrays) == set(jax_network.weight_arrays(network)) and "embed_square.weight" in arrays
    assert json.loads((tiny_run / "final_eval.json").read_text())["num_timesteps"] == 256
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = EventAccumulator(str(tiny_run / "tb")).Reload().Tags()["scalars"]
    for tag in ("charts/positions_per_s", "losses/policy_loss", "losses/value_loss", "eval/grade/value_lost"):
        assert tag in scalars


@pytest.mark.slow
def test_a_resumed_run_goes_on_from_latest_with_its_optimizer_and_buffer(tiny_run: Path) -> None:
    config = load_config(tiny_run / "config.yaml", ["total_steps=384"])
    trainer = alphazero_jax.start(config, tiny_run, resume=True)
    assert trainer.steps == 256 and int(trainer.buffer.size) > 0
    assert int(jax.tree_util.tree_leaves(trainer.opt_state)[0]) > 0  # Adam's step count, restored
    saved, _ = jax_network.load_network(tiny_run / "checkpoints" / "latest.zip", STANDARD)
    for name, array in jax_network.weight_arrays(saved).items():
        assert np.array_equal(array, jax_network.weight_arrays(trainer.network)[name])
    assert train_main(["--resume", str(tiny_run), "total_steps=384", "--no-progress"]) == 0
    _, info = jax_network.load_network(tiny_run / "checkpoints" / "final.zip", STANDARD)
    assert info["num_timesteps"] == 384


@pytest.mark.slow
def test_az_plays_a_jax_run_on_the_cpu(tiny_run: Path) -> None:
    for spec in (f"az:{tiny_run},sims=8", f"az:{tiny_run},sims=0", f"az:{tiny_run},sims=8,root=gumbel,k=4"):
        agent = make_agent(spec, STANDARD, seed=0)
        state = State()
        while not state.over:
            action = agent.act(state)
            assert action in legal_actions(STANDARD, state)
            state = step(STANDARD, state, action)


@pytest.mark.slow
def test_quarto_evaluate_plays_a_jax_run_as_the_az_agent_does(
    tiny_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/training.md: quarto evaluate RUN_DIR plays any alphazero run; a JAX one was refused as 'not torch'."""
    from experiments.training import evaluate

    assert evaluate.main([str(tiny_run), "--games", "2", "--opponents", "random", "--sims", "4", "0"]) == 0
    output = capsys.readouterr().out
    assert "search 4" in output and "policy" in output


@pytest.mark.slow
def test_a_checkpoint_of_the_other_backend_is_refused_in_one_line(tiny_run: Path, tmp_path: Path) -> None:
    jax_checkpoint = tiny_run / "checkpoints" / "final.zip"
    with pytest.raises(CheckpointError, match=r"holds a jax network, not a torch one") as refused:
        load_torch_network(jax_checkpoint, STANDARD)
    assert "\n" not in str(refused.value)
    torch_checkpoint = tmp_path / "torch.zip"
    network = PolicyValueNetwork(observation_kind("raw"), list(STANDARD.groups), 8)
    header = CheckpointHeader(STANDARD, "raw", 0)
    save_torch_checkpoint(torch_checkpoint, network, header, {"config": tiny_config().to_dict()})
    with pytest.raises(CheckpointError, match=r"holds a torch network, not a jax one") as refused:
        jax_network.load_network(torch_checkpoint, STANDARD)
    assert "\n" not in str(refused.value)
    assert make_agent(f"az:{torch_checkpoint},sims=0", STANDARD, seed=0).act(State()) in range(16)  # still plays


# ---------------------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("alphazero.network_design=mlp", "alphazero.network_design must be 'slots' with backend jax"),
        ("alphazero.full_search_share=0.5", "alphazero.full_search_share must be 1.0 with backend jax"),
        ("alphazero.exact_outcome_empties=6", "alphazero.exact_outcome_empties must be 0 with backend jax"),
        ("alphazero.workers=2", "alphazero.workers must be 0 with backend jax"),
        ("alphazero.augment=true", "alphazero.augment must be False with backend jax"),
        ("alphazero.buffer_size=64", "alphazero.buffer_size must be >= num_games * alphazero.rollout_steps = 128"),
        ("backend=tensorflow", "backend must be one of ('torch', 'jax') with algorithm alphazero"),
    ],
)
def test_options_without_a_jax_meaning_are_refused_in_one_line(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        tiny_config(override)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_backend_jax_without_the_extra_names_it_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(extras.EXTRA_MODULES, "jax", ("jax", "surely_not_installed_here"))
    with pytest.raises(MissingExtra, match=r"^backend jax needs the 'jax' extra \(surely_not_installed_here") as e:
        train(tiny_config(), tmp_path / "run")
    assert "\n" not in str(e.value) and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_az_names_the_extra_that_a_jax_checkpoint_needs(tiny_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRA_MODULES, "jax", ("jax", "surely_not_installed_here"))
    with pytest.raises(MissingExtra, match=r"needs the 'jax' extra \(surely_not_installed_here") as refused:
        make_agent(f"az:{tiny_run}", STANDARD, seed=0)
    assert "\n" not in str(refused.value)


def test_device_cuda_without_a_gpu_is_refused_before_the_run_folder(tmp_path: Path) -> None:
    if any(device.platform == "gpu" for device in jax.devices()):
        pytest.skip("JAX sees a GPU here")
    with pytest.raises(ConfigError, match=r"^config field device: 'cuda' needs a GPU, but JAX sees none") as refused:
        train(tiny_config("device=cuda"), tmp_path / "run")
    assert "\n" not in str(refused.value) and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_device_check_times_the_iteration() -> None:
    assert alphazero_jax_timing.selfplay_positions_per_second(tiny_config(), 0.1) > 0
