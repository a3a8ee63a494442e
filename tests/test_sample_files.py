"""Sample datasets as strict as the rest (:mod:`agents.tree.sample_files`, issue 50): one writer a folder under the
lock every writer takes, appends only under the same whole header, files refused before a byte is read (pipes,
devices, links out of the folder, sizes over the bound), a re-sealed manifest of the wrong structure refused, and
every damaged ``.npz`` one line -- a byte-flip sweep gives no traceback. The samples are made without a search:
positions of seeded random games, with the planes and masks they give and a uniform policy."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agents.storage.integrity import make_seal, sealed_json
from agents.tree.puct import encode_positions
from agents.tree.sample_files import (
    MANIFEST,
    MANIFEST_KIND,
    SAMPLES_FORMAT,
    SHARD_KIND,
    SampleDataset,
    SampleWriter,
    read_npz,
)
from agents.tree.sessions import Samples
from experiments.training import dataset as dataset_command
from quarto_env.core import INITIAL_STATE, STANDARD, Variant, legal_actions, position_array, step
from quarto_env.errors import CallOrderError, DatasetError
from quarto_env.observation import observation_kind
from tests.test_dataset import tiny_suite

REPOSITORY = Path(__file__).resolve().parent.parent
SQUARES = Variant.make(squares=True)


def samples(kind: str = "tactical", variant: Variant = STANDARD, games: int = 2, seed: int = 0) -> Samples:
    """The positions of ``games`` seeded random games that a search would sample (those with actions to search) as
    samples: their planes and masks, a uniform policy."""
    rng = np.random.default_rng(seed)
    states = []
    for _ in range(games):
        state = INITIAL_STATE
        while not state.over:
            states.append(state)
            state = step(variant, state, int(rng.choice(legal_actions(variant, state))))
    positions = position_array(states)
    kind_ = observation_kind(kind)
    positions = positions[encode_positions(positions, kind_, variant)[1].any(1)]  # searched positions only
    rows = len(positions)
    made = Samples(
        positions,
        np.zeros((rows, 16), np.float32),
        np.zeros(rows, np.float32),
        np.zeros(rows, np.float32),
        np.zeros(rows, np.int64),
        np.arange(rows, dtype=np.int64),
        np.zeros(rows, np.int64),
        kind_,
        variant,
    )
    made.policy = (made.legal / made.legal.sum(1, keepdims=True)).astype(np.float32)
    return made


def write_dataset(folder: Path, kind: str = "tactical", variant: Variant = STANDARD, shard_rows: int = 16) -> Path:
    with SampleWriter(folder, kind, variant, shard_rows=shard_rows) as writer:
        writer.write(samples(kind, variant))
    return folder


def tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def reseal(folder: Path, edit: dict[str, object] | None = None, **changes: object) -> None:
    """Rewrite the manifest with ``changes`` (keys of its body) and a fresh seal: an edit a checksum cannot see."""
    body = json.loads((folder / MANIFEST).read_text())
    body.pop("seal")
    body.update(changes)
    if edit:
        for index, seal in edit.items():
            body["shards"][int(index)] = seal
    (folder / MANIFEST).write_text(json.dumps(sealed_json(body, MANIFEST_KIND, SAMPLES_FORMAT)))


@pytest.fixture(scope="module")
def tactical(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("samples") / "data")


@pytest.fixture
def copy(tactical: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    target.mkdir()
    for path in tactical.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


# ---------------------------------------------------------------------------------------------------------
# One writer a folder
# ---------------------------------------------------------------------------------------------------------
def test_a_second_writer_in_this_process_is_refused_naming_the_first(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with SampleWriter(folder, "tactical", STANDARD, shard_rows=16) as first:
        with pytest.raises(DatasetError, match=r"is in use by another writer in this process \(pid \d+: ") as error:
            SampleWriter(folder, "tactical", STANDARD, shard_rows=16)
        assert "\n" not in str(error.value) and str(folder) in str(error.value)
        first.write(samples())
    dataset = SampleDataset(folder)
    assert dataset.validate()["rows"] == len(samples())


HOLD = """
import sys, time
from agents.tree.sample_files import SampleWriter
from quarto_env.core import STANDARD
with SampleWriter(sys.argv[1], "tactical", STANDARD):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_writer_in_another_process_is_refused_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], cwd=REPOSITORY, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DatasetError, match=rf"in use by another process \(pid {holder.pid}: "):
            SampleWriter(folder, "tactical", STANDARD)
    finally:
        holder.kill()  # SIGKILL: the kernel drops its lock
        holder.wait()
    write_dataset(folder)  # the lock file it left blocks nobody
    assert SampleDataset(folder).rows == len(samples())


