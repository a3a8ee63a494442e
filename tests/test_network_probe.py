"""``quarto bench network`` (experiments/probe/) and the designs of agents/networks/policy_value.py: the probe's labels
against the solver, its shares against a recomputation by brute force, the W/D/L loss weights, the mistake depths,
the augmentation of the per-action labels; every design's forward pass, symmetry and checkpoint, and the hand
piece's pathway."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th
import torch.nn.functional as F

from agents.alphazero import load_network, save_checkpoint
from agents.networks.checkpoints import CheckpointError, CheckpointHeader
from agents.networks.designs import EQUIVARIANT_DESIGNS, LoopedNetwork, TransformerNetwork
from agents.networks.policy_value import (
    FAST_MIN_BATCH,
    NETWORK_DESIGNS,
    PolicyValueNetwork,
    SlotNetwork,
    Workspace,
)
from agents.solver.minimax import MinimaxAgent, solve
from agents.tree.puct import encode_positions
from experiments.evaluation.grading import PositionValues, exact_action_values
from experiments.probe import fit, positions
from experiments.probe import network as probe
from experiments.training import plot
from quarto_env.core import NO_PIECE, NO_WINNER, NUM_ACTIONS, NUM_SQUARES, STANDARD, State, bits, position_array, step
from quarto_env.observation import PLACING, ObservationKind, observation_kind
from quarto_env.symmetry import Symmetries

PROBE_ARGS = ["--positions", "40", "--min-empty", "6", "--max-empty", "8", "--epochs", "2", "--seed", "3"]


@pytest.fixture(scope="module")
def labelled() -> tuple[list[State], positions.LabelledPositions]:
    """40 labelled positions with 6-8 empty squares (seed 3), as the probe builds them, and their states."""
    th.set_num_threads(1)
    data = positions.sample_labelled_positions(
        STANDARD, observation_kind("parity"), 40, 3, 6, 8, PositionValues(STANDARD)
    )
    return [_state(row) for row in data.positions], data


def _state(row: np.ndarray) -> State:
    """The :class:`State` of a row of a position array (its lanes back to unsigned)."""
    lanes, occupied, available, hand, to_move, claimable, winner, over = (int(x) for x in row)
    return State(lanes & (1 << 64) - 1, occupied, available, hand, to_move, claimable, winner, bool(over))


def brute_force_candidates(state: State) -> list[int]:
    """The search's candidates by plain stepping: every empty square when placing (where no square wins), else
    every available piece that no empty square lets the receiver win with."""
    empty = [s for s in range(NUM_SQUARES) if not state.occupied >> s & 1]
    if state.hand != NO_PIECE:
        assert all(step(STANDARD, state, s).winner == NO_WINNER for s in empty)
        return empty
    return [
        p
        for p in bits(state.available)
        if all(step(STANDARD, step(STANDARD, state, p), s).winner == NO_WINNER for s in empty)
    ]


def test_labels_equal_the_solvers_values(labelled: tuple[list[State], positions.LabelledPositions]) -> None:
    states, data = labelled
    assert len(set(states)) == len(states) == 40
    assert set(data.empties) <= {6, 7, 8}
    for row, state in enumerate(states):
        candidates = brute_force_candidates(state)
        assert len(candidates) >= 2  # the search asks the network only where there is a choice
        assert list(np.flatnonzero(data.candidates[row])) == candidates
        assert data.values[row] == solve(state, STANDARD).value
        action_values = exact_action_values(STANDARD, state)
        keeping = [a for a in candidates if action_values[a] == data.values[row]]
        assert list(np.flatnonzero(data.keeps[row])) == keeping
        assert keeping  # a best action is always a candidate
    assert 0 < data.critical.sum() < len(data)


def test_the_probes_shares_equal_a_recomputation_from_the_labels(
    labelled: tuple[list[State], positions.LabelledPositions], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "probe.json"
    args = [*PROBE_ARGS, "--network", "hand", "slots", "--target", "policy", "--value-head", "scalar"]
    assert probe.main([*args, "--json", str(out)]) == 0
    assert "| `hand` w64 | test | all |" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["protocol"]["label_seed"] == record["protocol"]["network_seed"] == 3
    assert record["protocol"]["code"]["commit"]
    _, data = labelled
    values = PositionValues(STANDARD)
    full = positions.probe_set(data, STANDARD, values)
    train_rows, test_rows = positions.split_rows(len(data), 0.25, 3)
    train, test = full.subset(train_rows), full.subset(test_rows)
    assert (len(train), len(test)) == (30, 10)
    settings = fit.TrainSettings(epochs=2, seed=3, target="policy", value_head="scalar")
    for result, design in zip(record["results"], ("hand", "slots"), strict=True):
        network = probe.trained_network(probe.DesignChoice(design), train, STANDARD, settings)[0]
        for part, rows in (("train", train), ("test", test)):
            expected = _recomputed_rows(network, [_state(r) for r in rows.labels.positions])
            reported = result[part]["empty"]
            assert [row["empty"] for row in reported] == [row["empty"] for row in expected]
            for row, recomputed in zip(reported, expected, strict=True):
                assert row == pytest.approx(recomputed)


def _recomputed_rows(network: PolicyValueNetwork, states: list[State]) -> list[dict]:
    """The probe's summary rows recomputed state by state: brute-force candidates, the solver's action values."""
    planes, _ = encode_positions(position_array(states), network.kind, STANDARD)
    logits, values = network.evaluate(planes)
    facts = []
    for row, state in enumerate(states):
        candidates = brute_force_candidates(state)
        action_values = exact_action_values(STANDARD, state)
        best = max(action_values.values())
        pick = max(candidates, key=lambda a: logits[row, a])
        losing = [a for a in candidates if action_values[a] < best]
        rounded = min(max(round(float(values[row])), -1), 1)
        facts.append(
            (
                state.num_empty,
                rounded == best,
                bool(losing),
                action_values[pick] < best,
                len(losing) / len(candidates),
                best,
                rounded,
            )
        )
    rows = []
    for empty in [*sorted({f[0] for f in facts}), "all"]:
        chosen = [f for f in facts if empty in ("all", f[0])]
        critical = [f for f in chosen if f[2]]
        recalls = [
            sum(f[6] == c for f in chosen if f[5] == c) / sum(f[5] == c for f in chosen) for c in {f[5] for f in chosen}
        ]
        rows.append(
            {
                "empty": empty,
                "positions": len(chosen),
                "value_accuracy": sum(f[1] for f in chosen) / len(chosen),
                "value_balanced_accuracy": sum(recalls) / len(recalls),
                "critical": len(critical),
                "network_lost": sum(f[3] for f in critical) / len(critical) if critical else 0.0,
                "random_lost": sum(f[4] for f in critical) / len(critical) if critical else 0.0,
            }
        )
    return rows


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--network", "cnn"], "invalid choice: 'cnn'"),
        (["--test-share", "1"], "test-share must be"),
        (["--min-empty", "9", "--max-empty", "7"], "--min-empty 9 is above --max-empty 7"),
        (["--positions", "2"], "positions must be"),
        (["--width", "0"], "width must be"),
        (["--target", "value"], "invalid choice: 'value'"),
        (["--iterations", "0"], "iterations must be"),
        (["--network", "transformer", "--width", "6"], "--width 6: the transformer needs a multiple of its 4 heads"),
    ],
)
def test_bad_arguments_are_one_line_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        probe.main(args)
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in last


# ---------------------------------------------------------------------------------------------------------
# The hand design
# ---------------------------------------------------------------------------------------------------------
def _network(design: str, kind: str = "parity", seed: int = 0, **heads: Any) -> PolicyValueNetwork:
    th.manual_seed(seed)
    return PolicyValueNetwork(observation_kind(kind), list(STANDARD.groups), 32, design, **heads).eval()


def test_unknown_designs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown network design 'wide'; allowed: slots, hand, transformer, looped"):
        PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 8, "wide")


def test_hand_design_shapes_and_rows_independent(
    labelled: tuple[list[State], positions.LabelledPositions], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, data = labelled
    network = _network("hand")
    planes, _ = encode_positions(data.positions, network.kind, STANDARD)
    logits, values = network.evaluate(planes)
    assert logits.shape == (len(data), NUM_ACTIONS) and values.shape == (len(data),)
    assert np.all(np.abs(values) <= 1)
    alone = network.evaluate(planes[5:6])
    np.testing.assert_allclose(alone[0][0], logits[5], atol=1e-5)  # no row sees another
    # The probe's choice is the argmax over the candidates only: huge logits elsewhere do not move it.
    scores = probe.score(network, data, STANDARD)
    plain = network.evaluate
    elsewhere = 1e6 * ~encode_positions(data.positions, network.kind, STANDARD)[1]
    monkeypatch.setattr(network, "evaluate", lambda p: (plain(p)[0] + elsewhere, plain(p)[1]))
    assert np.array_equal(probe.score(network, data, STANDARD).network_lost, scores.network_lost)


def _square_features(network: PolicyValueNetwork, planes: np.ndarray) -> th.Tensor:
    """What the square head reads: the square slots' features after the body, ``(B, 16, W)``."""
    seen: list[th.Tensor] = []
    head = network.body.score_square
    assert isinstance(head, th.nn.Module)
    hook = head.register_forward_hook(lambda _m, args, _out: seen.append(args[0]))
    network.evaluate(planes)
    hook.remove()
    return seen[0]


