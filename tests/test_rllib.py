"""The RLlib backend: the flat adapter (``quarto_env.flat``: PettingZoo's api_test, spaces, ``decode``), the loser's
-1 through RLlib's ``PettingZooEnv``, the modules' masks, the opponent mapping, a tiny ``quarto train --config
configs/rllib.yaml`` run (folder, tags, ``final_eval.json``, checkpoints and ``rllib:RUN``), ``--resume``, and the
errors of bad configs and checkpoints. The adapter tests need no ray; the others share one local Ray."""

from __future__ import annotations

import io
import itertools
import json
import shutil
import zipfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pettingzoo.test import api_test

from quarto_env.core import STANDARD, Variant, legal_actions, step
from quarto_env.flat import ACTION_MASK, OBSERVATIONS, decode, flat_env, flatten
from quarto_env.notation import parse_position
from tests.test_sample_games import check_sample_games
from tests.test_train_alphazero import train

CONFIG = str(Path(__file__).resolve().parent.parent / "configs" / "rllib.yaml")
TINY_RLLIB = [
    "--config",
    CONFIG,
    "total_steps=600",
    "num_games=4",
    "n_steps=32",
    "batch_size=64",
    "n_epochs=1",
    "net_arch=[8]",
    "opponents={snapshots: 0.4, greedy: 0.3, random: 0.3}",
    "snapshot_every=200",
    "max_snapshots=2",
    "eval_every=300",
    "eval_games=4",
    "eval_opponents=[random, greedy]",
    "final_eval_games=8",
    "checkpoint_every=300",
    "sample_games=2",
]
VARIANTS = [{}, {"squares": True, "attributes": 3}, {"declaration": True, "false_declaration": "penalty"}]


# ---------------------------------------------------------------------------------------------------------
# The rllib agent on a checkpoint written without Ray: run folders and devices
# ---------------------------------------------------------------------------------------------------------
def test_the_rllib_agent_plays_a_run_folders_latest_checkpoint_on_the_device_asked_for(tmp_path: Path) -> None:
    import torch as th

    from agents.networks.checkpoints import CheckpointHeader
    from agents.networks.policy_value import device_of, network_for
    from agents.rllib import load_network, save_checkpoint
    from agents.specs import make_agent
    from quarto_env.core import INITIAL_STATE
    from quarto_env.observation import observation_kind

    config = {"policy": "slots", "net_arch": [8]}
    network = network_for(config, observation_kind("parity"), STANDARD)
    latest = tmp_path / "checkpoints" / "latest.zip"  # a run still training: no final.zip yet
    latest.parent.mkdir()
    save_checkpoint(latest, network.state_dict(), CheckpointHeader(STANDARD, "parity", 64), {"config": config})
    loaded, metadata = load_network(tmp_path, device="cpu")
    assert metadata["num_timesteps"] == 64 and device_of(loaded) == th.device("cpu")
    agent = make_agent(f"rllib:{tmp_path},device=auto", STANDARD, seed=0)
    assert agent.act(INITIAL_STATE) in legal_actions(STANDARD, INITIAL_STATE)


# ---------------------------------------------------------------------------------------------------------
# The adapter (no ray)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:quarto_v1 ignores reset options")  # api_test passes options={"options": 1}
@pytest.mark.filterwarnings("ignore::UserWarning:pettingzoo.test.api_test")  # its advice on dict spaces and masks
@pytest.mark.parametrize("flags", VARIANTS, ids=str)
def test_the_adapter_passes_pettingzoo_api_test(flags: dict[str, Any]) -> None:
    api_test(flat_env(**flags), num_cycles=40)


@pytest.mark.parametrize("kind", ["raw", "parity"])
def test_the_adapter_shows_the_same_planes_flat_and_float32(kind: str) -> None:
    import quarto_env

    flat, plain = flat_env(observation=kind, declaration=True), quarto_env.env(observation=kind, declaration=True)
    flat.reset(seed=3)
    plain.reset(seed=3)
    space = flat.observation_space("player_0")
    rng = np.random.default_rng(0)
    for agent in flat.agent_iter():
        observation, *_, terminated, truncated, _ = flat.last()
        expected = plain.observe(agent)
        assert observation in space and observation[OBSERVATIONS].dtype == np.float32
        assert space[OBSERVATIONS].shape == (expected["observation"].size,)
        np.testing.assert_array_equal(
            observation[OBSERVATIONS].reshape(expected["observation"].shape), expected["observation"]
        )
        np.testing.assert_array_equal(observation[ACTION_MASK], expected[ACTION_MASK])
        action = None if terminated or truncated else int(rng.choice(np.flatnonzero(observation[ACTION_MASK])))
        flat.step(action)
        plain.step(action)


