"""The PettingZoo environment ``quarto_v1``: PettingZoo's own conformance tests on every variant flag
combination, then turns, rewards, declarations, the time limit, illegal actions, observations and errors."""

from __future__ import annotations

import copy
import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pettingzoo
import pytest
from pettingzoo.test import api_test, seed_test

import quarto_env
from quarto_env.core import (
    DECLARE,
    INITIAL_STATE,
    NO_PIECE,
    IllegalActionError,
    Variant,
    legal_action_mask,
    losing_gives,
    winning_squares_for,
)
from quarto_env.env import raw_env
from quarto_env.notation import format_position
from quarto_env.observation import OBSERVATION_KINDS, PLACING, channel_table
from quarto_env.outcome import NO_WINNER, Outcome
from quarto_env.vector import GameBatch


@pytest.mark.filterwarnings("ignore:quarto_v1 ignores reset options")  # api_test passes options={"options": 1}
def test_pettingzoo_api_and_seed_tests(variant_flags: dict) -> None:
    api_test(quarto_env.env(**variant_flags), num_cycles=100)
    seed_test(lambda: quarto_env.env(**variant_flags), num_cycles=100)


@pytest.mark.filterwarnings("ignore:quarto_v1 ignores reset options")
def test_pettingzoo_api_and_seed_tests_with_raw_observations() -> None:
    api_test(quarto_env.env(observation="raw"), num_cycles=100)
    seed_test(lambda: quarto_env.env(observation="raw"), num_cycles=100)


@pytest.mark.filterwarnings("ignore:quarto_v1 ignores reset options")
def test_pettingzoo_api_test_on_the_raw_env() -> None:
    api_test(raw_env(declaration=True), num_cycles=100)


def test_registered_with_pettingzoo() -> None:
    env = pettingzoo.make("aec", "quarto_v1", squares=True)
    assert env.unwrapped.variant == Variant.make(squares=True)
    assert str(env) == "quarto_v1"
    assert pettingzoo.make("aec", "quarto").unwrapped.metadata["name"] == "quarto_v1"  # no version: the newest


def test_quarto_v0_is_deprecated_in_favour_of_quarto_v1() -> None:
    from pettingzoo.utils.deprecated_module import DeprecatedEnv

    with pytest.raises(DeprecatedEnv, match=r"^quarto_v0 is now deprecated, use quarto_v1 instead$"):
        pettingzoo.make("aec", "quarto_v0", squares=True)


def test_infos_are_numbers_with_the_same_keys_for_both_agents_throughout() -> None:
    env = quarto_env.env(declaration=True, false_declaration="penalty")
    rng = np.random.default_rng(4)
    for seed in range(5):
        env.reset(seed=seed)
        for _ in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            for info in env.infos.values():
                assert set(info) == {"outcome", "winner"}
                assert all(type(value) is int for value in info.values())
            if terminated or truncated:
                env.step(None)
                continue
            in_play = {"outcome": Outcome.IN_PLAY, "winner": NO_WINNER}
            assert env.infos == {"player_0": in_play, "player_1": in_play}
            env.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))
        assert env.infos == {}  # both dead steps taken


def test_pickles() -> None:
    env = pickle.loads(pickle.dumps(raw_env(attributes="colour", declaration=True)))
    assert env.variant == Variant.make("colour", declaration=True)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copy_mid_game_goes_on_from_the_same_position_on_its_own(how: str) -> None:
    """A search that copies the env to look ahead needs the game in the copy, and the original left alone."""
    env = quarto_env.env(declaration=True, observation="parity")
    env.reset(seed=3)
    for action in (5, 3, 7):
        env.step(action)
    twin = copy.deepcopy(env) if how == "deepcopy" else pickle.loads(pickle.dumps(env))
    assert twin.unwrapped.position == env.unwrapped.position == "...5............ 7"
    assert twin.agent_selection == env.agent_selection and twin.unwrapped.seats == env.unwrapped.seats
    observation, mine = twin.last()[0], env.last()[0]
    assert all((observation[key] == mine[key]).all() for key in ("observation", "action_mask"))
    twin.step(int(np.flatnonzero(observation["action_mask"])[0]))
    assert env.unwrapped.position == "...5............ 7" != twin.unwrapped.position
    assert twin.unwrapped.np_random.integers(2**31) == env.unwrapped.np_random.integers(2**31)


# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------
def finish(env: pettingzoo.AECEnv, truncated: bool = False) -> dict[str, tuple[float, bool, dict]]:
    """Step both agents through their dead steps; the reward, termination and info each read from ``last()``
    before its own. Only PettingZoo's illegal-move wrapper sets ``truncated`` too."""
    seen = {}
    while env.agents:
        _, reward, terminated, was_truncated, info = env.last()
        assert was_truncated == truncated
        seen[env.agent_selection] = (reward, terminated, dict(info))
        env.step(None)
    return seen


def started(position: str, **flags: object) -> pettingzoo.AECEnv:
    env = quarto_env.env(first_player=0, **flags)
    env.reset(seed=0, options={"position": position})
    return env


# ---------------------------------------------------------------------------------------------------------
# Turns
# ---------------------------------------------------------------------------------------------------------
def test_the_same_agent_places_then_gives() -> None:
    env = quarto_env.env(first_player="player_1")
    env.reset(seed=3)
    order = []
    for _ in range(5):
        planes = env.last()[0]["observation"]
        order.append((env.agent_selection, "place" if planes[PLACING].all() else "give"))
        assert planes[PLACING].all() or not planes[PLACING].any()  # the phase channel is constant
        env.step(int(np.flatnonzero(env.last()[0]["action_mask"])[0]))
    assert order == [
        ("player_1", "give"),
        ("player_0", "place"),
        ("player_0", "give"),
        ("player_1", "place"),
        ("player_1", "give"),
    ]


@pytest.mark.parametrize(("first_player", "seat"), [(0, "player_0"), (1, "player_1"), ("player_1", "player_1")])
def test_a_fixed_first_player_gives_first(first_player: int | str, seat: str) -> None:
    env = quarto_env.env(first_player=first_player)
    env.reset(seed=11)
    assert env.agent_selection == seat
    assert env.unwrapped.seats[0] == seat


def test_a_random_first_player_follows_the_reset_seed() -> None:
    env = quarto_env.env()
    firsts = []
    for seed in range(20):
        env.reset(seed=seed)
        firsts.append(env.agent_selection)
        env.reset(seed=seed)
        assert env.agent_selection == firsts[-1]
    assert set(firsts) == {"player_0", "player_1"}


# ---------------------------------------------------------------------------------------------------------
# Rewards and the end of the game
# ---------------------------------------------------------------------------------------------------------
ROW_READY = "135............. 7"  # three tall pieces on row 0, tall piece 7 in hand: square 3 wins


def test_a_win_rewards_both_players_and_ends_the_game() -> None:
    env = started(ROW_READY)
    assert env.agent_selection == "player_0"  # the core's player 0 is to place; first_player=0 seats player_0
    env.step(3)
    assert all(env.terminations.values())
    seen = finish(env)
    assert seen["player_0"][:2] == (1.0, True) and seen["player_1"][:2] == (-1.0, True)
    assert seen["player_1"][2] == seen["player_0"][2] == {"outcome": Outcome.WIN, "winner": 0}
    assert env.agents == []


def test_the_loser_reads_its_reward_first() -> None:
    env = started(ROW_READY)
    env.step(3)
    assert env.agent_selection == "player_1"
    assert env.last()[1] == -1.0


def test_a_full_board_without_a_win_is_a_draw() -> None:
    env = started("b7c94821fad6e03. 5")
    env.step(15)
    seen = finish(env)
    assert {agent: reward for agent, (reward, _, _) in seen.items()} == {"player_0": 0.0, "player_1": 0.0}
    assert seen["player_0"][2] == {"outcome": Outcome.DRAW, "winner": NO_WINNER}


def test_stepping_after_the_end_follows_pettingzoo() -> None:
    env = raw_env(first_player=0)
    env.reset(options={"position": ROW_READY})
    env.step(3)
    with pytest.raises(ValueError, match="only valid action is None"):
        env.step(0)
    env.step(None)
    env.step(None)
    assert env.agents == [] and env.rewards == {} and env.terminations == {}


