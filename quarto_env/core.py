"""The rules of Quarto: a small, framework-free core shared by the environment, the agents and the solver.

Nothing here imports gymnasium, pettingzoo or torch. A position is an immutable :class:`State`; the rule
variant in force is a :class:`Variant`. ``step(variant, state, action)`` returns the next state.

Squares and pieces
------------------
Squares are numbered row by row, square ``4 * row + col``::

     0  1  2  3
     4  5  6  7
     8  9 10 11
    12 13 14 15

A piece is a 4-bit number; bit ``k`` is attribute ``k``: bit 0 height (1 = tall), bit 1 colour (1 = dark),
bit 2 shape (1 = square), bit 3 top (1 = hollow). Piece ``0b0101 = 5`` is tall, light, square, solid.

Bit encoding
------------
The board is kept as *attribute lanes*: one 64-bit integer ``lanes`` made of four 16-bit lanes, lane ``k``
(bits ``16k .. 16k+15``) holding bit ``s`` set when square ``s`` holds a piece whose attribute ``k`` is 1.
A second mask, ``occupied``, has bit ``s`` set when square ``s`` holds any piece. Worked example: piece 5
(tall, light, square, solid) on square 2 and piece 8 (short, light, round, hollow) on square 7::

    lane 0 (tall)   = 0b0000_0000_0000_0100      square 2: piece 5 has bit 0
    lane 1 (dark)   = 0b0000_0000_0000_0000
    lane 2 (square) = 0b0000_0000_0000_0100      square 2: piece 5 has bit 2
    lane 3 (hollow) = 0b0000_0000_1000_0000      square 7: piece 8 has bit 3
    occupied        = 0b0000_0000_1000_0100      squares 2 and 7

    lanes = lane0 | lane1 << 16 | lane2 << 32 | lane3 << 48

Why lanes: a *group* (four squares) is a 16-bit mask ``g``, and the pieces on it share attribute ``k``
exactly when ``(lanes >> 16k) & g`` is ``g`` (all have it) or ``0`` (none has it) -- no square is ever
looked up one by one. The win test of a full group is that one expression, over the counted attributes.

The same encoding tells which pieces would win on a square: for a group with three pieces and one empty
square, the attributes shared by the three (``shared_attributes``) name the pieces that complete it.

Numba
-----
The low-level functions below (marked ``@jitable``, :mod:`quarto_env.jitable`) take and return plain integers
and tuples of integers, so the compiled search and the batched kernels call the very same rules as the Python
API; from Python they run as ordinary Python functions, and this module does not import numba: the functions
are registered with it when something imports it to compile a kernel. The two bit counts they build on,
``popcount`` and ``lowest_bit``, then get a compiled twin each (``@overload``): one machine instruction instead
of Python's ``int.bit_count``, same results.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from quarto_env.checks import one_line, shortened
from quarto_env.errors import ActionTypeError, IllegalActionError, QuartoTypeError, QuartoValueError, RulesError
from quarto_env.jitable import jitable, when_numba_loads
from quarto_env.outcome import NO_WINNER

# ---------------------------------------------------------------------------------------------------------
# Game facts
# ---------------------------------------------------------------------------------------------------------
NUM_SQUARES = 16
NUM_PIECES = 16
NUM_ATTRIBUTES = 4
ATTRIBUTES = ("height", "colour", "shape", "top")
"""Attribute ``k`` is bit ``k`` of a piece number."""
ATTRIBUTE_VALUES = (("short", "tall"), ("light", "dark"), ("round", "square"), ("solid", "hollow"))
"""``ATTRIBUTE_VALUES[k][bit]`` names the value of attribute ``k`` for that bit."""
ALL_SQUARES = (1 << NUM_SQUARES) - 1
ALL_PIECES = (1 << NUM_PIECES) - 1
ALL_ATTRIBUTES = (1 << NUM_ATTRIBUTES) - 1
NO_PIECE = -1
"""``State.hand`` when no piece is in hand: the next action is a give."""
DECLARE = 16
"""The action that declares "Quarto!" (only in the declaration variant)."""
NUM_ACTIONS = 16
"""Actions 0-15 are squares when placing and pieces when giving."""
HEX = "0123456789abcdef"
"""``HEX[p]`` is piece (or square) ``p`` as one character, as the position notation and the pictures write it."""
MAX_GAME_LENGTH = 2 * NUM_PIECES
"""16 gives and 16 placements (plus at most one declaration in that variant)."""
FALSE_DECLARATION_POLICIES = ("lose", "penalty")


def _lines() -> tuple[int, ...]:
    rows = [0xF << (4 * r) for r in range(4)]
    columns = [0x1111 << c for c in range(4)]
    diagonals = [sum(1 << (5 * i) for i in range(4)), sum(1 << (3 * i + 3) for i in range(4))]
    return tuple(rows + columns + diagonals)


def _blocks() -> tuple[int, ...]:
    return tuple(0x33 << (4 * r + c) for r in range(3) for c in range(3))


LINES = _lines()
"""The 10 standard groups: 4 rows, 4 columns, the main diagonal (0, 5, 10, 15), the anti-diagonal."""
SQUARE_BLOCKS = _blocks()
"""The 9 blocks of 2x2 adjacent squares, groups too in the ``squares`` variant."""

PIECES_WITH_ATTRIBUTE = tuple(sum(1 << p for p in range(NUM_PIECES) if p >> k & 1) for k in range(NUM_ATTRIBUTES))
"""``PIECES_WITH_ATTRIBUTE[k]``: the 16-bit mask of pieces whose attribute ``k`` is 1."""
PIECE_LANES = tuple(sum(1 << (16 * k) for k in range(NUM_ATTRIBUTES) if p >> k & 1) for p in range(NUM_PIECES))
"""``PIECE_LANES[p] << s`` sets piece ``p``'s attribute bits for square ``s`` in ``lanes``."""


