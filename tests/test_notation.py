"""Position notation: round trips, the example of the issue, and a clear error for every kind of bad string."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarto_env.core import NO_PIECE, NO_WINNER, STANDARD, Variant, from_board, has_winning_group, step
from quarto_env.notation import EXAMPLE, PositionError, format_position, parse_position

DECLARATION = Variant.make(declaration=True)


def test_the_example_position() -> None:
    state = parse_position(EXAMPLE)
    assert EXAMPLE == "f9.......0..3... 5"
    assert state.board == (15, 9) + (NO_PIECE,) * 7 + (0,) + (NO_PIECE,) * 2 + (3,) + (NO_PIECE,) * 3
    assert state.hand == 5 and state.placing
    assert state.available == 0xFFFF & ~(1 << 15 | 1 << 9 | 1 << 0 | 1 << 3 | 1 << 5)
    assert state.to_move == 1  # the fifth piece is placed by player 1 (player 0 gives first)
    assert format_position(state) == EXAMPLE


def test_opening_position() -> None:
    assert format_position(parse_position("................ -")) == "................ -"
    assert parse_position("................ -").to_move == 0


def test_upper_case_and_surrounding_spaces_are_accepted() -> None:
    assert parse_position("  F9.......0..3... 5\n") == parse_position(EXAMPLE)


positions = st.permutations(range(16)).flatmap(
    lambda pieces: st.tuples(st.just(pieces), st.integers(0, 16), st.booleans(), st.permutations(range(16)))
)


@settings(max_examples=300, deadline=None)
@given(positions)
def test_format_and_parse_round_trip(position: tuple[list[int], int, bool, list[int]]) -> None:
    pieces, count, with_hand, squares = position
    board = [NO_PIECE] * 16
    for piece, square in zip(pieces[:count], squares[:count], strict=True):
        board[square] = piece
    hand = pieces[count] if with_hand and count < 16 else NO_PIECE
    state = from_board(board, hand)
    text = format_position(state)
    if has_winning_group(STANDARD, state) and hand != NO_PIECE:
        with pytest.raises(PositionError, match="winning group"):
            parse_position(text)
        # The declaration variant reads the same board as a game still open (nothing declared yet).
        assert format_position(parse_position(text, DECLARATION)) == text
        return
    parsed = parse_position(text)
    assert format_position(parsed) == text
    assert parsed.board == state.board and parsed.hand == state.hand and parsed.available == state.available
    assert parsed.to_move == state.to_move


def test_a_finished_game_is_read_as_won_by_the_last_placer() -> None:
    before = parse_position("135............. 7")
    won = step(STANDARD, before, 3)
    text = format_position(won)
    assert text == "1357............ -"
    parsed = parse_position(text)
    assert parsed.over and parsed.winner == won.winner == 0
    assert not parse_position(text, DECLARATION).over  # no declaration was made: the game goes on


def test_a_full_board_is_over() -> None:
    assert parse_position("b7c94821fad6e035 -").over
    assert parse_position("b7c94821fad6e035 -").winner == NO_WINNER


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("f9.......0..3... ", "18 characters"),
        ("f9.......0..3...  5", "18 characters"),
        ("f9.......0..3...5", "18 characters"),
        ("f9.......0..3...x5", "a space"),
        ("", "18 characters"),
        ("f9.......0..g... 5", "square 12 has 'g'"),
        ("f9...-...0..3... 5", "square 5 has '-'"),
        ("f9.......0..3... z", "piece in hand 'z'"),
        ("f9.......0..3... .", "piece in hand '.'"),
        ("f9.......0..f... 5", "piece\\(s\\) f on the board twice"),
        ("f9.......0..3... 9", "piece in hand 9 is already on the board"),
        ("1357............ 9", "winning group"),
    ],
)
def test_bad_strings_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(PositionError, match=message):
        parse_position(text)


def test_position_errors_are_value_errors() -> None:
    with pytest.raises(ValueError, match="18 characters"):
        parse_position("f9")
