"""The rules core against an independent, deliberately naive reference, plus scripted positions from the rule
sheets (``docs/rules.md``) with known answers.

The reference below shares no code with :mod:`quarto_env.core`: plain lists of pieces, the groups written
out by hand, the win test exactly as docs/rules.md states it, and the declaration rules as the sheets word them
(a window that opens with a placement and closes with the next one; groups not claimed in it are dead).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarto_env.core import (
    DECLARE,
    INITIAL_STATE,
    NO_PIECE,
    NO_WINNER,
    NUM_FIELDS,
    POSITION_PROBLEMS,
    STANDARD,
    IllegalActionError,
    RulesError,
    State,
    Variant,
    bits,
    compiled_fields,
    count_bits,
    from_board,
    has_winning_group,
    legal_action_mask,
    legal_actions,
    losing_gives,
    lowest_bit,
    popcount,
    position_array,
    position_problem,
    position_problems,
    safe_gives,
    set_bit_number,
    signed_lanes,
    step,
    useful_action_mask,
    winning_squares_for,
)
from quarto_env.fast import random_games
from quarto_env.notation import parse_position

# ---------------------------------------------------------------------------------------------------------
# The naive reference
# ---------------------------------------------------------------------------------------------------------
ROWS = [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15)]
COLUMNS = [(0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)]
DIAGONALS = [(0, 5, 10, 15), (3, 6, 9, 12)]
BLOCKS = [
    (0, 1, 4, 5),
    (1, 2, 5, 6),
    (2, 3, 6, 7),
    (4, 5, 8, 9),
    (5, 6, 9, 10),
    (6, 7, 10, 11),
    (8, 9, 12, 13),
    (9, 10, 13, 14),
    (10, 11, 14, 15),
]
ATTRIBUTE_BIT = {"height": 1, "colour": 2, "shape": 4, "top": 8}


class Reference:
    """Quarto as the sheets tell it, one list element per square."""

    def __init__(self, attributes: tuple[str, ...], squares: bool, declaration: bool, false_declaration: str):
        self.groups = ROWS + COLUMNS + DIAGONALS + (BLOCKS if squares else [])
        self.counted = sum(ATTRIBUTE_BIT[a] for a in attributes)
        self.declaration = declaration
        self.false_declaration = false_declaration
        self.board: list[int | None] = [None] * 16
        self.hand: int | None = None
        self.off_board = list(range(16))  # the pieces that can still be given
        self.to_move = 0
        self.window: list[tuple[int, ...]] = []  # groups completed by the last placement, claimable
        self.dead: list[tuple[int, ...]] = []  # groups completed earlier and never claimed
        self.winner: int | None = None
        self.over = False

    def wins(self, group: tuple[int, ...]) -> bool:
        pieces = [self.board[s] for s in group]
        if any(p is None for p in pieces):
            return False
        a, b, c, d = pieces  # type: ignore[misc]
        return ((a & b & c & d) | (~a & ~b & ~c & ~d)) & self.counted != 0

    def legal(self) -> list[int]:
        if self.over:
            return []
        empty_squares = [s for s in range(16) if self.board[s] is None]
        moves = empty_squares if self.hand is not None else sorted(self.off_board)
        return moves + ([16] if self.declaration else [])

    def play(self, action: int) -> None:
        assert action in self.legal()
        if action == 16:
            if self.window:  # a claim: the game ends, nothing is left to claim
                self.winner, self.over, self.window = self.to_move, True, []
            elif self.false_declaration == "lose":
                self.winner, self.over = 1 - self.to_move, True
        elif self.hand is None:
            self.off_board.remove(action)
            self.hand = action
            self.to_move = 1 - self.to_move
        else:
            self.board[action] = self.hand
            self.hand = None
            completed = [g for g in self.groups if action in g and self.wins(g)]
            full = all(p is not None for p in self.board)
            if self.declaration:
                self.dead += self.window
                self.window = completed
                if full and not completed:
                    self.over = True
            elif completed:
                self.winner, self.over = self.to_move, True
            elif full:
                self.over = True


def mask_of(group: tuple[int, ...]) -> int:
    return sum(1 << s for s in group)


def assert_same(variant: Variant, state: State, ref: Reference) -> None:
    """Every observable fact of the core's state equals the reference's."""
    assert state.board == tuple(NO_PIECE if p is None else p for p in ref.board)
    assert state.hand == (NO_PIECE if ref.hand is None else ref.hand)
    assert state.available == sum(1 << p for p in ref.off_board)
    assert state.to_move == ref.to_move
    assert state.over == ref.over
    assert state.winner == (NO_WINNER if ref.winner is None else ref.winner)
    assert legal_actions(variant, state) == ref.legal()
    claimable = {variant.groups[i] for i in range(len(variant.groups)) if state.claimable >> i & 1}
    assert claimable == {mask_of(g) for g in ref.window}
    if variant.declaration and not state.over:
        # Every winning group on the board is either claimable now or dead.
        on_board = {mask_of(g) for g in ref.groups if ref.wins(g)}
        assert on_board == {mask_of(g) for g in ref.window + ref.dead}


ATTRIBUTE_CHOICES = [("height", "colour", "shape", "top"), ("colour",), ("height", "colour", "shape"), ("top",)]
VARIANTS = [
    Variant.make(attributes, squares, declaration, policy)
    for attributes in ATTRIBUTE_CHOICES
    for squares in (False, True)
    for declaration, policy in ((False, "lose"), (True, "lose"), (True, "penalty"))
]


def random_action(variant: Variant, state: State, rng: np.random.Generator) -> int:
    """Uniform over the placements or gives; in the declaration variant, a declaration one time in five (often
    enough to hit true, missed and false declarations) or when nothing else is legal."""
    moves = [a for a in legal_actions(variant, state) if a != DECLARE]
    if variant.declaration and (not moves or rng.random() < 0.2):
        return DECLARE
    return int(rng.choice(moves))


def play_random_game(variant: Variant, rng: np.random.Generator) -> int:
    """A random game through the core and the reference side by side; returns its length."""
    state = INITIAL_STATE
    ref = Reference(variant.attributes, variant.squares, variant.declaration, variant.false_declaration)
    length = 0
    while not state.over:
        action = random_action(variant, state, rng)
        state = step(variant, state, action)
        ref.play(action)
        assert_same(variant, state, ref)
        length += 1
    return length


@pytest.mark.parametrize("variant", VARIANTS, ids=Variant.describe)
def test_random_games_match_the_reference(variant: Variant) -> None:
    rng = np.random.default_rng(2024)
    lengths = [play_random_game(variant, rng) for _ in range(60)]
    assert max(lengths) >= 9  # the games went somewhere


def test_random_games_end_in_every_way() -> None:
    """The random games above do reach wins, draws and (in the declaration variant) both kinds of declaration
    -- otherwise the comparison would prove little."""
    rng = np.random.default_rng(7)
    outcomes: set[str] = set()
    for variant in (Variant(), Variant.make(declaration=True)):
        for _ in range(300):
            state = INITIAL_STATE
            while not state.over:
                action = random_action(variant, state, rng)
                true_claim = action == DECLARE and state.claimable != 0
                state = step(variant, state, action)
            if state.winner == NO_WINNER:
                outcomes.add("draw")
            elif action == DECLARE:
                outcomes.add("true declaration" if true_claim else "false declaration")
            else:
                outcomes.add("win")
    assert outcomes == {"draw", "win", "true declaration", "false declaration"}


variants = st.builds(
    Variant.make,
    attributes=st.sampled_from([None, 1, 2, 3, 4, "colour", "top", ["shape", "height"]]),
    squares=st.booleans(),
    declaration=st.just(True),
    false_declaration=st.sampled_from(["lose", "penalty"]),
) | st.builds(
    Variant.make,
    attributes=st.sampled_from([None, 1, 2, 3, 4, "colour", "top", ["shape", "height"]]),
    squares=st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(variant=variants, data=st.data())
def test_any_game_matches_the_reference(variant: Variant, data: st.DataObject) -> None:
    state = INITIAL_STATE
    ref = Reference(variant.attributes, variant.squares, variant.declaration, variant.false_declaration)
    for _ in range(50):
        if state.over:
            break
        action = data.draw(st.sampled_from(legal_actions(variant, state)))
        state = step(variant, state, action)
        ref.play(action)
        assert_same(variant, state, ref)


boards = st.permutations(range(16)).flatmap(
    lambda pieces: st.lists(st.booleans(), min_size=16, max_size=16).map(
        lambda filled: [p if f else NO_PIECE for p, f in zip(pieces, filled, strict=True)]
    )
)


@settings(max_examples=200, deadline=None)
@given(board=boards, variant=variants)
def test_winning_group_test_matches_the_reference(board: list[int], variant: Variant) -> None:
    ref = Reference(variant.attributes, variant.squares, False, "lose")
    ref.board = [None if p == NO_PIECE else p for p in board]
    assert has_winning_group(variant, from_board(board)) == any(ref.wins(g) for g in ref.groups)


@settings(max_examples=100, deadline=None)
@given(board=boards, flips=st.integers(0, 15))
def test_complementing_attributes_keeps_the_winning_groups(board: list[int], flips: int) -> None:
    """Relabelling pieces by complementing attributes is a symmetry of the game (docs/rules.md)."""
    flipped = [p if p == NO_PIECE else p ^ flips for p in board]
    assert has_winning_group(Variant(), from_board(board)) == has_winning_group(Variant(), from_board(flipped))


@settings(max_examples=100, deadline=None)
@given(board=boards, variant=variants, data=st.data())
def test_one_ply_helpers_match_trying_every_move(board: list[int], variant: Variant, data: st.DataObject) -> None:
    """``winning_squares_for`` and ``losing_gives`` say exactly which placements win at once."""
    variant = Variant.make(variant.attributes, variant.squares)  # a placement wins at once without declaration
    state = from_board(board)
    if has_winning_group(variant, state) or not state.available:
        return
    piece = data.draw(st.sampled_from([p for p in range(16) if state.available >> p & 1]))
    placing = state._replace(hand=piece, available=state.available & ~(1 << piece))
    wins = {s for s in range(16) if not state.occupied >> s & 1 and step(variant, placing, s).winner != NO_WINNER}
    assert winning_squares_for(variant, placing, piece) == sum(1 << s for s in wins)
    assert bool(losing_gives(variant, state) >> piece & 1) == bool(wins)


# ---------------------------------------------------------------------------------------------------------
# Scripted positions from the rule sheets
# ---------------------------------------------------------------------------------------------------------
DECLARATION = Variant.make(declaration=True)
PENALTY = Variant.make(declaration=True, false_declaration="penalty")


def play(variant: Variant, position: str, *actions: int) -> State:
    state = parse_position(position, variant)
    for action in actions:
        state = step(variant, state, action)
    return state


@pytest.mark.parametrize(
    ("name", "position", "square"),
    [
        # three tall pieces on row 1, tall piece 7 in hand
        ("row", "....135......... 7", 7),
        # three hollow pieces on column 0, hollow piece e in hand
        ("column", "8...a...c....... e", 12),
        # three short, solid pieces on the diagonal 0-5-10-15
        ("diagonal", "0....2....4..... 6", 15),
        # three tall, hollow pieces on the anti-diagonal 3-6-9-12
        ("anti-diagonal", "...9..b..d...... f", 12),
    ],
)
def test_completing_a_line_wins(name: str, position: str, square: int) -> None:
    before = parse_position(position)
    placer = before.to_move
    won = step(STANDARD, before, square)
    assert won.over and won.winner == placer, name
    assert won.returns() == ((1.0, -1.0) if placer == 0 else (-1.0, 1.0))
    elsewhere = next(s for s in range(16) if s != square and not before.occupied >> s & 1)
    assert not step(STANDARD, before, elsewhere).over


def test_the_placer_wins_whoever_placed_the_other_three() -> None:
    # Player 1 places the first piece; the completing placement below is player 0's.
    state = play(STANDARD, "................ -", 1, 0, 3, 1, 5, 2, 7)
    assert state.placing and state.to_move == 0
    won = step(STANDARD, state, 3)
    assert won.winner == 0


def test_a_2x2_block_wins_only_in_the_squares_variant() -> None:
    # Tall, dark pieces 3, 7, b on squares 5, 6, 9; piece f (tall, dark) completes the block 5-6-9-10.
    position = ".....37..b...... f"
    assert step(Variant.make(squares=True), parse_position(position), 10).winner != NO_WINNER
    assert not step(STANDARD, parse_position(position), 10).over


def test_a_line_sharing_only_height_wins_unless_only_colour_counts() -> None:
    # Pieces 1, 3, 5, 7 are all tall, but 1 and 5 are light while 3 and 7 are dark.
    position = "135............. 7"
    assert step(STANDARD, parse_position(position), 3).winner == 0
    assert step(Variant.make(attributes="height"), parse_position(position), 3).winner == 0
    colour_only = Variant.make(attributes="colour")
    after = step(colour_only, parse_position(position, colour_only), 3)
    assert not after.over and after.winner == NO_WINNER


def test_a_full_board_without_a_winning_group_is_a_draw() -> None:
    # No row, column, diagonal or 2x2 block of this board shares an attribute; piece 5 goes last.
    for variant in (STANDARD, Variant.make(squares=True)):
        before = parse_position("b7c94821fad6e03. 5", variant)
        assert legal_actions(variant, before) == [15]
        after = step(variant, before, 15)
        assert after.over and after.winner == NO_WINNER and after.returns() == (0.0, 0.0)
        assert legal_actions(variant, after) == []


def test_the_last_give_is_forced() -> None:
    state = parse_position("b7c94821fad6e03. -")
    assert state.available == 1 << 5 and legal_actions(STANDARD, state) == [5]


# Declaration: row 0 gets pieces 1, 3, 5 (all tall); player 0 places tall piece 7 on square 3 to complete it.
ROW_READY = "135............. 7"


def test_declaration_the_placer_declares_instead_of_giving() -> None:
    placed = play(DECLARATION, ROW_READY, 3)
    assert not placed.over and placed.claimable and DECLARE in legal_actions(DECLARATION, placed)
    declared = step(DECLARATION, placed, DECLARE)
    assert declared.over and declared.winner == 0


def test_declaration_the_opponent_claims_a_missed_quarto_before_placing() -> None:
    given = play(DECLARATION, ROW_READY, 3, 0)  # player 0 gives piece 0 instead of declaring
    assert given.to_move == 1 and given.placing and given.claimable
    claimed = step(DECLARATION, given, DECLARE)
    assert claimed.over and claimed.winner == 1


def test_declaration_a_group_missed_by_both_is_dead() -> None:
    # Player 1 places piece 0 on square 15 (completing nothing) without declaring, then gives piece 2.
    missed = play(DECLARATION, ROW_READY, 3, 0, 15, 2)
    assert has_winning_group(DECLARATION, missed)  # the row is still there ...
    assert missed.claimable == 0 and not missed.over  # ... but can no longer be claimed
    assert step(DECLARATION, missed, DECLARE).winner == 1  # player 0 declares it: a false declaration


@pytest.mark.parametrize("position", ["................ -", ROW_READY])
def test_declaration_a_false_declaration_loses_or_is_ignored(position: str) -> None:
    lost = play(DECLARATION, position, DECLARE)
    declarer = parse_position(position).to_move
    assert lost.over and lost.winner == 1 - declarer
    before = parse_position(position, PENALTY)
    assert step(PENALTY, before, DECLARE) == before


def test_declaration_the_last_placement_ends_the_game_unless_it_completed_a_group() -> None:
    drawn = play(DECLARATION, "b7c94821fad6e03. 5", 15)
    assert drawn.over and drawn.winner == NO_WINNER  # nothing completed: a draw at once
    completed = play(DECLARATION, "fe9342b51d6c80a. 7", 15)  # piece 7 completes a group on square 15
    assert not completed.over and completed.claimable
    assert legal_actions(DECLARATION, completed) == [DECLARE]  # nothing left to give: declare (and win)
    assert step(DECLARATION, completed, DECLARE).winner == completed.to_move


# ---------------------------------------------------------------------------------------------------------
# Errors and small facts
# ---------------------------------------------------------------------------------------------------------
def test_illegal_actions_raise_with_the_legal_alternatives() -> None:
    with pytest.raises(IllegalActionError, match="piece 3 cannot be given"):
        play(STANDARD, "................ -", 3, 0, 3)  # piece 3 was given, then placed on square 0
    with pytest.raises(IllegalActionError, match="square 0 is not empty"):
        play(STANDARD, "1............... 2", 0)
    with pytest.raises(IllegalActionError, match="declaration variant"):
        step(STANDARD, INITIAL_STATE, DECLARE)
    with pytest.raises(IllegalActionError, match="out of range"):
        step(STANDARD, INITIAL_STATE, 17)
    with pytest.raises(IllegalActionError, match="game is over"):
        play(STANDARD, "b7c94821fad6e03. 5", 15, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attributes": 0}, "1-4"),
        ({"attributes": "weight"}, "height, colour, shape, top"),
        ({"attributes": ["colour", "colour"]}, "twice"),
        ({"attributes": True}, "count 1-4"),
        ({"squares": "yes"}, "True or False"),
        ({"false_declaration": "forgive"}, "lose, penalty"),
    ],
)
def test_bad_variant_flags_name_the_allowed_values(kwargs: dict, message: str) -> None:
    with pytest.raises(RulesError, match=message):
        Variant.make(**kwargs)


def test_variant_attribute_forms() -> None:
    assert Variant.make(2).attributes == ("height", "colour")
    assert Variant.make("top,colour").attributes == ("colour", "top")
    assert Variant.make(["shape"]).counted == 0b0100
    assert Variant.make(squares=True).groups[-9:] == tuple(mask_of(b) for b in BLOCKS)
    assert set(Variant().groups) == {mask_of(g) for g in ROWS + COLUMNS + DIAGONALS}
    assert Variant.make(declaration=True).num_actions == 17 and Variant().num_actions == 16


def test_from_board_infers_who_moves() -> None:
    # Player 0 gives first, so player 1 places the first piece and gives the second one.
    assert from_board([NO_PIECE] * 16).to_move == 0
    assert from_board([NO_PIECE] * 16, hand=4).to_move == 1
    one = [3] + [NO_PIECE] * 15
    assert from_board(one).to_move == 1 and from_board(one, hand=4).to_move == 0


# ---------------------------------------------------------------------------------------------------------
# The compiled random games follow the core exactly
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", [Variant(), Variant.make("colour", squares=True), PENALTY], ids=Variant.describe)
def test_compiled_random_games_replay_through_core_step(variant: Variant) -> None:
    games = random_games(variant, 300, seed=5)
    total = 0
    for record, winner in zip(games.actions, games.winners, strict=True):
        state = INITIAL_STATE
        for action in itertools.takewhile(lambda a: a >= 0, record):
            state = step(variant, state, int(action))
            total += 1
        assert state.over and state.winner == winner
    assert total == games.num_actions
    assert {0, 1} <= set(games.winners.tolist()) <= {0, 1, NO_WINNER}


def test_compiled_random_games_are_reproducible() -> None:
    first, again = random_games(Variant(), 50, seed=9), random_games(Variant(), 50, seed=9)
    assert np.array_equal(first.actions, again.actions)
    assert not np.array_equal(first.actions, random_games(Variant(), 50, seed=10).actions)


HEAVY_LIBRARIES = ("gymnasium", "pettingzoo", "PIL", "matplotlib", "pygame", "torch", "stable_baselines3")


@pytest.mark.parametrize("module", ["quarto_env.core", "quarto_env.notation", "quarto_env.symmetry", "quarto_env"])
def test_the_ground_floor_loads_no_framework(module: str) -> None:
    # A fresh interpreter: in this one, other tests have long loaded everything.
    code = f"import sys, {module}; print(sorted(m for m in {HEAVY_LIBRARIES!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_importing_the_package_registers_both_envs_whatever_is_imported_first() -> None:
    code = (
        "import quarto_env, gymnasium, pettingzoo\n"
        "assert quarto_env.GYMNASIUM_ENV_ID in gymnasium.registry\n"
        "assert any(spec.name == 'quarto' for spec in pettingzoo.aec_registry.values())\n"
        "assert callable(quarto_env.env) and callable(quarto_env.raw_env)\n"
        "import quarto_env.env\n"
        "assert callable(quarto_env.env)\n"  # still the function, not the submodule of that name
    )
    for first in ("", "import gymnasium, pettingzoo\n"):
        subprocess.run([sys.executable, "-c", first + code], check=True)


def fresh_output(code: str) -> list[str]:
    """What a fresh interpreter running ``code`` prints, word by word."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def test_gymnasium_imports_the_package_itself_from_the_module_prefix() -> None:
    code = (
        "import sys, gymnasium\n"
        "env = gymnasium.make('quarto_env:quarto_env/QuartoVsAgent-v1', opponent='greedy', squares=True)\n"
        "envs = gymnasium.make_vec('quarto_env:quarto_env/QuartoVsAgent-v1', num_envs=2, opponent='greedy')\n"
        "_, info = env.reset(seed=0)\n"
        "print(type(env.unwrapped).__name__, env.unwrapped.raw.variant.squares, info['outcome'], envs.num_envs)\n"
    )
    assert fresh_output(code) == ["QuartoVsAgent", "True", "0", "2"]