# ---------------------------------------------------------------------------------------------------------
# Low-level rules on integers (shared with compiled code)
# ---------------------------------------------------------------------------------------------------------
def popcount(mask: int) -> int:
    """Number of set bits of a 16-bit mask (a Python or NumPy integer)."""
    return (int(mask) & 0xFFFF).bit_count()


def count_bits(mask: int) -> int:
    """Number of set bits of a 64-bit mask (a Python or NumPy integer; a negative int64 has bit 63 set)."""
    return (int(mask) & 0xFFFF_FFFF_FFFF_FFFF).bit_count()


@jitable
def set_bit_number(mask: int, number: int) -> int:
    """The index of set bit ``number`` (from 0, lowest first) of the 64-bit ``mask``, which has more set bits than
    that: found by halving the span (are there more than ``number`` in its low half?), without a branch on the
    mask, which no predictor guesses."""
    index = 0
    for width in (32, 16, 8, 4, 2, 1):
        low = count_bits(mask & ((1 << width) - 1))  # of the span left, at its bottom: the bits above do not count
        above = number >= low
        number -= low if above else 0
        mask = mask >> width if above else mask
        index += width if above else 0
    return index


def lowest_bit(mask: int) -> int:
    """Index of the lowest set bit of a 16-bit mask (a Python or NumPy integer), or -1 for 0."""
    mask = int(mask)
    return (mask & -mask).bit_length() - 1


def _compile_bit_counts(numba: Any) -> None:
    """Give :func:`popcount`, :func:`count_bits` and :func:`lowest_bit` their compiled twins once numba is
    imported: one instruction each (the search calls them at every step), LLVM's ctpop and cttz."""
    from numba.cpython.unsafe.numbers import trailing_zeros
    from numba.extending import intrinsic, overload

    @intrinsic
    def count_ones(typing_context, mask):  # type: ignore[no-untyped-def]
        return mask(mask), lambda context, builder, signature, args: builder.ctpop(args[0])

    @overload(popcount)
    def compiled_popcount(mask):  # type: ignore[no-untyped-def]
        return lambda mask: count_ones(mask & 0xFFFF)

    @overload(count_bits)
    def compiled_count_bits(mask):  # type: ignore[no-untyped-def]
        return lambda mask: count_ones(mask)

    @overload(lowest_bit)
    def compiled_lowest_bit(mask):  # type: ignore[no-untyped-def]
        return lambda mask: trailing_zeros(mask) if mask else -1


when_numba_loads(_compile_bit_counts)


def bits(mask: int) -> list[int]:
    """The indices of the set bits of ``mask``, in increasing order."""
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


@jitable
def shared_attributes(lanes: int, squares: int, counted: int) -> tuple[int, int]:
    """Counted attributes that every piece on ``squares`` has as 1, and those every piece has as 0.

    Returns two 4-bit masks ``(ones, zeros)``. ``squares`` must all be occupied.
    """
    ones = 0
    zeros = 0
    for k in range(NUM_ATTRIBUTES):  # without a branch: which way it goes cannot be predicted
        lane = (lanes >> (16 * k)) & squares
        ones |= (lane == squares) << k
        zeros |= (lane == 0) << k
    return ones & counted, zeros & counted & (0 if squares == 0 else ALL_ATTRIBUTES)


