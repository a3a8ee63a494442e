"""The batched game kernel against the rules core: transitions, masks and every observation plane.

The lookahead planes are checked against a brute-force reference written with the Python rules core
(``step`` and ``losing_gives``), and on a scripted position with a known answer; every plane against the kernels
they replaced (the tempo planes: the one that made every placement and worked its give planes out in full).
"""

from __future__ import annotations

import itertools

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarto_env.core import (
    ALL_SQUARES,
    NO_PIECE,
    NUM_ATTRIBUTES,
    NUM_SQUARES,
    IllegalActionError,
    State,
    Variant,
    compiled_fields,
    legal_action_mask,
    legal_actions,
    losing_gives,
    place_lanes,
    popcount,
    step,
    winning_groups_through,
    winning_pieces,
    winning_squares,
)
from quarto_env.notation import parse_position
from quarto_env.observation import (
    ALLOWS_EVEN,
    ALLOWS_TRAP,
    AVAILABLE,
    CLAIMABLE,
    EVEN_GIVE,
    FIRST_ONE_ATTRIBUTE,
    FIRST_PIECE_ATTRIBUTE,
    FIRST_ZERO_ATTRIBUTE,
    IN_HAND,
    OCCUPIED,
    ODD_SAFE,
    PIECE_LOSES,
    PIECES_WITH_VALUES,
    PLACING,
    SELF_TRAP,
    SETS_EVEN,
    SETS_TRAP,
    SQUARE_WINS,
    TRAP_GIVE,
    encode_observation,
    group_threats,
    nonzero_bytes,
    observation_kind,
    observe,
    piece_values,
    repeated_byte,
    squares_with,
    values_at_squares,
)
from quarto_env.vector import GameBatch

VARIANTS = [
    Variant.make(),
    Variant.make(squares=True),
    Variant.make(attributes=1),
    Variant.make(attributes=["colour", "top"], squares=True),
    Variant.make(declaration=True),
    Variant.make(declaration=True, false_declaration="penalty"),
]
variants = st.sampled_from(VARIANTS)


def random_game(variant: Variant, seed: int) -> list[State]:
    """The positions of one random game, from the opening to the end."""
    rng = np.random.default_rng(seed)
    states = [State()]
    while not states[-1].over:
        actions = legal_actions(variant, states[-1])
        states.append(step(variant, states[-1], actions[rng.integers(len(actions))]))
    return states


def reference_lookahead(variant: Variant, state: State) -> tuple[list[int], list[int], list[int], list[int]]:
    """Self-trap squares, trapping gives, odd-safe-count squares and even-everywhere gives, by brute force over
    ``core.step`` and ``core.losing_gives``."""
    self_traps, trap_gives, odd_squares, even_gives = [], [], [], []
    empty = [s for s in range(NUM_SQUARES) if not state.occupied >> s & 1]

    def safe_count(position: State) -> int:
        return bin(position.available & ~losing_gives(variant, position)).count("1")

    if state.placing:
        for square in empty:
            after = step(variant, state, square)
            if after.winner == state.to_move or after.claimable or not after.available:
                continue
            if safe_count(after) == 0:
                self_traps.append(square)
            if safe_count(after) % 2:
                odd_squares.append(square)
        return self_traps, trap_gives, odd_squares, even_gives
    for piece in range(NUM_SQUARES):
        if not state.available >> piece & 1 or losing_gives(variant, state) >> piece & 1:
            continue
        given_state = step(variant, state, piece)
        if not given_state.available:
            continue
        trap = even = True
        for square in empty:
            count = safe_count(step(variant, given_state, square))
            trap, even = trap and count == 0, even and count % 2 == 0
            if not even:  # an odd count: neither (a trap's counts are all 0, so even too)
                break
        trap_gives += [piece] if trap else []
        even_gives += [piece] if even else []
    return self_traps, trap_gives, odd_squares, even_gives


