"""Reading and writing ``quarto train``'s config: YAML files, ``KEY=VALUE`` overrides, and the older layouts.

A config file is a YAML mapping of the fields of :mod:`experiments.training.config` (the schema): the common
fields at the top level, each section a nested mapping (``ppo: {n_steps: 64}``). A field left out keeps its
default. It is read with YAML's safe loader, a key given twice in one mapping refused, and so is, before it is
built, a file over :data:`MAX_CONFIG_BYTES` or YAML that stands for more than :data:`MAX_CONFIG_VALUES` values
once its aliases are expanded (an alias bomb: a few lines of aliases of aliases that stand for billions of
values); the values of overrides are read the same way.

Overrides
---------
``KEY=VALUE`` arguments override single fields, with the value read as YAML: ``total_steps=200000``,
``ppo.learning_rate=1e-3``, ``variant.squares=true`` (a key inside a mapping field), ``ppo={n_epochs: 2}`` (a
section's fields at once). A number field also takes the forms YAML reads as text (``5e-1``, ``1e3``). An
``opponents.SPEC=WEIGHT`` key is split at its last ``=``, so a spec may hold options:
``ppo.opponents.minimax:depth=2=0.5``. On the command line a section's field may go without its section
(``n_steps=16``, ``opponents.greedy=0.5``): it goes into its section, and a field of two sections
(:data:`SHARED_FIELDS`, the optimizer's) into the section of the config's ``algorithm``. An override wins over
the file; a field under the wrong section is refused in one line naming its section (``config key
alphazero.n_steps: n_steps belongs to section ppo``).

What is written
---------------
:func:`save_config` writes the config in sections, all fields resolved: the run folder's ``config.yaml``; a
checkpoint's ``quarto.json`` records the same mapping (:meth:`~experiments.training.config.TrainConfig.to_dict`).

The older layouts
-----------------
Run folders and checkpoints written before the sections hold every field at the top level, and older AlphaZero
runs record ``backend: sb3``. :func:`current_layout` is the one reader of those layouts: each section's field goes
into its section, the fields of two sections into the ``algorithm``'s, and AlphaZero's ``sb3`` reads as its own
``torch`` (:func:`current_backend`). Nothing writes them any more.
"""

from __future__ import annotations

import itertools
import os
import typing
from pathlib import Path
from typing import Any

import yaml

from agents.specs import closest_name, did_you_mean
from agents.storage.files import input_file, read_file_bytes
from experiments.training.config import (
    COMMON_FIELDS,
    FIXED_ON_RESUME,
    SECTION_FIELDS,
    SECTIONS,
    ConfigError,
    TrainConfig,
)
from experiments.training.config_checks import SHORT
from experiments.training.shipped_configs import config_path, shipped_config_names
from quarto_env.checks import one_line, shortened
from quarto_env.core import Variant
from quarto_env.observation import ObservationKind

SHARED_FIELDS = tuple(
    field for field in SECTION_FIELDS["ppo"] if any(field in SECTION_FIELDS[s] for s in SECTIONS if s != "ppo")
)
"""The fields that two sections have (``ppo`` and ``alphazero``: the optimizer's): given without their section,
each goes into the section of the config's ``algorithm``."""
MAPPING_FIELDS = ("variant", "opponents")
"""The fields that are mappings: an override reaches one key inside them (``variant.squares=true``)."""
OLD_ALPHAZERO_BACKEND = "sb3"
"""The ``backend`` that AlphaZero runs recorded before it had its own (``torch``)."""


def load_config(path: str | Path | None, overrides: list[str] = ()) -> TrainConfig:  # type: ignore[assignment]
    """The config in the YAML file ``path`` (``None``: the defaults) with ``KEY=VALUE`` ``overrides`` applied."""
    data = _read_config_file(config_path(path)) if path is not None else {}
    assignments = [(override, *_parse_override(override)) for override in overrides]
    given = [value for _, key, value in assignments if key == "algorithm"]  # the last one counts
    algorithm = given[-1] if given else data.get("algorithm", TrainConfig.algorithm)  # where shared fields go
    nested = current_layout(data, algorithm)
    for override, key, value in assignments:
        _apply_override(nested, override, key, value, algorithm)
    return config_from_dict(nested)


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """A validated config from plain data, in sections or in an older layout (:func:`current_layout`); unknown
    keys are errors."""
    nested = current_layout(data, data.get("algorithm", TrainConfig.algorithm))
    common = {key: value for key, value in nested.items() if key not in SECTIONS}
    sections = {section: kind(**nested.get(section, {})) for section, kind in SECTIONS.items()}
    return TrainConfig(**common, **sections)