@jitable
def pieces_sharing(ones: int, zeros: int) -> int:
    """The 16-bit mask of pieces that have attribute 1 for some bit of ``ones``, or 0 for some of ``zeros``."""
    pieces = 0
    for k in range(NUM_ATTRIBUTES):
        if ones >> k & 1:
            pieces |= PIECES_WITH_ATTRIBUTE[k]
        if zeros >> k & 1:
            pieces |= ALL_PIECES & ~PIECES_WITH_ATTRIBUTE[k]
    return pieces


@jitable
def is_winning_group(lanes: int, occupied: int, group: int, counted: int) -> bool:
    """Whether ``group`` is full and its four pieces share a value of a counted attribute."""
    if occupied & group != group:
        return False
    ones, zeros = shared_attributes(lanes, group, counted)
    return (ones | zeros) != 0


@jitable
def winning_groups_through(lanes: int, occupied: int, square: int, groups: tuple, counted: int) -> int:
    """Bitmask over group indices of the winning groups that contain ``square``."""
    found = 0
    for i in range(len(groups)):
        if groups[i] >> square & 1 and is_winning_group(lanes, occupied, groups[i], counted):
            found |= 1 << i
    return found


@jitable
def completing_pieces(lanes: int, occupied: int, group: int, counted: int) -> int:
    """Pieces that would make ``group`` winning when placed on its one empty square (0 otherwise)."""
    empty = group & ~occupied
    if empty == 0 or empty & (empty - 1) != 0:
        return 0
    ones, zeros = shared_attributes(lanes, group & occupied, counted)
    return pieces_sharing(ones, zeros)


@jitable
def winning_squares(lanes: int, occupied: int, piece: int, groups: tuple, counted: int) -> int:
    """Mask of empty squares where placing ``piece`` completes a winning group."""
    squares = 0
    for group in groups:
        if completing_pieces(lanes, occupied, group, counted) >> piece & 1:
            squares |= group & ~occupied
    return squares


@jitable
def winning_pieces(lanes: int, occupied: int, groups: tuple, counted: int) -> int:
    """Mask of pieces that would win if placed on some empty square: giving one of them loses at once."""
    pieces = 0
    for group in groups:
        pieces |= completing_pieces(lanes, occupied, group, counted)
    return pieces


@jitable
def place_lanes(lanes: int, piece: int, square: int) -> int:
    """``lanes`` with ``piece`` put on the empty ``square``."""
    return lanes | (PIECE_LANES[piece] << square)


@jitable
def piece_on(lanes: int, square: int) -> int:
    """The piece on an occupied ``square``, read back from the lanes."""
    piece = 0
    for k in range(NUM_ATTRIBUTES):
        piece |= ((lanes >> (16 * k + square)) & 1) << k
    return piece


def signed_lanes(lanes: int) -> int:
    """``lanes`` as the signed 64-bit integer with the same bits, to pass to compiled code: numba types a Python
    int above ``2**63 - 1`` (a hollow piece on square 15) as unsigned, which does not mix with the signed
    integers of the other arguments (the call fails, or the bit arithmetic turns into floats)."""
    return lanes - (1 << 64) if lanes >> 63 else lanes


@jitable
def legal_mask(occupied: int, available: int, hand: int, over: bool, declaration: bool) -> int:
    """:func:`legal_action_mask` on plain integers, for compiled code."""
    if over:
        return 0
    declare = 1 << DECLARE if declaration else 0
    if hand != NO_PIECE:
        return (ALL_SQUARES & ~occupied) | declare
    return available | declare


@jitable
def useful_mask(occupied: int, available: int, hand: int, claimable: int, over: bool, declaration: bool) -> int:
    """:func:`useful_action_mask` on plain integers, for compiled code."""
    legal = legal_mask(occupied, available, hand, over, declaration)
    return legal if claimable else legal & ~(1 << DECLARE)


@jitable
def apply_action(
    lanes: int,
    occupied: int,
    available: int,
    hand: int,
    to_move: int,
    claimable: int,
    action: int,
    groups: tuple,
    counted: int,
    declaration: bool,
    false_declaration_loses: bool,
) -> tuple[int, int, int, int, int, int, int, bool]:
    """The transition of :func:`step` on plain integers, for compiled code (batched games); ``action`` must be
    legal. Returns ``(lanes, occupied, available, hand, to_move, claimable, winner, over)``."""
    if action == DECLARE:
        if claimable:
            return lanes, occupied, available, hand, to_move, 0, to_move, True
        if false_declaration_loses:
            return lanes, occupied, available, hand, to_move, claimable, 1 - to_move, True
        return lanes, occupied, available, hand, to_move, claimable, NO_WINNER, False
    if hand == NO_PIECE:  # give: the piece passes to the opponent, who places it next
        return lanes, occupied, available & ~(1 << action), action, 1 - to_move, claimable, NO_WINNER, False
    lanes = place_lanes(lanes, hand, action)
    occupied = occupied | 1 << action
    won = winning_groups_through(lanes, occupied, action, groups, counted)
    board_full = occupied == ALL_SQUARES
    if declaration:
        # The groups completed now replace the earlier claimable ones, which are dead once this piece is placed.
        return lanes, occupied, available, NO_PIECE, to_move, won, NO_WINNER, board_full and won == 0
    if won:
        return lanes, occupied, available, NO_PIECE, to_move, 0, to_move, True
    return lanes, occupied, available, NO_PIECE, to_move, 0, NO_WINNER, board_full