def play_games(env: Any, games: int, choose: Any) -> None:
    """Play ``games`` games of ``env`` (seeded 0, 1, ...), each decision's action given by ``choose(observation)``."""
    for game in range(games):
        env.reset(seed=game)
        for _ in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            env.step(None if terminated or truncated else choose(observation))
        assert env.unwrapped.game_state.over  # ended by the rules, not by an illegal action


@pytest.mark.parametrize("flags", [*VARIANTS, {"declaration": True, "squares": True}], ids=str)
def test_decode_gives_back_the_position_of_every_observation(flags: dict[str, Any]) -> None:
    env, variant, rng = flat_env(**flags), Variant.make(**flags), np.random.default_rng(1)
    decoded = 0

    def check_and_choose(observation: dict[str, np.ndarray]) -> int:
        nonlocal decoded
        assert decode(variant, observation[OBSERVATIONS]) == env.unwrapped.game_state
        decoded += 1
        return int(rng.choice(np.flatnonzero(observation[ACTION_MASK])))

    play_games(env, 60, check_and_choose)
    assert decoded > 500  # a random declaration ends some games early


def test_decode_refuses_planes_without_a_position() -> None:
    with pytest.raises(ValueError, match="at least the 17 raw ones"):
        decode(STANDARD, np.zeros((10, 16)))
    broken = flatten(_observe("012............. 4"))[OBSERVATIONS].reshape(17, 16).copy()
    broken[11] = 0  # placing, but nothing in hand
    with pytest.raises(ValueError, match="0 piece"):
        decode(STANDARD, broken)


def _observe(position: str) -> dict[str, np.ndarray]:
    import quarto_env

    env = quarto_env.env(observation="raw")
    env.reset(options={"position": position})
    return env.observe(env.agent_selection)


# ---------------------------------------------------------------------------------------------------------
# Rewards and turns through RLlib's PettingZooEnv
# ---------------------------------------------------------------------------------------------------------
def pettingzoo_env(**flags: Any) -> Any:
    pytest.importorskip("ray")
    from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv

    return PettingZooEnv(flat_env(**flags))


@pytest.mark.ray
def test_a_give_that_hands_over_a_win_costs_the_giver_minus_one() -> None:
    env = pettingzoo_env()
    # Pieces 0, 1, 2 on the top row are all solid (bit 3 clear), as piece 4 is; nothing in hand: the mover gives.
    observations, _ = env.reset(options={"position": "012............. -"})
    (giver,) = observations
    winner = next(a for a in env.possible_agents if a != giver)
    observations, *_ = env.step({giver: 4})  # solid: completes the row on square 3
    assert list(observations) == [winner]
    _, rewards, terminateds, _, _ = env.step({winner: 3})
    assert rewards == {giver: -1, winner: 1} and terminateds["__all__"]


@pytest.mark.ray
def test_a_placement_that_leaves_a_win_to_claim_costs_the_placer_minus_one() -> None:
    env = pettingzoo_env(declaration=True)
    observations, _ = env.reset(options={"position": "012............. 4"})
    (placer,) = observations
    claimer = next(a for a in env.possible_agents if a != placer)
    observations, *_ = env.step({placer: 3})  # completes the row, but gives instead of declaring
    assert list(observations) == [placer]
    env.step({placer: 5})
    _, rewards, terminateds, _, _ = env.step({claimer: 16})  # "Quarto!"
    assert rewards == {placer: -1, claimer: 1} and terminateds["__all__"]


@pytest.mark.ray
def test_pettingzoo_env_passes_rllib_checks_and_plays_whole_games() -> None:
    env = pettingzoo_env(observation="parity")
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    check_multiagent_environments(env)
    rng = np.random.default_rng(0)
    for game in range(20):
        observations, _ = env.reset(seed=game)
        (agent,) = observations
        assert observations[agent][OBSERVATIONS].reshape(-1, 16)[16, 0] == 0  # the first action is a give
        movers, returns = [], Counter[str]()
        while True:
            (agent,) = observations
            movers.append(agent)
            action = int(rng.choice(np.flatnonzero(observations[agent][ACTION_MASK])))
            observations, rewards, terminateds, _, _ = env.step({agent: action})
            returns.update(rewards)
            if terminateds["__all__"]:
                break
        assert any(a == b for a, b in itertools.pairwise(movers))  # place, then give: twice in a row
        assert sorted(returns.values()) in ([-1, 1], [0, 0])


