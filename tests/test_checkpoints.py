"""Checkpoints are data, never code: every project path that loads one (``load_policy``, the ``ppo:`` agent,
``quarto evaluate``, ``quarto train --resume``) leaves crafted pickles in it unread, and a checkpoint plays
in ``quarto_env.env(**env_kwargs)`` from ``predict`` alone, as the ``ppo:`` agent does. Format 1 is still read."""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import shutil
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch as th

import quarto_env
from agents.match import play_game
from agents.networks import checkpoints
from agents.networks.checkpoints import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    checkpoint_bytes,
    checkpoint_path,
    read_metadata,
)
from agents.ppo import LoadedPolicy, load_policy, load_training_state
from agents.specs import make_agent
from experiments.training import evaluate, sb3_ppo
from experiments.training import train as train_module
from experiments.training.config_file import load_config
from experiments.training.sb3_ppo import build_model
from experiments.training.selfplay import OpponentPool, SelfPlayVecEnv
from quarto_env.core import Variant
from tests.test_bad_input import assert_one_line

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class TouchOnUnpickle:
    """Pickles to the call ``Path.touch(marker)``: whatever unpickles it creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[Path]]:
        return (Path.touch, (self.marker,))


def crafted_data(checkpoint: Path, marker: Path) -> bytes:
    """The ``data`` entry of ``checkpoint`` with every cloudpickled value replaced by a payload touching ``marker``."""
    payload = base64.b64encode(pickle.dumps(TouchOnUnpickle(marker))).decode()
    with zipfile.ZipFile(checkpoint) as archive:
        data = json.loads(archive.read("data"))
    for key, value in data.items():
        if isinstance(value, dict) and ":serialized:" in value:
            data[key] = {**value, ":serialized:": payload}
    return json.dumps(data).encode()


def crafted_weights(marker: Path) -> bytes:
    """A ``torch.save`` file whose loading, unless weights only, touches ``marker``."""
    buffer = io.BytesIO()
    th.save(TouchOnUnpickle(marker), buffer)
    return buffer.getvalue()


def rewrite(checkpoint: Path, entries: dict[str, bytes | None]) -> None:
    """Replace (or with ``None`` drop) entries of the zip ``checkpoint``; the others are copied unchanged, and the
    archive is sealed anew: a crafted checkpoint as its author would make it, whole, so that what reads it must
    refuse its content, not its checksums."""
    with zipfile.ZipFile(checkpoint) as archive:
        kept = {name: archive.read(name) for name in archive.namelist() if name not in entries}
    merged = {**kept, **entries}
    checkpoint.write_bytes(checkpoint_bytes({name: data for name, data in merged.items() if data is not None}))


def edit_metadata(checkpoint: Path, **changes: Any) -> None:
    """Set (or with ``None`` remove) fields of the checkpoint's ``quarto.json``."""
    with zipfile.ZipFile(checkpoint) as archive:
        metadata = json.loads(archive.read("quarto.json"))
    metadata.update(changes)
    metadata = {key: value for key, value in metadata.items() if value is not None}
    rewrite(checkpoint, {"quarto.json": json.dumps(metadata).encode()})


def copy_run(tiny_run: tuple[Path, str], destination: Path) -> Path:
    shutil.copytree(tiny_run[0], destination)
    return destination