def test_rewards_do_not_leak_into_the_next_game() -> None:
    env = started(ROW_READY)
    env.step(3)
    finish(env)
    env.reset(seed=1)
    assert env.rewards == {"player_0": 0.0, "player_1": 0.0}
    assert env.last()[1] == 0.0 and not any(env.terminations.values())


# ---------------------------------------------------------------------------------------------------------
# Declaration variant
# ---------------------------------------------------------------------------------------------------------
def test_declaring_a_completed_group_wins() -> None:
    env = started(ROW_READY, declaration=True)
    env.step(3)
    assert env.agent_selection == "player_0" and not any(env.terminations.values())  # the game goes on ...
    assert env.last()[0]["action_mask"][DECLARE] == 1
    env.step(DECLARE)  # ... until the placer declares
    seen = finish(env)
    assert seen["player_0"][0] == 1.0 and seen["player_1"][0] == -1.0


def test_the_opponent_claims_a_missed_group() -> None:
    env = started(ROW_READY, declaration=True)
    env.step(3)
    env.step(0)  # player_0 gives piece 0 instead of declaring
    assert env.agent_selection == "player_1"
    env.step(DECLARE)
    seen = finish(env)
    assert seen["player_1"][:1] == (1.0,) and seen["player_0"][:1] == (-1.0,)


def test_a_false_declaration_loses_by_default() -> None:
    env = quarto_env.env(declaration=True, first_player=0)
    env.reset(seed=0)
    env.step(DECLARE)
    seen = finish(env)
    assert seen["player_0"] == (-1.0, True, {"outcome": Outcome.FALSE_DECLARATION, "winner": 1})
    assert seen["player_1"][0] == 1.0


def test_a_false_declaration_under_the_penalty_policy_costs_the_penalty_and_play_goes_on() -> None:
    env = quarto_env.env(declaration=True, false_declaration="penalty", false_declaration_penalty=-0.25, first_player=0)
    env.reset(seed=0)
    assert env.last()[0]["action_mask"][DECLARE] == 1
    env.step(DECLARE)
    assert env.agent_selection == "player_0" and not any(env.terminations.values())
    assert env.rewards == {"player_0": -0.25, "player_1": 0.0}
    observation, reward, *_ = env.last()
    assert reward == -0.25
    assert observation["action_mask"][DECLARE] == 0  # not again before the give
    assert observation["action_mask"][:DECLARE].sum() == 16
    env.step(4)  # now a real give
    assert env.agent_selection == "player_1" and env.unwrapped.game_state.hand == 4
    assert env.last()[0]["action_mask"][DECLARE] == 1  # a new decision: declaring is allowed again


def test_a_repeated_false_declaration_is_illegal() -> None:
    raw = raw_env(declaration=True, false_declaration="penalty", first_player=0)
    raw.reset(seed=0)
    raw.step(DECLARE)
    with pytest.raises(IllegalActionError, match="cannot be repeated before the next placement or give"):
        raw.step(DECLARE)
    wrapped = quarto_env.env(declaration=True, false_declaration="penalty", first_player=0)
    wrapped.reset(seed=0)
    wrapped.step(DECLARE)
    wrapped.step(DECLARE)  # the wrapper's illegal-move policy: -1 and the game ends
    assert all(wrapped.terminations.values())
    assert wrapped.rewards["player_0"] == -1


@pytest.mark.parametrize("flags", [{}, {"squares": True}, {"attributes": 1}], ids=["standard", "squares", "height"])
def test_an_always_declaring_policy_ends_every_game_under_the_penalty_policy(flags: dict) -> None:
    env = quarto_env.env(declaration=True, false_declaration="penalty", **flags)
    for seed in range(20):
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        steps = 0
        for _agent in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            mask = observation["action_mask"]
            env.step(DECLARE if mask[DECLARE] else int(rng.choice(np.flatnonzero(mask))))
            steps += 1
            assert steps <= 65, f"seed {seed}: still playing after {steps} actions"
        assert env.unwrapped.game_state.over


