"""The typed, validated configuration of ``quarto train``.

A config is a YAML mapping of :class:`TrainConfig`'s fields (``configs/default.yaml``); a field left out keeps
its default, and ``KEY=VALUE`` arguments override single fields, with the value read as YAML
(``total_steps=200000``, ``variant.squares=true``, ``opponents.greedy=0.5``). An unknown key, a value of
the wrong type or an impossible value raises :class:`ConfigError` naming the field and what is allowed.
``quarto train --help-config`` lists every field with its documentation.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from agents.base import SpecError, parse_spec
from agents.ppo import POLICY_KINDS
from experiments.selfplay import SNAPSHOTS
from quarto_env.core import RulesError, Variant
from quarto_env.observation import OBSERVATION_KINDS

LR_SCHEDULES = ("constant", "linear")


class ConfigError(ValueError):
    """A config with an unknown key, a wrong type or an impossible value."""


@dataclasses.dataclass
class TrainConfig:
    """Everything a training run depends on (besides the code): saved as ``config.yaml`` in the run folder."""

    name: str = "default"
    """Run name; the run folder is ``runs/<name>__<seed>__<time>/`` unless ``--run-dir`` names one."""
    seed: int = 0
    """Seed of torch, the seats, the opponents' draws and the evaluation games."""
    variant: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Rule variant, as the keywords of ``Variant.make``: ``attributes`` (a count 1-4 or names), ``squares``,
    ``declaration``, ``false_declaration`` (``lose`` or ``penalty``). Empty: standard Quarto."""
    observation: str = "parity"
    """Observation planes: ``raw``, ``tactical`` (+ 1-ply win/lose planes), ``lookahead`` (+ trap planes) or
    ``parity`` (+ parity of the safe pieces after each action); the table is ``quarto_env.observation``."""
    policy: str = "slots"
    """Network: ``slots`` (shared weights over square and piece slots, ``agents.ppo.SlotNetwork``) or ``mlp``."""
    net_arch: list[int] = dataclasses.field(default_factory=lambda: [32])
    """``mlp``: the hidden layer sizes of the policy and value networks; ``slots``: ``[width]``."""
    total_steps: int = 1_500_000
    """Learner decisions to train for (each game step of the learner is one; opponents' moves do not count)."""
    num_games: int = 64
    """Games played side by side in one process."""
    n_steps: int = 64
    """Learner steps per game between two PPO updates (a rollout holds ``num_games * n_steps`` steps)."""
    batch_size: int = 1024
    """PPO minibatch size."""
    n_epochs: int = 4
    """PPO passes over each rollout."""
    learning_rate: float = 3e-4
    """Adam step size (the initial one with ``lr_schedule: linear``)."""
    lr_schedule: str = "constant"
    """``constant``, or ``linear`` decay to 0 at ``total_steps``."""
    gamma: float = 0.99
    """Discount factor; below 1 it prefers quick wins and slow losses."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_range: float = 0.2
    """PPO clipping of the probability ratio."""
    ent_coef: float = 0.01
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Gradient clipping norm."""
    opponents: dict[str, float] = dataclasses.field(
        default_factory=lambda: {SNAPSHOTS: 0.4, "minimax:depth=2": 0.3, "greedy": 0.2, "random": 0.1}
    )
    """The opponent mix: weights of ``snapshots`` (the learner's frozen past selves) and of agent specs."""
    snapshot_every: int = 100_000
    """Learner steps between two snapshots added to the pool (the first is the untrained network)."""
    max_snapshots: int = 20
    """Snapshots kept in the pool; the oldest leaves when a new one comes."""
    eval_every: int = 250_000
    """Learner steps between two evaluations (one more at the end)."""
    eval_games: int = 200
    """Games against each evaluation opponent, half in each seat, for the periodic evaluations."""
    eval_opponents: list[str] = dataclasses.field(default_factory=lambda: ["random", "greedy", "minimax:depth=2"])
    """Agent specs the learner is evaluated against (deterministic play, both seats)."""
    final_eval_games: int = 400
    """Games against each evaluation opponent for the final table, with the final checkpoint."""
    grade_positions: int = 0
    """Positions on which every evaluation also grades the learner with the exact solver (``quarto grade``):
    the share of its decisions that lose value under perfect play, logged under ``eval/grade/``. The positions
    (at most 10 empty squares, from seeded random and greedy games) are sampled and solved once. 0: off."""
    checkpoint_every: int = 250_000
    """Learner steps between two checkpoints; a resumed run loses at most this many."""
    torch_threads: int = 1
    """CPU threads for torch (1 is fastest for these small networks: more threads fight over 2 cores)."""

    def __post_init__(self) -> None:
        _check_types(self)
        _check_values(self)

    def resolved_variant(self) -> Variant:
        """The rule variant this config names."""
        return Variant.make(**self.variant)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as written to ``config.yaml``."""
        return dataclasses.asdict(self)


def load_config(path: str | Path | None, overrides: list[str] = ()) -> TrainConfig:  # type: ignore[assignment]
    """The config in the YAML file ``path`` (``None``: the defaults) with ``KEY=VALUE`` ``overrides`` applied."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid YAML: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a mapping of fields, got {type(loaded).__name__}")
        data = loaded or {}
    for override in overrides:
        _apply_override(data, override)
    return config_from_dict(data)


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """A validated config from plain data; unknown keys are errors."""
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigError(f"unknown config key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(fields))}")
    return TrainConfig(**data)


def save_config(config: TrainConfig) -> str:
    """The config as YAML text (every field, resolved)."""
    return yaml.safe_dump(config.to_dict(), sort_keys=False)


