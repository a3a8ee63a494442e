"""The opening book: the exact value of every give node of the early game, so that the solver is exact from the
first move.

What it holds
-------------
A *give node* is a position with no piece in hand: its player gives a piece next. It is determined by its board
alone (the pieces that can be given are those not on it), and two boards that a symmetry of the game maps onto
each other have the same value (:mod:`quarto_env.symmetry`). So the book is a map

    canonical board -> exact value for the player who gives (+1 win, 0 draw, -1 loss)

over every board reachable from a root (the empty board) that has at least ``min_empty`` empty squares, a
group not won. Standard rules: 1, 2, 40, 454 and 10,346 canonical boards with 0 to 4 pieces placed, so a book
down to 12 empty squares has 10,843 entries.

Every other early position follows from it in one ply (:meth:`OpeningBook.value`,
:meth:`OpeningBook.action_values`):

* a *place node* (piece ``p`` in hand, ``e`` empty squares, ``e - 1 >= min_empty``): its player places ``p``,
  then gives, so its value is the best over the squares ``s`` of ``+1`` if ``p`` on ``s`` completes a group,
  else the book's value of the board with ``p`` on ``s`` -- the same player, no change of sign;
* a give node: the giver's value of giving ``p`` is minus the opponent's value of that place node.

Worked example: the empty board is a give node; giving any piece hands the opponent a place node with 16 empty
squares, whose value is the best of the book's values of the one-piece boards, 0 (a draw). So every give of
the first move draws: the value of Quarto is a draw (Goossens 1998).

How it is built
---------------
:func:`build_book` enumerates the canonical boards level by level from the root, solves the *bottom* level
(``min_empty`` empty squares) with the exact solver (:class:`agents.solver.minimax.Solver`, one transposition table for
all of them), and fills every level above by the one-ply rule above, bottom up: no search above the bottom.

The file
--------
An ``.npz`` of plain arrays, read with ``allow_pickle=False``: ``occupied`` and ``packed`` (the canonical form
of :func:`quarto_env.symmetry.canonical_board`), ``value`` (int8, for the giver), and ``header``, the UTF-8 JSON
of the book's format version, the solver's version, the rule variant, ``min_empty``, the number of entries and
the SHA-256 of the three arrays. :func:`load_book` refuses a file whose header, hash or variant does not match
(:class:`BookError`): a damaged or outdated book is never used.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

from agents.storage.files import atomic_write_bytes
from agents.storage.integrity import ARCHIVE_DAMAGE
from quarto_env.checks import one_line
from quarto_env.core import (
    ALL_PIECES,
    ALL_SQUARES,
    NO_PIECE,
    State,
    Variant,
    bits,
    piece_on,
    place_lanes,
    signed_lanes,
    winning_squares,
)
from quarto_env.errors import BookError, QuartoValueError
from quarto_env.notation import PositionError, format_position, parse_position
from quarto_env.symmetry import byte_tables, canonical_board

BOOK_FORMAT = 1
"""The version of the book file's layout (:func:`save_book`)."""

BOOK_SOLVER = "agents.minimax.Solver 1 / agents.book one-ply 1"
"""What computed the values: a book written by another version is refused. Stored in every book file: it names the
solver's modules as they were (now :mod:`agents.solver.minimax` and :mod:`agents.solver.book`), so that the books
already written still load."""


BOOK_FOLDER = Path(__file__).resolve().parent.parent / "data"
"""Where the books shipped with the package live (``quarto book`` writes there by default)."""


def rules_name(variant: Variant) -> str:
    """The rules in a data file's name: ``standard``, ``squares``, or the counted attributes and the squares
    joined by hyphens (``colour-shape``, ``colour-shape-squares``). The declaration flags are not in it."""
    parts = [] if len(variant.attributes) == 4 else list(variant.attributes)
    parts += ["squares"] if variant.squares else []
    return "-".join(parts) or "standard"