def test_pettingzoo_makes_quarto_v1_from_an_env_spec_without_the_import() -> None:
    code = (
        "import sys, pettingzoo\n"
        "from pettingzoo.env_registry.exceptions import NameNotFound\n"
        "try:\n"
        "    pettingzoo.make('aec', 'quarto_v1')\n"
        "except NameNotFound:\n"
        "    print('unknown')\n"  # PettingZoo has no module prefix: its registry knows only what was imported
        "spec = pettingzoo.EnvSpec('quarto_v1', entry_point='quarto_env:env')\n"
        "env = pettingzoo.make('aec', spec, squares=True)\n"
        "print(env, env.unwrapped.variant.squares, pettingzoo.make('aec', 'quarto_v1'))\n"
    )
    assert fresh_output(code) == ["unknown", "quarto_v1", "True", "quarto_v1"]  # the import registered it


# ---------------------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------------------
@given(st.integers(0, 0xFFFF))
def test_bit_helpers_agree_with_python(mask: int) -> None:
    assert popcount(mask) == bin(mask).count("1") == len(bits(mask))
    assert lowest_bit(mask) == (bits(mask)[0] if mask else -1)


@settings(deadline=None)  # the first example compiles the kernel
@given(st.integers(-(2**63), 2**63 - 1))
def test_count_bits_counts_the_64_bits_of_an_int64_compiled_or_not(value: int) -> None:
    expected = bin(value % 2**64).count("1")  # a negative int64: its two's complement, bit 63 set
    assert count_bits(value) == count_bits(np.int64(value)) == expected
    assert _compiled_count_bits(np.int64(value)) == expected