def save_config(config: TrainConfig) -> str:
    """The config as YAML text (every field, resolved; the sections as nested mappings)."""
    return yaml.safe_dump(config.to_dict(), sort_keys=False)


def check_unchanged_on_resume(config: TrainConfig, metadata: dict[str, Any]) -> None:
    """Refuse a resumed ``config`` that changes a field of :data:`FIXED_ON_RESUME` from the value the checkpoint
    was trained with; ``metadata`` is the checkpoint's ``quarto.json`` (its ``config``, ``variant`` and
    ``observation``); a section's field is compared where the checkpoint records it."""
    recorded = metadata["config"]
    algorithm = recorded.get("algorithm", "ppo")  # checkpoints from before alphazero and rllib record neither
    trained = {
        **recorded,
        "algorithm": algorithm,
        "backend": current_backend(algorithm, recorded.get("backend", "sb3")),
        "variant": Variant.make(**metadata["variant"]),
        "observation": metadata["observation"],
    }
    for field in FIXED_ON_RESUME:
        section, _, name = field.rpartition(".")
        asked = getattr(getattr(config, section) if section else config, name)
        asked = asked.name if isinstance(asked, ObservationKind) else asked
        held = trained.get(section, {}) if section else trained
        if name in held and asked != held[name]:
            raise ConfigError(
                f"config field {field} cannot change on --resume: the checkpoint was trained with "
                f"{_shown(held[name])}, this resume asks for {_shown(asked)} (config.yaml with the overrides). "
                f"Fixed on resume: {', '.join(FIXED_ON_RESUME)}; every other field given with --resume is applied"
            )


def _shown(value: Any) -> str:
    return repr(value.describe()) if isinstance(value, Variant) else repr(value)


# ---------------------------------------------------------------------------------------------------------
# The older layouts, and where a field given without its section goes
# ---------------------------------------------------------------------------------------------------------
def current_layout(data: dict[str, Any], algorithm: Any) -> dict[str, Any]:
    """``data`` -- a config file's, a run folder's ``config.yaml``, a checkpoint's recorded config, in sections or
    in the older flat layout -- in the sections: a field given at the top level (the flat layout) moves into its
    section (one of :data:`SHARED_FIELDS` into ``algorithm``'s), and ``backend: sb3`` of an ``algorithm``
    alphazero becomes ``torch`` (:func:`current_backend`); a section's mapping is checked key by key.
    :class:`ConfigError` for an unknown key, a field under the wrong section or one given twice."""
    nested: dict[str, Any] = {}
    unknown = []
    for key, value in data.items():
        if key in SECTIONS:
            for field, item in _section_mapping(key, value).items():
                _check_section_key(key, field)
                _put(nested, key, field, item)
        elif key in COMMON_FIELDS:
            nested[key] = value
        elif section := home_section(key, algorithm):
            _put(nested, section, key, value)
        else:
            unknown.append(str(key))
    if unknown:
        raise unknown_keys(unknown)
    if "backend" in nested:
        nested["backend"] = current_backend(algorithm, nested["backend"])
    return nested


def current_backend(algorithm: Any, backend: Any) -> Any:
    """``backend`` as the config names it today: AlphaZero's old ``sb3`` (:data:`OLD_ALPHAZERO_BACKEND`) is its own
    ``torch``; any other value as it is, for the schema to check."""
    return "torch" if algorithm == "alphazero" and backend == OLD_ALPHAZERO_BACKEND else backend


def sections_of(field: str) -> list[str]:
    """The sections that have a field called ``field`` (none for a common field or an unknown one)."""
    return [section for section, fields in SECTION_FIELDS.items() if field in fields]


def home_section(field: Any, algorithm: Any) -> str | None:
    """The section of ``field`` given at the top level: its own, or for one of :data:`SHARED_FIELDS` the section
    of ``algorithm`` (the first of its sections when ``algorithm`` is none of them, for the check to refuse)."""
    owners = sections_of(field)
    if not owners:
        return None
    return algorithm if algorithm in owners else owners[0]


