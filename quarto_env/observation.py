"""The observation planes: one table of channels and kinds, and one compiled kernel that writes them.

An observation is an ``int8`` array of shape ``(channels, 16)``: each channel is a plane over the 16 squares
(square channels), over the 16 pieces (piece channels), or the same value everywhere (``both``). Quarto is
impartial -- no piece belongs to a player -- so the acting player's view needs no flipping: it is the
position plus the phase.

The kinds are nested: each one is the previous one plus a few more derived planes, so a channel has the same
index in every kind that has it. :data:`CHANNELS` is the table of every channel; :data:`OBSERVATION_KINDS`
says how many of them each kind takes. The env (:mod:`quarto_env.env`), the batched training games
(:mod:`quarto_env.vector`), the networks (:mod:`agents.ppo`) and the training config all read these two
tables; :func:`channel_table` prints them (the env's docstring holds that text, and a test keeps the two equal).

``raw``
    the position itself: the board, the pieces left, the piece in hand, the phase.
``tactical``
    plus the 1-ply facts a player needs to "take the win" and "not hand over a winning piece".
``lookahead``
    plus two planes one turn deeper: the *traps* -- placements after which the placer must hand over a win,
    and gives after which the receiver must. ``greedy`` play sees one ply; these let a learner avoid and set
    the traps that decide most games between 1-ply players.
``parity``
    plus two planes on the count of *safe* pieces (those that cannot win at once) after an action. When no
    placement changes the threats, players give safe pieces in turn and the one left without one loses, so an
    odd count is good for the player who gives next (the horizon evaluation of ``minimax``,
    :mod:`agents.solver.kernels`).
``tempo``
    plus the ``lookahead`` and ``parity`` gives one turn further on: the placements after which the placer can
    give a trap (or an even count), and the gives after which the receiver can. The planes of the other kinds
    are read off the position; these need the give planes after each candidate placement. Most placements are
    settled from what the position says about their square; the others get their threats from the groups'
    values and work the give planes out, so this kind still costs several times as much to observe
    (``quarto bench vector``; figures in docs/results.md).

Every derived plane follows from the rules core's test of what a group's pieces share
(:func:`~quarto_env.core.shared_attributes`), for every variant: the kernel works out, once per position, what
each empty square threatens, and reads every plane off that with table lookups, without playing a move (see
:func:`group_threats`). An agent could compute the planes itself, but learns far faster when they are given
(see ``docs/``'s comparison of kinds).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Literal, overload

import numpy as np

from quarto_env.core import (
    ALL_PIECES,
    ALL_SQUARES,
    NO_PIECE,
    NUM_ATTRIBUTES,
    NUM_SQUARES,
    State,
    Variant,
    compiled_fields,
    lowest_bit,
    pieces_sharing,
    popcount,
    shared_attributes,
)
from quarto_env.errors import QuartoValueError
from quarto_env.jitable import jitable

OVER = ("squares", "pieces", "both")
"""What a channel's 16 entries stand for: the squares, the pieces, or neither (one value repeated)."""


@dataclasses.dataclass(frozen=True)
class Channel:
    """One observation plane."""

    name: str
    over: str
    """``squares``, ``pieces`` or ``both`` (see :data:`OVER`)."""
    meaning: str


_VALUES = (("tall", "short"), ("dark", "light"), ("square", "round"), ("hollow", "solid"))

CHANNELS: tuple[Channel, ...] = (
    Channel("occupied", "squares", "the square is occupied"),
    *(Channel(f"square_{one}", "squares", f"the piece on it is {one}") for one, _ in _VALUES),
    *(Channel(f"square_{zero}", "squares", f"the piece on it is {zero}") for _, zero in _VALUES),
    Channel("claimable", "squares", "in a group that can be declared now (declaration variant)"),
    Channel("available", "pieces", "the piece can be given (neither on the board nor in hand)"),
    Channel("in_hand", "pieces", "the piece is in hand, to be placed"),
    *(Channel(f"piece_{one}", "pieces", f"the piece is {one} (constant)") for one, _ in _VALUES),
    Channel("placing", "both", "1 when the next action places the piece in hand, 0 when it gives"),
    # tactical
    Channel("square_wins", "squares", "placing the piece in hand here completes a winning group"),
    Channel("piece_loses", "pieces", "giving this available piece lets the receiver win at once"),
    # lookahead
    Channel("self_trap", "squares", "placing here does not win and leaves only pieces that lose"),
    Channel("trap_give", "pieces", "a safe piece after which, wherever it goes, every piece left loses"),
    # parity
    Channel("odd_safe", "squares", "placing here does not win and leaves an odd number of safe pieces"),
    Channel("even_give", "pieces", "a safe piece after which, wherever it goes, an even number are safe"),
    # tempo
    Channel("sets_trap", "squares", "placing here does not win and leaves a trap_give to give"),
    Channel("sets_even", "squares", "placing here does not win and leaves an even_give to give"),
    Channel("allows_trap", "pieces", "a safe piece the receiver can place so as to leave a trap_give"),
    Channel("allows_even", "pieces", "a safe piece the receiver can place so as to leave an even_give"),
)
"""Every channel, in order; a kind takes the first ``num_channels`` of them."""

