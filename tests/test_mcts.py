"""MCTS: the compiled playout agrees with the rules core, and the search finds what a search must find."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.match import play_game
from agents.solver.labels import action_values
from agents.solver.positions import greedy_game_positions
from agents.specs import SpecError, make_agent
from agents.tree.choices import DEFAULT_UCT_SIMULATIONS
from agents.tree.uct import (
    ACTION,
    FIRST_CHILD,
    NEXT_SIBLING,
    PROVEN,
    TIMED_CHUNK,
    UNPROVEN,
    VISITS,
    UCTAgent,
    UCTTree,
    tactical_playout,
)
from quarto_env.core import (
    ALL_SQUARES,
    DECLARE,
    INITIAL_STATE,
    NO_PIECE,
    NO_WINNER,
    STANDARD,
    State,
    Variant,
    bits,
    compiled_fields,
    from_board,
    legal_actions,
    safe_gives,
    step,
    useful_action_mask,
    winning_squares_for,
)
from quarto_env.fast import RECORD_LENGTH, new_generator, playout_from, random_member

VARIANTS = [
    STANDARD,
    Variant.make(attributes=1),
    Variant.make(attributes="colour,top", squares=True),
    Variant.make(squares=True),
    Variant.make(declaration=True),
    Variant.make(declaration=True, false_declaration="penalty", squares=True),
]
variants = st.sampled_from(VARIANTS)


def random_position(variant: Variant, seed: int, plies: int) -> State:
    """The position after up to ``plies`` random actions (declarations only when something is claimable)."""
    rng = np.random.default_rng(seed)
    state = INITIAL_STATE
    for _ in range(plies):
        actions = [a for a in legal_actions(variant, state) if a != DECLARE]
        if state.over or not actions:
            break
        state = step(variant, state, actions[rng.integers(len(actions))])
    return state


def python_playout(variant: Variant, state: State, rng: np.random.Generator) -> int:
    """The compiled playout's policy through ``core.step``: declare exactly when something is claimable, else a
    uniformly random useful action. The winner, or ``NO_WINNER`` for a draw."""
    while not state.over:
        if state.claimable:
            action = DECLARE
        else:
            choices = bits(useful_action_mask(variant, state))
            action = choices[rng.integers(len(choices))]
        state = step(variant, state, action)
    return state.winner


def compiled_playout(variant: Variant, state: State, seed: int) -> tuple[int, list[int]]:
    """The winner of one compiled playout and the actions it recorded."""
    record = np.empty(RECORD_LENGTH, dtype=np.int64)
    winner, _ = playout_from(variant, state, record, seed)
    actions = [int(a) for a in record[: list(record).index(-1)]]
    return int(winner), actions


@settings(max_examples=150, deadline=None)
@given(variants, st.integers(0, 2**31 - 1), st.integers(0, 31))
def test_compiled_playout_replays_through_core_step(variant: Variant, seed: int, plies: int) -> None:
    state = random_position(variant, seed, plies)
    if state.over:
        return
    winner, actions = compiled_playout(variant, state, seed)
    for action in actions:
        assert action in legal_actions(variant, state)
        # The playout policy: declare exactly when something is claimable.
        assert (action == DECLARE) == bool(state.claimable)
        state = step(variant, state, action)
    assert state.over
    assert state.winner == winner


@pytest.mark.parametrize("variant", [STANDARD, Variant.make(declaration=True, squares=True)])
def test_compiled_and_python_playouts_have_the_same_outcome_frequencies(variant: Variant) -> None:
    state = random_position(variant, seed=3, plies=9)
    runs = 3000
    rng = np.random.default_rng(0)
    compiled = [compiled_playout(variant, state, seed)[0] for seed in range(runs)]
    python = [python_playout(variant, state, rng) for _ in range(runs)]
    for outcome in (0, 1, NO_WINNER):
        p, q = compiled.count(outcome) / runs, python.count(outcome) / runs
        spread = np.sqrt(((p + q) / 2) * (1 - (p + q) / 2) * 2 / runs)
        assert abs(p - q) < 4.5 * spread + 1e-9, (outcome, p, q)


# Squares 0, 1, 2 hold pieces 1, 3, 5: all tall and solid. Piece 7 (tall) completes row 0 on square 3.
ROW_OF_THREE = [1, 3, 5] + [NO_PIECE] * 13


def test_takes_an_immediate_win() -> None:
    state = from_board(ROW_OF_THREE, hand=7)
    assert UCTAgent(seed=0, sims=300).act(state) == 3


def test_never_hands_over_a_winning_piece_when_a_safe_one_exists() -> None:
    state = from_board(ROW_OF_THREE)  # giving: short hollow pieces 8, 10, 12, 14 are the only safe ones
    for seed in range(3):
        assert UCTAgent(seed=seed, sims=2000).act(state) in (8, 10, 12, 14)


@pytest.mark.parametrize("policy", ["lose", "penalty"])
def test_declaration_variant_declares_a_claim_and_never_declares_falsely(policy: str) -> None:
    variant = Variant.make(declaration=True, false_declaration=policy)
    placed = step(variant, from_board(ROW_OF_THREE, hand=7), 3)
    assert placed.claimable and not placed.over
    assert UCTAgent(variant, seed=0, sims=200).act(placed) == DECLARE
    agent = UCTAgent(variant, seed=1, sims=200)
    for seed in range(20):
        state = random_position(variant, seed, plies=seed % 20 + 2)
        if not state.over and not state.claimable:
            assert agent.act(state) != DECLARE


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.describe() for v in VARIANTS])
def test_plays_legal_games_in_every_variant(variant: Variant) -> None:
    record = play_game(variant, [UCTAgent(variant, seed=0, sims=60), make_agent("random", variant, seed=1)])
    assert record.end in ("win", "draw")


def test_same_seed_same_game_and_different_seed_different_search() -> None:
    def game(seed: int) -> list[int]:
        return play_game(STANDARD, [UCTAgent(seed=seed, sims=100), make_agent("greedy", seed=5)]).actions

    assert game(11) == game(11)
    assert any(game(11) != game(s) for s in (12, 13, 14))


def test_beats_random_play() -> None:
    score = 0.0
    for g in range(10):
        mcts, rand = UCTAgent(seed=g, sims=200), make_agent("random", seed=100 + g)
        seat = g % 2
        record = play_game(STANDARD, [mcts, rand] if seat == 0 else [rand, mcts])
        score += record.score(seat)
    assert score >= 8


def test_time_budget_and_spec() -> None:
    agent = make_agent("mcts:time=0.05", STANDARD, seed=0)
    assert isinstance(agent, UCTAgent) and agent.time == 0.05
    agent.act(INITIAL_STATE)
    assert agent.last_search is not None and agent.last_search.sims >= 1
    assert make_agent("mcts:sims=7,c=0.5", seed=0).sims == 7
    assert make_agent("mcts", seed=0).sims == DEFAULT_UCT_SIMULATIONS and agent.sims == DEFAULT_UCT_SIMULATIONS


@pytest.mark.parametrize("spec", ["mcts:sims=0", "mcts:time=-1", "mcts:depth=3", "mcts:c=0"])
def test_bad_specs_are_rejected(spec: str) -> None:
    with pytest.raises(SpecError):
        make_agent(spec)


def test_bad_constructor_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="sims must be >= 1"):
        UCTAgent(sims=0)
    with pytest.raises(ValueError, match="time must be >= 0"):
        UCTAgent(time=-1)


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.describe() for v in VARIANTS])
@pytest.mark.parametrize("tactics", [False, True], ids=["plain", "tactical-proving"])
def test_every_simulation_adds_one_visit_along_one_path(variant: Variant, tactics: bool) -> None:
    state = random_position(variant, seed=4, plies=7 + 12 * tactics)  # later with proofs: some nodes get proven
    tree = UCTTree(301)
    tree.start(state, variant, seed=0)
    tree.simulate(300, 1.0, tactics, tactics)
    links = tree.links[: tree.size]
    assert links[0, VISITS] == tree.sims and tree.size <= 301
    assert tree.sims == 300 or tree.solved
    for node in range(tree.size):
        children = _children(links, node)
        # A node's visits are its children's, plus the simulation that created it, plus, at a game's end (no
        # children) or at a proven node (where a selection stops), every later simulation that reached it.
        own = links[node, VISITS] - sum(links[child, VISITS] for child in children)
        if children and links[node, PROVEN] == UNPROVEN:
            assert own == (0 if node == 0 else 1)
        else:
            assert own >= (0 if node == 0 else 1)
        assert abs(tree.totals[node]) <= links[node, VISITS]


def test_a_timed_search_stops_once_its_root_is_proven() -> None:
    state = from_board(ROW_OF_THREE, hand=7)  # square 3 wins
    agent = UCTAgent(seed=0, time=30.0, prove=True)
    assert agent.act(state) == 3
    assert agent.last_search is not None and agent.last_search.sims < TIMED_CHUNK * 40


def legal_mask_count(variant: Variant, state: State) -> int:
    return len(legal_actions(variant, state))


def _children(links: np.ndarray, node: int) -> list[int]:
    children, child = [], int(links[node, FIRST_CHILD])
    while child >= 0:
        children.append(child)
        child = int(links[child, NEXT_SIBLING])
    return children


def test_a_time_budget_grows_the_tree_past_its_first_chunk() -> None:
    UCTAgent(seed=0, sims=16).act(INITIAL_STATE)  # the kernels compiled (or loaded) before the clock runs
    agent = UCTAgent(seed=0, time=0.2)
    agent.act(INITIAL_STATE)
    assert agent.last_search is not None and agent.last_search.sims > 2 * TIMED_CHUNK


def test_benchmark_plays_at_equal_time_and_grades_or_says_how_to(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.bench import uct as bench_uct

    assert bench_uct.main(["--games", "2", "--turn-ms", "5", "--grade", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    grade_rows = [
        line.split() for line in lines if line.split()[:1] == ["5"] and line.split()[1] in ("ours", "quartors")
    ]
    assert lines[0].startswith("load average") and lines[-1].startswith("load average")
    if bench_uct.load_peer() is None:
        assert bench_uct.PEER_MISSING in lines
        assert [row[1] for row in grade_rows] == ["ours"]
    else:
        match_row = next(line.split() for line in lines if line.split()[:2] == ["5", "2"])
        wins, draws, losses = map(int, match_row[2].split("-"))
        assert wins + draws + losses == 2 and float(match_row[3]) == (wins + draws / 2) / 2
        assert [row[1] for row in grade_rows] == ["ours", "quartors"]
    for row in grade_rows:  # a share per seed, then all seeds'
        assert len(row) == 2 + bench_uct.GRADE_SEEDS + 1 + 2 and all(share.endswith("%") for share in row[2:6])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--games", "1"], "games"),
        (["--turn-ms", "0"], "turn-ms"),
        (["--grade", "-1"], "grade"),
        (["--ours", "random"], "--ours"),
        (["--ours", "mcts:playout=heavy"], "playout"),
        (["--ours", "mcts:sims=500"], "leave sims and time out"),  # the bench's time would replace them
        (["--ours", "mcts:time=1"], "leave sims and time out"),
    ],
)
def test_benchmark_refuses_bad_options_in_one_line(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.bench import uct as bench_uct

    with pytest.raises(SystemExit) as exit_info:
        bench_uct.main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and named in error[0]


def test_our_random_draws_do_not_depend_on_the_clock() -> None:
    """An agent draws one seed per move whatever its budget: the same seed gives the same draws at any speed."""
    quick, slow = UCTAgent(seed=3, time=0.001), UCTAgent(seed=3, time=0.02)
    state = greedy_game_positions(10, 1, 0, STANDARD, placing=True)[0]
    for agent in (quick, slow):
        agent.act(state)
        agent.act(INITIAL_STATE)
    assert quick.rng.integers(2**31) == slow.rng.integers(2**31)


def test_quartors_sees_our_positions_as_we_do() -> None:
    from experiments.bench import uct as bench_uct

    peer = bench_uct.load_peer()
    if peer is None:
        pytest.skip("quartors does not import (it needs Python >= 3.13)")
    positions = [INITIAL_STATE, *greedy_game_positions(9, 3, 0, STANDARD, placing=True)]
    for state in positions:
        theirs = peer.position(state)
        assert theirs.board == state.board and theirs.remaining_mask == state.available
        assert theirs.selected_piece == (state.hand if state.placing else None) and int(theirs.actor) == state.to_move
        actions, sims = peer.turn(state, 0.005, seed=0)
        assert sims >= 1 and len(actions) == (2 if state.placing else 1)
        assert step(STANDARD, state, actions[0]) is not None


@settings(max_examples=100, deadline=None)
@given(variants, st.integers(0, 2**31 - 1), st.integers(0, 31))
def test_tactical_playout_replays_through_core_step_and_plays_its_tactics(
    variant: Variant, seed: int, plies: int
) -> None:
    state = random_position(variant, seed, plies)
    if state.over:
        return
    generator = new_generator(seed)
    winner = tactical_playout(compiled_fields(state), variant.compiled, generator)
    # Replay the same draws in Python: the playout's policy, each move checked through core.step.
    generator = new_generator(seed)
    while not state.over:
        if state.claimable:
            action = DECLARE
        elif state.placing:
            wins = winning_squares_for(variant, state, state.hand)
            action = random_member(wins or ALL_SQUARES & ~state.occupied, generator)
            assert not wins or wins >> action & 1  # a win when the piece in hand makes one
        else:
            safe = safe_gives(variant, state)
            action = random_member(safe or state.available, generator)
        state = step(variant, state, action)
    assert state.winner == winner


@pytest.mark.parametrize("variant", [STANDARD, Variant.make(squares=True), Variant.make(declaration=True)])
def test_proven_values_are_the_solvers(variant: Variant) -> None:
    """Every node the search proves at the root holds the exact solver's value of its action, and a proven root
    holds the position's value: MCTS-Solver's backups checked against an independent exact search."""
    solved = 0
    for seed in range(40):
        state = random_position(variant, seed, plies=21 + seed % 4)
        if state.over or legal_mask_count(variant, state) < 2:
            continue
        tree = UCTTree(TIMED_CHUNK + 1)
        tree.start(state, variant, seed)
        for _ in range(40):
            tree.simulate(TIMED_CHUNK, 1.0, True, True)
            if tree.solved:
                break
            tree.reserve(TIMED_CHUNK)
        values = action_values(variant, state)
        links = tree.links[: tree.size]
        for child in _children(links, 0):
            if links[child, PROVEN] != UNPROVEN:
                assert links[child, PROVEN] == values[int(links[child, ACTION])]
        if tree.solved:  # a proven draw can stay unproven a long time: its siblings' visits go on
            assert links[0, PROVEN] == max(values.values())
            assert values[tree.best[0]] == max(values.values())
            solved += 1
    assert solved >= 10
