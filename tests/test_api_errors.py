"""The library fails like a library (issue 43, item 4): one base class, ``quarto_env.QuartoError``, for the
errors the project raises, each also the built-in error it is a kind of; explicit checks instead of ``assert``
(the same errors under ``python -O``); an illegal move's infos; ``last()`` after the game; bad reset options;
and a ``VectorQuarto`` too large for the machine refused before anything is allocated."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import quarto_env
from agents.envs.vs_agent import make_vs_agent
from agents.ppo import load_policy
from agents.specs import make_agent
from quarto_env import (
    ActionTypeError,
    CallOrderError,
    CheckpointError,
    DatasetError,
    IllegalActionError,
    MissingExtra,
    Outcome,
    PositionError,
    QuartoError,
    QuartoTypeError,
    QuartoValueError,
    RulesError,
    SpecError,
    VectorQuarto,
)
from quarto_env.core import Variant
from quarto_env.env import raw_env
from quarto_env.notation import parse_position
from quarto_env.vector import RandomLegalActions
from quarto_env.vector_env import QuartoVectorVsAgent

REPO = Path(__file__).resolve().parent.parent
ENVS = {"env": quarto_env.env, "raw_env": raw_env}
MALFORMED_ACTIONS = [999, 16, -1, None, "a", 1.5, True, np.float32(3), np.array(3.0), np.array([3]), np.array(True)]
"""Not moves but the caller's bugs: outside Discrete(16), None for an agent still playing, not an integer."""
HUGE = 10**15
"""Envs whose arrays no machine holds (even numpy's first array, 8 int64 per game, is 58 PiB): before the
bound, numpy's MemoryError came at once here; 10**9 games took 60 GB first on a large machine."""


# ---------------------------------------------------------------------------------------------------------
# The classes
# ---------------------------------------------------------------------------------------------------------
BUILT_IN_BASES = {
    QuartoValueError: (ValueError,),
    QuartoTypeError: (TypeError,),
    CallOrderError: (RuntimeError,),
    RulesError: (ValueError,),
    IllegalActionError: (RulesError, ValueError),
    ActionTypeError: (IllegalActionError, ValueError, TypeError),
    PositionError: (RulesError, ValueError),
    SpecError: (ValueError,),
    CheckpointError: (ValueError,),
    DatasetError: (ValueError,),
    MissingExtra: (ImportError,),
}


@pytest.mark.parametrize("error", list(BUILT_IN_BASES), ids=lambda error: error.__name__)
def test_every_exported_error_is_a_quarto_error_and_its_built_in_kind(error: type[Exception]) -> None:
    assert error.__name__ in quarto_env.__all__
    assert issubclass(error, QuartoError)
    for base in BUILT_IN_BASES[error]:
        assert issubclass(error, base), f"{error.__name__} must stay a {base.__name__}"


def test_the_errors_of_the_upper_floors_are_the_exported_ones() -> None:
    """The classes that agents and experiments raise are the very ones ``quarto_env`` exports, and their own
    error classes are QuartoErrors too: one ``except QuartoError`` catches them all."""
    from agents.networks.checkpoints import CheckpointError as agents_checkpoint_error
    from agents.solver.book import BookError
    from agents.solver.table_files import TableFileError
    from agents.specs import SpecError as agents_spec_error
    from agents.suites import SuiteError
    from experiments.arena.records import RecordError
    from experiments.evaluation.ratings import RatingError
    from experiments.training.dataset import DatasetError as dataset_error
    from quarto_env.core import IllegalActionError as core_illegal_action
    from quarto_env.core import RulesError as core_rules_error
    from quarto_env.notation import PositionError as notation_position_error

    assert agents_spec_error is SpecError and agents_checkpoint_error is CheckpointError
    assert dataset_error is DatasetError and notation_position_error is PositionError
    assert core_rules_error is RulesError and core_illegal_action is IllegalActionError
    for error in (BookError, TableFileError, SuiteError, RatingError, RecordError):
        assert issubclass(error, QuartoValueError), error.__name__


