"""The exact solver against a brute-force reference, the known values of the issue, and ``quarto solve``.

The reference is a plain exhaustive negamax over :func:`quarto_env.core.step` -- every legal action, the
declaration included, no pruning, no rules shortcuts, no symmetries -- memoised on the exact state (a dict
lookup, so that samples with 6 empty squares run in seconds). It shares no code with the search
(:mod:`agents.solver.alphabeta` and the ``agents.search_*`` modules it runs).
"""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agents.solver.kernels import EXACT_DEPTH, INFINITY, STATS_SIZE, WIN, _last_three, endgame
from agents.solver.minimax import Solver, solve
from agents.solver.ordering import (
    GROUPS_THROUGH,
    LIVE_GROUPS,
    SCRATCH_ROWS,
    SCRATCH_WIDTH,
    list_live_groups,
    new_scratch,
    place_in_live_groups,
)
from agents.solver.positions import greedy_game_positions
from experiments.arena import solve as solve_command
from quarto_env.core import (
    DECLARE,
    INITIAL_STATE,
    NO_WINNER,
    STANDARD,
    RulesError,
    State,
    Variant,
    bits,
    compiled_fields,
    legal_actions,
    safe_gives,
    step,
    winning_pieces,
    winning_squares_for,
)
from quarto_env.notation import format_position, parse_position

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = {
    "standard": STANDARD,
    "squares": Variant.make(squares=True),
    "colour+shape": Variant.make(attributes=("colour", "shape")),
    "declaration": Variant.make(declaration=True),
}

KNOWN_VALUES = {
    ".9.cb38e.16...4. d": 1,
    ".b..d..3.7.16.c0 f": -1,
    "6.e2....d8..9..1 5": 0,
    "....58.f7a.....3 d": 1,
    "76.c..afd.....80 -": 1,
    "......a8.e.df6.1 -": -1,
}
"""Standard rules, value for the side to move, from an independently written solver (issue 3)."""


# ---------------------------------------------------------------------------------------------------------
# The brute-force reference
# ---------------------------------------------------------------------------------------------------------
def reference_action_value(variant: Variant, state: State, action: int) -> int:
    """The value of ``action`` for the player to move in ``state``, by exhaustive search."""
    child = step(variant, state, action)
    if child.over:
        return 0 if child.winner == NO_WINNER else (1 if child.winner == state.to_move else -1)
    value = reference_value(variant, child)
    return value if child.to_move == state.to_move else -value


@functools.cache
def reference_value(variant: Variant, state: State) -> int:
    """The value of ``state`` (not over) for the player to move: the best action value."""
    return max(reference_action_value(variant, state, action) for action in legal_actions(variant, state))


def sample(variant: Variant, seed: int) -> list[State]:
    """Positions with 1-6 empty squares, both a piece in hand and a piece to give, from seeded greedy play: two of
    each, one with a single empty square (greedy games under the squares rules seldom get that far)."""
    return [
        state
        for empties in range(1, 7)
        for placing in (True, False)
        for state in greedy_game_positions(empties, 1 if empties == 1 else 2, seed + empties, variant, placing)
    ]


# ---------------------------------------------------------------------------------------------------------
# Agreement with the reference
# ---------------------------------------------------------------------------------------------------------
EVERYWHERE = {
    "canonical_empties": 0, "table_empties": 0, "draw_test_empties": 16, "give_order_empties": 0, "endgame_empties": 2
}  # fmt: skip
"""Search options that use the symmetries, the table, the draw test and the ordering of gives at every node
(by default they start or stop at thresholds that small positions never reach), and never the lean endgame
search that the default uses below 7 empty squares."""


