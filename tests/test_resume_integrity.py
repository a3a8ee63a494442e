"""Resumable state proves itself (agents/storage/integrity.py): a partial file altered into well-formed data -- a
dataset shard whose draws became wins, whose wins and losses are swapped or whose masked action is a win, the dataset's
plan of positions, a tournament's game record, a training checkpoint -- is redone or refused, never used; a
damaged ``latest.zip`` (truncated, altered, or a byte of its central directory that zipfile cannot read) is passed
over for the newest intact checkpoint, named in one line; a resume with fewer ``total_steps`` than done is refused
and a finished run left alone, byte for byte. (The grade's value cache, sealed the same way, is tested with the
rest of it: tests/test_grade.py, ``test_a_tampered_or_stale_cache...``.)"""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from agents.networks.checkpoints import DamagedCheckpointError, read_metadata
from agents.ppo import load_policy
from agents.solver import labels
from agents.storage.integrity import SEAL_ENTRY, IntegrityError, read_sealed, write_sealed
from experiments.arena import tournament
from experiments.training import dataset
from experiments.training import train as train_module
from quarto_env.core import State, Variant
from tests.test_checkpoints import HEADER_DAMAGE
from tests.test_train_hardening import copy_run, folder_bytes, refused

SAMPLE = ["--sample", "12", "--games", "40", "--min-empty", "4", "--max-empty", "8", "--seed", "5", "--no-progress"]
SHARD = 7
"""Positions per shard in these tests: the sample's 60 positions in nine shards."""


# ---------------------------------------------------------------------------------------------------------
# The helper itself
# ---------------------------------------------------------------------------------------------------------
def test_a_sealed_file_reads_back_and_refuses_every_other_kind_of_file(tmp_path: Path) -> None:
    path = tmp_path / "payload.bin"
    write_sealed(path, "test payload", 2, b"exact bytes", of="these")
    assert read_sealed(path, "test payload", 2, of="these") == b"exact bytes"
    for kind, version, meta, message in [
        ("other payload", 2, {}, 'is a "test payload", not a other payload'),
        ("test payload", 3, {}, "is test payload format 2; this version reads 3"),
        ("test payload", 2, {"of": "those"}, "of something else: its of differ"),
    ]:
        with pytest.raises(IntegrityError, match=message):
            read_sealed(path, kind, version, **meta)
    path.write_bytes(b"exact bytez")  # same length, one byte changed
    with pytest.raises(IntegrityError, match="does not match its checksum: damaged or altered"):
        read_sealed(path, "test payload", 2)
    (tmp_path / "payload.bin.seal").unlink()
    with pytest.raises(IntegrityError, match="carries no format and checksum"):
        read_sealed(path, "test payload", 2)