def default_book_path(variant: Variant) -> Path:
    """The shipped book file of ``variant``: ``book-standard.npz``, ``book-squares.npz``, and for fewer counted
    attributes their names too (``book-colour-shape.npz``)."""
    return BOOK_FOLDER / f"book-{rules_name(variant)}.npz"


@functools.cache
def shipped_book(variant: Variant) -> OpeningBook | None:
    """The shipped book of ``variant`` (:func:`default_book_path`), or ``None`` when there is none (the
    declaration variant, rules no book was built for). A damaged or outdated file is not used: one warning says so,
    and the solver searches instead."""
    path = default_book_path(variant)
    if variant.declaration or not path.is_file():
        return None
    try:
        book = load_book(path, variant)
        if book.root != State():
            raise BookError(f"opening book {str(path)!r} starts from {format_position(book.root)}, not the empty board")
    except BookError as exc:
        warnings.warn(f"{exc}; the solver searches without it", stacklevel=2)
        return None
    return book


_canonical = numba.njit(cache=True)(canonical_board)


def board_key(lanes: int, occupied: int, variant: Variant) -> tuple[int, int]:
    """The book's key of a board: its canonical form ``(occupied, packed lanes)`` under the variant's
    symmetries."""
    low, high = byte_tables(variant.squares)
    occupied_form, packed = _canonical(signed_lanes(lanes), occupied, variant.counted, low, high)
    return int(occupied_form), int(packed)


def pieces_on(lanes: int, occupied: int) -> int:
    """Mask of the pieces on a board."""
    return sum(1 << piece_on(lanes, s) for s in bits(occupied))


def give_node(lanes: int, occupied: int, to_move: int = 0) -> State:
    """The give node of a board: no piece in hand, every piece not on it available."""
    return State(lanes, occupied, ALL_PIECES & ~pieces_on(lanes, occupied), NO_PIECE, to_move)


class OpeningBook:
    """Exact values of give nodes by canonical board (see the module docstring), for one rule variant."""

    def __init__(
        self, variant: Variant, min_empty: int, values: dict[tuple[int, int], int], root: State | None = None
    ) -> None:
        self.variant = variant
        self.min_empty = min_empty
        self.values = values
        self.root = root or State()
        """The give node the book was built from (the empty board: every early position)."""

    def __len__(self) -> int:
        return len(self.values)

    def give_value(self, lanes: int, occupied: int) -> int | None:
        """The giver's exact value of the give node on this board, or ``None`` when the book lacks it."""
        return self.values.get(board_key(lanes, occupied, self.variant))

    def knows(self, state: State) -> bool:
        """Whether :meth:`value` answers for ``state``: not over, nothing to declare, and a give node of at least
        ``min_empty`` empty squares or a place node whose placements lead to such give nodes. (A book built from a
        root other than the empty board knows only the positions that descend from it.)"""
        if state.over or state.claimable:
            return False
        return state.num_empty - (1 if state.placing else 0) >= self.min_empty

    def covers(self, state: State) -> bool:
        """Whether :meth:`action_values` answers for ``state`` too: every action leads to a position the book
        :meth:`knows` (or ends the game)."""
        return not (state.over or state.claimable) and state.num_empty - 1 >= self.min_empty

    def value(self, state: State) -> int:
        """The exact value of a known ``state`` (:meth:`knows`) for its player to move."""
        if not state.placing:
            return self._stored(state.lanes, state.occupied)
        return max(self._placement_value(state.lanes, state.occupied, state.hand, s) for s in self._empty(state))

    def action_values(self, state: State) -> dict[int, int]:
        """Every action of a covered ``state`` (:meth:`covers`) with its exact value for the player to move: the
        empty squares of a placement, the available pieces of a give (both numbered 0-15, as
        :mod:`quarto_env.core` does)."""
        if state.placing:
            return {s: self._placement_value(state.lanes, state.occupied, state.hand, s) for s in self._empty(state)}
        return {
            p: -max(self._placement_value(state.lanes, state.occupied, p, s) for s in self._empty(state))
            for p in bits(state.available)
        }

    def _placement_value(self, lanes: int, occupied: int, piece: int, square: int) -> int:
        """The placer's value of putting ``piece`` on the empty ``square`` (then giving)."""
        variant = self.variant
        if winning_squares(signed_lanes(lanes), occupied, piece, variant.groups, variant.counted) >> square & 1:
            return 1
        return self._stored(place_lanes(lanes, piece, square), occupied | 1 << square)

    def _stored(self, lanes: int, occupied: int) -> int:
        value = self.give_value(lanes, occupied)
        if value is None:
            raise BookError(
                f"the book has no entry for the board {lanes:#x}/{occupied:#06x}: the position is not in the book"
            )
        return value

    @staticmethod
    def _empty(state: State) -> list[int]:
        return bits(ALL_SQUARES & ~state.occupied)


