"""Agent specs: the kinds of agent, their options, and :func:`make_agent`, which builds one from a short text.

Every command names agents by a short text *spec*: ``kind`` or ``kind:option=value,option=value``, and for
kinds with a main argument ``kind:VALUE`` or ``kind:VALUE,option=value`` (``ppo:runs/x/best.zip,
deterministic=false``). Items are separated by a comma that is followed by ``NAME=``; so a value, a path
for instance, may hold commas (``ppo:runs/a,b/best.zip``) as long as no comma in it is followed by a name
and ``=``, and the main value may hold ``=`` (``ppo:runs/lr=3e-4/best.zip``) if it does not start with
``NAME=`` -- ``ppo:path=PATH`` names it explicitly. ``make_agent(spec, variant, seed)`` builds one; a bad
spec gets a one-line error that names the kinds, or the options of its kind, and the nearest one to a mistyped
name (``minimx`` -> ``did you mean 'minimax'?``).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from agents.base import Agent
from agents.tree.choices import DEFAULT_C_PUCT, DEFAULT_PLAYOUT, DEFAULT_UCT_SIMULATIONS, PLAYOUTS, ROOTS
from agents.tree.gumbel_root import DEFAULT_GUMBEL_ACTIONS
from quarto_env.checks import checked_seed, number_parser
from quarto_env.core import NUM_ACTIONS, STANDARD, Variant, checked_variant
from quarto_env.errors import QuartoTypeError, SpecError
from quarto_env.extras import as_missing_extra


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of an agent kind."""

    type: Callable[[str], Any]
    default: Any
    help: str


@dataclasses.dataclass(frozen=True)
class AgentKind:
    """A registered kind of agent: where its class lives and which options it takes."""

    name: str
    target: str
    """``module:Class``, imported only when an agent of this kind is built (so ``random`` needs no torch)."""
    help: str
    options: dict[str, Option] = dataclasses.field(default_factory=dict)
    main_option: str | None = None
    """The option that ``kind:VALUE`` sets, if any."""


AGENT_KINDS: dict[str, AgentKind] = {}


def register(kind: AgentKind) -> None:
    """Make ``kind`` available to specs."""
    AGENT_KINDS[kind.name] = kind


def describe_kinds() -> str:
    """A listing of every kind and its options, for error messages and ``--help``."""
    lines = []
    for kind in AGENT_KINDS.values():
        opts = ", ".join(f"{k}={o.default!r} ({o.help})" for k, o in kind.options.items()) or "no options"
        lines.append(f"  {kind.name}: {kind.help}; options: {opts}")
    return "agent kinds:\n" + "\n".join(lines)


