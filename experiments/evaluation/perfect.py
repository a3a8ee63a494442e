"""Points lost against perfect play: an agent plays the exact solver from seeded random openings, and each game
is scored against what perfect play from its opening would have scored.

The **perfect score** of a game is the agent's score (win 1, draw 0.5, loss 0) under perfect play by both sides
from the opening: the solver's exact value of the opening position for the agent's seat. The **points lost** are
the perfect score minus the score the agent made. A perfect opponent never lets an agent score more than the
perfect score, so every game's loss is 0, 0.5 or 1; a negative one means a bug, and is raised as one.

Openings are :data:`~agents.match.DEFAULT_OPENING_PLIES` random actions, as in ``quarto tournament``, each played
once in each seat. ``quarto grade --perfect-games N``, ``quarto evaluate --perfect-games N`` and tournaments with a
``solver`` entrant report it::

    report = points_lost(make_agent("greedy"), STANDARD, games=20, seed=0)
    report.mean_lost()     # MeanLost(mean points lost per game, low, high): 95% interval
    report.share_losing()  # Share(share of games with a loss, low, high, total games): Wilson interval
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from tqdm import tqdm

from agents.base import Agent
from agents.match import DEFAULT_OPENING_PLIES, OPENING_STREAM, GameRecord, opening_state, play_game, random_opening
from experiments.evaluation.ratings import Share, wilson_interval, wilson_share
from experiments.evaluation.tables import markdown_table
from quarto_env.core import NUM_SQUARES, State, Variant
from quarto_env.errors import QuartoValueError

if TYPE_CHECKING:
    from agents.solver.minimax import Solver, SolverAgent

PERFECT_SPEC = f"solver:empties={NUM_SQUARES}"
"""The perfect opponent: the solver agent, exact at every position (from the opening book where the variant ships
one; without a book it searches, which takes seconds or more per move at 14 empty squares)."""


@dataclasses.dataclass(frozen=True)
class PerfectGame:
    """One game of an agent against perfect play."""

    opening: tuple[int, ...]
    seat: int
    """The agent's seat: 0 gives first."""
    perfect_score: float
    """The agent's score under perfect play from the opening: 1, 0.5 or 0."""
    score: float
    """The score the agent made: 1, 0.5 or 0."""

    @property
    def lost(self) -> float:
        """Points lost against perfect play: 0, 0.5 or 1."""
        return self.perfect_score - self.score


class MeanLost(NamedTuple):
    """The mean points lost per game, with its 95% interval ``low`` to ``high``; a tuple still, as JSON takes it."""

    mean: float
    low: float
    high: float


@dataclasses.dataclass
class PerfectPlayReport:
    """An agent's games against a perfect opponent, and summaries with 95% intervals."""

    agent: str
    opponent: str
    games: list[PerfectGame]

    def mean_lost(self) -> MeanLost:
        """The mean points lost per game and its 95% interval -- Wilson's, as for the mean scores of a tournament:
        a game's loss lies in [0, 1], so its variance is at most a share's of that mean. Conservative: from a drawn
        opening a loss is 0 or 0.5, and the interval is then about twice as wide as :meth:`share_losing`'s halved
        (compare agents by that share)."""
        if not self.games:
            return MeanLost(0.0, 0.0, 1.0)
        mean = sum(game.lost for game in self.games) / len(self.games)
        return MeanLost(mean, *wilson_interval(mean, len(self.games)))

    def share_losing(self) -> Share:
        """The share of games in which the agent lost any points, with its Wilson interval."""
        return wilson_share(sum(game.lost > 0 for game in self.games), len(self.games))

    def counts(self) -> dict[str, int]:
        """Games in all, and how many lost nothing, half a point (a won game drawn, a drawn one lost) or a point."""
        return {
            "games": len(self.games),
            "lost_nothing": sum(game.lost == 0 for game in self.games),
            "lost_half": sum(game.lost == 0.5 for game in self.games),
            "lost_one": sum(game.lost == 1 for game in self.games),
        }

    def summary(self) -> dict:
        """Plain data for JSON: intervals as ``[value, low, high]`` (the share's also with its game count), the
        counts, and the points scored and the perfect score summed over the games."""
        return {
            "agent": self.agent,
            "opponent": self.opponent,
            "mean_lost": list(self.mean_lost()),
            "share_losing": list(self.share_losing()),
            **self.counts(),
            "points": sum(game.score for game in self.games),
            "perfect_points": sum(game.perfect_score for game in self.games),
        }


