"""Suites of solved positions: the fixed, versioned benchmark of perfect play.

A suite is a set of decision positions from every stage of the game -- 16 down to 4 empty squares -- each with
its exact value and the exact value of every legal action, so that an agent is graded against perfect play by
lookups alone (``quarto grade --suite``), and two papers that name the same suite grade on the same positions.
The model is Pascal Pons' Connect Four test sets, positions by stage with exact scores.

What a suite holds
------------------
* **Positions from real games.** Seeded games between agents drawn from a documented mix
  (:data:`DEFAULT_SOURCES`: random, greedy, minimax at depths 1-4 and MCTS, so that the positions range from
  careless to careful play) supply every decision position with at least two legal actions; a stage then keeps
  ``per_stage`` of them drawn at random, or all it has. Both phases count: a position with a piece in hand
  (*place*) and one with a piece to give (*give*).
* **Deduplicated under symmetry.** Two positions that a symmetry of the game maps onto each other
  (:meth:`quarto_env.symmetry.Symmetries.position_key`) have the same value and the same choices, up to
  relabelling: a suite keeps one of them. The earliest stages hold few positions for that reason: with
  standard rules there is one canonical position with 16 empty squares to give from and one to place on.
* **Exact values.** Every legal action's value for the player to move (+1 win, 0 draw, -1 loss) by the exact
  solver (:func:`agents.solver.minimax.solve`, exact from the first move with the variant's opening book). A position
  is *critical* when some action loses value.

The file
--------
JSON Lines, UTF-8. The first line is the header: ``format``, ``name``, ``solver`` (the solver's version),
``variant``, ``count``, ``generator`` (the command, seed, sources and ``per_stage`` that built it) and
``sha256``, the hash of every line after the header. Each other line is one position::

    {"position": ".5...3.e...b.... -", "actions": {"0": 0, "1": -1, ...}}

``position`` is the project's notation (:mod:`quarto_env.notation`); ``actions`` maps each legal action (a
square when placing, a piece when giving) to its value. :func:`load_suite` refuses a file whose header, hash,
variant or positions do not check out (:class:`SuiteError`): a damaged or outdated suite is never used.

A suite's name is ``RULES-vN``; a change of positions or values makes a new version, never an edit of a
shipped one. :func:`build_suite` makes one (``quarto suite build``, whose command and seed the header keeps).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from agents.match import game_states
from agents.solver.book import BOOK_FOLDER, rules_name
from agents.solver.labels import SOLVER_VERSION, label_positions, values_of_row, worker_pool
from agents.storage.files import atomic_write_text, input_file
from quarto_env.checks import shortened
from quarto_env.core import State, Variant, legal_actions, position_array
from quarto_env.errors import SuiteError
from quarto_env.notation import PositionError, format_position, parse_position
from quarto_env.symmetry import Symmetries

SUITE_FORMAT = 1
"""The version of the suite file's layout."""


SUITE_FOLDER = BOOK_FOLDER
"""Where the shipped suites live, beside the opening books: ``suite-NAME.jsonl``."""

SUITE_STAGES = tuple(range(16, 3, -1))
"""The stages a suite covers, as empty squares: 16 (the first give) down to 4."""

DEFAULT_SOURCES = (
    "random",
    "greedy",
    "minimax:depth=1",
    "minimax:depth=2",
    "minimax:depth=3",
    "minimax:depth=4",
    "mcts:sims=200",
)
"""The agents whose games supply a suite's positions, two drawn at random (seeded) for each game."""

DEFAULT_GAMES = 2_000
"""Games a build plays for its positions: enough for a few hundred distinct positions at every stage from 12
empty squares down (docs/leaderboard.md has the counts)."""