# ---------------------------------------------------------------------------------------------------------
# Time limit
# ---------------------------------------------------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_agent_over_the_time_limit_loses() -> None:
    clock = FakeClock()
    env = quarto_env.env(time_limit=1.0, clock=clock, first_player=0, render_mode="ansi")
    env.reset(seed=0)
    clock.now += 0.9  # player_0 gives in time
    env.step(5)
    clock.now += 0.5
    env.step(0)  # player_1 places in time ...
    clock.now += 1.5  # ... and thinks too long about its give
    env.step(6)
    assert env.unwrapped.game_state.hand == NO_PIECE  # the late action was not played
    assert "player_1 exceeded the time limit of 1 s: player_0 wins" in env.render()
    seen = finish(env)
    assert seen["player_1"] == (-1.0, True, {"outcome": Outcome.TIME_LIMIT, "winner": 0})
    assert seen["player_0"][0] == 1.0


def test_the_clock_restarts_at_every_hand_over() -> None:
    clock = FakeClock()
    env = quarto_env.env(time_limit=1.0, clock=clock, first_player=0)
    env.reset(seed=0)
    for action in (5, 0, 6, 1, 7):
        clock.now += 0.99
        env.step(action)
    assert not any(env.terminations.values())


# ---------------------------------------------------------------------------------------------------------
# Illegal actions
# ---------------------------------------------------------------------------------------------------------
def test_an_illegal_action_through_env_ends_the_game_with_the_penalty() -> None:
    env = quarto_env.env(first_player=0)
    env.reset(seed=0)
    env.step(5)
    env.step(0)  # player_1 places piece 5 on square 0
    env.step(5)  # and tries to give piece 5 again
    seen = finish(env, truncated=True)
    assert seen["player_1"][:2] == (-1.0, True) and seen["player_0"][:2] == (0.0, True)


def test_the_raw_env_rejects_an_illegal_action_with_the_legal_ones() -> None:
    env = raw_env(first_player=0)
    env.reset(seed=0)
    env.step(5)
    env.step(0)  # piece 5 goes on square 0
    with pytest.raises(IllegalActionError, match="piece 5 cannot be given; available pieces: \\[0, 1, 2, 3, 4, 6,"):
        env.step(5)
    with pytest.raises(ValueError, match="needs an action"):
        env.step(None)
    assert env.agent_selection == "player_1" and env.position == "5............... -"  # nothing changed
    env.step(6)


# ---------------------------------------------------------------------------------------------------------
# Observations
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags",
    [{}, {"squares": True, "attributes": "top"}, {"declaration": True, "observation": "raw"}],
    ids=["standard", "squares,top", "declaration,raw"],
)
def test_observations_hold_the_position_and_the_legal_actions(flags: dict) -> None:
    """Each plane against the rules core's own answer, over random games."""
    env = raw_env(**flags)
    variant = env.variant
    rng = np.random.default_rng(4)
    for game in range(25):
        env.reset(seed=game)
        while env.agents:
            agent = env.agent_selection
            observation, _, terminated, _, _ = env.last()
            if terminated:
                env.step(None)
                continue
            check_observation(env, variant, observation)
            other = env.observe("player_1" if agent == "player_0" else "player_0")
            assert not other["action_mask"].any()
            assert np.array_equal(other["observation"], observation["observation"])  # an impartial game
            env.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))


def check_observation(env: raw_env, variant: Variant, observation: dict[str, np.ndarray]) -> None:
    state = env.game_state
    planes, mask = observation["observation"], observation["action_mask"]
    assert env.observation_space(env.agent_selection).contains(observation)
    assert planes.shape == env.observation_kind.shape and planes.dtype == np.int8
    assert bits(legal_action_mask(variant, state), variant.num_actions) == mask.tolist()
    board = state.board
    for square, piece in enumerate(board):
        assert planes[0, square] == (piece != NO_PIECE)
        for k in range(4):
            assert planes[1 + k, square] == (piece != NO_PIECE and piece >> k & 1)
            assert planes[5 + k, square] == (piece != NO_PIECE and not piece >> k & 1)
    claimable = 0
    for i, group in enumerate(variant.groups):
        claimable |= group if state.claimable >> i & 1 else 0
    assert bits(claimable, 16) == planes[9].tolist()
    assert bits(state.available, 16) == planes[10].tolist()
    assert planes[11].tolist() == [int(p == state.hand) for p in range(16)]
    assert planes[16].tolist() == [int(state.placing)] * 16
    if env.observation_kind.level >= 1:
        wins = winning_squares_for(variant, state, state.hand) if state.placing else 0
        assert bits(wins, 16) == planes[17].tolist()
        loses = 0 if state.placing else losing_gives(variant, state)
        assert bits(loses, 16) == planes[18].tolist()