# ---------------------------------------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Variant:
    """The rule variant in force. Any combination of the flags is allowed.

    Build one with :meth:`Variant.make`, which validates its input.
    """

    attributes: tuple[str, ...] = ATTRIBUTES
    """The attributes that count for a win, a subset of ``ATTRIBUTES`` (the beginners' variant)."""
    squares: bool = False
    """Whether the 9 blocks of 2x2 squares are groups too (the advanced variant)."""
    declaration: bool = False
    """Whether a completed group must be declared ("Quarto!") to win; see :func:`step`."""
    false_declaration: str = "lose"
    """With ``declaration``: ``"lose"`` -- a declaration with nothing to claim loses the game; ``"penalty"``
    -- it is ignored (the environment gives the declarer a penalty reward) and the player acts again."""

    @classmethod
    def make(
        cls,
        attributes: int | str | Iterable[str] | None = None,
        squares: bool = False,
        declaration: bool = False,
        false_declaration: str = "lose",
    ) -> Variant:
        """Validated constructor.

        ``attributes``: ``None`` (all four), a count 1-4 (the first that many of height, colour, shape, top),
        one attribute name, or an iterable of names.
        """
        names = _attribute_names(attributes)
        for flag, value in (("squares", squares), ("declaration", declaration)):
            if not isinstance(value, bool | np.bool_):
                raise RulesError(f"{flag} must be True or False, got {value!r}")
        squares, declaration = bool(squares), bool(declaration)  # numpy's bools too (a flag read from an array)
        if false_declaration not in FALSE_DECLARATION_POLICIES:
            allowed = ", ".join(FALSE_DECLARATION_POLICIES)
            raise RulesError(f"unknown false_declaration policy {false_declaration!r}; allowed: {allowed}")
        if false_declaration != "lose" and not declaration:
            raise RulesError(
                f"false_declaration={false_declaration!r} needs declaration=True: without the declaration variant "
                "nothing is ever declared"
            )
        return cls(names, squares, declaration, false_declaration)

    @functools.cached_property  # read by every step: computed once per variant (the dataclass is frozen)
    def counted(self) -> int:
        """4-bit mask of the counted attributes."""
        return sum(1 << ATTRIBUTES.index(name) for name in self.attributes)

    @functools.cached_property
    def groups(self) -> tuple[int, ...]:
        """The groups as 16-bit square masks: ``LINES``, then ``SQUARE_BLOCKS`` in the squares variant."""
        return LINES + SQUARE_BLOCKS if self.squares else LINES

    @functools.cached_property
    def group_array(self) -> np.ndarray:
        """:attr:`groups` as an ``int64`` array, as compiled kernels that loop over them take it; read-only, as
        every kernel sees it (one compiled signature each, however many callers share the variant)."""
        groups = np.array(self.groups, dtype=np.int64)
        groups.flags.writeable = False
        return groups

    @functools.cached_property
    def compiled(self) -> tuple[np.ndarray, int, bool, bool]:
        """The variant as compiled kernels take it, one tuple passed whole: ``(group_array, counted, declaration,
        false_declaration_loses)`` -- the last four arguments of :func:`apply_action`."""
        return self.group_array, self.counted, self.declaration, self.false_declaration == "lose"

    @property
    def num_actions(self) -> int:
        """16, plus the declare action in the declaration variant."""
        return NUM_ACTIONS + 1 if self.declaration else NUM_ACTIONS

    def describe(self) -> str:
        """A short name, e.g. ``standard`` or ``attributes=colour,squares,declaration``."""
        parts = []
        if self.attributes != ATTRIBUTES:
            parts.append("attributes=" + "+".join(self.attributes))
        if self.squares:
            parts.append("squares")
        if self.declaration:
            parts.append(f"declaration({self.false_declaration})")
        return ",".join(parts) or "standard"

    def to_dict(self) -> dict:
        """Plain data, for configs and checkpoint metadata; ``Variant.make(**d)`` rebuilds it."""
        return {
            "attributes": list(self.attributes),
            "squares": self.squares,
            "declaration": self.declaration,
            "false_declaration": self.false_declaration,
        }


