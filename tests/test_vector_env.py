"""The Gymnasium ``VectorEnv`` of ``quarto_env/QuartoVsAgent-v1`` (:mod:`quarto_env.vector_env`): registration,
spaces, shapes and dtypes, seeding, same-step auto-reset, rewards against ``QuartoVsAgent``'s on scripted
positions, the compiled greedy opponent against ``GreedyAgent``, batched network opponents, and a short
MaskablePPO run.

Gymnasium 1.2 ships no checker for a ``VectorEnv`` (``gymnasium.utils.env_checker.check_env`` takes a single
``Env``), so the checks it would make are written out here: spaces, ``reset``/``step`` shapes and dtypes, seeding
determinism (with its ``data_equivalence``) and auto-reset."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode

from agents.envs.vector_vs_agent import make_vector_vs_agent
from agents.simple import GreedyAgent
from agents.specs import SpecError
from quarto_env.core import DECLARE, NO_PIECE, IllegalActionError, State, Variant, bits, legal_action_mask
from quarto_env.notation import format_position
from quarto_env.observation import OBSERVATION_KINDS
from quarto_env.vector import VectorQuarto
from quarto_env.vector_env import CompiledOpponent, PlayerOpponent, QuartoVectorVsAgent
from tests.test_single_agent import AlwaysDeclares, DeclaresFirst

ENV_ID = "quarto_env/QuartoVsAgent-v1"
VARIANTS = {
    "standard": {},
    "declaration,penalty": {"declaration": True, "false_declaration": "penalty"},
    "declaration,lose": {"declaration": True},
    "squares,2 attributes": {"squares": True, "attributes": 2},
}
GIVE_ANY_PIECE_LOSES = "135.024......... -"  # as in test_single_agent: every piece wins at once
PLACE_TO_WIN = "135............. 7"  # square 3 completes three tall pieces


def random_actions(envs: QuartoVectorVsAgent, rng: np.random.Generator) -> np.ndarray:
    masks = envs.action_masks()
    return np.argmax(rng.random(masks.shape) * masks, axis=1)


def test_make_vec_builds_it_through_the_vector_entry_point() -> None:
    import quarto_env  # noqa: F401 -- registers ENV_ID

    assert gymnasium.registry[ENV_ID].vector_entry_point == "agents.envs.vector_vs_agent:make_vector_vs_agent"
    envs = gymnasium.make_vec(ENV_ID, num_envs=3, opponent="greedy", observation="raw")
    assert isinstance(envs, QuartoVectorVsAgent) and envs.num_envs == 3
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert envs.single_observation_space == gymnasium.spaces.Box(0, 1, (17, 16), np.float32)


# ---------------------------------------------------------------------------------------------------------
# What Gymnasium's checks would check: spaces, shapes and dtypes, seeds, auto-reset
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags", VARIANTS.values(), ids=VARIANTS.keys())
@pytest.mark.parametrize("kind", OBSERVATION_KINDS)
def test_spaces_shapes_and_dtypes(kind: str, flags: dict) -> None:
    envs = make_vector_vs_agent(5, "random", observation=kind, **flags)
    num_actions = 17 if flags.get("declaration") else 16
    assert envs.single_action_space == gymnasium.spaces.Discrete(num_actions)
    assert envs.action_space == gymnasium.spaces.MultiDiscrete([num_actions] * 5)
    assert envs.observation_space.shape == (5, *OBSERVATION_KINDS[kind].shape)
    observations, info = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(40):
        assert observations in envs.observation_space and observations.dtype == np.float32
        assert info["action_mask"].dtype == np.int8 and info["action_mask"].shape == (5, num_actions)
        assert np.array_equal(info["action_mask"].astype(bool), envs.action_masks())
        assert envs.action_masks().dtype == bool and envs.action_masks().any(axis=1).all()
        observations, rewards, terminated, truncated, info = envs.step(random_actions(envs, rng))
        assert rewards.shape == terminated.shape == truncated.shape == (5,)
        assert terminated.dtype == truncated.dtype == bool and not truncated.any()
        assert info["final_obs"].shape == observations.shape and np.array_equal(info["_final_obs"], terminated)


def test_the_observation_is_the_planes_of_the_learners_position() -> None:
    envs = make_vector_vs_agent(4, "greedy", observation="parity")
    observations, _ = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(10):
        planes = envs.vector.games.observe(np.arange(4), OBSERVATION_KINDS["parity"])
        assert np.array_equal(observations, planes.astype(np.float32))
        observations, *_ = envs.step(random_actions(envs, rng))


def test_observations_the_caller_holds_are_never_written_again() -> None:
    envs = make_vector_vs_agent(16, "greedy", observation="parity")
    observations, _ = envs.reset(seed=1)
    rng = np.random.default_rng(1)
    kept = [(observations, observations.copy())]  # every fifth step's observations and final ones, and the last's
    for step_number in range(40):
        last = (observations, observations.copy())
        observations, _, terminated, _, info = envs.step(random_actions(envs, rng))
        np.testing.assert_array_equal(*last)
        if step_number % 5 == 0:
            kept += [(observations, observations.copy()), (info["final_obs"], info["final_obs"].copy())]
        planes = envs.vector.games.observe(np.arange(16), OBSERVATION_KINDS["parity"])
        assert np.array_equal(observations, planes.astype(np.float32))
        assert not info["final_obs"][~terminated].any()
    for held, copy in kept:
        np.testing.assert_array_equal(held, copy)


def play(envs: QuartoVectorVsAgent, seed: int | None, steps: int = 30) -> list[Any]:
    """What the learner saw and got over ``steps`` steps of seeded random actions."""
    rng = np.random.default_rng(0)
    trace: list[Any] = list(envs.reset(seed=seed))
    for _ in range(steps):
        trace.append(envs.step(random_actions(envs, rng)))
    return trace


@pytest.mark.parametrize(("opponent", "num_envs"), [("random", 9), ("greedy", 32)])
def test_threads_play_the_same_games(opponent: str, num_envs: int) -> None:
    alone = make_vector_vs_agent(num_envs, opponent, observation="tempo")
    shared = make_vector_vs_agent(num_envs, opponent, observation="tempo", threads=2)
    assert len(shared.vector.shares.bounds) == 3  # the planes are written in two shares
    assert data_equivalence(play(alone, 5, steps=60), play(shared, 5, steps=60))


@pytest.mark.parametrize("opponent", ["random", "greedy", "minimax:depth=1"])
def test_the_same_seed_plays_the_same_games(opponent: str) -> None:
    first, second = make_vector_vs_agent(4, opponent), make_vector_vs_agent(4, opponent)
    assert data_equivalence(play(first, 3), play(second, 3))
    assert data_equivalence(play(first, 3), play(first, 3))
    assert not data_equivalence(play(first, 3), play(first, 4))
    assert not data_equivalence(play(first, None), play(first, None))


def test_the_learners_seat_follows_the_seed_or_the_argument() -> None:
    seats = make_vector_vs_agent(64).reset(seed=0)[1]["seat"]
    assert set(seats) == {0, 1}
    assert np.array_equal(seats, make_vector_vs_agent(64).reset(seed=0)[1]["seat"])
    for seat in (0, 1):
        assert (make_vector_vs_agent(8, learner_seat=seat).reset(seed=0)[1]["seat"] == seat).all()


def test_the_opponent_gives_first_inside_reset() -> None:
    envs = make_vector_vs_agent(8, learner_seat=1)
    envs.reset(seed=0)
    for i in range(8):
        state = envs.vector.state(i)
        assert state.occupied == 0 and state.hand != NO_PIECE  # the learner places the piece it was given


def test_finished_games_restart_in_the_same_step() -> None:
    envs = make_vector_vs_agent(16, "greedy")
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(40):
        last_planes = envs.vector.games.observe(np.arange(16), OBSERVATION_KINDS["tactical"])
        _, rewards, terminated, _, info = envs.step(random_actions(envs, rng))
        assert set(rewards[terminated]) <= {-1.0, 0.0, 1.0} and not rewards[~terminated].any()
        assert not info["final_obs"][~terminated].any()
        for i in np.flatnonzero(terminated):
            finished += 1
            state = envs.vector.state(int(i))  # the new game: at most the opponent's first give made
            assert bin(state.occupied).count("1") == 0 and not state.over
            assert (state.hand == NO_PIECE) == (info["seat"][i] == 0)
            assert not np.array_equal(info["final_obs"][i], last_planes[i])  # the finished game, after the step
        assert envs.action_masks().any(axis=1).all()
    assert finished > 16


# ---------------------------------------------------------------------------------------------------------
# Rewards as QuartoVsAgent gives them
# ---------------------------------------------------------------------------------------------------------
def test_a_winning_placement_gives_plus_one() -> None:
    envs = make_vector_vs_agent(3, "greedy")
    _, info = envs.reset(seed=0, options={"position": PLACE_TO_WIN})
    assert (info["seat"] == 0).all() and envs.action_masks()[:, 3].all()
    _, rewards, terminated, _, info = envs.step(np.full(3, 3))
    assert rewards.tolist() == [1.0] * 3 and terminated.all()
    assert info["final_obs"].any(axis=(1, 2)).all()


@pytest.mark.parametrize("flags", [{}, {"declaration": True}], ids=["standard", "declaration"])
def test_a_give_that_lets_the_opponent_win_gives_minus_one(flags: dict) -> None:
    envs = make_vector_vs_agent(3, "greedy", **flags)
    envs.reset(seed=0, options={"position": GIVE_ANY_PIECE_LOSES})
    _, rewards, terminated, _, _ = envs.step(np.full(3, 7))  # greedy places it and wins (declaring, where it must)
    assert rewards.tolist() == [-1.0] * 3 and terminated.all()


def test_a_false_declaration_costs_the_learner_the_penalty() -> None:
    envs = make_vector_vs_agent(2, declaration=True, false_declaration="penalty", false_declaration_penalty=-0.25)
    envs.reset(seed=0)
    _, rewards, terminated, _, _ = envs.step(np.full(2, DECLARE))
    assert rewards.tolist() == [-0.25, -0.25] and not terminated.any()
    assert not envs.action_masks()[:, DECLARE].any()  # not twice in a row


def test_an_illegal_action_loses_or_raises() -> None:
    envs = make_vector_vs_agent(2, learner_seat=0)
    envs.reset(seed=0, options={"position": PLACE_TO_WIN})
    _, rewards, terminated, _, info = envs.step(np.array([0, 3]))  # square 0 is taken
    assert rewards.tolist() == [-1.0, 1.0] and terminated.all() and info["illegal_action"].tolist() == [True, False]
    raising = make_vector_vs_agent(2, learner_seat=0, illegal_action="raise")
    raising.reset(seed=0, options={"position": PLACE_TO_WIN})
    with pytest.raises(IllegalActionError, match=r"envs \[0\]: actions \[0\]"):
        raising.step(np.array([0, 3]))
    assert raising.step(np.array([3, 3]))[1].tolist() == [1.0, 1.0]  # nothing changed


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"learner_seat": 2}, ValueError, "learner_seat must be one of 'random', 0, 1"),
        ({"illegal_action": "warn"}, ValueError, "illegal_action must be one of 'lose', 'raise'"),
        ({"observation": "pixels"}, ValueError, "'pixels'; allowed: raw, tactical"),
        ({"observation": None}, ValueError, "allowed: raw, tactical"),
        ({"opponent": "nobody"}, SpecError, "unknown agent kind 'nobody'"),
        ({"opponent": 3}, TypeError, "opponent must be 'random', 'greedy', a callable"),
        ({"colour": True}, TypeError, "no flag colour"),
        ({"threads": 0}, ValueError, "threads must be an integer >= 1"),
    ],
)
def test_bad_arguments_name_the_allowed_values(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        make_vector_vs_agent(2, **kwargs)


def test_step_before_reset_and_bad_actions_raise() -> None:
    envs = make_vector_vs_agent(2)
    with pytest.raises(RuntimeError, match="call reset"):
        envs.step(np.zeros(2, dtype=np.int64))
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        envs.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(TypeError, match="integers"):
        envs.step(np.zeros(2))


# ---------------------------------------------------------------------------------------------------------
# Opponents
# ---------------------------------------------------------------------------------------------------------
def random_positions(flags: dict, num_envs: int = 64, seed: int = 0) -> tuple[VectorQuarto, np.ndarray]:
    """Positions of random games, from their opening to their last decision: the envs still in play."""
    games = VectorQuarto(num_envs, observation=None, seed=seed, **flags)
    _, info = games.reset()
    rng = np.random.default_rng(seed)
    for _ in range(int(rng.integers(4, 24))):
        masks = info["action_mask"].copy()
        if flags.get("declaration") and flags.get("false_declaration") != "penalty":
            masks[:, DECLARE] = 0  # a false declaration would end these games at once
        _, _, _, _, info = games.step(np.argmax(rng.random(masks.shape) * masks, axis=1))
    return games, np.arange(num_envs)


class AllChoices:
    """Stands in for an agent's generator: every choice it is offered, as the list itself."""

    def __init__(self, agent: GreedyAgent) -> None:
        agent.random_legal = self.choices  # type: ignore[method-assign]

    def choices(self, state: State, actions: list[int] | None = None) -> Any:
        return actions


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("flags", VARIANTS.values(), ids=VARIANTS.keys())
def test_the_compiled_greedy_opponent_chooses_among_greedy_agents_actions(flags: dict, seed: int) -> None:
    games, rows = random_positions(flags, seed=seed)
    variant = Variant.make(**{k: v for k, v in flags.items() if k != "false_declaration_penalty"})
    agent = GreedyAgent(variant)
    AllChoices(agent)
    allowed = CompiledOpponent("greedy").allowed(games, rows)
    picked = CompiledOpponent("greedy").act(games, rows, np.ones((len(rows), variant.num_actions), dtype=bool))
    for i in rows:
        choices: Any = agent.act(games.state(int(i)))  # a list of actions, or DECLARE
        expected = {DECLARE} if choices == DECLARE else set(choices)
        assert set(bits(int(allowed[i]))) == expected, games.state(int(i))
        assert picked[i] in expected