_INDEX = {channel.name: i for i, channel in enumerate(CHANNELS)}
# Channel indices, for the kernel (numba reads module globals as constants).
OCCUPIED = _INDEX["occupied"]
FIRST_ONE_ATTRIBUTE = _INDEX["square_tall"]
FIRST_ZERO_ATTRIBUTE = _INDEX["square_short"]
CLAIMABLE = _INDEX["claimable"]
AVAILABLE = _INDEX["available"]
IN_HAND = _INDEX["in_hand"]
FIRST_PIECE_ATTRIBUTE = _INDEX["piece_tall"]
PLACING = _INDEX["placing"]
SQUARE_WINS = _INDEX["square_wins"]
PIECE_LOSES = _INDEX["piece_loses"]
SELF_TRAP = _INDEX["self_trap"]
TRAP_GIVE = _INDEX["trap_give"]
ODD_SAFE = _INDEX["odd_safe"]
EVEN_GIVE = _INDEX["even_give"]
SETS_TRAP = _INDEX["sets_trap"]
SETS_EVEN = _INDEX["sets_even"]
ALLOWS_TRAP = _INDEX["allows_trap"]
ALLOWS_EVEN = _INDEX["allows_even"]


@dataclasses.dataclass(frozen=True)
class ObservationKind:
    """A kind of observation: the first ``num_channels`` channels of :data:`CHANNELS`."""

    name: str
    level: int
    """Its rank among the kinds, ``raw`` = 0: the kernel writes the planes of every kind up to this one."""
    num_channels: int

    @property
    def channels(self) -> tuple[Channel, ...]:
        """Its channels, in order."""
        return CHANNELS[: self.num_channels]

    @property
    def square_channels(self) -> list[int]:
        """Indices of the channels that describe one square each (``both`` included)."""
        return [i for i, c in enumerate(self.channels) if c.over in ("squares", "both")]

    @property
    def piece_channels(self) -> list[int]:
        """Indices of the channels that describe one piece each (``both`` included)."""
        return [i for i, c in enumerate(self.channels) if c.over in ("pieces", "both")]

    @property
    def shape(self) -> tuple[int, int]:
        """The shape of one observation."""
        return (self.num_channels, NUM_SQUARES)


OBSERVATION_KINDS: dict[str, ObservationKind] = {
    kind.name: kind
    for kind in (
        ObservationKind("raw", 0, PLACING + 1),
        ObservationKind("tactical", 1, PIECE_LOSES + 1),
        ObservationKind("lookahead", 2, TRAP_GIVE + 1),
        ObservationKind("parity", 3, EVEN_GIVE + 1),
        ObservationKind("tempo", 4, ALLOWS_EVEN + 1),
    )
}
"""Every observation kind by name, from the least to the most derived."""


DEFAULT_OBSERVATION = "tactical"
"""The kind of ``quarto_v1``, its single-agent and batched views and ``quarto dataset`` when none is named."""


@overload
def observation_kind(name: str | ObservationKind, optional: Literal[False] = False) -> ObservationKind: ...
@overload
def observation_kind(name: str | ObservationKind | None, optional: bool) -> ObservationKind | None: ...
def observation_kind(name: str | ObservationKind | None, optional: bool = False) -> ObservationKind | None:
    """The kind called ``name`` (or ``name`` itself, a kind already); with ``optional``, ``None`` stands for no
    observation. The one check of an observation argument: ``ValueError`` naming the allowed kinds otherwise."""
    if isinstance(name, ObservationKind) or (optional and name is None):
        return name
    kind = OBSERVATION_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        allowed = ", ".join(["None", *OBSERVATION_KINDS] if optional else OBSERVATION_KINDS)
        raise QuartoValueError(f"unknown observation kind {name!r}; allowed: {allowed}")
    return kind


def channel_table() -> str:
    """The channels as a Markdown table: index, name, the kind that adds it, what it is over, its meaning."""
    rows = [
        "| ch. | name          | kind      | over    | meaning |",
        "|----:|---------------|-----------|---------|---------|",
    ]
    first = 0
    for kind in OBSERVATION_KINDS.values():
        for i in range(first, kind.num_channels):
            c = CHANNELS[i]
            rows.append(f"| {i:>3} | {c.name:<13} | {kind.name:<9} | {c.over:<7} | {c.meaning} |")
        first = kind.num_channels
    return "\n".join(rows)


def observe(variant: Variant, state: State, kind: str = DEFAULT_OBSERVATION) -> np.ndarray:
    """The observation planes of ``state`` as a new ``int8`` array of shape ``(channels, 16)``."""
    found = observation_kind(kind)
    out = np.zeros(found.shape, dtype=np.int8)
    _compiled_encoder()(out, found.level, *compiled_fields(state), variant.groups, variant.counted)
    return out


# ---------------------------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------------------------
# The derived planes come from what each empty square threatens (group_threats), read off with PIECES_WITH_VALUES:
# no piece is placed to see what follows. Each plane is worked out as a 16-bit mask, then written (_write_plane).
@jitable
def piece_values(piece: int) -> int:
    """The 8 attribute values of ``piece`` as a byte: bit ``k`` when its attribute ``k`` is 1, bit ``4 + k`` when
    it is 0. The values that the pieces of a group share make a byte of the same kind."""
    return piece | (~piece & 0xF) << 4


