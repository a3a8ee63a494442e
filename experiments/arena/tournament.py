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
``--intervals hessian``, anchored on ``--anchor``; see :mod:`experiments.evaluation.ratings`), ``ratings.png``,
``games.jsonl`` (one game per line, replayable with ``quarto replay``), ``config.json`` and ``command.txt``;
with ``--tensorboard`` also ``tensorboard/``.

**Nothing is lost.** Each game is appended to ``games.jsonl`` (and flushed) as it ends, so a killed or
interrupted tournament loses only the games in progress; ``quarto tournament --resume DIR`` finishes it with the
settings of its ``config.json``: it plays the games missing from ``games.jsonl`` (dropping, with a warning, a last
line cut short by the kill) and writes the results. Same code, same seeds: the games and results equal those
of an uninterrupted run. Settings given with ``--resume`` must be the run's (only ``--jobs``, ``--no-progress``
and ``--tensorboard`` may change), and ``--out`` refuses a folder that already holds a run unless ``--overwrite``
is given. The folder is locked for the run's life: a second tournament in it, or a ``--resume`` while it still
plays, is refused (:mod:`experiments.output`). The tables are printed before the files are written; without
matplotlib (the core install) every file but ``ratings.png`` is written, and a note names the extra that draws it.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import io
import json
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

import numpy as np
from tqdm import tqdm

from agents.match import (
    DEFAULT_OPENING_PLIES,
    MAX_OPENING_PLIES,
    GameRecord,
    opening_state,
    play_game,
)
from agents.specs import make_agent
from agents.storage.files import atomic_write, atomic_write_text
from experiments.arena.records import record_line
from experiments.arena.schedule import GameJob, PlayedGame, playing_pairs, schedule
from experiments.arena.tournament_resume import (
    GAMES_FILE,
    games_already_played,
    holds_tournament,
    resumed_args,
)
from experiments.evaluation.perfect import (
    PerfectGame,
    PerfectPlayReport,
    perfect_game,
    perfect_markdown,
    perfect_score,
    plays_perfectly_from,
    solver_agent,
)
from experiments.evaluation.ratings import INTERVAL_METHODS, GameResult, Rating, fit_ratings, wilson_interval
from experiments.evaluation.tables import markdown_table
from experiments.options import (
    MAX_SEED,
    CommandParser,
    add_integer_argument,
    add_jobs_argument,
    add_number_argument,
    add_opening_plies_argument,
    add_progress_and_variant_arguments,
    add_seed_argument,
    agent_or_exit,
    all_cores,
    capped_jobs,
    check_specs,
    parse_command,
    variant_from_args,
)
from experiments.output import Output, add_overwrite_argument, claim_output
from experiments.run_folder import default_run_folder, save_run_config
from quarto_env.core import Variant
from quarto_env.extras import as_missing_extra, require
from quarto_env.notation import parse_position

if TYPE_CHECKING:
    from agents.solver.minimax import SolverAgent