def bits(mask: int, length: int) -> list[int]:
    return [mask >> i & 1 for i in range(length)]


def test_a_hollow_piece_on_the_last_square_is_observed() -> None:
    """The lanes of such a board exceed the signed 64-bit range that compiled code reads."""
    env = started("...............f 1")
    planes = env.last()[0]["observation"]
    assert planes[:9, 15].tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0]
    assert format_position(env.unwrapped.game_state) == env.unwrapped.position == "...............f 1"


# ---------------------------------------------------------------------------------------------------------
# Options and errors
# ---------------------------------------------------------------------------------------------------------
def test_every_observation_kind_gives_the_planes_training_sees(variant_flags: dict) -> None:
    for kind in OBSERVATION_KINDS.values():
        env = quarto_env.env(observation=kind.name, **variant_flags)
        assert env.observation_space("player_0")["observation"].shape == (kind.num_channels, 16)
        env.reset(seed=7)
        rng = np.random.default_rng(7)
        for _agent in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            state = env.unwrapped.game_state
            batch = GameBatch.from_states(env.unwrapped.variant, [state])
            np.testing.assert_array_equal(observation["observation"], batch.observe(batch.all_games, kind)[0])
            env.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))


def test_the_env_docstring_holds_the_channel_table() -> None:
    env_module = sys.modules["quarto_env.env"]  # the package's ``env`` attribute is the function
    assert channel_table() in env_module.__doc__


