"""``quarto dataset`` (experiments/training/dataset.py) and the example that trains on its files: the arrays hold
the suite's exact values and exactly what ``quarto_v1`` shows for each position, symmetric images keep the
solver's values, a damaged file is refused, bad input is a one-line usage error, and the example learns."""

from __future__ import annotations

import inspect
import io
import json
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

import quarto_env
from agents.solver.minimax import solve
from agents.suites import PositionSource, Suite, build_suite, save_suite
from experiments.training.dataset import (
    ARRAYS,
    DEFAULT_OBSERVATION,
    ILLEGAL,
    DatasetError,
    load_dataset,
    main,
    save_dataset,
)
from experiments.training.train_on_dataset import Config, train
from quarto_env.core import Variant
from quarto_env.env import raw_env
from quarto_env.notation import parse_position
from quarto_env.observation import OBSERVATION_KINDS

VARIANTS = {"standard": Variant.make(), "squares": Variant.make(squares=True)}


def tiny_suite(variant: Variant) -> Suite:
    """15 positions with 6, 5 and 4 empty squares: solved in well under a second."""
    return build_suite(
        "tiny-v1", variant, per_stage=5, seed=3, source=PositionSource(("random", "greedy"), (6, 5, 4), games=30)
    )


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Suite, Path]]:
    folder = tmp_path_factory.mktemp("suites")
    found = {}
    for name, variant in VARIANTS.items():
        suite = tiny_suite(variant)
        save_suite(suite, folder / f"{name}.jsonl")
        found[name] = (suite, folder / f"{name}.jsonl")
    return found


def flags(variant: Variant) -> list[str]:
    return ["--squares"] if variant.squares else []


def write(tmp_path: Path, *argv: str) -> tuple[dict[str, np.ndarray], dict]:
    out = tmp_path / "data.npz"
    assert main([*argv, "--out", str(out), "--overwrite", "--no-progress"]) == 0
    return load_dataset(out)


def env_view(variant: Variant, kind: str, position: str) -> dict[str, np.ndarray]:
    """What ``quarto_v1`` shows the player to move in ``position``."""
    env = quarto_env.env(**variant.to_dict(), observation=kind)
    env.reset(options={"position": position})
    return env.observe(env.agent_selection)


@pytest.mark.parametrize("kind", OBSERVATION_KINDS)
@pytest.mark.parametrize("rules", VARIANTS)
def test_the_arrays_hold_the_suites_values_and_the_envs_view(
    rules: str, kind: str, suites: dict[str, tuple[Suite, Path]], tmp_path: Path
) -> None:
    suite, path = suites[rules]
    arrays, header = write(tmp_path, "--suite", str(path), "--observation", kind, *flags(suite.variant))
    assert header["count"] == len(suite.positions) == len(arrays["value"])
    assert header["source"]["suite"] == "tiny-v1" and header["variant"] == suite.variant.to_dict()
    assert header["channels"] == [c.name for c in OBSERVATION_KINDS[kind].channels]
    assert sorted(arrays) == sorted(ARRAYS)
    for row, solved in enumerate(suite.positions):
        seen = env_view(suite.variant, kind, solved.position)
        np.testing.assert_array_equal(arrays["observations"][row], seen["observation"])
        np.testing.assert_array_equal(arrays["action_mask"][row], seen["action_mask"])
        expected = [solved.action_values.get(a, ILLEGAL) for a in range(suite.variant.num_actions)]
        assert arrays["action_values"][row].tolist() == expected
        assert arrays["value"][row] == solved.value and arrays["empty"][row] == solved.empty
        assert arrays["placing"][row] == (solved.phase == "place") and arrays["critical"][row] == solved.critical
        assert arrays["positions"][row] == solved.position and arrays["origin"][row] == row
    assert {a.dtype.str for n, a in arrays.items() if n not in ("placing", "critical", "origin", "positions")} == {
        "|i1"
    }


def test_symmetric_images_keep_the_solvers_values(suites: dict[str, tuple[Suite, Path]], tmp_path: Path) -> None:
    suite, path = suites["standard"]
    arrays, header = write(
        tmp_path, "--suite", str(path), "--symmetries", "4", "--seed", "7", "--observation", "parity"
    )
    assert header["symmetries"] == {"images": 4, "seed": 7}
    assert len(suite.positions) < header["count"] <= 5 * len(suite.positions)
    origins = arrays["origin"]
    for row, position in enumerate(arrays["positions"]):
        state = parse_position(str(position))
        exact = solve(state, suite.variant, all_moves=True).action_values or {}
        assert arrays["action_values"][row].tolist() == [exact.get(a, ILLEGAL) for a in range(16)], position
        assert arrays["value"][row] == arrays["value"][origins[row]]
        np.testing.assert_array_equal(
            arrays["observations"][row], env_view(suite.variant, "parity", str(position))["observation"]
        )
    first_rows = np.flatnonzero(np.r_[True, origins[1:] != origins[:-1]])
    assert arrays["positions"][first_rows].tolist() == [p.position for p in suite.positions]
    assert len(set(arrays["positions"].tolist())) == header["count"]  # no image twice


