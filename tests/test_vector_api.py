"""``quarto_env.VectorQuarto``, the batched self-play API: every env's games against ``quarto_v1`` and the rules
core (states, masks, rewards, terminations, the seat to act, the planes of every observation kind) on seeded
random games for every variant flag combination; auto-reset in the same step; seeding; illegal actions and bad
input refused with their one-line errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import weakref
import zlib

import numpy as np
import pytest

import quarto_env
from quarto_env import vector
from quarto_env.core import DECLARE, State, legal_action_mask, step
from quarto_env.env import raw_env
from quarto_env.observation import OBSERVATION_KINDS, observe
from quarto_env.vector import VectorQuarto

KINDS = [None, *OBSERVATION_KINDS]
NUM_ENVS = 4
STEPS = 100


def random_legal(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """A uniformly random legal action per row of ``masks``."""
    return np.argmax(rng.random(masks.shape) * masks, axis=1)


class Mirror:
    """One env's game replayed one action at a time: by the rules core, and by a ``quarto_v1`` per kind."""

    def __init__(self, flags: dict, first_seat: int) -> None:
        rules = {k: v for k, v in flags.items() if k != "first_player"}
        self.envs = {kind: raw_env(**rules, first_player=first_seat, observation=kind) for kind in OBSERVATION_KINDS}
        for env in self.envs.values():
            env.reset()
        self.any_env = self.envs["raw"]
        self.variant = self.any_env.variant
        self.state = State()

    def play(self, action: int) -> dict[str, float]:
        self.state = step(self.variant, self.state, action)
        rewards = []
        for env in self.envs.values():
            env.step(action)
            rewards.append(dict(env.rewards))
        assert all(r == rewards[0] for r in rewards)
        return rewards[0]

    def view(self, kind: str) -> dict[str, np.ndarray]:
        env = self.envs[kind]
        return env.observe(env.agent_selection)


def seed_of(flags: dict) -> int:
    return zlib.crc32(repr(sorted(flags.items())).encode())


def test_games_follow_quarto_v1_and_the_core(variant_flags: dict) -> None:
    seed = seed_of(variant_flags)
    envs = {kind: VectorQuarto(NUM_ENVS, observation=kind, seed=seed, **variant_flags) for kind in KINDS}
    answers = {kind: env.reset() for kind, env in envs.items()}
    first = envs[None]
    mirrors = [Mirror(variant_flags, int(first.first_seats[i])) for i in range(NUM_ENVS)]
    rng = np.random.default_rng(seed)
    finished = 0
    for _ in range(STEPS):
        for i, mirror in enumerate(mirrors):
            check_env(i, mirror, envs, answers)
        actions = random_legal(rng, answers[None][-1]["action_mask"])
        results = {kind: env.step(actions) for kind, env in envs.items()}
        for i, mirror in enumerate(mirrors):
            rewards = mirror.play(int(actions[i]))
            for kind, (_, step_rewards, terminated, truncated, info) in results.items():
                assert step_rewards[i].tolist() == pytest.approx([rewards["player_0"], rewards["player_1"]])
                assert terminated[i] == mirror.state.over and not truncated[i]
                if kind is not None and terminated[i]:
                    np.testing.assert_array_equal(info["final_observation"][i], mirror.view(kind)["observation"])
                elif kind is not None:
                    assert not info["final_observation"][i].any()
            if mirror.state.over:
                finished += 1
                mirrors[i] = Mirror(variant_flags, int(first.first_seats[i]))
        answers = {kind: (result[0], result[-1]) for kind, result in results.items()}
    assert finished >= NUM_ENVS  # auto-reset was exercised


def check_env(i: int, mirror: Mirror, envs: dict, answers: dict) -> None:
    """Env ``i`` of every kind shows the mirror's position, masks, seat to act and planes."""
    for kind, env in envs.items():
        observations, info = answers[kind]
        assert env.state(i) == mirror.state
        raw_view = mirror.view("raw")
        np.testing.assert_array_equal(info["action_mask"][i], raw_view["action_mask"])
        assert mirror.any_env.agent_selection == f"player_{info['current_player'][i]}"
        expected_mask = legal_action_mask(mirror.variant, mirror.state) & ~(mirror.any_env._declared_falsely << DECLARE)
        assert np.flatnonzero(info["action_mask"][i]).tolist() == [a for a in range(17) if expected_mask >> a & 1]
        if kind is None:
            assert observations is None
        else:
            assert observations.shape == (NUM_ENVS, *OBSERVATION_KINDS[kind].shape)
            np.testing.assert_array_equal(observations[i], mirror.view(kind)["observation"])


