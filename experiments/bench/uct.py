"""``quarto bench mcts``: our UCT against quartors at equal wall time per turn -- a match, and a grade of turns.

Example usage::

    quarto bench mcts                                   # 200 games at 50 and at 200 ms a turn, then the grade
    quarto bench mcts --turn-ms 50 --games 400 --grade 0
    quarto bench mcts --ours mcts:playout=random        # the agent with uniformly random playouts, same bench

`quartors <https://pypi.org/project/quartors/>`_ (a Quarto engine in Rust, Python >= 3.13) plays a turn --
place, then give -- as one action of one search; our ``mcts`` agent plays it as two decisions, a search each.
Simulations are not the same unit in the two (one of quartors' expands every child of a turn, one of ours a
half-turn node), so the engines meet at **equal wall time per turn**: each turn of either gets ``--turn-ms``.

- **Ours** runs :class:`~agents.tree.uct.UCTAgent` under a time budget: the placement's search gets
  :data:`PLACE_SHARE` of the turn, the give's search what is left of it (all of it when the placement is forced).
- **quartors** has no time limit, only a number of simulations (``MctsConfig.simulations``): each turn searches
  the simulations that fill its seconds at the seconds per simulation it has taken so far at the same stage
  (number of empty squares, give or place), a running average of its own searches in this run -- so the budget
  follows the machine's load as ours does. The first turn at a stage probes :data:`PROBE_SIMS` simulations and
  spends the rest of its seconds from that. The table prints both engines' mean milliseconds per turn, so that
  the equality can be checked.

Random draws come from ``--seed`` alone, never from the clock: game ``g`` seeds our agent with
``(seed, g)`` and each quartors turn with ``(seed, g, turn)``; how many simulations fit in a turn depends on the
machine, the draws do not. Games start from the empty board, our agent giving first in even games and second in
odd ones (seats swapped). The score is ours: wins plus half the draws, over the games, with its 95% Wilson
interval. Timed games depend on the load: run them on a quiet machine (``nice`` only lowers our share of a busy
one); the load average is printed beside the figures.

The grade (``--grade N``, 0 to skip): each engine plays one turn, at each ``--turn-ms``, on the same N positions
of the ``standard-v1`` suite with a piece in hand and 6-12 empty squares, with :data:`GRADE_SEEDS` search seeds;
a turn loses value when its value under perfect play (the placement's, then the give's, by the exact solver) is
below the position's. Printed: each seed's share of turns losing value and all seeds' together with its 95%
Wilson interval (the seeds share positions, so that interval is a little narrow). Where quartors does not
import, only our grade is printed, and a line says how to get the comparison.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from agents.solver.labels import action_values
from agents.specs import SpecError, make_agent, parse_spec
from agents.suites import SolvedPosition, load_suite
from agents.tree.uct import UCTAgent
from experiments.evaluation.ratings import wilson_interval
from experiments.options import CommandParser, add_integer_argument, add_seed_argument
from quarto_env.core import INITIAL_STATE, NO_PIECE, NO_WINNER, STANDARD, State, step
from quarto_env.errors import QuartoValueError

PLACE_SHARE = 0.5
"""The share of our turn's seconds that the placement's search gets; the give's search gets the rest."""
PROBE_SIMS = 32
"""Simulations of quartors' first search at a stage, which times its seconds per simulation there."""
GRADE_SEEDS = 3
GRADE_SUITE = "standard-v1"
GRADE_EMPTY = (6, 12)
"""The stages of the positions the grade plays: where a turn can still go wrong, and the solver is quick."""
MAX_GAMES = 100_000
MAX_TURN_MS = 60_000
MAX_GRADE_POSITIONS = 1000
PEER_MISSING = (
    "quartors does not import here: for the match and its grade, run quarto bench mcts under Python >= 3.13 with "
    "`pip install quartors` and this package"
)

Turn = Callable[[State, float, int], tuple[list[int], int]]
"""An engine's turn from a position (the opening, or a piece in hand) in a number of seconds, with a seed: its
actions -- a give, or a placement then a give unless the placement ends the game -- and the simulations it ran."""


class QuartorsMCTS:
    """quartors' rollout MCTS, playing turns of our positions (standard rules) in a given number of seconds."""

    def __init__(self, quartors: ModuleType) -> None:
        self.quartors = quartors
        self.seconds_per_sim: dict[tuple[float, int, bool], float] = {}
        """The running average of seconds per simulation at each turn time and stage: (seconds, empty squares, a
        piece in hand) -- a bigger tree is slower per simulation."""

    @property
    def version(self) -> str:
        """The installed quartors' version."""
        return str(self.quartors.__version__)

    def turn(self, state: State, seconds: float, seed: int) -> tuple[list[int], int]:
        """Our actions for quartors' turn from ``state`` in ``seconds`` (the simulations it searches fill them at
        its past speed at this stage), and the simulations searched."""
        start = time.perf_counter()
        position = self.position(state)
        stage = (seconds, state.num_empty, state.placing)
        if stage not in self.seconds_per_sim:
            self._search(position, PROBE_SIMS, seed, stage)
        left = seconds - (time.perf_counter() - start)
        sims = max(1, round(left / self.seconds_per_sim[stage]))
        action = self._search(position, sims, seed, stage).select_action(temperature=0.0, seed=seed)
        return [a for a in (action.position, action.give_piece) if a is not None], sims

    def _search(self, position: Any, sims: int, seed: int, stage: tuple[float, int, bool]) -> Any:
        """quartors' search of ``position`` with ``sims`` simulations, its speed averaged into the stage's."""
        search = self.quartors.Mcts(self.quartors.MctsConfig(simulations=sims), self.quartors.RolloutEvaluator())
        start = time.perf_counter()
        result = search.search(position, seed=seed)
        speed = (time.perf_counter() - start) / sims
        past = self.seconds_per_sim.get(stage, speed)
        self.seconds_per_sim[stage] = (past + speed) / 2
        return result

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