@settings(deadline=None)  # the first example compiles the kernel
@given(st.integers(1, 2**64 - 1), st.data())
def test_set_bit_number_finds_the_numbered_set_bit_compiled_or_not(mask: int, data: st.DataObject) -> None:
    number = data.draw(st.integers(0, mask.bit_count() - 1))
    expected = bits(mask)[number]
    signed = mask - 2**64 if mask >= 2**63 else mask  # as an int64 holds it
    assert set_bit_number(mask, number) == set_bit_number(signed, number) == expected
    assert _compiled_set_bit_number_kernel()(np.int64(signed), number) == expected


@functools.cache
def _compiled_set_bit_number_kernel():  # type: ignore[no-untyped-def]
    import numba

    return numba.njit(lambda mask, number: set_bit_number(mask, number))


@functools.cache
def _compiled_count_bits_kernel():  # type: ignore[no-untyped-def]
    import numba

    return numba.njit(lambda mask: count_bits(mask))


def _compiled_count_bits(mask: np.int64) -> int:
    return int(_compiled_count_bits_kernel()(mask))


def test_useful_actions_leave_out_only_a_declaration_with_nothing_to_claim() -> None:
    variant = Variant.make(declaration=True)
    assert useful_action_mask(variant, INITIAL_STATE) == legal_action_mask(variant, INITIAL_STATE) & ~(1 << DECLARE)
    claimable = parse_position("0123............ -", variant)._replace(claimable=1)
    assert useful_action_mask(variant, claimable) == legal_action_mask(variant, claimable)
    assert useful_action_mask(STANDARD, INITIAL_STATE) == legal_action_mask(STANDARD, INITIAL_STATE)


