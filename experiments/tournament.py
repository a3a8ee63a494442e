"""``quarto tournament``: games between agents, with per-pair scores, Elo ratings and 95% intervals.

Example usage::

    quarto tournament random greedy minimax:depth=2 mcts:sims=1000 --games 40 --seed 0 --time-limit 5

Every pair of agents (``--mode round-robin``), or every agent against one ``--field`` agent (``--mode
vs-field``), plays ``--games`` games, half in each seating (player 0 gives first). Game ``g`` of pair
``(i, j)`` is seeded from ``(seed, i, j, g)`` alone and its agents are built fresh from their specs inside
the worker that plays it, so the results do not depend on ``--jobs`` or on the order games finish in.

**Openings.** Deterministic agents (minimax) would play the same two games over and over from the empty
board, and their many games would count as many independent samples when they are two. So each pair's games
2k and 2k + 1 first play the same seeded random opening of ``--opening-plies`` actions (default 4: two pieces
given and placed, no threat possible), one game in each seating -- the balanced-openings practice of engine
testing. The record keeps the opening apart (``opening``) from the agents' moves.

**Time limit.** With ``--time-limit T`` an agent that takes longer than ``T`` seconds over one move forfeits
that game (the rule of :mod:`agents.match`): the opponent wins, the record ends with ``"forfeit"``, and the
tables count forfeits per agent. Timings are wall-clock, measured while ``--jobs`` games run side by side, so
give agents with a time budget (``minimax:time=S``, ``mcts:time=S``) some margin under the limit.

The output folder holds ``results.csv``/``results.md`` (each pair: wins, draws, losses, score with its 95%
Wilson interval), ``ratings.csv``/``ratings.md`` (Elo fitted on all games, 95% interval from a bootstrap or
``--intervals hessian``, anchored on ``--anchor``; see :mod:`agents.ratings`), ``ratings.png``,
``games.jsonl`` (one game per line, replayable with ``quarto replay``), ``config.json`` and ``command.txt``;
with ``--tensorboard`` also ``tensorboard/``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from agents.base import make_agent
from agents.match import GameRecord, play_game
from agents.ratings import INTERVAL_METHODS, GameResult, Rating, fit_ratings, wilson_interval
from experiments.arena_io import (
    add_variant_arguments,
    agent_or_exit,
    check_specs,
    markdown_table,
    record_line,
    save_run_config,
    variant_from_args,
)
from quarto_env.checks import atomic_write, atomic_write_text
from quarto_env.core import DECLARE, INITIAL_STATE, STANDARD, State, Variant, legal_actions, step
from quarto_env.notation import parse_position

MODES = ("round-robin", "vs-field")
DEFAULT_OPENING_PLIES = 4
"""Two pieces given and placed at random: varied starts, yet no threat on the board."""
MAX_OPENING_PLIES = 7
"""At most three pieces placed: no opening can complete a group."""
OPENING_STREAM = 1
"""Keeps the openings' random stream apart from the games' seeds."""


@dataclasses.dataclass(frozen=True)
class GameJob:
    """One scheduled game: agents ``pair = (i, j)`` (indices into the agent list), round ``round`` of that
    pair, with ``seats`` giving the agent index of player 0 and player 1."""

    index: int
    pair: tuple[int, int]
    round: int
    seats: tuple[int, int]
    seed: int
    opening: tuple[int, ...] = ()
    """Actions played at random before the agents take over; both seatings of a pair share each opening."""


@dataclasses.dataclass
class PlayedGame:
    """A finished game and the job that scheduled it."""

    job: GameJob
    record: GameRecord

    def score(self, agent: int) -> float:
        """The score (1, 0.5, 0) of agent index ``agent``, which played this game."""
        return self.record.score(self.job.seats.index(agent))

    def forfeited_by(self, agent: int) -> bool:
        """Whether ``agent`` lost this game on time."""
        return self.record.end == "forfeit" and self.score(agent) == 0.0


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``quarto tournament``."""
    parser = argparse.ArgumentParser(
        prog="quarto tournament",
        description="Play agents against each other and rate them (Elo with 95% intervals).",
        epilog="Agent specs: random, greedy, minimax:depth=3, minimax:time=1, mcts:sims=2000, solver, ppo:PATH.",
    )
    parser.add_argument("agents", nargs="+", metavar="AGENT_SPEC", help="the agents, as specs")
    parser.add_argument("--games", type=int, default=20, help="games per pair, even: half in each seating (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="master seed of every game (default 0)")
    parser.add_argument("--mode", choices=MODES, default="round-robin", help="who plays whom")
    parser.add_argument(
        "--opening-plies",
        type=int,
        default=DEFAULT_OPENING_PLIES,
        help=f"random actions before the agents play, shared by both seatings (0-{MAX_OPENING_PLIES}, "
        f"default {DEFAULT_OPENING_PLIES})",
    )
    parser.add_argument("--field", metavar="SPEC", help="with --mode vs-field: the agent everyone plays")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="per-move limit: a move that takes longer forfeits the game (default: none)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel games (default: all cores)")
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="output folder (default runs/tournament__SEED__TIME)"
    )
    parser.add_argument("--anchor", metavar="SPEC", help="agent rated 0 (default: random if playing, else the first)")
    parser.add_argument(
        "--intervals",
        choices=INTERVAL_METHODS,
        default="bootstrap",
        help="rating intervals: bootstrap over games, or the Hessian (wider, honest for few or one-sided games)",
    )
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap refits for the intervals (default 1000)")
    parser.add_argument("--prior-draws", type=float, default=1.0, help="virtual draws per pair (keeps ratings finite)")
    parser.add_argument("--tensorboard", action="store_true", help="also log ratings and tables to DIR/tensorboard")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_variant_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto tournament``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    variant = variant_from_args(parser, args)
    names = _checked_agent_names(parser, args)
    for name in names:  # fail here, with a clear message, rather than in a worker halfway through
        agent_or_exit(parser, name, variant, seed=0)
    anchor = args.anchor or ("random" if "random" in names else names[0])
    if anchor not in names:
        parser.error(f"--anchor {anchor!r} is not one of the agents: {', '.join(names)}")
    out = args.out or Path("runs") / f"tournament__{args.seed}__{time.strftime('%Y%m%d-%H%M%S')}"
    jobs = schedule(len(names), args.mode, args.games, args.seed, variant, args.opening_plies)
    config = {
        "agents": names,
        "mode": args.mode,
        "games_per_pair": args.games,
        "opening_plies": args.opening_plies,
        "seed": args.seed,
        "time_limit": args.time_limit,
        "jobs": args.jobs,
        "anchor": anchor,
        "intervals": args.intervals,
        "bootstrap": args.bootstrap,
        "prior_draws": args.prior_draws,
        "variant": variant.to_dict(),
        "total_games": len(jobs),
    }
    out.mkdir(parents=True, exist_ok=True)
    save_run_config(out, "tournament", argv, config)
    print(f"{len(jobs)} games between {len(names)} agents under {variant.describe()} rules, {args.jobs} jobs -> {out}")

    games = play_all(names, jobs, variant, args.time_limit, args.jobs, progress=not args.no_progress)
    ratings = fit_ratings(
        names,
        [GameResult(g.job.seats[0], g.job.seats[1], g.record.score(0)) for g in games],
        anchor,
        prior_draws=args.prior_draws,
        intervals=args.intervals,
        bootstrap=args.bootstrap,
        seed=args.seed,
    )
    pairs = pair_results(names, games)
    write_outputs(out, names, variant, games, pairs, ratings, anchor, config)
    if args.tensorboard:
        log_to_tensorboard(out / "tensorboard", pairs, ratings, config)
    print(f"\n{ratings_markdown(ratings, names, games, variant, anchor)}\n{results_markdown(pairs)}\nwritten to {out}")
    return 0