def _read_only(values: list[int]) -> np.ndarray:
    array = np.array(values, dtype=np.int64)
    array.flags.writeable = False  # numba compiles a read-only global array in as a constant
    return array


PIECES_WITH_VALUES = _read_only([pieces_sharing(values & 0xF, values >> 4) for values in range(256)])
"""``PIECES_WITH_VALUES[values]``: the 16-bit mask of the pieces with at least one of ``values`` (a byte of
:func:`piece_values`). The pieces that complete a group of three are those with a value the three share; as a
union over values, the pieces that complete any of several groups are those with a value one of them shares."""


@jitable
def write_planes(out, level, lanes, occupied, available, hand, to_move, claimable, winner, over, groups, counted):  # type: ignore[no-untyped-def]
    """Write the planes of one position into ``out`` (``(channels, 16)``, C-contiguous): every plane of every kind
    up to ``level`` (:attr:`ObservationKind.level`), those that the position's phase leaves empty as zeros, so
    ``out`` needs no zeroing first (planes past the level's are left as they are). The position comes as the
    fields of a :class:`~quarto_env.core.State` (:func:`~quarto_env.core.compiled_fields`).

    Every plane is a 16-bit mask, written as two 64-bit words of 0/1 bytes (:func:`_write_plane`) through a
    word view of ``out``: two stores per plane instead of sixteen.

    Compiled into each compiled caller (``@jitable``). A kernel that writes a batch of planes views the batch
    once and calls :func:`write_plane_words` for each game: a view per game is a noticeable share of the
    planes' time (figures in docs/results.md)."""
    write_plane_words(
        out.view(np.uint64), level, lanes, occupied, available, hand, to_move, claimable, winner, over, groups, counted
    )


@jitable
def write_plane_words(  # type: ignore[no-untyped-def]
    words, level, lanes, occupied, available, hand, to_move, claimable, winner, over, groups, counted
):
    """:func:`write_planes` into ``words``, the word view of the planes (``planes.view(np.uint64)``, shape
    ``(channels, 2)``)."""
    _write_raw(words, lanes, occupied, available, hand, claimable, groups)
    if level >= 1:
        threats = group_threats(lanes, occupied, groups, counted, level >= 2)
        _write_tactical(words, threats, available, hand)
        if level >= 2:
            _write_lookahead(words, level >= 3, threats, occupied, available, hand)
        if level >= 4:
            _write_tempo(words, threats, lanes, occupied, available, hand, groups, counted)


def _encode_observation(  # type: ignore[no-untyped-def]
    out, level, lanes, occupied, available, hand, to_move, claimable, winner, over, groups, counted
):
    """:func:`write_planes` compiled on its own (``encode_observation``): for Python, and for compiled code that
    observes now and then."""
    write_planes(out, level, lanes, occupied, available, hand, to_move, claimable, winner, over, groups, counted)


@functools.cache
def _compiled_encoder() -> Any:
    import numba  # here: this module runs without numba until something compiles

    return numba.njit(cache=True)(_encode_observation)


def __getattr__(name: str) -> Any:
    """``encode_observation``: :func:`_encode_observation` compiled, made on first use."""
    if name == "encode_observation":
        return _compiled_encoder()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@jitable
def _write_raw(words, lanes, occupied, available, hand, claimable, groups):  # type: ignore[no-untyped-def]
    _write_plane(words, OCCUPIED, occupied)
    for k in range(NUM_ATTRIBUTES):
        ones = (lanes >> (16 * k)) & occupied  # lane k: attribute k of the piece on each square
        _write_plane(words, FIRST_ONE_ATTRIBUTE + k, ones)
        _write_plane(words, FIRST_ZERO_ATTRIBUTE + k, occupied & ~ones)
        _write_plane(words, FIRST_PIECE_ATTRIBUTE + k, PIECES_WITH_ATTRIBUTE[k])
    claimed = 0
    while claimable:  # the declaration variant's groups to claim: none in the others
        claimed |= groups[lowest_bit(claimable)]
        claimable &= claimable - 1
    _write_plane(words, CLAIMABLE, claimed)
    _write_plane(words, AVAILABLE, available)
    placing = hand != NO_PIECE
    _write_plane(words, IN_HAND, 1 << hand if placing else 0)
    _write_plane(words, PLACING, ALL_SQUARES if placing else 0)


BYTE_WORDS = np.array([[b >> i & 1 for i in range(8)] for b in range(256)], dtype=np.int8).view(np.uint64).ravel()
BYTE_WORDS.flags.writeable = False
"""``BYTE_WORDS[b]``: the 64-bit word whose 8 bytes are the bits of byte ``b`` as 0 or 1, lowest bit in the first
byte in memory (built through a view, so it holds on either byte order)."""

PIECES_WITH_ATTRIBUTE = _read_only([pieces_sharing(1 << k, 0) for k in range(NUM_ATTRIBUTES)])
"""``PIECES_WITH_ATTRIBUTE[k]``: the pieces whose attribute ``k`` is 1 (bit ``k`` of the piece's number)."""