def _attribute_names(attributes: int | str | Iterable[str] | None) -> tuple[str, ...]:
    if attributes is None:
        return ATTRIBUTES
    if isinstance(attributes, numbers.Integral) and not isinstance(attributes, bool):
        count = int(attributes)
        if not 1 <= count <= NUM_ATTRIBUTES:
            raise RulesError(f"attributes count must be 1-4, got {count}")
        return ATTRIBUTES[:count]
    given = attributes
    if isinstance(attributes, str):
        attributes = attributes.replace("+", ",").split(",")
    if not isinstance(attributes, Iterable) or isinstance(attributes, bytes):
        raise RulesError(
            f"attributes must be None, a count 1-4, or names from {', '.join(ATTRIBUTES)}; got {attributes!r}"
        )
    names = list(attributes)
    if "" in names:  # "colour,,shape", "colour," or "": a name left out, not a shorter list
        raise RulesError(
            f"attributes {given!r}: item {names.index('') + 1} is empty; allowed: names from {', '.join(ATTRIBUTES)} "
            "joined by commas, or a count 1-4"
        )
    if not names:
        raise RulesError(f"attributes names none: at least one of {', '.join(ATTRIBUTES)}, or a count 1-4")
    unknown = [a for a in names if a not in ATTRIBUTES]
    if unknown:
        raise RulesError(f"unknown attribute(s) {unknown}; allowed: {', '.join(ATTRIBUTES)} or a count 1-4")
    if len(set(names)) != len(names):
        raise RulesError(f"attribute listed twice in {names}")
    return tuple(a for a in ATTRIBUTES if a in names)


STANDARD = Variant()
VARIANT_FLAGS = tuple(field.name for field in dataclasses.fields(Variant))
"""The keywords of :meth:`Variant.make`: what a mapping of a variant's flags may name."""


def checked_variant(variant: object) -> Variant:
    """The rules ``variant`` names: a :class:`Variant`, a mapping of its flags as configs write it
    (``{"squares": True}``, :data:`VARIANT_FLAGS`) or ``None`` for standard Quarto. The one reading of a variant
    given as data, by the sessions, the sample datasets and the training config."""
    if variant is None:
        return STANDARD
    if isinstance(variant, Variant):
        return variant
    if not isinstance(variant, Mapping):
        raise QuartoTypeError(
            f"variant must be a Variant, a mapping of its flags (e.g. {{'squares': True}}) or None, got "
            f"{type(variant).__name__} {shortened(repr(variant))}"
        )
    unknown = sorted(map(str, set(variant) - set(VARIANT_FLAGS)))
    if unknown:
        raise QuartoTypeError(f"variant has no flag {', '.join(unknown)}; its flags: {', '.join(VARIANT_FLAGS)}")
    try:
        return Variant.make(**variant)
    except (RulesError, TypeError) as error:  # TypeError: attributes of a type no rule knows
        raise RulesError(
            f"variant is not a valid rule variant ({one_line(error)}), got {shortened(repr(dict(variant)))}"
        ) from None


# ---------------------------------------------------------------------------------------------------------
# State
# ---------------------------------------------------------------------------------------------------------
class State(NamedTuple):
    """A Quarto position. The defaults are the opening position: empty board, nothing in hand.

    Player 0 is the player who gives first. The phase is implied by ``hand``: a piece in hand is to be
    placed by ``to_move``; with ``NO_PIECE`` in hand, ``to_move`` gives a piece.
    """

    lanes: int = 0
    """Attribute lanes of the board (see the module docstring)."""
    occupied: int = 0
    """Mask of occupied squares."""
    available: int = ALL_PIECES
    """Mask of pieces neither on the board nor in hand: the pieces that can be given."""
    hand: int = NO_PIECE
    """The piece to be placed, or ``NO_PIECE`` when the next action is a give."""
    to_move: int = 0
    """The player (0 or 1) who acts next."""
    claimable: int = 0
    """Declaration variant: bitmask over group indices of the winning groups completed by the last placement,
    which can still be declared. Always 0 in the other variants."""
    winner: int = NO_WINNER
    """0 or 1 once a player has won; ``NO_WINNER`` while playing and after a draw."""
    over: bool = False
    """Whether the game has ended (a win or a draw)."""

    @property
    def placing(self) -> bool:
        """Whether the next action places the piece in hand (otherwise it gives a piece, or declares)."""
        return self.hand != NO_PIECE

    def piece_at(self, square: int) -> int:
        """The piece on ``square``, or ``NO_PIECE``."""
        return piece_on(self.lanes, square) if self.occupied >> square & 1 else NO_PIECE

    @property
    def board(self) -> tuple[int, ...]:
        """The 16 squares row by row: a piece number or ``NO_PIECE``."""
        return tuple(self.piece_at(s) for s in range(NUM_SQUARES))

    @property
    def num_empty(self) -> int:
        """Number of empty squares."""
        return NUM_SQUARES - bin(self.occupied).count("1")

    def returns(self) -> tuple[float, float]:
        """Final rewards of players 0 and 1: +1 win, -1 loss, 0 draw (0 too while the game goes on)."""
        if self.winner == NO_WINNER:
            return (0.0, 0.0)
        return (1.0, -1.0) if self.winner == 0 else (-1.0, 1.0)