def test_a_closed_writer_lets_the_folder_go_and_writes_no_more(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "data")
    writer = SampleWriter(folder, "tactical", STANDARD, shard_rows=16)
    writer.close()
    with pytest.raises(CallOrderError, match="closed"):
        writer.write(samples())
    write_dataset(folder)  # free again: appended
    assert SampleDataset(folder).rows == 2 * len(samples()) and not (folder / ".lock").exists()
    with pytest.raises(KeyError), SampleWriter(folder, "tactical", STANDARD) as failing:
        failing.write(samples())
        raise KeyError("the caller's own failure")  # publishes nothing more, and lets the folder go too
    write_dataset(folder)
    assert SampleDataset(folder).rows == 3 * len(samples())


def test_the_next_writer_removes_a_killed_writers_temporary_files(copy: Path) -> None:
    orphan = copy / ".shard-00004.npz.abcd1234.tmp.npz"  # atomic_write's temporary, left by kill -9
    orphan.write_bytes(b"half a shard")
    write_dataset(copy)
    assert not orphan.exists() and SampleDataset(copy).validate()["rows"] == 2 * len(samples())


# ---------------------------------------------------------------------------------------------------------
# Appending checks the whole header
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "variant", "named"),
    [
        ("raw", STANDARD, "observation tempo (27 channels), not this writer's raw (17 channels): append only"),
        (
            "lookahead",
            SQUARES,
            "observation tempo (27 channels), not this writer's lookahead (21 channels); variant standard, not this "
            "writer's squares: append only",
        ),
    ],
)
def test_appending_other_samples_is_refused_naming_what_differs(
    tmp_path: Path, kind: str, variant: Variant, named: str
) -> None:
    folder = write_dataset(tmp_path / "data", "tempo")
    before = tree(folder)
    with pytest.raises(DatasetError, match="holds samples of ") as error:
        SampleWriter(folder, kind, variant)
    assert "\n" not in str(error.value) and named in str(error.value), str(error.value)
    assert tree(folder) == before and not (folder / ".lock").exists()
    write_dataset(folder, "tempo")  # the same header appends
    assert SampleDataset(folder).validate()["rows"] == 2 * len(samples("tempo"))


# ---------------------------------------------------------------------------------------------------------
# Files refused before a byte is read
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def rescuer() -> Iterator[list[Path]]:
    """Pipes to open for writing after a few seconds, and close: a reader that waits on one (the bug) is
    released, and fails the test by its time, not by hanging the suite."""
    pipes: list[Path] = []
    stop = threading.Event()

    def rescue() -> None:
        if not stop.wait(5):
            for pipe in pipes:
                with open(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK), "wb") as handle:
                    handle.write(b"x")

    thread = threading.Thread(target=rescue, daemon=True)
    thread.start()
    yield pipes
    stop.set()


def _fifo(path: Path, rescuer: list[Path]) -> None:
    path.unlink()
    os.mkfifo(path)
    rescuer.append(path)


def _refused_fast(call: object, match: str) -> None:
    started = time.monotonic()
    with pytest.raises(DatasetError, match=match) as error:
        call()  # type: ignore[operator]
    assert time.monotonic() - started < 4 and "\n" not in str(error.value)


def test_a_manifest_that_is_a_pipe_is_refused_unread(copy: Path, rescuer: list[Path]) -> None:
    _fifo(copy / MANIFEST, rescuer)
    _refused_fast(lambda: SampleDataset(copy), "not a regular file")


def test_a_shard_that_is_a_pipe_is_refused_unread(copy: Path, rescuer: list[Path]) -> None:
    _fifo(copy / "shard-00001.npz", rescuer)
    dataset = SampleDataset(copy)
    _refused_fast(dataset.validate, r"shard 1 \(shard-00001.npz\) is not a regular file")
    _refused_fast(lambda: dataset.read_shard(1), "not a regular file")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_shard_linked_to_dev_zero_is_refused_unread(copy: Path) -> None:
    """On the code before, this read /dev/zero until the memory ran out: run it only on a fixed checkout."""
    (copy / "shard-00000.npz").unlink()
    (copy / "shard-00000.npz").symlink_to("/dev/zero")
    _refused_fast(SampleDataset(copy).validate, "link out of the folder")


