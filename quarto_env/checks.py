"""Checks of the values the environments take, and the messages that quote them back.

- :func:`checked_number` and :func:`number_parser`: a number is finite and within its range, or the error
  names the field, the value and what is allowed. NaN and infinity never pass: a ``time=nan`` budget would
  never run out. (The argparse ``type=`` built on them is :func:`experiments.options.number_argument`.)
- :func:`shortened` and :func:`one_line`: the user's input quoted back in a message, cut short.
- :func:`checked_first_player` and :func:`checked_penalty`: the flags that ``quarto_v1`` and
  :class:`quarto_env.vector.VectorQuarto` take beside the rules (which :meth:`quarto_env.core.Variant.make` checks).

Files written whole or not at all, and output paths checked before any work, are :mod:`agents.storage.files`'.

Standard library only, like the rules core.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

from quarto_env.errors import QuartoValueError


# ---------------------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------------------
def checked_number(
    value: object,
    name: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
) -> float:
    """``value`` if it is a finite number (an integer, with ``integer``) with ``value >= minimum``,
    ``value > above`` and ``value <= maximum`` (each bound optional); ``ValueError`` naming ``name``, the
    value and the allowed range otherwise. Booleans are not numbers here."""
    allowed = describe_range(minimum, above, maximum, integer)
    if isinstance(value, bool | str) or not isinstance(value, numbers.Real):  # numpy's scalars are Real too
        raise QuartoValueError(f"{name} must be {allowed}, got {value!r}")
    # An integer stays an int: exact however large (a float would round 2**60 + 1 or overflow at 10**400).
    number = int(value) if isinstance(value, numbers.Integral) else float(value)
    if (
        not _finite(number, integer)
        or (minimum is not None and number < minimum)
        or (above is not None and number <= above)
        or (maximum is not None and number > maximum)
    ):
        raise QuartoValueError(f"{name} must be {allowed}, got {value!r}")
    return int(number) if integer else float(number)


def checked_seed(seed: object) -> int | None:
    """``seed`` as a Python ``int`` (a numpy integer too: Gymnasium's seeding takes only ``int``), or ``None``;
    ``ValueError`` naming the allowed values otherwise."""
    if seed is None:
        return None
    return int(checked_number(seed, "seed (None or an integer >= 0)", minimum=0, integer=True))


def _finite(number: float, integer: bool) -> bool:
    """Whether ``number`` is finite -- and whole with ``integer``, or within a float's range without it."""
    if isinstance(number, int):
        return integer or number.bit_length() <= 1023  # float(number) may overflow beyond
    return math.isfinite(number) and (number.is_integer() or not integer)


def number_parser(
    name: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
) -> Callable[[str], float]:
    """A parser of text into a number checked by :func:`checked_number`, raising ``ValueError`` with the full
    message: an agent-spec option type (for argparse, :func:`number_argument` shows that message)."""

    def parse(text: str) -> float:
        number: float
        try:
            number = int(text)  # exact, however large
        except ValueError:
            try:
                number = float(text)  # "2.0" and "1e3" name integers too
            except ValueError:
                raise QuartoValueError(f"{name} must be {allowed}, got {text!r}") from None
        return checked_number(number, name, minimum=minimum, above=above, maximum=maximum, integer=integer)

    allowed = describe_range(minimum, above, maximum, integer)
    parse.__name__ = name  # what argparse shows in "invalid <name> value"
    return parse


ECHO_LIMIT = 80
"""The most characters of the user's input that a message or an answer quotes back."""


def shortened(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` itself up to ``limit`` characters; else its first ``limit`` characters, ``...`` and its length,
    so that an error about a 1 MB line does not print that line again."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def one_line(message: object, limit: int = 4 * ECHO_LIMIT) -> str:
    """``message`` (an exception or text) on one line -- every run of whitespace, newlines included, one space --
    and :func:`shortened` to ``limit`` characters: for a message that quotes a library's error, such as torch's
    list of missing keys."""
    return shortened(" ".join(str(message).split()), limit)


def describe_range(minimum: float | None, above: float | None, maximum: float | None, integer: bool) -> str:
    """What :func:`checked_number` allows, in the words of its message: ``an integer >= 1 and <= 64``."""
    kind = "an integer" if integer else "a finite number"
    bounds = [f">= {_bound(minimum)}" if minimum is not None else "", f"> {_bound(above)}" if above is not None else ""]
    bounds.append(f"<= {_bound(maximum)}" if maximum is not None else "")
    bounds = [b for b in bounds if b]
    return f"{kind} {' and '.join(bounds)}" if bounds else kind


def _bound(bound: float) -> str:
    """A bound as the user would type it: ``4294967295`` and ``86400``, not ``4.29497e+09``; ``0.5`` and ``1e-06``."""
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e16 else f"{bound:g}"


# ---------------------------------------------------------------------------------------------------------
# The environments' flags beside the rules
# ---------------------------------------------------------------------------------------------------------
AGENTS = ("player_0", "player_1")
"""The two seats at the table, ``player_0`` and ``player_1``."""
FIRST_PLAYER_CHOICES = ("random", 0, 1, *AGENTS)
"""What ``first_player`` takes: a draw from the seed, or the seat that gives first."""


def checked_agent(agent: object) -> str:
    """``agent`` if it names a seat of :data:`AGENTS`; ``ValueError`` naming them otherwise (a dict lookup's
    ``KeyError``, or an observation of nobody's, would hide the typo)."""
    if agent != AGENTS[0] and agent != AGENTS[1]:  # two comparisons: observe() runs at every step
        raise QuartoValueError(f"no agent {agent!r}: the agents are {', '.join(AGENTS)}")
    return agent  # type: ignore[return-value]


def checked_first_player(value: object) -> int | None:
    """The seat (0 or 1) that ``first_player`` makes give first, or ``None`` for ``"random"``, a draw from the
    seed; ``ValueError`` naming the allowed values otherwise."""
    if isinstance(value, bool) or value not in FIRST_PLAYER_CHOICES:
        allowed = ", ".join(repr(c) for c in FIRST_PLAYER_CHOICES)
        raise QuartoValueError(f"first_player must be one of {allowed}; got {value!r}")
    if value == "random":
        return None
    return AGENTS.index(value) if isinstance(value, str) else int(value)


def checked_penalty(value: object) -> float:
    """``false_declaration_penalty``: a finite number <= 0, the reward of an ignored false declaration."""
    return float(checked_number(value, "false_declaration_penalty", maximum=0))