# ---------------------------------------------------------------------------------------------------------
# Auto-reset
# ---------------------------------------------------------------------------------------------------------
QUICK_WIN = [0, 0, 2, 1, 4, 2, 6, 3]
"""Give piece 0, place it on square 0, give 2, place on 1, ...: four short pieces fill row 0 at the eighth action,
played by the first player (who gives 0 and 4, and places 2 and 6)."""


@pytest.mark.parametrize("kind", ["raw", "parity"])
def test_a_finished_game_is_replaced_in_the_same_step(kind: str) -> None:
    envs = VectorQuarto(3, observation=kind, seed=1)
    envs.reset()
    variant = envs.variant
    state = State()
    for action in QUICK_WIN[:-1]:
        state = step(variant, state, action)
        envs.step(np.array([action, action, action]))
    winners = envs.first_seats.copy()
    observations, rewards, terminated, truncated, info = envs.step(np.full(3, QUICK_WIN[-1]))
    final = step(variant, state, QUICK_WIN[-1])
    assert final.over and final.winner == 0  # the rules core's player 0: the seat that gave first
    assert terminated.all() and not truncated.any()
    assert rewards.tolist() == [[1.0, -1.0] if seat == 0 else [-1.0, 1.0] for seat in winners]
    for i in range(3):
        np.testing.assert_array_equal(info["final_observation"][i], observe(variant, final, kind))
        np.testing.assert_array_equal(observations[i], observe(variant, State(), kind))  # the new game's opening
        assert envs.state(i) == State()
        assert info["current_player"][i] == envs.first_seats[i]  # who gives first in the new game
    assert info["action_mask"].all()  # every piece can be given


def test_only_the_rows_that_ended_are_reset() -> None:
    envs = VectorQuarto(2, observation="tactical", seed=2)
    envs.reset()
    for action in QUICK_WIN[:-1]:
        envs.step(np.array([action, action]))
    observations, rewards, terminated, _, info = envs.step(np.array([QUICK_WIN[-1], 5]))  # env 1 does not win
    assert terminated.tolist() == [True, False]
    assert rewards[1].tolist() == [0.0, 0.0]
    assert not info["final_observation"][1].any()
    assert envs.state(1).num_empty == 12 and envs.state(0) == State()
    np.testing.assert_array_equal(observations[1], observe(envs.variant, envs.state(1), "tactical"))


def test_a_false_declaration_under_the_penalty_policy_costs_its_seat_and_the_same_seat_acts_again() -> None:
    envs = VectorQuarto(2, observation="raw", seed=3, declaration=True, false_declaration="penalty")
    _, info = envs.reset()
    seats = info["current_player"].copy()
    _, rewards, terminated, _, info = envs.step(np.array([DECLARE, 4]))
    assert rewards[0, seats[0]] == pytest.approx(-0.1) and rewards[0, 1 - seats[0]] == 0
    assert not terminated.any()
    assert info["current_player"][0] == seats[0] and not info["action_mask"][0, DECLARE]
    with pytest.raises(ValueError, match=r"illegal actions in envs \[0\]: actions \[16\]"):
        envs.step(np.array([DECLARE, 0]))
    _, _, _, _, info = envs.step(np.array([7, 0]))  # a give: the declaration is legal again
    assert info["action_mask"][0, DECLARE]


# ---------------------------------------------------------------------------------------------------------
# Seeding
# ---------------------------------------------------------------------------------------------------------
def play(envs: VectorQuarto, seed: int | None, steps: int = 60) -> list[np.ndarray]:
    """What ``steps`` random steps from ``reset(seed)`` return, flattened."""
    _, info = envs.reset(seed=seed)
    rng = np.random.default_rng(0)
    record = [info["current_player"].copy()]
    for _ in range(steps):
        observations, rewards, terminated, _, info = envs.step(random_legal(rng, info["action_mask"]))
        record += [observations, rewards, terminated, info["current_player"], info["action_mask"]]
        record += [envs.first_seats.copy(), info.get("final_observation")]
    return record