def load_peer() -> QuartorsMCTS | None:
    """quartors' search, or ``None`` where quartors does not import."""
    try:
        import quartors
    except ImportError:
        return None
    return QuartorsMCTS(quartors)


def our_turn(agent: UCTAgent, state: State, seconds: float) -> tuple[list[int], int]:
    """Our agent's actions for the turn from ``state`` in ``seconds`` -- a give at the opening, else a placement
    (in :data:`PLACE_SHARE` of them) and then a give (in the rest) unless the placement ends the game -- and the
    simulations searched (none for a forced action)."""
    actions, sims = [], 0
    start = time.perf_counter()
    decisions = 2 if state.placing else 1
    for decision in range(decisions):
        if state.over:
            break
        last = decision == decisions - 1
        spent = time.perf_counter() - start
        agent.time = max(seconds - spent if last else seconds * PLACE_SHARE, 1e-6)
        agent.last_search = None
        actions.append(agent.act(state))
        sims += agent.last_search.sims if agent.last_search is not None else 0
        state = step(STANDARD, state, actions[-1])
    return actions, sims


def game_seed(*keys: int) -> int:
    """A 31-bit seed drawn from ``keys`` (the run's seed, a game, a turn): the same keys give the same seed."""
    return int(np.random.SeedSequence(keys).generate_state(1)[0] >> 1)


class Engines:
    """Ours (a spec of ``mcts``, given a time per move turn by turn) and quartors, each with the seconds its turns
    took and the simulations they ran, per engine."""

    def __init__(self, spec: str, peer: QuartorsMCTS | None) -> None:
        kind, values = parse_spec(spec)
        if kind.name != "mcts":
            raise SpecError(f"--ours must be an mcts spec, got {spec!r}")
        if values["sims"] is not None or values["time"]:
            raise SpecError(f"the bench sets each turn's time: leave sims and time out of {spec!r}")
        self.spec = spec
        self.peer = peer
        self.seconds = {"ours": 0.0, "quartors": 0.0}
        self.sims = {"ours": 0, "quartors": 0}
        self.turns = {"ours": 0, "quartors": 0}

    def ours(self, seed: int) -> Turn:
        """A fresh agent of ours seeded with ``seed``, as a turn (its own draws; the turn's seed is not used)."""
        agent = make_agent(self.spec, STANDARD, seed=seed)
        assert isinstance(agent, UCTAgent)  # the spec is of mcts (checked when the engines were made)
        return self._timed("ours", lambda state, seconds, _: our_turn(agent, state, seconds))

    def quartors(self) -> Turn:
        """quartors' turn."""
        assert self.peer is not None
        return self._timed("quartors", self.peer.turn)

    def _timed(self, name: str, turn: Turn) -> Turn:
        def timed(state: State, seconds: float, seed: int) -> tuple[list[int], int]:
            start = time.perf_counter()
            actions, sims = turn(state, seconds, seed)
            self.seconds[name] += time.perf_counter() - start
            self.sims[name] += sims
            self.turns[name] += 1
            return actions, sims

        return timed

    def per_turn(self, name: str) -> tuple[float, float]:
        """``(milliseconds, simulations)`` per turn of engine ``name`` so far."""
        turns = max(self.turns[name], 1)
        return 1000 * self.seconds[name] / turns, self.sims[name] / turns

    def reset(self) -> None:
        """Forget the times and simulations counted so far."""
        for counts in (self.seconds, self.sims, self.turns):
            for name in counts:
                counts[name] = 0


def play_game(ours: Turn, theirs: Turn, ours_first: bool, seconds: float, seed: int, game: int) -> float:
    """One game from the empty board, each turn in ``seconds``: our score, 1 / 0.5 / 0."""
    state, turn = INITIAL_STATE, 0
    our_player = 0 if ours_first else 1
    while not state.over:
        engine = ours if state.to_move == our_player else theirs
        actions, _ = engine(state, seconds, game_seed(seed, game, turn))
        for action in actions:
            state = step(STANDARD, state, action)
        turn += 1
    if state.winner == NO_WINNER:
        return 0.5
    return 1.0 if state.winner == our_player else 0.0