MODES = ("round-robin", "vs-field")
MAX_GAMES_PER_PAIR = 100_000
MIN_BOOTSTRAP = 100
"""The fewest bootstrap refits: the 2.5% and 97.5% percentiles of fewer rest on one or two refits each (with one,
the interval need not even hold the rating)."""
MAX_BOOTSTRAP = 100_000
MAX_SECONDS_PER_MOVE = 24 * 3600


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``quarto tournament``."""
    parser = CommandParser(
        prog="quarto tournament",
        description="Play agents against each other and rate them (Elo with 95% intervals).",
        epilog="Agent specs: random, greedy, minimax:depth=3, minimax:time=1, mcts:sims=2000, solver, ppo:PATH, "
        "ppo:PATH,deterministic=false. An interrupted tournament is finished with --resume DIR.",
    )
    parser.add_argument("agents", nargs="*", metavar="AGENT_SPEC", help="the agents, as specs (with --resume: none)")
    add_integer_argument(
        parser, "--games", 20, "games per pair, even: half in each seating", fewest=2, most=MAX_GAMES_PER_PAIR
    )
    add_seed_argument(parser, f"master seed of every game, 0-{MAX_SEED}")
    parser.add_argument("--mode", choices=MODES, default="round-robin", help="who plays whom")
    add_opening_plies_argument(
        parser,
        f"random actions before the agents play, shared by both seatings (0-{MAX_OPENING_PLIES}, "
        f"default {DEFAULT_OPENING_PLIES})",
    )
    parser.add_argument("--field", metavar="SPEC", help="with --mode vs-field: the agent everyone plays")
    add_number_argument(
        parser,
        "--time-limit",
        None,
        "per-move limit: a move that takes longer forfeits the game (default: none)",
        metavar="SECONDS",
        above=0,
        maximum=MAX_SECONDS_PER_MOVE,
    )
    add_jobs_argument(parser, "parallel games, at most the number of cores (default: all cores)", default=all_cores())
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="output folder (default runs/tournament__SEED__TIME)"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="DIR",
        help="finish the interrupted tournament in DIR with its settings: play the games missing from its games.jsonl",
    )
    add_overwrite_argument(parser)
    parser.add_argument("--anchor", metavar="SPEC", help="agent rated 0 (default: random if playing, else the first)")
    parser.add_argument(
        "--intervals",
        choices=INTERVAL_METHODS,
        default="bootstrap",
        help="rating intervals: bootstrap over games, or the Hessian (wider, honest for few or one-sided games)",
    )
    add_integer_argument(
        parser,
        "--bootstrap",
        1000,
        f"bootstrap refits for the intervals (fewer than {MIN_BOOTSTRAP} would put a 95%% interval's ends on one "
        "or two refits)",
        fewest=MIN_BOOTSTRAP,
        most=MAX_BOOTSTRAP,
    )
    add_number_argument(
        parser,
        "--prior-draws",
        1.0,
        "virtual draws per pair (keeps ratings finite; default 1)",
        above=0,
        maximum=MAX_GAMES_PER_PAIR,
    )
    parser.add_argument("--tensorboard", action="store_true", help="also log ratings and tables to DIR/tensorboard")
    add_progress_and_variant_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto tournament``."""
    # The variant flags are checked here, first; the run's variant is its config's (a resumed run's own).
    parser, args, _ = parse_command(build_parser, argv)
    if args.resume is not None:
        if args.overwrite:
            parser.error("--resume finishes a run and --overwrite replaces one: give one or the other")
        args = resumed_args(parser, args, argv, lambda given: tournament_config(parser, given).config)
    config, variant = tournament_config(parser, args)
    if args.tensorboard:
        require("train", "--tensorboard", "torch", "tensorboard")
    names = config["agents"]
    for name in names:  # fail here, with a clear message, rather than in a worker halfway through
        agent_or_exit(parser, name, variant, seed=0)
    jobs = schedule(len(names), args.mode, args.games, args.seed, variant, args.opening_plies)
    resume = args.resume is not None
    folder = args.resume if resume else args.out or default_run_folder("tournament", args.seed)
    with claim_output(
        folder,
        "run",
        option="--resume" if resume else "--out",
        overwrite=args.overwrite,
        resume=resume,
        holds_result=holds_tournament,
        resume_hint=f"--resume {folder}",
        prog=parser.prog,
    ) as run:
        return _play(parser, args, argv, run, config, variant, jobs)


def _play(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    argv: list[str],
    run: Output,
    config: dict[str, Any],
    variant: Variant,
    jobs: list[GameJob],
) -> int:
    """Play the games the claimed ``run`` folder does not hold yet, then write the results; the exit status."""
    out, names = run.path, config["agents"]
    if args.resume is not None:
        played = games_already_played(parser, out, names, variant, jobs)
        print(f"resuming {out}: {len(played)} of {len(jobs)} games already played")
    else:
        run.replace_previous()
        save_run_config(out, "tournament", argv, {**config, "argv": argv})
        played = []
    workers = capped_jobs(parser, args.jobs)
    done = {game.job.index for game in played}
    missing = [job for job in jobs if job.index not in done]
    print(f"{len(missing)} games between {len(names)} agents under {variant.describe()} rules, {workers} jobs -> {out}")
    try:
        with (out / GAMES_FILE).open("a", encoding="utf-8") as log:
            save = functools.partial(append_game, log, variant)
            fresh = play_all(names, missing, variant, args.time_limit, workers, not args.no_progress, save)
    except KeyboardInterrupt:
        print(f"\ninterrupted: `quarto tournament --resume {out}` plays the games missing from it", file=sys.stderr)
        return 130
    games = sorted([*played, *fresh], key=lambda g: g.job.index)
    _write_results(args, out, names, variant, games, config)
    return 0