def test_a_shard_linked_out_of_the_folder_is_refused(copy: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.npz"
    (copy / "shard-00000.npz").rename(outside)  # the same bytes: its seal would pass
    (copy / "shard-00000.npz").symlink_to(outside)
    _refused_fast(SampleDataset(copy).validate, "is a link out of the folder")
    (copy / "kept.npz").write_bytes(outside.read_bytes())
    (copy / "shard-00000.npz").unlink()
    (copy / "shard-00000.npz").symlink_to("kept.npz")  # a link inside the folder is read
    assert SampleDataset(copy).validate()["rows"] == len(samples())


def test_a_shard_of_another_size_than_its_seal_is_refused_unread(copy: Path) -> None:
    with open(copy / "shard-00001.npz", "ab") as handle:
        handle.truncate(1 << 20)  # sparse: bytes never written
    _refused_fast(SampleDataset(copy).validate, r"holds 1,048,576 bytes, not the [\d,]+ of its seal: refused unread")


def test_a_manifest_over_its_bound_is_refused_unread(copy: Path) -> None:
    with open(copy / MANIFEST, "ab") as handle:
        handle.truncate(1 << 27)  # sparse: 128 MiB never written
    _refused_fast(lambda: SampleDataset(copy), r"\(manifest.json\) holds 134,217,728 bytes, more than the 67,108,864")


MALFORMED = {
    "shards none": ({"shards": "none"}, 'its shards are "none", not a list of shard seals'),
    "shard a string": ({"shards": ["shard-00000.npz"]}, "shard 0 is"),
    "shard name out of the folder": ({0: {"name": "../data/shard-00001.npz"}}, "not the seal of shard-00000.npz"),
    "rows negative": ({0: {"rows": -1}}, "shard 0 has -1 rows"),
    "rows true": ({0: {"rows": True}}, "shard 0 has true rows"),
    "bytes huge": ({0: {"bytes": 1 << 40}}, "bytes, not an integer from 1 to 1,073,741,824"),
    "rows total": ({"rows": 1}, "its rows are 1, where its shards hold"),
    "fields": ({"fields": {}}, "its fields are not those of samples of tactical planes"),
    "kind": ({"dataset": "my samples"}, 'its dataset is "my samples"'),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_resealed_manifest_of_the_wrong_structure_is_refused_in_one_line(copy: Path, case: str) -> None:
    changes, message = MALFORMED[case]
    manifest = json.loads((copy / MANIFEST).read_text())
    shard_edits = {
        key: {**manifest["shards"][key], **value}  # type: ignore[dict-item]
        for key, value in changes.items()
        if isinstance(key, int)
    }
    reseal(copy, shard_edits, **{key: value for key, value in changes.items() if isinstance(key, str)})
    with pytest.raises(DatasetError) as error:
        SampleDataset(copy).validate()
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_quarto_dataset_check_refuses_a_pipe_in_a_folder_in_one_line(
    copy: Path, rescuer: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _fifo(copy / "shard-00002.npz", rescuer)
    started = time.monotonic()
    assert dataset_command.main(["--check", str(copy)]) == 1
    error = capsys.readouterr().err
    assert time.monotonic() - started < 4 and error.count("\n") == 1 and "not a regular file" in error


# ---------------------------------------------------------------------------------------------------------
# Damaged .npz: one line, no numpy advice
# ---------------------------------------------------------------------------------------------------------
def _shard_with(copy: Path, payload: bytes, index: int = 0) -> None:
    """Shard ``index`` replaced by ``payload`` under a fresh seal: only the reading of the .npz can tell."""
    manifest = json.loads((copy / MANIFEST).read_text())
    seal = manifest["shards"][index]
    (copy / seal["name"]).write_bytes(payload)
    fresh = make_seal(SHARD_KIND, SAMPLES_FORMAT, payload, name=seal["name"], rows=seal["rows"])
    reseal(copy, {str(index): fresh})


def test_a_shard_of_python_objects_is_refused_without_numpys_advice(copy: Path) -> None:
    arrays = SampleDataset(copy).read_shard(0)
    arrays["value"] = np.array([object()] * len(arrays["value"]), dtype=object)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    _shard_with(copy, buffer.getvalue())
    with pytest.raises(DatasetError, match="holds Python objects") as error:
        SampleDataset(copy).validate()
    assert "allow_pickle" not in str(error.value)


@pytest.mark.parametrize(("offset", "what"), [(6, "version needed"), (10, "compression method"), (8, "flags")])
def test_a_changed_byte_in_the_central_directory_is_one_line(copy: Path, offset: int, what: str) -> None:
    payload = bytearray((copy / "shard-00000.npz").read_bytes())
    directory = payload.rfind(b"PK\x01\x02")  # the central directory's last entry
    payload[directory + offset] ^= 0x7F
    _shard_with(copy, bytes(payload))
    with pytest.raises(DatasetError, match=r"shard 0 \(shard-00000.npz\) is damaged") as error:
        SampleDataset(copy).validate()
    assert "\n" not in str(error.value)


def flipped(payload: bytes, offsets: range) -> Iterator[tuple[int, bytes]]:
    for offset in offsets:
        damaged = bytearray(payload)
        damaged[offset] ^= 0xFF
        yield offset, bytes(damaged)


def test_a_byte_flip_sweep_of_a_shard_gives_no_traceback(copy: Path) -> None:
    """Every 3rd byte of a shard flipped in turn, read by read_npz (the whole sweep is a fault-run case):
    a DatasetError of one line, or arrays (a byte the reader does not use)."""
    payload = (copy / "shard-00000.npz").read_bytes()
    for offset, damaged in flipped(payload, range(0, len(payload), 3)):
        try:
            read_npz(damaged, "shard", 1 << 24)
        except DatasetError as error:
            assert "\n" not in str(error) and "allow_pickle" not in str(error), (offset, error)


def test_a_byte_flip_sweep_of_a_quarto_dataset_file_gives_no_traceback(tmp_path: Path) -> None:
    """Every 5th byte of a small ``quarto dataset`` file flipped in turn, checked as ``--check`` does."""
    path = tmp_path / "data.npz"
    arrays = dataset_command.dataset_arrays(STANDARD, tiny_suite(STANDARD).positions[:4], "raw")
    dataset_command.save_dataset(path, arrays, {"observation": "raw", "actions": 16})
    payload = path.read_bytes()
    damaged_file = tmp_path / "damaged.npz"
    for offset, damaged in flipped(payload, range(0, len(payload), 5)):
        damaged_file.write_bytes(damaged)
        try:
            dataset_command.check_dataset(damaged_file)
        except DatasetError as error:
            assert "\n" not in str(error) and "allow_pickle" not in str(error), (offset, error)


def test_a_dataset_file_over_its_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    with open(path, "wb") as handle:
        handle.truncate(dataset_command.MAX_DATASET_BYTES + 1)  # sparse: never written
    started = time.monotonic()
    with pytest.raises(DatasetError, match=r"holds 17,179,869,185 bytes, more than the 17,179,869,184") as error:
        dataset_command.load_dataset(path)
    assert time.monotonic() - started < 4 and "refused unread" in str(error.value)


def test_read_npz_refuses_entries_that_are_not_arrays_and_sizes_over_the_bound() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(DatasetError, match=r'its entries are \["notes.txt"\]'):
        read_npz(buffer.getvalue(), "x.npz", 1 << 20)
    buffer = io.BytesIO()
    np.savez(buffer, a=np.zeros(1000))
    with pytest.raises(DatasetError, match="declares 8,128 bytes of arrays, more than 100"):
        read_npz(buffer.getvalue(), "x.npz", 100)


# ---------------------------------------------------------------------------------------------------------
# Empty paths
# ---------------------------------------------------------------------------------------------------------
def test_an_empty_folder_name_is_refused_as_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where "" would otherwise be read as "."
    for call in (lambda: SampleWriter("", "tactical", STANDARD), lambda: SampleDataset("")):
        with pytest.raises(DatasetError, match="'' is an empty path"):
            call()
    assert list(tmp_path.iterdir()) == []
