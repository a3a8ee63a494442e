"""The AlphaZero learner's training targets: the value target mixing the game's outcome with the search's root
value (``value_mix``), the policy target (``policy_target``), and playout-cap randomisation
(``full_search_share``, ``cheap_sims``): what self-play stores, checked against the search's own results."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch as th

from agents.networks.policy_value import PolicyValueNetwork
from agents.tree.puct import PUCTResult, PUCTSearch
from agents.tree.sessions import PUCTOptions, SelfPlaySession
from experiments.training.az_selfplay import ReplayBuffer, network_evaluator, search_options
from experiments.training.config import ConfigError
from experiments.training.config_file import load_config
from quarto_env.core import NUM_ACTIONS, Variant, position_array
from quarto_env.observation import observation_kind
from tests.test_alphazero import endgame

STANDARD = Variant.make()


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def filled_buffer(size: int, seed: int = 0) -> ReplayBuffer:
    rng = np.random.default_rng(seed)
    buffer = ReplayBuffer(size)
    positions = position_array([endgame(STANDARD, s, 9) for s in range(size)])
    outcome = rng.choice([-1.0, 0.0, 1.0], size).astype(np.float32)
    root_value = rng.uniform(-1, 1, size).astype(np.float32)
    buffer.add(positions, np.full((size, NUM_ACTIONS), 1 / NUM_ACTIONS, np.float32), outcome, root_value)
    return buffer


@pytest.mark.parametrize("mix", [0.0, 0.3, 1.0])
def test_the_value_target_mixes_outcome_and_root_value(mix: float) -> None:
    buffer = filled_buffer(6)
    positions, _, value = buffer.sample(50, np.random.default_rng(1), mix)
    rows = np.random.default_rng(1).integers(buffer.size, size=50)  # the same draws
    assert np.array_equal(positions, buffer.positions[rows])
    expected = [(1 - mix) * buffer.outcome[r] + mix * buffer.root_value[r] for r in rows]
    assert np.allclose(value, expected, atol=1e-6)


def test_a_buffer_saved_before_root_values_loads_with_the_outcome_in_their_place() -> None:
    buffer = filled_buffer(4)
    old = io.BytesIO()
    arrays = np.load(io.BytesIO(buffer.to_bytes()), allow_pickle=False)
    np.savez(old, fields=arrays["fields"], policy=arrays["policy"], outcome=arrays["outcome"])
    loaded = ReplayBuffer(4)
    loaded.load_bytes(old.getvalue(), STANDARD)
    assert np.array_equal(loaded.root_value, loaded.outcome) and not np.array_equal(
        loaded.root_value, buffer.root_value
    )


class SmallSelfPlay:
    """Endless self-play of ``games`` games with a small untrained network, as the trainer plays it: one round
    of moves per :meth:`play_move`, drawing from ``rng``."""

    def __init__(self, games: int, rng: np.random.Generator, **options: object) -> None:
        th.manual_seed(0)
        network = PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 8)
        base = {"simulations": 16, "temperature_plies": 4, "targets": "visits"}
        settings = PUCTOptions(**{**base, **options})  # type: ignore[arg-type]
        self.session = SelfPlaySession(None, settings, network.kind, STANDARD, rng, parallel=games, records=False)
        self.search: PUCTSearch = self.session.search
        self.evaluate = network_evaluator(network)

    def play_move(self) -> PUCTResult:
        result = self.session.play_round(self.evaluate)
        assert result is not None
        return result


def searched_and_stored(
    selfplay: SmallSelfPlay, rounds: int
) -> tuple[list[tuple[np.ndarray, PUCTResult]], tuple[np.ndarray, ...]]:
    """Play ``rounds`` rounds of self-play: every search's roots and result, and every position it stored
    (positions, policy targets, outcomes, root values, concatenated)."""
    searches: list[tuple[np.ndarray, PUCTResult]] = []
    search_rounds = selfplay.search.rounds

    def recording_rounds(roots: np.ndarray, sims: int, **options: object):  # type: ignore[no-untyped-def]
        result = yield from search_rounds(roots, sims, **options)  # type: ignore[arg-type]
        searches.append((roots.copy(), result))
        return result

    selfplay.search.rounds = recording_rounds  # type: ignore[method-assign]
    stored = []
    for _ in range(rounds):
        selfplay.play_move()
        samples = selfplay.session.samples()
        stored.append((samples.positions, samples.policy, samples.outcome, samples.root_value))
    return searches, tuple(np.concatenate([s[k] for s in stored]) for k in range(4))


def test_stored_positions_carry_the_root_value_and_visits_of_their_search() -> None:
    searches, (positions, policy, outcome, root_value) = searched_and_stored(SmallSelfPlay(4, rng(0)), 40)
    searched = {
        (roots[g].tobytes(), result.policy()[g].astype(np.float32).tobytes(), float(result.root_value[g]))
        for roots, result in searches
        for g in range(len(roots))
    }
    assert len(positions) > 10 and set(np.unique(outcome)) <= {-1.0, 0.0, 1.0}
    for row in range(len(positions)):
        key = (positions[row].tobytes(), policy[row].astype(np.float32).tobytes(), float(root_value[row]))
        assert key in searched


def test_cheap_rounds_store_nothing_and_full_rounds_store_every_game() -> None:
    selfplay = SmallSelfPlay(4, rng(3), full_search_share=0.5, cheap_simulations=3)
    session = selfplay.session
    sims_seen = set()
    for _ in range(30):
        stored, cheap = session.stored_rounds, session.cheap_rounds
        waiting_before = session.waiting
        result = selfplay.play_move()
        sims_seen.add(result.sims)
        grew = session.waiting - waiting_before
        if session.stored_rounds > stored:
            assert result.sims == 16
            assert all(g == 1 or w <= 1 for g, w in zip(grew, session.waiting, strict=True))
        else:
            assert session.cheap_rounds == cheap + 1 and result.sims == 3
            assert all(g <= 0 for g in grew)  # nothing added; a game that ended emptied its list
    assert sims_seen == {3, 16} and session.stored_rounds > 0 and session.cheap_rounds > 0


def test_every_round_is_full_by_default_and_draws_nothing_for_it() -> None:
    rng_a, rng_b = rng(5), rng(5)
    one = SmallSelfPlay(2, rng_a)
    one.play_move()
    two = SmallSelfPlay(2, rng_b, full_search_share=1.0)
    two.play_move()
    assert one.session.cheap_rounds == 0 and rng_a.random() == rng_b.random()


def test_the_target_fields_are_validated_with_their_allowed_values() -> None:
    config = load_config(None, ["algorithm=alphazero", "policy=slots", "policy_target=completed_q", "value_mix=0.5"])
    assert config.alphazero.policy_target == "completed_q" and config.alphazero.value_mix == 0.5
    with pytest.raises(ConfigError, match=r"policy_target must be one of \('visits', 'completed_q'\)"):
        load_config(None, ["policy_target=counts"])
    with pytest.raises(ConfigError, match="value_mix"):
        load_config(None, ["value_mix=1.5"])
    with pytest.raises(ConfigError, match="full_search_share"):
        load_config(None, ["full_search_share=0"])


# ---------------------------------------------------------------------------------------------------------
# The completed-Q policy target
# ---------------------------------------------------------------------------------------------------------
def hand_made_result() -> PUCTResult:
    """One root with candidates 0, 1 and 2: action 0 visited twice (values 1 and 0), action 1 once (-1), action
    2 never; the root value is the mean of the three simulations, 0/3 = 0."""
    prior = np.zeros((1, NUM_ACTIONS), np.float32)
    prior[0, :3] = [0.5, 0.3, 0.2]
    visits = np.zeros((1, NUM_ACTIONS), np.int32)
    visits[0, :2] = [2, 1]
    value_sum = np.zeros((1, NUM_ACTIONS), np.float32)
    value_sum[0, :2] = [1.0, -1.0]
    return PUCTResult(visits, np.array([0.0], np.float32), prior, np.array([0.3], np.float32), 3, value_sum)


def test_completed_q_takes_the_mean_value_of_visited_actions_and_the_root_value_elsewhere() -> None:
    expected = np.zeros(NUM_ACTIONS)
    expected[:3] = [0.5, -1.0, 0.0]
    assert np.allclose(hand_made_result().completed_q()[0], expected)


def test_the_improved_policy_is_the_softmax_of_log_prior_plus_beta_q() -> None:
    result = hand_made_result()
    beta = 2.0
    weights = [0.5 * math.exp(beta * 0.5), 0.3 * math.exp(-beta), 0.2 * math.exp(0.0)]
    expected = np.zeros(NUM_ACTIONS)
    expected[:3] = np.array(weights) / sum(weights)
    assert np.allclose(result.improved_policy(beta)[0], expected, atol=1e-6)
    assert np.allclose(result.improved_policy(0.0)[0], result.prior[0])  # beta 0: the prior itself


def test_completed_q_of_a_real_search_matches_its_tree() -> None:
    th.manual_seed(1)
    network = PolicyValueNetwork(observation_kind("parity"), list(STANDARD.groups), 8)
    search = PUCTSearch(STANDARD, network.kind, network.evaluate, 3, 24)
    roots = position_array([endgame(STANDARD, s, 10) for s in range(3)])
    result = search.run(roots, 24)
    q = result.completed_q()
    for g in range(3):
        root_value = search.value_sum[g, 0].sum() / search.visits[g, 0].sum()
        assert result.root_value[g] == pytest.approx(root_value, abs=1e-6)
        for a in range(NUM_ACTIONS):
            if not search.mask[g, 0] >> a & 1:
                assert q[g, a] == 0 and result.prior[g, a] == 0
            elif search.visits[g, 0, a]:
                assert q[g, a] == pytest.approx(search.value_sum[g, 0, a] / search.visits[g, 0, a], abs=1e-6)
            else:
                assert q[g, a] == pytest.approx(root_value, abs=1e-6)
    policy = result.improved_policy(20.0)
    assert np.allclose(policy.sum(1), 1) and np.all(policy[result.prior == 0] == 0)


def test_self_play_stores_the_completed_q_target_when_asked() -> None:
    selfplay = SmallSelfPlay(4, rng(0), targets="completed_q", completed_q_beta=20.0)
    searches, (_, targets, _, _) = searched_and_stored(selfplay, 30)
    expected = {row.tobytes() for _, result in searches for row in result.improved_policy(20.0)}
    assert len(targets) > 0 and all(row.tobytes() in expected for row in targets)


# ---------------------------------------------------------------------------------------------------------
# Self-play with the Gumbel root
# ---------------------------------------------------------------------------------------------------------
def test_gumbel_self_play_plays_the_roots_choice_at_every_action_and_draws_no_dirichlet_noise() -> None:
    """Every round's searched move is the Gumbel root's choice (even inside ``temperature_plies``, where PUCT
    samples the visits); the root's noise comes from self-play's generator, the Dirichlet noise is off."""
    generator = rng(4)
    options = {"root": "gumbel", "gumbel_actions": 4, "targets": "completed_q", "temperature_plies": 33}
    selfplay = SmallSelfPlay(3, generator, **options)
    events: list[tuple[str, object, object]] = []
    search_rounds, step = selfplay.search.rounds, selfplay.session._step

    def recording_rounds(roots: np.ndarray, sims: int, **options: object):  # type: ignore[no-untyped-def]
        result = yield from search_rounds(roots, sims, **options)  # type: ignore[arg-type]
        events.append(("search", result, options))
        return result

    def recording_step(games: np.ndarray, actions: np.ndarray) -> None:
        events.append(("step", games.copy(), actions.copy()))
        step(games, actions)

    selfplay.search.rounds = recording_rounds  # type: ignore[method-assign]
    selfplay.session._step = recording_step  # type: ignore[method-assign]
    for _ in range(12):
        selfplay.play_move()
    searches = [i for i, event in enumerate(events) if event[0] == "search"]
    assert len(searches) == 12
    for i in searches:
        _, result, options = events[i]
        kind, games, actions = events[i + 1]  # the move that follows the search
        assert kind == "step" and np.array_equal(games, np.arange(3))
        assert result.chosen is not None and np.array_equal(actions, result.best())  # type: ignore[union-attr]
        assert options["noise"] is None and options["gumbel"].actions == 4  # type: ignore[index]
        assert options["gumbel"].rng is generator  # type: ignore[index]


def test_the_root_fields_are_validated_with_their_allowed_values() -> None:
    config = load_config(None, ["algorithm=alphazero", "policy=slots", "root=gumbel", "gumbel_actions=8"])
    assert search_options(config.alphazero).gumbel_actions == 8
    assert search_options(config.alphazero).root == "gumbel"
    assert search_options(load_config(None, ["gumbel_actions=8"]).alphazero).root == "puct"
    with pytest.raises(ConfigError, match=r"root must be one of \('puct', 'gumbel'\)"):
        load_config(None, ["root=sequential"])
    with pytest.raises(ConfigError, match="gumbel_actions"):
        load_config(None, ["gumbel_actions=17"])


# ---------------------------------------------------------------------------------------------------------
# Exact outcomes near the end (exact_outcome_empties)
# ---------------------------------------------------------------------------------------------------------
WIN_IN_HAND = "012............. 4"
"""Pieces 0, 1 and 2 on the top row share "solid" with piece 4 in hand: the player to move places 4 on square 3
and wins, so its exact value is +1 whatever the self-play game's outcome was."""