def _write_results(
    args: argparse.Namespace, out: Path, names: list[str], variant: Variant, games: list[PlayedGame], config: dict
) -> None:
    """Fit the ratings on every game, write the output files and print the tables."""
    anchor = config["anchor"]
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
    perfect = perfect_play_reports(names, games, variant)
    perfect_text = perfect_markdown(perfect) + "\n" if perfect else ""
    tables = f"{ratings_markdown(ratings, names, games, variant, anchor)}\n{results_markdown(pairs)}\n{perfect_text}"
    if args.intervals == "bootstrap" and any(r.low == r.high for r in ratings if r.name != anchor):
        tables += ZERO_WIDTH_NOTE
    print(f"\n{tables}", end="")  # first: a write that fails does not take the tables with it
    write_outputs(out, names, variant, games, pairs, ratings, anchor, config)
    write_perfect_play(out, perfect)
    if args.tensorboard:
        log_to_tensorboard(out / "tensorboard", pairs, ratings, config)
    print(f"written to {out}")


ZERO_WIDTH_NOTE = (
    "An interval of zero width: every bootstrap resample gave the same rating (a pair of agents where one won every "
    "game); --intervals hessian gives one that says how little such games tell.\n"
)


class TournamentConfig(NamedTuple):
    """A tournament's resolved configuration, as ``config.json`` records it, and its rule variant."""

    config: dict[str, Any]
    variant: Variant


def tournament_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TournamentConfig:
    """The resolved configuration of ``args`` (agents and anchor checked) and its rule variant; a bad setting exits
    with a usage error."""
    variant = variant_from_args(parser, args)
    names = _checked_agent_names(parser, args)
    anchor = args.anchor if args.anchor is not None else ("random" if "random" in names else names[0])
    if anchor not in names:
        parser.error(f"--anchor {anchor!r} is not one of the agents: {', '.join(names)}")
    config = {
        "agents": names,
        "mode": args.mode,
        "games_per_pair": args.games,
        "opening_plies": args.opening_plies,
        "seed": args.seed,
        "time_limit": args.time_limit,
        "jobs": capped_jobs(None, args.jobs),
        "anchor": anchor,
        "intervals": args.intervals,
        "bootstrap": args.bootstrap,
        "prior_draws": args.prior_draws,
        "variant": variant.to_dict(),
        "total_games": len(playing_pairs(len(names), args.mode)) * args.games,
    }
    return TournamentConfig(config, variant)