INITIAL_STATE = State()


def legal_action_mask(variant: Variant, state: State) -> int:
    """Bitmask of the legal actions (bit ``DECLARE`` for declaring): empty squares when placing, available
    pieces when giving, plus the declaration whenever the declaration variant is on."""
    return legal_mask(state.occupied, state.available, state.hand, state.over, variant.declaration)


def legal_actions(variant: Variant, state: State) -> list[int]:
    """The legal actions, in increasing order."""
    return bits(legal_action_mask(variant, state))


def useful_action_mask(variant: Variant, state: State) -> int:
    """The legal actions less a declaration with nothing to claim: legal, but it either loses the game or
    (``false_declaration="penalty"``) changes nothing, so searches and learners leave it out."""
    return useful_mask(state.occupied, state.available, state.hand, state.claimable, state.over, variant.declaration)


def compiled_fields(state: State) -> tuple[int, int, int, int, int, int, int, bool]:
    """The fields of ``state``, in order, as compiled code takes a position: ``lanes`` signed (see
    :func:`signed_lanes`). The one way a :class:`State` crosses into compiled code: ``kernel(*compiled_fields(s))``."""
    lanes, occupied, available, hand, to_move, claimable, winner, over = state
    return (lanes - (1 << 64) if lanes >> 63 else lanes), occupied, available, hand, to_move, claimable, winner, over


NUM_FIELDS = len(State._fields)
FIELD_LANES, FIELD_OCCUPIED, FIELD_AVAILABLE, FIELD_HAND, FIELD_TO_MOVE, FIELD_CLAIMABLE, FIELD_WINNER, FIELD_OVER = (
    range(NUM_FIELDS)
)
"""The columns of a batch of positions in compiled code: one ``(n, NUM_FIELDS)`` int64 array, a row per position,
the fields of :class:`State` in order as :func:`compiled_fields` gives them (``over`` as 0 or 1)."""


def state_of_row(row: Iterable[int]) -> State:
    """The :class:`State` in a row of :func:`position_array` (its inverse: ``lanes`` unsigned again)."""
    lanes, occupied, available, hand, to_move, claimable, winner, over = (int(v) for v in row)
    return State(lanes & (1 << 64) - 1, occupied, available, hand, to_move, claimable, winner, bool(over))


def position_problem(variant: Variant, row: Sequence[int]) -> str | None:
    """What makes ``row`` (of a :func:`position_array`) no position in play under ``variant``, in a few words
    (``"is over"``, ``"has attributes on an empty square"``, ...), or ``None`` for one that a game reaches: every
    field in its range, each piece once (on the board, in hand or left), the turn and the phase as the counts of
    gives and placements make them, and no finished group where it would have ended the game. The test of
    :func:`position_problems`, on one row of Python integers: ``lanes`` may be signed or not, and a field beyond
    64 bits is out of range."""
    if len(row) != NUM_FIELDS:
        raise QuartoValueError(
            f"a position row has {NUM_FIELDS} fields (of quarto_env.core.position_array), got {len(row)}"
        )
    lanes, *fields = (int(v) for v in row)
    beyond = 1 << 62  # out of every field's range, and within int64: it fails the same test as the field given
    fields = [min(max(v, -beyond), beyond) for v in fields]
    code = position_problems(variant, np.array([[signed_lanes(lanes & (1 << 64) - 1), *fields]], dtype=np.int64))
    return POSITION_PROBLEMS[code[0]]


POSITION_PROBLEMS = (
    None,
    "has no valid result fields (winner, over)",
    "is over",
    "has a field out of range (occupied, available or hand)",
    "has attributes on an empty square",
    "does not hold each of the 16 pieces once (on the board, in hand or left to give)",
    "has a turn or a phase that its counts of gives and placements do not give",
    "has claimable groups that its rules or its groups do not allow",
    "has a finished group, which would have ended the game",
)
"""What :func:`position_problems` finds in a row, by its code (0: nothing, a position in play)."""
_CHUNK_ROWS = 1 << 16
"""Rows checked at once by :func:`position_problems`: its arrays stay within tens of megabytes."""


