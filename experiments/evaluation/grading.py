"""Grading against perfect play, the library behind ``quarto grade`` and the training runs' ``eval/grade/``
curves: positions sampled from seeded games, every action valued once by the exact solver (cached, also on
disk), and the share of an agent's decisions that lose value, with Wilson intervals.

A decision **loses value** when the value of the chosen action under perfect play is below the position's
value; a *critical* decision is one where some legal action loses value.

:func:`grade_agent` is the library entry point, for the training run's evaluation::

    positions = sample_decisions(variant, 200, seed=0, max_empty=10)
    values = PositionValues(variant)
    report = grade_agent(agent, variant, positions, values)
    report.share_lost().share  # and .low, .high: its 95% interval; .total: the decisions graded

Graded on a suite of solved positions (:mod:`agents.suites`), nothing is solved: every value is the suite's::

    suite = load_suite("standard-v1")
    report = grade_agent(agent, suite.variant, suite_states(suite), PositionValues.from_suite(suite))
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from agents.base import Agent
from agents.match import game_states
from agents.solver import labels
from agents.solver.labels import SOLVER_VERSION
from agents.specs import make_agent
from agents.storage.integrity import IntegrityError, unsealed_json, write_sealed_json
from agents.suites import Suite
from experiments.evaluation.ratings import Share, wilson_share
from quarto_env.checks import shortened
from quarto_env.core import NUM_SQUARES, State, Variant, legal_actions
from quarto_env.errors import IllegalActionError, QuartoValueError, SamplingError
from quarto_env.notation import format_position

DEFAULT_SOURCES = ("random", "greedy")


DEFAULT_MAX_EMPTY = 10
"""The most empty squares of a sampled position by default, where the exact solver values every action fast; the
training runs' ``eval/grade/`` curves sample with it, so raising it would change them (docs/solver.md)."""


SOLVER_COMFORT_EMPTY = 12
"""The most empty squares at which grading stays practical: valuing every action of a position (what grading
needs; more than the position's value alone) takes the exact solver about ten times longer for each empty square
more (docs/solver.md has the times at 11 and 12)."""


MAX_POSITIONS = 100_000


CACHE_FORMAT = 3
"""Version of the ``--cache`` file layout: 3 is sealed (:mod:`agents.storage.integrity`); 2 had a hash of its own."""
CACHE_KIND = "grade value cache"
"""The ``kind`` of a ``--cache`` file's seal."""


def sample_decisions(
    variant: Variant,
    count: int,
    seed: int,
    max_empty: int = DEFAULT_MAX_EMPTY,
    min_empty: int = 1,
    sources: Sequence[str] = DEFAULT_SOURCES,
) -> list[State]:
    """``count`` decision positions, one per seeded game between agents drawn from ``sources``.

    Each game pairs two specs drawn at random from ``sources``; one of its positions with ``min_empty`` to
    ``max_empty`` empty squares and at least two legal actions is kept, uniformly at random. Games that end
    before reaching such a position are skipped.
    """
    if not 1 <= min_empty <= max_empty <= NUM_SQUARES:
        raise QuartoValueError(f"need 1 <= min_empty <= max_empty <= 16, got min {min_empty}, max {max_empty}")
    # Checked here: rng.choice below fails on an empty list or a string with a message about its own argument.
    if isinstance(sources, str) or not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        raise QuartoValueError(
            f"sources must be a list of one or more agent specs, e.g. {list(DEFAULT_SOURCES)}; got {sources!r}"
        )
    rng = np.random.default_rng(seed)
    positions: list[State] = []
    games = 0
    while len(positions) < count:
        games += 1
        if games > 100 * count + 1000:
            raise SamplingError(f"only {len(positions)} of {count} positions found in {games} games from {sources}")
        players = [make_agent(str(rng.choice(sources)), variant, seed=int(rng.integers(2**32))) for _ in range(2)]
        candidates = [
            s
            for s in game_states(variant, players)
            if min_empty <= s.num_empty <= max_empty and len(legal_actions(variant, s)) > 1
        ]
        if candidates:
            positions.append(candidates[rng.integers(len(candidates))])
    return positions


Solver = Callable[[Variant, State], dict[int, int]]
"""``solver(variant, state) -> {action: value}`` for every legal action, values for the player to move."""