@pytest.fixture(scope="module")
def crafted_run(tiny_run: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the tiny run whose every checkpoint has a ``data`` entry that touches a marker when unpickled."""
    run_dir = copy_run(tiny_run, tmp_path_factory.mktemp("crafted") / "run")
    marker = run_dir.parent / "unpickled-data"
    for checkpoint in (run_dir / "checkpoints").glob("*.zip"):
        rewrite(checkpoint, {"data": crafted_data(checkpoint, marker)})
    return run_dir, marker


# ---------------------------------------------------------------------------------------------------------
# The crafted entries are real attacks
# ---------------------------------------------------------------------------------------------------------
def test_the_crafted_entries_run_code_when_unpickled(crafted_run: tuple[Path, Path], tmp_path: Path) -> None:
    from stable_baselines3.common.save_util import json_to_data

    data_marker, weights_marker = tmp_path / "data", tmp_path / "weights"
    json_to_data(crafted_data(crafted_run[0] / "checkpoints" / "final.zip", data_marker).decode())
    th.load(io.BytesIO(crafted_weights(weights_marker)), weights_only=False)
    assert data_marker.exists() and weights_marker.exists()  # what MaskablePPO.load would have done


# ---------------------------------------------------------------------------------------------------------
# A crafted data entry is never read: every loading path still works
# ---------------------------------------------------------------------------------------------------------
def test_load_policy_and_the_ppo_agent_leave_the_data_entry_unread(crafted_run: tuple[Path, Path]) -> None:
    run_dir, marker = crafted_run
    final = run_dir / "checkpoints" / "final.zip"
    loaded = load_policy(final, Variant.make())
    assert isinstance(loaded, LoadedPolicy) and loaded.num_timesteps >= 1024
    for spec in (f"ppo:{final}", f"ppo:{run_dir}"):
        agent = make_agent(spec, loaded.variant, seed=0)
        record = play_game(loaded.variant, [agent, make_agent("random", loaded.variant, 1)])
        assert record.end in ("win", "draw")
    assert not marker.exists()


def test_evaluate_leaves_the_data_entry_unread(crafted_run: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    run_dir, marker = crafted_run
    assert evaluate.main([str(run_dir / "checkpoints" / "best.zip"), "--games", "2", "--opponents", "random"]) == 0
    assert "argmax" in capsys.readouterr().out
    assert not marker.exists()


def test_resume_leaves_the_data_entry_unread_and_continues(crafted_run: tuple[Path, Path], tmp_path: Path) -> None:
    source, marker = crafted_run
    run_dir = copy_run((source, ""), tmp_path / "resumed")
    stopped_at = read_metadata(run_dir / "checkpoints" / "latest.zip")["num_timesteps"]
    assert train_module.main(["--resume", str(run_dir), f"total_steps={stopped_at + 256}", "final_eval_games=2"]) == 0
    final = read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"]
    assert stopped_at + 256 <= final <= stopped_at + 256 + 128  # continued from the checkpoint: one rollout at most
    assert not marker.exists()


def test_resume_restores_weights_optimizer_and_counters(tiny_run: tuple[Path, str]) -> None:
    run_dir = tiny_run[0]
    latest = run_dir / "checkpoints" / "latest.zip"
    config = load_config(run_dir / "config.yaml")
    variant = config.variant
    pool = OpponentPool(variant, config.observation, config.ppo.opponents, config.ppo.max_snapshots, config.seed)
    model = build_model(config, variant, SelfPlayVecEnv(variant, 2, config.observation, pool, 0))
    metadata = load_training_state(model, latest, variant)
    assert model.num_timesteps == metadata["num_timesteps"] >= 1024
    with zipfile.ZipFile(latest) as archive:
        assert model._n_updates == json.loads(archive.read("data"))["_n_updates"] > 0
    saved = load_policy(latest).policy.state_dict()
    assert all(th.equal(value, saved[key]) for key, value in model.policy.state_dict().items())
    assert model.policy.optimizer.state_dict()["state"]  # Adam's moments, not a fresh optimizer


def count_metadata_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the checkpoints whose metadata is read from now on (each read proves every entry whole)."""
    reads: list[str] = []
    read = checkpoints._read_metadata_entry
    monkeypatch.setattr(checkpoints, "_read_metadata_entry", lambda path: reads.append(Path(path).name) or read(path))
    return reads


def metadata_reads_of_a_resume(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: Any) -> list[str]:
    """The checkpoints whose metadata a backend's ``start`` reads to resume a copy of ``run_dir`` (it reads only)."""
    resumed = tmp_path / "resumed"
    shutil.copytree(run_dir, resumed)
    config = load_config(resumed / "config.yaml", ["total_steps=4096"])
    reads = count_metadata_reads(monkeypatch)
    start(config, resumed, True)
    return reads


def test_a_resume_reads_the_checkpoints_metadata_once(
    tiny_run: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert metadata_reads_of_a_resume(tiny_run[0], tmp_path, monkeypatch, sb3_ppo.start) == ["latest.zip"]


# ---------------------------------------------------------------------------------------------------------
# Weights entries that hold more than weights are refused
# ---------------------------------------------------------------------------------------------------------
def test_a_crafted_policy_entry_is_refused_unread(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    marker = tmp_path / "unpickled-policy"
    for name in ("final.zip", "latest.zip"):
        rewrite(run_dir / "checkpoints" / name, {"policy.pth": crafted_weights(marker)})
    final = run_dir / "checkpoints" / "final.zip"
    with pytest.raises(CheckpointError, match=r"final\.zip': entry policy\.pth is not plain weights"):
        load_policy(final)
    with pytest.raises(CheckpointError, match=r"policy\.pth is not plain weights"):
        make_agent(f"ppo:{final}")
    assert evaluate.main([str(final), "--games", "2"]) == 2
    assert train_module.main(["--resume", str(run_dir), "total_steps=2048"]) == 2  # the run finished at 1024
    assert capsys.readouterr().err.count("policy.pth is not plain weights") == 2
    assert not marker.exists()


def test_a_crafted_pool_entry_is_refused_unread(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    marker = tmp_path / "unpickled-pool"
    rewrite(run_dir / "checkpoints" / "latest.zip", {"pool.pt": crafted_weights(marker)})
    assert train_module.main(["--resume", str(run_dir)]) == 2
    assert "latest.zip': entry pool.pt is not plain weights" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # torch, reading the plain pickle
@pytest.mark.parametrize(
    ("entries", "metadata", "message"),
    [
        ({"policy.pth": None}, {}, "has no policy.pth entry"),
        ({"policy.pth": b"not a torch file"}, {}, "policy.pth is not plain weights"),
        ({"policy.pth": pickle.dumps({"weights": 1})}, {}, "policy.pth is not plain weights"),
        ({}, {"config": {"policy": "slots", "net_arch": [8]}}, "policy.pth does not fit the network"),
        ({}, {"config": {"policy": "cnn", "net_arch": [8]}}, "quarto.json describes no valid policy"),
        ({}, {"observation": "pixels"}, "invalid metadata in quarto.json: unknown observation kind 'pixels'"),
        ({}, {"format": 4}, "has format 4; this version reads formats 1, 2 and 3"),
    ],
    ids=["no-policy", "garbage", "plain-pickle", "other-network", "unknown-policy", "bad-observation", "format-4"],
)
def test_bad_checkpoints_are_checkpoint_errors_naming_the_file(
    tiny_run: tuple[Path, str],
    tmp_path: Path,
    entries: dict[str, bytes | None],
    metadata: dict[str, Any],
    message: str,
) -> None:
    checkpoint = tmp_path / "bad.zip"
    shutil.copy(tiny_run[0] / "checkpoints" / "final.zip", checkpoint)
    rewrite(checkpoint, entries)
    edit_metadata(checkpoint, **metadata)
    with pytest.raises(CheckpointError, match=f"checkpoint '{re.escape(str(checkpoint))}'.*{message}"):
        load_policy(checkpoint)


# ---------------------------------------------------------------------------------------------------------
# env_kwargs: the checkpoint plays in quarto_v1 from predict alone
# ---------------------------------------------------------------------------------------------------------
def test_metadata_holds_the_env_kwargs_of_its_rules_and_observation(tiny_run: tuple[Path, str]) -> None:
    metadata = read_metadata(tiny_run[0] / "checkpoints" / "final.zip")
    assert metadata["format"] == CHECKPOINT_FORMAT == 3
    assert metadata["env_kwargs"] == {**Variant.make().to_dict(), "observation": metadata["observation"]}


def play_from_predict(loaded: LoadedPolicy, checkpoint: Path, seed: int) -> int:
    """Play one game of ``quarto_env.env(**loaded.env_kwargs)``, the learner moving by ``predict`` alone against
    a random agent; every learner action must be the ``ppo:`` agent's. Returns the learner's decisions."""
    env = quarto_env.env(**loaded.env_kwargs)
    env.reset(seed=seed)
    ppo_agent = make_agent(f"ppo:{checkpoint}", loaded.variant)
    opponent = make_agent("random", loaded.variant, seed)
    learner, decisions = env.possible_agents[seed % 2], 0
    for name in env.agent_iter():
        observation, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        state = env.unwrapped.game_state
        if name == learner:
            action, _ = loaded.predict(
                observation["observation"], action_masks=observation["action_mask"], deterministic=True
            )
            assert int(action) == ppo_agent.act(state), f"decision {decisions} of game {seed}"
            decisions += 1
        else:
            action = opponent.act(state)
        env.step(int(action))
    return decisions


def test_predict_alone_plays_a_whole_game_as_the_ppo_agent(tiny_run: tuple[Path, str]) -> None:
    checkpoint = tiny_run[0] / "checkpoints" / "final.zip"
    loaded = load_policy(checkpoint)
    assert loaded.observation == read_metadata(checkpoint)["observation"]  # the checkpoint's own kind
    decisions = [play_from_predict(loaded, checkpoint, seed) for seed in range(4)]
    assert min(decisions) >= 1 and sum(decisions) >= 24


def test_format_1_checkpoints_still_load_with_derived_env_kwargs(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    current = tiny_run[0] / "checkpoints" / "final.zip"
    old = tmp_path / "format1.zip"
    shutil.copy(current, old)
    edit_metadata(old, format=1, env_kwargs=None)
    with zipfile.ZipFile(old) as archive:
        assert "env_kwargs" not in json.loads(archive.read("quarto.json"))
    loaded = load_policy(old)
    assert loaded.metadata["format"] == 1 and loaded.env_kwargs == read_metadata(current)["env_kwargs"]
    assert play_from_predict(loaded, old, seed=0) >= 1


# ---------------------------------------------------------------------------------------------------------
# A run folder means its final checkpoint, for every agent kind; another by name; the choice said on stderr
# ---------------------------------------------------------------------------------------------------------
def test_a_run_folder_means_its_final_checkpoint(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import agents.networks.checkpoints

    monkeypatch.setattr(agents.networks.checkpoints, "_said", set())
    run_dir = tiny_run[0]
    kept = run_dir / "checkpoints"
    assert checkpoint_path(run_dir) == kept / "final.zip"
    said = f"{run_dir}: playing {kept / 'final.zip'}; checkpoint=best takes the best evaluation's\n"
    assert capsys.readouterr().err == said
    assert checkpoint_path(kept) == kept / "final.zip"  # RUN/checkpoints/ means the run: no checkpoints/checkpoints/
    assert checkpoint_path(run_dir, "best") == checkpoint_path(kept, "best") == kept / "best.zip"
    assert checkpoint_path(kept / "best.zip") == kept / "best.zip"  # a file is itself, and says nothing
    assert capsys.readouterr().err == f"{run_dir}: playing {kept / 'best.zip'}\n"  # once per file
    assert checkpoint_path(run_dir, "step_000000512") == kept / "step_000000512.zip"
    unpadded = make_agent(f"ppo:{run_dir},checkpoint=step_512")  # the step as a number: the same file
    assert all(
        th.equal(t, load_policy(kept / "step_000000512.zip").policy.state_dict()[n])
        for n, t in unpadded.policy.state_dict().items()
    )
    training = tmp_path / "training"  # a run still training: no final.zip yet
    (training / "checkpoints").mkdir(parents=True)
    shutil.copy(kept / "latest.zip", training / "checkpoints" / "latest.zip")
    assert checkpoint_path(training) == training / "checkpoints" / "latest.zip"
    with pytest.raises(CheckpointError, match=r"has no checkpoints/best.zip: it has latest$"):
        checkpoint_path(training, "best")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"has no checkpoints/final.zip or checkpoints/latest.zip: it holds no"):
        checkpoint_path(tmp_path / "empty")
    with pytest.raises(CheckpointError, match=r"chooses within a run folder"):
        checkpoint_path(kept / "final.zip", "best")


def test_the_checkpoint_option_names_one_in_a_run_folder_for_every_kind(tiny_run: tuple[Path, str]) -> None:
    from agents.specs import SpecError, make_agent, parse_spec

    run_dir = tiny_run[0]
    best = load_policy(run_dir / "checkpoints" / "best.zip").policy.state_dict()
    agent = make_agent(f"ppo:{run_dir},checkpoint=best")
    assert all(th.equal(tensor, best[name]) for name, tensor in agent.policy.state_dict().items())
    for kind in ("ppo", "az", "rllib"):
        assert parse_spec(f"{kind}:RUN,checkpoint=step_5")[1]["checkpoint"] == "step_000000005"  # the file's name
        with pytest.raises(SpecError, match="must be best, final, latest or step_N"):
            parse_spec(f"{kind}:RUN,checkpoint=top")


def test_load_policy_takes_a_run_folder_as_ppo_run_does(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    checkpoints = run_dir / "checkpoints"  # best.zip an earlier network (the tiny run's may be the final one)
    shutil.copyfile(checkpoints / "step_000000512.zip", checkpoints / "best.zip")
    from_folder = load_policy(run_dir).policy.state_dict()
    best = load_policy(run_dir / "checkpoints" / "best.zip").policy.state_dict()
    final = load_policy(run_dir / "checkpoints" / "final.zip").policy.state_dict()
    assert all(th.equal(tensor, final[name]) for name, tensor in from_folder.items())
    assert not all(th.equal(tensor, best[name]) for name, tensor in from_folder.items())  # final.zip, not best


def test_evaluate_takes_a_run_folder_and_the_tournaments_openings(
    tiny_run: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.arena import tournament

    loaded: list[Path] = []
    played: list[int] = []

    def spy_load(path: Path, **kwargs: Any) -> LoadedPolicy:
        loaded.append(Path(path))
        return load_policy(path, **kwargs)

    def spy_games(*args: Any) -> list[Any]:
        played.append(args[-1])  # the opening plies
        return []

    monkeypatch.setattr(evaluate, "load_policy", spy_load)
    monkeypatch.setattr(evaluate, "evaluate_all", spy_games)
    assert evaluate.main([str(tiny_run[0]), "--games", "2", "--opponents", "random"]) == 0
    assert loaded == [tiny_run[0] / "checkpoints" / "final.zip"]  # what ppo:RUN plays
    assert evaluate.main([str(tiny_run[0]), "--checkpoint", "best", "--games", "2", "--opponents", "random"]) == 0
    assert loaded[-1] == tiny_run[0] / "checkpoints" / "best.zip"
    assert evaluate.DEFAULT_OPENING_PLIES == tournament.DEFAULT_OPENING_PLIES == 4
    assert played == [tournament.DEFAULT_OPENING_PLIES] * 2
    assert evaluate.main([str(tiny_run[0]), "--games", "2", "--opponents", "random", "--opening-plies", "0"]) == 0
    assert played[-1] == 0


def test_evaluate_refuses_a_folder_without_checkpoints_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert evaluate.main([str(tmp_path), "--games", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"quarto evaluate: folder {str(tmp_path)!r} has no checkpoints/final.zip")
    assert "it holds no checkpoints of quarto train" in captured.err


# ---------------------------------------------------------------------------------------------------------
# Zip damage, whichever byte: one CheckpointError, everywhere a checkpoint is loaded
# ---------------------------------------------------------------------------------------------------------
VERSION_NEEDED, FLAGS, COMPRESSION = 6, 8, 10
"""Offsets of three 2-byte fields in a zip's central-directory record."""


def central_records(data: bytes) -> list[int]:
    """The offsets of the central-directory records of the zip ``data``, the archive's own (torch's entries are
    zips too, with directories of their own)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        offset, count = archive.start_dir, len(archive.infolist())
    records = []
    for _ in range(count):
        records.append(offset)
        names, extra, comment = struct.unpack_from("<HHH", data, offset + 28)
        offset += 46 + names + extra + comment
    return records


def with_field(checkpoint: Path, field: int, value: int, record: int = 0) -> None:
    """Set the 2-byte ``field`` of a central-directory record (the first: the metadata's) of ``checkpoint`` to
    ``value``: one byte or two changed, where no checksum looks."""
    data = bytearray(checkpoint.read_bytes())
    struct.pack_into("<H", data, central_records(bytes(data))[record] + field, value)
    checkpoint.write_bytes(bytes(data))


HEADER_DAMAGE: dict[str, Callable[[Path], None]] = {
    "version-needed": lambda path: with_field(path, VERSION_NEEDED, 99),  # NotImplementedError, "version 9.9"
    "compression-method": lambda path: with_field(path, COMPRESSION, 99),  # NotImplementedError
    "lzma-method": lambda path: with_field(path, COMPRESSION, zipfile.ZIP_LZMA, record=1),  # lzma.LZMAError
    "encrypted-flag": lambda path: with_field(path, FLAGS, 1),  # RuntimeError, "password required"
}
"""Damage in the central directory that zipfile reports with other errors than ``BadZipFile``."""


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid checkpoint of 3 KB: its metadata, one entry of weights, its seal."""
    path = tmp_path_factory.mktemp("small") / "small.zip"
    header = checkpoints.CheckpointHeader(Variant.make(), "tempo", 0)
    checkpoints.write_checkpoint(path, "alphazero", header, {}, {"network.pth": {"weight": th.arange(4.0)}})
    return path


def load_whole(path: Path) -> None:
    """Read the small checkpoint as every loader does: its metadata (the seal proves every entry), then weights."""
    read_metadata(path)
    checkpoints.read_weights(path, "network.pth")


@pytest.mark.slow
def test_bytes_flipped_anywhere_in_a_checkpoint_are_one_checkpoint_error(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    """Every third byte inverted, and every byte of the central directory and its end in two ways: each load
    raises a CheckpointError or, where zipfile reads no such byte (a date, an attribute), loads. (The fault run
    flips every byte: ``checkpoint: byte-flip sweep``.)"""
    data = small_checkpoint.read_bytes()
    directory = central_records(data)[0]
    flips = [(offset, 0xFF) for offset in range(0, len(data), 3)]
    flips += [(offset, mask) for offset in range(directory, len(data)) for mask in (0x01, 0x80)]
    damaged, refused = tmp_path / "damaged.zip", 0
    for offset, mask in flips:
        flipped = bytearray(data)
        flipped[offset] ^= mask
        damaged.write_bytes(bytes(flipped))
        try:
            load_whole(damaged)
        except CheckpointError as error:
            assert "\n" not in str(error) and str(damaged) in str(error), (offset, mask, error)
            refused += 1
    assert refused > len(flips) * 3 / 4  # the rest fell on bytes zipfile does not read


@pytest.mark.parametrize("damage", HEADER_DAMAGE.values(), ids=HEADER_DAMAGE.keys())
def test_a_central_directory_zipfile_cannot_read_is_a_damaged_checkpoint(
    damage: Callable[[Path], None], small_checkpoint: Path, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "small.zip"
    shutil.copy(small_checkpoint, checkpoint)
    damage(checkpoint)
    with pytest.raises(checkpoints.DamagedCheckpointError, match=r"is corrupt or truncated \(.+\)$"):
        load_whole(checkpoint)


@pytest.mark.parametrize("damage", ["version-needed", "compression-method"])
@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "<ckpt>", "--games", "2"],
        ["tournament", "ppo:<ckpt>", "random", "--games", "2", "--out", "<tmp>/t", "--no-progress"],
        ["grade", "ppo:<ckpt>", "--out", "<tmp>/g", "--no-progress"],
        ["play", "--opponent", "ppo:<ckpt>"],
    ],
    ids=["evaluate", "tournament", "grade", "play"],
)
def test_every_command_refuses_a_damaged_checkpoint_in_one_line(
    argv: list[str], damage: str, tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = tmp_path / "final.zip"
    shutil.copy(tiny_run[0] / "checkpoints" / "final.zip", checkpoint)
    HEADER_DAMAGE[damage](checkpoint)
    argv = [word.replace("<ckpt>", str(checkpoint)).replace("<tmp>", str(tmp_path)) for word in argv]
    line = assert_one_line(argv, f"checkpoint {str(checkpoint)!r} is corrupt or truncated", capsys)
    assert "NotImplementedError" not in line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["final.zip"]  # nothing written
