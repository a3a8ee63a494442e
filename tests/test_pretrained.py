"""The trained networks shipped in the wheel (agents.networks.pretrained): each is playable by a spec with no training,
for the rules it was trained on, is in the wheel's package data, and is refused in one line once altered."""

from __future__ import annotations

import fnmatch
import shutil
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("torch")

from agents.networks import pretrained
from agents.networks.checkpoints import CheckpointError, check_algorithm, read_metadata
from agents.networks.pretrained import PRETRAINED, SHIPPED, SQUARES, pretrained_path
from agents.specs import SpecError, make_agent
from experiments.training.ship import playing_copy
from quarto_env.core import STANDARD, State, Variant

REPO = Path(__file__).resolve().parent.parent
IDS = [f"{item.agent}-{item.variant.describe()}" for item in SHIPPED]


def test_the_issue_s_three_networks_are_shipped() -> None:
    assert {(item.agent, item.variant) for item in SHIPPED} >= {("az", STANDARD), ("az", SQUARES), ("ppo", STANDARD)}
    assert len({(item.agent, item.variant) for item in SHIPPED}) == len(SHIPPED)


@pytest.mark.parametrize("shipped", SHIPPED, ids=IDS)
def test_a_shipped_network_is_its_rules_checkpoint_and_plays_a_legal_move(shipped: pretrained.ShippedNetwork) -> None:
    path = pretrained_path(PRETRAINED, shipped.agent, shipped.variant)
    metadata = read_metadata(path)
    assert Variant.make(**metadata["variant"]) == shipped.variant
    check_algorithm(path, metadata, {"az": "alphazero", "ppo": "ppo"}[shipped.agent])
    agent = make_agent(f"{shipped.agent}:{PRETRAINED}", shipped.variant, seed=0)
    state = State()
    action = agent.act(state)
    assert 0 <= action < 16  # the first move gives a piece: any of the 16


@pytest.mark.parametrize("shipped", SHIPPED, ids=IDS)
def test_a_shipped_file_is_in_the_wheels_package_data(shipped: pretrained.ShippedNetwork) -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11's
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["agents"]
    relative = (pretrained.PRETRAINED_FOLDER / shipped.file).relative_to(REPO / "agents").as_posix()
    assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns)


def test_other_paths_pass_through_and_unshipped_rules_are_refused_naming_the_shipped() -> None:
    assert pretrained_path("runs/x", "az", STANDARD) == "runs/x"
    with pytest.raises(CheckpointError, match=r"no ppo network is shipped for squares: the shipped ones are .*az:"):
        pretrained_path(PRETRAINED, "ppo", SQUARES)
    with pytest.raises(CheckpointError, match="no rllib network is shipped"):
        make_agent(f"rllib:{PRETRAINED}")


@pytest.mark.parametrize("shipped", SHIPPED[:1], ids=IDS[:1])
def test_an_altered_shipped_file_is_refused_in_one_line(
    shipped: pretrained.ShippedNetwork, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / shipped.file
    shutil.copy(pretrained.PRETRAINED_FOLDER / shipped.file, copy)
    monkeypatch.setattr(pretrained, "PRETRAINED_FOLDER", tmp_path)
    assert pretrained_path(PRETRAINED, shipped.agent, shipped.variant) == str(copy)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 1
    copy.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="altered after install") as refused:
        make_agent(f"{shipped.agent}:{PRETRAINED}", shipped.variant)
    assert "\n" not in str(refused.value)
    copy.unlink()
    with pytest.raises(CheckpointError, match="cannot be read"):
        pretrained_path(PRETRAINED, shipped.agent, shipped.variant)


def test_a_playing_copy_keeps_only_what_the_agent_plays_from(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    source_file = tiny_run[0] / "checkpoints" / "final.zip"
    target = tmp_path / "ppo.zip"
    playing_copy("ppo", source_file, target)
    assert sorted(zipfile.ZipFile(target).namelist()) == ["policy.pth", "quarto.json", "seal.json"]
    source = make_agent(f"ppo:{source_file}")
    copied = make_agent(f"ppo:{target}")
    state = State()
    assert copied.act(state) == source.act(state)


@pytest.mark.parametrize("agent", ["az", "ppo"])
def test_quarto_evaluate_takes_the_shipped_network_by_its_spec(agent: str) -> None:
    from experiments.training.evaluate import learner_checkpoint

    standard = next(item for item in pretrained.SHIPPED if item.agent == agent and item.variant == STANDARD)
    assert learner_checkpoint(f"{agent}:pretrained") == pretrained.PRETRAINED_FOLDER / standard.file
    with pytest.raises(SpecError, match=r"is a shipped network, one file: it has no checkpoint to choose$"):
        learner_checkpoint(f"{agent}:pretrained", "best")