def test_the_errors_are_exported_without_loading_a_framework_or_agents() -> None:
    code = (
        "import sys, quarto_env\nprint(issubclass(quarto_env.SpecError, quarto_env.QuartoError), "
        "sorted(m for m in ('numba', 'gymnasium', 'pettingzoo', 'torch', 'agents') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == "True []"


def test_no_validation_by_assert_in_the_library() -> None:
    """An ``assert`` vanishes under ``python -O``: quarto_env and agents check by explicit code only."""
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for package in ("quarto_env", "agents")
        for path in sorted((REPO / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.Assert)
    ]
    assert not found, "assert statements: " + ", ".join(found)


# ---------------------------------------------------------------------------------------------------------
# Malformed actions in the AEC env
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", list(ENVS.values()), ids=list(ENVS))
@pytest.mark.parametrize("action", MALFORMED_ACTIONS, ids=repr)
def test_a_malformed_action_raises_illegal_action_naming_it_and_the_range(make: type, action: object) -> None:
    env = make()
    env.reset(seed=0)
    before = env.unwrapped.position
    with pytest.raises(IllegalActionError) as raised:
        env.step(action)
    message = str(raised.value)
    assert "0-15" in message and (repr(action) in message or str(action) in message), message
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, QuartoError)
    if action is None or not isinstance(action, int) or isinstance(action, bool):
        assert isinstance(raised.value, ActionTypeError | TypeError)
    assert env.unwrapped.position == before and env.agents == ["player_0", "player_1"]  # nothing changed


@pytest.mark.parametrize("make", list(ENVS.values()), ids=list(ENVS))
@pytest.mark.parametrize("action", [np.int64(3), np.uint8(3), np.array(3), np.array(3, dtype=np.int32)], ids=repr)
def test_a_numpy_integer_or_a_0d_integer_array_is_a_move(make: type, action: object) -> None:
    """What ``model.predict`` returns for one observation is a 0-d array: it is the move it holds."""
    env = make()
    env.reset(seed=0)
    env.step(action)
    assert env.unwrapped.position == "................ 3"


def illegal_move_game(declaration: bool = False) -> tuple[object, str, str]:
    """An env() game in which the agent to act has just placed on an occupied square: ``(env, offender,
    other)``."""
    env = quarto_env.env(declaration=declaration)
    env.reset(seed=0)
    env.step(0)  # give piece 0
    env.step(0)  # place it on square 0
    env.step(1)  # give piece 1
    offender = env.agent_selection
    env.step(0)  # square 0 is taken: an action of the space, outside the mask
    other = next(agent for agent in env.possible_agents if agent != offender)
    return env, offender, other


@pytest.mark.parametrize("declaration", [False, True], ids=["standard", "declaration"])
def test_an_illegal_move_ends_the_game_and_both_infos_say_how(declaration: bool) -> None:
    env, offender, other = illegal_move_game(declaration)
    winner = env.possible_agents.index(other)
    for agent in env.possible_agents:
        assert env.infos[agent] == {"outcome": Outcome.ILLEGAL_ACTION, "winner": winner}
        assert env.terminations[agent]
    assert env._cumulative_rewards == {offender: -1.0, other: 0.0}
    assert all(type(reward) is float for reward in env.rewards.values())  # the stock wrapper gave an int 0
    seen = []
    for agent in env.agent_iter():  # the dead steps read the same infos
        _, _, termination, _, info = env.last()
        seen.append((agent, info["outcome"], info["winner"]))
        assert termination
        env.step(None)
    assert sorted(seen) == sorted((a, Outcome.ILLEGAL_ACTION, winner) for a in env.possible_agents)
    env.reset(seed=1)
    assert env.infos[env.agent_selection] == {"outcome": Outcome.IN_PLAY, "winner": -1}


def test_a_finished_agents_step_takes_only_none() -> None:
    env, _, _ = illegal_move_game()
    with pytest.raises(IllegalActionError, match="only valid action is None"):
        env.step(3)


# ---------------------------------------------------------------------------------------------------------
# Calls out of order, reset options
# ---------------------------------------------------------------------------------------------------------
def play_to_the_end(env: object) -> None:
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in env.agent_iter():
        observation, _, termination, truncation, _ = env.last()
        env.step(None if termination or truncation else int(rng.choice(np.flatnonzero(observation["action_mask"]))))


@pytest.mark.parametrize("make", list(ENVS.values()), ids=list(ENVS))
def test_last_after_the_game_says_it_is_over(make: type) -> None:
    env = make()
    play_to_the_end(env)
    assert env.agents == []
    with pytest.raises(CallOrderError, match=r"game is over.*reset\(\)") as raised:
        env.last()
    assert isinstance(raised.value, RuntimeError)


@pytest.mark.parametrize("make", list(ENVS.values()), ids=list(ENVS))
def test_step_after_the_game_or_before_reset_says_so(make: type) -> None:
    """Wrapped too: PettingZoo's order wrapper only warns and returns ``None`` after the game."""
    env = make()
    with pytest.raises(CallOrderError, match=r"before reset\(\)"):
        env.step(0)
    play_to_the_end(env)
    with pytest.raises(CallOrderError, match="game is over"):
        env.step(None)