# ---------------------------------------------------------------------------------------------------------
# quarto dataset: the shards and the plan of OUT.parts/
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample_parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The file of a sample, and the parts folder its run holds just before it writes the file: what a kill at
    that moment leaves behind."""
    out = tmp_path_factory.mktemp("dataset") / "whole.npz"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(labels, "SHARD_POSITIONS", SHARD)
        patch.setattr(dataset, "remove_parts", lambda folder: None)
        assert dataset.main([*SAMPLE, "--out", str(out)]) == 0
    return out, dataset.parts_folder(out)


def most_decided_shard(parts: Path) -> Path:
    """The shard with the most wins and losses: every alteration below changes it."""
    shards = sorted(parts.glob("shard-*.npy"))
    return max(shards, key=lambda shard: int(np.isin(np.load(shard), (-1, 1)).sum()))


def a_draw_made_a_win(rows: np.ndarray) -> None:
    rows[np.unravel_index(int(np.argmax(rows == 0)), rows.shape)] = 1


def wins_and_losses_swapped(rows: np.ndarray) -> None:
    rows[rows != labels.ILLEGAL] *= -1


def a_masked_action_made_a_win(rows: np.ndarray) -> None:
    rows[np.unravel_index(int(np.argmax(rows == labels.ILLEGAL)), rows.shape)] = 1


@pytest.mark.parametrize("alter", [a_draw_made_a_win, wins_and_losses_swapped, a_masked_action_made_a_win])
def test_an_altered_shard_is_labelled_again_never_used(
    alter: Callable[[np.ndarray], None],
    sample_parts: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    whole, parts = sample_parts
    out = tmp_path / "resumed.npz"
    shutil.copytree(parts, dataset.parts_folder(out))
    shard = most_decided_shard(dataset.parts_folder(out))
    rows = np.load(shard)
    alter(rows)
    np.save(shard, rows, allow_pickle=False)  # a well-formed array of the same shape and type
    monkeypatch.setattr(labels, "SHARD_POSITIONS", SHARD)
    solve, solved = labels.action_values, []

    def counted(variant: Variant, state: State) -> dict[int, int]:
        solved.append(state)
        return solve(variant, state)

    monkeypatch.setattr(labels, "action_values", counted)
    assert dataset.main([*SAMPLE, "--out", str(out)]) == 0
    assert_same_dataset(out, whole)
    assert len(solved) == SHARD  # that shard labelled again, the others read back
    said = [line for line in capsys.readouterr().err.splitlines() if shard.name in line]
    assert len(said) == 1 and said[0].endswith(f"labelling its {SHARD} positions again"), said


def test_an_altered_plan_of_positions_is_drawn_again(
    sample_parts: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    whole, parts = sample_parts
    out = tmp_path / "resumed.npz"
    shutil.copytree(parts, dataset.parts_folder(out))
    plan_path = dataset.parts_folder(out) / dataset.PLAN_FILE
    plan = json.loads(plan_path.read_text())
    plan["positions"][0], plan["positions"][1] = plan["positions"][1], plan["positions"][0]
    plan_path.write_text(json.dumps(plan))  # well-formed: the same positions, two swapped
    monkeypatch.setattr(labels, "SHARD_POSITIONS", SHARD)
    assert dataset.main([*SAMPLE, "--out", str(out)]) == 0
    assert_same_dataset(out, whole)
    assert f"{dataset.PLAN_FILE} does not match its checksum" in capsys.readouterr().err


def assert_same_dataset(path: Path, expected: Path) -> None:
    (arrays, header), (want, want_header) = dataset.load_dataset(path), dataset.load_dataset(expected)
    assert {**header, "code": None} == {**want_header, "code": None}
    assert all(np.array_equal(arrays[name], want[name]) for name in dataset.ARRAYS)


# ---------------------------------------------------------------------------------------------------------
# quarto tournament --resume: the game records
# ---------------------------------------------------------------------------------------------------------
def _retimed(record: dict) -> dict:
    """The record with its first move's time changed: well-formed, and it replays to the same end."""
    return {**record, "move_seconds": [record["move_seconds"][0] + 1.5, *record["move_seconds"][1:]]}


def _unsealed(record: dict) -> dict:
    """The record as a version before the seal wrote it."""
    return {key: value for key, value in record.items() if key != "seal"}