def play_match(engines: Engines, games: int, seconds: float, seed: int) -> list[float]:
    """Our scores in ``games`` games at ``seconds`` a turn, seats swapped from one game to the next."""
    return [
        play_game(engines.ours(game_seed(seed, game)), engines.quartors(), game % 2 == 0, seconds, seed, game)
        for game in range(games)
    ]


def main(argv: list[str]) -> int:
    """Play the match at each turn time, then grade both engines' turns."""
    parser = CommandParser(prog="quarto bench mcts", description=__doc__.split("\n\n")[0])
    add_integer_argument(
        parser, "--turn-ms", [50, 200], "milliseconds per turn, each engine", fewest=1, most=MAX_TURN_MS, nargs="+"
    )
    add_integer_argument(parser, "--games", 200, "games per turn time (seats swapped)", fewest=2, most=MAX_GAMES)
    grade = f"grade both engines' turns on this many {GRADE_SUITE} positions, {GRADE_SEEDS} seeds (0: no grade)"
    add_integer_argument(parser, "--grade", 100, grade, fewest=0, most=MAX_GRADE_POSITIONS)
    parser.add_argument("--ours", default="mcts", help="our agent, an mcts spec (its time is set turn by turn)")
    add_seed_argument(parser, "seed of the games' and the grade's random draws")
    args = parser.parse_args(argv)
    try:
        engines = Engines(args.ours, load_peer())
        engines.ours(0)(INITIAL_STATE, 0.001, 0)  # compile (or load) our search before any clock runs
    except SpecError as error:
        parser.error(f"argument --ours: {error}")
    peer = engines.peer
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    if peer is None:
        print(PEER_MISSING)
    else:
        print_match(engines, args.turn_ms, args.games, args.seed)
    if args.grade:
        print_grade(engines, args.turn_ms, args.grade, args.seed)
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


def print_match(engines: Engines, turn_ms: list[int], games: int, seed: int) -> None:
    """One row per turn time: our score against quartors with its interval, and each engine's time and
    simulations per turn."""
    assert engines.peer is not None
    print(f"ours ({engines.spec}) against quartors {engines.peer.version} (rollout MCTS), equal wall time per turn")
    print(
        f"{'ms/turn':>7}{'games':>7}{'W-D-L':>13}{'score':>7}  {'95% interval':<16}"
        f"{'ours ms':>8}{'theirs ms':>10}{'ours sims':>11}{'theirs sims':>12}"
    )
    for ms in turn_ms:
        engines.reset()
        scores = play_match(engines, games, ms / 1000, seed)
        score = sum(scores) / games
        low, high = wilson_interval(score, games)
        record = f"{scores.count(1.0)}-{scores.count(0.5)}-{scores.count(0.0)}"
        (ours_ms, ours_sims), (theirs_ms, theirs_sims) = engines.per_turn("ours"), engines.per_turn("quartors")
        print(
            f"{ms:>7}{games:>7}{record:>13}{score:>7.3f}  [{low:.3f}, {high:.3f}]  "
            f"{ours_ms:>8.1f}{theirs_ms:>10.1f}{ours_sims:>11,.0f}{theirs_sims:>12,.0f}",
            flush=True,
        )


def print_grade(engines: Engines, turn_ms: list[int], count: int, seed: int) -> None:
    """Each engine's share of turns losing value on ``count`` suite positions, per seed and for all seeds, at each
    turn time."""
    positions = grade_positions(count, seed)
    values = TurnValues()
    low, high = GRADE_EMPTY
    print(
        f"turns losing value on {len(positions)} {GRADE_SUITE} positions with a piece in hand, {low}-{high} empty, "
        f"{GRADE_SEEDS} seeds"
    )
    seeds = "".join(f"{f'seed {k}':>9}" for k in range(GRADE_SEEDS))
    print(f"{'ms/turn':>7}  {'engine':<10}{seeds}{'all':>9}  95% interval")
    names = ["ours"] + (["quartors"] if engines.peer is not None else [])
    for ms in turn_ms:
        for name in names:
            shares = []
            for k in range(GRADE_SEEDS):
                lost = 0
                for n, solved in enumerate(positions):
                    engine = engines.ours(game_seed(seed, k, n)) if name == "ours" else engines.quartors()
                    lost += values.loses(solved, engine(solved.state, ms / 1000, game_seed(seed, k, n))[0])
                shares.append(lost / len(positions))
            share = sum(shares) / GRADE_SEEDS
            low_share, high_share = wilson_interval(share, GRADE_SEEDS * len(positions))
            row = "".join(f"{s:>9.1%}" for s in shares)
            print(f"{ms:>7}  {name:<10}{row}{share:>9.1%}  [{low_share:.1%}, {high_share:.1%}]", flush=True)


def grade_positions(count: int, seed: int) -> list[SolvedPosition]:
    """``count`` positions of the suite with a piece in hand and 6-12 empty squares, drawn without replacement."""
    low, high = GRADE_EMPTY
    pool = [p for p in load_suite(GRADE_SUITE).positions if p.phase == "place" and low <= p.empty <= high]
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