def test_the_same_seed_gives_the_same_games() -> None:
    first = play(VectorQuarto(32, observation="parity", seed=5), None)
    for again in (
        play(VectorQuarto(32, observation="parity"), 5),
        play(VectorQuarto(32, observation="parity", seed=9), 5),
    ):
        assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_a_different_seed_draws_other_first_players() -> None:
    _, five = VectorQuarto(64, seed=5).reset()
    _, six = VectorQuarto(64, seed=6).reset()
    assert not np.array_equal(five["current_player"], six["current_player"])
    assert 16 < five["current_player"].sum() < 48  # both seats give first, about as often


def test_reset_without_a_seed_goes_on_drawing() -> None:
    envs = VectorQuarto(64, seed=7)
    _, first = envs.reset()
    _, second = envs.reset()
    assert not np.array_equal(first["current_player"], second["current_player"])
    _, again = envs.reset(seed=7)
    assert np.array_equal(first["current_player"], again["current_player"])


@pytest.mark.parametrize(("first_player", "seat"), [(0, 0), (1, 1), ("player_1", 1)])
def test_a_fixed_first_player_gives_first_in_every_game(first_player: int | str, seat: int) -> None:
    envs = VectorQuarto(8, observation=None, seed=0, first_player=first_player)
    _, info = envs.reset()
    assert (info["current_player"] == seat).all()
    rng = np.random.default_rng(0)
    for _ in range(80):
        _, _, terminated, _, info = envs.step(random_legal(rng, info["action_mask"]))
        assert (info["current_player"][terminated] == seat).all() and (envs.first_seats == seat).all()


# ---------------------------------------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("num_envs", "threads"), [(32, 2), (7, 3), (3, 8)])
@pytest.mark.parametrize("observation", ["tempo", None])
def test_threads_give_the_same_games_bit_for_bit(num_envs: int, threads: int, observation: str | None) -> None:
    flags = {"declaration": True, "false_declaration": "penalty"}  # penalties and repeated turns too
    alone = play(VectorQuarto(num_envs, observation=observation, **flags), 3, steps=80)
    shared = VectorQuarto(num_envs, observation=observation, threads=threads, **flags)
    assert len(shared.shares.bounds) == min(threads, num_envs) + 1  # the envs are shared out
    again = play(shared, 3, steps=80)
    assert all(np.array_equal(a, b) for a, b in zip(alone, again, strict=True))


def test_illegal_actions_on_threads_play_nothing() -> None:
    envs = VectorQuarto(6, observation="tempo", seed=0, threads=2)
    envs.reset()
    before = envs.games.positions.copy()
    with pytest.raises(ValueError, match=re.escape("illegal actions in envs [4]: actions [16]")):
        envs.step(np.array([0, 1, 2, 3, 16, 5]))
    assert np.array_equal(envs.games.positions, before)


