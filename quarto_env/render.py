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
circle (round) or a square (square); a hollow piece has a hole drawn in its middle, a solid one none. Winning
groups are struck through in red (a 2x2 block framed), groups that can be declared in orange, and an optional
``last_move`` square is outlined in blue. The picture exists twice: a PIL image (:func:`render_image`, the
``rgb_array`` mode) and SVG text (:func:`svg_board`, how the env shows itself in a Jupyter notebook through
``_repr_svg_``). Both draw one description, :func:`drawing`: rectangles, ellipses, lines and texts with their
positions, sizes and colours, from the layout below (``square_center``, ``hand_center``, ``left_center``,
``CELL``, ``SLOT``, the colours), so the two cannot differ. In the SVG each piece is a ``<g>`` carrying
``data-piece``, ``data-place`` (``board``, ``hand``, ``left``) and ``data-square``; a marked group carries
``data-mark`` (``win``, ``claim``) and ``data-squares``. The SVG embeds no font or file: its text asks for
common sans-serif fonts, so its letters may differ slightly from the PNG's.

``State`` has no ``_repr_svg_``: a position does not know its variant, and drawn under the standard rules a
2x2 block or a reduced attribute set would be highlighted wrongly. Pass the variant: ``svg_board(variant,
state)``, shown in a notebook with ``IPython.display.SVG(...)``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

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
from quarto_env.errors import QuartoValueError
from quarto_env.notation import format_position

if TYPE_CHECKING:
    from PIL import ImageFont

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
# Image: the layout
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

PAGE, BOARD, GRID, INK, FAINT = (246, 243, 236), (196, 160, 118), (96, 66, 42), (35, 25, 18), (150, 132, 110)
"""The colours of the page, the board, its grid lines, the text and the faint text."""
LIGHT_PIECE, DARK_PIECE = (252, 240, 212), (88, 44, 22)
HOLE_IN_LIGHT, HOLE_IN_DARK, HOLE_RIM_IN_DARK = (128, 100, 72), (24, 12, 6), (236, 214, 180)
"""The hole of a hollow piece, light and dark, and the rim that shows a dark piece's hole."""
WIN_MARK, CLAIM_MARK, LAST_MOVE_MARK = (214, 38, 38), (236, 140, 0), (40, 96, 200)
"""The marks of a completed group, a claimed one and the last move."""


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


# ---------------------------------------------------------------------------------------------------------
# Image: what to draw, for both back ends
# ---------------------------------------------------------------------------------------------------------
Colour = tuple[int, int, int]
Box = tuple[float, float, float, float]
"""``(x0, y0, x1, y1)``: the pixels from ``(x0, y0)`` to ``(x1, y1)``, both included, as PIL counts them."""


class Rect(NamedTuple):
    """A rectangle filling ``box``; its outline, if any, ``width`` pixels wide inside the box."""

    box: Box
    fill: Colour | None
    outline: Colour | None = None
    width: int = 1


class Ellipse(NamedTuple):
    """An ellipse inscribed in ``box``; its outline, if any, ``width`` pixels wide inside the box."""

    box: Box
    fill: Colour | None
    outline: Colour | None = None
    width: int = 1


class Line(NamedTuple):
    """A straight line ``width`` pixels wide, centred on the segment ``ends``: ``(x1, y1, x2, y2)``."""

    ends: Box
    colour: Colour
    width: int


class Text(NamedTuple):
    """``text`` at ``xy``, in the default sans-serif font of ``size`` pixels. ``anchor`` is PIL's: ``la`` (the
    top-left corner), ``mm`` (the centre) or ``lm`` (the middle of the left edge)."""

    xy: tuple[float, float]
    text: str
    colour: Colour
    size: int
    anchor: str = "la"


Shape = Rect | Ellipse | Line | Text


class Group(NamedTuple):
    """Shapes drawn together, with what they stand for: ``data`` names a piece (``piece``: its number,
    ``place``: ``board``/``hand``/``left``, ``square`` on the board), a marked group (``mark``: ``win`` or
    ``claim``, ``squares``), or the ``last-move`` square. The SVG keeps them as ``data-*`` attributes."""

    data: tuple[tuple[str, str], ...]
    shapes: tuple[Shape, ...]