def _checked_agent_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The agent list (the field last in vs-field mode), after checking every spec."""
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
    if args.games % 2:
        parser.error(f"--games must be an even number >= 2 (half the games in each seating), got {args.games}")
    return names


def play_all(
    names: Sequence[str],
    jobs: Sequence[GameJob],
    variant: Variant,
    time_limit: float | None,
    workers: int,
    progress: bool = True,
    on_game: Callable[[PlayedGame], None] | None = None,
) -> list[PlayedGame]:
    """Play every job, ``workers`` at a time (in this process when 1), and return the games in job order.
    ``on_game(game)`` is called as each game ends, in the order they end (to save it at once)."""
    tasks = [(job, tuple(names[s] for s in job.seats), variant, time_limit) for job in jobs]
    bar = tqdm(total=len(jobs), unit="game", desc="games", disable=not progress, dynamic_ncols=True)
    by_index = {job.index: job for job in jobs}
    games: dict[int, PlayedGame] = {}
    with bar:
        for index, record in _results(tasks, workers):
            games[index] = PlayedGame(by_index[index], record)
            if on_game is not None:
                on_game(games[index])
            bar.update()
    return [games[job.index] for job in jobs]


def append_game(log: TextIO, variant: Variant, game: PlayedGame) -> None:
    """Append ``game`` to the open ``games.jsonl`` ``log`` and flush it: once this returns, a killed process
    has lost nothing of it."""
    log.write(game_line(game, variant))
    log.flush()


def game_line(game: PlayedGame, variant: Variant) -> str:
    """The ``games.jsonl`` line of ``game``: its record and its place in the schedule."""
    job = game.job
    extra = {"game": job.index, "pair": list(job.pair), "round": job.round, "seed": job.seed}
    return record_line(game.record, variant, **extra, opening=list(job.opening))


def _results(tasks: list, workers: int) -> Iterator[tuple[int, GameRecord]]:
    if workers == 1 or len(tasks) <= 1:
        yield from map(_play_task, tasks)
        return
    # spawn, not fork: workers start clean (no inherited threads of torch, numba or the progress bar).
    context = multiprocessing.get_context("spawn")
    # Ctrl-C is the parent's to handle: it stops the pool, which ends the workers wherever they are. A worker
    # that took SIGINT itself would print a traceback from wherever it was -- while still importing, too, before
    # any initializer runs -- so the workers are started with SIGINT ignored, which a new Python process keeps.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        pool = context.Pool(min(workers, len(tasks)), initializer=_init_worker)
    finally:
        signal.signal(signal.SIGINT, previous)
    with pool:
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
    """Write every table, the game records (in schedule order) and the plot into ``out``, each file atomically."""
    atomic_write_text(out / GAMES_FILE, "".join(game_line(g, variant) for g in games))
    atomic_write_text(out / "results.csv", _csv([dataclasses.asdict(p) for p in pairs]))
    atomic_write_text(out / "results.md", results_markdown(pairs))
    summary = agent_summary(names, games, variant)
    rating_rows = [{**dataclasses.asdict(r), **summary[r.name]} for r in ratings]
    atomic_write_text(out / "ratings.csv", _csv(rating_rows))
    atomic_write_text(out / "ratings.md", ratings_markdown(ratings, names, games, variant, anchor))
    title = f"{variant.describe()} Quarto, {config['games_per_pair']} games per pair, seed {config['seed']}"
    draw_picture(out / "ratings.png", lambda path: plot_ratings(ratings, anchor, title, path, config["intervals"]))


def draw_picture(path: Path, draw: Callable[[Path], None], prog: str = "quarto tournament") -> bool:
    """Write the picture ``draw`` makes to ``path`` atomically; without the library that draws it (matplotlib, in
    the train extra) write nothing and print a note naming the extra: a picture only illustrates the tables.
    Whether it was written."""
    try:
        atomic_write(path, draw)
    except ModuleNotFoundError as error:
        missing = as_missing_extra(error, f"{path.name} (the picture; every other file is written)")
        if missing is None:
            raise
        print(f"{prog}: note: {missing}", file=sys.stderr)
        return False
    return True


def write_perfect_play(out: Path, reports: Sequence[PerfectPlayReport]) -> None:
    """Write ``perfect.md`` and ``perfect.json`` when a ``solver`` entrant played (``reports``:
    :func:`perfect_play_reports`; nothing when it is empty)."""
    if not reports:
        return
    atomic_write_text(out / "perfect.md", perfect_markdown(reports))
    atomic_write_text(out / "perfect.json", json.dumps([r.summary() for r in reports], indent=2) + "\n")


def perfect_play_reports(
    names: Sequence[str], games: Sequence[PlayedGame], variant: Variant
) -> list[PerfectPlayReport]:
    """For each ``solver`` entrant, every other entrant's points lost in its games against it
    (:mod:`experiments.evaluation.perfect`). Only games from openings where the solver is exact count (with the
    variant's opening book, all of them), and not those it forfeited on time."""
    reports = []
    for s, solver_name in enumerate(names):
        solver = solver_agent(solver_name, variant)
        for i, name in enumerate(names):
            played = [] if solver is None or i == s else _games_against_perfect_play(games, i, s, solver, variant)
            if played:
                reports.append(PerfectPlayReport(name, solver_name, played))
    return reports


def _games_against_perfect_play(
    games: Sequence[PlayedGame], agent: int, solver_index: int, solver: SolverAgent, variant: Variant
) -> list[PerfectGame]:
    """Agent index ``agent``'s games against the solver entrant ``solver_index`` (the agent ``solver``) where the
    solver played perfectly: from an opening where it is exact, and not forfeited by it."""
    perfect_games = []
    for game in games:
        if set(game.job.pair) != {agent, solver_index} or game.forfeited_by(solver_index):
            continue
        state = opening_state(variant, game.job.opening)
        if plays_perfectly_from(solver, state):
            seat = game.job.seats.index(agent)
            perfect = perfect_score(state, seat, solver.solver)
            perfect_games.append(perfect_game(game.record, game.job.opening, seat, perfect))
    return perfect_games


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