def test_the_compiled_random_opponent_draws_every_legal_action() -> None:
    games, rows = random_positions({"declaration": True, "false_declaration": "penalty"})
    opponent = CompiledOpponent("random")
    opponent.seed(0)
    allowed = opponent.allowed(games, rows)
    for i in rows:  # the env's mask: no false declaration twice in a row
        legal = legal_action_mask(games.variant, games.state(int(i)))
        assert allowed[i] == (legal & ~(1 << DECLARE) if games.declared_falsely[i] else legal)
    seen = {int(opponent.act(games, rows[:1], np.ones((1, 17), dtype=bool))[0]) for _ in range(400)}
    assert seen == set(bits(int(allowed[0])))


class CountingNetwork:
    """A snapshot network that plays its last legal action, counting its calls and checking its inputs."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, observations: np.ndarray, masks: np.ndarray) -> np.ndarray:
        self.calls += 1
        assert observations.dtype == np.float32 and observations.shape[1:] == (21, 16)
        assert masks.dtype == bool and masks.shape == (len(observations), 16)
        return masks.shape[1] - 1 - np.argmax(masks[:, ::-1], axis=1)


def test_a_network_opponent_moves_in_all_its_games_at_once() -> None:
    network = CountingNetwork()
    envs = QuartoVectorVsAgent(32, network, observation="lookahead", learner_seat=0)
    envs.reset(seed=0)
    assert network.calls == 0  # the learner gives first everywhere
    envs.step(np.zeros(32, dtype=np.int64))  # piece 0: the network places it, then gives, in every game
    assert network.calls == 2
    assert all(envs.vector.state(i).occupied == 1 << 15 for i in range(32))


class FirstLegalPlayer:
    """A player that is no agent of ``agents``: the lowest legal action, counting its games."""

    def __init__(self) -> None:
        self.games = 0

    def act(self, state: State) -> int:
        return bits(legal_action_mask(Variant(), state))[0]

    def reset(self) -> None:
        self.games += 1


def test_players_move_game_by_game() -> None:
    players = [FirstLegalPlayer() for _ in range(4)]
    envs = QuartoVectorVsAgent(4, PlayerOpponent(players), learner_seat=1)
    envs.reset(seed=0)
    assert [p.games for p in players] == [1] * 4
    assert all(envs.vector.state(i).hand == 0 for i in range(4))  # each gave piece 0, its lowest


def test_games_the_opponent_ends_at_its_opening_are_started_again_a_bounded_number_of_times() -> None:
    """A random opponent declares falsely at one opening in 17: those games are replaced, and every env waits
    for the learner; an opponent that ends every game first is refused, not looped on (nor recursed into)."""
    envs = make_vector_vs_agent(64, "random", learner_seat=1, declaration=True)
    for seed in range(5):
        envs.reset(seed=seed)
        assert envs.action_masks().any(axis=1).all()
    hopeless = QuartoVectorVsAgent(
        2, PlayerOpponent([AlwaysDeclares(), AlwaysDeclares()]), learner_seat=1, declaration=True
    )
    with pytest.raises(ValueError, match="ended 100 games in a row before the learner's first decision"):
        hopeless.reset(seed=0)


def test_games_ended_at_their_opening_start_again_with_their_seats() -> None:
    reference = QuartoVectorVsAgent(16, PlayerOpponent([DeclaresFirst(0) for _ in range(16)]), declaration=True)
    envs = QuartoVectorVsAgent(16, PlayerOpponent([DeclaresFirst(1) for _ in range(16)]), declaration=True)
    for seed in range(3):
        reference.reset(seed=seed)
        envs.reset(seed=seed)
        assert (envs.seats == reference.seats).all() and 0 < envs.seats.sum() < 16, seed  # both seats, kept


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("one_torch_thread")
def test_maskable_ppo_trains_on_it_with_the_masks() -> None:
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    from agents.envs.sb3_vector import SB3VectorEnv

    envs = SB3VectorEnv(gymnasium.make_vec(ENV_ID, num_envs=16, opponent="greedy", declaration=True))
    assert is_masking_supported(envs) and get_action_masks(envs).shape == (16, 17)
    model = MaskablePPO("MlpPolicy", envs, n_steps=64, batch_size=256, n_epochs=1, seed=0)
    model.learn(2048)
    assert model.num_timesteps == 2048
    observations = envs.reset()
    actions, _ = model.predict(observations, action_masks=envs.action_masks())
    assert envs.action_masks()[np.arange(16), actions].all()
    assert len(model.ep_info_buffer) > 0  # the episode statistics MaskablePPO logs as rollout/ep_rew_mean


def test_sb3_sees_one_info_dict_per_env_and_each_finished_games_episode() -> None:
    from agents.envs.sb3_vector import SB3VectorEnv

    envs = SB3VectorEnv(gymnasium.make_vec(ENV_ID, num_envs=8, opponent="random"))
    envs.seed(0)
    envs.reset()
    assert all(set(info) == {"action_mask", "seat"} for info in envs.reset_infos)
    rng, lengths, total, finished = np.random.default_rng(0), np.zeros(8, dtype=int), 0.0, []
    for _ in range(80):
        actions = np.array([rng.choice(np.flatnonzero(mask)) for mask in envs.action_masks()])
        seats = envs.envs.seats  # the games being played
        _, rewards, dones, infos = envs.step(actions)
        lengths += 1
        total += float(rewards.sum())
        for i, info in enumerate(infos):
            assert info["seat"] == seats[i] and not info["illegal_action"]  # a finished game's own seat
            assert ("episode" in info) == ("terminal_observation" in info) == bool(dones[i])
            if dones[i]:
                assert info["episode"]["l"] == lengths[i] and info["episode"]["r"] == rewards[i]
                assert envs.reset_infos[i]["seat"] == envs.envs.seats[i]  # the new game's, as SB3's VecEnvs keep it
                finished.append(info["episode"]["r"])
        lengths[dones] = 0
    assert len(finished) > 20 and sum(finished) == total  # every reward comes at a game's end


def test_sb3s_set_options_reach_the_next_reset_once() -> None:
    from agents.envs.sb3_vector import SB3VectorEnv

    envs = SB3VectorEnv(gymnasium.make_vec(ENV_ID, num_envs=4, opponent="greedy", learner_seat=0))
    position = "f9.......0..3... 5"
    envs.set_options({"position": position})
    envs.reset()
    assert [format_position(envs.envs.vector.state(i)) for i in range(4)] == [position] * 4
    envs.reset()  # the options were for one reset, as in SB3's own VecEnvs
    assert format_position(envs.envs.vector.state(0)) == "................ -"
    envs.set_options([{"position": position}, {}, {}, {}])
    with pytest.raises(ValueError, match="same options"):
        envs.reset()


@pytest.mark.usefixtures("one_torch_thread")
def test_a_checkpoint_opponent_plays_its_network_in_one_pass(tiny_run: tuple[Any, str]) -> None:
    from quarto_env.vector_env import BatchedNetworkOpponent

    run_dir, _ = tiny_run
    envs = gymnasium.make_vec(ENV_ID, num_envs=8, opponent=f"ppo:{run_dir}", observation="raw")
    assert isinstance(envs.opponent, BatchedNetworkOpponent)  # the checkpoint's own planes, whatever the env's
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        _, _, _, _, info = envs.step(random_actions(envs, rng))
        assert info["action_mask"].any(axis=1).all()