def test_exact_outcomes_replace_the_outcome_near_the_end_and_leave_the_rest() -> None:
    from experiments.training.az_selfplay import ExactOutcomes
    from quarto_env.notation import parse_position

    near_end = parse_position(WIN_IN_HAND)  # 13 empty squares: rescored with max_empty 13
    positions = position_array([near_end, endgame(STANDARD, 0, 14)])
    outcome = np.array([-1.0, -1.0], np.float32)  # self-play lost both (a later mistake, say)
    exact = ExactOutcomes(STANDARD, max_empty=13)
    rescored = exact.rescore(positions, outcome)
    assert rescored.tolist() == [1.0, -1.0]  # the 14-empty row keeps its outcome
    assert outcome.tolist() == [-1.0, -1.0]  # the input is left alone
    assert (exact.rescored, exact.changed) == (1, 1)
    assert ExactOutcomes(STANDARD, max_empty=12).rescore(positions, outcome).tolist() == [-1.0, -1.0]


def test_exact_outcomes_agree_with_the_solver_on_late_positions() -> None:
    from agents.solver.minimax import solve
    from experiments.training.az_selfplay import ExactOutcomes

    states = [endgame(STANDARD, seed, 8) for seed in range(6)]
    exact = ExactOutcomes(STANDARD, max_empty=8).rescore(position_array(states), np.zeros(6, np.float32))
    assert exact.tolist() == [float(solve(state, STANDARD).value) for state in states]


def test_exact_outcome_empties_is_validated() -> None:
    assert load_config(None, ["algorithm=alphazero", "exact_outcome_empties=10"]).alphazero.exact_outcome_empties == 10
    with pytest.raises(ConfigError, match=r"exact_outcome_empties must be an integer >= 0 and <= 12, got 13"):
        load_config(None, ["exact_outcome_empties=13"])
