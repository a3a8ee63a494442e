"""The learner's self-play environment: rewards and seats, opponents and their batched moves, the pool,
and the evaluation loop."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch as th
from torch import nn

from agents.networks.policy_value import RowWeights
from agents.specs import make_agent
from experiments.evaluation.games import AgentMover, evaluate, move, seeded_torch
from experiments.training.config_file import config_from_dict
from experiments.training.sb3_ppo import build_model
from experiments.training.selfplay import OpponentPool, SelfPlayVecEnv, SnapshotBank, frozen_copy, policy_players
from quarto_env.core import DECLARE, NO_WINNER, Variant
from quarto_env.notation import parse_position
from quarto_env.observation import observation_kind
from quarto_env.vector import GameBatch

STANDARD = Variant.make()
DECLARATION = Variant.make(declaration=True)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def scripted_env(variant: Variant, position: str, learner_seat: int, opponent: str = "greedy") -> SelfPlayVecEnv:
    """One game in ``position`` with the learner in ``learner_seat`` against ``opponent``."""
    pool = OpponentPool(variant, observation_kind("tactical"), {opponent: 1.0}, max_snapshots=1, seed=0)
    env = SelfPlayVecEnv(variant, 1, observation_kind("tactical"), pool, seed=0)
    env.reset()
    env.batch.set_state(np.array([0]), parse_position(position, variant))
    env.learner_seat[0] = learner_seat
    return env


# Row 0 holds pieces 0, 1, 2 (all solid): piece 4 (solid too) wins on square 3.
# "012............. 4": player 0 places piece 4;   "012.5........... 4": player 1 does (one more piece placed).
# "012............. -": player 1 gives;            "012.5........... -": player 0 gives.
@pytest.mark.parametrize(("position", "seat"), [("012............. 4", 0), ("012.5........... 4", 1)])
def test_learner_gets_plus_one_when_its_placement_wins_from_either_seat(position: str, seat: int) -> None:
    env = scripted_env(STANDARD, position, seat)
    _, rewards, dones, infos = env.step(np.array([3]))
    assert rewards[0] == 1.0 and dones[0]
    assert infos[0]["episode"]["r"] == 1.0


@pytest.mark.parametrize(("position", "seat"), [("012............. -", 1), ("012.5........... -", 0)])
def test_learner_gets_minus_one_when_its_give_loses_from_either_seat(position: str, seat: int) -> None:
    # The learner gives piece 4; greedy places it on square 3 and wins: the loser sees its -1.
    env = scripted_env(STANDARD, position, seat)
    _, rewards, dones, infos = env.step(np.array([4]))
    assert rewards[0] == -1.0 and dones[0]
    assert infos[0]["episode"]["r"] == -1.0
    assert infos[0]["terminal_observation"].shape == env.observation_space.shape
    assert env.pop_outcomes() == Counter({"loss": 1})


def test_draws_give_zero_whoever_places_last() -> None:
    # A full board with no winning group: the learner's own last placement, or the opponent's after the
    # learner's forced last give.
    env = scripted_env(STANDARD, "cd5a64b20.3918ef 7", 0)
    _, rewards, dones, _ = env.step(np.array([9]))
    assert rewards[0] == 0.0 and dones[0]
    env = scripted_env(STANDARD, "cd5a64b20.3918ef -", 1)
    _, rewards, dones, _ = env.step(np.array([7]))
    assert rewards[0] == 0.0 and dones[0]
    assert env.pop_outcomes() == Counter({"draw": 1})


def test_declaration_variant_loser_sees_minus_one_when_the_opponent_claims_its_group() -> None:
    # The learner completes row 0 but gives a piece instead of declaring: greedy declares and wins.
    env = scripted_env(DECLARATION, "012............. 4", 0)
    _, rewards, dones, _ = env.step(np.array([3]))
    assert rewards[0] == 0.0 and not dones[0]
    assert env.action_masks()[0, DECLARE]  # now something can be claimed
    _, rewards, dones, _ = env.step(np.array([5]))
    assert rewards[0] == -1.0 and dones[0]


def test_declaration_variant_learner_wins_by_declaring() -> None:
    env = scripted_env(DECLARATION, "012.5........... 4", 1)
    assert not env.action_masks()[0, DECLARE]  # nothing to claim: the false declaration is not offered
    env.step(np.array([3]))
    _, rewards, dones, _ = env.step(np.array([DECLARE]))
    assert rewards[0] == 1.0 and dones[0]


@pytest.mark.parametrize("variant", [STANDARD, DECLARATION], ids=["standard", "declaration"])
def test_random_learner_always_faces_its_own_decision_and_sees_its_results(variant: Variant) -> None:
    """Under the declaration rules a random opponent may declare falsely at its opening, and lose before the
    learner's first decision: such a game is started again, never handed to the learner over."""
    pool = OpponentPool(variant, observation_kind("lookahead"), {"random": 1.0, "greedy": 1.0}, max_snapshots=1, seed=1)
    env = SelfPlayVecEnv(variant, 16, observation_kind("lookahead"), pool, seed=1)
    env.reset()
    rng = np.random.default_rng(0)
    seats, finished, total_reward = Counter(), 0, 0.0
    for _ in range(300):
        masks = env.action_masks()
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        seats.update(env.learner_seat.tolist())
        _, rewards, dones, infos = env.step(actions)
        # After every step, each game waits for the learner (finished games have restarted).
        assert not env.batch.over.any()
        assert (env.batch.to_move == env.learner_seat).all()
        assert set(rewards[~dones].tolist()) <= {0.0}
        finished += int(dones.sum())
        total_reward += float(rewards.sum())
        assert all(("episode" in info) == done for info, done in zip(infos, dones, strict=True))
    outcomes = env.pop_outcomes()
    assert sum(outcomes.values()) == finished > 100
    assert total_reward == outcomes["win"] - outcomes["loss"]
    assert outcomes["loss"] > outcomes["win"]  # a random learner loses to a random/greedy mix
    assert min(seats.values()) > 0.4 * sum(seats.values())  # both seats are played