@dataclasses.dataclass(frozen=True)
class SolvedPosition:
    """One position of a suite and the exact value of each of its legal actions."""

    state: State
    action_values: Mapping[int, int]
    """Every legal action -> its value for the player to move: +1 win, 0 draw, -1 loss under perfect play."""

    @property
    def value(self) -> int:
        """The position's value for the player to move: that of its best action."""
        return max(self.action_values.values())

    @property
    def empty(self) -> int:
        """Empty squares: the position's stage."""
        return self.state.num_empty

    @property
    def phase(self) -> str:
        """``"place"`` (a piece in hand) or ``"give"``."""
        return "place" if self.state.placing else "give"

    @property
    def critical(self) -> bool:
        """Whether some legal action loses value."""
        return min(self.action_values.values()) < self.value

    @property
    def best_actions(self) -> list[int]:
        """The actions that keep the value, in increasing order."""
        return sorted(a for a, v in self.action_values.items() if v == self.value)

    @property
    def position(self) -> str:
        """The position in the project's notation."""
        return format_position(self.state)


@dataclasses.dataclass
class Suite:
    """A named, versioned set of solved positions of one rule variant."""

    name: str
    variant: Variant
    positions: list[SolvedPosition]
    generator: dict[str, Any]
    """How it was built: ``command``, ``seed``, ``sources``, ``per_stage``."""

    def stages(self) -> dict[int, list[SolvedPosition]]:
        """The positions by empty squares, 16 first."""
        stages: dict[int, list[SolvedPosition]] = {}
        for solved in sorted(self.positions, key=lambda p: -p.empty):
            stages.setdefault(solved.empty, []).append(solved)
        return stages

    def counts(self) -> dict[int, tuple[int, int]]:
        """``{empty squares: (positions, critical positions)}``."""
        return {e: (len(ps), sum(p.critical for p in ps)) for e, ps in self.stages().items()}


# ---------------------------------------------------------------------------------------------------------
# Shipped suites
# ---------------------------------------------------------------------------------------------------------
def suite_path(name: str) -> Path:
    """The shipped file of the suite ``name``."""
    return SUITE_FOLDER / f"suite-{name}.jsonl"


def shipped_suite_names() -> list[str]:
    """The names of the suites shipped with the package, sorted."""
    return sorted(
        path.name.removeprefix("suite-").removesuffix(".jsonl") for path in SUITE_FOLDER.glob("suite-*.jsonl")
    )


def default_suite_name(variant: Variant) -> str | None:
    """The newest shipped suite of ``variant`` (``standard-v1``, ``squares-v1``), or ``None`` when none ships
    (the declaration variant never has one)."""
    if variant.declaration:
        return None
    prefix = f"{rules_name(variant)}-v"
    versions = [name for name in shipped_suite_names() if name.startswith(prefix) and name[len(prefix) :].isdigit()]
    return max(versions, key=lambda name: int(name[len(prefix) :]), default=None)


# ---------------------------------------------------------------------------------------------------------
# Reading and writing
# ---------------------------------------------------------------------------------------------------------
def load_suite(name_or_path: str | Path, variant: Variant | None = None) -> Suite:
    """The suite shipped as ``name_or_path`` (a name such as ``standard-v1``), or read from that file (a path,
    or a name ending in ``.jsonl``). With ``variant``, a suite of other rules is refused. Raises
    :class:`SuiteError` with one line naming the problem: an unknown name (listing the shipped ones), a file
    that is missing, damaged (its hash), outdated (its format or solver), or holds a position that is not one
    or actions that are not its legal actions."""
    path = _suite_file(name_or_path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"suite {str(path)!r} cannot be read: {error}") from None
    header = _header(path, lines)
    suite_variant = _variant(path, header)
    if variant is not None and suite_variant != variant:
        raise SuiteError(f"suite {header['name']!r} is for {suite_variant.describe()} rules, not {variant.describe()}")
    positions = [_solved_position(path, number, line, suite_variant) for number, line in enumerate(lines[1:], 2)]
    return Suite(str(header["name"]), suite_variant, positions, dict(header.get("generator", {})))


def save_suite(suite: Suite, path: Path) -> None:
    """Write ``suite`` to ``path`` (atomically), with its header and hash."""
    lines = [_position_line(solved) for solved in suite.positions]
    header = {
        "format": SUITE_FORMAT,
        "name": suite.name,
        "solver": SOLVER_VERSION,
        "variant": suite.variant.to_dict(),
        "count": len(lines),
        "generator": suite.generator,
        "sha256": _lines_hash(lines),
    }
    atomic_write_text(path, "\n".join([json.dumps(header), *lines]) + "\n")


