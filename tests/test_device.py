"""The ``device`` of training and of every agent that runs a network: one resolver
(:func:`agents.networks.policy_value.resolve_device`), ``cpu`` by default, ``auto`` meaning cuda only where torch sees a
GPU, and ``cuda`` refused in one line on a machine without one -- by the config, by an agent spec, by ``quarto train``,
``quarto evaluate`` and ``quarto tournament`` before they write anything. Checkpoints are device-free: saved from
CPU copies, loaded onto the device asked for.

This machine has no GPU: what runs on one is not tested here (the tests that need one are skipped elsewhere)."""

from __future__ import annotations

import collections
import io
from pathlib import Path

import pytest
import torch as th

from agents.networks.checkpoints import on_cpu, saved_bytes
from agents.networks.policy_value import DEFAULT_DEVICE, PolicyValueNetwork, device_of, resolve_device
from agents.ppo import load_policy
from agents.specs import AGENT_KINDS, SpecError, make_agent, parse_spec
from experiments.training import evaluate, train
from experiments.training.config import ConfigError, TrainConfig
from experiments.training.config_file import load_config
from quarto_env.core import INITIAL_STATE, STANDARD
from quarto_env.observation import observation_kind

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NO_GPU = pytest.mark.skipif(th.cuda.is_available(), reason="checks the refusal of cuda on a machine without a GPU")
NETWORK_KINDS = ("ppo", "az", "rllib")


def test_cpu_is_the_default_and_auto_takes_a_gpu_only_where_torch_sees_one() -> None:
    assert DEFAULT_DEVICE == "cpu" and TrainConfig().device == "cpu"
    assert resolve_device("cpu") == th.device("cpu")
    assert resolve_device("auto").type == ("cuda" if th.cuda.is_available() else "cpu")


@NO_GPU
def test_cuda_without_a_gpu_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="device 'cuda' needs a GPU, but torch sees none") as refusal:
        resolve_device("cuda")
    assert "\n" not in str(refusal.value) and "allowed here: auto, cpu" in str(refusal.value)


def test_an_unknown_device_is_refused_naming_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown device 'tpu'; allowed: auto, cpu, cuda"):
        resolve_device("tpu")


# ---------------------------------------------------------------------------------------------------------
# Agent specs
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", NETWORK_KINDS)
def test_every_network_kind_takes_a_device_option(kind: str) -> None:
    assert AGENT_KINDS[kind].options["device"].default == DEFAULT_DEVICE
    for device in ("auto", "cpu"):
        assert parse_spec(f"{kind}:runs/x,device={device}")[1]["device"] == device
    with pytest.raises(SpecError, match=r"bad value 'gpu' for device .*allowed: auto, cpu, cuda"):
        parse_spec(f"{kind}:runs/x,device=gpu")


@NO_GPU
@pytest.mark.parametrize("kind", NETWORK_KINDS)
def test_a_spec_asking_for_cuda_is_refused_before_any_checkpoint_is_read(kind: str) -> None:
    with pytest.raises(SpecError, match=r"bad value 'cuda' for device .*torch sees none") as refusal:
        make_agent(f"{kind}:/no/such/checkpoint.zip,device=cuda")
    assert "\n" not in str(refusal.value)


def test_the_baselines_take_no_device() -> None:
    assert not [name for name, kind in AGENT_KINDS.items() if "device" in kind.options and name not in NETWORK_KINDS]


# ---------------------------------------------------------------------------------------------------------
# The config and the commands
# ---------------------------------------------------------------------------------------------------------
def test_the_config_field_is_typed_and_validated() -> None:
    assert load_config(None, ["device=auto"]).device == "auto"
    with pytest.raises(ConfigError, match="config field device must be str"):
        load_config(None, ["device=3"])
    with pytest.raises(ConfigError, match=r"config field device: unknown device 'tpu'; allowed: auto, cpu, cuda"):
        load_config(None, ["device=tpu"])