class DeclaresAtFirstOpening(AgentMover):
    """A pool opponent that declares at its first decision of the first game in each slot, then plays random."""

    def __init__(self, always: bool = False) -> None:
        self.name, self.always, self.declared, self.rng = "declarer", always, set(), np.random.default_rng(0)

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        actions = []
        for game in games:
            mask = batch.action_masks(np.array([game]), false_declarations=True)[0]
            opening = batch.state(int(game)).available == 0xFFFF
            if opening and (self.always or int(game) not in self.declared):
                self.declared.add(int(game))
                actions.append(DECLARE)
            else:
                actions.append(int(self.rng.choice(np.flatnonzero(mask[:DECLARE]))))
        return np.array(actions, dtype=np.int64)


def test_games_ended_at_their_opening_start_again_with_their_seats() -> None:
    """The learner's seats are drawn once per game: a game the opponent ends at its opening keeps them (drawn
    anew, the learner gave first more often than not)."""
    seats = []
    for mover in (DeclaresAtFirstOpening(), None):
        pool = OpponentPool(DECLARATION, observation_kind("lookahead"), {"random": 1.0}, max_snapshots=1, seed=0)
        if mover is not None:
            pool.baselines = [mover]
        env = SelfPlayVecEnv(DECLARATION, 16, observation_kind("lookahead"), pool, seed=3)
        env.reset()
        seats.append(env.learner_seat.copy())
        assert (env.batch.to_move == env.learner_seat).all() and not env.batch.over.any()
    assert (seats[0] == seats[1]).all() and 0 < seats[0].sum() < 16