def _checked_agent_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The agent list (the field last in vs-field mode), after checking every spec and every number."""
    names = list(args.agents)
    if args.mode == "vs-field":
        if not args.field:
            parser.error("--mode vs-field needs --field SPEC, the agent that everyone plays")
        names.append(args.field)
    elif args.field:
        parser.error("--field is used only with --mode vs-field")
    if len(names) < 2:
        parser.error("a tournament needs at least two agents")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        parser.error(f"agent spec(s) listed twice: {', '.join(repeated)}")
    check_specs(parser, names)
    if args.games < 2 or args.games % 2:
        parser.error(f"--games must be an even number >= 2 (half the games in each seating), got {args.games}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if not 0 <= args.opening_plies <= MAX_OPENING_PLIES:
        parser.error(
            f"--opening-plies must be 0-{MAX_OPENING_PLIES} (a longer random opening could end the game), "
            f"got {args.opening_plies}"
        )
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    if args.bootstrap < 0 or args.prior_draws < 0:
        parser.error(f"--bootstrap and --prior-draws must be >= 0, got {args.bootstrap} and {args.prior_draws}")
    if args.time_limit is not None and args.time_limit <= 0:
        parser.error(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    return names


def schedule(
    num_agents: int, mode: str, games_per_pair: int, seed: int, variant: Variant = STANDARD, opening_plies: int = 0
) -> list[GameJob]:
    """Every game to play. In vs-field mode the field is the last agent. Seats alternate within each pair, and
    games ``2k`` and ``2k + 1`` of a pair start from the same random opening of ``opening_plies`` actions."""
    if mode == "round-robin":
        pairs = [(i, j) for i in range(num_agents) for j in range(i + 1, num_agents)]
    else:
        field = num_agents - 1
        pairs = [(i, field) for i in range(field)]
    jobs: list[GameJob] = []
    for i, j in pairs:
        for game in range(games_per_pair):
            seats = (i, j) if game % 2 == 0 else (j, i)
            game_seed = int(np.random.SeedSequence([seed, i, j, game]).generate_state(1)[0])
            opening_rng = np.random.default_rng([seed, i, j, game // 2, OPENING_STREAM])
            opening = random_opening(variant, opening_plies, opening_rng)
            jobs.append(GameJob(len(jobs), (i, j), game, seats, game_seed, opening))
    return jobs


def random_opening(variant: Variant, plies: int, rng: np.random.Generator) -> tuple[int, ...]:
    """``plies`` uniformly random legal actions from the empty board (never a declaration). With fewer than
    ``MAX_OPENING_PLIES + 1`` plies fewer than four pieces are placed, so no opening ends the game."""
    actions = []
    state = INITIAL_STATE
    for _ in range(plies):
        choices = [a for a in legal_actions(variant, state) if a != DECLARE]
        actions.append(int(choices[rng.integers(len(choices))]))
        state = step(variant, state, actions[-1])
    return tuple(actions)


def opening_state(variant: Variant, opening: Sequence[int]) -> State:
    """The position after the opening ``opening``."""
    state = INITIAL_STATE
    for action in opening:
        state = step(variant, state, action)
    return state


def play_all(
    names: Sequence[str],
    jobs: Sequence[GameJob],
    variant: Variant,
    time_limit: float | None,
    workers: int,
    progress: bool = True,
) -> list[PlayedGame]:
    """Play every job, ``workers`` at a time (in this process when 1), and return the games in job order."""
    tasks = [(job, tuple(names[s] for s in job.seats), variant, time_limit) for job in jobs]
    bar = tqdm(total=len(jobs), unit="game", desc="games", disable=not progress, dynamic_ncols=True)
    records: dict[int, GameRecord] = {}
    with bar:
        for index, record in _results(tasks, workers):
            records[index] = record
            bar.update()
    return [PlayedGame(job, records[job.index]) for job in jobs]


def _results(tasks: list, workers: int) -> Iterator[tuple[int, GameRecord]]:
    if workers == 1 or len(tasks) == 1:
        yield from map(_play_task, tasks)
        return
    # spawn, not fork: workers start clean (no inherited threads of torch, numba or the progress bar).
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(workers, len(tasks)), initializer=_init_worker) as pool:
        yield from pool.imap_unordered(_play_task, tasks)


def _init_worker() -> None:
    # One thread per worker process: the workers already fill the cores.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[name] = "1"


def _play_task(task: tuple[GameJob, tuple[str, str], Variant, float | None]) -> tuple[int, GameRecord]:
    """Build both agents from their specs with seeds drawn from the game's seed, and play the game."""
    job, specs, variant, time_limit = task
    seeds = np.random.SeedSequence(job.seed).generate_state(2)
    agents = [make_agent(spec, variant, seed=int(s)) for spec, s in zip(specs, seeds, strict=True)]
    return job.index, play_game(variant, agents, opening_state(variant, job.opening), time_limit=time_limit)