def field_docs() -> dict[str, str]:
    """Each field's docstring, read from the source of :class:`TrainConfig`."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(TrainConfig)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
        ):
            docs[node.target.id] = " ".join(str(following.value.value).split())
    return docs


def describe_fields() -> str:
    """Every field with its type, default and documentation, for ``--help-config``."""
    hints = typing.get_type_hints(TrainConfig)
    defaults = TrainConfig().to_dict()
    docs = field_docs()
    return "\n".join(
        f"{name} ({_type_name(hints[name])}, default {defaults[name]!r}):\n    {docs.get(name, '')}"
        for name in defaults
    )


def markdown_table(config: TrainConfig) -> str:
    """The config as a markdown table, for TensorBoard's text tab."""
    rows = "\n".join(f"| {key} | {value} |" for key, value in config.to_dict().items())
    return f"| field | value |\n| --- | --- |\n{rows}"


# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------
def _apply_override(data: dict[str, Any], override: str) -> None:
    key, eq, text = override.partition("=")
    if not eq or not key:
        raise ConfigError(f"override {override!r} must be KEY=VALUE, e.g. total_steps=200000 or variant.squares=true")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {override!r}: the value is not valid YAML: {exc}") from exc
    head, dot, rest = key.partition(".")
    if not dot:
        data[key] = value
        return
    if head not in ("variant", "opponents"):
        raise ConfigError(f"override {override!r}: only variant.KEY and opponents.SPEC take a dotted key")
    default = getattr(TrainConfig(), head)
    nested = dict(data.get(head, default))
    nested[rest] = value
    data[head] = nested


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) if typing.get_origin(hint) is None else str(hint)  # type: ignore[return-value]


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_matches(v, item) for v in value)
    if origin is dict:
        key_hint, value_hint = typing.get_args(hint)
        return isinstance(value, dict) and all(
            _matches(k, key_hint) and _matches(v, value_hint) for k, v in value.items()
        )
    return isinstance(value, hint)


def _as_number(value: Any, hint: Any) -> Any:
    """Numbers in scientific notation: YAML reads ``1e-3`` as a string and ``2.0e6`` as a float; take both
    where the field is a float, or an int with an integral value."""
    if hint not in (int, float) or isinstance(value, bool) or not isinstance(value, (str, float)):
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    if hint is float:
        return number
    return int(number) if number.is_integer() else value


def _check_types(config: TrainConfig) -> None:
    for name, hint in typing.get_type_hints(TrainConfig).items():
        value = _as_number(getattr(config, name), hint)
        if not _matches(value, hint):
            raise ConfigError(f"config field {name} must be {_type_name(hint)}, got {value!r} ({type(value).__name__})")
        setattr(config, name, float(value) if hint is float else value)


def _require(condition: bool, field: str, message: str, value: Any) -> None:
    if not condition:
        raise ConfigError(f"config field {field} {message}, got {value!r}")


def _check_values(c: TrainConfig) -> None:
    for name in (
        "total_steps",
        "num_games",
        "n_steps",
        "batch_size",
        "n_epochs",
        "snapshot_every",
        "max_snapshots",
        "eval_every",
        "eval_games",
        "final_eval_games",
        "checkpoint_every",
        "torch_threads",
    ):
        _require(getattr(c, name) >= 1, name, "must be >= 1", getattr(c, name))
    _require(c.seed >= 0, "seed", "must be >= 0", c.seed)
    _require(c.grade_positions >= 0, "grade_positions", "must be >= 0", c.grade_positions)
    _require(c.name != "" and "/" not in c.name, "name", "must be non-empty, without '/'", c.name)
    _require(
        c.observation in OBSERVATION_KINDS, "observation", f"must be one of {tuple(OBSERVATION_KINDS)}", c.observation
    )
    _require(c.policy in POLICY_KINDS, "policy", f"must be one of {POLICY_KINDS}", c.policy)
    _require(c.lr_schedule in LR_SCHEDULES, "lr_schedule", f"must be one of {LR_SCHEDULES}", c.lr_schedule)
    _require(len(c.net_arch) >= 1 and min(c.net_arch) >= 1, "net_arch", "must list layer sizes >= 1", c.net_arch)
    _require(c.learning_rate > 0, "learning_rate", "must be > 0", c.learning_rate)
    _require(0 < c.gamma <= 1, "gamma", "must be in (0, 1]", c.gamma)
    _require(0 <= c.gae_lambda <= 1, "gae_lambda", "must be in [0, 1]", c.gae_lambda)
    _require(c.clip_range > 0, "clip_range", "must be > 0", c.clip_range)
    for name in ("ent_coef", "vf_coef", "max_grad_norm"):
        _require(getattr(c, name) >= 0, name, "must be >= 0", getattr(c, name))
    rollout = c.num_games * c.n_steps
    _require(c.batch_size <= rollout, "batch_size", f"must be <= num_games * n_steps = {rollout}", c.batch_size)
    try:
        c.resolved_variant()
    except (RulesError, TypeError) as exc:
        raise ConfigError(f"config field variant is not a valid rule variant ({exc}), got {c.variant!r}") from exc
    _require(
        all(w >= 0 for w in c.opponents.values()) and sum(c.opponents.values()) > 0,
        "opponents",
        "must give weights >= 0 with a positive sum",
        c.opponents,
    )
    for spec in [s for s in c.opponents if s != SNAPSHOTS] + list(c.eval_opponents):
        try:
            parse_spec(spec)
        except SpecError as exc:
            raise ConfigError(f"config field opponents/eval_opponents: {exc}") from exc