@pytest.mark.parametrize("options", [{}, EVERYWHERE], ids=["default", "everywhere"])
@pytest.mark.parametrize("name", VARIANTS)
def test_solver_agrees_with_brute_force(name: str, options: dict[str, int]) -> None:
    variant = VARIANTS[name]
    solver = Solver(variant, table_bits=16, **options)
    for state in sample(variant, seed=11):
        result = solver.solve(state, all_moves=True)
        position = format_position(state)
        assert parse_position(position, variant) == state  # the sample's position strings round-trip
        expected = {a: reference_action_value(variant, state, a) for a in legal_actions(variant, state)}
        assert result.value == reference_value(variant, state), position
        assert result.action_values == expected, position
        best = [a for a, v in expected.items() if v == result.value and (a != DECLARE or state.claimable)]
        assert result.best_actions == best, position
        assert solver.solve(state).best_actions == best, position  # the null-window path, without all_moves


@pytest.mark.parametrize("name", ["standard", "squares"])
def test_solver_agrees_after_clearing_its_table(name: str) -> None:
    """A fresh table for every position: results do not depend on what earlier calls stored."""
    variant = VARIANTS[name]
    solver = Solver(variant, table_bits=16, **EVERYWHERE)
    for state in sample(variant, seed=37)[-8:]:
        solver.clear()
        assert solver.solve(state).value == reference_value(variant, state), format_position(state)


def test_hollow_piece_on_the_last_square() -> None:
    """Lane 3 of a hollow piece (8-15) on square 15 is bit 63: the int64 boundary of the compiled search."""
    states = [state for state in sample(STANDARD, seed=37) if state.lanes >> 63]
    assert len(states) >= 3
    for state in states:
        assert solve(state).value == reference_value(STANDARD, state), format_position(state)


@pytest.mark.parametrize("position", KNOWN_VALUES)
def test_known_values(position: str) -> None:
    assert format_position(parse_position(position)) == position  # the notation round-trips
    result = solve(parse_position(position))
    assert result.value == KNOWN_VALUES[position]
    assert result.best_actions


def test_declaration_is_taken_at_once() -> None:
    """A claimable group is declared, whoever completed it; giving instead hands the claim over."""
    variant = VARIANTS["declaration"]
    placer = parse_position("012...........3. 4", variant)  # piece 4 on square 3 completes the top row
    claimable = step(variant, placer, 3)
    assert claimable.claimable
    result = solve(claimable, variant, all_moves=True)
    assert result.value == 1 and result.best_actions == [DECLARE]
    assert result.action_values is not None
    assert all(value == -1 for action, value in result.action_values.items() if action != DECLARE)
    missed = step(variant, claimable, 5)  # the placer gives instead: the receiver may claim the row
    assert solve(missed, variant).best_actions == [DECLARE]


def test_false_declaration_is_never_best() -> None:
    for policy in ("lose", "penalty"):
        variant = Variant.make(declaration=True, false_declaration=policy)
        state = parse_position("6.e2....d8..9..1 5", variant)
        result = solve(state, variant, all_moves=True)
        assert DECLARE not in result.best_actions
        assert result.action_values is not None
        assert result.action_values[DECLARE] == (-1 if policy == "lose" else result.value)


def test_position_that_is_over_is_an_error() -> None:
    over = parse_position("0123............ -")  # the top row of pieces 0-3 is won: all short
    with pytest.raises(RulesError, match="over"):
        solve(over)


def test_result_to_dict_is_json() -> None:
    result = solve(parse_position("76.c..afd.....80 -"), all_moves=True)
    line = json.loads(json.dumps(result.to_dict()))
    assert line["value"] == 1 and line["best_actions"] == [11] and line["action_values"]["11"] == 1