@pytest.mark.parametrize("design", EQUIVARIANT_DESIGNS)
def test_every_design_but_slots_lets_the_piece_in_hand_reach_every_square(
    design: str, labelled: tuple[list[State], positions.LabelledPositions]
) -> None:
    states, _ = labelled
    state = next(s for s in states if s.hand != NO_PIECE)
    other = bits(state.available)[0]
    swapped = state._replace(hand=other, available=state.available & ~(1 << other) | 1 << state.hand)
    # raw planes: no derived square channel depends on the hand, so only the piece channels differ
    network = _network(design, kind="raw")
    planes = encode_positions(position_array([state, swapped]), network.kind, STANDARD)[0]
    features = _square_features(network, planes)
    changed = (features[0] - features[1]).abs().amax(dim=1) > 1e-6  # per square slot
    logits = network.evaluate(planes)[0]
    assert np.all(np.abs(logits[0] - logits[1]) > 1e-7)  # every square logit (the slots design: via the context)
    if design != "slots":
        assert changed.all()
    else:
        assert not changed.any()  # the slots design's squares never see the hand itself


@pytest.mark.parametrize("design", EQUIVARIANT_DESIGNS)
@pytest.mark.parametrize("placing", [True, False])
def test_designs_are_equivariant_under_board_symmetries(
    design: str, placing: bool, labelled: tuple[list[State], positions.LabelledPositions]
) -> None:
    # Built in: no design gives a square an identity of its own, only its groups (the transformer's attention bias
    # is per relation of two squares, and a board symmetry keeps every relation).
    states, _ = labelled
    state = next(s for s in states if (s.hand != NO_PIECE) == placing)
    network = _network(design, wdl=True, action_values=True)
    symmetries = Symmetries(STANDARD)
    rows = np.repeat(position_array([state]), len(symmetries.images), axis=0)
    boards = np.arange(len(symmetries.images))
    identity = np.zeros(len(boards), dtype=np.int64)  # relabelling 0 keeps every attribute
    assert list(symmetries.pieces[0]) == list(range(16))
    moved, _ = symmetries.apply_chosen(rows, np.zeros((len(rows), NUM_ACTIONS), np.float32), boards, identity)
    with th.inference_mode():
        out = network.outputs(th.from_numpy(encode_positions(moved, network.kind, STANDARD)[0]).float())
    assert out.value_logits is not None and out.action_value_logits is not None
    np.testing.assert_allclose(out.value_logits, out.value_logits[0].expand(len(boards), -1), atol=1e-4)
    for board, image in enumerate(symmetries.images):
        targets = image if placing else np.arange(NUM_ACTIONS)  # squares move, pieces keep their numbers
        np.testing.assert_allclose(out.logits[board, targets], out.logits[0], atol=1e-4)
        np.testing.assert_allclose(out.action_value_logits[board, targets], out.action_value_logits[0], atol=1e-4)
    assert out.logits[0].std() > 1e-4  # not equivariant by being constant


