"""The game-record format: one JSON object per line (``games.jsonl``), written by ``quarto tournament`` and
``quarto play`` and read by ``quarto replay``: the fields of :class:`agents.match.GameRecord` (``seats``,
``actions``, ``winner``, ``end``, ``move_seconds``, ``positions``), the rule ``variant``
(``Variant.to_dict``), and whatever the writer adds (a tournament adds its schedule: ``game``, ``pair``,
``round``, ``seed``), and its seal (``seal``: the format and the SHA-256 of the rest, :mod:`agents.storage.integrity`).
:func:`check_record` checks a line read back, with a one-line :class:`RecordError`; a tournament resumed from its
``games.jsonl`` uses only lines that prove themselves (:func:`unsealed_record`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents.match import GameRecord
from agents.storage.integrity import IntegrityError, sealed_json, unsealed_json
from quarto_env.checks import checked_number, shortened
from quarto_env.core import DECLARE, NO_WINNER, STANDARD, Variant
from quarto_env.errors import RecordError

RECORD_KIND = "game record"
"""The ``kind`` of a game record's seal."""
RECORD_FORMAT = 1
"""The version of the game-record layout (records written before it was sealed have no seal)."""


def record_line(record: GameRecord, variant: Variant, **extra: Any) -> str:
    """One ``games.jsonl`` line (with its newline) for ``record`` played under ``variant``, sealed."""
    fields = {**extra, "variant": variant.to_dict(), **record.to_dict()}
    return json.dumps(sealed_json(fields, RECORD_KIND, RECORD_FORMAT)) + "\n"


def unsealed_record(record: object, where: str) -> dict[str, Any]:
    """The fields of ``record`` (one parsed ``games.jsonl`` line) without its seal, once the seal proves them;
    :class:`RecordError` naming ``where`` for a record without one (an older version's), of another format,
    or altered since it was written."""
    try:
        return unsealed_json(record, RECORD_KIND, RECORD_FORMAT, where)
    except IntegrityError as error:
        raise RecordError(str(error)) from None


RECORD_ENDS = {"win": (0, 1), "forfeit": (0, 1), "draw": (NO_WINNER,), "abandoned": (NO_WINNER,)}
"""How a recorded game can end (``GameRecord.end``, and ``"abandoned"`` from ``quarto play``), and the
``winner`` values each allows."""


def check_record(record: object) -> Variant:
    """The rule variant of ``record`` (one parsed ``games.jsonl`` line) once the kind and range of each field the
    format defines are checked: ``variant``, ``seats``, ``actions``, ``opening``, ``move_seconds``,
    ``positions``, ``winner``, ``end``. :class:`RecordError` names the first bad one. Whether the actions are
    legal and agree with the winner and the positions, only a replay tells (``quarto replay`` does)."""
    if not isinstance(record, dict):
        raise RecordError(f"a game record is a JSON object {{...}}, got {_echo(record)}")
    missing = [key for key in ("variant", "seats", "actions") if key not in record]
    if missing:
        raise RecordError(f"not a game record: missing {', '.join(missing)}")
    variant = record_variant(record)
    _check_list(record, "seats", _is_text, "a list of two names", length=2)
    _check_list(record, "actions", _is_action, f"a list of actions, integers 0-{DECLARE}")
    _check_list(record, "opening", _is_action, f"a list of actions, integers 0-{DECLARE}")
    _check_list(record, "move_seconds", _is_seconds, "a list of seconds, finite numbers >= 0")
    _check_list(record, "positions", _is_text, "a list of position strings")
    _check_end(record)
    return variant


def record_variant(record: dict) -> Variant:
    """The rule variant that ``record`` was played under; :class:`RecordError` if it names none."""
    value = record["variant"]
    if not isinstance(value, dict):
        raise RecordError(f"variant must be a JSON object such as {json.dumps(STANDARD.to_dict())}, got {_echo(value)}")
    try:
        return Variant.make(**value)
    except (TypeError, ValueError) as error:  # an unknown key, or a value the rules refuse
        raise RecordError(f"the variant {_echo(value)} is not valid: {shortened(str(error))}") from None


def _check_list(
    record: dict, key: str, is_item: Callable[[object], bool], allowed: str, length: int | None = None
) -> None:
    value = record.get(key, [])
    if not isinstance(value, list) or not all(map(is_item, value)) or length not in (None, len(value)):
        raise RecordError(f"{key} must be {allowed}, got {_echo(value)}")


def _check_end(record: dict) -> None:
    end, winner = record.get("end"), record.get("winner", NO_WINNER)
    if type(winner) is not int or winner not in (NO_WINNER, 0, 1):
        raise RecordError(f"winner must be 0, 1 or {NO_WINNER} (no winner), got {_echo(winner)}")
    if end is None:
        return
    if not isinstance(end, str) or end not in RECORD_ENDS:
        raise RecordError(f"end must be one of {', '.join(RECORD_ENDS)}, got {_echo(end)}")
    if winner not in RECORD_ENDS[end]:
        allowed = " or ".join(str(w) for w in RECORD_ENDS[end])
        raise RecordError(f"a game that ends in {end!r} has winner {allowed}, got {winner}")


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_action(value: object) -> bool:
    return type(value) is int and 0 <= value <= DECLARE


def _is_seconds(value: object) -> bool:
    try:
        checked_number(value, "seconds", minimum=0)
    except ValueError:
        return False
    return True


def _echo(value: object) -> str:
    """``value`` as JSON, shortened: a message quotes a bad field, not a whole line of junk."""
    return shortened(json.dumps(value, default=repr))