@jitable
def _write_plane(words, channel, mask):  # type: ignore[no-untyped-def]
    """Plane ``channel`` of the word view ``words`` (:func:`write_planes`): the 16-bit ``mask``, one entry per
    bit."""
    words[channel, 0] = BYTE_WORDS[mask & 0xFF]
    words[channel, 1] = BYTE_WORDS[(mask >> 8) & 0xFF]


@jitable
def group_threats(lanes, occupied, groups, counted, with_pairs):  # type: ignore[no-untyped-def]
    """What every empty square threatens, as one byte of values (:func:`piece_values`) per square, packed eight
    squares to a 64-bit word: ``(threes_low, threes_high, pairs_low, pairs_high)``, squares 0-7 in the low words,
    square ``s`` in byte ``s % 8`` (:func:`square_byte` reads one back).

    A square's *threes* are the values shared by the pieces of a group of three that it completes: a piece with
    one of them wins there. Its *pairs* (only with ``with_pairs``) are the values shared by the pieces of a group
    of two through it: a piece placed there makes a group of three that shares those of its own values."""
    threes_low = threes_high = pairs_low = pairs_high = 0
    # Only the groups of three (and of two, with pairs) add anything: a first pass marks them by their counts
    # alone, and a second works out the values of those only. A position has few of them, often none, so this
    # skips most of the work (docs/results.md has the figures).
    fewest = 2 if with_pairs else 3
    marked = 0
    for i in range(len(groups)):
        marked |= (fewest <= popcount(groups[i] & occupied) <= 3) << i
    while marked:
        group = groups[lowest_bit(marked)]
        marked &= marked - 1
        on_board = group & occupied
        count = popcount(on_board)
        # Without branches on the count: which of the groups hold three pieces cannot be predicted.
        ones, zeros = shared_attributes(lanes, on_board, counted)
        values = ones | zeros << 4
        empty = group & ~occupied
        first = lowest_bit(empty)
        second = lowest_bit((empty & (empty - 1)) | 1 << 16) & 15  # a group of three has none: 0 (adds nothing)
        three = values if count == 3 else 0
        threes_low, threes_high = _add_byte(threes_low, threes_high, first, three)
        if with_pairs:
            pair = values if count == 2 else 0
            pairs_low, pairs_high = _add_byte(pairs_low, pairs_high, first, pair)
            pairs_low, pairs_high = _add_byte(pairs_low, pairs_high, second, pair)
    return threes_low, threes_high, pairs_low, pairs_high


BYTE_ONES = 0x0101010101010101
"""A 1 in each byte of a 64-bit word."""


@jitable
def _add_byte(low, high, square, values):  # type: ignore[no-untyped-def]
    shifted = values << (8 * (square & 7))
    high_half = square >> 3  # 0 or 1: which word, chosen by masks rather than a branch
    return low | (shifted & (high_half - 1)), high | (shifted & -high_half)


@jitable
def square_byte(low, high, square):  # type: ignore[no-untyped-def]
    """Byte ``square`` of the 16 packed in ``low`` (squares 0-7) and ``high`` (squares 8-15)."""
    return ((low if square < 8 else high) >> (8 * (square & 7))) & 0xFF


@jitable
def repeated_byte(byte):  # type: ignore[no-untyped-def]
    """``byte`` in each of the 8 bytes of a 64-bit word (by shifts: numba's signed products may not overflow)."""
    byte |= byte << 8
    byte |= byte << 16
    return byte | byte << 32


@jitable
def nonzero_bytes(word):  # type: ignore[no-untyped-def]
    """A bit per byte of the 64-bit ``word``: bit ``k`` when byte ``k`` is not zero."""
    word |= word >> 4  # then bit 8k is the OR of byte k's bits (sign bits shifted in never reach bit 8k)
    word |= word >> 2
    word |= word >> 1
    word &= BYTE_ONES
    word |= word >> 7  # gather bit 8k into bit k: byte 0 takes bit 0 of bytes 1, then 2-3, then 4-7
    word |= word >> 14
    word |= word >> 28
    return word & 0xFF


@jitable
def squares_with(low, high, values):  # type: ignore[no-untyped-def]
    """The squares whose byte (of the 16 packed in ``low`` and ``high``) has one of ``values``."""
    spread = repeated_byte(values)
    return nonzero_bytes(low & spread) | nonzero_bytes(high & spread) << 8


@jitable
def values_at_squares(low, high):  # type: ignore[no-untyped-def]
    """``(once, twice)``: the values in at least one of the 16 bytes packed in ``low`` and ``high``, and those in
    at least two (a threat at two squares survives a piece on either)."""
    once, twice = low | high, low & high
    for shift in (32, 16, 8):  # halve the words, as an adder tree of the counts capped at two
        twice |= (twice >> shift) | (once & (once >> shift))
        once |= once >> shift
    return once & 0xFF, twice & 0xFF


@jitable
def _write_tactical(words, threats, available, hand):  # type: ignore[no-untyped-def]
    threes_low, threes_high = threats[0], threats[1]
    if hand != NO_PIECE:
        _write_plane(words, SQUARE_WINS, squares_with(threes_low, threes_high, piece_values(hand)))
        _write_plane(words, PIECE_LOSES, 0)
    else:
        threatened = values_at_squares(threes_low, threes_high)[0]
        _write_plane(words, SQUARE_WINS, 0)
        _write_plane(words, PIECE_LOSES, PIECES_WITH_VALUES[threatened] & available)


