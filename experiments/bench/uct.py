"""``quarto bench mcts``: our UCT's simulations per second, beside quartors' at equal strength.

Example usage::

    quarto bench mcts --sims 2000 --peer-sims 3200 --positions 6 --seed 0
    quarto bench mcts --strength 300     # and grade both on 300 suite positions (minutes: the solver values gives)

The positions: the opening (a give) and seeded greedy-game positions with a piece in hand at 12, 8 and 4 empty
squares. `quartors <https://pypi.org/project/quartors/>`_ (a Quarto engine in Rust, Python >= 3.13) plays a
turn -- place, then give -- as one action of one search; our ``mcts`` agent plays it as two decisions, a search
each. At their defaults (``--sims 2000`` per decision, ``--peer-sims 3200`` per turn) both lose value in the same
share of turns (``--strength``; docs/arena.md), so the two speeds compare at equal strength. The table gives
each engine's simulations per second and milliseconds per turn, with the ratios ours / theirs (sims/s) and
theirs / ours (time per turn): above 1, ours is faster. Where quartors does not import, only our figures are
printed, and a line says how to get the comparison. Both run in the same process on the same positions, in
alternating rounds whose medians are printed, so the ratios are the figures to quote; absolute speeds depend on
the machine and its load. Compilation (or the cache's load) happens before the clock starts.

``--strength N`` grades both engines' turns on N positions of the ``standard-v1`` suite with a piece in hand and
6-12 empty squares: a turn loses value when its value under perfect play (the placement's, then the give's, by
the exact solver) is below the position's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from agents.solver.labels import action_values
from agents.solver.positions import greedy_game_positions
from agents.specs import MAX_UCT_SIMULATIONS
from agents.suites import SolvedPosition, load_suite
from agents.tree.uct import UCTAgent
from experiments.evaluation.ratings import wilson_interval
from experiments.options import CommandParser, add_integer_argument, add_seed_argument
from quarto_env.core import INITIAL_STATE, NO_PIECE, STANDARD, State, step
from quarto_env.errors import QuartoValueError

EMPTY_SQUARES = (12, 8, 4)
MAX_POSITIONS = 1000
"""The most ``--positions`` per number of empty squares."""
EQUAL_STRENGTH_SIMS = 2000
"""Our simulations per decision..."""
EQUAL_STRENGTH_PEER_SIMS = 3200
"""... and quartors' per turn that lose value in the same share of turns (26.0% each on 300 suite positions with
6-12 empty squares, issue 44; ``--strength`` measures it again)."""
STRENGTH_SUITE = "standard-v1"
STRENGTH_EMPTY = (6, 12)
"""The stages of the positions ``--strength`` grades: where a turn can still go wrong, and the solver is quick."""
PEER_MISSING = (
    "quartors does not import here: for the comparison, run quarto bench mcts under Python >= 3.13 with "
    "`pip install quartors` and this package"
)


class QuartorsMCTS:
    """quartors' rollout MCTS, playing turns of our positions (standard rules)."""

    def __init__(self, quartors: ModuleType, sims: int) -> None:
        self.quartors = quartors
        self.search = quartors.Mcts(quartors.MctsConfig(simulations=sims), quartors.RolloutEvaluator())

    @property
    def version(self) -> str:
        """The installed quartors' version."""
        return str(self.quartors.__version__)

    def turn(self, state: State, seed: int) -> tuple[list[int], int]:
        """Our actions for quartors' turn from ``state`` (the opening, or a piece in hand): a give, a placement,
        or a placement then a give; and the simulations searched."""
        result = self.search.search(self.position(state), seed=seed)
        action = result.select_action(temperature=0.0, seed=seed)
        actions = [action.position, action.give_piece]
        return [a for a in actions if a is not None], int(result.simulations)

    def position(self, state: State) -> Any:
        """``state`` as a quartors position, reached by replaying its board in square order: quartors builds
        positions only by playing turns, each one a placement and a give."""
        if state.occupied and not state.placing:
            raise QuartoValueError("quartors takes the opening or a position with a piece in hand")
        position = self.quartors.State.initial()
        board = [(square, piece) for square, piece in enumerate(state.board) if piece != NO_PIECE]
        gives = [piece for _, piece in board] + ([state.hand] if state.placing else [])
        if gives:
            position = position.apply(self.quartors.Action.give_only(gives[0]))
        for (square, _), piece in zip(board, gives[1:], strict=True):
            position = position.apply(self.quartors.Action.place_and_give(square, piece))
        return position