def test_an_opponent_that_ends_every_game_at_its_opening_is_refused_after_a_bounded_number() -> None:
    pool = OpponentPool(DECLARATION, observation_kind("lookahead"), {"random": 1.0}, max_snapshots=1, seed=0)
    pool.baselines = [DeclaresAtFirstOpening(always=True)]
    env = SelfPlayVecEnv(DECLARATION, 4, observation_kind("lookahead"), pool, seed=0)
    with pytest.raises(ValueError, match=r"the opponents \['declarer'\] ended 100 games in a row"):
        env.reset()


@pytest.fixture(scope="module")
def tiny_model():  # type: ignore[no-untyped-def]
    config = config_from_dict({"num_games": 8, "n_steps": 8, "batch_size": 32, "observation": "lookahead"})
    pool = OpponentPool(STANDARD, observation_kind("lookahead"), {"random": 1.0}, max_snapshots=2, seed=0)
    env = SelfPlayVecEnv(STANDARD, 8, observation_kind("lookahead"), pool, seed=0)
    return build_model(config, STANDARD, env)


def perturbed_bank(policy, count: int) -> SnapshotBank:  # type: ignore[no-untyped-def]
    """A bank of ``count`` different snapshots of ``policy``'s architecture."""
    bank = SnapshotBank(observation_kind("lookahead"), max_snapshots=count)
    th.manual_seed(0)
    for step in range(count):
        snapshot = frozen_copy(policy)
        for parameter in snapshot.parameters():
            parameter.add_(0.3 * th.randn_like(parameter))
        bank.add(snapshot, step)
    return bank


def test_snapshot_bank_runs_every_snapshot_on_its_own_games_in_one_pass(tiny_model) -> None:  # type: ignore[no-untyped-def]
    bank = perturbed_bank(tiny_model.policy, 3)
    batch = GameBatch(STANDARD, 10)
    batch.step(batch.all_games, np.arange(10))  # ten different pieces given: ten different positions
    observations = th.as_tensor(batch.observe(batch.all_games, observation_kind("lookahead")), dtype=th.float32)
    which = np.array([2, 0, 0, 1, 2, 2, 0, 1, 1, 2])
    with th.no_grad():
        together = bank.logits(observations, which)
        one_by_one = th.cat([bank.networks[w](observations[i : i + 1]) for i, w in enumerate(which)])
    assert th.allclose(together, one_by_one, atol=1e-5)
    assert not th.allclose(one_by_one[1], bank.networks[2](observations[1:2])[0])  # the snapshots differ


def test_row_weights_runs_each_row_through_its_own_network_and_refuses_other_parameters() -> None:
    th.manual_seed(0)
    networks = [nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)) for _ in range(3)]
    x = th.randn(6, 4, 5)  # rows of any shape: the last dimension is the features
    which = np.array([2, 0, 1, 1, 2, 0])
    with th.no_grad():
        together = RowWeights(networks)(x, which)
        one_by_one = th.stack([networks[w](x[i]) for i, w in enumerate(which)])
    assert th.allclose(together, one_by_one, atol=1e-6)
    with pytest.raises(ValueError, match=r"linear layers only.*1\.weight"):
        RowWeights([nn.Sequential(nn.Linear(5, 7), nn.LayerNorm(7)) for _ in range(2)])


def test_snapshot_opponents_move_all_their_games_in_one_call_per_round(tiny_model) -> None:  # type: ignore[no-untyped-def]
    bank = perturbed_bank(tiny_model.policy, 4)
    bank.assign(np.arange(40), np.random.default_rng(0))
    calls = []
    original = bank.logits
    bank.logits = lambda obs, snapshots: calls.append(len(set(snapshots))) or original(obs, snapshots)  # type: ignore[method-assign]
    greedy = AgentMover(make_agent("greedy", STANDARD, 0))
    batch = GameBatch(STANDARD, 40)
    while not batch.over.all():  # every action is checked for legality by batch.step
        live = np.flatnonzero(~batch.over)
        move(batch, live, [bank if g % 2 == batch.to_move[g] else greedy for g in live])
    assert calls and len(calls) <= 2 * 16 + 1  # one call per round, not one per game or per snapshot
    assert max(calls) == 4