# ---------------------------------------------------------------------------------------------------------
# Keys in the wrong place
# ---------------------------------------------------------------------------------------------------------
def unknown_keys(unknown: list[str]) -> ConfigError:
    """The error for config keys that are none of a config's: it lists the allowed ones -- the common fields, and
    each section with its fields -- and the nearest name of a mistyped one."""
    allowed = {*COMMON_FIELDS, *SECTIONS, *itertools.chain(*SECTION_FIELDS.values())}
    sections = "; ".join(f"section {section}: {', '.join(fields)}" for section, fields in SECTION_FIELDS.items())
    return ConfigError(
        f"unknown config key(s) {', '.join(sorted(unknown))}; allowed: common fields: {', '.join(COMMON_FIELDS)}; "
        f"{sections} (a section's field also at the top level){_suggested_fields(sorted(unknown), allowed)}"
    )


def _suggested_fields(unknown: list[str], fields: set[str]) -> str:
    """``"; did you mean 'total_steps'?"`` for one mistyped key; for several, each near field with its key."""
    if len(unknown) == 1:
        return did_you_mean(unknown[0], fields)
    near = [f"{closest!r} for {key!r}" for key in unknown if (closest := closest_name(key, fields))]
    return f"; did you mean {', '.join(near)}?" if near else ""


def _section_mapping(section: str, value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"config key {section} must be a mapping of the fields of section {section}, e.g. "
            f"{section}: {{{SECTION_FIELDS[section][0]}: ...}}, got {SHORT.repr(value)}"
        )
    return value


def _check_section_key(section: str, field: Any) -> None:
    """Refuse a key of section ``section`` that is not one of its fields, in one line naming where it belongs."""
    if field in SECTION_FIELDS[section]:
        return
    where = f"config key {section}.{field}"
    if owners := sections_of(field):
        sections = " or ".join(owners)
        raise ConfigError(f"{where}: {field} belongs to section {sections}, not {section} (write {owners[0]}.{field})")
    if field in COMMON_FIELDS:
        raise ConfigError(f"{where}: {field} is a common field, given at the top level of the config, not in a section")
    allowed = SECTION_FIELDS[section]
    raise ConfigError(
        f"unknown {where}; allowed in section {section}: {', '.join(allowed)}{did_you_mean(str(field), allowed)}"
    )


def _put(nested: dict[str, Any], section: str, field: str, value: Any) -> None:
    """Set a section's field, refusing one given twice: flat, at the top level, and in its section."""
    fields = nested.setdefault(section, {})
    if field in fields:
        raise ConfigError(
            f"config key {section}.{field} is given twice: as {field} at the top level (the flat spelling) and "
            f"in section {section}; keep one"
        )
    fields[field] = value


# ---------------------------------------------------------------------------------------------------------
# YAML and the override grammar
# ---------------------------------------------------------------------------------------------------------
MAX_CONFIG_BYTES = 1 << 20
"""The largest config file read: a config is a few kilobytes."""
MAX_CONFIG_VALUES = 100_000
"""The most values (scalars, lists and mappings) a config's YAML may stand for with its aliases expanded: a config
holds about a hundred."""


class TooManyValues(yaml.YAMLError):
    """YAML that stands for more than :data:`MAX_CONFIG_VALUES` values with its aliases expanded."""


class _ConfigLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the last silently), and a
    document that stands for more than :data:`MAX_CONFIG_VALUES` values with its aliases expanded: checked on
    its node graph, where an alias is one shared node, before any value is built (:class:`TooManyValues`)."""

    def compose_document(self) -> yaml.Node:
        document = super().compose_document()
        if _expanded_size(document, MAX_CONFIG_VALUES) > MAX_CONFIG_VALUES:
            raise TooManyValues(
                f"stands for more than {MAX_CONFIG_VALUES:,} values once its aliases are expanded (aliases of "
                "aliases, or an alias within its own anchor): refused before it is built"
            )
        return document

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if not isinstance(key, typing.Hashable):
                continue  # the safe loader refuses it below, with its own message
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (a config names each field once)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _expanded_size(node: yaml.Node, limit: int) -> int:
    """How many nodes ``node`` stands for with every alias expanded (an alias counts its anchor's nodes each time
    it is used), up to ``limit + 1``: in time linear in the distinct nodes, each counted once. A node found within
    itself (an alias inside its own anchor) stands for endlessly many."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        if id(node) not in sizes:
            sizes[id(node)] = limit + 1  # until counted: met again within itself, it is endless
            children = node.value if isinstance(node, yaml.SequenceNode) else []
            if isinstance(node, yaml.MappingNode):
                children = [child for pair in node.value for child in pair]
            total = 1
            for child in children:
                total = min(total + size(child), limit + 1)
            sizes[id(node)] = total
        return sizes[id(node)]

    return size(node)