def reference_tempo(variant: Variant, state: State) -> tuple[list[int], list[int], list[int], list[int]]:
    """The tempo planes (sets_trap, sets_even, allows_trap, allows_even) by brute force: ``reference_lookahead``
    of the position after each quiet placement, by the placer, or by the receiver of each safe give."""
    empty = [s for s in range(NUM_SQUARES) if not state.occupied >> s & 1]

    def quiet_placements(position: State) -> list[tuple[int, State]]:
        after = [(square, step(variant, position, square)) for square in empty]
        return [(s, a) for s, a in after if a.winner != position.to_move and not a.claimable and a.available]

    sets_trap, sets_even, allows_trap, allows_even = [], [], [], []
    if state.placing:
        for square, after in quiet_placements(state):
            _, trap_gives, _, even_gives = reference_lookahead(variant, after)
            sets_trap += [square] if trap_gives else []
            sets_even += [square] if even_gives else []
        return sets_trap, sets_even, allows_trap, allows_even
    for piece in range(NUM_SQUARES):
        if not state.available >> piece & 1 or losing_gives(variant, state) >> piece & 1:
            continue
        trap = even = False
        for _, after in quiet_placements(step(variant, state, piece)):
            _, trap_gives, _, even_gives = reference_lookahead(variant, after)
            trap, even = trap or bool(trap_gives), even or bool(even_gives)
            if trap and even:  # the rest cannot change the answer
                break
        allows_trap += [piece] if trap else []
        allows_even += [piece] if even else []
    return sets_trap, sets_even, allows_trap, allows_even


@settings(max_examples=40, deadline=None)
@given(variants, st.integers(0, 2**31))
def test_batched_games_follow_core_step(variant: Variant, seed: int) -> None:
    states = random_game(variant, seed)
    batch = GameBatch(variant, 3)
    game = np.array([1])
    for before, after in itertools.pairwise(states):
        assert batch.state(1) == before
        mask = batch.action_masks(game)[0]
        assert [a for a in range(variant.num_actions) if mask[a]] == legal_actions(variant, before)
        action = next(a for a in range(variant.num_actions + 1) if step_matches(variant, before, a, after))
        batch.step(game, np.array([action]))
    assert batch.state(1) == states[-1]
    assert batch.state(0) == State() and batch.state(2) == State()  # untouched games stay put
    assert not batch.action_masks(game).any()


def step_matches(variant: Variant, before: State, action: int, after: State) -> bool:
    return bool(legal_action_mask(variant, before) >> action & 1) and step(variant, before, action) == after


@settings(max_examples=30, deadline=None)
@given(variants, st.integers(0, 2**31))
def test_observation_planes_match_the_env_and_the_reference(variant: Variant, seed: int) -> None:
    states = [s for s in random_game(variant, seed) if not s.over]
    batch = GameBatch.from_states(variant, states)
    planes = batch.observe(batch.all_games, observation_kind("parity"))
    assert planes.shape == (len(states), observation_kind("parity").num_channels, NUM_SQUARES)
    np.testing.assert_array_equal(
        planes[:, : observation_kind("lookahead").num_channels],
        batch.observe(batch.all_games, observation_kind("lookahead")),
    )
    for i, state in enumerate(states):
        np.testing.assert_array_equal(planes[i, :19], observe(variant, state, "tactical"))
        np.testing.assert_array_equal(
            batch.observe(np.array([i]), observation_kind("raw"))[0], observe(variant, state, "raw")
        )
        self_traps, trap_gives, odd_squares, even_gives = reference_lookahead(variant, state)
        assert np.flatnonzero(planes[i, SELF_TRAP]).tolist() == self_traps
        assert np.flatnonzero(planes[i, TRAP_GIVE]).tolist() == trap_gives
        assert np.flatnonzero(planes[i, ODD_SAFE]).tolist() == odd_squares
        assert np.flatnonzero(planes[i, EVEN_GIVE]).tolist() == even_gives


@settings(max_examples=10, deadline=None)
@given(variants, st.integers(0, 2**31))
def test_tempo_planes_match_the_reference(variant: Variant, seed: int) -> None:
    states = [s for s in random_game(variant, seed) if not s.over]
    batch = GameBatch.from_states(variant, states)
    planes = batch.observe(batch.all_games, observation_kind("tempo"))
    tempo = [SETS_TRAP, SETS_EVEN, ALLOWS_TRAP, ALLOWS_EVEN]
    for i, state in enumerate(states):
        np.testing.assert_array_equal(planes[i, : EVEN_GIVE + 1], observe(variant, state, "parity"))
        expected = reference_tempo(variant, state)
        assert [np.flatnonzero(planes[i, c]).tolist() for c in tempo] == list(expected)


