"""Bounds refused in one line before any work: the numeric options of agent specs (a minimax ``depth`` whose move
would run for hours, an exploration constant of ``1e308``), YAML that stands for more values than any config once
its aliases are expanded (an alias bomb, refused before it is built: in a config file and in an override), and the
calls of the AEC environment before ``reset()`` (a :class:`~quarto_env.errors.CallOrderError`, not PettingZoo's
``AssertionError``)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import quarto_env
from agents.solver.minimax import MinimaxAgent
from agents.specs import MAX_DEPTH, SpecError, parse_spec
from experiments.training.config import ConfigError
from experiments.training.config_file import MAX_CONFIG_BYTES, MAX_CONFIG_VALUES, load_config
from quarto_env.errors import CallOrderError
from tests.test_bad_input import assert_one_line


# ---------------------------------------------------------------------------------------------------------
# Agent specs
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "refusal"),
    [
        ("minimax:depth=1000000", f"depth must be an integer >= 1 and <= {MAX_DEPTH}, got 1000000"),
        ("minimax:depth=17,time=1", f"depth must be an integer >= 1 and <= {MAX_DEPTH}, got 17"),
        ("solver:depth=99999", f"depth must be an integer >= 1 and <= {MAX_DEPTH}, got 99999"),
        ("mcts:c=1e308", "c must be a finite number > 0 and <= 100, got 1e+308"),
    ],
)
def test_a_numeric_spec_option_out_of_range_is_refused_naming_the_range(spec: str, refusal: str) -> None:
    with pytest.raises(SpecError, match=f"spec {re.escape(repr(spec))}: {re.escape(refusal)}$"):
        parse_spec(spec)


def test_the_library_agent_refuses_a_depth_beyond_the_end_of_every_game() -> None:
    with pytest.raises(ValueError, match="minimax depth must be an integer >= 0 and <= 33, got 1000000"):
        MinimaxAgent(depth=1_000_000)


def test_the_commands_refuse_a_deep_minimax_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "out")
    for argv in (
        ["grade", "minimax:depth=1000000", "--out", out],
        ["tournament", "random", "minimax:depth=1000000", "--games", "2", "--out", out],
        ["play", "--opponent", "minimax:depth=1000000"],
    ):
        assert_one_line(argv, f"depth must be an integer >= 1 and <= {MAX_DEPTH}, got 1000000", capsys)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------------------
# YAML: an alias bomb is refused before it is built, in files and in overrides
# ---------------------------------------------------------------------------------------------------------
def alias_bomb(levels: int, width: int = 10) -> str:
    """A flow list of ``levels`` anchors, each ``width`` aliases of the one before: ``width ** levels`` values in
    a few hundred characters."""
    items = ["&a0 [" + ", ".join(["colour"] * width) + "]"]
    items += [f"&a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]" for level in range(1, levels)]
    return "[" + ", ".join(items) + "]"


def test_an_alias_bomb_in_a_config_file_is_refused_before_it_is_built(tmp_path: Path) -> None:
    """Ten levels (10**10 values) are refused at once; six (a million, safe to build) show that the refusal comes
    from the count of values, not from building them."""
    path = tmp_path / "bomb.yaml"
    for levels in (6, 10):
        path.write_text(f"variant:\n  attributes: {alias_bomb(levels)}\n")
        started = time.perf_counter()
        with pytest.raises(ConfigError) as refusal:
            load_config(path)
        assert time.perf_counter() - started < 5
        assert str(refusal.value) == (
            f"config file {str(path)!r} stands for more than {MAX_CONFIG_VALUES:,} values once its aliases are "
            "expanded (aliases of aliases, or an alias within its own anchor): refused before it is built"
        )


@pytest.mark.parametrize(
    "override", [f"variant={{attributes: {alias_bomb(10)}}}", "variant.attributes=&a [*a]"], ids=["bomb", "loop"]
)
def test_an_alias_bomb_in_an_override_is_refused_before_it_is_built(override: str) -> None:
    with pytest.raises(ConfigError, match=r"^override '.{1,80}(\.\.\. \([\d,]+ characters\))?': the value stands for "):
        load_config(None, [override])


def test_aliases_within_the_bound_still_read(tmp_path: Path) -> None:
    path = tmp_path / "aliases.yaml"
    path.write_text("ppo: {learning_rate: &rate 0.001}\nalphazero: {learning_rate: *rate}\n")
    config = load_config(path)
    assert config.ppo.learning_rate == config.alphazero.learning_rate == 0.001


def test_a_config_file_over_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match=f"more than the {MAX_CONFIG_BYTES:,} it can: refused unread"):
        load_config(path)


# ---------------------------------------------------------------------------------------------------------
# The AEC environment before reset()
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call", ["step", "observe", "render", "state"])
def test_a_call_before_reset_is_a_call_order_error(call: str) -> None:
    env = quarto_env.env(render_mode="ansi")
    calls = {
        "step": lambda: env.step(0),
        "observe": lambda: env.observe("player_0"),
        "render": env.render,
        "state": env.state,
    }
    with pytest.raises(CallOrderError, match=rf"^{call}\(\) before reset\(\): call reset\(\) to start a game$"):
        calls[call]()
    env.reset(seed=0)
    env.step(0)  # and the env plays once reset
    assert env.observe(env.agent_selection)["action_mask"].sum() == 16