# ---------------------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PairResult:
    """Agent ``a`` against agent ``b``: counts from ``a``'s side, its mean score and the score's 95% interval."""

    a: str
    b: str
    games: int
    wins: int
    draws: int
    losses: int
    score: float
    low: float
    high: float
    forfeits_a: int
    forfeits_b: int


def pair_results(names: Sequence[str], games: Sequence[PlayedGame]) -> list[PairResult]:
    """One row per pair that played, in schedule order."""
    by_pair: dict[tuple[int, int], list[PlayedGame]] = {}
    for game in games:
        by_pair.setdefault(game.job.pair, []).append(game)
    rows = []
    for (i, j), played in by_pair.items():
        scores = [g.score(i) for g in played]
        mean = sum(scores) / len(scores)
        low, high = wilson_interval(mean, len(scores))
        rows.append(
            PairResult(
                names[i],
                names[j],
                len(scores),
                scores.count(1.0),
                scores.count(0.5),
                scores.count(0.0),
                mean,
                low,
                high,
                sum(g.forfeited_by(i) for g in played),
                sum(g.forfeited_by(j) for g in played),
            )
        )
    return rows


def results_markdown(pairs: Sequence[PairResult]) -> str:
    """The per-pair table: W/D/L and score of the first-named agent, with the 95% Wilson interval."""
    rows = [
        [
            f"`{p.a}`",
            f"`{p.b}`",
            str(p.games),
            f"{p.wins}/{p.draws}/{p.losses}",
            f"{p.score:.3f}",
            f"[{p.low:.3f}, {p.high:.3f}]",
            f"{p.forfeits_a}/{p.forfeits_b}",
        ]
        for p in pairs
    ]
    header = ["agent A", "agent B", "games", "A wins/draws/losses", "A score", "95% CI", "forfeits A/B"]
    return markdown_table(header, rows)