# ---------------------------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------------------------
def book_levels(variant: Variant, min_empty: int, root: State | None = None) -> list[dict[tuple[int, int], State]]:
    """The canonical give nodes reachable from ``root`` (a give node; the empty board by default), one dict per
    level from the root's down to ``min_empty`` empty squares: key -> a representative give node. Placements
    that complete a group end the game and lead to no node."""
    root = root or State()
    if variant.declaration:
        raise QuartoValueError("the book covers the rules without declaration (a completed group there ends nothing)")
    if root.placing or root.over:
        raise QuartoValueError("the book's root must be a give node of a game not over")
    if not 1 <= min_empty <= root.num_empty:
        raise QuartoValueError(f"min_empty must be 1 to the root's {root.num_empty} empty squares, got {min_empty}")
    groups, counted = variant.groups, variant.counted
    levels = [{board_key(root.lanes, root.occupied, variant): root}]
    while levels[-1] and next(iter(levels[-1].values())).num_empty > min_empty:
        below: dict[tuple[int, int], State] = {}
        for node in levels[-1].values():
            for piece in bits(node.available):
                wins = winning_squares(signed_lanes(node.lanes), node.occupied, piece, groups, counted)
                for square in bits(ALL_SQUARES & ~node.occupied & ~wins):
                    lanes, occupied = place_lanes(node.lanes, piece, square), node.occupied | 1 << square
                    key = board_key(lanes, occupied, variant)
                    if key not in below:
                        below[key] = give_node(lanes, occupied, 1 - node.to_move)
        levels.append(below)
    return levels


def build_book(
    variant: Variant,
    min_empty: int,
    solve: Callable[[State], int],
    root: State | None = None,
) -> OpeningBook:
    """The book of ``root``'s give nodes down to ``min_empty`` empty squares: the bottom level valued by
    ``solve`` (a give node -> its exact value for the giver; :meth:`agents.solver.minimax.Solver.value`), the levels
    above by the one-ply rule (:func:`fill_levels`). ``quarto book`` does the same with progress and resuming."""
    levels = book_levels(variant, min_empty, root)
    return fill_levels(variant, levels, {key: solve(node) for key, node in levels[-1].items()})


def fill_levels(
    variant: Variant, levels: list[dict[tuple[int, int], State]], bottom: dict[tuple[int, int], int]
) -> OpeningBook:
    """The book of ``levels`` (:func:`book_levels`) from the values of its bottom level: each level above, bottom
    up, by the one-ply rule (the best give of each board, over its children already in the book)."""
    min_empty = next(iter(levels[-1].values())).num_empty
    book = OpeningBook(variant, min_empty, dict(bottom), next(iter(levels[0].values())))
    for level in reversed(levels[:-1]):
        for key, node in level.items():
            book.values[key] = max(book.action_values(node).values())
    return book


# ---------------------------------------------------------------------------------------------------------
# The file
# ---------------------------------------------------------------------------------------------------------
def _arrays(book: OpeningBook) -> dict[str, np.ndarray]:
    keys = sorted(book.values)
    return {
        "occupied": np.array([k[0] for k in keys], dtype=np.int64),
        "packed": np.array([k[1] for k in keys], dtype=np.int64),
        "value": np.array([book.values[k] for k in keys], dtype=np.int8),
    }