def _yaml_value(text: str, where: str) -> Any:
    """The value of the YAML ``text``, read by :class:`_ConfigLoader`; :class:`ConfigError` beginning with
    ``where`` for text that is not YAML, is nested too deeply, or stands for too many values."""
    try:
        return yaml.load(text, Loader=_ConfigLoader)  # SafeLoader underneath
    except RecursionError:
        raise ConfigError(f"{where} is nested too deeply to be a config") from None
    except TooManyValues as exc:
        raise ConfigError(f"{where} {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where} is not valid YAML: {one_line(exc)}") from None


def _read_config_file(path: Path) -> dict[str, Any]:
    """The mapping of fields in the YAML file ``path``; :class:`ConfigError` for anything else."""
    where = f"config file {str(path)!r}"
    if not os.path.lexists(path):
        shipped = ", ".join(shipped_config_names())
        raise ConfigError(f"{where} does not exist; the shipped configs (--config NAME): {shipped}")
    input_file(path, "config file", ConfigError)  # a pipe, a device or a folder, refused with advice
    data = read_file_bytes(path, "config file", MAX_CONFIG_BYTES, ConfigError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 text (a binary file?)") from None
    loaded = _yaml_value(text, where)
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{where} must hold a mapping of fields, got {type(loaded).__name__}")
    return loaded or {}


def _parse_override(override: str) -> tuple[str, Any]:
    """The key and the value (read as YAML) of a ``KEY=VALUE`` override."""
    # A spec in an opponents key may hold '=' (minimax:depth=2) and a weight never does: split at the last one.
    at_last = override.startswith(("opponents.", "ppo.opponents."))
    key, eq, text = override.rpartition("=") if at_last else override.partition("=")
    if not eq or not key:
        raise ConfigError(
            f"override {shortened(override)!r} must be KEY=VALUE, e.g. total_steps=200000, ppo.learning_rate=1e-3 "
            "or variant.squares=true"
        )
    return key, _yaml_value(text, f"override {shortened(override)!r}: the value")


def _apply_override(nested: dict[str, Any], override: str, key: str, value: Any, algorithm: Any) -> None:
    """Set the field ``key`` names (``seed``, ``ppo.n_steps``, the flat ``n_steps``, ``ppo={n_steps: 8}``, a key
    inside a mapping field: ``variant.squares``, ``ppo.opponents.greedy``) in the sectioned ``nested`` data."""
    if key in SECTIONS:
        for field, item in _section_mapping(key, value).items():
            _check_section_key(key, field)
            nested.setdefault(key, {})[field] = item
        return
    section, field, inner = _override_target(key, algorithm)
    target = nested if section is None else nested.setdefault(section, {})
    if inner is None:
        target[field] = value
        return
    if section is None and field not in COMMON_FIELDS:
        raise unknown_keys([key])
    name = field if section is None else f"{section}.{field}"
    if field in MAPPING_FIELDS and not inner:
        raise ConfigError(f"override {override!r}: name a key of {name} after the dot, e.g. variant.squares=true")
    if field not in MAPPING_FIELDS:
        raise ConfigError(
            f"override {override!r}: {name} takes no dotted key; a dotted key is SECTION.FIELD "
            f"({', '.join(f'{s}.{SECTION_FIELDS[s][0]}=...' for s in SECTIONS)}) or a key inside a mapping field "
            "(variant.squares=true, ppo.opponents.greedy=0.5)"
        )
    defaults = TrainConfig().to_dict()
    mapping = target.get(field, (defaults if section is None else defaults[section])[field])
    if not isinstance(mapping, dict):
        raise ConfigError(f"override {override!r}: config field {name} must be a mapping, got {mapping!r}")
    target[field] = {**mapping, inner: value}


def _override_target(key: str, algorithm: Any) -> tuple[str | None, str, str | None]:
    """The section (``None``: the top level), the field and the key inside it (``None``: the field itself) of
    an override's dotted ``key``; a flat field goes into its section (:func:`home_section`)."""
    head, dot, rest = key.partition(".")
    if head in SECTIONS:
        field, inner_dot, inner = rest.partition(".")
        _check_section_key(head, field)
        return head, field, inner if inner_dot else None
    section = None if head in COMMON_FIELDS else home_section(head, algorithm)  # None for an unknown key
    return section, head, rest if dot else None
