"""Pictures of Quarto positions: a text board (the ``ansi`` render mode) and an image (``rgb_array``/``human``).

Both show the board with all four attributes of every piece, the piece in hand, the pieces left, whose turn
it is and in which phase, and the groups that won or can be declared. The ``quarto`` commands (play, replay)
reuse them.

Text: a piece is its hex digit and a four-letter code, one letter per attribute in bit order, upper case for
bit 1 (see ``PIECE_LETTERS``): ``f TDSH`` is piece 15, tall, dark, square, hollow; ``0 slrf`` is piece 0,
short, light, round, solid ("filled"). An empty square shows its number, the action that places there. The
columns are labelled ``a``-``d`` from the left and the rows ``1``-``4`` from the top, so that ``b2`` -- a name
``quarto play`` takes -- is square 5; rows and columns in the messages use the same labels (``row 1``,
``column a``).

Image: a big piece is tall and a small one short; the fill is light (cream) or dark (brown); the outline is a
circle (round) or a square (square); a hollow piece has a hole drawn in its middle, a solid one none.
"""

from __future__ import annotations

import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from quarto_env.core import (
    ATTRIBUTE_VALUES,
    ATTRIBUTES,
    HEX,
    LINES,
    NO_PIECE,
    NO_WINNER,
    NUM_ATTRIBUTES,
    NUM_PIECES,
    NUM_SQUARES,
    State,
    Variant,
    bits,
    is_winning_group,
)

DEFAULT_NAMES = ("player 0", "player 1")
"""Names of the core's players 0 (who gives first) and 1, unless the caller passes its own."""

PIECE_LETTERS = (("s", "T"), ("l", "D"), ("r", "S"), ("f", "H"))
"""``PIECE_LETTERS[k][bit]``: the letter of attribute ``k`` (height, colour, shape, top) with value ``bit``."""
LEGEND = (
    "pieces: hex digit + height T tall/s short, colour D dark/l light, shape S square/r round, "
    "top H hollow/f solid (upper case = bit 1)"
)


# ---------------------------------------------------------------------------------------------------------
# Words shared by the text and the image
# ---------------------------------------------------------------------------------------------------------
def piece_code(piece: int) -> str:
    """The four-letter code of ``piece``, e.g. ``TDSH`` for 15 and ``slrf`` for 0."""
    return "".join(PIECE_LETTERS[k][piece >> k & 1] for k in range(NUM_ATTRIBUTES))


def describe_piece(piece: int) -> str:
    """``piece`` in words, e.g. ``5 (tall, light, square, solid)``."""
    values = (ATTRIBUTE_VALUES[k][piece >> k & 1] for k in range(NUM_ATTRIBUTES))
    return f"{HEX[piece]} ({', '.join(values)})"


COLUMN_LABELS = "abcd"
"""The label of each column, from the left; the rows are labelled ``1``-``4`` from the top."""


def square_name(square: int) -> str:
    """The board's label of ``square``: its column letter and row number, ``a1`` (0) to ``d4`` (15)."""
    return f"{COLUMN_LABELS[square % 4]}{square // 4 + 1}"