class PositionValues:
    """The exact value of every legal action of positions, solved on first use and then cached.

    Values are for the player to move: +1 win, 0 draw, -1 loss under perfect play. With ``path`` the cache
    is read from and can be saved to a JSON file, keyed by variant, so later runs do not solve again.
    ``solver(variant, state) -> {action: value}`` computes them (default: the exact solver).

    The file is a sealed JSON object (:mod:`agents.storage.integrity`: its format and SHA-256 under ``"seal"``) of the
    solver version, the variant and the positions. A file of another format or solver, or that fails its check
    (edited or damaged), is not trusted: its values are dropped, ``discarded`` says why, and they are solved
    again. A file that is not a cache at all, or is for another variant, raises ``ValueError``.
    """

    def __init__(self, variant: Variant, path: Path | None = None, solver: Solver | None = None) -> None:
        self.variant = variant
        self.path = path
        self.solver = solver or exact_action_values
        self.solved = 0
        """Positions solved by this object (cache misses)."""
        self.discarded: str | None = None
        """Why the values in ``path`` were not trusted and are solved again, if they were not."""
        self._values: dict[State, dict[int, int]] = {}
        if path is not None and path.exists():
            self._load(path)

    @classmethod
    def from_suite(cls, suite: Suite) -> PositionValues:
        """The action values that ``suite`` holds, with no solver behind them: its positions are looked up, and
        asking for one that is not in it raises ``KeyError``."""
        values = cls(suite.variant, solver=_not_in_suite)
        values._values = {solved.state: dict(solved.action_values) for solved in suite.positions}
        return values

    def action_values(self, state: State) -> dict[int, int]:
        """``{action: value}`` for every legal action of ``state``."""
        if state not in self._values:
            self._values[state] = self.solver(self.variant, state)
            self.solved += 1
        return self._values[state]

    def label_missing(self, states: Iterable[State], jobs: int = 1, progress: bool = False) -> None:
        """Solve every position of ``states`` whose values are not known yet, in one batch: by the labeller
        (:func:`agents.solver.labels.label_positions`, ``jobs`` worker processes) with the default solver, one by one
        with another (``solver`` is a plain function of one position)."""
        missing = [state for state in dict.fromkeys(states) if state not in self._values]
        if self.solver is not exact_action_values:
            for state in missing:
                self.action_values(state)
            return
        rows = labels.label_positions(self.variant, missing, jobs, progress)
        for state, row in zip(missing, rows, strict=True):
            self._values[state] = labels.values_of_row(row)
        self.solved += len(missing)

    def __contains__(self, state: object) -> bool:
        """Whether the action values of ``state`` are known (cached or solved)."""
        return state in self._values

    def value(self, state: State) -> int:
        """The value of ``state`` for the player to move."""
        return max(self.action_values(state).values())

    def save(self) -> None:
        """Write the cache to ``path`` (atomically)."""
        if self.path is None:
            raise QuartoValueError("this PositionValues has no path to save to")
        entries = {_key(s): {str(a): v for a, v in values.items()} for s, values in self._values.items()}
        data = {"solver": SOLVER_VERSION, "variant": self.variant.to_dict(), "positions": entries}
        write_sealed_json(self.path, data, CACHE_KIND, CACHE_FORMAT)

    def _load(self, path: Path) -> None:
        data = _read_cache(path)
        values = _cached_values(data["positions"])
        try:
            unsealed_json(data, CACHE_KIND, CACHE_FORMAT, "the file")
        except IntegrityError as error:  # another format, or edited or damaged
            self.discarded = str(error)
            return
        if data.get("solver") != SOLVER_VERSION:
            self.discarded = f"its values are another solver's ({shortened(str(data.get('solver')))})"
        elif data["variant"] != self.variant.to_dict():
            raise QuartoValueError(f"value cache {path} is for variant {data['variant']}, not {self.variant.to_dict()}")
        else:
            self._values = values


def suite_states(suite: Suite) -> list[State]:
    """The positions of ``suite``, in its order."""
    return [solved.state for solved in suite.positions]


def _not_in_suite(variant: Variant, state: State) -> dict[int, int]:
    """The solver of :meth:`PositionValues.from_suite`: every position it is asked for is missing from the suite."""
    raise KeyError(f"position {format_position(state)!r} is not in the suite")


def _read_cache(path: Path) -> dict[str, Any]:
    """The JSON object of a value cache file; ``ValueError`` if the file is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise QuartoValueError("not a value cache: not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise QuartoValueError(f"not a value cache: not JSON ({error})") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(key), dict) for key in ("variant", "positions")):
        raise QuartoValueError('not a value cache: expected a JSON object with "variant" and "positions" objects')
    return data


def _cached_values(entries: dict[str, Any]) -> dict[State, dict[int, int]]:
    """The action values of a cache's ``positions``; ``ValueError`` naming the first entry of the wrong shape."""
    values = {}
    for key, actions in entries.items():
        try:
            values[_state_from_key(key)] = _action_values(actions)
        except (AttributeError, ValueError):
            raise QuartoValueError(
                f"not a value cache: entry {shortened(key)!r} is not a position with action values -1, 0 or 1"
            ) from None
    return values