SEEDED = {
    "env": lambda seed: quarto_env.env().reset(seed=seed),
    "raw_env": lambda seed: raw_env().reset(seed=seed),
    "QuartoVsAgent": lambda seed: make_vs_agent().reset(seed=seed),
    "QuartoVectorVsAgent": lambda seed: QuartoVectorVsAgent(2).reset(seed=seed),
    "VectorQuarto": lambda seed: VectorQuarto(2).reset(seed=seed),
}


@pytest.mark.parametrize("reset", list(SEEDED.values()), ids=list(SEEDED))
def test_every_env_takes_a_numpy_integer_seed_and_refuses_a_bad_one_in_its_own_words(reset: Any) -> None:
    """``np.int64`` seeds are what a seed drawn by numpy is; Gymnasium's seeding takes only ``int``."""
    reset(np.int64(3))
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(QuartoValueError, match=r"seed \(None or an integer >= 0\)"):
            reset(bad)


BAD_OPTIONS = [
    ("position", QuartoTypeError, "must be None or a dict"),
    (["position"], QuartoTypeError, "must be None or a dict"),
    ({"position": 3}, QuartoTypeError, "must be a string"),
    ({"position": "f9.......0..3... x"}, PositionError, "hex digit"),
    ({"position": "0123............ -"}, PositionError, "finished game"),
]


RESETTABLE = {**ENVS, "QuartoVectorVsAgent": lambda: QuartoVectorVsAgent(2)}


@pytest.mark.parametrize("make", list(RESETTABLE.values()), ids=list(RESETTABLE))
@pytest.mark.parametrize(("options", "error", "words"), BAD_OPTIONS, ids=lambda value: repr(value)[:24])
def test_bad_reset_options_raise_one_clear_error(make: Any, options: object, error: type, words: str) -> None:
    env = make()
    with pytest.raises(error, match=words) as raised:
        env.reset(options=options)
    assert isinstance(raised.value, QuartoError)
    if error is QuartoTypeError:
        assert "'position'" in str(raised.value)