def load_peer(sims: int) -> QuartorsMCTS | None:
    """quartors' search at ``sims`` simulations per turn, or ``None`` where quartors does not import."""
    try:
        import quartors
    except ImportError:
        return None
    return QuartorsMCTS(quartors, sims)


def our_turn(agent: UCTAgent, state: State) -> tuple[list[int], int]:
    """Our agent's actions for the turn from ``state`` -- a give at the opening, else a placement and then a give
    unless the placement ends the game -- and the simulations searched (none for a forced action)."""
    actions, sims = [], 0
    for _ in range(2 if state.placing else 1):
        if state.over:
            break
        agent.last_search = None
        actions.append(agent.act(state))
        sims += agent.last_search.sims if agent.last_search is not None else 0
        state = step(STANDARD, state, actions[-1])
    return actions, sims


def main(argv: list[str]) -> int:
    """Run the benchmark and print one row per position set."""
    parser = CommandParser(prog="quarto bench mcts", description=__doc__.split("\n")[0])
    add_integer_argument(
        parser,
        "--sims",
        EQUAL_STRENGTH_SIMS,
        "our simulations per decision (two decisions a turn)",
        fewest=1,
        most=MAX_UCT_SIMULATIONS,
    )
    add_integer_argument(
        parser,
        "--peer-sims",
        EQUAL_STRENGTH_PEER_SIMS,
        "quartors' simulations per turn",
        fewest=1,
        most=MAX_UCT_SIMULATIONS,
    )
    add_integer_argument(
        parser, "--positions", 6, "positions per number of empty squares", fewest=1, most=MAX_POSITIONS
    )
    strength = f"also grade both engines' turns on this many {STRENGTH_SUITE} positions (0: no grading)"
    add_integer_argument(parser, "--strength", 0, strength, fewest=0, most=MAX_POSITIONS)
    add_seed_argument(parser, "seed of the positions and the searches")
    args = parser.parse_args(argv)
    position_sets: dict[str, list[State]] = {"16 empty (opening give)": [INITIAL_STATE]}
    for empty in EMPTY_SQUARES:
        position_sets[f"{empty} empty"] = greedy_game_positions(empty, args.positions, args.seed, STANDARD, True)
    agent = UCTAgent(STANDARD, seed=args.seed, sims=args.sims)
    peer = load_peer(args.peer_sims)
    print_speeds(agent, peer, position_sets, args.seed)
    if peer is None:
        print(PEER_MISSING)
    if args.strength:
        print_strength(agent, peer, args.strength, args.seed)
    return 0


def print_speeds(agent: UCTAgent, peer: QuartorsMCTS | None, position_sets: dict[str, list[State]], seed: int) -> None:
    """One row per position set: each engine's simulations per second and milliseconds per turn."""
    title = f"MCTS, ours at {agent.sims} simulations per decision"
    if peer is not None:
        title += f", quartors {peer.version} at {peer.search.config.simulations} per turn"
    print(title + ", standard rules")
    header = f"{'positions':<26}{'ours sims/s':>13}{'ms/turn':>9}"
    if peer is not None:
        header += f"{'quartors sims/s':>17}{'ms/turn':>9}{'sims/s ratio':>14}{'turn ratio':>12}"
    print(header)
    engines: dict[str, Turn] = {"ours": lambda state, _: our_turn(agent, state)}
    if peer is not None:
        engines["quartors"] = peer.turn
    for name, positions in position_sets.items():
        ours, *theirs = median_speeds(engines, positions, seed)
        row = f"{name:<26}{ours[0]:>13,.0f}{ours[1]:>9.2f}"
        if theirs:
            row += f"{theirs[0][0]:>17,.0f}{theirs[0][1]:>9.2f}"
            row += f"{ours[0] / theirs[0][0]:>14.2f}{theirs[0][1] / ours[1]:>12.2f}"
        print(row)