def test_self_trap_plane_on_a_scripted_position() -> None:
    # Height alone counts. Row 0 holds three tall pieces, row 1 three short ones: with both rows open, every
    # piece wins somewhere. Placing the short piece 6 on square 7 wins (row 1); on square 3 it blocks row 0,
    # leaving tall pieces safe to give; anywhere else both rows stay open: the placer must hand over a win.
    variant = Variant.make(attributes=["height"])
    state = parse_position("135.024......... 6", variant)
    planes = observe(variant, state, "lookahead")
    expected = [s for s in range(NUM_SQUARES) if not state.occupied >> s & 1 and s not in (3, 7)]
    assert np.flatnonzero(planes[SELF_TRAP]).tolist() == expected
    assert np.flatnonzero(planes[17]).tolist() == [7]  # the tactical plane: the win
    # On square 3 the tall pieces left (7, 9, b, d, f) stay safe to give: five, an odd count.
    assert np.flatnonzero(observe(variant, state, "parity")[ODD_SAFE]).tolist() == [3]


def test_trap_give_plane_on_a_scripted_position() -> None:
    # Height alone counts (odd pieces are tall). Board, T tall, S short:
    #     .  T  .  T        rows 1 and 3 hold three short pieces and one empty square (5 and 13),
    #     S  .  S  S        so the short pieces left (0, a) lose at once;
    #     T  T  .  .        no group holds three tall pieces, so the tall ones left (1, 3, 5, b) are safe,
    #     S  .  S  S        but wherever a tall piece goes (0, 2, 5, 10, 11, 13) it makes a third tall one
    # in row 0, column 1 or row 2: the receiver must then hand over a win. Every safe give is a trap.
    variant = Variant.make(attributes=["height"])
    state = parse_position(".f.76.48d9..e.c2 -", variant)
    planes = observe(variant, state, "lookahead")
    assert np.flatnonzero(planes[18]).tolist() == [0, 10]  # the tactical plane: gives that lose at once
    assert np.flatnonzero(planes[TRAP_GIVE]).tolist() == [1, 3, 5, 11]
    assert reference_lookahead(variant, state)[:2] == ([], [1, 3, 5, 11])
    # The receiver of a tall piece is left no safe piece at all: zero is even, so the parity plane agrees.
    assert np.flatnonzero(observe(variant, state, "parity")[EVEN_GIVE]).tolist() == [1, 3, 5, 11]


def test_tempo_planes_on_the_trap_position_one_turn_earlier() -> None:
    # The position of the trap test above with its piece d (tall) back off square 8. Placing d there leaves the
    # placer the trap gives 1, 3, 5 and b; given d instead, the receiver can do the same.
    variant = Variant.make(attributes=["height"])
    placing = parse_position(".f.76.48.9..e.c2 d", variant)
    sets_trap = np.flatnonzero(observe(variant, placing, "tempo")[SETS_TRAP]).tolist()
    assert 8 in sets_trap
    giving = parse_position(".f.76.48.9..e.c2 -", variant)
    planes = observe(variant, giving, "tempo")
    assert 13 in np.flatnonzero(planes[ALLOWS_TRAP])
    assert not planes[ALLOWS_TRAP, [0, 10]].any()  # short pieces lose at once: not safe, never a tempo give
    assert reference_tempo(variant, placing)[0] == sets_trap
    assert reference_tempo(variant, giving)[2] == np.flatnonzero(planes[ALLOWS_TRAP]).tolist()


def test_illegal_batched_action_names_the_game_and_the_legal_actions() -> None:
    batch = GameBatch(Variant.make(), 2)
    batch.step(np.array([0]), np.array([5]))  # game 0: piece 5 given
    with pytest.raises(IllegalActionError, match=r"game 1: action 16 is not legal; legal actions: \[0, 1"):
        batch.step(np.array([0, 1]), np.array([3, 16]))
    assert batch.state(0).hand == 5  # nothing applied


def test_masks_leave_out_false_declarations_when_asked() -> None:
    variant = Variant.make(declaration=True)
    batch = GameBatch(variant, 1)
    games = batch.all_games
    assert batch.action_masks(games)[0, 16]
    assert not batch.action_masks(games, false_declarations=False)[0, 16]


