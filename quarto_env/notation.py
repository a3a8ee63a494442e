"""Position notation, used by every command and test fixture.

A position is 16 characters for squares 0-15 row by row -- ``.`` for an empty square or the piece's hex
digit ``0``-``f`` -- then one space, then the piece in hand as a hex digit, or ``-`` when no piece is in
hand (the next action is a give). Example: ``f9.......0..3... 5``: piece 15 on square 0, piece 9 on
square 1, piece 0 on square 9, piece 3 on square 12, and piece 5 to be placed.

The notation carries no claimable groups, so a declaration-variant position is read as one in which
nothing can be claimed.
"""

from __future__ import annotations

from collections.abc import Mapping

from quarto_env.core import (
    HEX,
    NO_PIECE,
    NUM_SQUARES,
    STANDARD,
    State,
    Variant,
    checked_variant,
    from_board,
    has_winning_group,
)
from quarto_env.errors import PositionError, QuartoTypeError

EXAMPLE = "f9.......0..3... 5"
RESET_OPTIONS = ("position",)
"""The keys that the environments' ``reset(options=...)`` know."""


def format_position(state: State) -> str:
    """The position string of ``state``."""
    squares = "".join("." if p == NO_PIECE else HEX[p] for p in state.board)
    return f"{squares} {'-' if state.hand == NO_PIECE else HEX[state.hand]}"


def parse_position(text: str, variant: Variant = STANDARD) -> State:
    """The state written as ``text``; raises :class:`PositionError` naming what is wrong.

    Outside the declaration variant, a board with a winning group is a finished game: it is accepted only
    with ``-`` in hand (the winner is the player who just placed), since nobody gives a piece after winning.
    """
    if not isinstance(text, str):
        raise QuartoTypeError(f"a position is a string in the position notation, e.g. {EXAMPLE!r}; got {text!r}")
    variant = checked_variant(variant)
    text = text.strip()
    if len(text) != NUM_SQUARES + 2 or text[NUM_SQUARES] != " ":
        raise PositionError(
            f"position {text!r} must be 16 board characters, a space and the piece in hand "
            f"(18 characters, e.g. {EXAMPLE!r}); got {len(text)} characters"
        )
    board = [_read_square(c, i, text) for i, c in enumerate(text[:NUM_SQUARES].lower())]
    hand_char = text[-1].lower()
    if hand_char == "-":
        hand = NO_PIECE
    elif hand_char in HEX:
        hand = HEX.index(hand_char)
    else:
        raise PositionError(f"position {text!r}: piece in hand {hand_char!r} must be a hex digit 0-f or '-'")
    placed = [p for p in board if p != NO_PIECE]
    repeated = sorted({p for p in placed if placed.count(p) > 1})
    if repeated:
        raise PositionError(f"position {text!r}: piece(s) {', '.join(HEX[p] for p in repeated)} on the board twice")
    if hand in placed:
        raise PositionError(f"position {text!r}: the piece in hand {HEX[hand]} is already on the board")
    if len(placed) == NUM_SQUARES and hand != NO_PIECE:
        raise PositionError(f"position {text!r}: the board is full, so no piece can be in hand")
    state = from_board(board, hand)
    if variant.declaration or not has_winning_group(variant, state):
        return state._replace(over=len(placed) == NUM_SQUARES)
    if hand != NO_PIECE:
        raise PositionError(
            f"position {text!r}: the board already has a winning group under {variant.describe()} rules, "
            "so the game ended and no piece can be in hand"
        )
    return state._replace(winner=state.to_move, over=True)


def _read_square(char: str, square: int, text: str) -> int:
    if char == ".":
        return NO_PIECE
    if char in HEX:
        return HEX.index(char)
    raise PositionError(f"position {text!r}: square {square} has {char!r}; use '.' or a hex digit 0-f")


def starting_position(options: object, variant: Variant, owner: str) -> tuple[State | None, list[str]]:
    """The position that an env's ``reset(options=...)`` starts from (``None`` where ``options`` names none),
    and the keys of ``options`` outside :data:`RESET_OPTIONS`, which the env warns about or refuses.

    Raises :class:`~quarto_env.errors.QuartoTypeError` unless ``options`` is ``None`` or a mapping whose
    ``"position"`` is a string, and :class:`PositionError` for a malformed position or a finished game."""
    if options is None:
        return None, []
    if not isinstance(options, Mapping):
        raise QuartoTypeError(
            f"{owner}'s reset options must be None or a dict with the key 'position' (a position string), "
            f"e.g. {{'position': {EXAMPLE!r}}}; got {options!r} ({type(options).__name__})"
        )
    unknown = sorted(set(options) - set(RESET_OPTIONS), key=str)
    if "position" not in options:
        return None, unknown
    position = options["position"]
    if not isinstance(position, str):  # like an action of the wrong type: TypeError, not a parse error
        raise QuartoTypeError(
            f"reset option 'position' must be a string in the position notation, e.g. {EXAMPLE!r}; "
            f"got {position!r} ({type(position).__name__})"
        )
    state = parse_position(position, variant)
    if state.over:
        raise PositionError(f"position {position!r} is a finished game; start from one still in play")
    return state, unknown