FORKED_THREADS = """
import multiprocessing, numba, numpy as np
from quarto_env import ThreadsError, VectorQuarto

def step(threads):
    envs = VectorQuarto(4, observation=None, seed=0, threads=threads)
    envs.reset()
    envs.step(np.array([0, 1, 2, 3]))

def child():
    step(1)
    try:
        step(2)
    except ThreadsError as error:
        print("refused:", error, flush=True)

if __name__ == "__main__":
    step(2)
    print("layer:", numba.threading_layer(), flush=True)
    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join()
    print("exit:", process.exitcode, flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_process_is_refused_threads_in_one_line() -> None:
    done = subprocess.run([sys.executable, "-c", FORKED_THREADS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    if "layer: omp" not in done.stdout:
        pytest.skip(f"numba's threading layer here is not OpenMP ({done.stdout.splitlines()[0]})")
    assert "refused: threads > 1 (VectorQuarto, RandomLegalActions): this process was forked" in done.stdout
    assert "use threads=1" in done.stdout and "exit: 0" in done.stdout


# ---------------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------------
def test_illegal_actions_are_refused_with_the_envs_and_nothing_is_played() -> None:
    envs = VectorQuarto(4, observation="raw", seed=0)
    envs.reset()
    envs.step(np.array([5, 5, 5, 5]))  # piece 5 is in hand everywhere: square 5 is free, piece 5 is gone
    before = envs.games.positions.copy(), envs.first_seats.copy()
    with pytest.raises(
        ValueError, match=re.escape("illegal actions in envs [1, 3]: actions [16, -1]; env 1 allows [0,")
    ):
        envs.step(np.array([5, 16, 6, -1]))
    assert np.array_equal(envs.games.positions, before[0]) and np.array_equal(envs.first_seats, before[1])
    with pytest.raises(quarto_env.core.IllegalActionError, match=r"envs \[0\]: actions \[18446744073709551615\]"):
        envs.step(np.array([2**64 - 1, 0, 0, 0], dtype=np.uint64))
    envs.step(np.array([5, 6, 7, 8], dtype=np.uint8))  # any integer dtype
    assert envs.state(0).occupied == 1 << 5


def test_many_illegal_actions_are_counted() -> None:
    envs = VectorQuarto(20, observation=None)
    envs.reset()
    with pytest.raises(ValueError, match=r"envs \[0, 1, 2, 3, 4, 5, 6, 7\] and 12 more: actions \[16, 16"):
        envs.step(np.full(20, 16))


@pytest.mark.parametrize(
    ("actions", "error", "message"),
    [
        (np.zeros(5, dtype=np.int64), ValueError, r"shape \(4,\), one per env; got shape \(5,\)"),
        (np.zeros((4, 1), dtype=np.int64), ValueError, r"shape \(4,\), one per env; got shape \(4, 1\)"),
        (np.zeros(4), TypeError, r"actions must be integers.*got dtype float64"),
        (np.zeros(4, dtype=bool), TypeError, r"got dtype bool"),
        (["a", "b", "c", "d"], TypeError, r"got dtype <U1"),
        (3, ValueError, r"got shape \(\)"),
    ],
)
def test_actions_of_the_wrong_shape_or_type_are_refused(actions: object, error: type, message: str) -> None:
    envs = VectorQuarto(4)
    envs.reset()
    with pytest.raises(error, match=message):
        envs.step(actions)  # type: ignore[arg-type]
    envs.step([1, 2, 3, 4])  # type: ignore[arg-type]  # a list of integers is taken


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"num_envs": 0}, ValueError, r"num_envs must be an integer >= 1 and <= [\d,]+, got 0"),
        ({"num_envs": 2.5}, ValueError, r"num_envs must be an integer >= 1 and <= [\d,]+, got 2.5"),
        ({"observation": "planes"}, ValueError, r"unknown observation kind 'planes'; allowed: None, raw, tactical"),
        ({"seed": -1}, ValueError, r"seed \(None or an integer >= 0\) must be an integer >= 0, got -1"),
        ({"time_limit": 1}, TypeError, r"no flag time_limit; its flags: attributes, squares, declaration"),
        ({"first_player": 2}, ValueError, r"first_player must be one of 'random', 0, 1, 'player_0', 'player_1'"),
        ({"false_declaration": "penalty"}, ValueError, r"needs declaration=True"),
        ({"false_declaration_penalty": 1}, ValueError, r"false_declaration_penalty must be a finite number <= 0"),
        ({"attributes": "size"}, ValueError, r"unknown attribute"),
        ({"threads": 0}, ValueError, r"threads must be an integer >= 1 \(this machine has \d+ cores\), got 0"),
        ({"threads": 1.5}, ValueError, r"threads must be an integer >= 1 .*, got 1.5"),
        ({"threads": True}, ValueError, r"threads must be an integer >= 1 .*, got True"),
    ],
)
def test_bad_arguments_name_the_allowed_values(arguments: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        VectorQuarto(arguments.pop("num_envs", 2), **arguments)


def test_step_before_reset_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"call reset\(\) first"):
        VectorQuarto(2).step(np.zeros(2, dtype=np.int64))


# ---------------------------------------------------------------------------------------------------------
# Recycled planes: an array the caller holds is never written again; one it let go of is handed out again
# ---------------------------------------------------------------------------------------------------------
def test_planes_the_caller_holds_are_never_written_again() -> None:
    envs = VectorQuarto(8, observation="parity", seed=6)
    rng = np.random.default_rng(6)
    observations, info = envs.reset()
    kept: list[tuple[np.ndarray, np.ndarray]] = []  # every tenth step's planes, held as a list holds them
    last = view = None  # the last step's planes, as a loop holds them; a view of older ones, their array let go
    for step_number in range(60):
        if last is not None:
            np.testing.assert_array_equal(last[0], last[1])
        observations, _, _, _, info = envs.step(random_legal(rng, info["action_mask"]))
        for held in (observations, info["final_observation"]):
            if step_number % 10 == 0:
                kept.append((held, held.copy()))
        if step_number == 5:
            view = (observations[2:5], observations[2:5].copy())
        last = (observations, observations.copy())
    for held, copy in [*kept, view]:
        np.testing.assert_array_equal(held, copy)


def test_planes_let_go_are_handed_out_again_and_held_ones_are_not() -> None:
    arrays = vector.RecycledArrays()
    first = arrays.empty((4, 27, 16), np.int8)
    first_ref = weakref.ref(first)
    del first
    again = arrays.empty((4, 27, 16), np.int8)
    assert again is first_ref()  # the same array, kept alive by the pool: not a new one at the same address
    view = again[1]
    del again
    other = arrays.empty((4, 27, 16), np.int8)
    assert other is not first_ref() and not np.shares_memory(other, view)  # a view holds its array
    del view
    assert arrays.empty((4, 27, 16), np.int8) is first_ref()
    assert arrays.empty((2, 27, 16), np.int8).shape == (2, 27, 16)  # another shape: a new array


def test_final_planes_are_read_only_and_zero_but_where_a_game_ended_after_an_illegal_step() -> None:
    # The step clears only the rows of the final planes it wrote in the array's last use (FinalPlanes): the caller
    # may not write the others, and a refused step, which writes nothing, must leave that record as it was.
    envs = VectorQuarto(16, observation="tactical", seed=3)
    rng = np.random.default_rng(3)
    _, info = envs.reset()
    ended = 0
    for step_number in range(80):
        if step_number % 7 == 3:
            with pytest.raises(quarto_env.core.IllegalActionError):
                envs.step(np.full(16, -1))
        _, _, terminated, _, info = envs.step(random_legal(rng, info["action_mask"]))
        final = info["final_observation"]
        assert not final.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            final[0, 0, 0] = 1
        assert not final[~terminated].any() and all(final[i].any() for i in np.flatnonzero(terminated))
        ended += int(terminated.sum())
    assert ended >= 16  # rows were written, then cleared in later uses of their arrays


# ---------------------------------------------------------------------------------------------------------
# Without planes; the package; the documented example
# ---------------------------------------------------------------------------------------------------------
def test_without_planes_nothing_is_observed_and_the_games_are_the_same() -> None:
    bare, planes = VectorQuarto(16, observation=None, seed=4), VectorQuarto(16, observation="raw", seed=4)
    assert bare.observation_shape is None and planes.observation_shape == (17, 16)
    for with_planes, without in zip(play(planes, None), play(bare, None), strict=True):
        if without is None:
            assert with_planes.shape == (16, 17, 16)
        else:
            assert np.array_equal(with_planes, without)
    _, info = bare.reset()
    assert "final_observation" not in bare.step(random_legal(np.random.default_rng(0), info["action_mask"]))[-1]


def test_the_package_exports_it_and_loads_no_framework() -> None:
    code = (
        "import sys\nfrom quarto_env import VectorQuarto\n"
        "heavy = {'gymnasium', 'pettingzoo', 'torch', 'jax', 'PIL', 'matplotlib'} & set(sys.modules)\n"
        "assert not heavy, heavy\nassert VectorQuarto.__module__ == 'quarto_env.vector'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert quarto_env.VectorQuarto is VectorQuarto and "VectorQuarto" in quarto_env.__all__


def test_the_documented_example_runs() -> None:
    example = re.search(r"```python\n(.*?)```", vector.__doc__ or "", re.S)
    assert example
    namespace: dict = {}
    exec(example.group(1).replace("range(1000)", "range(100)"), namespace)
    assert namespace["scores"].sum() == 0 and np.abs(namespace["scores"]).sum() > 0  # +1 and -1 per win