def test_safe_gives_are_the_available_pieces_that_do_not_lose() -> None:
    # Height alone counts; rows 1 and 3 hold three short pieces, so the short pieces left (0, a) lose at once.
    variant = Variant.make(attributes=["height"])
    state = parse_position(".f.76.48d9..e.c2 -", variant)
    assert bits(state.available) == [0, 1, 3, 5, 10, 11]
    assert bits(safe_gives(variant, state)) == [1, 3, 5, 11]


def test_compiled_fields_keep_every_field_and_sign_the_lanes() -> None:
    state = parse_position("...............f 0", STANDARD)
    fields = compiled_fields(state)
    assert fields[1:] == tuple(state)[1:] and fields[0] == signed_lanes(state.lanes) < 0


@pytest.mark.parametrize("action", [3.7, "2", True, np.bool_(False), np.float64(1.0), None])
def test_step_takes_only_integer_actions(action: object) -> None:
    with pytest.raises(TypeError, match="must be a Python or numpy integer"):
        step(STANDARD, INITIAL_STATE, action)  # type: ignore[arg-type]
    assert step(STANDARD, INITIAL_STATE, np.int8(3)).hand == 3


def test_the_env_factory_survives_an_import_of_its_submodule_first() -> None:
    """The reason the package swaps its module class rather than using a module ``__getattr__`` (PEP 562): here the
    submodule is imported before anything asks for ``quarto_env.env``, and the import system binds it over the
    name; a ``__getattr__`` would never be asked again, and ``quarto_env.env()`` would call a module."""
    code = (
        "import sys, types\n"
        "from quarto_env.env import raw_env\n"  # binds the submodule on the package, before any use of the name
        "import quarto_env\n"
        "assert not isinstance(quarto_env.env, types.ModuleType), quarto_env.env\n"
        "assert quarto_env.env is sys.modules['quarto_env.env'].env and quarto_env.raw_env is raw_env\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_packages_env_factory_cannot_be_reassigned() -> None:
    import quarto_env

    module = importlib.import_module("quarto_env.env")  # the import system binds the submodule: ignored
    assert quarto_env.env is module.env
    with pytest.raises(AttributeError, match="cannot be reassigned"):
        quarto_env.env = lambda: None  # type: ignore[assignment]
    assert quarto_env.env is module.env


def test_an_env_factory_naming_the_package_pickles_for_another_process() -> None:
    """torchrl's ParallelEnv and spawned vector-env workers cloudpickle the factory, and with it the modules it
    names: the package, whose class is not exactly ModuleType, pickles as its name."""
    cloudpickle = pytest.importorskip("cloudpickle")
    import quarto_env

    factory = cloudpickle.dumps(lambda: quarto_env.env(squares=True))
    code = "import pickle, sys; env = pickle.loads(sys.stdin.buffer.read())(); env.reset(seed=0); print(env.variant)"
    done = subprocess.run([sys.executable, "-c", code], input=factory, capture_output=True, check=True)
    assert b"squares" in done.stdout.lower()


def reference_problem(variant: Variant, row: list[int]) -> str | None:
    """The problems of :func:`position_problem`, one row in plain Python: the referee of the numpy version."""
    lanes, occupied, available, hand, to_move, claimable, winner, over = row
    if over not in (0, 1) or winner not in (NO_WINNER, 0, 1) or (winner != NO_WINNER and not over):
        return "has no valid result fields (winner, over)"
    if over:
        return "is over"
    if not (0 <= occupied < 1 << 16 and 0 <= available < 1 << 16 and -1 <= hand < 16):
        return "has a field out of range (occupied, available or hand)"
    lanes &= (1 << 64) - 1
    if any(lanes >> (16 * k + square) & 1 and not occupied >> square & 1 for k in range(4) for square in range(16)):
        return "has attributes on an empty square"
    squares = [square for square in range(16) if occupied >> square & 1]
    on_board = [sum((lanes >> (16 * k + square) & 1) << k for k in range(4)) for square in squares]
    held = on_board + ([hand] if hand >= 0 else []) + [p for p in range(16) if available >> p & 1]
    if sorted(held) != list(range(16)):
        return "does not hold each of the 16 pieces once (on the board, in hand or left to give)"
    gives = 16 - bin(available).count("1")
    if gives - len(on_board) != (hand >= 0) or to_move != gives % 2:
        return "has a turn or a phase that its counts of gives and placements do not give"
    if claimable and not (variant.declaration and 0 < claimable < 1 << len(variant.groups)):
        return "has claimable groups that its rules or its groups do not allow"
    pieces = dict(zip(squares, on_board, strict=True))
    for group in variant.groups:
        members = [pieces.get(square) for square in range(16) if group >> square & 1]
        if variant.declaration or None in members:
            continue
        for k in range(4):
            if variant.counted >> k & 1 and len({piece >> k & 1 for piece in members}) == 1:
                return "has a finished group, which would have ended the game"
    return None


@pytest.mark.parametrize("variant", VARIANTS, ids=Variant.describe)
def test_position_problems_agree_with_a_plain_referee_on_damaged_rows(variant: Variant) -> None:
    """Positions of random games, their ends with the result fields cleared (finished groups), and every field
    damaged by a step, a flipped bit, a random 64-bit value or an edge value: the batch's codes and the one-row
    answer both say what the referee says."""
    rng = np.random.default_rng(1)
    rows = []
    for _ in range(12):
        state = INITIAL_STATE
        while not state.over:
            rows.append(list(compiled_fields(state)))
            state = step(variant, state, int(rng.choice(legal_actions(variant, state))))
        rows.append([*compiled_fields(state)[:6], NO_WINNER, 0])
    for base in list(rows) * 3:
        row, field = list(base), int(rng.integers(NUM_FIELDS))
        damage = int(rng.integers(4))
        bit = 1 << int(rng.integers(64 if field == 0 else 17))
        edge = int(rng.choice([0, -1, 1, 2, 15, 16, 0xFFFF, 0x10000]))
        row[field] = [row[field] + 1, row[field] ^ bit, int(rng.integers(-(2**63), 2**63)), edge][damage]
        row[0] = (row[0] + 2**63) % 2**64 - 2**63  # lanes stay a signed 64-bit word
        rows.append(row)
    codes = position_problems(variant, np.array(rows, dtype=np.int64))
    expected = [reference_problem(variant, row) for row in rows]
    assert [POSITION_PROBLEMS[code] for code in codes] == expected
    assert [position_problem(variant, row) for row in rows] == expected
    assert len(set(expected)) >= 7  # most problems are met, not only the first
    for shape in [(2, 4), (16,), (1, NUM_FIELDS + 1)]:  # rows of another shape are refused, not read as others
        with pytest.raises(ValueError, match=r"integer rows of quarto_env\.core\.position_array"):
            position_problems(variant, np.zeros(shape, dtype=np.int64))
    with pytest.raises(ValueError, match="a position row has 8 fields"):
        position_problem(variant, rows[0] + rows[1])


@pytest.mark.parametrize("variant", VARIANTS, ids=Variant.describe)
def test_position_problem_passes_every_position_a_game_reaches_and_only_those(variant: Variant) -> None:
    rng = np.random.default_rng(0)
    for _ in range(40):
        state = INITIAL_STATE
        while not state.over:
            assert position_problem(variant, position_array([state])[0]) is None, state
            state = step(variant, state, int(rng.choice(legal_actions(variant, state))))
        assert position_problem(variant, position_array([state])[0]) == "is over"
    mid_game = position_array([parse_position("01.2............ 5", variant)])[0]
    for field, value in [(1, 0b0111), (2, 0xFFFF), (3, 2), (4, 1), (6, 1)]:  # a square, a piece, hand, turn, winner
        broken = mid_game.copy()
        broken[field] = value
        assert position_problem(variant, broken) is not None, (field, value)
