"""The rule flags of Quarto, in one place: :class:`RuleFlags`, taken by the AEC env (``quarto_env.env``), the
Gymnasium envs (:mod:`quarto_env.single_agent`, :mod:`quarto_env.vector_env`), :class:`quarto_env.VectorQuarto`
and the agent-spec entry points (:mod:`agents.envs.vs_agent`).

Four flags make the rule variant (:class:`quarto_env.core.Variant`); two more say how a game is played out:
``false_declaration_penalty`` (the reward of an ignored false declaration) and ``first_player`` (who gives first).
Every value is checked once, when the flags are made; an unknown flag name is a ``TypeError`` that lists them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from quarto_env.checks import checked_first_player, checked_penalty
from quarto_env.core import Variant
from quarto_env.errors import QuartoTypeError, RulesError


@dataclasses.dataclass(frozen=True)
class RuleFlags:
    """The rules of one game of Quarto and how it is played out; the env pages give each flag's meaning."""

    attributes: int | str | list[str] | tuple[str, ...] | None = None
    """The attributes that count (a count 1-4, a name or a list of names; ``None``: all four)."""
    squares: bool = False
    """The 2x2 squares count as lines too."""
    declaration: bool = False
    """A line must be declared ("Quarto!", action 16) to win."""
    false_declaration: str = "lose"
    """What a declaration with nothing to claim does: ``"lose"``, or ``"penalty"``."""
    false_declaration_penalty: float = -0.1
    """The reward of a false declaration under ``"penalty"`` (a finite number <= 0)."""
    first_player: int | str = "random"
    """Who gives first: ``"random"`` (drawn from the seed), ``"player_0"``/``0`` or ``"player_1"``/``1``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_variant", Variant.make(self.attributes, self.squares, self.declaration,
                                                          self.false_declaration))  # fmt: skip
        object.__setattr__(self, "_penalty", checked_penalty(self.false_declaration_penalty))
        if self.false_declaration != "penalty" and self.penalty != DEFAULT_PENALTY:  # it would do nothing
            raise RulesError(
                f"false_declaration_penalty={self.false_declaration_penalty!r} needs false_declaration='penalty': "
                f"under {self.false_declaration!r} a false declaration is never penalised"
            )
        object.__setattr__(self, "_first_seat", checked_first_player(self.first_player))

    @property
    def variant(self) -> Variant:
        """The rule variant the first four flags make."""
        return self._variant  # type: ignore[attr-defined,no-any-return]

    @property
    def penalty(self) -> float:
        """``false_declaration_penalty``, checked, as a float."""
        return self._penalty  # type: ignore[attr-defined,no-any-return]

    @property
    def first_seat(self) -> int | None:
        """The seat (0 or 1) that gives first in every game, or ``None``: drawn for each game from the seed."""
        return self._first_seat  # type: ignore[attr-defined,no-any-return]

    @classmethod
    def of(cls, flags: Mapping[str, Any], owner: str) -> RuleFlags:
        """The flags named in ``flags`` (the others at their defaults); ``TypeError`` naming ``owner`` and the
        flags it takes if a name is not one of them."""
        unknown = sorted(set(flags) - set(FLAG_NAMES))
        if unknown:
            raise QuartoTypeError(f"{owner} has no flag {', '.join(unknown)}; its flags: {', '.join(FLAG_NAMES)}")
        return cls(**flags)

    @classmethod
    def among(cls, kwargs: Mapping[str, Any]) -> RuleFlags:
        """The flags among the keyword arguments ``kwargs`` of an env, whose other arguments are left out."""
        return cls(**{name: kwargs[name] for name in FLAG_NAMES if name in kwargs})

    def as_kwargs(self) -> dict[str, Any]:
        """The flags as keyword arguments of the envs."""
        return {name: getattr(self, name) for name in FLAG_NAMES}


DEFAULT_PENALTY = RuleFlags.false_declaration_penalty
"""The reward of a false declaration unless said: only ``false_declaration="penalty"`` may say another."""
FLAG_NAMES = tuple(field.name for field in dataclasses.fields(RuleFlags))
"""The names of the rule flags, in the order the env pages list them."""