Item = Shape | Group


def drawing(
    variant: Variant,
    state: State,
    names: tuple[str, str] = DEFAULT_NAMES,
    status: str | None = None,
    last_move: int | None = None,
) -> list[Item]:
    """What the picture of the position shows, back to front: the description both :func:`render_image` and
    :func:`svg_board` draw, so that the PNG and the SVG cannot differ. Arguments as in :func:`render_image`."""
    items: list[Item] = [Rect((0, 0, WIDTH - 1, HEIGHT - 1), PAGE)]
    items.append(_fitted_text((MARGIN, 14), f"Quarto - {describe_variant(variant)}", 18))
    items.append(_fitted_text((MARGIN, 42), status or describe_status(variant, state, names), 18))
    items += _board(state, last_move)
    if state.over and state.winner != NO_WINNER:
        items += [_group_mark(group, "win", WIN_MARK) for group in winning_groups(variant, state)]
    items += [_group_mark(group, "claim", CLAIM_MARK) for group in claimable_groups(variant, state)]
    items += _board_labels(state)
    items += _panel(state)
    items.append(Text((MARGIN, HEIGHT - 30), _IMAGE_LEGEND, FAINT, 14))
    return items


_IMAGE_LEGEND = "big = tall, small = short   cream = light, brown = dark   circle = round   hole = hollow"


def _board(state: State, last_move: int | None) -> list[Item]:
    x0, y0 = BOARD_ORIGIN
    items: list[Item] = [Rect((x0, y0, x0 + BOARD_SIDE, y0 + BOARD_SIDE), BOARD, GRID, 3)]
    for i in range(1, 4):
        items.append(Line((x0 + i * CELL, y0, x0 + i * CELL, y0 + BOARD_SIDE), GRID, 2))
        items.append(Line((x0, y0 + i * CELL, x0 + BOARD_SIDE, y0 + i * CELL), GRID, 2))
    if last_move is not None:  # an outline inside the square, clear of the grid and of any piece
        if not 0 <= last_move < NUM_SQUARES:
            raise QuartoValueError(f"last_move must be a square 0-15; got {last_move!r}")
        cx, cy = square_center(last_move)
        inset = CELL // 2 - 4
        frame = Rect((cx - inset, cy - inset, cx + inset, cy + inset), None, LAST_MOVE_MARK, 4)
        items.append(Group((("last-move", str(last_move)),), (frame,)))
    for square in range(NUM_SQUARES):
        piece = state.piece_at(square)
        if piece != NO_PIECE:
            items.append(_piece(piece, *square_center(square), CELL, ("place", "board"), ("square", str(square))))
    return items