def test_set_state_round_trips_a_hollow_piece_on_square_15() -> None:
    # Lane bit 63 is set: the arrays hold it as a negative int64 and give it back unchanged.
    variant = Variant.make()
    state = parse_position("...............f 0", variant)
    assert state.lanes >> 63 & 1
    batch = GameBatch.from_states(variant, [state])
    assert batch.state(0) == state
    assert batch.action_masks(batch.all_games)[0].sum() == NUM_SQUARES - 1
    assert ALL_SQUARES & ~state.occupied == (1 << 15) - 1


# ---------------------------------------------------------------------------------------------------------
# The observation kernel against the one it replaced
# ---------------------------------------------------------------------------------------------------------
@numba.njit
def previous_kernel(out, level, lanes, occupied, available, hand, to_move, claimable, winner, over, groups, counted):  # type: ignore[no-untyped-def]
    """The observation kernel before table lookups (commit 342c4ec), which placed every piece to see: the
    reference that the faster one must match bit for bit."""
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
        if hand != NO_PIECE:
            wins = winning_squares(lanes, occupied, hand, groups, counted)
            for s in range(NUM_SQUARES):
                out[SQUARE_WINS, s] = wins >> s & 1
        else:
            losing = winning_pieces(lanes, occupied, groups, counted) & available
            for p in range(NUM_SQUARES):
                out[PIECE_LOSES, p] = losing >> p & 1
    if level >= 2:
        previous_lookahead(out, level >= 3, lanes, occupied, available, hand, groups, counted)


@numba.njit
def previous_lookahead(out, with_parity, lanes, occupied, available, hand, groups, counted):  # type: ignore[no-untyped-def]
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


ALL_VARIANTS = [
    Variant.make(attributes, squares, declaration, policy)
    for attributes in (None, "colour", 3, ["height", "top"])
    for squares in (False, True)
    for declaration, policy in ((False, "lose"), (True, "lose"), (True, "penalty"))
]


def random_positions(variant: Variant, seed: int, games: int) -> list[State]:
    """Every position of ``games`` random games, half of them never declaring without a claim (longer games)."""
    rng = np.random.default_rng(seed)
    positions = []
    for game in range(games):
        state = State()
        while not state.over:
            positions.append(state)
            actions = legal_actions(variant, state)
            if game % 2:
                actions = [a for a in actions if a != 16 or state.claimable] or actions
            state = step(variant, state, actions[rng.integers(len(actions))])
    return positions


@pytest.mark.parametrize("variant", ALL_VARIANTS, ids=Variant.describe)
def test_the_planes_are_those_of_the_previous_kernel(variant: Variant) -> None:
    kind = observation_kind("parity")
    for state in random_positions(variant, seed=variant.counted, games=40):
        planes, expected = np.zeros(kind.shape, dtype=np.int8), np.zeros(kind.shape, dtype=np.int8)
        for level in range(kind.level + 1):
            planes[:], expected[:] = 0, 0
            encode_observation(planes, level, *compiled_fields(state), variant.group_array, variant.counted)
            previous_kernel(expected, level, *compiled_fields(state), variant.group_array, variant.counted)
            np.testing.assert_array_equal(planes, expected, err_msg=f"{variant.describe()} {state} level {level}")


@numba.njit
def previous_tempo(lanes, occupied, available, hand, groups, counted):  # type: ignore[no-untyped-def]
    """The tempo planes as the kernel wrote them before issue 52, as masks ``(trap plane, even plane)``: every
    placement made, its threats recomputed and its give planes worked out square by square. The reference that
    the screened kernel must match bit for bit."""
    threats = group_threats(lanes, occupied, groups, counted, True)
    empty = ALL_SQUARES & ~occupied
    if hand != NO_PIECE:
        squares = 0
        if available:
            squares = empty & ~squares_with(threats[0], threats[1], piece_values(hand))
        return previous_settable(lanes, occupied, available, hand, squares, groups, counted, False)
    trap_plane = even_plane = 0
    safe = available & ~PIECES_WITH_VALUES[values_at_squares(threats[0], threats[1])[0]]
    for p in range(NUM_SQUARES):
        left = available & ~(1 << p)
        if safe >> p & 1:
            squares = empty if left else 0
            sets_trap, sets_even = previous_settable(lanes, occupied, left, p, squares, groups, counted, True)
            trap_plane |= (sets_trap != 0) << p
            even_plane |= (sets_even != 0) << p
    return trap_plane, even_plane


