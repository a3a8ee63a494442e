"""Suites of solved positions: small suites built here against an independent brute force, the file's checks
(hash, format, solver, rules, positions), the shipped suites' integrity and a sample of their values against
the solver and the opening book, and ``quarto suite``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from agents import suites
from agents.solver.book import shipped_book
from agents.solver.minimax import Solver
from agents.suites import (
    SUITE_STAGES,
    PositionSource,
    SolvedPosition,
    Suite,
    SuiteError,
    build_suite,
    collect_positions,
    default_suite_name,
    load_suite,
    save_suite,
    shipped_suite_names,
)
from experiments.arena import suite as suite_command
from quarto_env.core import STANDARD, Variant, legal_actions, position_array
from quarto_env.notation import parse_position
from quarto_env.symmetry import Symmetries
from tests.test_grade import reference_action_values

SQUARES = Variant.make(squares=True)
SMALL_STAGES = (6, 5, 4)


@pytest.fixture(scope="module")
def small_suite() -> Suite:
    return build_suite(
        "standard-v99", STANDARD, per_stage=6, seed=3, source=PositionSource(stages=SMALL_STAGES, games=40)
    )


def test_a_small_suite_holds_the_exact_values_of_every_action(small_suite: Suite) -> None:
    assert {p.empty for p in small_suite.positions} == set(SMALL_STAGES)
    for solved in small_suite.positions:
        assert dict(solved.action_values) == reference_action_values(STANDARD, solved.state), solved.position
        assert solved.critical == (min(solved.action_values.values()) < solved.value)
        assert len(solved.action_values) > 1  # a decision: two or more legal actions


def test_no_two_positions_of_a_suite_are_related_by_a_symmetry(small_suite: Suite) -> None:
    symmetries = Symmetries(STANDARD)
    keys = [symmetries.position_key(row) for row in position_array(p.state for p in small_suite.positions)]
    assert len(set(keys)) == len(keys)


def test_the_same_seed_collects_the_same_positions() -> None:
    source = PositionSource(stages=SMALL_STAGES, games=20)
    first = collect_positions(STANDARD, 4, seed=11, source=source)
    assert first == collect_positions(STANDARD, 4, seed=11, source=source)
    assert first != collect_positions(STANDARD, 4, seed=12, source=source)


def test_a_suite_file_round_trips(small_suite: Suite, tmp_path: Path) -> None:
    path = tmp_path / "suite.jsonl"
    save_suite(small_suite, path)
    loaded = load_suite(path, STANDARD)
    assert loaded.name == small_suite.name and loaded.variant == STANDARD
    assert [(p.state, dict(p.action_values)) for p in loaded.positions] == [
        (p.state, dict(p.action_values)) for p in small_suite.positions
    ]


def _edited(path: Path, line: int, edit) -> Path:  # type: ignore[no-untyped-def]
    lines = path.read_text().splitlines()
    lines[line] = edit(lines[line])
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("line", "edit", "message"),
    [
        (1, lambda text: text.replace(": 0", ": 1", 1) if ": 0" in text else text.replace(": -1", ": 0", 1), "damaged"),
        (0, lambda text: text.replace('"format": 1', '"format": 0'), "outdated"),
        (0, lambda text: text.replace('"solver": "', '"solver": "old '), "outdated"),
        (0, lambda text: "not json", "not a suite file"),
    ],
)
def test_a_damaged_or_outdated_suite_is_refused(small_suite: Suite, tmp_path: Path, line, edit, message) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "suite.jsonl"
    save_suite(small_suite, path)
    with pytest.raises(SuiteError, match=message):
        load_suite(_edited(path, line, edit))


def test_a_position_that_breaks_the_rules_is_refused_even_with_a_matching_hash(tmp_path: Path) -> None:
    state = parse_position("fe0d1b2493...... -")
    wrong = Suite("standard-v99", STANDARD, [SolvedPosition(state, {0: 0, 1: 0})], {})  # squares, not pieces
    save_suite(wrong, tmp_path / "wrong.jsonl")
    with pytest.raises(SuiteError, match="line 2: its actions are not the legal actions"):
        load_suite(tmp_path / "wrong.jsonl")


def test_a_suite_of_other_rules_and_an_unknown_name_are_refused(small_suite: Suite, tmp_path: Path) -> None:
    save_suite(small_suite, tmp_path / "suite.jsonl")
    with pytest.raises(SuiteError, match="is for standard rules, not squares"):
        load_suite(tmp_path / "suite.jsonl", SQUARES)
    with pytest.raises(SuiteError, match="unknown suite 'nosuch'; shipped suites: "):
        load_suite("nosuch")
    with pytest.raises(SuiteError, match="does not exist"):
        load_suite(tmp_path / "missing.jsonl")


def test_the_declaration_variant_has_no_suite() -> None:
    assert default_suite_name(Variant.make(declaration=True)) is None
    with pytest.raises(ValueError, match="declaration"):
        collect_positions(
            Variant.make(declaration=True), 2, seed=0, source=PositionSource(stages=SMALL_STAGES, games=2)
        )


# ---------------------------------------------------------------------------------------------------------
# The shipped suites
# ---------------------------------------------------------------------------------------------------------
SHIPPED = shipped_suite_names()


def test_the_standard_and_squares_suites_ship() -> None:
    assert default_suite_name(STANDARD) == "standard-v1"
    assert default_suite_name(SQUARES) == "squares-v1"


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_suite_checks_out_and_covers_every_stage(name: str) -> None:
    """Its hash and positions check (load_suite), its rules are in its name, every stage 16-4 is there with
    a few hundred positions from 12 empty squares down, and no two positions are related by a symmetry."""
    suite = load_suite(name)
    assert name.startswith(suites.rules_name(suite.variant) + "-v")
    counts = suite.counts()
    assert sorted(counts, reverse=True) == list(SUITE_STAGES)
    assert all(counts[e][0] >= 100 for e in range(12, 3, -1)), counts
    assert sum(critical for _, critical in counts.values()) > 0
    symmetries = Symmetries(suite.variant)
    keys = {symmetries.position_key(row) for row in position_array(p.state for p in suite.positions)}
    assert len(keys) == len(suite.positions)
    assert suite.generator["command"].startswith("quarto suite ")


@pytest.mark.parametrize("name", SHIPPED)
def test_a_sample_of_a_shipped_suite_agrees_with_the_solver(name: str) -> None:
    """Every position the opening book covers, and a seeded sample of the rest (up to 10 empty squares, where
    the solver is quick), valued again from scratch: a fresh solver without the value cache."""
    suite = load_suite(name)
    book = shipped_book(suite.variant)
    solver = Solver(suite.variant, table_bits=20, book=book)
    rng = random.Random(name)
    late = [p for p in suite.positions if p.empty <= 10]
    early = [p for p in suite.positions if book is not None and book.covers(p.state)]
    for solved in early + rng.sample(late, 12):
        result = solver.solve(solved.state, all_moves=True)
        assert result.action_values == dict(solved.action_values), solved.position
        assert set(result.action_values) == set(legal_actions(suite.variant, solved.state))


def test_quarto_suite_lists_shows_and_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert suite_command.main([]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in SHIPPED)
    for name in SHIPPED:
        assert suite_command.main([name]) == 0
        table = capsys.readouterr().out
        assert f"Suite {name}" in table and "| 16 |" in table and "| 4 |" in table
    with pytest.raises(SystemExit) as exit_info:
        suite_command.main(["nosuch"])
    assert exit_info.value.code == 2
    assert "unknown suite 'nosuch'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        suite_command.main(["standard-v1", "--build"])  # ships already: a new version, or --out
    assert "ships already" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        suite_command.main(["standard-v2", "--build", "--squares"])
    assert "expected squares-vN" in capsys.readouterr().err


def test_quarto_suite_builds_a_small_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "suite.jsonl"
    argv = ["standard-v7", "--build", "--games", "6", "--per-stage", "1", "--seed", "4", "--out", str(out)]
    assert suite_command.main(argv) == 0
    suite = load_suite(out)
    assert suite.name == "standard-v7" and suite.generator["seed"] == 4
    assert suite.generator["command"] == "quarto suite " + " ".join(argv)
    assert len({p.empty for p in suite.positions}) == len(suite.positions)  # one per stage reached
    header = json.loads(out.read_text().splitlines()[0])
    assert header["count"] == len(suite.positions)
    assert "Suite standard-v7" in capsys.readouterr().out