# ---------------------------------------------------------------------------------------------------------
# VectorQuarto's size
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [VectorQuarto, QuartoVectorVsAgent, RandomLegalActions])
def test_a_size_too_large_for_the_machine_is_refused_before_allocating(make: type) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(
            QuartoValueError, match=r"num_envs must be an integer >= 1 and <= [\d,]+, got [\d,]+: each game"
        ):
            make(HUGE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"{peak} bytes allocated before the refusal"


def test_the_bound_follows_the_machines_memory_and_the_bytes_per_game(monkeypatch: pytest.MonkeyPatch) -> None:
    import quarto_env.vector as vector

    monkeypatch.setattr(vector, "memory_bytes", lambda: 2**20)  # a 1 MiB machine
    per_game = vector.game_bytes(vector.observation_kind("tactical"), 16)
    bound = 2**20 // per_game
    assert VectorQuarto(bound).num_envs == bound
    with pytest.raises(QuartoValueError) as raised:
        VectorQuarto(bound + 1)
    message = str(raised.value)
    assert f"<= {bound:,}, got" in message and f"{per_game:,} bytes" in message and "observation='tactical'" in message
    planes_free = vector.game_bytes(None, 16)
    assert VectorQuarto(bound + 1, observation=None).num_envs == bound + 1  # no planes: more games fit
    assert planes_free < per_game


@pytest.mark.parametrize("size", [0, -3, 2.0, 1.5, "8", True, None])
def test_a_size_that_is_not_a_positive_integer_is_refused(size: object) -> None:
    with pytest.raises(QuartoValueError, match="num_envs must be an integer >= 1 and <="):
        VectorQuarto(size)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# The same under python -O
# ---------------------------------------------------------------------------------------------------------
OPTIMIZED_SCRIPT = textwrap.dedent(
    """
    import json, warnings
    import numpy as np
    import quarto_env

    warnings.simplefilter("ignore")
    report = {"debug": __debug__, "errors": {}}
    for action in (999, 16, None, "a", 1.5):
        env = quarto_env.env()
        env.reset(seed=0)
        try:
            env.step(action)
            report["errors"][repr(action)] = ["accepted", ""]
        except Exception as error:
            report["errors"][repr(action)] = [type(error).__name__, str(error)]
    env = quarto_env.env()
    env.reset(seed=0)
    for action in (np.int64(0), np.uint8(0), 1, 0):  # give 0, place on 0 (numpy integers are moves), give 1,
        # place on 0: taken
        env.step(action)
    report["infos"] = {agent: dict(info) for agent, info in env.infos.items()}
    for agent in env.agent_iter():
        env.step(None)
    try:
        env.last()
    except Exception as error:
        report["last"] = type(error).__name__
    try:
        quarto_env.VectorQuarto(10**15)
    except Exception as error:
        report["vector"] = type(error).__name__
    print(json.dumps(report))
    """
)


def test_the_checks_hold_under_python_optimized() -> None:
    result = subprocess.run(
        [sys.executable, "-O", "-c", OPTIMIZED_SCRIPT], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["debug"] is False  # the child really ran without asserts
    for action, (name, message) in report["errors"].items():
        assert name in {"IllegalActionError", "ActionTypeError"}, (action, name, message)
        assert "0-15" in message, message
    illegal = {"outcome": int(Outcome.ILLEGAL_ACTION), "winner": report["infos"]["player_0"]["winner"]}
    assert report["infos"] == {"player_0": illegal, "player_1": illegal} and illegal["winner"] in (0, 1)
    assert report["last"] == "CallOrderError" and report["vector"] == "QuartoValueError"


def test_the_commands_refusals_are_quarto_errors_too() -> None:
    """Every refusal class of the commands' own modules (output paths, outputs, configs, sweeps, resumable
    files) is a QuartoError, so one ``except quarto_env.QuartoError`` catches them all."""
    from agents.storage.files import OutputPathError
    from agents.storage.integrity import IntegrityError
    from experiments.output import OutputError
    from experiments.training.config_checks import ConfigError
    from experiments.training.sweep import SweepError

    for error in (OutputPathError, IntegrityError, OutputError, ConfigError, SweepError):
        assert issubclass(error, quarto_env.QuartoError), error
    for error in (OutputPathError, IntegrityError, ConfigError, SweepError):
        assert issubclass(error, ValueError), error  # callers that caught ValueError still do


def test_numpy_flags_are_flags() -> None:
    """Flags read from an array are numpy scalars: ``np.True_`` is ``True`` (it raised ``RulesError``)."""
    env = quarto_env.env(squares=np.True_, declaration=np.False_, attributes=np.int64(3))
    assert env.unwrapped.variant == Variant.make(3, squares=True)
    assert type(env.unwrapped.variant.squares) is bool
    with pytest.raises(RulesError, match="must be True or False"):
        quarto_env.env(squares=np.int64(1))


@pytest.mark.parametrize("make", list(ENVS.values()), ids=list(ENVS))
def test_an_unknown_argument_of_the_aec_env_is_a_quarto_type_error_naming_the_arguments(make: type) -> None:
    with pytest.raises(
        QuartoTypeError, match=r"quarto_v1 has no argument foo; its arguments: attributes, .*render_mode"
    ):
        make(foo=1)


def test_an_unknown_agent_name_is_refused_naming_the_agents() -> None:
    """A typo in an agent's name used to observe nobody's position (``observe``) or raise a bare ``KeyError``."""
    env = quarto_env.env()
    env.reset(seed=0)
    for call in (env.observe, env.action_space, env.observation_space):
        with pytest.raises(QuartoValueError, match=r"no agent 'player_9': the agents are player_0, player_1"):
            call("player_9")


BAD_LIBRARY_CALLS = [
    (lambda: make_agent(5), QuartoTypeError, "an agent spec is a string"),
    (lambda: make_agent("random", variant="x"), QuartoTypeError, "variant must be a Variant"),
    (lambda: make_agent("random", seed=-1), QuartoValueError, r"seed \(None or an integer >= 0\)"),
    (lambda: make_agent("random", seed=1.5), QuartoValueError, r"seed \(None or an integer >= 0\)"),
    (lambda: parse_position(5), QuartoTypeError, "a position is a string in the position notation"),
    (lambda: parse_position("................ -", 5), QuartoTypeError, "variant must be a Variant"),
    (lambda: load_policy("no-such-run", variant=5), QuartoTypeError, "variant must be a Variant"),
]


@pytest.mark.parametrize(("call", "error", "fragment"), BAD_LIBRARY_CALLS, ids=range(len(BAD_LIBRARY_CALLS)))
def test_library_calls_with_a_wrong_argument_raise_the_projects_errors(call: Any, error: type, fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        call()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"declaration": 1}, r"^declaration must be True or False, got 1$"),
        ({"squares": "yes"}, r"^squares must be True or False, got 'yes'$"),
        ({"attributes": []}, r"^attributes names none: at least one of height, colour, shape, top, or a count 1-4$"),
    ],
)
def test_a_bad_rule_flag_is_named_alone(flags: dict, message: str) -> None:
    """Not "squares and declaration must be True or False, got False, 1", nor "unknown attribute(s) []"."""
    with pytest.raises(RulesError, match=message):
        Variant.make(**flags)