def _suite_file(name_or_path: str | Path) -> Path:
    """The file of a shipped suite's name, or the path itself."""
    if isinstance(name_or_path, Path) or str(name_or_path).endswith(".jsonl") or "/" in str(name_or_path):
        return input_file(name_or_path, "suite file", SuiteError)
    if name_or_path not in shipped_suite_names():
        known = ", ".join(shipped_suite_names()) or "none"
        raise SuiteError(f"unknown suite {shortened(str(name_or_path))!r}; shipped suites: {known} (or a .jsonl path)")
    return suite_path(name_or_path)


def _header(path: Path, lines: list[str]) -> dict[str, Any]:
    """The checked header of a suite file's ``lines``."""
    try:
        header = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or not {"format", "name", "solver", "variant", "count", "sha256"} <= set(header):
        raise SuiteError(f"{str(path)!r} is not a suite file: its first line is not a suite header")
    if (header["format"], header["solver"]) != (SUITE_FORMAT, SOLVER_VERSION):
        raise SuiteError(
            f"suite {str(path)!r} is outdated: format {header['format']}, solver {header['solver']!r} "
            f"(this code reads format {SUITE_FORMAT}, solver {SOLVER_VERSION!r})"
        )
    if header["sha256"] != _lines_hash(lines[1:]) or header["count"] != len(lines) - 1:
        raise SuiteError(f"suite {str(path)!r} is damaged: its positions do not match its header's hash and count")
    return header


def _variant(path: Path, header: dict[str, Any]) -> Variant:
    try:
        return Variant.make(**header["variant"])
    except (TypeError, ValueError, KeyError) as error:
        raise SuiteError(f"suite {str(path)!r} names rules this code does not know: {error}") from None


def _solved_position(path: Path, number: int, line: str, variant: Variant) -> SolvedPosition:
    """The position on line ``number`` of a suite file, checked against the rules."""
    try:
        data = json.loads(line)
        state = parse_position(data["position"])
        values = {int(action): value for action, value in data["actions"].items()}
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError, PositionError) as error:
        raise SuiteError(f"suite {str(path)!r}, line {number}: not a solved position ({error})") from None
    if set(values) != set(legal_actions(variant, state)) or not all(v in (-1, 0, 1) for v in values.values()):
        raise SuiteError(f"suite {str(path)!r}, line {number}: its actions are not the legal actions valued -1, 0, 1")
    return SolvedPosition(state, values)


def _position_line(solved: SolvedPosition) -> str:
    actions = {str(a): int(v) for a, v in sorted(solved.action_values.items())}
    return json.dumps({"position": solved.position, "actions": actions}, separators=(", ", ": "))