def test_the_rllib_backend_refuses_a_device_other_than_cpu_rather_than_ignoring_it() -> None:
    assert load_config(None, ["backend=rllib"]).device == "cpu"
    with pytest.raises(ConfigError, match=r"config field device must be cpu with backend rllib .*got 'auto'"):
        load_config(None, ["backend=rllib", "device=auto"])


@NO_GPU
def test_the_config_refuses_cuda_without_a_gpu() -> None:
    with pytest.raises(ConfigError, match="config field device: device 'cuda' needs a GPU, but torch sees none"):
        load_config(None, ["device=cuda"])


def test_quarto_train_takes_device_as_a_flag_that_wins_over_the_override() -> None:
    assert train.parse_args(["seed=1", "--device", "auto"]).overrides == ["seed=1", "device=auto"]
    assert train.parse_args(["device=cpu", "--device", "auto"]).overrides[-1] == "device=auto"
    assert train.parse_args(["seed=1"]).overrides == ["seed=1"]
    assert load_config(None, train.parse_args(["device=cpu", "--device", "auto"]).overrides).device == "auto"


def test_quarto_train_refuses_an_unknown_device_flag_naming_the_allowed_ones(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as refusal:
        train.parse_args(["--device", "tpu"])
    assert refusal.value.code == 2 and "invalid choice: 'tpu'" in (err := capsys.readouterr().err)
    assert all(device in err for device in ("auto", "cpu", "cuda"))


@NO_GPU
@pytest.mark.parametrize("algorithm", ["ppo", "alphazero"])
def test_quarto_train_refuses_cuda_in_one_line_and_writes_nothing(
    algorithm: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = tmp_path / "run"
    status = train.main([f"algorithm={algorithm}", "--device", "cuda", "--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert status == 2 and "config field device: device 'cuda' needs a GPU" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not run_dir.exists()


@NO_GPU
def test_quarto_evaluate_refuses_cuda_in_one_line(tiny_run: tuple[Path, str], capsys: pytest.CaptureFixture) -> None:
    status = evaluate.main([str(tiny_run[0]), "--games", "2", "--opponents", "random", "--device", "cuda"])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert captured.err.startswith("quarto evaluate: device 'cuda' needs a GPU") and captured.err.count("\n") == 1


@NO_GPU
def test_quarto_tournament_refuses_a_cuda_agent_before_writing(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from experiments.arena import tournament

    out = tmp_path / "tournament"
    with pytest.raises(SystemExit) as refusal:
        tournament.main([f"ppo:{tiny_run[0]},device=cuda", "random", "--games", "2", "--out", str(out)])
    err = capsys.readouterr().err
    assert refusal.value.code == 2 and "bad value 'cuda' for device" in err and "Traceback" not in err
    assert not out.exists()


# ---------------------------------------------------------------------------------------------------------
# Checkpoints are device-free
# ---------------------------------------------------------------------------------------------------------
def test_a_ppo_checkpoint_loads_onto_the_device_asked_for(tiny_run: tuple[Path, str]) -> None:
    final = tiny_run[0] / "checkpoints" / "final.zip"
    for device in ("cpu", "auto"):
        assert load_policy(final, device=device).policy.device == resolve_device(device)
    agent = make_agent(f"ppo:{tiny_run[0]},device=cpu", STANDARD, seed=0)
    assert agent.policy.device == th.device("cpu") and agent.act(INITIAL_STATE) in range(16)


def test_saved_tensors_are_cpu_copies_that_keep_a_state_dicts_layer_versions() -> None:
    network = PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 8)
    state = network.state_dict()
    copy = on_cpu({"network": state, "steps": [th.ones(2), 3], "pair": (th.zeros(1), "x")})
    assert isinstance(copy["network"], collections.OrderedDict)
    assert copy["network"]._metadata == state._metadata  # type: ignore[attr-defined]
    assert all(t.device.type == "cpu" for t in (*copy["network"].values(), copy["steps"][0], copy["pair"][0]))
    loaded = th.load(io.BytesIO(saved_bytes(state)), weights_only=True)
    fresh = PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 8)
    fresh.load_state_dict(loaded)
    assert device_of(fresh) == th.device("cpu")
    assert all(th.equal(loaded[name], tensor) for name, tensor in state.items())