def test_spaces() -> None:
    env = quarto_env.env(declaration=True, observation="raw")
    assert env.action_space("player_0").n == 17
    assert env.observation_space("player_1")["observation"].shape == (17, 16)
    assert env.observation_space("player_1")["action_mask"].shape == (17,)
    assert quarto_env.env().action_space("player_1").n == 16


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"attributes": 5}, "count must be 1-4"),
        ({"attributes": "size"}, "allowed: height, colour, shape, top"),
        ({"squares": 1}, "True or False"),
        ({"declaration": "yes"}, "True or False"),
        ({"false_declaration": "ignore"}, "allowed: lose, penalty"),
        ({"false_declaration": "penalty"}, "needs declaration=True"),
        ({"false_declaration_penalty": 0.5}, "finite number <= 0"),
        ({"false_declaration_penalty": float("nan")}, "finite number <= 0"),
        ({"first_player": 2}, "'random', 0, 1, 'player_0', 'player_1'"),
        ({"first_player": True}, "'random', 0, 1, 'player_0', 'player_1'"),
        ({"observation": "pixels"}, "allowed: raw, tactical, lookahead, parity"),
        ({"time_limit": 0}, r"time_limit \(None or seconds\) must be a finite number > 0"),
        ({"time_limit": "1s"}, r"time_limit \(None or seconds\) must be a finite number > 0"),
        ({"time_limit": float("inf")}, r"time_limit \(None or seconds\) must be a finite number > 0"),
        ({"clock": 3.0}, "clock must be a function"),
        ({"render_mode": "rgb"}, "'ansi', 'rgb_array', 'human'"),
    ],
)
def test_bad_flags_name_the_allowed_values(flags: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        quarto_env.env(**flags)


@pytest.mark.parametrize("action", [3.7, "2", True, np.float32(2), np.bool_(True), [2]])
def test_actions_must_be_integers(action: object) -> None:
    for env in (quarto_env.env(first_player=0), raw_env(first_player=0)):
        env.reset(seed=0)
        with pytest.raises(TypeError, match="an action must be a Python or numpy integer"):
            env.step(action)
        assert env.unwrapped.game_state == INITIAL_STATE


def test_numpy_integer_actions_are_taken_and_negative_ones_are_out_of_range() -> None:
    env = raw_env(first_player=0)
    env.reset(seed=0)
    env.step(np.int64(2))
    assert env.game_state.hand == 2
    with pytest.raises(IllegalActionError, match="out of range 0-15"):
        env.step(-1)


def test_a_failed_reset_leaves_the_env_as_it_was() -> None:
    env = quarto_env.env()
    env.reset(seed=3)
    env.step(int(np.flatnonzero(env.last()[0]["action_mask"])[0]))
    before = (env.unwrapped.seats, env.unwrapped.game_state, env.agent_selection, env.unwrapped.np_random_seed)
    random_state = env.unwrapped.np_random.bit_generator.state
    with pytest.raises(ValueError, match="position"):
        env.reset(seed=99, options={"position": "not a position"})
    after = (env.unwrapped.seats, env.unwrapped.game_state, env.agent_selection, env.unwrapped.np_random_seed)
    assert after == before
    assert env.unwrapped.np_random.bit_generator.state == random_state


def test_every_mask_is_zero_after_an_illegal_action_ends_the_game() -> None:
    env = quarto_env.env(first_player=0)
    env.reset(seed=0)
    env.step(0)  # player_0 gives piece 0
    env.step(0)  # player_1 places it on square 0
    env.step(0)  # illegal: piece 0 is on the board
    assert all(env.terminations.values())
    for agent in env.possible_agents:
        assert not env.observe(agent)["action_mask"].any()


def test_attributes_take_numpy_integers_and_refuse_other_numbers() -> None:
    assert quarto_env.env(attributes=np.int64(2)).unwrapped.variant == Variant.make(attributes=2)
    with pytest.raises(ValueError, match="a count 1-4"):
        quarto_env.env(attributes=2.0)


def test_reset_from_a_position() -> None:
    env = started("f9.......0..3... 5")
    assert env.unwrapped.position == "f9.......0..3... 5"
    assert env.agent_selection == "player_1"  # the core's player 1 places the fifth piece
    assert env.last()[0]["observation"][PLACING].all()
    assert env.last()[4] == {"outcome": Outcome.IN_PLAY, "winner": NO_WINNER}


def test_reset_rejects_a_finished_position_and_warns_about_unknown_options() -> None:
    env = quarto_env.env()
    with pytest.raises(ValueError, match="finished game"):
        env.reset(options={"position": "1357............ -"})
    with pytest.warns(UserWarning, match="ignores reset options \\['board'\\]"):
        env.reset(options={"board": "x"})


@pytest.mark.parametrize("position", [5, None, b"f9.......0..3... 5", ["f9.......0..3... 5"]])
def test_reset_refuses_a_position_that_is_not_a_string(position: object) -> None:
    env = quarto_env.env()
    env.reset(seed=3)
    before = (env.unwrapped.game_state, env.agent_selection)
    with pytest.raises(TypeError, match=r"'position' must be a string in the position notation, e\.g\. 'f9"):
        env.reset(options={"position": position})
    assert (env.unwrapped.game_state, env.agent_selection) == before  # a failed reset changes nothing


# ---------------------------------------------------------------------------------------------------------
# The benchmark command
# ---------------------------------------------------------------------------------------------------------
def test_quarto_bench_env_prints_and_writes_its_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.bench.env import main

    output = tmp_path / "bench.json"
    assert main(["--seconds", "0.05", "--rounds", "1", "--seed", "3", "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "quarto_v1 / connect_four_v3, both fully wrapped:" in printed
    record = json.loads(output.read_text())
    assert record["command"] == "quarto bench env --seconds 0.05 --rounds 1 --seed 3 --output " + str(output)
    assert record["config"]["seed"] == 3 and record["config"]["observation"] == "tactical"
    turns = record["results"]["median_turns_per_second"]
    assert set(turns) == {
        "connect_four_v3",
        "quarto_v1",
        "connect_four_v3 raw",
        "quarto_v1 raw",
        "quarto_v1 stock",
        "do-nothing env",
    }
    assert all(value > 0 for value in turns.values())
    assert record["results"]["core_actions_per_second"]["compiled_single_thread"] > 0
