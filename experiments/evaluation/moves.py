"""One move in words: what it does (:func:`describe_action`) and, against the exact solver's values, what it threw
away (:func:`move_verdict`). The terminal game, the replays, the HTML viewer and the training runs' sample games
all say a move this way.
"""

from __future__ import annotations

from quarto_env.core import DECLARE, State
from quarto_env.render import HEX, describe_piece, piece_code, square_name

VALUE_NAMES = {1: "won", 0: "drawn", -1: "lost"}
"""A position's value under perfect play, for the player to move, in the verdicts' words."""

KEPT = "kept"
"""The verdict on a move that keeps the position's value."""


def describe_action(state: State, action: int) -> str:
    """What ``action`` does in ``state``, in words."""
    if action == DECLARE:
        return 'declares "Quarto!"'
    if state.placing:
        return f"places piece {HEX[state.hand]} {piece_code(state.hand)} on square {action} ({square_name(action)})"
    return f"gives piece {describe_piece(action)}"


def move_verdict(values: dict[int, int], action: int) -> str:
    """``kept`` if ``action`` is worth the best of ``values`` (``{action: value}`` of every legal action, for the
    player to move), else the value the move threw away: ``won->drawn``, ``won->lost`` or ``drawn->lost``."""
    best, chosen = max(values.values()), values[action]
    return KEPT if chosen >= best else f"{VALUE_NAMES[best]}->{VALUE_NAMES[chosen]}"