# ---------------------------------------------------------------------------------------------------------
# quarto solve
# ---------------------------------------------------------------------------------------------------------
def test_command_one_position(capsys: pytest.CaptureFixture[str]) -> None:
    assert solve_command.main(["6.e2....d8..9..1 5", "--all-moves"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["position"] == "6.e2....d8..9..1 5" and line["value"] == 0 and line["best_actions"] == [1]
    assert set(line["action_values"]) == {str(a) for a in legal_actions(STANDARD, parse_position(line["position"]))}


def test_command_variant_flags(capsys: pytest.CaptureFixture[str]) -> None:
    text = "6.e2....d8..9..1 5"
    variant = Variant.make(attributes=("colour", "shape"), squares=True)
    assert solve_command.main([text, "--squares", "--attributes", "colour", "shape"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["variant"] == variant.describe()
    assert line["value"] == solve(parse_position(text, variant), variant).value


def test_command_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert solve_command.main(["6.e2....d8..9..1"]) == 2
    assert "18 characters" in capsys.readouterr().err
    for flags, message in [
        (["--attributes", "weight"], "allowed: height, colour, shape, top"),
        (["--false-declaration", "penalty"], "false_declaration='penalty' needs declaration=True"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            solve_command.main(["6.e2....d8..9..1 5", *flags])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err.splitlines()[-1]


def test_command_takes_attributes_as_words_or_joined_by_commas(capsys: pytest.CaptureFixture[str]) -> None:
    answers = []
    for attributes in (["colour", "shape"], ["colour,shape"], ["shape+colour"]):
        assert solve_command.main(["6.e2....d8..9..1 5", "--attributes", *attributes]) == 0
        answers.append(json.loads(capsys.readouterr().out))
    assert {a["variant"] for a in answers} == {Variant.make(attributes=("colour", "shape")).describe()}


def test_a_long_line_is_not_echoed_back(capsys: pytest.CaptureFixture[str]) -> None:
    """A 1 MB line gets a short answer: the position and the error quote its first 80 characters."""
    huge = "6" * 1_000_000
    assert solve_command.solve_lines(Solver(STANDARD), [huge + "\n"], all_moves=False) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["position"] == "6" * 80 + "... (1,000,000 characters)"
    assert "6" * 81 not in answer["error"] and "got 1000000 characters" in answer["error"]
    assert solve_command.main([huge]) == 2
    assert len(capsys.readouterr().err) < 400


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """``quarto solve - | head -1``: no BrokenPipeError, exit status 141 as after SIGPIPE."""
    positions = tmp_path / "positions.txt"
    positions.write_text("6.e2....d8..9..1 5\n" * 5000)
    script = (
        f"{shlex.quote(sys.executable)} -m experiments.cli solve - < {positions} | head -1; echo ${{PIPESTATUS[0]}}"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    first, status = done.stdout.splitlines()
    assert json.loads(first)["value"] == 0
    assert done.stderr == "" and status == "141"


def test_command_reads_stdin_in_order() -> None:
    """``quarto solve -`` in a real process: one line per position, in order, errors as lines."""
    lines = ["76.c..afd.....80 -", "not a position", "", "6.e2....d8..9..1 5", "0123............ -"]
    completed = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "solve", "-"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    answers = [json.loads(line) for line in completed.stdout.splitlines()]
    assert completed.returncode == 1  # some lines had errors
    assert [a["position"] for a in answers] == [line for line in lines if line]
    assert answers[0]["value"] == 1 and answers[2]["value"] == 0
    assert "error" in answers[1] and "over" in answers[3]["error"]


def test_solver_with_a_depth_plays_the_same_opening_moves_whatever_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an opening book, 13 empty squares are too many for the exact phase: ``depth`` makes the fallback
    minimax reproducible."""
    from agents import make_agent
    from agents.solver import minimax

    monkeypatch.setattr(minimax, "shipped_book", lambda _: None)
    opening = parse_position("f9......0....... 3")
    moves = []
    for _ in range(2):
        agent = make_agent("solver:depth=3", STANDARD, seed=7)
        moves.append(agent.act(opening))
        assert agent.last_value is None and agent.last_depth == 3
    assert moves[0] == moves[1]
    assert moves[0] in legal_actions(STANDARD, opening)


def test_solver_with_the_shipped_book_is_exact_in_the_opening() -> None:
    """With the standard book the same position is answered exactly, with no search, whatever ``depth`` says."""
    from agents import make_agent
    from agents.solver.book import shipped_book

    book = shipped_book(STANDARD)
    assert book is not None, "the standard opening book ships with the package"
    opening = parse_position("f9......0....... 3")
    agent = make_agent("solver:depth=3", STANDARD, seed=7)
    action = agent.act(opening)
    assert agent.last_value == book.value(opening) and agent.last_nodes == 0
    assert book.action_values(opening)[action] == agent.last_value


@pytest.mark.parametrize("name", ["standard", "squares", "declaration"])
def test_random_best_action_draws_every_best_action_and_nothing_else(name: str) -> None:
    """The first action that keeps the value in a random order: always a best action, and each of them turns up."""
    variant = VARIANTS[name]
    solver = Solver(variant, table_bits=16)
    rng = np.random.default_rng(0)
    for state in greedy_game_positions(7, 3, seed=5, variant=variant):
        result = solver.solve(state)
        drawn = [solver.random_best_action(state, rng) for _ in range(40 * len(result.best_actions))]
        assert {value for value, _ in drawn} == {result.value}
        assert {action for _, action in drawn} == set(result.best_actions), format_position(state)


def quiet_give_nodes(variant: Variant, empties: int, count: int, seed: int) -> list[State]:
    """``count`` positions with ``empties`` empty squares and a piece to give, from seeded random play that never
    wins nor gives a winning piece while it can help it (so that games reach the end game)."""
    rng = np.random.default_rng(seed)
    positions: list[State] = []
    while len(positions) < count:
        state = INITIAL_STATE
        while not state.over and (state.num_empty > empties or state.placing):
            if state.placing:
                quiet = [a for a in legal_actions(variant, state) if a != DECLARE]
                quiet = [a for a in quiet if not winning_squares_for(variant, state, state.hand) >> a & 1] or quiet
            else:
                quiet = bits(safe_gives(variant, state)) or legal_actions(variant, state)
            state = step(variant, state, int(rng.choice(quiet)))
        if not state.over and not state.claimable and state.num_empty == empties:
            positions.append(state)
    return positions


@pytest.mark.parametrize("name", ["standard", "squares", "colour+shape"])
def test_last_three_squares_solved_in_one_pass_agree_with_brute_force(name: str) -> None:
    """:func:`agents.solver.kernels._last_three`, which every search to the end runs at 3 empty squares, against the
    reference on give nodes with 3 empty squares where the giver has a safe piece (the others never reach it)."""
    variant = VARIANTS[name]
    scores = set()
    orders = np.full((SCRATCH_ROWS, SCRATCH_WIDTH), -1, dtype=np.int64)
    for state in quiet_give_nodes(variant, 3, 600, seed=3):
        lanes, occupied, available = compiled_fields(state)[:3]
        safe = available & ~winning_pieces(lanes, occupied, variant.groups, variant.counted)
        if safe:
            list_live_groups(lanes, occupied, variant.group_array, variant.counted, orders)
            score = _last_three(occupied, available, safe, orders[LIVE_GROUPS], 0, 0)
            assert score == WIN * reference_value(variant, state), format_position(state)
            scores.add(score)
    assert scores == {-WIN, 0, WIN}  # the sample holds every outcome


def shared_counted_attributes(variant: Variant, state: State, group: int) -> tuple[int, int]:
    """The counted attributes that every piece of ``group`` on the board has as 1, and as 0 (all of them, both ways,
    for an empty group), from the pieces one by one."""
    pieces = [state.piece_at(square) for square in bits(group) if state.occupied >> square & 1]
    ones = zeros = variant.counted
    for piece in pieces:
        ones &= piece
        zeros &= ~piece
    return ones, zeros


def expected_live_groups(variant: Variant, state: State) -> list[int]:
    """The row :func:`agents.solver.ordering.list_live_groups` should write, worked out group by group."""
    live = []
    for group in variant.groups:
        ones, zeros = shared_counted_attributes(variant, state, group)
        if group & ~state.occupied & 0xFFFF and ones | zeros:
            live.append(group | (ones | zeros << 4) << 16)
    return [len(live), *live]


@pytest.mark.parametrize("name", ["standard", "squares", "colour+shape"])
def test_live_groups_of_a_child_follow_from_the_parents(name: str) -> None:
    """The live groups, listed from the board and derived from the parent's after each placement of each safe
    piece, against the groups worked out one by one."""
    variant = VARIANTS[name]
    parent = np.full((SCRATCH_ROWS, SCRATCH_WIDTH), -1, dtype=np.int64)
    derived = parent.copy()
    checked, empty_groups_seen = 0, False
    for empties in (4, 5, 6, 7, 8, 11, 14):  # with groups still empty, near the start
        for state in quiet_give_nodes(variant, empties, 20, seed=empties):
            lanes, occupied = compiled_fields(state)[:2]
            list_live_groups(lanes, occupied, variant.group_array, variant.counted, parent)
            expected = expected_live_groups(variant, state)
            assert list(parent[LIVE_GROUPS, : len(expected)]) == expected, format_position(state)
            empty_groups_seen |= any(group & state.occupied == 0 for group in variant.groups)
            for piece in bits(safe_gives(variant, state)):
                for square in bits(~state.occupied & 0xFFFF):
                    child_state = step(variant, step(variant, state, piece), square)
                    child = compiled_fields(child_state)
                    place_in_live_groups(parent, square, piece, child[1], derived)
                    expected = expected_live_groups(variant, child_state)
                    assert list(derived[LIVE_GROUPS, : len(expected)]) == expected, format_position(child_state)
                    checked += 1
    assert checked > 300
    assert empty_groups_seen


@pytest.mark.parametrize("name", ["standard", "squares"])
def test_a_new_scratch_counts_the_groups_through_each_square(name: str) -> None:
    """The ordering's tie-break, the groups through each square, filled once for every ply."""
    variant = VARIANTS[name]
    scratch = new_scratch(5, variant.group_array)
    corner, centre = 0, 5
    assert list(scratch[:, GROUPS_THROUGH, corner]) == [3 if name == "standard" else 4] * 5  # row, column, diagonal
    assert list(scratch[:, GROUPS_THROUGH, centre]) == [3 if name == "standard" else 7] * 5
    for square in range(16):
        expected = sum(1 for group in variant.groups if group >> square & 1)
        assert (scratch[:, GROUPS_THROUGH, square] == expected).all()


@pytest.mark.parametrize("name", ["standard", "squares", "colour+shape"])
def test_endgame_search_agrees_with_brute_force(name: str) -> None:
    """:func:`agents.solver.kernels.endgame`, which every search to the end runs from 6 empty squares, with the full
    window, against the reference on give nodes with 4 to 6 empty squares where the giver has a safe piece."""
    variant = VARIANTS[name]
    scratch = new_scratch(EXACT_DEPTH + 2, variant.group_array)
    stats = np.zeros(STATS_SIZE, dtype=np.int64)
    scores = set()
    for empties in (4, 5, 6):
        for state in quiet_give_nodes(variant, empties, 60, seed=10 + empties):
            lanes, occupied, available = compiled_fields(state)[:3]
            safe = available & ~winning_pieces(lanes, occupied, variant.groups, variant.counted)
            if safe:
                list_live_groups(lanes, occupied, variant.group_array, variant.counted, scratch[0])
                score = endgame(occupied, available, safe, -INFINITY, INFINITY, scratch, 0, stats)
                assert score == WIN * reference_value(variant, state), format_position(state)
                scores.add(score)
    assert scores == {-WIN, 0, WIN}
