"""Rendering: PettingZoo's render test on every variant flag combination, the text board read back into the
position, the picture decoded pixel by pixel into the attributes of every piece, and the SVG decoded shape by
shape and checked against the position and against the picture."""

from __future__ import annotations

import random
import re
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from pettingzoo.test import render_test

import quarto_env
from quarto_env.core import INITIAL_STATE, NO_PIECE, State, Variant, from_board, legal_actions, step
from quarto_env.notation import parse_position
from quarto_env.render import (
    BOARD,
    CELL,
    CLAIM_MARK,
    DARK_PIECE,
    LAST_MOVE_MARK,
    LIGHT_PIECE,
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
    svg_board,
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


# ---------------------------------------------------------------------------------------------------------
# SVG
# ---------------------------------------------------------------------------------------------------------
SVG = "{http://www.w3.org/2000/svg}"


def hex_colour(colour: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*colour)


def read_svg_piece(group: ET.Element, cell: int) -> tuple[int, tuple[float, float]]:
    """A piece decoded from its SVG shapes alone (not its data attributes), and the centre of its body: a
    rect is square, an ellipse round; the outer size says tall or short; the fill light or dark; a second
    shape, a hole."""
    body, *hole = list(group)
    stroke = float(body.get("stroke-width", "0"))
    if body.tag == SVG + "rect":
        square = True
        x, y, width = float(body.get("x", "")), float(body.get("y", "")), float(body.get("width", ""))
        assert body.get("height") == body.get("width")
        centre = (x + width / 2, y + width / 2)
    else:
        assert body.tag == SVG + "ellipse" and body.get("rx") == body.get("ry")
        square = False
        width = 2 * float(body.get("rx", ""))
        centre = (float(body.get("cx", "")), float(body.get("cy", "")))
    half = (width + stroke) / 2
    tall = half > (TALL_RADIUS + SHORT_RADIUS) / 2 * cell
    assert body.get("fill") in (hex_colour(LIGHT_PIECE), hex_colour(DARK_PIECE))
    dark = body.get("fill") == hex_colour(DARK_PIECE)
    assert len(hole) <= 1 and all(shape.tag == SVG + "ellipse" for shape in hole)
    return int(tall) | int(dark) << 1 | int(square) << 2 | int(bool(hole)) << 3, centre


def read_svg(svg: str) -> tuple[ET.Element, dict[str, list[tuple[int, int | None, tuple[float, float]]]]]:
    """The parsed SVG and its pieces by place: ``(piece, square or None, centre)``, each piece's data
    attribute checked against its shapes."""
    root = ET.fromstring(svg)  # raises on anything that is not well-formed XML
    assert root.tag == SVG + "svg"
    pieces: dict[str, list[tuple[int, int | None, tuple[float, float]]]] = {"board": [], "hand": [], "left": []}
    for group in root.iter(SVG + "g"):
        if "data-piece" not in group.attrib:
            continue
        place = group.get("data-place", "")
        piece, centre = read_svg_piece(group, SLOT - 12 if place == "left" else CELL)
        assert piece == int(group.get("data-piece", ""))
        square = group.get("data-square")
        pieces[place].append((piece, None if square is None else int(square), centre))
    return root, pieces


def random_positions(variant: Variant, seed: int) -> list[State]:
    """Every position of a seeded random game, the end included."""
    rng = random.Random(seed)
    states = [INITIAL_STATE]
    while not states[-1].over:
        states.append(step(variant, states[-1], rng.choice(legal_actions(variant, states[-1]))))
    return states


VARIANTS = [
    Variant(),
    Variant.make(squares=True),
    Variant.make(attributes=("colour", "top"), declaration=True),
    Variant.make(squares=True, declaration=True, false_declaration="penalty"),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: str(VARIANTS.index(variant)))
def test_the_svg_shows_every_piece_where_the_picture_does(variant: Variant) -> None:
    states = random_positions(variant, seed=VARIANTS.index(variant))
    for state in [*states[::2], states[-1]]:  # every other position and the end
        svg = svg_board(variant, state)
        _, pieces = read_svg(svg)
        image = render_image(variant, state)
        struck = {
            int(s)
            for kind in ("win", "claim")
            for squares, shape in marks(svg, kind)
            for s in squares.split()
            if shape.tag == SVG + "line"
        }  # a line struck through the pieces hides what the pixels show
        board = [NO_PIECE] * 16
        for piece, square, centre in pieces["board"]:
            assert square is not None and board[square] == NO_PIECE
            board[square] = piece
            assert centre == pytest.approx(square_center(square), abs=1)
            if square not in struck:
                assert read_piece(image, *square_center(square), CELL) == piece
        assert board == list(state.board)
        assert [piece for piece, _, _ in pieces["hand"]] == ([] if state.hand == NO_PIECE else [state.hand])
        for piece, _, centre in pieces["hand"]:
            assert centre == pytest.approx(hand_center(), abs=1)
            assert read_piece(image, *hand_center(), CELL) == piece
        assert sorted(piece for piece, _, _ in pieces["left"]) == [p for p in range(16) if state.available >> p & 1]
        for piece, _, centre in pieces["left"]:
            cx, cy = left_center(piece)
            assert centre == pytest.approx((cx + 3, cy + 3), abs=1)
            assert read_piece(image, cx + 3, cy + 3, SLOT - 12) == piece


def marks(svg: str, kind: str) -> list[tuple[str, ET.Element]]:
    """The groups marked ``kind`` (``win``, ``claim``): their squares and their one shape."""
    root = ET.fromstring(svg)
    found = []
    for group in root.iter(SVG + "g"):
        if group.get("data-mark") == kind:
            (shape,) = list(group)
            found.append((group.get("data-squares", ""), shape))
    return found


def test_the_svg_strikes_the_winning_line_and_frames_what_can_be_declared() -> None:
    playing = parse_position("135............. 7")
    won = step(Variant(), playing, 3)  # completes row 1 with four tall pieces
    assert marks(svg_board(Variant(), playing), "win") == []
    ((squares, line),) = marks(svg_board(Variant(), won), "win")
    assert squares == "0 1 2 3" and line.tag == SVG + "line"
    assert line.get("stroke") == hex_colour(WIN_MARK)
    ends = [float(line.get(key, "")) for key in ("x1", "y1", "x2", "y2")]
    assert ends == [*square_center(0), *square_center(3)]
    assert "player 0 wins: completed row 1" in svg_board(Variant(), won)
    variant = Variant.make(squares=True, declaration=True)
    claimable = step(variant, parse_position(".....37..b...... f", variant), 10)
    assert marks(svg_board(variant, claimable), "win") == []
    ((squares, frame),) = marks(svg_board(variant, claimable), "claim")
    assert squares == "5 6 9 10" and frame.tag == SVG + "rect"
    assert frame.get("stroke") == hex_colour(CLAIM_MARK) and frame.get("fill") == "none"


def test_the_last_move_is_outlined_in_both_pictures() -> None:
    state = parse_position("f9.......0..3... 5")
    root = ET.fromstring(svg_board(Variant(), state, last_move=9))
    (group,) = [g for g in root.iter(SVG + "g") if "data-last-move" in g.attrib]
    assert group.get("data-last-move") == "9"
    (frame,) = list(group)
    assert frame.get("stroke") == hex_colour(LAST_MOVE_MARK)
    x, width = float(frame.get("x", "")), float(frame.get("width", ""))
    assert x + width / 2 == pytest.approx(square_center(9)[0], abs=1)
    assert not [g for g in ET.fromstring(svg_board(Variant(), state)).iter(SVG + "g") if "data-last-move" in g.attrib]
    assert not has_colour(render_image(Variant(), state), LAST_MOVE_MARK)
    outlined = render_image(Variant(), state, last_move=9)
    cx, cy = square_center(9)
    assert tuple(outlined[cy, cx - CELL // 2 + 5]) == LAST_MOVE_MARK
    with pytest.raises(ValueError, match="last_move"):
        svg_board(Variant(), state, last_move=16)


def test_the_svg_escapes_its_text() -> None:
    names = ("alice", '<bob> & "co"')  # bob is to move: his name is on the status line
    svg = svg_board(Variant(), parse_position("f9.......0..3... 5"), names)
    texts = [element.text or "" for element in ET.fromstring(svg).iter(SVG + "text")]
    assert any('<bob> & "co" to place piece 5' in text for text in texts)
    assert "<bob>" not in svg


def test_the_env_shows_itself_as_svg_in_a_notebook() -> None:
    env = quarto_env.env(render_mode="rgb_array", first_player=0)
    env.reset(seed=0)
    env.step(5)  # player_0 gives piece 5
    env.step(3)  # player_1 places it on square 3
    raw = env.unwrapped
    svg = env._repr_svg_()  # what Jupyter calls on the wrapped env
    assert svg == raw._repr_svg_() == svg_board(raw.variant, raw.game_state, raw.seats, last_move=3)
    root, pieces = read_svg(svg)
    assert [(piece, square) for piece, square, _ in pieces["board"]] == [(5, 3)]
    assert [g.get("data-last-move") for g in root.iter(SVG + "g") if "data-last-move" in g.attrib] == ["3"]
    assert np.array_equal(env.render(), render_image(raw.variant, raw.game_state, raw.seats))  # rgb_array as before
    env.step(0)  # a give: the last placement stays outlined
    assert 'data-last-move="3"' in env._repr_svg_()
    env.reset(seed=0)
    assert "data-last-move" not in env._repr_svg_()