def _lines_hash(lines: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PositionSource:
    """Where the positions of a suite or a sample come from: ``games`` seeded games between agents drawn from
    ``sources`` (agent specs), of which the decision positions with a number of empty squares in ``stages``
    count."""

    sources: Sequence[str] = DEFAULT_SOURCES
    stages: Sequence[int] = SUITE_STAGES
    games: int = DEFAULT_GAMES


def build_suite(
    name: str,
    variant: Variant,
    per_stage: int,
    seed: int,
    source: PositionSource = PositionSource(),
    progress: bool = False,
    command: str = "",
    jobs: int = 1,
) -> Suite:
    """A suite of up to ``per_stage`` positions per stage from ``source``'s games (:func:`collect_positions`),
    solved (:func:`solve_positions`); ``jobs`` worker processes play the games and label the positions.
    ``command`` is recorded in the header, to rebuild it."""
    with worker_pool(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
        states = collect_positions(variant, per_stage, seed, source, progress, pool=pool)
        solved = solve_positions(variant, states, progress, pool=pool)
    generator = {
        "command": command,
        "seed": seed,
        "sources": list(source.sources),
        "per_stage": per_stage,
        "games": source.games,
    }
    return Suite(name, variant, solved, generator)


def collect_positions(
    variant: Variant,
    per_stage: int,
    seed: int,
    source: PositionSource = PositionSource(),
    progress: bool = False,
    jobs: int = 1,
    pool: Pool | None = None,
) -> list[State]:
    """Up to ``per_stage`` decision positions (two or more legal actions) for each number of empty squares in
    ``source.stages``, no two related by a symmetry, from ``source.games`` seeded games between agents drawn from
    ``source.sources``: stage by stage from the most empty squares, each drawn at random among the distinct
    positions the games reached (all of them when there are fewer: the earliest stages have few distinct
    positions at all).

    ``jobs`` above 1 (or a ``pool`` of :func:`agents.solver.labels.worker_pool`) plays the games in worker processes;
    the positions are the same for every ``jobs``."""
    if variant.declaration:
        raise SuiteError("suites hold no declaration-variant positions: the notation cannot say what is claimable")
    sources, stages, games = source.sources, source.stages, source.games
    rng = np.random.default_rng(seed)
    # Every game's players are drawn first, in the order a game-by-game loop draws them (spec, then seed, for
    # each seat), so that the games can be played anywhere in any order and the picks below draw from the same
    # stream of numbers.
    players = [tuple((str(rng.choice(sources)), int(rng.integers(2**32))) for _ in range(2)) for _ in range(games)]
    batches = [players[start : start + GAMES_PER_TASK] for start in range(0, games, GAMES_PER_TASK)]
    tasks = [(variant, tuple(stages), batch) for batch in batches]
    found: dict[int, dict[tuple[int, int, int], State]] = {stage: {} for stage in stages}
    with (
        contextlib.ExitStack() as stack,
        tqdm(total=games, desc="games", unit="game", disable=not progress, leave=False) as bar,
    ):
        if jobs > 1 or pool is not None:
            workers = pool if pool is not None else stack.enter_context(worker_pool(min(jobs, len(tasks))))
            played: Iterable[list[list[tuple[State, tuple[int, int, int]]]]] = workers.imap(_distinct_positions, tasks)
        else:
            played = map(_distinct_positions, tasks)
        for batch in played:  # in the order of the games, whoever played them
            for game in batch:
                for state, key in game:
                    found[state.num_empty].setdefault(key, state)
            bar.update(len(batch))
    chosen: list[State] = []
    for stage in stages:
        candidates = [found[stage][key] for key in sorted(found[stage])]
        picks = rng.permutation(len(candidates))[:per_stage]
        chosen += [candidates[i] for i in sorted(picks)]
    return chosen


GAMES_PER_TASK = 20
"""Games a worker plays per task of :func:`collect_positions`: enough that sending the task costs little beside
the games."""


def _distinct_positions(
    task: tuple[Variant, tuple[int, ...], list[tuple[tuple[str, int], ...]]],
) -> list[list[tuple[State, tuple[int, int, int]]]]:
    """For each game of the task (a pair of ``(spec, seed)``), its decision positions (two or more legal actions)
    with a number of empty squares in ``stages``, each with its symmetry key
    (:meth:`quarto_env.symmetry.Symmetries.position_key`). A game stops once it is below the smallest stage."""
    from agents.specs import make_agent

    variant, stages, games = task
    out = []
    for seats in games:
        players = [make_agent(spec, variant, seed=seed) for spec, seed in seats]
        states = [
            state
            for state in game_states(variant, players, min_empty=min(stages))
            if state.num_empty in stages and len(legal_actions(variant, state)) > 1
        ]
        keys = _symmetries(variant).position_keys(position_array(states)) if states else np.zeros((0, 3), np.int64)
        out.append([(state, (k[0], k[1], k[2])) for state, k in zip(states, keys.tolist(), strict=True)])
    return out


@functools.cache
def _symmetries(variant: Variant) -> Symmetries:
    return Symmetries(variant)


def solve_positions(
    variant: Variant, states: Sequence[State], progress: bool = False, jobs: int = 1, pool: Pool | None = None
) -> list[SolvedPosition]:
    """Every legal action's exact value in each of ``states``, by the labeller of :mod:`agents.solver.labels` (the
    variant's default solver, its opening book and value cache; ``jobs`` worker processes, or ``pool``'s)."""
    labels = label_positions(variant, states, jobs, progress, pool=pool)
    return [SolvedPosition(state, values_of_row(row)) for state, row in zip(states, labels, strict=True)]