@numba.njit
def previous_settable(lanes, occupied, available, piece, squares, groups, counted, any_square):  # type: ignore[no-untyped-def]
    sets_trap = sets_even = 0
    for s in range(NUM_SQUARES):
        if squares >> s & 1 and not (any_square and sets_trap and sets_even):
            after = 1 << s | occupied
            threats = group_threats(place_lanes(lanes, piece, s), after, groups, counted, True)
            trap_give, even_give = previous_give_planes(threats, after, available)
            sets_trap |= (trap_give != 0) << s
            sets_even |= (even_give != 0) << s
    return sets_trap, sets_even


@numba.njit
def previous_give_planes(threats, occupied, available):  # type: ignore[no-untyped-def]
    """Trap and even gives, each safe piece placed on each empty square in turn."""
    if popcount(available) < 2:
        return 0, 0
    threes_low, threes_high, pairs_low, pairs_high = threats
    once, twice = values_at_squares(threes_low, threes_high)
    trap_give = even_give = available & ~PIECES_WITH_VALUES[once]
    for s in range(NUM_SQUARES):
        if not occupied >> s & 1:
            threes = (threes_low if s < 8 else threes_high) >> 8 * (s & 7) & 0xFF
            pairs = (pairs_low if s < 8 else pairs_high) >> 8 * (s & 7) & 0xFF
            safe_here = available & ~PIECES_WITH_VALUES[twice | (once & ~threes)]
            for p in range(NUM_SQUARES):
                if (trap_give | even_give) >> p & 1:
                    safe_after = safe_here & ~(1 << p) & ~PIECES_WITH_VALUES[pairs & piece_values(p)]
                    if safe_after:
                        trap_give &= ~(1 << p)
                    if popcount(safe_after) & 1:
                        even_give &= ~(1 << p)
    return trap_give, even_give


@pytest.mark.parametrize("variant", ALL_VARIANTS, ids=Variant.describe)
def test_the_tempo_planes_are_those_of_the_previous_kernel(variant: Variant) -> None:
    kind = observation_kind("tempo")
    for state in random_positions(variant, seed=variant.counted + 1, games=12):
        fields = compiled_fields(state)
        planes = np.zeros(kind.shape, dtype=np.int8)
        encode_observation(planes, kind.level, *fields, variant.group_array, variant.counted)
        trap_plane, even_plane = (SETS_TRAP, SETS_EVEN) if state.placing else (ALLOWS_TRAP, ALLOWS_EVEN)
        written = (
            int(planes[trap_plane] @ (1 << np.arange(NUM_SQUARES))),
            int(planes[even_plane] @ (1 << np.arange(NUM_SQUARES))),
        )
        expected = previous_tempo(*fields[:4], variant.group_array, variant.counted)
        assert written == expected, f"{variant.describe()} {state}"
        other = (ALLOWS_TRAP, ALLOWS_EVEN) if state.placing else (SETS_TRAP, SETS_EVEN)
        assert not planes[list(other)].any()


words = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(words, words, st.integers(0, 255))
def test_the_byte_helpers_against_plain_loops(low: int, high: int, values: int) -> None:
    # Compiled, as the kernel runs them: numba's signed integers may not overflow, so they multiply nothing.
    byte_of = [(low >> 8 * s if s < 8 else high >> 8 * (s - 8)) & 0xFF for s in range(NUM_SQUARES)]
    assert compiled_repeated_byte(values) == int.from_bytes(bytes([values] * 8), "little", signed=True)
    assert compiled_nonzero_bytes(low) == sum(1 << s for s in range(8) if byte_of[s])
    assert compiled_squares_with(low, high, values) == sum(1 << s for s in range(16) if byte_of[s] & values)
    once = twice = 0
    for byte in byte_of:
        twice |= once & byte
        once |= byte
    assert compiled_values_at_squares(low, high) == (once, twice)


compiled_repeated_byte = numba.njit(lambda byte: repeated_byte(byte))
compiled_nonzero_bytes = numba.njit(lambda word: nonzero_bytes(word))
compiled_squares_with = numba.njit(lambda low, high, values: squares_with(low, high, values))
compiled_values_at_squares = numba.njit(lambda low, high: values_at_squares(low, high))
