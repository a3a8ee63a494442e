"""``quarto bench network`` (experiments/bench/network.py) and the ``hand`` design of agents/networks.py: the probe's
labels against the solver, its shares against a recomputation by brute force, and the hand piece's pathway."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch as th

from agents.alphazero import load_network, save_checkpoint
from agents.checkpoints import CheckpointError
from agents.minimax import solve
from agents.networks import NETWORK_DESIGNS, PolicyValueNetwork
from agents.puct import encode_positions
from experiments.arena.grading import PositionValues, exact_action_values
from experiments.bench import network as probe
from quarto_env.core import NO_PIECE, NO_WINNER, NUM_ACTIONS, NUM_SQUARES, STANDARD, State, bits, position_array, step
from quarto_env.observation import observation_kind
from quarto_env.symmetry import Symmetries

PROBE_ARGS = ["--positions", "40", "--min-empty", "6", "--max-empty", "8", "--epochs", "2", "--seed", "3"]


@pytest.fixture(scope="module")
def labelled() -> tuple[list[State], probe.LabelledPositions]:
    """40 labelled positions with 6-8 empty squares (seed 3), as the probe builds them, and their states."""
    th.set_num_threads(1)
    data = probe.label_positions(STANDARD, observation_kind("parity"), 40, 3, 6, 8, PositionValues(STANDARD))
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


def test_labels_equal_the_solvers_values(labelled: tuple[list[State], probe.LabelledPositions]) -> None:
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
    labelled: tuple[list[State], probe.LabelledPositions], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "probe.json"
    assert probe.main([*PROBE_ARGS, "--network", "hand", "slots", "--json", str(out)]) == 0
    assert "| `hand` w64 | test | all |" in capsys.readouterr().out
    results = json.loads(out.read_text())["results"]
    _, data = labelled
    train, test = probe.split(data, 0.25, 3)
    assert (len(train), len(test)) == (30, 10)
    settings = probe.TrainSettings(epochs=2, seed=3)
    for result, design in zip(results, ("hand", "slots"), strict=True):
        network = probe.trained_network(design, 64, train, STANDARD, settings)[0]
        for part, rows in (("train", train), ("test", test)):
            expected = _recomputed_rows(network, [_state(r) for r in rows.positions])
            assert [row["empty"] for row in result[part]] == [row["empty"] for row in expected]
            for reported, recomputed in zip(result[part], expected, strict=True):
                assert reported == pytest.approx(recomputed)


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
            )
        )
    rows = []
    for empty in [*sorted({f[0] for f in facts}), "all"]:
        chosen = [f for f in facts if empty in ("all", f[0])]
        critical = [f for f in chosen if f[2]]
        rows.append(
            {
                "empty": empty,
                "positions": len(chosen),
                "value_accuracy": sum(f[1] for f in chosen) / len(chosen),
                "critical": len(critical),
                "network_lost": sum(f[3] for f in critical) / len(critical) if critical else 0.0,
                "random_lost": sum(f[4] for f in critical) / len(critical) if critical else 0.0,
            }
        )
    return rows


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--network", "mlp"], "invalid choice: 'mlp'"),
        (["--test-share", "1"], "test-share must be"),
        (["--min-empty", "9", "--max-empty", "7"], "--min-empty 9 is above --max-empty 7"),
        (["--positions", "2"], "positions must be"),
        (["--width", "0"], "width must be"),
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
def _network(design: str, kind: str = "parity", seed: int = 0) -> PolicyValueNetwork:
    th.manual_seed(seed)
    return PolicyValueNetwork(observation_kind(kind), list(STANDARD.groups), 32, design).eval()


def test_unknown_designs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown network design 'wide'; allowed: slots, hand"):
        PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 8, "wide")


def test_hand_design_shapes_and_rows_independent(
    labelled: tuple[list[State], probe.LabelledPositions], monkeypatch: pytest.MonkeyPatch
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


@pytest.mark.parametrize("design", NETWORK_DESIGNS)
def test_only_the_hand_design_lets_the_piece_in_hand_reach_every_square(
    design: str, labelled: tuple[list[State], probe.LabelledPositions]
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
    if design == "hand":
        assert changed.all()
    else:
        assert not changed.any()  # the slots design's squares never see the hand itself


@pytest.mark.parametrize("placing", [True, False])
def test_hand_design_is_equivariant_under_board_symmetries(
    placing: bool, labelled: tuple[list[State], probe.LabelledPositions]
) -> None:
    states, _ = labelled
    state = next(s for s in states if (s.hand != NO_PIECE) == placing)
    network = _network("hand")
    symmetries = Symmetries(STANDARD)
    rows = np.repeat(position_array([state]), len(symmetries.images), axis=0)
    boards = np.arange(len(symmetries.images))
    identity = np.zeros(len(boards), dtype=np.int64)  # relabelling 0 keeps every attribute
    assert list(symmetries.pieces[0]) == list(range(16))
    moved, _ = symmetries.apply_chosen(rows, np.zeros((len(rows), NUM_ACTIONS), np.float32), boards, identity)
    logits, values = network.evaluate(encode_positions(moved, network.kind, STANDARD)[0])
    np.testing.assert_allclose(values, values[0], atol=1e-5)
    for board, image in enumerate(symmetries.images):
        targets = image if placing else np.arange(NUM_ACTIONS)  # squares move, pieces keep their numbers
        np.testing.assert_allclose(logits[board, targets], logits[0], atol=1e-4)


def test_checkpoints_rebuild_the_design_and_old_ones_load_as_slots(tmp_path: Path) -> None:
    hand = _network("hand")
    assert hand.describe()["design"] == "hand"
    save_checkpoint(tmp_path / "hand.zip", hand, STANDARD, 0, {})
    loaded, metadata = load_network(tmp_path / "hand.zip", STANDARD)
    assert loaded.design == "hand" and metadata["network"]["design"] == "hand"
    planes = encode_positions(position_array([State()]), hand.kind, STANDARD)[0]
    np.testing.assert_allclose(loaded.evaluate(planes)[0], hand.evaluate(planes)[0])

    slots = _network("slots")
    old_metadata = {k: v for k, v in slots.describe().items() if k != "design"}
    save_checkpoint(tmp_path / "old.zip", slots, STANDARD, 0, {"network": old_metadata})
    assert load_network(tmp_path / "old.zip", STANDARD)[0].design == "slots"
    save_checkpoint(tmp_path / "mixed.zip", slots, STANDARD, 0, {"network": {**old_metadata, "design": "hand"}})
    with pytest.raises(CheckpointError, match="does not match its metadata"):
        load_network(tmp_path / "mixed.zip", STANDARD)