def test_a_square_identity_breaks_the_equivariance_test(
    labelled: tuple[list[State], positions.LabelledPositions], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The test above can fail: a transformer whose squares are told apart (one bias per square pair) is not
    # equivariant.
    states, _ = labelled
    state = next(s for s in states if s.hand != NO_PIECE)
    network = _network("transformer")
    body = network.body
    assert isinstance(body, TransformerNetwork)
    body.relation_bias = th.nn.Embedding(33 * 33, 4)
    body.relations = th.arange(33 * 33).view(33, 33)
    symmetries = Symmetries(STANDARD)
    rows = np.repeat(position_array([state]), 2, axis=0)
    moved, _ = symmetries.apply_chosen(rows, np.zeros((2, NUM_ACTIONS), np.float32), np.array([0, 1]), np.zeros(2, int))
    logits = network.evaluate(encode_positions(moved, network.kind, STANDARD)[0])[0]
    assert not np.allclose(logits[1, symmetries.images[1]], logits[0], atol=1e-4)


@pytest.mark.parametrize("design", NETWORK_DESIGNS)
@pytest.mark.parametrize("heads", [{}, {"wdl": True, "action_values": True}])
def test_every_design_runs_on_tiny_inputs(design: str, heads: dict[str, bool]) -> None:
    network = _network(design, kind="raw", **heads)
    planes = encode_positions(position_array([State(), step(STANDARD, State(), 5)]), network.kind, STANDARD)[0]
    with th.inference_mode():
        out = network.outputs(th.from_numpy(planes).float())
    assert out.logits.shape == (2, NUM_ACTIONS) and out.value.shape == (2,)
    assert th.all(out.value.abs() <= 1) and th.isfinite(out.logits).all()
    if heads:
        assert out.value_logits is not None and out.value_logits.shape == (2, 3)
        assert out.action_value_logits is not None and out.action_value_logits.shape == (2, NUM_ACTIONS, 3)
        probabilities = th.softmax(out.value_logits, dim=1)
        th.testing.assert_close(out.value, probabilities[:, 2] - probabilities[:, 0])
    else:
        assert out.value_logits is None and out.action_value_logits is None


def test_the_transformer_scores_the_same_in_training_and_at_inference() -> None:
    # nn.TransformerEncoderLayer's inference fast path gave NaN with a per-head bias once the bias was not zero.
    network = _network("transformer", wdl=True)
    assert isinstance(network.body, TransformerNetwork)
    with th.no_grad():
        network.body.relation_bias.weight.normal_(0, 3)
    planes = th.from_numpy(
        encode_positions(position_array([State(), step(STANDARD, State(), 3)]), network.kind, STANDARD)[0]
    )
    network.train()
    trained = network.outputs(planes.float()).value_logits
    network.eval()
    with th.inference_mode():
        inferred = network.outputs(planes.float()).value_logits
    assert trained is not None and inferred is not None and th.isfinite(inferred).all()
    th.testing.assert_close(trained.detach(), inferred)


FAST_BATCHES = (3, FAST_MIN_BATCH, 130, 64, 130)
"""Batch sizes in the order one network evaluates them: below and at the fast path's smallest, its buffers grown,
reused for a smaller batch and again for the largest."""


def _random_planes(rng: np.random.Generator, batch: int, kind: ObservationKind) -> np.ndarray:
    """Random 0/1 planes of ``kind``, each row placing or giving (its placing plane all 1 or all 0), as the env's."""
    planes = rng.integers(0, 2, (batch, kind.num_channels, NUM_SQUARES), dtype=np.int8)
    planes[:, PLACING] = rng.integers(0, 2, (batch, 1), dtype=np.int8)
    return planes


def count_fast_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the batches evaluated on the fast path (:meth:`SlotNetwork.infer`) from now on, as they come."""
    sizes: list[int] = []
    infer = SlotNetwork.infer

    def counted(body: SlotNetwork, planes: np.ndarray, workspace: Workspace) -> tuple[th.Tensor, th.Tensor]:
        sizes.append(len(planes))
        return infer(body, planes, workspace)

    monkeypatch.setattr(SlotNetwork, "infer", counted)
    return sizes


@pytest.mark.parametrize("design", NETWORK_DESIGNS)
@pytest.mark.parametrize("heads", [{}, {"wdl": True}])
def test_the_fast_evaluation_gives_the_forward_pass_numbers_bit_for_bit(design: str, heads: dict[str, bool]) -> None:
    # A slots network (the shipped config's width) takes the fast path from FAST_MIN_BATCH positions on; the other
    # designs (narrow, to stay fast) run their forward pass on both.
    th.manual_seed(1)
    width = 64 if design == "slots" else 16
    network = PolicyValueNetwork(observation_kind("tempo"), list(STANDARD.groups), width, design, **heads).eval()
    rng = np.random.default_rng(7)
    for batch in FAST_BATCHES:
        planes = _random_planes(rng, batch, network.kind)
        (logits, values), (forward_logits, forward_values) = (
            network.evaluate(planes),
            network.evaluate(planes, "forward"),
        )
        assert np.array_equal(logits, forward_logits) and np.array_equal(values, forward_values), batch


def test_a_slots_network_takes_the_fast_path_for_large_batches_of_env_planes(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = count_fast_batches(monkeypatch)
    network = _network("slots", kind="tempo")
    planes = _random_planes(np.random.default_rng(3), 2 * FAST_MIN_BATCH, network.kind)
    network.evaluate(planes)
    network.evaluate(planes[: FAST_MIN_BATCH - 1])
    network.evaluate(planes, "forward")
    halfway = planes.astype(np.float32)
    halfway[0, PLACING] = 0.5  # not an env's planes: the forward pass blends the heads
    logits = network.evaluate(halfway)[0]
    assert sizes == [2 * FAST_MIN_BATCH]
    assert np.array_equal(logits, network.evaluate(halfway, "forward")[0])
    for odd in (2, -1):  # int8 planes whose placing plane is neither 0 nor 1: the forward pass too
        strange = planes.copy()
        strange[5, PLACING] = odd
        assert np.array_equal(network.evaluate(strange)[0], network.evaluate(strange, "forward")[0])
    assert sizes == [2 * FAST_MIN_BATCH]


def test_the_fast_evaluation_sees_the_weights_change_between_calls() -> None:
    network = _network("slots", kind="tempo")
    planes = _random_planes(np.random.default_rng(4), 2 * FAST_MIN_BATCH, network.kind)
    before = network.evaluate(planes)
    with th.no_grad():
        for parameter in network.parameters():
            parameter.add_(0.1 * th.randn_like(parameter))  # as an optimizer step changes them, in place
    after, forward = network.evaluate(planes), network.evaluate(planes, "forward")
    assert not np.array_equal(before[0], after[0]) and not np.array_equal(before[1], after[1])
    assert np.array_equal(after[0], forward[0]) and np.array_equal(after[1], forward[1])


ONNX_TOLERANCE = 1e-5
"""How far the ``onnx`` path's outputs may be from the forward pass's: its products sum in another order, which
moves a float32 result of this size by about 1e-7 (docs/alphazero.md, "Fast evaluation")."""


@pytest.mark.onnx
@pytest.mark.parametrize("kind", ["tempo", "parity"])
@pytest.mark.parametrize("heads", [{}, {"wdl": True}])
def test_the_onnx_evaluation_is_close_to_the_forward_pass(kind: str, heads: dict[str, bool]) -> None:
    pytest.importorskip("onnxruntime")
    network = _network("slots", kind=kind, **heads)
    rng = np.random.default_rng(5)
    batches = [_random_planes(rng, batch, network.kind) for batch in FAST_BATCHES]
    placing = _random_planes(rng, FAST_MIN_BATCH, network.kind)
    placing[:, PLACING] = 1  # every position placing, then every one giving: one head scores no row
    batches += [placing, 1 - placing]
    for planes in batches:
        (logits, values), forward = network.evaluate(planes, "onnx"), network.evaluate(planes, "forward")
        assert logits.dtype == values.dtype == np.float32 and logits.shape == forward[0].shape
        np.testing.assert_allclose(logits, forward[0], rtol=0, atol=ONNX_TOLERANCE)
        np.testing.assert_allclose(values, forward[1], rtol=0, atol=ONNX_TOLERANCE)


@pytest.mark.onnx
def test_the_onnx_evaluation_sees_the_weights_change_between_calls() -> None:
    pytest.importorskip("onnxruntime")
    network = _network("slots", kind="tempo")
    network.evaluation_path = "onnx"  # the network's own choice when a call names no path
    planes = _random_planes(np.random.default_rng(4), 2 * FAST_MIN_BATCH, network.kind)
    before = network.evaluate(planes)
    with th.no_grad():
        for parameter in network.parameters():
            parameter.add_(0.1 * th.randn_like(parameter))  # in place, as an optimizer step
    after, forward = network.evaluate(planes), network.evaluate(planes, "forward")
    assert not np.allclose(before[0], after[0], atol=1e-3)
    np.testing.assert_allclose(after[0], forward[0], rtol=0, atol=ONNX_TOLERANCE)
    np.testing.assert_allclose(after[1], forward[1], rtol=0, atol=ONNX_TOLERANCE)


def test_an_unknown_evaluation_path_is_one_line_naming_the_paths() -> None:
    network = _network("slots", kind="tempo")
    with pytest.raises(ValueError, match=r"^unknown evaluation path 'gpu'; allowed: fast, forward, onnx$"):
        network.evaluate(_random_planes(np.random.default_rng(0), 4, network.kind), "gpu")


def test_the_mlp_design_is_not_equivariant_but_memorises_a_small_training_set(
    labelled: tuple[list[State], positions.LabelledPositions],
) -> None:
    # The baseline of the structured designs: a square is itself (a board symmetry changes its outputs), and it
    # has the capacity to fit the training set exactly, which the probe's docs use to tell underfitting from a
    # failure to generalise.
    _, data = labelled
    full = positions.probe_set(data, STANDARD, PositionValues(STANDARD))
    settings = fit.TrainSettings(epochs=150, batch_size=40, lr=3e-3, augment=False, weight_decay=0.0)
    network = probe.new_network(probe.DesignChoice("mlp", width=64), STANDARD, settings)
    fit.train_supervised(network, full, STANDARD, settings)
    scores = probe.score(network, data, STANDARD, settings.target)
    assert data.critical.sum() >= 10 and not scores.network_lost[data.critical].any()
    symmetries = Symmetries(STANDARD)
    rows = np.repeat(data.positions[:1], 2, axis=0)
    moved, _ = symmetries.apply_chosen(rows, np.zeros((2, NUM_ACTIONS), np.float32), np.array([0, 1]), np.zeros(2, int))
    value = network.evaluate(encode_positions(moved, network.kind, STANDARD)[0])[1]
    assert abs(value[0] - value[1]) > 1e-4


def test_the_looped_design_takes_its_iterations_at_play_time() -> None:
    network = _network("looped", iterations=2)
    planes = th.from_numpy(encode_positions(position_array([State()]), network.kind, STANDARD)[0]).float()
    body = network.body
    assert isinstance(body, LoopedNetwork)
    with th.inference_mode():
        two, six = body(planes)[0], body(planes, iterations=6)[0]
        body.iterations = 6
        assert th.equal(body(planes)[0], six)
    assert not th.allclose(two, six)
    assert network.describe()["iterations"] == 6
    with pytest.raises(ValueError, match="iterations must be 1 to 64"):
        _network("looped", iterations=0)


def test_checkpoints_rebuild_the_design_and_old_ones_load_as_slots(tmp_path: Path) -> None:
    hand = _network("hand")
    assert hand.describe()["design"] == "hand"
    save_checkpoint(tmp_path / "hand.zip", hand, CheckpointHeader(STANDARD, hand.kind.name, 0), {})
    loaded, metadata = load_network(tmp_path / "hand.zip", STANDARD)
    assert loaded.design == "hand" and metadata["network"]["design"] == "hand"
    planes = encode_positions(position_array([State()]), hand.kind, STANDARD)[0]
    np.testing.assert_allclose(loaded.evaluate(planes)[0], hand.evaluate(planes)[0])

    slots = _network("slots")
    old_metadata = {k: v for k, v in slots.describe().items() if k != "design"}
    save_checkpoint(
        tmp_path / "old.zip", slots, CheckpointHeader(STANDARD, slots.kind.name, 0), {"network": old_metadata}
    )
    assert load_network(tmp_path / "old.zip", STANDARD)[0].design == "slots"
    save_checkpoint(
        tmp_path / "mixed.zip",
        slots,
        CheckpointHeader(STANDARD, slots.kind.name, 0),
        {"network": {**old_metadata, "design": "hand"}},
    )
    with pytest.raises(CheckpointError, match="does not fit the network"):
        load_network(tmp_path / "mixed.zip", STANDARD)


@pytest.mark.parametrize("design", ["transformer", "looped", "mlp"])
def test_checkpoints_rebuild_the_new_designs_with_their_heads(design: str, tmp_path: Path) -> None:
    network = _network(design, wdl=True, action_values=True, iterations=3)  # the looped design's, ignored elsewhere
    save_checkpoint(tmp_path / "net.zip", network, CheckpointHeader(STANDARD, network.kind.name, 0), {})
    loaded, metadata = load_network(tmp_path / "net.zip", STANDARD)
    assert (loaded.design, loaded.wdl, loaded.action_values) == (design, True, True)
    assert metadata["network"] == network.describe()
    planes = encode_positions(position_array([State()]), network.kind, STANDARD)[0]
    np.testing.assert_allclose(loaded.evaluate(planes)[1], network.evaluate(planes)[1], atol=1e-6)
    # A description that says no W/D/L head does not fit the weights of one.
    save_checkpoint(
        tmp_path / "bad.zip",
        network,
        CheckpointHeader(STANDARD, network.kind.name, 0),
        {"network": {**network.describe(), "wdl": False}},
    )
    with pytest.raises(CheckpointError, match="does not fit the network"):
        load_network(tmp_path / "bad.zip", STANDARD)


# ---------------------------------------------------------------------------------------------------------
# The W/D/L losses
# ---------------------------------------------------------------------------------------------------------
def test_balanced_class_weights_by_hand() -> None:
    # 6 labels, 3 classes: n / (3 n_c) = 6/3, 6/9, 6/6
    np.testing.assert_allclose(fit.balanced_class_weights(np.array([0, 1, 1, 1, 2, 2])), [2, 2 / 3, 1], rtol=1e-6)
    # a class that never occurs weighs nothing; the two that do: 4 / (2 * 1), 4 / (2 * 3)
    np.testing.assert_allclose(fit.balanced_class_weights(np.array([1, 1, 1, 2])), [0, 2 / 3, 2], rtol=1e-6)


def test_weighted_cross_entropy_by_hand() -> None:
    logits = th.tensor([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    classes = th.tensor([1, 0])
    weights = th.tensor([2.0, 0.5, 1.0])
    # row 0: -log(1/3) weighted 0.5; row 1: -log(e^2 / (e^2 + 2)) weighted 2; divided by 2.5
    row0, row1 = math.log(3), -math.log(math.exp(2) / (math.exp(2) + 2))
    expected = (0.5 * row0 + 2 * row1) / 2.5
    assert fit.weighted_cross_entropy(logits, classes, weights).item() == pytest.approx(expected, rel=1e-6)
    # "always draw" is no longer the cheapest constant answer: with balanced weights, a constant draw prediction
    # costs more than a uniform one when draws are the majority.
    labels = np.array([1] * 8 + [0, 2])
    balanced = th.from_numpy(fit.balanced_class_weights(labels))
    targets = th.from_numpy(labels)
    always_draw = th.tensor([[0.0, 3.0, 0.0]]).repeat(10, 1)
    uniform = th.zeros(10, 3)
    assert fit.weighted_cross_entropy(always_draw, targets, balanced) > fit.weighted_cross_entropy(
        uniform, targets, balanced
    )
    assert F.cross_entropy(always_draw, targets) < F.cross_entropy(uniform, targets)


def test_class_weights_come_from_the_training_set(labelled: tuple[list[State], positions.LabelledPositions]) -> None:
    _, data = labelled
    full = positions.probe_set(data, STANDARD, PositionValues(STANDARD))
    weights = fit.class_weights(full)
    counts = np.bincount(data.values + 1, minlength=3)
    assert np.allclose(weights.value[counts > 0] * counts[counts > 0], len(data) / (counts > 0).sum())
    candidate_values = full.action_values[data.candidates]
    assert set(np.unique(candidate_values)) <= {-1, 0, 1}
    assert (full.action_values[~data.candidates] == positions.NO_ACTION_VALUE).all()


# ---------------------------------------------------------------------------------------------------------
# Mistake depths
# ---------------------------------------------------------------------------------------------------------
class ScriptedSearcher:
    """Stands in for the minimax agent: at depths below ``sees_at`` it plays ``bad``, from it on ``good``."""

    sees_at = 3
    bad = 0
    good = 0

    def __init__(self, variant: object, depth: int) -> None:
        self.depth = depth

    def act(self, state: State) -> int:
        return self.good if self.depth >= self.sees_at else self.bad


@pytest.mark.parametrize(
    ("sees_at", "depth", "bucket"), [(1, 1, "tactics"), (3, 3, "tactics"), (4, 4, "deeper"), (9, 5, "deeper")]
)
def test_mistake_depth_is_the_shallowest_search_that_keeps_the_value(
    sees_at: int,
    depth: int,
    bucket: str,
    labelled: tuple[list[State], positions.LabelledPositions],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    states, data = labelled
    row = int(np.flatnonzero(data.critical)[0])
    values = PositionValues(STANDARD)
    action_values = values.action_values(states[row])
    best = max(action_values.values())
    monkeypatch.setattr(ScriptedSearcher, "sees_at", sees_at)
    monkeypatch.setattr(ScriptedSearcher, "bad", min(action_values, key=lambda a: action_values[a]))
    monkeypatch.setattr(ScriptedSearcher, "good", next(a for a, v in action_values.items() if v == best))
    monkeypatch.setattr(positions, "MinimaxAgent", ScriptedSearcher)
    one = data.subset(np.array([row]))
    depths = positions.mistake_depths(one, STANDARD, values)
    assert list(depths) == [depth]
    scores = probe.Scores(np.zeros(1, int), np.zeros(1, bool), np.ones(1, bool), np.ones(1))
    rows = {
        r["depth"]: r for r in probe.depth_rows(positions.ProbeSet(one, np.zeros((1, 16), np.int8), depths), scores)
    }
    assert rows[bucket]["critical"] == 1 and rows[bucket]["network_lost"] == 1.0
    assert sum(rows[d]["critical"] for d in ("tactics", "deeper")) == 1


def test_mistake_depths_of_real_positions_agree_with_the_minimax_agent(
    labelled: tuple[list[State], positions.LabelledPositions],
) -> None:
    states, data = labelled
    values = PositionValues(STANDARD)
    depths = positions.mistake_depths(data, STANDARD, values)
    assert (depths[~data.critical] == 0).all() and (depths[data.critical] >= 1).all()
    for row in np.flatnonzero(data.critical)[:6]:
        action_values = values.action_values(states[row])
        best = max(action_values.values())
        keeps = [action_values[MinimaxAgent(STANDARD, depth=d).act(states[row])] == best for d in range(1, 5)]
        assert depths[row] == (keeps.index(True) + 1 if any(keeps) else positions.BEYOND_DEPTHS)


# ---------------------------------------------------------------------------------------------------------
# Augmentation
# ---------------------------------------------------------------------------------------------------------
def test_augmentation_moves_the_per_action_labels_with_the_positions(
    labelled: tuple[list[State], positions.LabelledPositions],
) -> None:
    _, data = labelled
    values = PositionValues(STANDARD)
    full = positions.probe_set(data, STANDARD, values)
    batch = fit._moved(full.subset(np.arange(8)), Symmetries(STANDARD), np.random.default_rng(1))
    assert not np.array_equal(batch.labels.positions, full.labels.positions[:8])
    assert np.array_equal(
        batch.labels.candidates, encode_positions(batch.labels.positions, observation_kind("parity"), STANDARD)[1]
    )
    for row, position in enumerate(batch.labels.positions):
        exact = exact_action_values(STANDARD, _state(position))
        for action in np.flatnonzero(batch.labels.candidates[row]):
            assert batch.action_values[row, action] == exact[int(action)]
            assert batch.labels.keeps[row, action] == (exact[int(action)] == max(exact.values()))


@pytest.mark.parametrize("random_iterations", [False, True])
def test_random_iterations_vary_the_loop_while_training_only(
    random_iterations: bool, labelled: tuple[list[State], positions.LabelledPositions]
) -> None:
    _, data = labelled
    full = positions.probe_set(data, STANDARD, PositionValues(STANDARD))
    settings = fit.TrainSettings(epochs=1, batch_size=4, random_iterations=random_iterations)
    network = probe.new_network(probe.DesignChoice("looped", width=8, iterations=2), STANDARD, settings)
    body = network.body
    assert isinstance(body, LoopedNetwork)
    seen: list[int] = []
    body.register_forward_pre_hook(lambda module, _args: seen.append(module.iterations))
    fit.train_supervised(network, full, STANDARD, settings)
    assert len(seen) == 10 and body.iterations == 2
    if random_iterations:
        assert set(seen) <= {1, 2, 3, 4} and len(set(seen)) > 1
    else:
        assert set(seen) == {2}


def _all_row(part: dict[str, Any]) -> dict[str, Any]:
    """A probe record's row over every number of empty squares, of one part (train or test)."""
    return next(row for row in part["empty"] if row["empty"] == "all")


def _shares(rows: dict[str, dict[str, Any]]) -> tuple[float, float, float]:
    """A plotted point's shares from one record's rows: lost on the training set, on the test set, and at random."""
    return rows["train"]["network_lost"], rows["test"]["network_lost"], rows["test"]["random_lost"]


def test_quarto_plot_draws_the_probes_scaling_curve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--min-empty", "6", "--max-empty", "8", "--epochs", "1", "--width", "8", "--network", "slots"]
    tiny += ["--cache", str(tmp_path / "labels.json")]
    records = {}
    for name, extra in {"a": ["--positions", "12"], "b": ["--positions", "16"], "c": ["--positions", "16",
                        "--network-seed", "1"], "raw": ["--positions", "16", "--observation", "raw"],
                        "lr": ["--positions", "16", "--lr", "0.01"]}.items():  # fmt: skip
        records[name] = tmp_path / f"{name}.json"
        assert probe.main([*tiny, *extra, "--json", str(records[name])]) == 0
    shares = {
        name: {part: _all_row(json.loads(path.read_text())["results"][0][part]) for part in ("train", "test")}
        for name, path in records.items()
    }
    lines = plot.probe_lines([json.loads(path.read_text()) for path in records.values()])
    # Seeds 0 and 1 of one setting are one line; other planes, or another learning rate, are lines of their own.
    assert len(lines) == 3
    assert lines["slots w8, raw planes, 1 epochs"] == [(16, *_shares(shares["raw"]))]
    (default,) = [points for label, points in lines.items() if "lr 0.001," in label]
    (faster,) = [points for label, points in lines.items() if "lr 0.01," in label]
    assert faster == [(16, *_shares(shares["lr"]))]
    (small, large) = default
    assert small == (12, *_shares(shares["a"]))
    assert large[0] == 16 and large[2] == pytest.approx(
        (shares["b"]["test"]["network_lost"] + shares["c"]["test"]["network_lost"]) / 2
    )

    png = tmp_path / "scaling.png"
    assert plot.main(["--probe", *map(str, records.values()), "--out", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    not_a_record = tmp_path / "other.json"
    not_a_record.write_text('{"command": "quarto train"}')
    with pytest.raises(SystemExit) as exit_info:
        plot.main(["--probe", str(not_a_record), "--out", str(tmp_path / "no.png")])
    assert exit_info.value.code == 2
    assert "is not a probe record" in capsys.readouterr().err
    assert not (tmp_path / "no.png").exists()


def test_the_probe_reads_the_observation_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "raw.json"
    args = ["--positions", "12", "--min-empty", "6", "--max-empty", "8", "--epochs", "1", "--width", "8"]
    assert probe.main([*args, "--network", "slots", "--observation", "raw", "--json", str(out)]) == 0
    assert "| `slots` w8 (raw planes) | test | all |" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["protocol"]["observation"] == record["results"][0]["observation"] == "raw"
    raw, parity = (
        probe.new_network(probe.DesignChoice("slots", 8, observation=kind), STANDARD, fit.TrainSettings())
        for kind in ("raw", "parity")
    )
    assert (raw.kind.name, parity.kind.name) == ("raw", "parity")
    assert raw.kind.num_channels < parity.kind.num_channels