def _digest(arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in ("occupied", "packed", "value"):
        digest.update(np.ascontiguousarray(arrays[name]).tobytes())
    return digest.hexdigest()


def book_header(book: OpeningBook, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    arrays = arrays or _arrays(book)
    return {
        "format": BOOK_FORMAT,
        "solver": BOOK_SOLVER,
        "variant": book.variant.to_dict(),
        "min_empty": book.min_empty,
        "root": format_position(book.root),
        "entries": len(book),
        "sha256": _digest(arrays),
    }


def save_book(path: str | Path, book: OpeningBook, note: dict[str, Any] | None = None) -> None:
    """Write ``book`` to ``path`` atomically (``note``: more header fields, such as how it was built)."""
    arrays = _arrays(book)
    header = {**book_header(book, arrays), **(note or {})}
    out = io.BytesIO()
    header_bytes = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    occupied, packed, value = arrays["occupied"], arrays["packed"], arrays["value"]
    np.savez_compressed(out, header=header_bytes, occupied=occupied, packed=packed, value=value)
    atomic_write_bytes(Path(path), out.getvalue())


def load_book(path: str | Path, variant: Variant, partial: bool = False, min_empty: int | None = None) -> OpeningBook:
    """The book in ``path`` for ``variant``; :class:`BookError` names what is wrong with a missing, damaged or
    outdated file, or one built for another variant. ``partial``: the bottom values saved by an unfinished
    ``quarto book`` (refused otherwise, as a complete book is where a partial one is asked for), built down to
    ``min_empty`` if given."""
    path = Path(path)
    try:
        # Opened here: np.load leaves a file it opened itself open when it is no zip (a ResourceWarning).
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
            header = json.loads(bytes(data["header"]).decode())
            arrays = {name: data[name] for name in ("occupied", "packed", "value")}
    except FileNotFoundError:
        raise BookError(f"no opening book at {str(path)!r}") from None
    except ARCHIVE_DAMAGE as exc:
        raise BookError(f"opening book {str(path)!r} is damaged or not a book ({one_line(exc)})") from None
    if not isinstance(header, dict):
        raise BookError(f"opening book {str(path)!r} has no header")
    found = (header.get("format"), header.get("solver"))
    if found != (BOOK_FORMAT, BOOK_SOLVER):
        raise BookError(
            f"opening book {str(path)!r} is format {found[0]!r} by {found[1]!r}; this code reads format {BOOK_FORMAT}"
            f" by {BOOK_SOLVER!r}: rebuild it (quarto book build)"
        )
    if header.get("variant") != variant.to_dict():
        raise BookError(f"opening book {str(path)!r} is for the rules {header.get('variant')}, not {variant.to_dict()}")
    if bool(header.get("partial")) != partial:
        kind = "the unfinished build of a book" if header.get("partial") else "a finished book"
        raise BookError(f"opening book {str(path)!r} is {kind}, not {'a partial' if partial else 'a complete'} one")
    if min_empty is not None and header.get("min_empty") != min_empty:
        raise BookError(
            f"opening book {str(path)!r} goes down to {header.get('min_empty')} empty squares, not {min_empty}"
        )
    if header.get("sha256") != _digest(arrays) or header.get("entries") != len(arrays["value"]):
        raise BookError(f"opening book {str(path)!r} does not match its checksum: the file is damaged")
    values = {
        (int(o), int(p)): int(v) for o, p, v in zip(arrays["occupied"], arrays["packed"], arrays["value"], strict=True)
    }
    try:
        root = parse_position(str(header.get("root", "")), variant)
    except PositionError as exc:
        raise BookError(f"opening book {str(path)!r} has a bad root ({exc})") from None
    return OpeningBook(variant, int(header["min_empty"]), values, root)