@jitable
def _write_lookahead(words, with_parity, threats, occupied, available, hand):  # type: ignore[no-untyped-def]
    self_trap = odd_safe = trap_give = even_give = 0
    if hand != NO_PIECE:
        self_trap, odd_safe = _placement_planes(threats, occupied, available, hand)
    else:
        trap_give, even_give = _give_planes(threats, occupied, available, with_parity)
    _write_plane(words, SELF_TRAP, self_trap)
    _write_plane(words, TRAP_GIVE, trap_give)
    if with_parity:
        _write_plane(words, ODD_SAFE, odd_safe)
        _write_plane(words, EVEN_GIVE, even_give)


@jitable
def _kept_threats(threes_low, threes_high):  # type: ignore[no-untyped-def]
    """Per square, the values still threatened once a piece is put there, before the groups of three it makes:
    those threatened elsewhere too. Returns them packed as the threats are, and the values threatened anywhere."""
    once, twice = values_at_squares(threes_low, threes_high)
    kept_low = repeated_byte(twice) | (repeated_byte(once) & ~threes_low)
    kept_high = repeated_byte(twice) | (repeated_byte(once) & ~threes_high)
    return kept_low, kept_high, once


@jitable
def _placement_planes(threats, occupied, available, hand):  # type: ignore[no-untyped-def]
    """``(self_trap, odd_safe)`` of a position where ``hand`` is to be placed, as square masks."""
    threes_low, threes_high, pairs_low, pairs_high = threats
    kept_low, kept_high, _ = _kept_threats(threes_low, threes_high)
    values = piece_values(hand)
    after_low = kept_low | (pairs_low & repeated_byte(values))
    after_high = kept_high | (pairs_high & repeated_byte(values))
    self_trap = odd_safe = 0
    # Every square, the quiet ones picked at the end: sixteen independent lookups take less time than a loop over
    # the quiet squares alone, whose count no predictor guesses.
    for s in range(8):
        safe_low = available & ~PIECES_WITH_VALUES[(after_low >> 8 * s) & 0xFF]
        safe_high = available & ~PIECES_WITH_VALUES[(after_high >> 8 * s) & 0xFF]
        self_trap |= (safe_low == 0) << s | (safe_high == 0) << (s + 8)
        odd_safe |= (popcount(safe_low) & 1) << s | (popcount(safe_high) & 1) << (s + 8)
    squares = _quiet_squares(threats, occupied, available, hand)
    return self_trap & squares, odd_safe & squares


@jitable
def _quiet_squares(threats, occupied, available, hand):  # type: ignore[no-untyped-def]
    """The empty squares where ``hand`` does not win, when a piece is left to give after it (else none)."""
    if not available:
        return 0
    return ALL_SQUARES & ~occupied & ~squares_with(threats[0], threats[1], piece_values(hand))


@jitable
def _give_planes(threats, occupied, available, with_parity):  # type: ignore[no-untyped-def]
    """``(trap_give, even_give)`` of a position where a piece is to be given, as piece masks (``even_give`` only
    ``with_parity``, else 0)."""
    if popcount(available) < 2:
        return 0, 0  # no piece would be left to give after this one
    return _reply_gives(threats, ALL_SQUARES & ~occupied, available, True, with_parity)


@jitable
def _reply_gives(threats, empty, available, with_trap, with_even):  # type: ignore[no-untyped-def]
    """``(trap_give, even_give)``: the safe pieces of ``available`` (those that win nowhere) that are trap gives (if
    ``with_trap``, else 0) and even gives (if ``with_even``, else 0). A piece is a trap give when no placement of it
    on an ``empty`` square leaves a safe piece, an even give when none leaves an odd number.

    Placed on a square where it shares no value with the square's pairs, a piece makes no group of three: the
    pieces safe after it are those safe at the square less itself, one count for all such pieces. A first pass
    settles them, square by square; the second places only the pieces it leaves, on the squares where they do
    make a group of three.

    Off the squares with threes, the pieces safe at a square are the safe pieces, so the first pass takes those
    squares together where it can: the squares without threat or pair all alike (one stands for them), and the
    squares with pairs only where they can still change something (with an odd count of safe pieces they leave
    every even give as it is)."""
    threes_low, threes_high, pairs_low, pairs_high = threats
    once, twice = values_at_squares(threes_low, threes_high)
    safe = available & ~PIECES_WITH_VALUES[once]
    trap_give, even_give = safe if with_trap else 0, safe if with_even else 0
    num_safe = popcount(safe)
    threes = squares_with(threes_low, threes_high, ALL_VALUES) & empty
    paired = squares_with(pairs_low, pairs_high, ALL_VALUES) & empty
    if empty & ~threes & ~paired:  # a square where every piece leaves the safe pieces, less itself
        trap_give &= safe if num_safe == 1 else 0
        even_give &= ALL_PIECES if num_safe & 1 else 0
    squares = threes | (paired if trap_give or (even_give and not num_safe & 1) else 0)
    while squares and (trap_give | even_give):
        s = lowest_bit(squares)
        squares &= squares - 1
        here, pairing = _safe_at(threats, once, twice, available, s)
        count = popcount(here)
        # Without branches (selects): which way each goes cannot be predicted.
        trap_give &= pairing | (here if count == 1 else 0)  # a piece that pairs nothing leaves here less itself
        trap_give &= ~(pairing if here & ~pairing else 0)  # those that pair leave at least these
        even_give &= pairing | (ALL_PIECES if count & 1 else 0)
    squares = paired
    while squares and (trap_give | even_give):
        s = lowest_bit(squares)
        squares &= squares - 1
        here, pairing = _safe_at(threats, once, twice, available, s)
        pairs = square_byte(pairs_low, pairs_high, s)
        pieces = (trap_give | even_give) & pairing
        while pieces:
            p = lowest_bit(pieces)
            pieces &= pieces - 1
            safe_after = here & ~PIECES_WITH_VALUES[pairs & piece_values(p)]  # p itself included
            trap_give &= ~((safe_after != 0) << p)
            even_give &= ~((popcount(safe_after) & 1) << p)
    return trap_give, even_give


