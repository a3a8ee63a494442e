"""``quarto bench planes``: its table, and that the loop it times writes the planes a step writes. No test asserts
on wall time."""

from __future__ import annotations

import re

import numpy as np
import pytest

from experiments.bench import planes
from quarto_env.core import FIELD_HAND, FIELD_OCCUPIED, NO_PIECE, Variant
from quarto_env.observation import OBSERVATION_KINDS
from quarto_env.vector import GameBatch


def test_it_prints_a_row_per_kind_with_every_subset(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--positions", "3000", "--rounds", "2", "--seconds", "0.001", "--observations", "raw", "tempo", "raw"]
    assert planes.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    # The first process of a fresh clone to meet the kernels says it compiles them, before the table
    lines = [line for line in lines if not line.startswith("compiling the game kernels")]
    assert "3,000 positions" in lines[0] and "2 round(s)" in lines[0]
    columns = re.findall(r"give \d+-\d+|\S+", lines[1])
    assert columns == ["kind", "all", "place", "give", "give 0-3", "give 4-7", "give 8-11", "give 12-15"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:] if re.match(r"^(raw|tempo) ", line)}
    assert list(rows) == ["raw", "tempo"]  # each kind once, in the order asked
    for figures in rows.values():
        assert len(figures) == 7 and all(float(value.replace(",", "")) > 0 for value in figures)


def test_the_subsets_split_the_positions_by_phase_and_pieces_on_the_board() -> None:
    positions = planes.random_positions(5000, seed=3)
    subsets = planes.position_subsets(positions)
    giving = subsets["give"][:, FIELD_HAND] == NO_PIECE
    assert len(positions) == 5000 and giving.all() and (subsets["place"][:, FIELD_HAND] != NO_PIECE).all()
    assert len(subsets["place"]) + len(subsets["give"]) == len(subsets["all"]) == 5000
    bands = [name for name in subsets if name.startswith("give ")]
    assert sum(len(subsets[name]) for name in bands) == len(subsets["give"])
    for name in bands:
        low, high = map(int, name.removeprefix("give ").split("-"))
        pieces = [int(occupied).bit_count() for occupied in subsets[name][:, FIELD_OCCUPIED]]
        assert low <= min(pieces) and max(pieces) <= high


@pytest.mark.parametrize("kind", list(OBSERVATION_KINDS))
def test_the_timed_loop_writes_the_planes_a_step_writes(kind: str) -> None:
    variant = Variant()
    positions = planes.random_positions(300, seed=5)
    ring = np.full((300, *OBSERVATION_KINDS[kind].shape), 7, dtype=np.int8)  # not zeros: the loop clears them
    planes._write_all(ring.view(np.uint64), OBSERVATION_KINDS[kind].level, positions, variant.compiled)
    batch = GameBatch(variant, 300)
    batch.positions[:] = positions
    np.testing.assert_array_equal(ring, batch.observe(batch.all_games, OBSERVATION_KINDS[kind]))
