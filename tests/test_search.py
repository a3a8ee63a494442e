"""The symmetries, the compiled search and the minimax agent: properties and scripted positions."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import SpecError, make_agent
from agents.solver.alphabeta import AlphaBetaSearch
from agents.solver.kernels import EXACT_DEPTH, WIN
from agents.solver.minimax import MinimaxAgent, SolverAgent, solve
from agents.solver.positions import greedy_game_positions
from quarto_env.core import (
    ATTRIBUTES,
    DECLARE,
    LINES,
    NO_PIECE,
    NUM_ATTRIBUTES,
    SQUARE_BLOCKS,
    STANDARD,
    State,
    Variant,
    from_board,
    legal_actions,
    shared_attributes,
    signed_lanes,
    step,
)
from quarto_env.notation import format_position, parse_position
from quarto_env.symmetry import board_symmetries, canonical_position, map_squares, symmetries_for


# ---------------------------------------------------------------------------------------------------------
# Symmetries
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("squares", "count"), [(False, 32), (True, 8)])
def test_board_symmetries_form_the_group_of_the_groups(squares: bool, count: int) -> None:
    groups = LINES + SQUARE_BLOCKS if squares else LINES
    images = symmetries_for(squares)
    assert len(images) == count == len(set(images))
    assert images[0] == tuple(range(16))
    for image in images:
        assert sorted(map_squares(g, image) for g in groups) == sorted(groups)
    for a, b in itertools.product(images, repeat=2):  # closed under composition
        assert tuple(b[a[s]] for s in range(16)) in images


def test_rotation_and_middle_swap_are_found() -> None:
    rotation = tuple(4 * (s % 4) + 3 - s // 4 for s in range(16))  # a quarter turn
    swap = (0, 2, 1, 3)  # rows 1 and 2 trade places, and so do columns 1 and 2
    middle_swap = tuple(4 * swap[s // 4] + swap[s % 4] for s in range(16))
    assert rotation in symmetries_for(False) and rotation in symmetries_for(True)
    assert middle_swap in symmetries_for(False) and middle_swap not in symmetries_for(True)
    assert board_symmetries(LINES) == symmetries_for(False)


def relabel(piece: int, order: tuple[int, ...], flips: int) -> int:
    """Piece ``piece`` with attribute ``order[k]`` moved to attribute ``k`` and the attributes in ``flips``
    complemented."""
    return sum(((piece >> order[k]) & 1) << k for k in range(NUM_ATTRIBUTES)) ^ flips


def transformed(board: tuple[int, ...], image: tuple[int, ...], order: tuple[int, ...], flips: int) -> State:
    moved = [NO_PIECE] * 16
    for square, piece in enumerate(board):
        if piece != NO_PIECE:
            moved[image[square]] = relabel(piece, order, flips)
    return from_board(moved)


boards = st.permutations(range(16)).flatmap(
    lambda pieces: st.lists(st.booleans(), min_size=16, max_size=16).map(
        lambda keep: tuple(p if k else NO_PIECE for p, k in zip(pieces, keep, strict=True))
    )
)


@settings(max_examples=200, deadline=None)
@given(
    board=boards,
    squares=st.booleans(),
    symmetry=st.integers(0, 31),
    order=st.permutations(range(4)),
    flips=st.integers(0, 15),
)
def test_canonical_form_is_the_same_for_every_symmetric_image(
    board: tuple[int, ...], squares: bool, symmetry: int, order: list[int], flips: int
) -> None:
    images = symmetries_for(squares)
    state = from_board(board)
    image = transformed(board, images[symmetry % len(images)], tuple(order), flips)
    counted = STANDARD.counted
    assert canonical_position(image.lanes, image.occupied, counted, squares) == canonical_position(
        state.lanes, state.occupied, counted, squares
    )


@settings(max_examples=100, deadline=None)
@given(board=boards, other=boards)
def test_canonical_forms_differ_for_boards_with_different_occupancy_or_shared_attributes(
    board: tuple[int, ...], other: tuple[int, ...]
) -> None:
    """The canonical form keeps what decides a game: equal forms mean equal occupancy counts and equal
    multisets of group invariants (checked here: the number of groups whose pieces share a value)."""
    a, b = from_board(board), from_board(other)
    if canonical_position(a.lanes, a.occupied, 15, False) == canonical_position(b.lanes, b.occupied, 15, False):
        assert a.occupied.bit_count() == b.occupied.bit_count()
        assert _sharing_groups(a) == _sharing_groups(b)


def _sharing_groups(state: State) -> int:
    return sum(
        1 for g in LINES if state.occupied & g and sum(shared_attributes(state.lanes, state.occupied & g, 15)) != 0
    )


def test_uncounted_attributes_are_ignored() -> None:
    """With colour alone counted, pieces that agree on colour are interchangeable."""
    a, b = parse_position("01.............. -"), parse_position("2b.............. -")  # colours: light, dark
    assert canonical_position(a.lanes, a.occupied, 0b0010, False) == canonical_position(
        b.lanes, b.occupied, 0b0010, False
    )


def test_solver_value_is_invariant_under_symmetries() -> None:
    for state in greedy_game_positions(9, 4, seed=5):
        board = state.board
        image = symmetries_for(False)[7]
        moved = transformed(board, image, (2, 0, 3, 1), 0b0101)
        moved = moved._replace(hand=relabel(state.hand, (2, 0, 3, 1), 0b0101) if state.placing else NO_PIECE)
        moved = moved._replace(available=moved.available & ~(1 << moved.hand) if moved.placing else moved.available)
        assert solve(moved).value == solve(state).value, format_position(state)


# ---------------------------------------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------------------------------------
def test_signed_lanes_keep_the_bits() -> None:
    for lanes in (0, 1 << 63, (1 << 64) - 1, 0x8001_0000_0000_0004):
        assert signed_lanes(lanes) % (1 << 64) == lanes
        assert -(1 << 63) <= signed_lanes(lanes) < 1 << 63


def test_proven_scores_of_a_shallow_search_are_exact() -> None:
    """A depth-limited search scores +-WIN only when the position is won or lost under perfect play."""
    search = AlphaBetaSearch(STANDARD, table_bits=16)
    for state in greedy_game_positions(8, 8, seed=3):
        value = solve(state).value
        for depth in range(1, 7):
            score = search.run(state, depth).score
            if abs(score) == WIN:
                assert score // WIN == value, (format_position(state), depth)
            else:
                assert abs(score) < WIN


def test_minimax_to_the_end_is_the_solver() -> None:
    for state in greedy_game_positions(8, 6, seed=17):
        result = solve(state)
        agent = MinimaxAgent(STANDARD, seed=0, depth=EXACT_DEPTH)
        action = agent.act(state)
        assert agent.last_score == result.value * WIN, format_position(state)
        assert action in result.best_actions
        assert agent.last_depth == 2 * state.num_empty - (1 if state.placing else 0)


def test_search_stops_at_a_deadline_that_has_passed() -> None:
    result = AlphaBetaSearch(STANDARD, table_bits=16).run(
        parse_position("................ -"), EXACT_DEPTH, deadline=0.0
    )
    assert result.aborted
    assert result.nodes == 1  # the stop flag is set before the search starts, and read at every node


def test_search_refuses_finished_or_claimable_positions() -> None:
    search = AlphaBetaSearch(STANDARD, table_bits=16)
    with pytest.raises(ValueError, match="not over"):
        search.run(parse_position("0123............ -"))
    with pytest.raises(ValueError, match="at least 1 ply"):
        search.run(parse_position("6.e2....d8..9..1 5"), depth=0)


# ---------------------------------------------------------------------------------------------------------
# The agents
# ---------------------------------------------------------------------------------------------------------
def test_specs_build_minimax_and_solver() -> None:
    agent = make_agent("minimax:depth=3", STANDARD, seed=1)
    assert isinstance(agent, MinimaxAgent) and agent.max_depth == 3 and agent.time_budget == 0
    agent = make_agent("minimax:time=0.2,depth=6", STANDARD, seed=1)
    assert isinstance(agent, MinimaxAgent) and agent.max_depth == 6 and agent.time_budget == 0.2
    assert make_agent("minimax:time=0.2", STANDARD).max_depth == EXACT_DEPTH  # type: ignore[attr-defined]
    assert make_agent("minimax", STANDARD).max_depth == 2  # type: ignore[attr-defined]
    assert isinstance(make_agent("solver:empties=8", STANDARD), SolverAgent)


@pytest.mark.parametrize("spec", ["minimax:depth=0", "minimax:time=-1", "minimax:deep=3", "solver:deep=3"])
def test_bad_specs_name_the_options(spec: str) -> None:
    with pytest.raises(SpecError, match=r"depth|time|empties"):
        make_agent(spec, STANDARD)


def test_time_budget_always_answers_with_a_legal_action() -> None:
    """Even a budget too small for one ply gets a legal (tactically sound) answer; counters are set."""
    state = step(STANDARD, parse_position("................ -"), 3)
    for budget in (1e-6, 0.001, 0.02):
        agent = MinimaxAgent(STANDARD, seed=0, time=budget)
        action = agent.act(state)
        assert action in legal_actions(STANDARD, state)
        assert agent.last_seconds > 0 and agent.last_nodes >= 0


def test_deepening_goes_deeper_with_more_time() -> None:
    state = greedy_game_positions(12, 1, seed=2)[0]
    shallow, deep = MinimaxAgent(STANDARD, 0, time=0.002), MinimaxAgent(STANDARD, 0, time=0.3)
    shallow.act(state)
    deep.act(state)
    assert deep.last_depth >= shallow.last_depth and deep.last_depth >= 2


def test_agents_take_an_immediate_win() -> None:
    state = parse_position(".9.cb38e.16...4. d")
    for agent in (MinimaxAgent(STANDARD, 0, depth=1), SolverAgent(STANDARD, 0)):
        action = agent.act(state)
        assert step(STANDARD, state, action).winner == state.to_move


@pytest.mark.parametrize("spec", ["minimax:depth=2", "solver"])
def test_agents_declare_at_once_and_claim_a_missed_quarto(spec: str) -> None:
    variant = Variant.make(declaration=True)
    agent = make_agent(spec, variant, seed=0)
    placer = parse_position("012...........3. 4", variant)
    assert agent.act(placer) == 3  # completes the top row
    claimable = step(variant, placer, 3)
    assert agent.act(claimable) == DECLARE
    missed = step(variant, claimable, 5)  # the opponent failed to declare and gave a piece
    assert agent.act(missed) == DECLARE
    quiet = parse_position("6.e2....d8..9..1 5", variant)
    assert agent.act(quiet) != DECLARE  # never a false declaration


@pytest.mark.parametrize("attributes", [ATTRIBUTES[:1], ("colour", "top")])
def test_minimax_plays_legal_moves_in_every_variant(attributes: tuple[str, ...]) -> None:
    """With one attribute counted, many roots are certain draws (the search settles them without a move)."""
    for squares in (False, True):
        variant = Variant.make(attributes=attributes, squares=squares)
        agent = MinimaxAgent(variant, seed=0, depth=3)
        state = parse_position("................ -", variant)
        while not state.over:
            state = step(variant, state, agent.act(state))  # raises on an illegal action
        assert math.isfinite(agent.last_seconds)