ALL_VALUES = 0xFF
"""Every value byte (:func:`piece_values`): a square's byte has one of them when it is not zero."""


@jitable
def _safe_at(threats, once, twice, available, square):  # type: ignore[no-untyped-def]
    """``(here, pairing)`` at an empty ``square``: the pieces safe once a piece that makes no group of three is put
    there (``once``, ``twice``: :func:`values_at_squares` of the threes), and the pieces that would make one."""
    threes = square_byte(threats[0], threats[1], square)
    here = available & ~PIECES_WITH_VALUES[twice | (once & ~threes)]
    return here, PIECES_WITH_VALUES[square_byte(threats[2], threats[3], square)]


# ---------------------------------------------------------------------------------------------------------
# The tempo planes: the give planes after each placement
# ---------------------------------------------------------------------------------------------------------
# A placement's give planes need the threats after it. Most placements are settled without them (_screen), from
# what the position says about the square; the others get them from the groups' values, read once per position
# (_board_groups), and the changes the square brings, once per square (_square_change), with the piece's values
# ANDed in (_threats_after).
UNKNOWN = -1
"""What :func:`_screen` answers when it cannot tell."""


@jitable
def _write_tempo(words, threats, lanes, occupied, available, hand, groups, counted):  # type: ignore[no-untyped-def]
    """The tempo planes: whether the position after a placement has a trap give, and whether it has an even
    give. To place: each quiet square, with the piece in hand. To give: each safe piece, on any square."""
    trap, even = _tempo_masks(threats, lanes, occupied, available, hand, groups, counted)
    placing = hand != NO_PIECE
    _write_plane(words, SETS_TRAP, trap if placing else 0)
    _write_plane(words, SETS_EVEN, even if placing else 0)
    _write_plane(words, ALLOWS_TRAP, 0 if placing else trap)
    _write_plane(words, ALLOWS_EVEN, 0 if placing else even)


@jitable
def _tempo_masks(threats, lanes, occupied, available, hand, groups, counted):  # type: ignore[no-untyped-def]
    """The two tempo planes of the position as masks: over squares to place ``hand``, over pieces to give."""
    threes_low, threes_high, pairs_low, pairs_high = threats
    kept_low, kept_high, once = _kept_threats(threes_low, threes_high)
    empty = ALL_SQUARES & ~occupied
    values, singles_low, singles_high, near = _board_groups(lanes, occupied, groups, counted)
    paired = squares_with(pairs_low, pairs_high, ALL_VALUES)
    hot = paired | squares_with(threes_low, threes_high, ALL_VALUES)
    all_pairs = values_at_squares(pairs_low, pairs_high)[0]
    if hand != NO_PIECE:
        squares = _quiet_squares(threats, occupied, available, hand)
        open_trap = open_even = 1 << hand
    else:
        squares = empty if popcount(available) > 2 else 0  # two pieces must be left to give after the one given
        open_trap = open_even = available & ~PIECES_WITH_VALUES[once]
    # At least this many pieces stay safe after any placement: with 3, a trap needs a square with no pairless one.
    unpaired = popcount(available & ~PIECES_WITH_VALUES[once | all_pairs])
    trap_mask = even_mask = 0
    while squares and (open_trap | open_even):
        s = lowest_bit(squares)
        squares &= squares - 1
        others = empty & ~(1 << s) & ~_square_mask(near, s)  # the squares the placement brings no pair to
        cold = (others & ~hot) != 0
        pairless = (others & ~paired) != 0
        kept = square_byte(kept_low, kept_high, s)
        pairs = square_byte(pairs_low, pairs_high, s)
        singles = square_byte(singles_low, singles_high, s)
        trap_pieces = 0 if pairless and unpaired >= 3 else open_trap
        pieces = trap_pieces | open_even
        if hand == NO_PIECE:
            settled, even_found = _settled_gives(
                kept, pairs, singles, cold, pairless, all_pairs, available, trap_pieces, open_even
            )
            even_mask |= even_found
            open_even &= ~even_found
            pieces &= ~settled
        change = (0, 0, 0, 0, 0, 0, 0, 0)
        changed = False
        while pieces:
            p = lowest_bit(pieces)
            pieces &= pieces - 1
            trap, even = _screen(kept, pairs, singles, cold, pairless, all_pairs, available, p)
            need_trap = trap == UNKNOWN and trap_pieces >> p & 1
            need_even = even == UNKNOWN and open_even >> p & 1
            if need_trap or need_even:
                if not changed:
                    change, changed = _square_change(values, threats, occupied, groups, s), True
                exact_trap, exact_even = _gives_after(change, occupied, available, p, s, need_trap, need_even)
                trap = exact_trap if need_trap else trap
                even = exact_even if need_even else even
            found = 1 << (s if hand != NO_PIECE else p)
            trap_mask |= found if trap == 1 and trap_pieces >> p & 1 else 0
            even_mask |= found if even == 1 and open_even >> p & 1 else 0
            if hand == NO_PIECE:  # a give needs one square of each
                open_trap &= ~(trap_mask & (1 << p))
                open_even &= ~(even_mask & (1 << p))
    return trap_mask, even_mask