def describe_group(group: int) -> str:
    """A name for the group whose square mask is ``group``, by the board's labels: ``row 3``, ``column a``,
    ``diagonal``, ``anti-diagonal`` or ``2x2 block 5-6-9-10``."""
    squares = [s for s in range(NUM_SQUARES) if group >> s & 1]
    rows = {s // 4 for s in squares}
    columns = {s % 4 for s in squares}
    if len(rows) == 1:
        return f"row {rows.pop() + 1}"
    if len(columns) == 1:
        return f"column {COLUMN_LABELS[columns.pop()]}"
    if group == LINES[8]:
        return "diagonal"
    if group == LINES[9]:
        return "anti-diagonal"
    return "2x2 block " + "-".join(map(str, squares))


def winning_groups(variant: Variant, state: State) -> list[int]:
    """The groups on the board that are full and share a counted attribute."""
    return [g for g in variant.groups if is_winning_group(state.lanes, state.occupied, g, variant.counted)]


def claimable_groups(variant: Variant, state: State) -> list[int]:
    """The groups that can be declared now (declaration variant)."""
    return [g for i, g in enumerate(variant.groups) if state.claimable >> i & 1]


def describe_variant(variant: Variant) -> str:
    """The rules in force in a few words, e.g. ``standard rules`` or ``colour+top count only; 2x2 blocks win``."""
    parts = []
    if variant.attributes != ATTRIBUTES:
        parts.append("+".join(variant.attributes) + " count only")
    if variant.squares:
        parts.append("2x2 blocks win")
    if variant.declaration:
        parts.append(f"declaration (a false one {'loses' if variant.false_declaration == 'lose' else 'is penalised'})")
    return "; ".join(parts) or "standard rules"


def describe_status(variant: Variant, state: State, names: tuple[str, str] = DEFAULT_NAMES) -> str:
    """One line: who acts and how, or how the game ended."""
    mover = names[state.to_move]
    if state.over:
        if state.winner == NO_WINNER:
            return "draw: all 16 pieces are placed and no group wins"
        if variant.declaration and state.winner != state.to_move:
            return f"{names[state.winner]} wins: {mover} declared with nothing to claim"
        groups = ", ".join(describe_group(g) for g in winning_groups(variant, state))
        if variant.declaration:  # the claimed group is among these (the others were dead)
            return f"{names[state.winner]} wins: declared Quarto (winning groups on the board: {groups})"
        return f"{names[state.winner]} wins: completed {groups}"
    declare = " (or declare)" if variant.declaration else ""
    if state.placing:
        return f"{mover} to place piece {describe_piece(state.hand)}{declare}"
    return f"{mover} to give a piece{declare}"


# ---------------------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------------------
def render_text(
    variant: Variant, state: State, names: tuple[str, str] = DEFAULT_NAMES, status: str | None = None
) -> str:
    """The position as text: status, board, piece in hand, pieces left, legend.

    ``names`` name the core's players 0 and 1; ``status`` replaces the status line (e.g. a time forfeit,
    which the rules state does not record). Squares of a group that can be declared are in ``[brackets]``.
    """
    claimable = 0
    for group in claimable_groups(variant, state):
        claimable |= group
    separator = "  +" + "+".join(["--------"] * 4) + "+"
    labels = ("   " + " ".join(f"{label:^8}" for label in COLUMN_LABELS)).rstrip()
    lines = [f"Quarto - {describe_variant(variant)}", status or describe_status(variant, state, names), labels]
    lines.append(separator)
    for row in range(4):
        cells = [_text_cell(state, 4 * row + col, bool(claimable >> (4 * row + col) & 1)) for col in range(4)]
        lines += [f"{row + 1} |" + "|".join(cells) + "|", separator]
    hand = "-" if state.hand == NO_PIECE else f"{HEX[state.hand]} {piece_code(state.hand)}"
    lines.append(f"in hand:     {hand}")
    left = [f"{HEX[p]} {piece_code(p)}" for p in bits(state.available)]
    for start in range(0, max(len(left), 1), 8):
        label = "pieces left:" if start == 0 else ""
        lines.append(f"{label:<13}{'  '.join(left[start : start + 8]) or '-'}")
    groups = claimable_groups(variant, state)
    if groups:
        lines.append("can be declared: " + ", ".join(describe_group(g) for g in groups))
    lines.append(LEGEND)
    return "\n".join(lines)


def _text_cell(state: State, square: int, marked: bool) -> str:
    piece = state.piece_at(square)
    body = f"({square})" if piece == NO_PIECE else f"{HEX[piece]} {piece_code(piece)}"
    return f"[{body:^6}]" if marked else f" {body:^6} "


# ---------------------------------------------------------------------------------------------------------
# Image
# ---------------------------------------------------------------------------------------------------------
CELL = 100
"""Side of a board square, in pixels."""
MARGIN = 24
BOARD_ORIGIN = (MARGIN, 76)
"""Top-left corner of the board."""
BOARD_SIDE = 4 * CELL
PANEL_X = MARGIN + BOARD_SIDE + 36
"""Left edge of the side panel (piece in hand, pieces left)."""
SLOT = 56
"""Side of a slot in the grid of pieces left."""
HAND_ORIGIN = (PANEL_X, BOARD_ORIGIN[1] + 26)
LEFT_ORIGIN = (PANEL_X, HAND_ORIGIN[1] + CELL + 44)
"""Top-left corner of the 4x4 grid of pieces left (piece ``p`` in row ``p // 4``, column ``p % 4``)."""
WIDTH = PANEL_X + 4 * SLOT + MARGIN
HEIGHT = BOARD_ORIGIN[1] + BOARD_SIDE + 44

TALL_RADIUS = 0.37
SHORT_RADIUS = 0.22
"""Half the size of a tall / short piece, as a share of its cell."""
HOLE_RADIUS = 0.45
"""Radius of the hole of a hollow piece, as a share of the piece's half size."""

PAGE = (246, 243, 236)
BOARD = (196, 160, 118)
GRID = (96, 66, 42)
INK = (35, 25, 18)
FAINT = (150, 132, 110)
LIGHT_PIECE = (252, 240, 212)
DARK_PIECE = (88, 44, 22)
HOLE_IN_LIGHT = (128, 100, 72)
HOLE_IN_DARK = (24, 12, 6)
HOLE_RIM_IN_DARK = (236, 214, 180)
WIN_MARK = (214, 38, 38)
CLAIM_MARK = (236, 140, 0)


def square_center(square: int) -> tuple[int, int]:
    """Pixel centre of ``square`` on the board."""
    x0, y0 = BOARD_ORIGIN
    return x0 + (square % 4) * CELL + CELL // 2, y0 + (square // 4) * CELL + CELL // 2


def hand_center() -> tuple[int, int]:
    """Pixel centre of the piece in hand."""
    return HAND_ORIGIN[0] + CELL // 2, HAND_ORIGIN[1] + CELL // 2


def left_center(piece: int) -> tuple[int, int]:
    """Pixel centre of ``piece``'s slot in the grid of pieces left."""
    return LEFT_ORIGIN[0] + (piece % 4) * SLOT + SLOT // 2, LEFT_ORIGIN[1] + (piece // 4) * SLOT + SLOT // 2


def render_image(
    variant: Variant, state: State, names: tuple[str, str] = DEFAULT_NAMES, status: str | None = None
) -> np.ndarray:
    """The position as an ``(H, W, 3)`` ``uint8`` RGB picture; ``names`` and ``status`` as in :func:`render_text`.

    Winning groups are struck through in red, groups that can be declared in orange.
    """
    image = Image.new("RGB", (WIDTH, HEIGHT), PAGE)
    draw = ImageDraw.Draw(image)
    _fit_text(draw, (MARGIN, 14), f"Quarto - {describe_variant(variant)}", 18)
    _fit_text(draw, (MARGIN, 42), status or describe_status(variant, state, names), 18)
    _draw_board(draw, state)
    if state.over and state.winner != NO_WINNER:
        for group in winning_groups(variant, state):
            _mark_group(draw, group, WIN_MARK)
    for group in claimable_groups(variant, state):
        _mark_group(draw, group, CLAIM_MARK)
    _label_board(draw, state)
    _draw_panel(draw, state)
    draw.text((MARGIN, HEIGHT - 30), _IMAGE_LEGEND, fill=FAINT, font=_font(14))
    return np.asarray(image, dtype=np.uint8).copy()


_IMAGE_LEGEND = "big = tall, small = short   cream = light, brown = dark   circle = round   hole = hollow"


def _draw_board(draw: ImageDraw.ImageDraw, state: State) -> None:
    x0, y0 = BOARD_ORIGIN
    draw.rectangle((x0, y0, x0 + BOARD_SIDE, y0 + BOARD_SIDE), fill=BOARD, outline=GRID, width=3)
    for i in range(1, 4):
        draw.line((x0 + i * CELL, y0, x0 + i * CELL, y0 + BOARD_SIDE), fill=GRID, width=2)
        draw.line((x0, y0 + i * CELL, x0 + BOARD_SIDE, y0 + i * CELL), fill=GRID, width=2)
    for square in range(NUM_SQUARES):
        cx, cy = square_center(square)
        piece = state.piece_at(square)
        if piece != NO_PIECE:
            _draw_piece(draw, piece, cx, cy, CELL)


def _label_board(draw: ImageDraw.ImageDraw, state: State) -> None:
    """Number the empty squares (the action that places there) and name each piece by its hex digit."""
    for square in range(NUM_SQUARES):
        cx, cy = square_center(square)
        piece = state.piece_at(square)
        if piece == NO_PIECE:
            draw.text((cx, cy), str(square), fill=FAINT, font=_font(22), anchor="mm")
        else:
            draw.text((cx - CELL // 2 + 4, cy - CELL // 2 + 2), HEX[piece], fill=INK, font=_font(14))


def _draw_panel(draw: ImageDraw.ImageDraw, state: State) -> None:
    hx, hy = HAND_ORIGIN
    draw.text((hx, hy - 24), "in hand", fill=INK, font=_font(18))
    draw.rectangle((hx, hy, hx + CELL, hy + CELL), fill=BOARD, outline=GRID, width=2)
    if state.hand == NO_PIECE:
        draw.text(hand_center(), "none", fill=FAINT, font=_font(16), anchor="mm")
    else:
        _draw_piece(draw, state.hand, *hand_center(), CELL)
        draw.text((hx + CELL + 10, hy + CELL // 2), f"piece {HEX[state.hand]}", fill=INK, font=_font(16), anchor="lm")
    lx, ly = LEFT_ORIGIN
    draw.text((lx, ly - 24), "pieces left", fill=INK, font=_font(18))
    for piece in range(NUM_PIECES):
        cx, cy = left_center(piece)
        draw.rectangle(
            (cx - SLOT // 2, cy - SLOT // 2, cx + SLOT // 2, cy + SLOT // 2), fill=PAGE, outline=FAINT, width=1
        )
        if state.available >> piece & 1:  # drawn a little smaller and lower-right, clear of the label
            _draw_piece(draw, piece, cx + 3, cy + 3, SLOT - 12)
        draw.text((cx - SLOT // 2 + 3, cy - SLOT // 2 + 1), HEX[piece], fill=FAINT, font=_font(11))


def _draw_piece(draw: ImageDraw.ImageDraw, piece: int, cx: int, cy: int, cell: int) -> None:
    """Piece ``piece`` centred on ``(cx, cy)`` in a cell of side ``cell``."""
    tall, dark, square, hollow = (bool(piece >> k & 1) for k in range(NUM_ATTRIBUTES))
    half = cell * (TALL_RADIUS if tall else SHORT_RADIUS)
    box = (cx - half, cy - half, cx + half, cy + half)
    fill = DARK_PIECE if dark else LIGHT_PIECE
    outline_width = max(2, cell // 30)
    if square:
        draw.rectangle(box, fill=fill, outline=INK, width=outline_width)
    else:
        draw.ellipse(box, fill=fill, outline=INK, width=outline_width)
    if hollow:
        hole = half * HOLE_RADIUS
        draw.ellipse(
            (cx - hole, cy - hole, cx + hole, cy + hole),
            fill=HOLE_IN_DARK if dark else HOLE_IN_LIGHT,
            outline=HOLE_RIM_IN_DARK if dark else INK,
            width=max(2, cell // 40),
        )


def _mark_group(draw: ImageDraw.ImageDraw, group: int, colour: tuple[int, int, int]) -> None:
    squares = [s for s in range(NUM_SQUARES) if group >> s & 1]
    if group in LINES:  # strike the line through its end squares
        (x1, y1), (x2, y2) = square_center(squares[0]), square_center(squares[-1])
        draw.line((x1, y1, x2, y2), fill=colour, width=7)
    else:  # a 2x2 block: frame it
        (x1, y1), (x2, y2) = square_center(squares[0]), square_center(squares[-1])
        inset = CELL // 2 - 6
        draw.rectangle((x1 - inset, y1 - inset, x2 + inset, y2 + inset), outline=colour, width=6)


def _fit_text(draw: ImageDraw.ImageDraw, xy: tuple[int, int], text: str, size: int) -> None:
    """Draw ``text`` at ``xy`` in the largest font up to ``size`` that keeps it inside the picture."""
    while size > 10 and draw.textlength(text, font=_font(size)) > WIDTH - xy[0] - MARGIN // 2:
        size -= 1
    draw.text(xy, text, fill=INK, font=_font(size))


@functools.cache
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed-size bitmap font
        return ImageFont.load_default()