# ---------------------------------------------------------------------------------------------------------
# Modules and the opponent mapping
# ---------------------------------------------------------------------------------------------------------
def _modules() -> tuple[type, type]:
    pytest.importorskip("ray")
    from experiments.training.rllib_ppo import _module_classes

    return _module_classes()


@pytest.mark.ray
def test_the_network_module_only_picks_legal_actions_over_whole_games() -> None:
    import torch as th

    pytest.importorskip("ray")
    from ray.rllib.core.columns import Columns

    from experiments.training.config_file import load_config
    from experiments.training.rllib_ppo import network_model_config

    network_module, _ = _modules()
    env = flat_env(observation="parity", declaration=True)
    module = network_module(
        observation_space=env.observation_space("player_0"),
        action_space=env.action_space("player_0"),
        model_config=network_model_config(load_config(CONFIG, ["variant.declaration=true", "net_arch=[8]"])),
    )

    def sample_legal(observation: dict[str, np.ndarray]) -> int:
        batch = {Columns.OBS: {k: th.as_tensor(v[None]) for k, v in observation.items()}}
        logits = module.forward_exploration(batch)[Columns.ACTION_DIST_INPUTS]
        action = int(module.get_exploration_action_dist_cls().from_logits(logits).sample()[0])
        assert observation[ACTION_MASK][action] == 1
        return action

    play_games(env, 20, sample_legal)


@pytest.mark.ray
def test_a_baseline_module_plays_its_agent_from_the_planes() -> None:
    pytest.importorskip("ray")
    from ray.rllib.core.columns import Columns

    _, baseline_module = _modules()
    env = flat_env()
    module = baseline_module(
        observation_space=env.observation_space("player_0"),
        action_space=env.action_space("player_0"),
        model_config={"spec": "greedy", "variant": {}, "seed": 0},
    )
    env.reset(options={"position": "012............. 4"})
    observation = env.observe(env.agent_selection)
    batch = {Columns.OBS: {k: v[None] for k, v in observation.items()}}
    assert module.forward_inference(batch)[Columns.ACTIONS].tolist() == [3]  # greedy takes the win


def test_the_opponent_mapping_seats_main_once_and_follows_the_mix() -> None:
    from experiments.training.rllib_ppo import MAIN, OpponentMapping

    mapping = OpponentMapping(7, (("baseline_0", 3.0), ("baseline_1", 1.0)), 4.0, ("snapshot_0", "snapshot_100"))
    drawn: Counter[str] = Counter()
    for i in range(4000):
        episode = SimpleNamespace(id_=f"episode-{i}")
        seats = [mapping(agent, episode) for agent in ("player_0", "player_1")]
        assert seats.count(MAIN) == 1 and seats == [mapping(a, episode) for a in ("player_0", "player_1")]
        drawn[next(s for s in seats if s != MAIN)] += 1
    assert drawn["baseline_0"] == pytest.approx(1500, rel=0.1) and drawn["baseline_1"] == pytest.approx(500, rel=0.15)
    assert drawn["snapshot_0"] == pytest.approx(1000, rel=0.15) and drawn["snapshot_100"] == pytest.approx(
        1000, rel=0.15
    )