@jitable
def _settled_gives(kept, pairs, singles, cold, pairless, all_pairs, available, trap_pieces, even_pieces):  # type: ignore[no-untyped-def]
    """:func:`_screen` for every safe piece to give at once, on one square: ``(settled, even)``, the pieces that
    pair nothing at the square and whose answers the screen settles, and those of them it finds an even give
    after. The pieces that pair nothing there leave the same safe pieces, less themselves, so the same answers
    but for the lone pieces' values (``singles``); ``trap_pieces`` and ``even_pieces`` are those still to try for
    each plane."""
    unpairing = (trap_pieces | even_pieces) & ~PIECES_WITH_VALUES[pairs]
    count = popcount(available & ~PIECES_WITH_VALUES[kept]) - 1  # a safe piece threatens nothing kept: less itself
    if count == 0:
        return unpairing, 0
    if cold and not count & 1:
        even, even_known = 0, ALL_PIECES
    elif not kept and count & 1:
        # An even give after each piece p that shares no value with the singles, if a piece other than p pairs
        # nothing anywhere (_screen's last line).
        plain = unpairing & ~PIECES_WITH_VALUES[singles]
        left = available & ~PIECES_WITH_VALUES[all_pairs]
        even = plain & ~(left if popcount(left) == 1 else 0) if left else 0
        even_known = even
    else:
        even = even_known = 0
    trap_known = ALL_PIECES if pairless and count >= 2 else ~trap_pieces
    return unpairing & trap_known & (even_known | ~even_pieces), even & even_pieces


@jitable
def _screen(kept, pairs, singles, cold, pairless, all_pairs, available, piece):  # type: ignore[no-untyped-def]
    """Whether the position after ``piece`` is placed on a square has a trap give, and an even give, as far as
    the position before says: 1, 0 or :data:`UNKNOWN` each. ``kept``, ``pairs``, ``singles``: the values
    threatened at other squares, shared by a pair through the square, and held by the lone piece of a group
    through it; ``cold``: whether another empty square stays without threat or pair, whatever is placed;
    ``pairless``: whether another stays without a pair (a threat allowed); ``all_pairs``: the values of every pair.

    At a cold square every piece leaves the safe ones less itself: a trap give needs one safe piece, an even
    give an odd number of them. At a pairless square a safe piece leaves at least those (it makes no group of
    three there, and fills any threat), so a trap give still needs one safe piece. With no threat and no piece
    pairing anything anywhere, every piece leaves that same number at every square."""
    left = available & ~(1 << piece)
    if popcount(left) < 2:
        return 0, 0
    values = piece_values(piece)
    threatened = kept | (pairs & values)
    count = popcount(left & ~PIECES_WITH_VALUES[threatened])
    if count == 0:
        return 0, 0
    trap = 0 if pairless and count >= 2 else UNKNOWN
    if cold and not count & 1:
        return trap, 0
    unpairing = left & ~PIECES_WITH_VALUES[all_pairs | (singles & values)]
    return trap, 1 if not threatened and count & 1 and unpairing else UNKNOWN


@jitable
def _gives_after(change, occupied, available, piece, square, need_trap, need_even):  # type: ignore[no-untyped-def]
    """Whether the position after ``piece`` is placed on ``square`` has a trap give (if ``need_trap``), and an
    even give (if ``need_even``), worked out (:func:`_reply_gives`)."""
    empty = ALL_SQUARES & ~occupied & ~(1 << square)
    trap_give, even_give = _reply_gives(
        _threats_after(change, piece), empty, available & ~(1 << piece), need_trap, need_even
    )
    return int(trap_give != 0), int(even_give != 0)


