"""Rendering: PettingZoo's render test on every variant flag combination, the text board read back into the
position, and the picture decoded pixel by pixel into the attributes of every piece."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from pettingzoo.test import render_test

import quarto_env
from quarto_env.core import NO_PIECE, Variant, from_board, step
from quarto_env.notation import parse_position
from quarto_env.render import (
    BOARD,
    CELL,
    CLAIM_MARK,
    PAGE,
    SHORT_RADIUS,
    SLOT,
    TALL_RADIUS,
    WIN_MARK,
    hand_center,
    left_center,
    piece_code,
    render_image,
    render_text,
    square_center,
)


def test_pettingzoo_render_test(variant_flags: dict, capsys: pytest.CaptureFixture[str]) -> None:
    render_test(lambda render_mode: quarto_env.env(render_mode=render_mode, **variant_flags))
    assert "pieces left:" in capsys.readouterr().out  # "human" without a display prints the text board


# ---------------------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------------------
CELL_PATTERN = re.compile(r"[ \[]\s*(?:([0-9a-f]) ([sT][lD][rS][fH])|\((\d+)\))\s*[ \]]")


def read_text_board(text: str) -> tuple[list[int], int, list[int]]:
    """The board, the piece in hand and the pieces left, read from the text alone, each piece decoded from
    its four letters (and checked against its hex digit)."""
    board = []
    for line in text.splitlines():
        if re.match(r"[1-4] \|", line):  # a row of the board, after its label
            for digit, code, square in CELL_PATTERN.findall(line):
                if square:
                    assert int(square) == len(board)
                    board.append(NO_PIECE)
                else:
                    assert decode(code) == int(digit, 16)
                    board.append(decode(code))
    hand_line = next(line for line in text.splitlines() if line.startswith("in hand:"))
    hand = NO_PIECE if hand_line.split()[-1] == "-" else decode(hand_line.split()[-1])
    left_text = text.split("pieces left:")[1].split("\n" + "pieces:")[0].split("can be declared")[0]
    left = [decode(code) for code in re.findall(r"[0-9a-f] ([sT][lD][rS][fH])", left_text)]
    return board, hand, left


def decode(code: str) -> int:
    """A piece from its code: upper case means attribute bit 1."""
    return sum(1 << k for k, letter in enumerate(code) if letter.isupper())


@pytest.mark.parametrize(
    "position", ["................ -", "f9.......0..3... 5", "b7c94821fad6e03. 5", "1.8.c4.....2...e -"]
)
def test_the_text_board_shows_every_attribute_of_every_piece(position: str) -> None:
    state = parse_position(position)
    text = render_text(Variant(), state)
    board, hand, left = read_text_board(text)
    assert board == list(state.board)
    assert hand == state.hand
    assert left == [p for p in range(16) if state.available >> p & 1]


def test_piece_codes() -> None:
    assert piece_code(0) == "slrf" and piece_code(15) == "TDSH" and piece_code(5) == "TlSf"
    assert len({piece_code(p) for p in range(16)}) == 16


def test_the_text_says_who_acts_and_how_the_game_ended() -> None:
    names = ("alice", "bob")
    assert "bob to place piece 5 (tall, light, square, solid)" in render_text(
        Variant(), parse_position("f9.......0..3... 5"), names
    )
    assert "alice to give a piece" in render_text(Variant(), parse_position("................ -"), names)
    won = step(Variant(), parse_position("135............. 7"), 3)
    assert "alice wins: completed row 1" in render_text(Variant(), won, names)
    drawn = step(Variant(), parse_position("b7c94821fad6e03. 5"), 15)
    assert "draw" in render_text(Variant(), drawn, names)
    assert "time limit" in render_text(Variant(), drawn, names, status="bob exceeded the time limit")
    declaration = Variant.make(declaration=True)
    placed = step(declaration, parse_position("135............. 7", declaration), 3)
    declared = step(declaration, placed, 16)
    declared_text = render_text(declaration, declared, names)
    assert "alice wins: declared Quarto (winning groups on the board: row 1)" in declared_text
    false = step(declaration, parse_position("................ -", declaration), 16)
    assert "bob wins: alice declared with nothing to claim" in render_text(declaration, false, names)


def test_groups_are_named_by_the_labels_of_the_board() -> None:
    column = step(Variant(), parse_position("1...3...5....... 7"), 12)  # tall pieces down column a
    assert "completed column a" in render_text(Variant(), column)
    assert "completed row 4" in render_text(Variant(), step(Variant(), parse_position("............135. 7"), 15))


def test_the_text_marks_what_can_be_declared() -> None:
    variant = Variant.make(squares=True, declaration=True)
    state = step(variant, parse_position(".....37..b...... f", variant), 10)  # completes the block 5-6-9-10
    text = render_text(variant, state)
    assert "can be declared: 2x2 block 5-6-9-10" in text
    assert "(or declare)" in text
    assert text.count("[") == 4 and "[7 TDSf]" in text


# ---------------------------------------------------------------------------------------------------------
# Image
# ---------------------------------------------------------------------------------------------------------
def is_dark(pixel: np.ndarray) -> bool:
    return float(pixel.astype(float).mean()) < 128


def read_piece(image: np.ndarray, cx: int, cy: int, cell: int) -> int:
    """Decode a drawn piece from a few pixels around its centre: size, fill, corners, centre."""

    def at(dx: float, dy: float) -> np.ndarray:
        return image[round(cy + dy), round(cx + dx)]

    def on_background(pixel: np.ndarray) -> bool:
        return tuple(pixel) in (BOARD, PAGE)

    tall = not on_background(at((TALL_RADIUS + SHORT_RADIUS) / 2 * cell, 0))
    half = (TALL_RADIUS if tall else SHORT_RADIUS) * cell
    body = at(0, 0.75 * half)  # inside the piece, outside any hole
    dark = is_dark(body)
    square = not on_background(at(0.8 * half, 0.8 * half))  # a corner: inside a square, outside a circle
    hollow = tuple(at(0, 0)) != tuple(body)
    return int(tall) | int(dark) << 1 | int(square) << 2 | int(hollow) << 3


def test_the_picture_shows_every_attribute_of_every_piece() -> None:
    pieces = [5, 10, 0, 15, 3, 12, 6, 9, 1, 14, 2, 13, 7, 8, 4, 11]
    image = render_image(Variant(), from_board(pieces))
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert [read_piece(image, *square_center(s), CELL) for s in range(16)] == pieces


def test_the_picture_shows_the_piece_in_hand_and_the_pieces_left() -> None:
    state = parse_position("f9.......0..3... 5")
    image = render_image(Variant(), state)
    assert read_piece(image, *hand_center(), CELL) == 5
    for piece in range(16):
        cx, cy = left_center(piece)
        if state.available >> piece & 1:
            assert read_piece(image, cx + 3, cy + 3, SLOT - 12) == piece  # drawn offset, clear of the label
        else:
            assert tuple(image[cy + 3, cx + 3]) == PAGE


def test_the_picture_strikes_winning_groups_and_frames_claimable_ones() -> None:
    playing = parse_position("135............. 7")
    won = step(Variant(), playing, 3)
    assert not has_colour(render_image(Variant(), playing), WIN_MARK)
    assert has_colour(render_image(Variant(), won), WIN_MARK)
    variant = Variant.make(squares=True, declaration=True)
    claimable = step(variant, parse_position(".....37..b...... f", variant), 10)
    assert has_colour(render_image(variant, claimable), CLAIM_MARK)


def has_colour(image: np.ndarray, colour: tuple[int, int, int]) -> bool:
    return bool((image == np.array(colour, dtype=np.uint8)).all(axis=2).any())


def test_env_render_modes(capsys: pytest.CaptureFixture[str]) -> None:
    text = quarto_env.env(render_mode="ansi")
    text.reset(seed=0)
    assert "to give a piece" in text.render()
    picture = quarto_env.env(render_mode="rgb_array")
    picture.reset(seed=0)
    assert picture.render().shape[2] == 3
    human = quarto_env.env(render_mode="human")
    human.reset(seed=0)  # renders by itself, like PettingZoo's classic envs
    assert "to give a piece" in capsys.readouterr().out
    silent = quarto_env.env()
    silent.reset(seed=0)
    with pytest.warns(UserWarning, match="without a render_mode"):
        assert silent.render() is None


def test_human_mode_draws_into_a_matplotlib_window_where_there_is_a_display(monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.pyplot as plt

    env_module = sys.modules["quarto_env.env"]  # the module: the package's ``env`` attribute is the function
    monkeypatch.setattr(env_module, "_NON_INTERACTIVE_BACKENDS", set())  # pretend Agg can show a window
    monkeypatch.setattr(plt, "pause", lambda seconds: None)
    env = quarto_env.env(render_mode="human", first_player=0)
    env.reset(seed=0)
    env.step(5)
    raw = env.unwrapped
    shown = np.asarray(raw._axes_image.get_array())
    assert np.array_equal(shown, render_image(raw.variant, raw.game_state, raw.seats))
    env.close()
    assert raw._figure is None