def agent_summary(names: Sequence[str], games: Sequence[PlayedGame], variant: Variant) -> dict[str, dict[str, float]]:
    """Per agent: forfeits, mean and longest seconds per move over all its games."""
    summary = {}
    for i, name in enumerate(names):
        seconds = [
            t
            for g in games
            if i in g.job.seats
            for move, t in enumerate(g.record.move_seconds)
            if _mover(g, move, variant) == g.job.seats.index(i)
        ]
        summary[name] = {
            "forfeits": float(sum(g.forfeited_by(i) for g in games if i in g.job.seats)),
            "mean_move_seconds": float(np.mean(seconds)) if seconds else 0.0,
            "max_move_seconds": float(np.max(seconds)) if seconds else 0.0,
        }
    return summary


def _mover(game: PlayedGame, move: int, variant: Variant) -> int:
    """The player (0 or 1) who made move ``move`` of ``game``, read from the position before it."""
    return parse_position(game.record.positions[move], variant).to_move


def ratings_markdown(
    ratings: Sequence[Rating], names: Sequence[str], games: Sequence[PlayedGame], variant: Variant, anchor: str
) -> str:
    """The rating table, best first, with games, mean score, forfeits and move times."""
    summary = agent_summary(names, games, variant)
    rows = [
        [
            str(rank),
            f"`{r.name}`",
            f"{r.rating:+.0f}",
            f"[{r.low:+.0f}, {r.high:+.0f}]",
            str(r.games),
            f"{r.score:.3f}",
            str(int(summary[r.name]["forfeits"])),
            f"{summary[r.name]['mean_move_seconds'] * 1000:.1f}",
            f"{summary[r.name]['max_move_seconds'] * 1000:.0f}",
        ]
        for rank, r in enumerate(ratings, 1)
    ]
    header = ["rank", "agent", f"Elo (`{anchor}` = 0)", "95% CI", "games", "score", "forfeits", "ms/move", "max ms"]
    return markdown_table(header, rows)