def position_problems(variant: Variant, rows: np.ndarray) -> np.ndarray:
    """:func:`position_problem` of every row of ``rows`` (``(n, NUM_FIELDS)``, read as int64), in numpy: an int8 code
    per row into :data:`POSITION_PROBLEMS`, the first problem found (0: none). Whole columns at once: a replay
    buffer's rows checked one by one would cost its resume seconds (docs/results.md has the figures)."""
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[1] != NUM_FIELDS or rows.dtype.kind not in "iu":
        raise QuartoValueError(
            f"positions must be integer rows of quarto_env.core.position_array, shape (n, {NUM_FIELDS}); got "
            f"{rows.dtype} of shape {rows.shape}"
        )
    rows = rows.astype(np.int64, copy=False)
    return np.concatenate(
        [_row_problems(variant, rows[i : i + _CHUNK_ROWS]) for i in range(0, len(rows), _CHUNK_ROWS)]
        or [np.zeros(0, dtype=np.int8)]
    )


def _row_problems(variant: Variant, rows: np.ndarray) -> np.ndarray:
    lanes, occupied, available, hand, to_move, claimable, winner, over = rows.T
    code = np.zeros(len(rows), dtype=np.int8)

    def found(problem: int, where: np.ndarray) -> None:
        code[(code == 0) & where] = problem  # a row keeps the first problem found

    found(1, ~np.isin(over, (0, 1)) | ~np.isin(winner, (NO_WINNER, 0, 1)) | ((winner != NO_WINNER) & (over == 0)))
    found(2, over == 1)
    in_range = (occupied >= 0) & (occupied <= ALL_SQUARES) & (available >= 0) & (available <= ALL_PIECES)
    found(3, ~(in_range & (hand >= NO_PIECE) & (hand < NUM_PIECES)))
    occupied, available = occupied & ALL_SQUARES, available & ALL_PIECES  # the rows out of range have their code
    attribute_lanes = (lanes[:, None] >> (NUM_SQUARES * np.arange(NUM_ATTRIBUTES))) & ALL_SQUARES  # (n, attributes)
    found(4, (attribute_lanes & ~occupied[:, None]).any(1))
    square_bits = (attribute_lanes[:, :, None] >> np.arange(NUM_SQUARES)) & 1  # (n, attributes, squares)
    pieces = (square_bits << np.arange(NUM_ATTRIBUTES)[:, None]).sum(1)  # the piece on each square, if any
    on_board = (occupied[:, None] >> np.arange(NUM_SQUARES)) & 1
    in_hand = hand != NO_PIECE
    held = np.bitwise_or.reduce(on_board << pieces, axis=1) | available | (in_hand << np.clip(hand, 0, NUM_PIECES - 1))
    placed = on_board.sum(1)
    left = ((available[:, None] >> np.arange(NUM_PIECES)) & 1).sum(1)
    found(5, (held != ALL_PIECES) | (placed + in_hand + left != NUM_PIECES))
    gives = NUM_PIECES - left
    found(6, (gives - placed != in_hand) | (to_move != gives % 2))
    allowed = variant.declaration & (claimable > 0) & (claimable < 1 << len(variant.groups))
    found(7, (claimable != 0) & ~allowed)
    if not variant.declaration:
        groups = np.array(variant.groups, dtype=np.int64)
        full = (occupied[:, None] & groups) == groups  # (n, groups)
        group_lanes = attribute_lanes[:, :, None] & groups  # (n, attributes, groups)
        counted = ((variant.counted >> np.arange(NUM_ATTRIBUTES)) & 1).astype(bool)[:, None]
        shared = ((group_lanes == groups) | (group_lanes == 0)) & counted
        found(8, (full & shared.any(1)).any(1))
    return code


def position_array(states: Iterable[State]) -> np.ndarray:
    """``states`` as one ``(n, NUM_FIELDS)`` int64 array, row ``i`` holding ``states[i]``: the one form in which a
    batch of positions crosses into compiled code (the batched games, the search's trees, the replay buffer)."""
    return np.array([compiled_fields(s) for s in states], dtype=np.int64).reshape(-1, NUM_FIELDS)


@jitable
def position_fields(row):  # type: ignore[no-untyped-def]
    """The fields of the position in ``row`` (of a :func:`position_array`), as the functions above take them:
    ``kernel(*position_fields(positions[i]), *variant.compiled)``."""
    return row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7] != 0


@jitable
def step_position(row, action, rules):  # type: ignore[no-untyped-def]
    """Apply the legal ``action`` to the position in ``row`` in place, under ``rules`` (:attr:`Variant.compiled`)."""
    row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7] = apply_action(
        *position_fields(row)[:6], action, *rules
    )