def test_sampled_positions_are_solved_within_the_bounds(tmp_path: Path) -> None:
    argv = ("--sample", "2", "--games", "6", "--min-empty", "4", "--max-empty", "5", "--seed", "1")
    arrays, header = write(tmp_path, *argv)
    assert header["source"] | {"sources": None} == {
        "sample": 2, "seed": 1, "games": 6, "min_empty": 4, "max_empty": 5, "sources": None
    }  # fmt: skip
    assert 0 < header["count"] <= 4 and set(arrays["empty"].tolist()) <= {4, 5}
    for row, position in enumerate(arrays["positions"]):
        exact = solve(parse_position(str(position)), Variant.make(), all_moves=True)
        assert arrays["value"][row] == exact.value
        assert {
            a: v for a, v in enumerate(arrays["action_values"][row].tolist()) if v != ILLEGAL
        } == exact.action_values


def test_a_suites_positions_are_kept_within_the_bounds(suites: dict[str, tuple[Suite, Path]], tmp_path: Path) -> None:
    suite, path = suites["standard"]
    arrays, header = write(tmp_path, "--suite", str(path), "--min-empty", "5", "--max-empty", "5")
    assert header["count"] == sum(p.empty == 5 for p in suite.positions) > 0
    assert set(arrays["empty"].tolist()) == {5}


# ---------------------------------------------------------------------------------------------------------
# The file
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def dataset_file(suites: dict[str, tuple[Suite, Path]], tmp_path: Path) -> Path:
    out = tmp_path / "data.npz"
    assert main(["--suite", str(suites["standard"][1]), "--out", str(out)]) == 0
    return out


def test_the_file_reads_with_numpy_alone(dataset_file: Path) -> None:
    with np.load(dataset_file, allow_pickle=False) as data:
        header = json.loads(bytes(data["header"]).decode("utf-8"))
        assert set(data.files) == {"header", *ARRAYS}
        assert data["observations"].shape == (header["count"], 19, 16)
    assert header["format"] == 1 and header["observation"] == DEFAULT_OBSERVATION and header["illegal"] == ILLEGAL


