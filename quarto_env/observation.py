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
    :mod:`agents.search`).

Every derived plane is computed by the rules core (:mod:`quarto_env.core`), for every variant. An agent could
compute them itself, but learns far faster when they are given (see ``docs/``'s comparison of kinds).
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np

from quarto_env.core import (
    ALL_SQUARES,
    NO_PIECE,
    NUM_ATTRIBUTES,
    NUM_SQUARES,
    State,
    Variant,
    compiled_fields,
    place_lanes,
    popcount,
    winning_groups_through,
    winning_pieces,
    winning_squares,
)

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
    )
}
"""Every observation kind by name, from the least to the most derived."""


def observation_kind(name: str) -> ObservationKind:
    """The kind called ``name``; ``ValueError`` naming the allowed kinds if there is none."""
    kind = OBSERVATION_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"unknown observation kind {name!r}; allowed: {', '.join(OBSERVATION_KINDS)}")
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


def observe(variant: Variant, state: State, kind: str = "tactical") -> np.ndarray:
    """The observation planes of ``state`` as a new ``int8`` array of shape ``(channels, 16)``."""
    found = observation_kind(kind)
    out = np.zeros(found.shape, dtype=np.int8)
    encode_observation(out, found.level, *compiled_fields(state), variant.groups, variant.counted)
    return out


# ---------------------------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------------------------
@numba.njit(cache=True)
def encode_observation(out, level, lanes, occupied, available, hand, to_move, claimable, winner, over, groups, counted):  # type: ignore[no-untyped-def]
    """Write the planes of one position into ``out`` (``(channels, 16)``, zeroed by the caller): those of every
    kind up to ``level`` (:attr:`ObservationKind.level`). The position comes as the fields of a
    :class:`~quarto_env.core.State` (:func:`~quarto_env.core.compiled_fields`)."""
    for s in range(NUM_SQUARES):
        if occupied >> s & 1:
            out[OCCUPIED, s] = 1
            for k in range(NUM_ATTRIBUTES):
                bit = (lanes >> (16 * k + s)) & 1
                out[FIRST_ONE_ATTRIBUTE + k, s] = bit
                out[FIRST_ZERO_ATTRIBUTE + k, s] = 1 - bit
    for i in range(len(groups)):
        if claimable >> i & 1:
            for s in range(NUM_SQUARES):
                if groups[i] >> s & 1:
                    out[CLAIMABLE, s] = 1
    for p in range(NUM_SQUARES):
        out[AVAILABLE, p] = available >> p & 1
        for k in range(NUM_ATTRIBUTES):
            out[FIRST_PIECE_ATTRIBUTE + k, p] = p >> k & 1
    if hand != NO_PIECE:
        out[IN_HAND, hand] = 1
        out[PLACING, :] = 1
    if level >= 1:
        _write_tactical(out, lanes, occupied, available, hand, groups, counted)
    if level >= 2:
        _write_lookahead(out, level >= 3, lanes, occupied, available, hand, groups, counted)


@numba.njit(cache=True)
def _write_tactical(out, lanes, occupied, available, hand, groups, counted):  # type: ignore[no-untyped-def]
    if hand != NO_PIECE:
        wins = winning_squares(lanes, occupied, hand, groups, counted)
        for s in range(NUM_SQUARES):
            out[SQUARE_WINS, s] = wins >> s & 1
    else:
        losing = winning_pieces(lanes, occupied, groups, counted) & available
        for p in range(NUM_SQUARES):
            out[PIECE_LOSES, p] = losing >> p & 1


@numba.njit(cache=True)
def _write_lookahead(out, with_parity, lanes, occupied, available, hand, groups, counted):  # type: ignore[no-untyped-def]
    empty = ALL_SQUARES & ~occupied
    if hand != NO_PIECE:
        for s in range(NUM_SQUARES):
            if empty >> s & 1 and available:
                after = place_lanes(lanes, hand, s)
                filled = occupied | 1 << s
                if not winning_groups_through(after, filled, s, groups, counted):
                    safe_after = available & ~winning_pieces(after, filled, groups, counted)
                    out[SELF_TRAP, s] = safe_after == 0
                    if with_parity:
                        out[ODD_SAFE, s] = popcount(safe_after) & 1
        return
    safe = available & ~winning_pieces(lanes, occupied, groups, counted)
    for p in range(NUM_SQUARES):
        left = available & ~(1 << p)
        if not (safe >> p & 1) or left == 0:
            continue
        trapped = True
        even_everywhere = True
        for s in range(NUM_SQUARES):
            if empty >> s & 1:
                filled = occupied | 1 << s
                safe_after = left & ~winning_pieces(place_lanes(lanes, p, s), filled, groups, counted)
                if safe_after:
                    trapped = False
                    even_everywhere = even_everywhere and popcount(safe_after) % 2 == 0
                if not trapped and not (with_parity and even_everywhere):
                    break
        out[TRAP_GIVE, p] = trapped
        if with_parity:
            out[EVEN_GIVE, p] = even_everywhere