# ---------------------------------------------------------------------------------------------------------
# Output files
# ---------------------------------------------------------------------------------------------------------
def write_outputs(
    out: Path,
    names: Sequence[str],
    variant: Variant,
    games: Sequence[PlayedGame],
    pairs: Sequence[PairResult],
    ratings: Sequence[Rating],
    anchor: str,
    config: dict,
) -> None:
    """Write every table, the game records and the plot into ``out``, each file atomically."""
    lines = [
        record_line(
            g.record,
            variant,
            game=g.job.index,
            pair=list(g.job.pair),
            round=g.job.round,
            seed=g.job.seed,
            opening=list(g.job.opening),
        )
        for g in games
    ]
    atomic_write_text(out / "games.jsonl", "".join(lines))
    atomic_write_text(out / "results.csv", _csv([dataclasses.asdict(p) for p in pairs]))
    atomic_write_text(out / "results.md", results_markdown(pairs))
    summary = agent_summary(names, games, variant)
    rating_rows = [{**dataclasses.asdict(r), **summary[r.name]} for r in ratings]
    atomic_write_text(out / "ratings.csv", _csv(rating_rows))
    atomic_write_text(out / "ratings.md", ratings_markdown(ratings, names, games, variant, anchor))
    title = f"{variant.describe()} Quarto, {config['games_per_pair']} games per pair, seed {config['seed']}"
    atomic_write(out / "ratings.png", lambda path: plot_ratings(ratings, anchor, title, path, config["intervals"]))


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def plot_ratings(ratings: Sequence[Rating], anchor: str, title: str, path: Path, intervals: str = "bootstrap") -> None:
    """A horizontal bar of each rating with its 95% interval, best at the top, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = list(reversed(ratings))
    values = np.array([r.rating for r in ordered])
    errors = np.array([[r.rating - r.low for r in ordered], [r.high - r.rating for r in ordered]])
    figure, axes = plt.subplots(figsize=(7, 0.45 * len(ordered) + 1.4), dpi=110)
    axes.errorbar(values, range(len(ordered)), xerr=errors, fmt="o", capsize=4, color="tab:blue")
    axes.set_yticks(range(len(ordered)), [r.name for r in ordered])
    axes.axvline(0.0, color="grey", linewidth=0.8, linestyle=":")
    axes.set_xlabel(f"Elo rating ({anchor} = 0), 95% {'bootstrap' if intervals == 'bootstrap' else 'Hessian'} interval")
    axes.set_title(title, fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)


def log_to_tensorboard(folder: Path, pairs: Sequence[PairResult], ratings: Sequence[Rating], config: dict) -> None:
    """Ratings as scalars ``ratings/<agent>`` (with ``_low``/``_high``), the tables and config as text."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for r in ratings:
        writer.add_scalar(f"ratings/{r.name}", r.rating, 0)
        writer.add_scalar(f"ratings/{r.name}_low", r.low, 0)
        writer.add_scalar(f"ratings/{r.name}_high", r.high, 0)
        writer.add_scalar(f"scores/{r.name}", r.score, 0)
    writer.add_text("tournament/results", results_markdown(pairs), 0)
    writer.add_text("tournament/config", "```\n" + json.dumps(config, indent=2) + "\n```", 0)
    writer.close()