def _action_values(actions: dict[str, Any]) -> dict[int, int]:
    """``{action: value}`` of one cache entry; ``ValueError`` unless it is a non-empty map of values -1, 0, 1."""
    values = {int(action): value for action, value in actions.items()}
    if not values or not all(type(v) is int and v in (-1, 0, 1) for v in values.values()):
        raise ValueError("not action values")
    return values


def exact_action_values(variant: Variant, state: State) -> dict[int, int]:
    """``{action: value}`` of every legal action of ``state`` by the exact solver, as the labeller values it
    (:func:`agents.solver.labels.action_values`)."""
    return labels.action_values(variant, state)


def _key(state: State) -> str:
    """A JSON key of every field of ``state`` (the position notation alone lacks the claimable groups)."""
    return ",".join(str(int(field)) for field in state)


def _state_from_key(key: str) -> State:
    lanes, occupied, available, hand, to_move, claimable, winner, over = (int(x) for x in key.split(","))
    return State(lanes, occupied, available, hand, to_move, claimable, winner, bool(over))


@dataclasses.dataclass(frozen=True)
class Decision:
    """One graded decision: the position, its value, the action chosen and that action's value."""

    position: str
    empty: int
    phase: str
    """``"place"`` (a piece in hand) or ``"give"``."""
    value: int
    action: int
    action_value: int
    critical: bool
    """Whether some legal action loses value here."""

    @property
    def lost(self) -> bool:
        """Whether the chosen action is worse than the position under perfect play."""
        return self.action_value < self.value


@dataclasses.dataclass
class GradeReport:
    """The graded decisions of one agent, and summaries with 95% Wilson intervals."""

    agent: str
    decisions: list[Decision]

    def share_lost(self, decisions: Iterable[Decision] | None = None) -> Share:
        """The share of value-losing decisions among ``decisions`` (default: all)."""
        chosen = self.decisions if decisions is None else list(decisions)
        return wilson_share(sum(d.lost for d in chosen), len(chosen))

    def by_phase(self) -> dict[str, Share]:
        """The share lost among placements and among gives."""
        return {phase: self.share_lost(d for d in self.decisions if d.phase == phase) for phase in ("place", "give")}

    def by_empty(self) -> dict[int, Share]:
        """The share lost by number of empty squares."""
        empties = sorted({d.empty for d in self.decisions})
        return {e: self.share_lost(d for d in self.decisions if d.empty == e) for e in empties}

    def share_lost_between(self, low: int, high: int) -> Share:
        """The share lost among the decisions with ``low`` to ``high`` empty squares (both included)."""
        return self.share_lost(d for d in self.decisions if low <= d.empty <= high)

    def critical(self) -> Share:
        """The share lost among critical decisions (where some action loses value)."""
        return self.share_lost(d for d in self.decisions if d.critical)

    def transitions(self) -> dict[str, int]:
        """How value was lost: counts of ``win->draw``, ``win->loss`` and ``draw->loss``."""
        names = {1: "win", 0: "draw", -1: "loss"}
        counts = {"win->draw": 0, "win->loss": 0, "draw->loss": 0}
        for d in self.decisions:
            if d.lost:
                counts[f"{names[d.value]}->{names[d.action_value]}"] += 1
        return counts

    def summary(self) -> dict:
        """Plain data for JSON and TensorBoard: every share as ``[share, low, high, count]``."""
        return {
            "agent": self.agent,
            "all": list(self.share_lost()),
            "critical": list(self.critical()),
            "by_phase": {k: list(v) for k, v in self.by_phase().items()},
            "by_empty": {str(k): list(v) for k, v in self.by_empty().items()},
            "transitions": self.transitions(),
        }


def grade_agent(
    agent: Agent, variant: Variant, positions: Sequence[State], values: PositionValues, progress: bool = False
) -> GradeReport:
    """Ask ``agent`` for its action in each position and grade it against the exact action values (with a
    progress bar on stderr when ``progress``)."""
    if values.variant != variant:
        raise QuartoValueError(f"values are for {values.variant.describe()}, the agent plays {variant.describe()}")
    decisions = []
    for state in tqdm(positions, desc=f"grading {agent.spec}", unit="pos", disable=not progress, leave=False):
        agent.reset()
        action = int(agent.act(state))
        if action not in legal_actions(variant, state):
            raise IllegalActionError(
                f"agent {agent.spec!r} played illegal action {action} in {format_position(state)!r}"
            )
        action_values = values.action_values(state)
        best = max(action_values.values())
        decisions.append(
            Decision(
                position=format_position(state),
                empty=state.num_empty,
                phase="place" if state.placing else "give",
                value=best,
                action=action,
                action_value=action_values[action],
                critical=min(action_values.values()) < best,
            )
        )
    return GradeReport(agent.spec or type(agent).__name__, decisions)