@pytest.mark.parametrize(
    ("change", "message"),
    [(_retimed, "does not match its checksum"), (_unsealed, "carries no format and checksum")],
    ids=["altered", "older-version"],
)
def test_an_altered_game_record_refuses_the_resume_in_one_line(
    change: Callable[[dict], dict], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "arena"
    argv = ["random", "greedy", "--games", "4", "--seed", "1", "--jobs", "1", "--bootstrap", "100", "--no-progress"]
    assert tournament.main([*argv, "--out", str(out)]) == 0
    games = out / "games.jsonl"
    lines = games.read_text().splitlines(keepends=True)
    games.write_text(json.dumps(change(json.loads(lines[0]))) + "\n" + "".join(lines[1:3]))  # a killed run's
    before = folder_bytes(out)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        tournament.main(["--resume", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1, err
    assert f"games.jsonl line 1: it {message}" in err[0] and "remove that line to play its game again" in err[0]
    assert folder_bytes(out) == before


# ---------------------------------------------------------------------------------------------------------
# quarto train --resume: a damaged latest.zip, total_steps below the steps done, a finished run
# ---------------------------------------------------------------------------------------------------------
def truncated(checkpoint: Path) -> None:
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])


def altered(checkpoint: Path) -> None:
    """A well-formed zip, every CRC right, whose ``quarto.json`` says it has trained 4,096 steps more."""
    with zipfile.ZipFile(checkpoint) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    metadata = json.loads(entries["quarto.json"])
    entries["quarto.json"] = json.dumps({**metadata, "num_timesteps": metadata["num_timesteps"] + 4096}).encode()
    with zipfile.ZipFile(checkpoint, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


@pytest.mark.parametrize(
    "damage",
    [truncated, altered, HEADER_DAMAGE["version-needed"], HEADER_DAMAGE["compression-method"]],
    ids=["truncated", "altered", "version-needed", "compression-method"],
)
def test_a_damaged_latest_zip_goes_on_from_the_newest_intact_checkpoint(
    damage: Callable[[Path], None], tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    checkpoints = run_dir / "checkpoints"
    for left in ("step_000001024.zip", "final.zip", "best.zip"):  # as a run killed after its checkpoint at step 512
        (checkpoints / left).unlink()  # leaves it (its latest.zip then damaged)
    (run_dir / "final_eval.json").unlink()
    damage(checkpoints / "latest.zip")
    with pytest.raises(DamagedCheckpointError):
        read_metadata(checkpoints / "latest.zip")
    assert train_module.main(["--resume", str(run_dir), "total_steps=1536", "final_eval_games=2"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "newest intact checkpoint" in line]
    assert len(said) == 1 and "latest.zip" in said[0], said
    assert "going on from step_000000512.zip, the newest intact checkpoint, at step 512" in said[0]
    assert read_metadata(checkpoints / "final.zip")["num_timesteps"] >= 1536
    assert read_metadata(checkpoints / "latest.zip")["num_timesteps"] >= 1536  # whole again


def test_a_total_steps_below_the_steps_done_is_refused_and_changes_nothing(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    before = folder_bytes(run_dir)
    message = refused(["--resume", str(run_dir), "total_steps=512"], capsys)
    assert "total_steps=512 is below the 1,024 steps the run has done" in message
    assert folder_bytes(run_dir) == before


def test_a_finished_run_says_so_and_changes_nothing(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    before = folder_bytes(run_dir)
    assert train_module.main(["--resume", str(run_dir)]) == 0
    printed = capsys.readouterr()
    assert printed.out.strip() == (
        f"quarto train: {run_dir} is already finished at 1,024 steps (total_steps=1,024); raise total_steps to go "
        "on. Nothing was changed"
    )
    assert folder_bytes(run_dir) == before


def test_checkpoints_of_earlier_versions_load_without_a_seal(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    """A user's checkpoints of format 2 have no seal: they still load (checked by their CRCs); a format-3 one
    that lost its seal is damaged."""
    with zipfile.ZipFile(tiny_run[0] / "checkpoints" / "final.zip") as source:
        entries = {name: source.read(name) for name in source.namelist() if name != SEAL_ENTRY}
    for version in (2, 3):
        checkpoint = tmp_path / f"format{version}.zip"
        metadata = {**json.loads(entries["quarto.json"]), "format": version}
        with zipfile.ZipFile(checkpoint, "w") as target:
            for name, data in {**entries, "quarto.json": json.dumps(metadata).encode()}.items():
                target.writestr(name, data)
        if version == 2:
            assert load_policy(checkpoint).num_timesteps == 1024
        else:
            with pytest.raises(DamagedCheckpointError, match=f"has no {SEAL_ENTRY}, which format 3 writes"):
                load_policy(checkpoint)