# ---------------------------------------------------------------------------------------------------------
# quarto train with backend rllib
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_ray() -> Any:
    """One local Ray for the module (a run started inside it leaves it up)."""
    ray = pytest.importorskip("ray")
    # address="local": a Ray of its own, never one that another test session or `ray start` left up
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def rllib_run(local_ray: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run_dir = tmp_path_factory.mktemp("rllib") / "run"
    status, printed = train([*TINY_RLLIB, "--run-dir", str(run_dir)])
    assert status == 0
    return run_dir, printed


def scalars(run_dir: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return {tag: [e.step for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_writes_the_sb3_backends_folder_tags_and_final_table(rllib_run: tuple[Path, str]) -> None:
    run_dir, printed = rllib_run
    assert "backend: rllib" in (run_dir / "config.yaml").read_text()
    assert "configs/rllib.yaml" in (run_dir / "command.txt").read_text()
    checkpoints = {p.name for p in (run_dir / "checkpoints").iterdir()}
    assert {"latest.zip", "final.zip"} <= checkpoints and any(name.startswith("step_") for name in checkpoints)
    summary = json.loads((run_dir / "final_eval.json").read_text())
    assert set(summary) == {"checkpoint", "num_timesteps", "results"}  # write_final_eval's schema
    assert set(summary["results"][0]) == {"opponent", "policy", "games", "score", "wins_draws_losses_by_seat"}
    assert summary["num_timesteps"] >= 600 and [r["games"] for r in summary["results"]] == [8] * 4
    tags = scalars(run_dir)
    for tag in ("eval/random/score", "eval/greedy/first/win", "eval_sampled/random/second/loss", "charts/SPS"):
        assert tag in tags
    losses = {"losses/policy_loss", "losses/value_loss", "losses/entropy_loss", "losses/loss"}  # sb3's names
    assert losses | {"charts/pool_size"} <= set(tags)
    assert len(tags["eval/random/score"]) >= 2  # one periodic evaluation and the final one
    assert tags["eval/score"][0] == 0 and 300 <= tags["eval/score"][1] < 600  # untrained first, then eval_every
    assert f"agent spec: rllib:{run_dir}" in printed


@pytest.mark.ray
@pytest.mark.slow
def test_an_rllib_run_shows_its_sample_games_at_every_evaluation(rllib_run: tuple[Path, str]) -> None:
    check_sample_games(rllib_run[0], 2, "greedy")  # the last of eval_opponents


@pytest.mark.ray
@pytest.mark.slow
def test_the_rllib_spec_plays_legal_games_and_checkpoints_are_data(rllib_run: tuple[Path, str]) -> None:
    import quarto_env
    from agents.networks.checkpoints import read_metadata
    from agents.specs import make_agent

    run_dir, _ = rllib_run
    metadata = read_metadata(run_dir / "checkpoints" / "final.zip")
    assert metadata["algorithm"] == "rllib-ppo" and metadata["backend"] == "rllib"
    assert metadata["env_kwargs"] == {**STANDARD.to_dict(), "observation": "parity"}
    with zipfile.ZipFile(run_dir / "checkpoints" / "final.zip") as archive:
        assert not [n for n in archive.namelist() if n.endswith((".pkl", ".pickle"))]
    for spec in (f"rllib:{run_dir}", f"rllib:{run_dir}/checkpoints/latest.zip,deterministic=false"):
        agent = make_agent(spec, STANDARD, seed=1)
        env = quarto_env.env(**metadata["env_kwargs"])
        for game in range(5):
            env.reset(seed=game)
            for _ in env.agent_iter():
                _, _, terminated, truncated, _ = env.last()
                action = None if terminated or truncated else agent.act(env.unwrapped.game_state)
                assert action is None or action in legal_actions(STANDARD, env.unwrapped.game_state)
                env.step(action)


@pytest.mark.ray
@pytest.mark.slow
def test_bad_rllib_checkpoints_get_one_line_errors(rllib_run: tuple[Path, str], tmp_path: Path) -> None:
    from agents.networks.checkpoints import CheckpointError
    from agents.specs import make_agent

    run_dir, _ = rllib_run
    final = run_dir / "checkpoints" / "final.zip"
    with pytest.raises(CheckpointError, match="play it with rllib:PATH"):
        make_agent(f"ppo:{final}")
    sb3_like = tmp_path / "sb3.zip"  # quarto.json without an algorithm: a MaskablePPO checkpoint
    _rewrite(final, sb3_like, "quarto.json", lambda data: json.dumps({**json.loads(data), "algorithm": "ppo"}).encode())
    with pytest.raises(CheckpointError, match="play it with ppo:PATH"):
        make_agent(f"rllib:{sb3_like}")
    with pytest.raises(CheckpointError, match="does not exist"):
        make_agent(f"rllib:{tmp_path}/missing.zip")
    with pytest.raises(CheckpointError, match="needs a checkpoint"):
        make_agent("rllib:")
    with pytest.raises(CheckpointError, match="trained for rule variant"):
        make_agent(f"rllib:{run_dir}", Variant(squares=True))
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(final.read_bytes()[:5000])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        make_agent(f"rllib:{truncated}")
    # A network entry that would run code when unpickled is refused unread.
    crafted = tmp_path / "crafted.zip"
    _rewrite(final, crafted, "network.pth", lambda _: _pickled_object())
    with pytest.raises(CheckpointError, match="not plain weights"):
        make_agent(f"rllib:{crafted}")


def _rewrite(source: Path, target: Path, entry: str, change: Any) -> None:
    """Copy the zip ``source`` to ``target`` with ``entry`` replaced by ``change(its bytes)``, sealed anew (a
    crafted checkpoint as its author would make it: whole)."""
    from agents.networks.checkpoints import checkpoint_bytes

    with zipfile.ZipFile(source) as original:
        entries = {name: original.read(name) for name in original.namelist()}
    target.write_bytes(checkpoint_bytes({**entries, entry: change(entries[entry])}))


def _pickled_object() -> bytes:
    import torch as th

    buffer = io.BytesIO()
    th.save({"weights": SimpleNamespace(x=1)}, buffer)  # an object, not tensors: refused by weights_only
    return buffer.getvalue()


@pytest.mark.ray
@pytest.mark.slow
def test_resume_continues_with_the_weights_snapshots_and_steps_also_in_an_env_runner(
    rllib_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agents.networks.checkpoints import read_metadata, read_weights
    from agents.rllib import load_network

    run_dir = tmp_path / "run"
    shutil.copytree(rllib_run[0], run_dir)
    latest = run_dir / "checkpoints" / "latest.zip"
    before, pool = read_metadata(latest)["num_timesteps"], read_weights(latest, "pool.pt")
    status, _ = train(["--resume", str(run_dir), "backend=sb3"])
    assert status == 2 and "cannot change on --resume" in capsys.readouterr().err
    # The resumed part samples in an env runner process (num_env_runners is not fixed on --resume).
    status, printed = train(["--resume", str(run_dir), "total_steps=900", "final_eval_games=4", "num_env_runners=1"])
    assert status == 0
    assert f"resuming {run_dir} at step {before:,} with {len(pool['steps'])} snapshots" in printed
    after = read_metadata(run_dir / "checkpoints" / "final.zip")
    assert after["num_timesteps"] >= 900 and len((run_dir / "command.txt").read_text().splitlines()) == 2
    assert read_weights(run_dir / "checkpoints" / "final.zip", "pool.pt")["steps"][0] >= pool["steps"][0]
    load_network(run_dir)  # the final checkpoint plays


@pytest.mark.ray
@pytest.mark.slow
def test_resume_restores_mains_optimizer_state(rllib_run: tuple[Path, str], tmp_path: Path) -> None:
    from agents.networks.checkpoints import read_weights
    from agents.rllib import OPTIMIZER_ENTRY
    from experiments.training.config_file import load_config
    from experiments.training.rllib_ppo import Trainer, start

    run_dir = tmp_path / "run"
    shutil.copytree(rllib_run[0], run_dir)
    latest = run_dir / "checkpoints" / "latest.zip"
    saved = read_weights(latest, OPTIMIZER_ENTRY)  # read as data (weights_only)
    (buffers,) = saved.values()  # one optimizer, main's
    assert {"step", "exp_avg", "exp_avg_sq"} <= set(buffers[0]) and float(buffers[0]["step"]) > 0
    assert any(float(b["exp_avg"].abs().sum()) > 0 for b in buffers.values())
    # total_steps raised: a run finished at its total_steps is left alone by a resume (RunFinished)
    config = load_config(run_dir / "config.yaml", ["learning_rate=1e-3", "total_steps=1200"])
    trainer = Trainer(config, run_dir, start(config, run_dir, resume=True))
    try:
        restored = trainer.optimizer_state()
        groups = trainer._optimizers()[next(iter(saved))]["state"]["param_groups"]
    finally:
        trainer.algorithm.stop()
    assert_same_optimizer_state(restored, saved)
    assert {group["lr"] for group in groups} == {1e-3}  # the resumed config's learning rate, not the checkpoint's
    # A checkpoint written before the optimizer state was saved resumes with Adam from zero.
    from agents.networks.checkpoints import checkpoint_bytes

    with zipfile.ZipFile(latest) as source:
        entries = {name: source.read(name) for name in source.namelist() if name != OPTIMIZER_ENTRY}
    latest.write_bytes(checkpoint_bytes(entries))
    assert start(config, run_dir, resume=True).optimizer is None


def assert_same_optimizer_state(restored: dict[str, Any], saved: dict[str, Any]) -> None:
    """Every optimizer, parameter and buffer (Adam's step, exp_avg, exp_avg_sq) of ``saved`` equal in ``restored``."""
    import torch as th

    assert restored.keys() == saved.keys()
    for name, by_parameter in saved.items():
        assert restored[name].keys() == by_parameter.keys()
        for index, tensors in by_parameter.items():
            for key, tensor in tensors.items():
                assert th.equal(restored[name][index][key].to(tensor.dtype), tensor), (name, index, key)


@pytest.mark.ray
@pytest.mark.slow
def test_a_remote_learner_trains_and_gets_its_optimizer_state_back(local_ray: Any, tmp_path: Path) -> None:
    from agents.networks.checkpoints import read_weights
    from agents.rllib import OPTIMIZER_ENTRY
    from experiments.training.config_file import load_config
    from experiments.training.rllib_ppo import Trainer, start

    run_dir = tmp_path / "run"
    status, _ = train([*TINY_RLLIB, "num_learners=1", "--run-dir", str(run_dir)])
    assert status == 0
    config = load_config(run_dir / "config.yaml", ["total_steps=1200"])  # more steps: a finished run stays as it is
    trainer = Trainer(config, run_dir, start(config, run_dir, resume=True))
    try:
        assert not trainer.algorithm.learner_group.is_local  # a Learner actor, not this process
        restored = trainer.optimizer_state()
    finally:
        trainer.algorithm.stop()
    assert_same_optimizer_state(restored, read_weights(run_dir / "checkpoints" / "latest.zip", OPTIMIZER_ENTRY))


@pytest.mark.ray
@pytest.mark.slow
def test_more_gpus_than_the_cluster_has_are_refused_in_one_line(
    local_ray: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _ = train([*TINY_RLLIB, "num_learners=2", "gpus_per_learner=1", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert "gpus_per_learner must fit the Ray cluster: 2 learner(s) x 1 GPU(s) = 2, and the cluster has 0" in err
    assert not (tmp_path / "run" / "config.yaml").exists()  # refused before anything is written


@pytest.mark.ray
def test_the_resource_bundles_are_rllibs_own_layout() -> None:
    pytest.importorskip("ray")
    from experiments.training.config_file import load_config
    from experiments.training.rllib_ppo import resource_bundles

    assert resource_bundles(load_config(CONFIG)) == [{"CPU": 1.0}]
    runners = load_config(CONFIG, ["num_env_runners=2", "cpus_per_env_runner=0.5", "num_learners=1"])
    assert resource_bundles(runners) == [{"CPU": 1.0}, {"CPU": 0.5}, {"CPU": 0.5}, {"CPU": 1.0}]
    gpus = load_config(CONFIG, ["num_learners=2", "gpus_per_learner=0.5"])
    assert resource_bundles(gpus) == [{"CPU": 1.0}, {"GPU": 0.5}, {"GPU": 0.5}]
    local_gpu = load_config(CONFIG, ["gpus_per_learner=1"])  # the learner in the training process: its bundle
    assert resource_bundles(local_gpu) == [{"CPU": 1.0, "GPU": 1.0}]


def test_the_backend_field_is_checked() -> None:
    from experiments.training.config import ConfigError
    from experiments.training.config_file import load_config

    with pytest.raises(ConfigError, match=r"backend must be one of \('sb3', 'rllib'\)"):
        load_config(CONFIG, ["backend=ray"])
    with pytest.raises(ConfigError, match=r"backend must be one of \('torch', 'jax'\) with algorithm alphazero"):
        load_config(CONFIG, ["algorithm=alphazero"])
    with pytest.raises(ConfigError, match="num_env_runners must be an integer >= 0"):
        load_config(CONFIG, ["num_env_runners=-1"])
    with pytest.raises(ConfigError, match=r"cpus_per_env_runner must be a finite number > 0 and <= 1024, got 0"):
        load_config(CONFIG, ["cpus_per_env_runner=0"])
    with pytest.raises(ConfigError, match=r"num_learners must be int, got 1.5 \(float\)"):
        load_config(CONFIG, ["num_learners=1.5"])
    with pytest.raises(ConfigError, match="gpus_per_learner must be a finite number >= 0"):
        load_config(CONFIG, ["gpus_per_learner=-1"])
    assert load_config(None).backend == "sb3" and load_config(CONFIG).backend == "rllib"


def test_a_scripted_position_is_a_real_game_state() -> None:
    # The positions of the reward tests: pieces 0, 1, 2 and 4 are solid, so piece 4 completes the row on square 3.
    state = parse_position("012............. 4")
    assert step(STANDARD, state, 3).winner == state.to_move