def _board_labels(state: State) -> list[Item]:
    """Number the empty squares (the action that places there) and name each piece by its hex digit."""
    items: list[Item] = []
    for square in range(NUM_SQUARES):
        cx, cy = square_center(square)
        piece = state.piece_at(square)
        if piece == NO_PIECE:
            items.append(Text((cx, cy), str(square), FAINT, 22, "mm"))
        else:
            items.append(Text((cx - CELL // 2 + 4, cy - CELL // 2 + 2), HEX[piece], INK, 14))
    return items


def _panel(state: State) -> list[Item]:
    hx, hy = HAND_ORIGIN
    items: list[Item] = [Text((hx, hy - 24), "in hand", INK, 18)]
    items.append(Rect((hx, hy, hx + CELL, hy + CELL), BOARD, GRID, 2))
    if state.hand == NO_PIECE:
        items.append(Text(hand_center(), "none", FAINT, 16, "mm"))
    else:
        items.append(_piece(state.hand, *hand_center(), CELL, ("place", "hand")))
        items.append(Text((hx + CELL + 10, hy + CELL // 2), f"piece {HEX[state.hand]}", INK, 16, "lm"))
    lx, ly = LEFT_ORIGIN
    items.append(Text((lx, ly - 24), "pieces left", INK, 18))
    for piece in range(NUM_PIECES):
        cx, cy = left_center(piece)
        items.append(Rect((cx - SLOT // 2, cy - SLOT // 2, cx + SLOT // 2, cy + SLOT // 2), PAGE, FAINT, 1))
        if state.available >> piece & 1:  # drawn a little smaller and lower-right, clear of the label
            items.append(_piece(piece, cx + 3, cy + 3, SLOT - 12, ("place", "left")))
        items.append(Text((cx - SLOT // 2 + 3, cy - SLOT // 2 + 1), HEX[piece], FAINT, 11))
    return items


def _piece(piece: int, cx: int, cy: int, cell: int, *data: tuple[str, str]) -> Group:
    """Piece ``piece`` centred on ``(cx, cy)`` in a cell of side ``cell``: big if tall, cream or brown, a
    circle or a square, with a hole if hollow."""
    tall, dark, square, hollow = (bool(piece >> k & 1) for k in range(NUM_ATTRIBUTES))
    half = cell * (TALL_RADIUS if tall else SHORT_RADIUS)
    box = (cx - half, cy - half, cx + half, cy + half)
    fill = DARK_PIECE if dark else LIGHT_PIECE
    body = (Rect if square else Ellipse)(box, fill, INK, max(2, cell // 30))
    shapes: tuple[Shape, ...] = (body,)
    if hollow:
        hole = half * HOLE_RADIUS
        shapes += (
            Ellipse(
                (cx - hole, cy - hole, cx + hole, cy + hole),
                HOLE_IN_DARK if dark else HOLE_IN_LIGHT,
                HOLE_RIM_IN_DARK if dark else INK,
                max(2, cell // 40),
            ),
        )
    return Group((("piece", str(piece)), *data), shapes)


def _group_mark(group: int, kind: str, colour: Colour) -> Group:
    """A line struck through a winning or declarable line of the board, or a frame around a 2x2 block."""
    squares = [s for s in range(NUM_SQUARES) if group >> s & 1]
    (x1, y1), (x2, y2) = square_center(squares[0]), square_center(squares[-1])
    shape: Shape
    if group in LINES:  # strike the line through its end squares
        shape = Line((x1, y1, x2, y2), colour, 7)
    else:  # a 2x2 block: frame it
        inset = CELL // 2 - 6
        shape = Rect((x1 - inset, y1 - inset, x2 + inset, y2 + inset), None, colour, 6)
    data = (("mark", kind), ("squares", " ".join(map(str, squares))), ("group", describe_group(group)))
    return Group(data, (shape,))


def _fitted_text(xy: tuple[int, int], text: str, size: int) -> Text:
    """``text`` at ``xy`` in the largest font up to ``size`` that keeps it inside the picture."""
    while size > 10 and _font(size).getlength(text) > WIDTH - xy[0] - MARGIN // 2:
        size -= 1
    return Text(xy, text, INK, size)


def shapes_of(items: list[Item]) -> Iterator[Shape]:
    """Every shape of ``items``, groups opened, in drawing order."""
    for item in items:
        if isinstance(item, Group):
            yield from item.shapes
        else:
            yield item


# ---------------------------------------------------------------------------------------------------------
# Image: the PIL back end
# ---------------------------------------------------------------------------------------------------------
def render_image(
    variant: Variant,
    state: State,
    names: tuple[str, str] = DEFAULT_NAMES,
    status: str | None = None,
    last_move: int | None = None,
) -> np.ndarray:
    """The position as an ``(H, W, 3)`` ``uint8`` RGB picture; ``names`` and ``status`` as in :func:`render_text`.

    Winning groups are struck through in red, groups that can be declared in orange; ``last_move``, a square,
    is outlined in blue.
    """
    from PIL import Image, ImageDraw  # here: most processes never draw a picture

    image = Image.new("RGB", (WIDTH, HEIGHT), PAGE)
    draw = ImageDraw.Draw(image)
    for shape in shapes_of(drawing(variant, state, names, status, last_move)):
        if isinstance(shape, Rect):
            draw.rectangle(shape.box, fill=shape.fill, outline=shape.outline, width=shape.width)
        elif isinstance(shape, Ellipse):
            draw.ellipse(shape.box, fill=shape.fill, outline=shape.outline, width=shape.width)
        elif isinstance(shape, Line):
            draw.line(shape.ends, fill=shape.colour, width=shape.width)
        else:
            draw.text(shape.xy, shape.text, fill=shape.colour, font=_font(shape.size), anchor=shape.anchor)
    return np.asarray(image, dtype=np.uint8).copy()


@functools.cache
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed-size bitmap font
        return ImageFont.load_default()


# ---------------------------------------------------------------------------------------------------------
# Image: the SVG back end
# ---------------------------------------------------------------------------------------------------------
SVG_FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
"""The SVG's font: whichever of these the viewer has (the last is always there); nothing is embedded."""
_SVG_ANCHORS = {"la": ("start", "hanging"), "mm": ("middle", "central"), "lm": ("start", "central")}


def svg_board(
    variant: Variant,
    state: State,
    names: tuple[str, str] = DEFAULT_NAMES,
    status: str | None = None,
    last_move: int | None = None,
) -> str:
    """The picture of :func:`render_image` as a self-contained SVG document (text), drawn from the same
    :func:`drawing`. Each piece is a ``<g>`` with ``data-piece``, ``data-place`` and, on the board,
    ``data-square``; each marked group a ``<g>`` with ``data-mark`` and ``data-squares``; ``last_move`` a
    ``<g data-last-move>``. Shows inline in Jupyter: ``IPython.display.SVG(svg_board(...))``."""
    body = "\n".join(_svg_item(item) for item in drawing(variant, state, names, status, last_move))
    title = _escaped(f"Quarto - {describe_variant(variant)}: {format_position(state)}")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{SVG_FONT}" data-position="{_escaped(format_position(state))}">\n'
        f"<title>{title}</title>\n{body}\n</svg>\n"
    )


def _escaped(text: str) -> str:
    """``text`` with the characters that XML reserves in text and in quoted attribute values as references."""
    from html import escape  # here, not at the top: most processes draw nothing, and every start-up would pay it

    return escape(text)


def _svg_item(item: Item) -> str:
    if not isinstance(item, Group):
        return _svg_shape(item)
    data = "".join(f' data-{key}="{_escaped(value)}"' for key, value in item.data)
    return f"<g{data}>" + "".join(_svg_shape(shape) for shape in item.shapes) + "</g>"


def _svg_shape(shape: Shape) -> str:
    if isinstance(shape, Text):
        horizontal, vertical = _SVG_ANCHORS[shape.anchor]
        x, y = shape.xy
        return (
            f'<text x="{_n(x)}" y="{_n(y)}" font-size="{shape.size}" fill="{_rgb(shape.colour)}" '
            f'text-anchor="{horizontal}" dominant-baseline="{vertical}">{_escaped(shape.text)}</text>'
        )
    if isinstance(shape, Line):
        x1, y1, x2, y2 = shape.ends
        return (
            f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{_rgb(shape.colour)}" '
            f'stroke-width="{shape.width}"/>'
        )
    # PIL fills the pixels x0..x1 inclusive with the outline inside; an SVG stroke is centred on the path.
    x0, y0, x1, y1 = shape.box
    inner = shape.width / 2 if shape.outline is not None else 0
    left, top, right, bottom = x0 + inner, y0 + inner, x1 + 1 - inner, y1 + 1 - inner
    paint = f'fill="{_rgb(shape.fill) if shape.fill is not None else "none"}"'
    if shape.outline is not None:
        paint += f' stroke="{_rgb(shape.outline)}" stroke-width="{shape.width}"'
    if isinstance(shape, Rect):
        return f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(right - left)}" height="{_n(bottom - top)}" {paint}/>'
    return (
        f'<ellipse cx="{_n((left + right) / 2)}" cy="{_n((top + bottom) / 2)}" rx="{_n((right - left) / 2)}" '
        f'ry="{_n((bottom - top) / 2)}" {paint}/>'
    )


def _rgb(colour: Colour) -> str:
    return "#{:02x}{:02x}{:02x}".format(*colour)


def _n(value: float) -> str:
    """A coordinate, without trailing zeros."""
    return f"{value:.2f}".rstrip("0").rstrip(".")