def step(variant: Variant, state: State, action: int) -> State:
    """The state after ``action``. Raises :class:`IllegalActionError` for an illegal action.

    Placing: the piece in hand goes on the empty square ``action``; the same player then gives. Without
    the declaration variant, completing a winning group wins at once. With it, the winning groups completed
    by this placement become ``claimable``: the placer may declare instead of giving, or the opponent may
    declare before placing the given piece; once that piece is placed they are dead (a full group is never
    completed again, so dropping them from ``claimable`` is all it takes). A declaration with nothing
    claimable loses (``false_declaration="lose"``) or changes nothing (``"penalty"``).

    Giving: piece ``action`` passes to the opponent, who must place it next. After the 16th placement there
    is nothing to give and the game ends -- a draw unless a group was won (in the declaration variant the
    placer may still declare).
    """
    action = checked_action(action)
    if not 0 <= action <= DECLARE or not legal_action_mask(variant, state) >> action & 1:
        raise IllegalActionError(_illegal_reason(variant, state, action))
    return State(
        *apply_action(
            state.lanes,
            state.occupied,
            state.available,
            state.hand,
            state.to_move,
            state.claimable,
            action,
            variant.groups,
            variant.counted,
            variant.declaration,
            variant.false_declaration == "lose",
        )
    )


def checked_action(action: object, num_actions: int | None = None) -> int:
    """``action`` as an ``int``: :class:`~quarto_env.errors.ActionTypeError` (a ``TypeError``) unless it is a
    Python or numpy integer or a 0-d integer array (not ``None``, a bool, a float or a string, which would
    otherwise be read as some other action); with ``num_actions``, :class:`IllegalActionError` unless it is in
    ``0..num_actions - 1`` too. Either message names the action and the allowed range."""
    if type(action) is int:  # the common case first: an isinstance test against an ABC costs a microsecond
        number = action
    elif isinstance(action, int | np.integer) and not isinstance(action, bool):
        number = int(action)
    elif isinstance(action, np.ndarray) and action.ndim == 0 and action.dtype.kind in "iu":
        number = int(action)  # a 0-d integer array: what model.predict returns for one observation
    else:
        allowed = "" if num_actions is None else f" 0-{num_actions - 1}"
        raise ActionTypeError(
            f"an action must be a Python or numpy integer{allowed}, got {action!r} ({type(action).__name__})"
        )
    if num_actions is not None and not 0 <= number < num_actions:
        raise IllegalActionError(f"action {number} is out of range 0-{num_actions - 1}")
    return number


def _illegal_reason(variant: Variant, state: State, action: int) -> str:
    if state.over:
        return "the game is over: no action is legal"
    if action == DECLARE and not variant.declaration:
        return f"action {DECLARE} (declare) exists only in the declaration variant"
    if not 0 <= action < variant.num_actions:
        return f"action {action} is out of range 0-{variant.num_actions - 1}"
    if state.placing:
        return f"square {action} is not empty; empty squares: {bits(ALL_SQUARES & ~state.occupied)}"
    return f"piece {action} cannot be given; available pieces: {bits(state.available)}"


def winning_squares_for(variant: Variant, state: State, piece: int) -> int:
    """Mask of empty squares where ``piece`` would complete a winning group."""
    return winning_squares(state.lanes, state.occupied, piece, variant.groups, variant.counted)


def losing_gives(variant: Variant, state: State) -> int:
    """Mask of available pieces that would let the receiver win at once."""
    return winning_pieces(state.lanes, state.occupied, variant.groups, variant.counted) & state.available


def safe_gives(variant: Variant, state: State) -> int:
    """Mask of available pieces that do not let the receiver win at once."""
    return state.available & ~losing_gives(variant, state)


def has_winning_group(variant: Variant, state: State) -> bool:
    """Whether some group on the board is full and shares a counted attribute."""
    return any(is_winning_group(state.lanes, state.occupied, g, variant.counted) for g in variant.groups)


def from_board(board: Iterable[int], hand: int = NO_PIECE) -> State:
    """A state (not yet judged for a win) from 16 squares (piece or ``NO_PIECE``) and the piece in hand.

    ``to_move`` follows from the counts: gives alternate starting with player 0, and the receiver of a piece
    places it and gives the next one.
    """
    lanes = occupied = used = 0
    for square, piece in enumerate(board):
        if piece != NO_PIECE:
            lanes = place_lanes(lanes, piece, square)
            occupied |= 1 << square
            used |= 1 << piece
    if hand != NO_PIECE:
        used |= 1 << hand
    placed = bin(occupied).count("1")
    to_move = (placed + 1) % 2 if hand != NO_PIECE else placed % 2
    return State(lanes, occupied, ALL_PIECES & ~used, hand, to_move)
