"""Every default of an agent has one home: the registry's options (what a spec without the option gets) and the
class's keyword defaults (what ``SolverAgent(variant)`` gets) must agree, kind by kind, option by option."""

from __future__ import annotations

import importlib
import inspect

import pytest

from agents.specs import AGENT_KINDS, RESOLVED_BY_MAKE_AGENT, make_agent
from quarto_env.core import STANDARD


def agent_class(target: str) -> type:
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)


@pytest.mark.parametrize("name", sorted(AGENT_KINDS))
def test_the_registry_and_the_class_agree_on_every_default(name: str) -> None:
    kind = AGENT_KINDS[name]
    parameters = inspect.signature(agent_class(kind.target)).parameters
    for option_name, option in kind.options.items():
        if option_name in RESOLVED_BY_MAKE_AGENT:
            continue
        assert option_name in parameters, f"{name}: the class takes no {option_name}"
        assert parameters[option_name].default == option.default, (
            f"{name}:{option_name} defaults to {option.default!r} in the registry but "
            f"{parameters[option_name].default!r} in {kind.target}"
        )


def test_the_solver_is_exact_from_12_empty_squares_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    """12 by default; a smaller ``empties`` is raised to the opening book's bottom, which is as cheap to solve."""
    from agents.solver import minimax

    assert AGENT_KINDS["solver"].options["empties"].default == 12
    assert make_agent("solver", STANDARD, seed=0).empties == 12
    assert make_agent("solver:empties=9", STANDARD, seed=0).empties == 12  # the standard book's bottom
    monkeypatch.setattr(minimax, "shipped_book", lambda _: None)
    assert make_agent("solver:empties=9", STANDARD, seed=0).empties == 9