def perfect_score(state: State, seat: int, solver: Solver) -> float:
    """The score of ``seat`` (1 win, 0.5 draw, 0 loss) under perfect play from ``state``, by ``solver``."""
    value = solver.value(state)
    return (1 + (value if seat == state.to_move else -value)) / 2


def perfect_game(record: GameRecord, opening: Sequence[int], seat: int, perfect: float) -> PerfectGame:
    """The game ``record`` in which the agent sat at ``seat`` from ``opening`` (whose perfect score for it is
    ``perfect``); ``AssertionError`` when the agent scored more, which against a perfect opponent is a bug."""
    game = PerfectGame(tuple(opening), seat, perfect, record.score(seat))
    if game.lost < 0:
        raise AssertionError(
            f"{record.seats[seat]} scored {game.score} from opening {list(opening)}, worth {perfect} under perfect "
            "play: its opponent did not play perfectly (a bug)"
        )
    return game


def solver_agent(spec: str, variant: Variant, seed: int = 0) -> SolverAgent | None:
    """The ``solver`` agent that ``spec`` names, or ``None`` when it names another kind."""
    from agents.solver.minimax import SolverAgent
    from agents.specs import make_agent, parse_spec

    if parse_spec(spec)[0].name != "solver":
        return None
    agent = make_agent(spec, variant, seed)
    assert isinstance(agent, SolverAgent)  # what the kind "solver" builds
    return agent


def plays_perfectly_from(agent: SolverAgent, state: State) -> bool:
    """Whether the solver agent ``agent`` is exact from ``state`` on: its opening book covers ``state``, or it
    solves at ``state``'s empty squares already (and so at every later position). Elsewhere it plays minimax."""
    return agent.solver.book_covers(state) or state.num_empty <= agent.empties


def points_lost(
    agent: Agent,
    variant: Variant,
    games: int,
    seed: int,
    opening_plies: int = DEFAULT_OPENING_PLIES,
    progress: bool = False,
) -> PerfectPlayReport:
    """Play ``agent`` against the perfect opponent (:data:`PERFECT_SPEC`) ``games`` times: ``games / 2`` seeded
    random openings of ``opening_plies`` actions, each once in each seat (a progress bar on stderr when
    ``progress``). ``games`` must be even and at least 2."""
    if games < 2 or games % 2:
        raise QuartoValueError(f"games must be an even number >= 2 (each opening is played in both seats), got {games}")
    perfect = solver_agent(PERFECT_SPEC, variant, seed=int(np.random.SeedSequence([seed, 1]).generate_state(1)[0]))
    assert perfect is not None  # PERFECT_SPEC names the solver
    played = []
    for index in tqdm(range(games // 2), desc=f"{agent.spec} vs perfect play", disable=not progress, leave=False):
        opening = random_opening(variant, opening_plies, np.random.default_rng([seed, index, OPENING_STREAM]))
        state = opening_state(variant, opening)
        for seat in (0, 1):
            record = play_game(variant, [agent, perfect] if seat == 0 else [perfect, agent], state)
            played.append(perfect_game(record, opening, seat, perfect_score(state, seat, perfect.solver)))
    return PerfectPlayReport(agent.spec or type(agent).__name__, perfect.spec, played)


def perfect_markdown(reports: Sequence[PerfectPlayReport]) -> str:
    """The table of points lost against perfect play, one row per report."""
    rows = []
    for report in reports:
        mean, low, high = report.mean_lost()
        share, share_low, share_high, _ = report.share_losing()
        counts = report.counts()
        rows.append(
            [
                f"`{report.agent}`",
                f"`{report.opponent}`",
                str(counts["games"]),
                f"{mean:.3f} [{low:.3f}, {high:.3f}]",
                f"{100 * share:.1f}% [{100 * share_low:.1f}, {100 * share_high:.1f}]",
                f"{counts['lost_nothing']} / {counts['lost_half']} / {counts['lost_one']}",
            ]
        )
    header = ["agent", "perfect opponent", "games", "points lost per game", "games with a loss", "lost 0 / 0.5 / 1"]
    return "Points lost against perfect play (95% CI)\n\n" + markdown_table(header, rows)