ROUNDS = 5
"""Rounds of measurement per position set, the engines in alternation within each: medians are printed."""
MIN_ROUND_SECONDS = 0.05
"""Each round plays the set's turns over and over for at least this long: a turn near the end takes well under a
millisecond, too short to time alone."""

Turn = Callable[[State, int], tuple[list[int], int]]
"""An engine's turn from a position with a seed: its actions and the simulations it searched."""


def median_speeds(engines: dict[str, Turn], positions: list[State], seed: int) -> list[tuple[float, float]]:
    """``(simulations per second, milliseconds per turn)`` of each engine on ``positions``, medians of rounds."""
    for turn in engines.values():
        turn(positions[0], seed)  # compile or load what the engine needs before the clock starts
    rounds: dict[str, list[tuple[float, float]]] = {engine: [] for engine in engines}
    for _ in range(ROUNDS):
        for engine, turn in engines.items():
            rounds[engine].append(time_turns(turn, positions, seed))
    return [
        (statistics.median(s for s, _ in speeds), statistics.median(m for _, m in speeds)) for speeds in rounds.values()
    ]


def time_turns(turn: Turn, positions: list[State], seed: int) -> tuple[float, float]:
    """``(simulations per second, milliseconds per turn)`` of turns from ``positions``, in order and over again
    until :data:`MIN_ROUND_SECONDS` have passed."""
    turns = sims = 0
    start = time.perf_counter()
    while turns == 0 or time.perf_counter() - start < MIN_ROUND_SECONDS:
        for number, state in enumerate(positions):
            sims += turn(state, seed + number)[1]
        turns += len(positions)
    seconds = time.perf_counter() - start
    return sims / seconds, 1000 * seconds / turns


def print_strength(agent: UCTAgent, peer: QuartorsMCTS | None, count: int, seed: int) -> None:
    """The share of turns that lose value, each engine on the same ``count`` suite positions."""
    positions = strength_positions(count, seed)
    values = TurnValues()
    engines: dict[str, Turn] = {f"ours (mcts:sims={agent.sims})": lambda state, _: our_turn(agent, state)}
    if peer is not None:
        engines[f"quartors ({peer.search.config.simulations} sims)"] = peer.turn
    low, high = STRENGTH_EMPTY
    print(f"turns losing value on {len(positions)} {STRENGTH_SUITE} positions with a piece in hand, {low}-{high} empty")
    for name, turn in engines.items():
        lost = sum(values.loses(solved, turn(solved.state, seed + n)[0]) for n, solved in enumerate(positions))
        low_share, high_share = wilson_interval(lost / len(positions), len(positions))
        print(f"{name:<30}{lost / len(positions):>8.1%}  [{low_share:.1%}, {high_share:.1%}]")


def strength_positions(count: int, seed: int) -> list[SolvedPosition]:
    """``count`` positions of the suite with a piece in hand and 6-12 empty squares, drawn without replacement."""
    low, high = STRENGTH_EMPTY
    pool = [p for p in load_suite(STRENGTH_SUITE).positions if p.phase == "place" and low <= p.empty <= high]
    chosen = np.random.default_rng(seed).choice(len(pool), size=min(count, len(pool)), replace=False)
    return [pool[i] for i in sorted(chosen)]


class TurnValues:
    """The exact value of a turn: the suite values its placement, the solver the give after it (cached)."""

    def __init__(self) -> None:
        self._gives: dict[State, dict[int, int]] = {}

    def loses(self, solved: SolvedPosition, actions: list[int]) -> bool:
        """Whether the turn ``actions`` (a placement, then a give unless the game ended) from ``solved`` loses
        value for its player."""
        placed = step(STANDARD, solved.state, actions[0])
        if solved.action_values[actions[0]] < solved.value or placed.over:
            return solved.action_values[actions[0]] < solved.value
        if placed not in self._gives:
            self._gives[placed] = action_values(STANDARD, placed)
        return self._gives[placed][actions[1]] < solved.value
