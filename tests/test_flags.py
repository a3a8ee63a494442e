"""One home for the rule flags (quarto_env.flags.RuleFlags) and one check of an observation argument
(quarto_env.observation.observation_kind), shared by every env."""

from __future__ import annotations

import inspect

import pytest

from quarto_env.core import Variant
from quarto_env.env import raw_env
from quarto_env.flags import FLAG_NAMES, RuleFlags
from quarto_env.observation import OBSERVATION_KINDS, observation_kind
from quarto_env.single_agent import QuartoVsAgent
from quarto_env.vector import VectorQuarto


def test_the_aec_envs_flags_and_defaults_are_rule_flags() -> None:
    parameters = inspect.signature(raw_env).parameters
    defaults = RuleFlags()
    for name in FLAG_NAMES:
        assert parameters[name].default == getattr(defaults, name), name


def test_flags_make_the_variant_and_the_play_settings() -> None:
    flags = RuleFlags("colour", squares=True, declaration=True, false_declaration="penalty", first_player="player_1")
    assert flags.variant == Variant.make("colour", True, True, "penalty")
    assert (flags.penalty, flags.first_seat) == (-0.1, 1)
    assert RuleFlags().first_seat is None
    assert RuleFlags.among({"squares": True, "observation": "raw", "opponent": "greedy"}) == RuleFlags(squares=True)
    assert RuleFlags(**RuleFlags(declaration=True).as_kwargs()) == RuleFlags(declaration=True)


@pytest.mark.parametrize(
    ("flags", "error", "message"),
    [
        ({"squares": True, "corners": True}, TypeError, "VectorQuarto has no flag corners; its flags: attributes,"),
        ({"first_player": "me"}, ValueError, "first_player must be one of"),
        ({"false_declaration_penalty": 1}, ValueError, "false_declaration_penalty"),
        ({"false_declaration_penalty": -0.5}, ValueError, "needs false_declaration='penalty'"),  # it would do nothing
        ({"declaration": True, "false_declaration_penalty": -0.5}, ValueError, "under 'lose' a false declaration is"),
        ({"attributes": 7}, ValueError, "attributes"),
    ],
)
def test_a_bad_flag_is_refused_the_same_way_by_every_env(flags: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        RuleFlags.of(flags, "VectorQuarto")
    with pytest.raises(error, match=message.replace("VectorQuarto", "VectorQuarto")):
        VectorQuarto(2, **flags)


def test_the_single_agent_env_takes_learner_seat_not_first_player() -> None:
    with pytest.raises(TypeError, match="takes learner_seat"):
        QuartoVsAgent(object(), first_player=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="QuartoVsAgent has no flag corners"):
        QuartoVsAgent(object(), corners=True)  # type: ignore[arg-type]


def test_one_observation_check_takes_names_kinds_and_optionally_none() -> None:
    parity = OBSERVATION_KINDS["parity"]
    assert observation_kind("parity") is parity and observation_kind(parity) is parity
    assert observation_kind(None, optional=True) is None
    with pytest.raises(ValueError, match=r"unknown observation kind None; allowed: raw, tactical"):
        observation_kind(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown observation kind 'flat'; allowed: None, raw, tactical"):
        observation_kind("flat", optional=True)
    assert VectorQuarto(2, observation=parity).observation_kind is parity