def closest_name(name: str, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` nearest to the mistyped ``name`` (:func:`difflib.get_close_matches`), if any is
    near."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return close[0] if close else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'minimax'?"`` when one of ``choices`` is near the mistyped ``name``, else ``""``: the
    tail of an error message that lists the choices."""
    closest = closest_name(name, choices)
    return f"; did you mean {closest!r}?" if closest else ""


def parse_spec(spec: str) -> tuple[AgentKind, dict[str, Any]]:
    """The kind and the option values (defaults filled in) named by ``spec``."""
    if not isinstance(spec, str):
        raise QuartoTypeError(f"an agent spec is a string such as 'random' or 'minimax:depth=2', got {spec!r}")
    name, _, rest = spec.strip().partition(":")
    if name not in AGENT_KINDS:
        raise SpecError(
            f"unknown agent kind {name!r} in spec {spec!r}; the kinds are {', '.join(AGENT_KINDS)}"
            f"{did_you_mean(name, AGENT_KINDS)}"
        )
    kind = AGENT_KINDS[name]
    values = {key: option.default for key, option in kind.options.items()}
    given: set[str] = set()
    for item in _spec_items(kind, rest):
        key, eq, raw = item.partition("=")
        if not eq or key not in kind.options:
            raise SpecError(
                f"bad option {item!r} in spec {spec!r}: {kind.name} takes "
                f"{', '.join(f'{k}=<{o.help}>' for k, o in kind.options.items()) or 'no options'}"
                f"{did_you_mean(key, kind.options) if eq else ''}"
            )
        if key in given:
            raise SpecError(f"option {key} given twice in spec {spec!r}")
        given.add(key)
        try:
            values[key] = kind.options[key].type(raw)
        except ValueError as exc:
            raise SpecError(f"bad value {raw!r} for {key} in spec {spec!r}: {exc}") from exc
    return kind, values


def _spec_items(kind: AgentKind, rest: str) -> list[str]:
    """The ``option=value`` items of the text after ``kind:``, split at each comma followed by ``NAME=``; a first
    item without ``NAME=`` is the main option's value."""
    items = _SPEC_ITEM_SEPARATOR.split(rest) if rest else []
    if items and kind.main_option and not _NAMED_ITEM.match(items[0]):
        items[0] = f"{kind.main_option}={items[0]}"
    return items


_SPEC_ITEM_SEPARATOR = re.compile(r",(?=\w+=)")
"""A comma followed by ``NAME=``: the commas between a spec's items (a path may hold other commas)."""
_NAMED_ITEM = re.compile(r"\w+=")


def make_agent(spec: str, variant: Variant = STANDARD, seed: int | None = None) -> Agent:
    """Build the agent named by ``spec`` for ``variant``, seeded with ``seed``."""
    variant, seed = checked_variant(variant), checked_seed(seed)
    kind, values = parse_spec(spec)
    if "checkpoint" in kind.options:  # a run folder becomes the file it stands for, here for every such kind
        name = values.pop("checkpoint") or None
        if values["path"]:  # no path: the agent's own error names it
            from agents.networks.checkpoints import checkpoint_path

            values["path"] = str(checkpoint_path(values["path"], name))
    module_name, class_name = kind.target.split(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ModuleNotFoundError as exc:  # ppo:, az:, rllib: without the train (or ray) extra
        missing = as_missing_extra(exc, f"agent kind {kind.name!r}")
        if missing is None:
            raise
        raise SpecError(str(missing)) from None
    agent = cls(variant=variant, seed=seed, **values)
    agent.spec = spec
    return agent


SECONDS = number_parser("time", above=0, maximum=24 * 3600)
"""A time budget per move: finite (``nan`` or ``inf`` would never run out), above 0, at most a day."""
MAX_UCT_SIMULATIONS = 10**6
"""UCT simulations per move (``mcts``), capped so that every move ends: a million take a minute at most at the
speeds of ``quarto bench mcts`` (docs/arena.md). A move that never returns could not even forfeit on ``--time-limit``,
which is measured when it does."""
MAX_DEPTH = 16
"""Minimax plies per move (``depth``), capped so that every move ends, as :data:`MAX_UCT_SIMULATIONS` are: over the
positions of a game, 16 plies took at most 24 s (at 12 empty squares, on 2 busy cores), 17 took 100 s and more,
and each ply beyond multiplies it again (an exact search from the opening runs for hours). ``time=S`` searches
deeper within its budget; and where no more plies than ``depth`` are left, the search is exact anyway."""
DEPTH = number_parser("depth", minimum=1, maximum=MAX_DEPTH, integer=True)
"""The ``depth`` option of ``minimax`` and ``solver``."""
EXPLORATION = number_parser("c", above=0, maximum=100)
"""The exploration constant ``c`` of the tree searches (``mcts``, ``az``): positive and at most 100, a hundred
times the values that play well, so that a mistyped exponent (``c=1e308``) is refused, not searched with."""
MAX_PUCT_SIMULATIONS = 100_000
"""The most simulations of one PUCT search (``az``; its tree is allocated for them: about 31 MB)."""
DEFAULT_PUCT_SIMULATIONS = 800
"""Simulations per move of the ``az`` agent: the trained network loses value in fewer graded decisions at 800 than
at 200 or with its policy alone, and a searched move still takes a fraction of a second (docs/alphazero.md gives
both)."""

register(AgentKind("random", "agents.simple:RandomAgent", "uniform over legal actions"))
register(
    AgentKind(
        "greedy",
        "agents.simple:GreedyAgent",
        "takes a win at once; never gives a piece that wins at once if a safe one exists; else random",
    )
)
# Each kind below is implemented in a module of its own, imported only when an agent of the kind is built: its
# entry stays here so that specs resolve without importing torch or compiling the search.
register(
    AgentKind(
        "minimax",
        "agents.solver.minimax:MinimaxAgent",
        "negamax alpha-beta with tables and symmetries (minimax:depth=3, minimax:time=1.5, or both: "
        "deepening up to depth within the time); plain minimax searches 2 plies",
        {
            "depth": Option(
                DEPTH,
                0,
                f"plies (a placement or a give each), 1-{MAX_DEPTH}; with time, the cap; none: 2, or no cap with time",
            ),
            "time": Option(SECONDS, 0.0, "seconds per move, iterative deepening; always answers in time"),
        },
    )
)
register(
    AgentKind(
        "solver",
        "agents.solver.minimax:SolverAgent",
        "perfect play (a random best action) from `empties` empty squares on; minimax under `time` before",
        {
            "empties": Option(
                number_parser("empties", minimum=1, maximum=16, integer=True),
                12,
                "solve exactly at or below this many empty squares (at least the opening book's bottom, if any)",
            ),
            "time": Option(SECONDS, 1.0, "seconds per move for the minimax played before that"),
            "depth": Option(DEPTH, 0, f"plies for that minimax instead of time, 1-{MAX_DEPTH}: reproducible games"),
        },
    )
)


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise ValueError("must be true or false")


def _uct_playout(text: str) -> str:
    """``tactical`` or ``random``: the ``mcts`` playouts (:data:`agents.tree.choices.PLAYOUTS`)."""
    if text not in PLAYOUTS:
        raise ValueError(f"playout must be {' or '.join(PLAYOUTS)}, got {text!r}")
    return text


register(
    AgentKind(
        "mcts",
        "agents.tree.uct:UCTAgent",
        "UCT with tactical playouts (mcts:sims=2000 or mcts:time=1)",
        {
            "sims": Option(
                number_parser("sims", minimum=1, maximum=MAX_UCT_SIMULATIONS, integer=True),
                None,
                f"simulations per move ({DEFAULT_UCT_SIMULATIONS} without time; not with it)",
            ),
            "time": Option(SECONDS, 0.0, "seconds per move, instead of sims (give one of them)"),
            "c": Option(EXPLORATION, 1.0, "UCB1 exploration constant"),
            "playout": Option(
                _uct_playout, DEFAULT_PLAYOUT, "tactical: take a win, give no winning piece; random: uniform"
            ),
            "prove": Option(_boolean, False, "back proven wins, draws and losses up the tree (MCTS-Solver)"),
        },
    )
)


def _device(text: str) -> str:
    """A device name that this machine can run (``auto``, ``cpu``, or ``cuda`` where torch sees a GPU)."""
    from agents.networks.policy_value import resolve_device  # torch is loaded only by a spec that names a device

    resolve_device(text)
    return text


def _search_root(text: str) -> str:
    """``puct`` or ``gumbel``: the ``az`` search's root (:data:`agents.tree.choices.ROOTS`)."""
    if text not in ROOTS:
        raise ValueError(f"root must be {' or '.join(ROOTS)}, got {text!r}")
    return text


DEVICE = Option(_device, "cpu", "where the network runs: auto (cuda if torch sees a GPU, else cpu), cpu or cuda")
"""The ``device`` option of every kind that runs a network."""


def _checkpoint_name(text: str) -> str:
    from agents.networks.checkpoints import checkpoint_name  # here: that module loads torch

    return checkpoint_name(text)


CHECKPOINT = Option(
    _checkpoint_name,
    "",
    "with a run folder, its checkpoint: final (none given: final.zip, else latest.zip while it trains), best (the "
    "best evaluation score), latest or step_N",
)
"""The ``checkpoint`` option of every kind that plays a checkpoint of ``quarto train``: :func:`make_agent`
resolves it, with the ``path``, for all of them alike (:func:`agents.networks.checkpoints.checkpoint_path`)."""
RESOLVED_BY_MAKE_AGENT = frozenset({"checkpoint"})
"""The options :func:`make_agent` uses itself, not passed on to the agent's class."""


register(
    AgentKind(
        "ppo",
        "agents.ppo:PPOAgent",
        "a MaskablePPO checkpoint written by quarto train (ppo:PATH, a .zip or a run folder for its final.zip; "
        "ppo:pretrained the network shipped for the rules played; ppo:PATH,checkpoint=best its best.zip; "
        "ppo:PATH,deterministic=false samples; a path may hold a comma "
        "unless one is followed by NAME=)",
        {
            "path": Option(str, "", "checkpoint .zip, run folder, or pretrained"),
            "checkpoint": CHECKPOINT,
            "deterministic": Option(_boolean, True, "true: the most likely action; false: sample the policy"),
            "device": DEVICE,
        },
        main_option="path",
    )
)
register(
    AgentKind(
        "az",
        "agents.alphazero:AlphaZeroAgent",
        "a network trained by quarto train with algorithm alphazero, playing with its search (az:PATH, a .zip or "
        "a run folder for its final.zip, else latest.zip; az:pretrained the network shipped for the rules played; "
        "az:PATH,checkpoint=best its best.zip; az:PATH,sims=0 "
        "plays the network's policy alone; az:PATH,root=gumbel,k=16 searches with the Gumbel root)",
        {
            "path": Option(str, "", "checkpoint .zip, run folder, or pretrained"),
            "checkpoint": CHECKPOINT,
            "sims": Option(
                number_parser("sims", minimum=0, maximum=MAX_PUCT_SIMULATIONS, integer=True),
                None,
                f"simulations per move ({DEFAULT_PUCT_SIMULATIONS} without time; not with it); 0: the network's "
                "policy alone",
            ),
            "time": Option(SECONDS, 0.0, "seconds per move, instead of sims (give one of them)"),
            "temperature": Option(
                number_parser("temperature", minimum=0, maximum=100),
                0.0,
                "0: the most visited action; above 0: sample visits ** (1 / temperature); root=gumbel: 0 plays "
                "its choice without noise, above 0 scales its Gumbel noise",
            ),
            "c": Option(EXPLORATION, DEFAULT_C_PUCT, "PUCT exploration constant"),
            "device": DEVICE,
            "root": Option(
                _search_root,
                "puct",
                "puct: PUCT at the root, play the most visited action; gumbel: sequential halving over the k best "
                "candidates by Gumbel noise plus logits, play its choice (needs sims, not time)",
            ),
            "k": Option(
                number_parser("k", minimum=1, maximum=NUM_ACTIONS, integer=True),
                None,
                f"the most candidates the Gumbel root considers ({DEFAULT_GUMBEL_ACTIONS}; only with root=gumbel)",
            ),
        },
        main_option="path",
    )
)
register(
    AgentKind(
        "rllib",
        "agents.rllib:RLlibAgent",
        "a network trained by quarto train with backend rllib (rllib:PATH, a .zip or a run folder for its "
        "final.zip, else latest.zip; rllib:PATH,checkpoint=best its best.zip; rllib:PATH,deterministic=false "
        "samples)",
        {
            "path": Option(str, "", "checkpoint .zip, run folder, or pretrained"),
            "checkpoint": CHECKPOINT,
            "deterministic": Option(_boolean, True, "true: the most likely action; false: sample the policy"),
            "device": DEVICE,
        },
        main_option="path",
    )
)
