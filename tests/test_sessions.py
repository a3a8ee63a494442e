"""The sessions of :mod:`agents.tree.sessions` (the batched search driven by an outside evaluator: its checks, samples,
game records and two-model matches), the numpy example of docs/examples, and the self-play dataset of
:mod:`agents.tree.sample_files` (round trip, validation, refusal of a tampered shard and of another version)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agents.storage.integrity import sealed_json
from agents.tree.sample_files import MANIFEST, MANIFEST_KIND, SAMPLES_FORMAT, SampleDataset, SampleWriter
from agents.tree.sessions import (
    ArenaSession,
    LeafBatch,
    PUCTOptions,
    SelfPlaySession,
)
from experiments.arena.records import record_line
from experiments.arena.replay import load_games
from experiments.training import dataset as dataset_command
from quarto_env.core import FIELD_TO_MOVE, NUM_ACTIONS, STANDARD, Variant, position_array, state_of_row
from quarto_env.errors import CallOrderError, DatasetError, EvaluationError, QuartoError, QuartoValueError
from quarto_env.notation import format_position
from quarto_env.observation import OBSERVATION_KINDS

REPO = Path(__file__).resolve().parent.parent
FEW = PUCTOptions(simulations=8)


def uniform(batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((len(batch), NUM_ACTIONS), np.float32), np.zeros(len(batch), np.float32)


def finished_selfplay(games: int = 3, seed: int = 0, **session: object) -> SelfPlaySession:
    return SelfPlaySession(games, FEW, seed=seed, **session).run(uniform)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# The protocol and its checks
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("logits", "values", "message"),
    [
        (np.zeros((2, 15), np.float32), np.zeros(2, np.float32), r"logits must have shape \(2, 16\), got \(2, 15\)"),
        (np.zeros((2, 16), np.float32), np.zeros((2, 1), np.float32), r"values must have shape \(2,\), got \(2, 1\)"),
        (np.zeros((2, 16), np.int64), np.zeros(2, np.float32), "logits must be floating point .* got int64"),
        (np.full((2, 16), np.nan, np.float32), np.zeros(2, np.float32), "logits of leaf 0 are not finite"),
        (np.zeros((2, 16), np.float32), np.array([0.0, np.nan], np.float32), "values must be finite .* leaf 1"),
        (np.zeros((2, 16), np.float32), np.array([0.0, 1.5]), r"values must .* \[-1, 1\]; leaf 1 has 1.5"),
        ([[0.0] * 16, [0.0] * 15], np.zeros(2, np.float32), "logits are no array"),
    ],
)
def test_a_bad_evaluation_is_refused_in_one_line_naming_the_batch(logits: object, values: object, message: str) -> None:
    session = SelfPlaySession(2, FEW, seed=0)
    batch = session.pending()
    session.submit(*uniform(batch))  # batch 0: the roots
    batch = session.pending()
    assert (batch.index, len(batch)) == (1, 2)
    with pytest.raises(EvaluationError, match=rf"^batch 1 \(model 0, 2 leaves\): {message}") as error:
        session.submit(logits, values)
    assert "\n" not in str(error.value) and isinstance(error.value, QuartoValueError | QuartoError)
    assert session.pending() is batch  # left as it was: the same batch, evaluated again
    session.submit(*uniform(batch))
    assert session.pending().index == 2


def test_minus_infinity_at_illegal_actions_is_accepted() -> None:
    session = SelfPlaySession(2, FEW, seed=0)
    while not session.done:
        batch = session.pending()
        logits = np.where(batch.legal, 0.0, -np.inf)
        session.submit(logits, np.zeros(len(batch)))
    assert len(session.games) == 2


def test_the_protocol_refuses_calls_out_of_order() -> None:
    session = SelfPlaySession(1, FEW, seed=0)
    with pytest.raises(CallOrderError, match="call pending"):
        session.submit(np.zeros((1, 16)), np.zeros(1))
    batch = session.pending()
    session.submit(*uniform(batch))
    with pytest.raises(CallOrderError, match="batch 0 was submitted"):
        batch.legal  # noqa: B018 -- read after submit: gone
    session.run(uniform)
    assert session.done
    with pytest.raises(CallOrderError, match="done"):
        session.pending()


def test_search_options_are_checked_with_their_allowed_values() -> None:
    with pytest.raises(QuartoValueError, match="root must be one of puct, gumbel, got 'alpha'"):
        PUCTOptions(root="alpha")
    with pytest.raises(QuartoValueError, match="targets must be one of visits, completed_q"):
        PUCTOptions(targets="counts")
    with pytest.raises(QuartoValueError, match="gumbel_actions"):
        PUCTOptions(gumbel_actions=17)
    with pytest.raises(QuartoValueError, match="endless self-play"):
        SelfPlaySession(None)


@pytest.mark.parametrize("kind", list(OBSERVATION_KINDS))
def test_batches_carry_the_planes_of_the_observation_kind_asked_for(kind: str) -> None:
    session = SelfPlaySession(2, FEW, observation=kind, seed=1)
    batch = session.pending()
    assert batch.observations.dtype == np.int8 and batch.observations.shape == (2, *OBSERVATION_KINDS[kind].shape)
    assert batch.legal.shape == (2, NUM_ACTIONS) and batch.legal.any(1).all()
    assert batch.positions.shape == (2, 8) and batch.games.tolist() == [0, 1]


# ---------------------------------------------------------------------------------------------------------
# Self-play: samples and game records
# ---------------------------------------------------------------------------------------------------------
def test_samples_have_their_fields_and_agree_with_the_game_records() -> None:
    session = finished_selfplay(3, seed=2, observation="parity")
    session.model_version = 7  # stamped on what is searched from now on: nothing, the games are over
    samples = session.samples()
    n = len(samples)
    assert n > 10 and samples.observations.shape == (n, 23, 16) and samples.legal.shape == (n, NUM_ACTIONS)
    assert np.allclose(samples.policy.sum(1), 1, atol=1e-5) and not (samples.policy[~samples.legal] > 0).any()
    assert set(np.unique(samples.outcome)) <= {-1.0, 0.0, 1.0} and (np.abs(samples.root_value) <= 1).all()
    assert (samples.model_version == 0).all() and sorted(set(samples.game.tolist())) == [0, 1, 2]
    records = {game.game: game.record for game in session.games}
    for row in range(n):
        record = records[int(samples.game[row])]
        assert format_position(state_of_row(samples.positions[row])) == record.positions[int(samples.ply[row])]
        to_move = samples.positions[row, FIELD_TO_MOVE]
        expected = 0.0 if record.winner < 0 else (1.0 if record.winner == to_move else -1.0)
        assert samples.outcome[row] == expected
    assert len(session.samples()) == 0  # taken


def test_finished_games_replay_as_game_records(tmp_path: Path) -> None:
    variant = Variant.make(squares=True)
    session = finished_selfplay(2, seed=3, variant=variant)
    path = tmp_path / "games.jsonl"
    path.write_text("".join(record_line(game.record, variant, **game.extra) for game in session.games))
    replayed = load_games(path)
    assert len(replayed) == 2
    for (record, frames), game in zip(replayed, session.games, strict=True):
        assert record["actions"] == game.record.actions and len(frames) == len(game.record.actions) + 1
        assert frames[-1][0].over


def test_a_finished_session_plays_its_games_parallel_at_a_time() -> None:
    session = finished_selfplay(5, seed=4, parallel=2)
    assert sorted(game.game for game in session.games) == [0, 1, 2, 3, 4] and session.search.max_games == 2


# ---------------------------------------------------------------------------------------------------------
# Two-model matches
# ---------------------------------------------------------------------------------------------------------
def test_a_strong_model_beats_a_weak_one_and_batches_name_the_model_to_move() -> None:
    strong, weak = PUCTOptions(simulations=200), PUCTOptions(simulations=2)
    arena = ArenaSession(4, (strong, weak), seed=5, names=("strong", "weak"))
    seen = {0: 0, 1: 0}

    def tagged(model: int):  # type: ignore[no-untyped-def]
        def evaluate(batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
            assert batch.model == model
            to_move = arena.boards.positions[batch.games, FIELD_TO_MOVE]  # at the roots: the games as they stand
            assert ((to_move ^ (batch.games % 2)) == model).all()  # model 0 gives first in even games
            seen[model] += 1
            return uniform(batch)

        return evaluate

    summary = arena.run(tagged(0), tagged(1)).summary()
    assert summary["games"] == 8 and summary["score"] >= 0.75, summary
    assert seen[0] > seen[1] > 0
    seats = {game.game: game.record.seats for game in arena.games}
    assert seats[0] == ("strong", "weak") and seats[1] == ("weak", "strong")
    openings = {game.game: game.opening for game in arena.games}
    assert all(openings[2 * p] == openings[2 * p + 1] and len(openings[2 * p]) == 4 for p in range(4))


def test_an_arena_takes_one_evaluator_per_model() -> None:
    with pytest.raises(QuartoValueError, match="takes 2 evaluator"):
        ArenaSession(1, FEW, seed=0).run(uniform)


# ---------------------------------------------------------------------------------------------------------
# The numpy example
# ---------------------------------------------------------------------------------------------------------
def test_the_numpy_example_plays_self_play_and_a_match(tmp_path: Path) -> None:
    example = REPO / "docs" / "examples" / "external_inference.py"
    arguments = ["--games", "2", "--pairs", "1", "--sims", "4", "--dataset", str(tmp_path / "data")]
    done = subprocess.run(
        [sys.executable, str(example), *arguments, "--records", str(tmp_path / "games.jsonl")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "self-play: 2 games" in done.stdout and "match: mlp against uniform, 2 games" in done.stdout
    assert re.search(r"score [\d.]+ \(95% interval [\d.]+ to [\d.]+\)", done.stdout), done.stdout
    assert len(load_games(tmp_path / "games.jsonl")) == 2 and SampleDataset(tmp_path / "data").rows > 0


@pytest.mark.slow
def test_the_torch_example_says_what_its_match_can_tell() -> None:
    pytest.importorskip("torch")
    example = REPO / "docs" / "examples" / "external_inference_torch.py"
    arguments = ["--games", "2", "--pairs", "2", "--sims", "4", "--steps", "2"]
    done = subprocess.run([sys.executable, str(example), *arguments], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert re.search(
        r"4 games: .*score [\d.]+ \(95% interval [\d.]+ to [\d.]+\): .*(stronger|weaker|0.5 is inside)", done.stdout
    )


# ---------------------------------------------------------------------------------------------------------
# The dataset
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def samples_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    folder = tmp_path_factory.mktemp("samples") / "data"
    session = finished_selfplay(4, seed=6, observation="tactical")
    samples = session.samples()
    with SampleWriter(folder, "tactical", STANDARD, shard_rows=40) as writer:
        writer.write(samples)
    return folder, len(samples)


def test_the_dataset_round_trips_as_minibatches(samples_folder: tuple[Path, int]) -> None:
    folder, rows = samples_folder
    dataset = SampleDataset(folder)
    assert dataset.validate() == {"shards": -(-rows // 40), "rows": rows}
    in_order = list(dataset.minibatches(16, shuffle=False))
    assert [len(b["value"]) for b in in_order] == [16] * (rows // 16) + ([rows % 16] if rows % 16 else [])
    positions = np.concatenate([b["positions"] for b in in_order])
    shuffled = np.concatenate([b["positions"] for b in dataset.minibatches(16, fields=["positions"], seed=1)])
    assert sorted(map(bytes, positions)) == sorted(map(bytes, shuffled)) and not np.array_equal(positions, shuffled)
    first = in_order[0]
    assert first["observations"].shape == (16, 19, 16) and first["policy"].dtype == np.float32


def test_appending_publishes_more_shards(samples_folder: tuple[Path, int], tmp_path: Path) -> None:
    folder, rows = samples_folder
    copy = tmp_path / "data"
    copy.mkdir()
    for path in folder.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    with SampleWriter(copy, "tactical", STANDARD, shard_rows=1000) as writer:
        writer.write(finished_selfplay(1, seed=7, observation="tactical").samples())
    assert SampleDataset(copy).rows > rows and SampleDataset(copy).validate()["rows"] == SampleDataset(copy).rows


def tampered_copy(folder: Path, target: Path) -> Path:
    target.mkdir()
    for path in folder.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


def test_validate_refuses_a_tampered_shard(samples_folder: tuple[Path, int], tmp_path: Path) -> None:
    copy = tampered_copy(samples_folder[0], tmp_path / "data")
    shard = copy / "shard-00001.npz"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    dataset = SampleDataset(copy)  # the manifest is intact
    with pytest.raises(DatasetError, match=r"shard 1 \(shard-00001.npz\) does not match its checksum") as error:
        dataset.validate()
    assert "\n" not in str(error.value)


def test_validate_refuses_rows_that_lie(samples_folder: tuple[Path, int], tmp_path: Path) -> None:
    """A shard rewritten with a consistent checksum but a policy off its legal actions: the deep check."""
    arrays = SampleDataset(samples_folder[0]).read_shard(0)
    arrays["legal"][3] = False
    with SampleWriter(tmp_path / "lie", "tactical", STANDARD) as writer:
        writer.write(arrays)
    with pytest.raises(DatasetError, match="shard 0: row 3 has no legal action"):
        SampleDataset(tmp_path / "lie").validate()


def test_quarto_dataset_check_validates_a_samples_folder(
    samples_folder: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, rows = samples_folder
    assert dataset_command.main(["--check", str(folder)]) == 0
    assert capsys.readouterr().out == (
        f"{folder}: {rows} self-play samples in {-(-rows // 40)} shard(s), tactical planes, standard rules: "
        "every shard checked\n"
    )
    copy = tampered_copy(folder, tmp_path / "data")
    shard = copy / "shard-00001.npz"
    shard.write_bytes(shard.read_bytes()[:-10])
    assert dataset_command.main(["--check", str(copy)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "quarto dataset: " in captured.err and "shard 1 (shard-00001.npz)" in captured.err


def test_a_dataset_of_another_version_is_refused_in_one_line(samples_folder: tuple[Path, int], tmp_path: Path) -> None:
    copy = tampered_copy(samples_folder[0], tmp_path / "data")
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest.pop("seal")
    manifest["versions"]["engine"] = "0.0.9"
    manifest["versions"]["observation"]["version"] = "0123456789abcdef"
    (copy / MANIFEST).write_text(json.dumps(sealed_json(manifest, MANIFEST_KIND, SAMPLES_FORMAT)))
    with pytest.raises(DatasetError, match=r'another engine "0.0.9" \(this code: ".*"\), observation') as error:
        SampleDataset(copy)
    assert "\n" not in str(error.value) and "refused" in str(error.value)


def test_a_manifest_altered_without_its_seal_is_refused(samples_folder: tuple[Path, int], tmp_path: Path) -> None:
    copy = tampered_copy(samples_folder[0], tmp_path / "data")
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["rows"] += 1
    (copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match="does not match its checksum"):
        SampleDataset(copy)


def test_a_batchs_positions_are_rows_of_position_array() -> None:
    """A batch's positions are rows of position_array (what an evaluator that reads positions gets)."""
    session = SelfPlaySession(1, FEW, seed=0)
    batch = session.pending()
    assert np.array_equal(batch.positions, position_array([state_of_row(batch.positions[0])]))