def test_an_edited_array_is_refused_by_its_hash(dataset_file: Path) -> None:
    with np.load(dataset_file, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    load_dataset(dataset_file)  # the control: the file as written loads
    arrays["value"] = arrays["value"].copy()
    arrays["value"][0] = -arrays["value"][0] if arrays["value"][0] else 1
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    dataset_file.write_bytes(buffer.getvalue())
    with pytest.raises(DatasetError, match="damaged: its arrays do not match its header's hash") as caught:
        load_dataset(dataset_file)
    assert "\n" not in str(caught.value)


def _middle_of_entry(data: bytes, name: str) -> int:
    """The offset of the middle byte of entry ``name``'s stored data in the zip ``data``: a byte of the arrays
    themselves (the zip's local headers and directory also hold fields that no reader checks, such as times)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        entry = archive.getinfo(name)
    name_length, extra_length = struct.unpack("<HH", data[entry.header_offset + 26 : entry.header_offset + 30])
    return entry.header_offset + 30 + name_length + extra_length + entry.compress_size // 2


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "text", "no header"])
def test_a_damaged_file_is_refused_in_one_line(dataset_file: Path, damage: str) -> None:
    data = bytearray(dataset_file.read_bytes())
    if damage == "flipped byte":
        data[_middle_of_entry(bytes(data), "observations.npy")] ^= 0xFF
    elif damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "text":
        data = bytearray(b"not a dataset\n")
    else:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            kept = {name: archive.read(name) for name in archive.namelist() if name != "header.npy"}
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, content in kept.items():
                archive.writestr(name, content)
        data = bytearray(buffer.getvalue())
    dataset_file.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="damaged") as caught:
        load_dataset(dataset_file)
    assert "\n" not in str(caught.value)


def test_check_reads_a_file_and_says_what_it_holds(dataset_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    count = load_dataset(dataset_file)[1]["count"]
    expected = f"{dataset_file}: {count:,} solved positions, {DEFAULT_OBSERVATION} planes: hash and rows checked\n"
    assert main(["--check", str(dataset_file)]) == 0 and capsys.readouterr().out == expected
    assert main([f"--check={dataset_file}"]) == 0 and capsys.readouterr().out == expected


@pytest.mark.parametrize("lie", ["value", "critical", "illegal action labelled", "legal action unlabelled"])
def test_check_refuses_rows_that_lie_under_a_fresh_hash(
    dataset_file: Path, lie: str, capsys: pytest.CaptureFixture[str]
) -> None:
    arrays, header = load_dataset(dataset_file)
    arrays = {name: array.copy() for name, array in arrays.items()}
    mask = arrays["action_mask"] == 1
    row = int(np.flatnonzero(arrays["critical"] & ~mask.all(axis=1))[0])
    legal, illegal = np.flatnonzero(mask[row]), np.flatnonzero(~mask[row])
    if lie == "value":
        arrays["value"][row] = arrays["action_values"][row, legal].min()  # critical: below the best
    elif lie == "critical":
        arrays["critical"][row] = False
    elif lie == "illegal action labelled":
        arrays["action_values"][row, illegal[0]] = 0
    else:
        arrays["action_values"][row, legal[0]] = ILLEGAL
    save_dataset(dataset_file, arrays, {k: v for k, v in header.items() if k not in ("format", "count", "sha256")})
    load_dataset(dataset_file)  # its hash is fresh: only the rows tell
    assert main(["--check", str(dataset_file)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("quarto dataset: ") and f"row {row} (" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sample", "3"], "--check reads a dataset and takes no other option: drop --sample"),
        (["--observation=raw", "--squares"], "drop --observation --squares"),
    ],
)
def test_check_takes_no_other_option(
    dataset_file: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--check", str(dataset_file), *argv])
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_check_of_a_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--check", str(tmp_path / "nope.npz")])
    assert exited.value.code == 2
    assert (
        "--check '" in (err := capsys.readouterr().err)
        and "nope.npz' does not exist (a dataset file or a folder" in err
    )
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(SystemExit) as exited:
        main(["--check", str(tmp_path / "pipe")])
    assert exited.value.code == 2 and "is not a regular file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["--check", str(tmp_path / "nope.npz"), "--out", str(tmp_path / "x.npz")])
    assert exited.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_the_default_observation_is_the_envs() -> None:
    default = inspect.signature(raw_env.__init__).parameters["observation"].default
    assert default == DEFAULT_OBSERVATION


# ---------------------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------------------
BAD = {
    "unknown kind": (["--observation", "pixels"], ["pixels", "raw", "tactical", "lookahead", "parity"]),
    "unknown suite": (["--suite", "nosuch-v1"], ["nosuch-v1", "shipped suites"]),
    "missing suite file": (["--suite", "missing/nosuch.jsonl"], ["does not exist"]),
    "sample 0": (["--sample", "0"], ["sample must be an integer >= 1"]),
    "sample text": (["--sample", "many"], ["sample must be an integer >= 1", "'many'"]),
    "min-empty 1": (["--sample", "2", "--min-empty", "1"], ["--min-empty", "empty squares must be an integer >= 2"]),
    "max-empty 17": (["--sample", "2", "--max-empty", "17"], ["--max-empty", "<= 16"]),
    "min above max": (["--sample", "2", "--min-empty", "6", "--max-empty", "5"], ["--min-empty 6 is above"]),
    "both sources": (["--sample", "2", "--suite", "x"], ["not allowed with"]),
    "games with a suite": (["--suite", "<suite>", "--games", "3"], ["--games goes with --sample"]),
    "symmetries": (
        ["--suite", "<suite>", "--symmetries", "12288"],
        ["symmetries must be an integer >= 0 and <= 12287"],
    ),
    "declaration sample": (["--sample", "2", "--declaration"], ["--sample takes no --declaration"]),
    "other rules": (["--suite", "<suite>", "--squares"], ["is for standard rules, not squares"]),
    "no default suite": (["--attributes", "2"], ["no shipped suite", "--suite FILE or --sample N"]),
}


@pytest.mark.parametrize("case", BAD, ids=str)
def test_bad_input_is_a_one_line_usage_error(
    case: str, suites: dict[str, tuple[Suite, Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, names = BAD[case]
    argv = [str(suites["standard"][1]) if word == "<suite>" else word for word in argv]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--out", str(tmp_path / "data.npz"), "--no-progress"])
    assert exited.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("quarto dataset: ") and all(name in line for name in names), line
    assert not (tmp_path / "data.npz").exists()


def test_an_existing_file_is_replaced_only_with_overwrite(
    dataset_file: Path, suites: dict[str, tuple[Suite, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--suite", str(suites["standard"][1]), "--out", str(dataset_file), "--observation", "raw"]
    with pytest.raises(SystemExit):
        main(argv)
    error = capsys.readouterr().err
    assert "already holds a file: --overwrite replaces it" in error
    assert load_dataset(dataset_file)[1]["observation"] == DEFAULT_OBSERVATION
    assert main([*argv, "--overwrite"]) == 0
    assert load_dataset(dataset_file)[1]["observation"] == "raw"


# ---------------------------------------------------------------------------------------------------------
# The example of docs/dataset.md
# ---------------------------------------------------------------------------------------------------------
def test_the_example_learns_and_a_frozen_network_does_not(
    suites: dict[str, tuple[Suite, Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "data.npz"
    main(["--suite", str(suites["standard"][1]), "--symmetries", "3", "--observation", "parity", "--out", str(out)])
    config = Config(dataset=str(out), epochs=10, batch_size=16, learning_rate=1e-2, width=32, seed=0)
    losses = train(config)
    assert losses[-1] < 0.8 * losses[0], losses
    assert "held out: value" in capsys.readouterr().out
    frozen = train(Config(**{**vars(config), "learning_rate": 0.0}))
    assert max(frozen) - min(frozen) < 1e-4, frozen  # the control: without learning the loss stays put
