"""The Gumbel root of the batched search (agents/tree/puct.py): sequential halving against a pure-Python reference on
known Q values, the top-k draw, the budget, batching, the degenerate cases, the completed-Q target under both
roots, and the ``az`` agent's ``root=gumbel`` option."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch as th

from agents.alphazero import AlphaZeroAgent
from agents.networks.policy_value import PolicyValueNetwork
from agents.specs import AGENT_KINDS, SpecError, parse_spec
from agents.tree.choices import ROOTS
from agents.tree.gumbel_root import DEFAULT_GUMBEL_ACTIONS, GumbelRoot, halving_phases
from agents.tree.puct import PUCTResult, PUCTSearch
from quarto_env.core import (
    NO_PIECE,
    NUM_ACTIONS,
    STANDARD,
    State,
    from_board,
    has_winning_group,
    legal_actions,
    position_array,
    step,
    winning_squares_for,
)
from quarto_env.observation import FIRST_ONE_ATTRIBUTE, OCCUPIED, PLACING, observation_kind
from tests.test_alphazero import endgame, hashed

th.set_num_threads(1)
PARITY = observation_kind("parity")
C_VISIT, C_SCALE = 50.0, 0.1


# ---------------------------------------------------------------------------------------------------------
# Helpers: roots whose actions have known values, and a pure-Python sequential halving
# ---------------------------------------------------------------------------------------------------------
def placing_root(placed: int, hand: int) -> State:
    """A position where the player to move places piece ``hand``, with the pieces 0.. placed on the squares
    0, 6, 11 (in that order, ``placed`` of them: no two on one line, so no win is near)."""
    state = State()
    pieces = [p for p in range(16) if p != hand][:placed]
    for piece, square in zip(pieces, (0, 6, 11), strict=False):
        state = step(STANDARD, step(STANDARD, state, piece), square)
    return step(STANDARD, state, hand)


def known_q_evaluator(hand: int, placed: int, q: np.ndarray, logits: np.ndarray):  # type: ignore[no-untyped-def]
    """An evaluator for the roots of :func:`placing_root` (``hand``, ``placed``) under which every simulation
    through root square ``a`` backs up exactly ``q[a]`` for the root's player: it finds the square holding
    ``hand`` (the root's action, on every position below it) and signs ``q`` for the player to move there. Every
    position gets the priors ``softmax(logits)``."""
    attributes = np.array([hand >> k & 1 for k in range(4)])

    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.zeros(len(planes), np.float32)
        for i, plane in enumerate(planes):
            on_squares = plane[FIRST_ONE_ATTRIBUTE : FIRST_ONE_ATTRIBUTE + 4].T  # (16, 4) attribute bits
            holding = np.flatnonzero((plane[OCCUPIED] == 1) & (on_squares == attributes).all(1))
            if len(holding):  # not the root itself
                on_board = int(plane[OCCUPIED].sum())
                turns = on_board - placed - (0 if plane[PLACING, 0] else 1)  # changes of player since the root
                values[i] = q[holding[0]] if turns % 2 == 0 else -q[holding[0]]
        return np.tile(logits, (len(planes), 1)).astype(np.float32), values

    return evaluate


def reference_halving(
    base: dict[int, float], q: dict[int, float], root_value: float, k: int, sims: int
) -> tuple[dict[int, int], int]:
    """Sequential halving as Danihelka et al. write it, one simulation at a time, over the candidates ``base``
    (action -> g + log prior) with fixed values ``q``: the visits of each action and the chosen action."""
    visits = dict.fromkeys(base, 0)

    def score(action: int) -> float:
        total = sum(visits.values())
        mean = sum(q[a] * n for a, n in visits.items()) / total if total else root_value
        value = q[action] if visits[action] else mean
        return base[action] + (C_VISIT + max(visits.values())) * C_SCALE * (value + 1) / 2

    survivors = sorted(base, key=lambda a: -base[a])[: min(k, len(base))]
    phases = max(1, math.ceil(math.log2(len(survivors))))
    spent = 0
    while spent < sims:
        for _ in range(max(1, sims // (phases * len(survivors)))):
            for action in survivors:
                if spent < sims:
                    visits[action] += 1
                    spent += 1
        survivors = sorted(survivors, key=lambda a: -score(a))
        survivors = survivors[: max(min(len(survivors), 2), len(survivors) // 2)]
    reached = [a for a in survivors if visits[a] == max(visits.values())]  # a phase cut short reached these
    return visits, max(reached, key=score)


def chosen(result: PUCTResult) -> np.ndarray:
    """The Gumbel root's choices of ``result`` (a PUCT root's result has none: the test fails)."""
    assert result.chosen is not None
    return result.chosen


def small_network(seed: int = 0) -> PolicyValueNetwork:
    th.manual_seed(seed)
    return PolicyValueNetwork(PARITY, list(STANDARD.groups), 8)


# ---------------------------------------------------------------------------------------------------------
# The schedule
# ---------------------------------------------------------------------------------------------------------
def test_the_phases_follow_the_papers_schedule() -> None:
    # 16 actions, 64 simulations: 4 phases of 16 visits each, halving 16 -> 8 -> 4 -> 2.
    assert halving_phases(16, 64) == [(16, 1), (8, 2), (4, 4), (2, 8)]
    # 10 actions: 64 // (4 * 10) = 1, 64 // 20 = 3, then two survive, 8 visits each, until the budget is spent.
    assert halving_phases(10, 64) == [(10, 1), (5, 3), (2, 8), (2, 8), (2, 8)]
    assert halving_phases(16, 8) == [(16, 1)]  # at least one visit each: the budget ends inside the first phase
    assert halving_phases(1, 5) == [(1, 5)]
    assert halving_phases(2, 7) == [(2, 3), (2, 3)]  # 7 // 2 = 3 each: two phases, the second cut short


@pytest.mark.parametrize("considered", range(1, 17))
def test_the_phases_hold_the_budget_and_no_phase_more(considered: int) -> None:
    for sims in (1, 2, 5, 16, 33, 64, 200):
        plan = halving_phases(considered, sims)
        planned = [m * each for m, each in plan]
        assert sum(planned) >= sims > sum(planned[:-1])
        phases = max(1, math.ceil(math.log2(considered)))
        for m, each in plan:
            assert each == max(1, sims // (phases * m))
        assert [m for m, _ in plan[:2]] == [considered, max(min(considered, 2), considered // 2)][: len(plan)]


# ---------------------------------------------------------------------------------------------------------
# The Gumbel root against the reference
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("placed", "k", "sims", "seed", "noisy"),
    [
        (0, 16, 64, 0, True),
        (0, 16, 64, 1, False),
        (3, 16, 64, 2, True),  # 13 candidates: k is cut to 13
        (1, 5, 30, 3, True),
        (2, 3, 20, 4, True),
        (0, 2, 9, 5, True),
        (0, 16, 8, 6, True),  # the budget ends inside the first phase: unvisited survivors score the root value
        (3, 1, 12, 7, True),
        (0, 7, 50, 8, False),
    ],
)
def test_the_gumbel_root_matches_a_pure_python_sequential_halving(
    placed: int, k: int, sims: int, seed: int, noisy: bool
) -> None:
    rng = np.random.default_rng(seed)
    hand = int(rng.integers(12, 16))
    q = rng.uniform(-1, 1, NUM_ACTIONS)
    logits = rng.normal(0, 1, NUM_ACTIONS)
    root = placing_root(placed, hand)
    search = PUCTSearch(STANDARD, PARITY, known_q_evaluator(hand, placed, q, logits), 1, sims)
    gumbel = GumbelRoot(k, np.random.default_rng(seed + 100) if noisy else None)
    result = search.run(position_array([root]), sims, gumbel=gumbel)

    noise = np.random.default_rng(seed + 100).gumbel(size=NUM_ACTIONS) if noisy else np.zeros(NUM_ACTIONS)
    candidates = legal_actions(STANDARD, root)
    base = {a: float(noise[a] + math.log(result.prior[0, a])) for a in candidates}
    visits, expected = reference_halving(base, {a: float(q[a]) for a in candidates}, 0.0, k, sims)

    assert not search.terminal[0, : search.num_nodes[0]].any()  # so every Q is exactly the one given
    assert np.allclose(result.value_sum[0], q * result.visits[0], atol=1e-4)
    assert {a: int(result.visits[0, a]) for a in candidates} == visits
    assert int(chosen(result)[0]) == expected == int(result.best()[0])


@pytest.mark.parametrize("seed", range(4))
def test_the_considered_actions_are_the_top_k_by_noise_plus_log_prior(seed: int) -> None:
    k, sims = 5, 40  # 40 >= 5: the first phase visits each considered action
    root = endgame(STANDARD, seed, 10)
    result = PUCTSearch(STANDARD, PARITY, small_network(seed).evaluate, 1, sims).run(
        position_array([root]), sims, gumbel=GumbelRoot(k, np.random.default_rng(seed))
    )
    noise = np.random.default_rng(seed).gumbel(size=NUM_ACTIONS)
    candidates = [a for a in range(NUM_ACTIONS) if result.prior[0, a] > 0]
    scores = {a: noise[a] + math.log(result.prior[0, a]) for a in candidates}
    top = sorted(candidates, key=lambda a: -scores[a])[:k]
    assert set(np.flatnonzero(result.visits[0])) == set(top)
    assert int(chosen(result)[0]) in top


@pytest.mark.parametrize(("k", "sims"), [(16, 64), (16, 7), (4, 33), (3, 100), (2, 3), (2, 5), (1, 10), (2, 1)])
def test_the_gumbel_root_spends_exactly_the_budget_on_candidates(k: int, sims: int) -> None:
    # The chosen action is among the most visited even when the budget ends inside a phase whose last visits
    # lowered the Q of the actions they reached (the hashed values swing from -1 to 1).
    roots = [endgame(STANDARD, seed, 6 + seed % 9) for seed in range(24)]
    result = PUCTSearch(STANDARD, PARITY, hashed, len(roots), sims).run(
        position_array(roots), sims, gumbel=GumbelRoot(k, np.random.default_rng(0))
    )
    assert result.sims == sims and np.all(result.visits.sum(1) == sims)
    assert np.all(result.visits[result.prior == 0] == 0)
    assert np.all(result.prior[np.arange(len(roots)), result.chosen] > 0)
    assert np.all(result.visits[np.arange(len(roots)), result.chosen] == result.visits.max(1))


def test_the_batched_gumbel_search_agrees_with_one_game_searches() -> None:
    roots = [endgame(STANDARD, seed, 6 + seed % 5) for seed in range(10)]
    together = PUCTSearch(STANDARD, PARITY, hashed, len(roots), 48).run(
        position_array(roots), 48, gumbel=GumbelRoot(8, np.random.default_rng(3))
    )
    alone = PUCTSearch(STANDARD, PARITY, hashed, 1, 48)
    rng = np.random.default_rng(3)  # the batch draws its noise row by row from the same stream
    for i, root in enumerate(roots):
        single = alone.run(position_array([root]), 48, gumbel=GumbelRoot(8, rng))
        assert np.array_equal(single.visits[0], together.visits[i])
        assert chosen(single)[0] == chosen(together)[i]
        assert single.root_value[0] == pytest.approx(together.root_value[i], abs=1e-6)


def test_one_considered_action_takes_every_simulation() -> None:
    root = endgame(STANDARD, 1, 9)
    search = PUCTSearch(STANDARD, PARITY, small_network().evaluate, 1, 20)
    result = search.run(position_array([root]), 20, gumbel=GumbelRoot(1))
    top = int(np.argmax(result.prior[0]))  # no noise: the top candidate by log prior
    assert result.visits[0, top] == 20 and chosen(result)[0] == top

    hand = 13
    lone = placing_root(3, hand)  # no simulation at all: the choice is the top of g + log prior
    noise = np.random.default_rng(9).gumbel(size=NUM_ACTIONS)
    nothing = search.run(position_array([lone]), 0, gumbel=GumbelRoot(16, np.random.default_rng(9)))
    scores = np.where(nothing.prior[0] > 0, noise + np.log(np.maximum(nothing.prior[0], 1e-30)), -np.inf)
    assert nothing.sims == 0 and chosen(nothing)[0] == int(np.argmax(scores))


def test_a_root_with_one_candidate_plays_it() -> None:
    # One empty square, 15, and piece 0 in hand, which wins nowhere (found by a seeded search): one candidate.
    board = [3, 4, 9, 2, 10, 1, 14, 8, 6, 11, 12, 15, 5, 13, 7, NO_PIECE]
    state = from_board(board, hand=0)
    assert not has_winning_group(STANDARD, state) and not winning_squares_for(STANDARD, state, 0)
    result = PUCTSearch(STANDARD, PARITY, hashed, 1, 5).run(position_array([state]), 5, gumbel=GumbelRoot(16))
    assert result.visits[0, 15] == 5 and chosen(result)[0] == 15


def test_the_puct_root_is_unchanged_and_chooses_nothing() -> None:
    roots = [endgame(STANDARD, seed, 8) for seed in range(3)]
    result = PUCTSearch(STANDARD, PARITY, hashed, 3, 30).run(position_array(roots), 30)
    assert result.chosen is None
    assert np.array_equal(result.best(), np.argmax(result.visits + result.prior * 0.5, axis=1))


def test_bad_gumbel_settings_are_refused_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="considers 1 to 16 actions, got 0"):
        GumbelRoot(0)
    with pytest.raises(ValueError, match="c_scale must be at least 0"):
        GumbelRoot(c_scale=-1.0)
    search = PUCTSearch(STANDARD, PARITY, hashed, 1, 4)
    with pytest.raises(ValueError, match="noise=None with gumbel"):
        search.run(
            position_array([endgame(STANDARD, 0, 8)]), 4, (0.3, 0.25, np.random.default_rng(0)), 0.0, GumbelRoot()
        )


# ---------------------------------------------------------------------------------------------------------
# The completed-Q target (PUCTResult.completed_q, improved_policy), recomputed from the tree
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gumbel", [None, GumbelRoot(4)])
def test_the_improved_policy_matches_a_recomputation_from_the_tree(gumbel: GumbelRoot | None) -> None:
    roots = [endgame(STANDARD, seed, 7 + seed) for seed in range(4)]
    search = PUCTSearch(STANDARD, PARITY, small_network(2).evaluate, len(roots), 20)
    result = search.run(position_array(roots), 20, gumbel=gumbel)
    beta = 20.0
    policy, q = result.improved_policy(beta), result.completed_q()
    for g in range(len(roots)):
        visits, sums = search.visits[g, 0], search.value_sum[g, 0]
        root_value = float(sums.sum()) / int(visits.sum())
        weights = {}
        for a in range(NUM_ACTIONS):
            if search.mask[g, 0] >> a & 1:
                value = float(sums[a]) / int(visits[a]) if visits[a] else root_value
                assert q[g, a] == pytest.approx(value, abs=1e-5)
                weights[a] = float(result.prior[g, a]) * math.exp(beta * value)
            else:
                assert q[g, a] == 0 and policy[g, a] == 0
        for a, weight in weights.items():
            assert policy[g, a] == pytest.approx(weight / sum(weights.values()), abs=1e-5)


def test_without_simulations_completed_q_is_the_networks_value() -> None:
    roots = [endgame(STANDARD, seed, 9) for seed in range(3)]
    result = PUCTSearch(STANDARD, PARITY, hashed, 3, 4).run(position_array(roots), 0)
    q = result.completed_q()
    assert result.sims == 0 and np.allclose(result.root_value, result.network_value)
    assert np.allclose(q, np.where(result.prior > 0, result.network_value[:, None], 0.0))
    assert np.allclose(result.improved_policy(20.0), result.prior, atol=1e-6)  # one value everywhere: the prior


# ---------------------------------------------------------------------------------------------------------
# The az agent
# ---------------------------------------------------------------------------------------------------------
def test_the_az_agent_plays_the_gumbel_roots_choice_without_noise_when_greedy() -> None:
    network = small_network(4)
    state = endgame(STANDARD, 5, 9)
    agents = [AlphaZeroAgent(STANDARD, seed, network=network, sims=24, root="gumbel", k=4) for seed in (0, 1)]
    actions = {agent.act(state) for agent in agents}
    expected = PUCTSearch(STANDARD, PARITY, network.evaluate, 1, 24).run(
        position_array([state]), 24, gumbel=GumbelRoot(4)
    )
    assert actions == {int(chosen(expected)[0])}
    sampled = AlphaZeroAgent(STANDARD, 0, network=network, sims=24, root="gumbel", k=4, temperature=1.0)
    assert all(sampled.act(state) in legal_actions(STANDARD, state) for _ in range(3))
    assert sampled.last_result is not None and sampled.last_result.chosen is not None


def test_the_az_spec_takes_root_and_k_and_refuses_bad_ones() -> None:
    _, values = parse_spec("az:model.zip,root=gumbel,k=8")
    assert values["root"] == "gumbel" and values["k"] == 8 and values["path"] == "model.zip"
    assert parse_spec("az:model.zip")[1]["root"] == "puct"  # the default stays PUCT
    with pytest.raises(SpecError, match="root must be puct or gumbel, got 'gumble'"):
        parse_spec("az:model.zip,root=gumble")
    with pytest.raises(SpecError, match="k must be"):
        parse_spec("az:model.zip,root=gumbel,k=17")
    for root in ROOTS:  # the registry's parser and the class accept the same roots
        assert AGENT_KINDS["az"].options["root"].type(root) == root
    with pytest.raises(ValueError, match="give sims, not time"):
        AlphaZeroAgent(STANDARD, 0, network=small_network(), time=0.5, root="gumbel")
    for k in (4, DEFAULT_GUMBEL_ACTIONS):  # it would do nothing, even at the default's value
        with pytest.raises(ValueError, match=f"k={k} is used only with root=gumbel"):
            AlphaZeroAgent(STANDARD, 0, network=small_network(), k=k)
    assert AlphaZeroAgent(STANDARD, 0, network=small_network(), root="gumbel").k == DEFAULT_GUMBEL_ACTIONS
    with pytest.raises(ValueError, match="root must be one of puct, gumbel"):
        AlphaZeroAgent(STANDARD, 0, network=small_network(), root="uct")