def test_pool_draws_by_weight_keeps_the_newest_snapshots_and_round_trips(tiny_model) -> None:  # type: ignore[no-untyped-def]
    pool = OpponentPool(
        STANDARD, observation_kind("lookahead"), {"snapshots": 1.0, "random": 1.0}, max_snapshots=2, seed=0
    )
    rng = np.random.default_rng(0)
    games = np.arange(2000)
    assert {o.name for o in pool.draw(rng, games[:50])} == {"random"}  # no snapshot yet: its weight goes unused
    for step in (0, 100, 200):
        pool.add_snapshot(tiny_model.policy, step)
    assert pool.snapshots.steps == [100, 200]
    drawn = pool.draw(rng, games)
    against_snapshots = np.array([o is pool.snapshots for o in drawn])
    assert 0.44 < against_snapshots.mean() < 0.56
    assert Counter(pool.snapshots.of_game[games[against_snapshots]].tolist()).keys() == {0, 1}
    restored = OpponentPool(STANDARD, observation_kind("lookahead"), {"snapshots": 1.0}, max_snapshots=2, seed=0)
    restored.load_state_dict(pool.state_dict(), tiny_model.policy)
    assert restored.snapshots.steps == [100, 200]
    for a, b in zip(pool.snapshots.networks, restored.snapshots.networks, strict=True):
        for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
            assert th.equal(x, y), name


def test_pool_rejects_a_mix_without_weight() -> None:
    pool = OpponentPool(STANDARD, observation_kind("raw"), {"snapshots": 1.0}, max_snapshots=1, seed=0)
    with pytest.raises(ValueError, match="no weight"):
        pool.draw(np.random.default_rng(0), np.arange(1))


def test_evaluate_splits_seats_and_counts_every_game() -> None:
    greedy = AgentMover(make_agent("greedy", STANDARD, 0))
    result = evaluate(greedy, "random", STANDARD, num_games=60, seed=0)
    assert result.num_games == 60
    assert all(sum(result.counts[seat]) == 30 for seat in (0, 1))
    assert result.score() > 0.7  # greedy beats random (about 0.9 over many games)
    wins, draws, _losses = (sum(result.counts[s][k] for s in (0, 1)) for k in range(3))
    assert result.score() == pytest.approx((wins + draws / 2) / 60)
    assert result.final_state.over and result.final_state.winner in (0, 1, NO_WINNER)


def test_a_sampled_evaluation_depends_on_its_seed_alone_and_leaves_torch_generator_as_it_was(tiny_model) -> None:  # type: ignore[no-untyped-def]
    _, learner = policy_players(tiny_model.policy, observation_kind("lookahead"))  # the sampled one
    assert not learner.deterministic
    th.manual_seed(1)
    before = th.random.get_rng_state()
    first = evaluate(learner, "random", STANDARD, num_games=40, seed=3)
    assert th.equal(th.random.get_rng_state(), before)  # a training run is the same whatever its evaluations
    th.rand(5)  # another history of the global generator
    assert evaluate(learner, "random", STANDARD, num_games=40, seed=3).counts == first.counts
    others = [evaluate(learner, "random", STANDARD, num_games=40, seed=s).counts for s in (4, 5, 6)]
    assert any(counts != first.counts for counts in others)  # the seed does matter


def test_seeded_torch_draws_from_the_seed_alone_and_puts_the_generator_back() -> None:
    th.manual_seed(123)
    before = th.random.get_rng_state()
    with seeded_torch(7):
        inside = th.rand(4)
    assert th.equal(th.random.get_rng_state(), before)
    th.manual_seed(999)  # another outer state: the same draws inside
    with seeded_torch(7):
        assert th.equal(th.rand(4), inside)
    with seeded_torch(8):
        assert not th.equal(th.rand(4), inside)
