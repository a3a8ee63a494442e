"""The checks every field of a config dataclass gets from its annotation: its type, and its range where it has one.

A number field carries its range in its type, ``Annotated[int, Range(1, MAX_STEPS)]``: the range belongs to the
field of its section, so two sections' fields of one name (``ppo.batch_size``, ``alphazero.batch_size``) each
have their own. :func:`check_types` and :func:`check_ranges` check the fields of one dataclass by their
annotations -- numbers made the type asked for (YAML reads ``1e-3`` as text), then the type; the range -- and
:class:`ConfigError` names the field and what is allowed; :mod:`experiments.training.config` adds the checks
that span several fields.
"""

from __future__ import annotations

import dataclasses
import math
import reprlib
import types
import typing
from typing import Annotated, Any

from quarto_env.checks import checked_number
from quarto_env.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Range:
    """The allowed values of a number field, attached to its type: ``Annotated[int, Range(1, 100)]`` is an
    integer from 1 to 100, ``Annotated[float, Range(above=0, maximum=1)]`` a float in (0, 1]. Every number is
    also finite (:func:`quarto_env.checks.checked_number`)."""

    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None

    def bounds(self) -> dict[str, float]:
        """The bounds that are set, as :func:`~quarto_env.checks.checked_number` takes them, lower first."""
        given = {"minimum": self.minimum, "above": self.above, "maximum": self.maximum}
        return {kind: bound for kind, bound in given.items() if bound is not None}


SHORT = reprlib.Repr()
"""Values in messages, shortened: a long value given by mistake is not printed whole."""
SHORT.maxstring = SHORT.maxother = 80


def field_ranges(kind: type) -> dict[str, Range]:
    """The range of each number field of the dataclass ``kind`` that has one, by field name."""
    hints = typing.get_type_hints(kind, include_extras=True)
    return {
        name: extra
        for name, hint in hints.items()
        if typing.get_origin(hint) is Annotated
        for extra in hint.__metadata__
        if isinstance(extra, Range)
    }


def check_types(part: Any, prefix: str) -> None:
    """Check the type of every field of the dataclass instance ``part`` -- the config or one of its sections, whose
    fields' names start with ``prefix`` in messages -- against its annotation; numbers are made the type asked for
    first (:func:`as_number`). :class:`ConfigError` for the first field of another type."""
    for name, hint in typing.get_type_hints(type(part)).items():  # Annotated stripped: the plain types
        value = as_number(getattr(part, name), hint)
        if not matches(value, hint):
            shown = f"{SHORT.repr(value)} ({type(value).__name__})"
            raise ConfigError(f"config field {prefix}{name} must be {type_name(hint)}, got {shown}")
        setattr(part, name, value)


def check_ranges(part: Any, prefix: str) -> None:
    """Check every number field of ``part`` (its types checked) that has a :class:`Range` against it."""
    hints = typing.get_type_hints(type(part))
    for name, allowed in field_ranges(type(part)).items():
        check_number(getattr(part, name), prefix + name, integer=hints[name] is int, **allowed.bounds())


def check_number(value: Any, field: str, integer: bool = False, **bounds: float) -> None:
    """:func:`~quarto_env.checks.checked_number` for the config field ``field``, failing with a :class:`ConfigError`."""
    try:
        checked_number(value, f"config field {field}", integer=integer, **bounds)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def require(condition: bool, field: str, message: str, value: Any) -> None:
    """:class:`ConfigError` ``config field FIELD MESSAGE, got VALUE`` unless ``condition``."""
    if not condition:
        raise ConfigError(f"config field {field} {message}, got {SHORT.repr(value)}")


def type_name(hint: Any) -> str:
    """The name of a field's type: ``int``, ``list[int]``..."""
    return getattr(hint, "__name__", None) if typing.get_origin(hint) is None else str(hint)  # type: ignore[return-value]


def matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the type ``hint`` (a bool is no number; an int is a float)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(matches(v, item) for v in value)
    if origin is dict:
        key_hint, value_hint = typing.get_args(hint)
        return isinstance(value, dict) and all(
            matches(k, key_hint) and matches(v, value_hint) for k, v in value.items()
        )
    return isinstance(value, hint)


def as_number(value: Any, hint: Any) -> Any:
    """``value`` with its numbers in the type ``hint`` asks for, also inside lists and mappings: YAML reads
    ``1e-3`` and ``5e-1`` as strings and ``2.0e6`` as a float; a float field takes both (and ints), an int field
    an integral value. Anything else is left for the type check to refuse."""
    origin = typing.get_origin(hint)
    if origin is list and isinstance(value, list):
        return [as_number(item, typing.get_args(hint)[0]) for item in value]
    if origin is dict and isinstance(value, dict):
        return {key: as_number(item, typing.get_args(hint)[1]) for key, item in value.items()}
    if hint not in (int, float) or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if hint is int else _int_as_float(value)
    if not isinstance(value, (str, float)):
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    if hint is float:
        return number
    return int(number) if number.is_integer() else value


def _int_as_float(value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # beyond a float's range: infinite, for the range check to refuse
        return math.inf if value > 0 else -math.inf