@jitable
def _board_groups(lanes, occupied, groups, counted):  # type: ignore[no-untyped-def]
    """What the tempo planes read of every group, once per position: ``(values, singles_low, singles_high,
    near)``. ``values``: the values each group's pieces share, a byte per group, eight to a word (at most 24
    groups; the squares variant has 19), for the groups of one or two pieces (0 for the others, whose values
    :func:`_square_change` does not read). ``singles``: per empty square, the values of the lone pieces of its
    groups of one, packed as the threats are. ``near``: per empty square, a 16-bit mask of the squares of its
    groups of one or two that share a value (:func:`_square_mask` reads one back)."""
    packed = (0, 0, 0)
    singles_low = singles_high = 0
    near = (0, 0, 0, 0)
    marked = 0  # the groups of one or two pieces: only their values are read (a first pass, as group_threats)
    for i in range(len(groups)):
        marked |= (1 <= popcount(groups[i] & occupied) <= 2) << i
    while marked:
        i = lowest_bit(marked)
        marked &= marked - 1
        on_board = groups[i] & occupied
        ones, zeros = shared_attributes(lanes, on_board, counted)
        values = ones | zeros << 4
        packed = _with_byte(packed, i, values)
        count = popcount(on_board)
        empty = groups[i] & ~occupied if values else 0
        while empty:
            s = lowest_bit(empty)
            empty &= empty - 1
            near = _with_square_mask(near, s, groups[i])
            if count == 1:
                singles_low, singles_high = _add_byte(singles_low, singles_high, s, values)
    return packed, singles_low, singles_high, near


@jitable
def _square_change(values, threats, occupied, groups, square):  # type: ignore[no-untyped-def]
    """The threats after a piece is placed on ``square``, before its values are known: ``(threes_low,
    threes_high, pairs_low, pairs_high)`` of the groups not through it, then the same of the groups through it,
    whose values the piece's own narrow down (:func:`_threats_after`)."""
    keep = ~(ALL_VALUES << 8 * (square & 7))  # the square's own byte goes: it is filled
    threes_low, threes_high = (threats[0] & keep, threats[1]) if square < 8 else (threats[0], threats[1] & keep)
    pairs_low = pairs_high = new_threes_low = new_threes_high = new_pairs_low = new_pairs_high = 0
    after = occupied | 1 << square
    for i in range(len(groups)):
        count = popcount(groups[i] & occupied)
        value = _byte_of(values, i) if count == 1 or count == 2 else 0
        empty = groups[i] & ~after
        first = lowest_bit(empty | 1 << 16) & 15
        second = lowest_bit((empty & (empty - 1)) | 1 << 16) & 15
        if not groups[i] >> square & 1:
            pair = value if count == 2 else 0
            pairs_low, pairs_high = _add_byte(pairs_low, pairs_high, first, pair)
            pairs_low, pairs_high = _add_byte(pairs_low, pairs_high, second, pair)
        elif count == 2:
            new_threes_low, new_threes_high = _add_byte(new_threes_low, new_threes_high, first, value)
        else:
            new_pairs_low, new_pairs_high = _add_byte(new_pairs_low, new_pairs_high, first, value)
            new_pairs_low, new_pairs_high = _add_byte(new_pairs_low, new_pairs_high, second, value)
    return (
        threes_low,
        threes_high,
        pairs_low,
        pairs_high,
        new_threes_low,
        new_threes_high,
        new_pairs_low,
        new_pairs_high,
    )


@jitable
def _threats_after(change, piece):  # type: ignore[no-untyped-def]
    """The threats (:func:`group_threats`) after ``piece`` is placed on the square of ``change``
    (:func:`_square_change`): a group through the square shares what it shared and the piece has too."""
    spread = repeated_byte(piece_values(piece))
    return (
        change[0] | (change[4] & spread),
        change[1] | (change[5] & spread),
        change[2] | (change[6] & spread),
        change[3] | (change[7] & spread),
    )


@jitable
def _with_byte(words, index, byte):  # type: ignore[no-untyped-def]
    """``words`` (three 64-bit words) with ``byte`` ORed in as byte ``index`` (0-23)."""
    shifted = byte << 8 * (index & 7)
    return (
        words[0] | (shifted if index < 8 else 0),
        words[1] | (shifted if 8 <= index < 16 else 0),
        words[2] | (shifted if index >= 16 else 0),
    )


@jitable
def _byte_of(words, index):  # type: ignore[no-untyped-def]
    """Byte ``index`` of three 64-bit words (:func:`_with_byte`)."""
    word = words[0] if index < 8 else words[1] if index < 16 else words[2]
    return (word >> 8 * (index & 7)) & 0xFF


@jitable
def _with_square_mask(words, square, mask):  # type: ignore[no-untyped-def]
    """``words`` (four 64-bit words, a 16-bit mask per square) with ``mask`` ORed into ``square``'s."""
    shifted = mask << 16 * (square & 3)
    quarter = square >> 2
    return (
        words[0] | (shifted if quarter == 0 else 0),
        words[1] | (shifted if quarter == 1 else 0),
        words[2] | (shifted if quarter == 2 else 0),
        words[3] | (shifted if quarter == 3 else 0),
    )


@jitable
def _square_mask(words, square):  # type: ignore[no-untyped-def]
    """``square``'s 16-bit mask in four 64-bit words (:func:`_with_square_mask`)."""
    quarter = square >> 2
    word = words[0] if quarter == 0 else words[1] if quarter == 1 else words[2] if quarter == 2 else words[3]
    return (word >> 16 * (square & 3)) & 0xFFFF
