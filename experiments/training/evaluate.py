"""Evaluate a training checkpoint against agents over many games, with a confidence interval.

Example usage::

    quarto evaluate runs/long_parity/checkpoints/final.zip --games 4000
    quarto evaluate runs/x --opponents greedy minimax:depth=3 --seed 7     # a run folder: its final.zip
    quarto evaluate runs/az --opponents minimax:depth=4 --games 400 --sims 200 0

The checkpoint is a ``.zip`` or a run folder, which means its ``final.zip`` (``latest.zip`` while it trains), as
``ppo:RUN``, ``az:RUN`` and ``rllib:RUN`` do (:func:`agents.networks.checkpoints.checkpoint_path`); the file taken is
said on stderr. ``--checkpoint best`` (or the path of ``best.zip``) takes the network of the best evaluation score. The
agent spec that plays it is taken too, as ``quarto train`` prints it: ``quarto evaluate ppo:RUN`` or
``az:RUN,checkpoint=best`` (:func:`learner_checkpoint`). Every spec, the opponents' too, is checked before anything
is loaded: a mistyped one is one line at once, not after the checkpoint has loaded.

The games are played side by side as in training (the learner's moves in one batched call per turn), half with
the learner giving first. A PPO learner plays its most likely action (argmax) and, separately, samples its
policy; an alphazero learner plays the most visited action of its search, once per ``--sims`` value (0: the
network's policy alone), all games searched together. Like ``quarto tournament``, each pair of games (one per
seating) starts from the same random opening of ``--opening-plies`` actions, by default as many as the
tournament's (:data:`~agents.match.DEFAULT_OPENING_PLIES`). With ``--opening-plies 0`` every
game starts from the empty board, where a deterministic learner against a deterministic opponent (minimax)
replays the same two games over and over: there, only the sampled rows are informative. ``--device`` runs the
learner's network on a GPU (``auto`` or ``cuda``); the opponents play on the CPU.

``--perfect-games N`` also plays each of the learner's ways of playing N games against perfect play, as its agent
(``ppo:PATH`` or ``az:PATH,sims=S``), from the same kind of seeded openings, and prints the points it lost
(:mod:`experiments.evaluation.perfect`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import sys
from pathlib import Path
from typing import Any

import torch as th
from rich.console import Console
from rich.table import Table

from agents.alphazero import load_network_of_either_backend
from agents.match import DEFAULT_OPENING_PLIES, MAX_OPENING_PLIES
from agents.networks.checkpoints import (
    AGENT_KINDS_OF_ALGORITHMS,
    check_algorithm,
    checkpoint_name,
    checkpoint_path,
    read_metadata,
)
from agents.networks.policy_value import DEFAULT_DEVICE, DEVICES, network_actions, resolve_device
from agents.networks.pretrained import PRETRAINED, pretrained_path
from agents.ppo import load_policy
from agents.rllib import ALGORITHM as RLLIB_ALGORITHM
from agents.rllib import load_network as load_rllib_network
from agents.specs import (
    AGENT_KINDS,
    DEFAULT_PUCT_SIMULATIONS,
    MAX_PUCT_SIMULATIONS,
    SpecError,
    make_agent,
    parse_spec,
)
from agents.tree.choices import DEFAULT_C_PUCT
from experiments.evaluation.arguments import add_perfect_games_argument
from experiments.evaluation.games import EvalResult, Mover, evaluate_all, learner_players
from experiments.evaluation.perfect import PerfectPlayReport, perfect_markdown, points_lost
from experiments.evaluation.ratings import wilson_interval
from experiments.options import (
    CommandParser,
    add_integer_argument,
    add_opening_plies_argument,
    add_progress_argument,
    add_seed_argument,
    argument_type,
)
from experiments.training.az_selfplay import PUCTMover
from experiments.training.config import MAX_GAMES, ConfigError, check_agent_specs
from experiments.training.selfplay import policy_players
from quarto_env.checks import one_line, shortened
from quarto_env.core import Variant
from quarto_env.observation import observation_kind


def interval_95(result: EvalResult) -> str:
    """The 95% Wilson interval of the mean score, draws as half a win, as the tournament's pairs have it
    (:func:`~experiments.evaluation.ratings.wilson_interval`): within [0, 1] and of some width at every score,
    where the normal interval gave a width of zero for 20 wins in 20 games and ends outside [0, 1] for few games."""
    low, high = wilson_interval(result.score(), result.num_games)
    return f"[{low:.3f}, {high:.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="quarto evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "checkpoint",
        help="a checkpoint .zip written by quarto train, a run folder (its final.zip, see --checkpoint), or the agent "
        "spec that plays one (ppo:RUN, az:RUN,checkpoint=best; az:pretrained and ppo:pretrained: the shipped "
        "networks of the standard rules)",
    )
    parser.add_argument(
        "--checkpoint",
        dest="checkpoint_name",
        type=argument_type(checkpoint_name),
        default=None,
        metavar="NAME",
        help="with a run folder, its checkpoint: best, final, latest or step_N (default: final.zip, else latest.zip "
        "while it trains)",
    )
    parser.add_argument("--opponents", nargs="+", default=["random", "greedy", "minimax:depth=2"], help="agent specs")
    add_integer_argument(parser, "--games", 4000, "games per opponent and learner policy", fewest=1, most=MAX_GAMES)
    add_seed_argument(parser, "seed of the opponents and the sampled policy", default=12345)
    add_opening_plies_argument(
        parser,
        f"random actions starting each pair of games, shared by both seatings (0-{MAX_OPENING_PLIES}; default "
        f"{DEFAULT_OPENING_PLIES}, as quarto tournament; 0: the empty board)",
    )
    add_integer_argument(
        parser,
        "--sims",
        None,
        "alphazero checkpoints: simulations per move, one row each (0: the policy alone; default "
        f"{DEFAULT_PUCT_SIMULATIONS})",
        fewest=0,
        most=MAX_PUCT_SIMULATIONS,
        nargs="+",
    )
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default=DEFAULT_DEVICE,
        help=f"where the checkpoint's network runs (auto: cuda if torch sees a GPU; default {DEFAULT_DEVICE})",
    )
    add_perfect_games_argument(parser)
    add_progress_argument(parser, "progress bar (of the games against perfect play)")
    args = parser.parse_args(argv)

    th.set_num_threads(1)
    th.manual_seed(args.seed)
    try:
        resolve_device(args.device)
        taken = io.StringIO()
        with contextlib.redirect_stderr(taken):  # the files that run folders stand for, said once all is checked
            checkpoint, metadata = _checked_specs(args)
        sys.stderr.write(taken.getvalue())
        learners, steps = _learners(checkpoint, metadata, args)
    except ValueError as exc:  # CheckpointError, a device this machine lacks, an opponent that cannot play
        print(f"{parser.prog}: {one_line(exc)}", file=sys.stderr)
        return 2
    variant = Variant.make(**metadata["variant"])
    table = Table(
        title=f"{checkpoint} ({steps:,} learner steps, {variant.describe()}, {_openings(args.opening_plies)})",
        caption="score = (wins + draws/2) / games; 95% interval: Wilson's, draws as half a win (conservative where "
        "games are drawn); it assumes independent games, which a deterministic learner and opponent from the empty "
        "board (--opening-plies 0) are not: they repeat one game per seat",
    )
    for column in ("opponent", "learner", "games", "first W/D/L", "second W/D/L", "score", "95% interval"):
        # Every column keeps its full width but the opponent's spec, which may be a long path.
        widths = {"opponent": (None, 40), "learner": (max(len(learner.playing) for learner in learners), None)}
        min_width, max_width = widths.get(column, (len(column), None))
        table.add_column(
            column,
            justify="left" if column in ("opponent", "learner") else "right",
            no_wrap=True,
            min_width=min_width,
            max_width=max_width,
        )
    for result in evaluate_all(learners, args.opponents, variant, args.games, args.seed, args.opening_plies):
        table.add_row(
            result.opponent,
            result.playing,
            str(result.num_games),
            *("/".join(map(str, result.counts[seat])) for seat in (0, 1)),
            f"{result.score():.3f}",
            interval_95(result),
        )
    Console(width=120).print(table)
    if args.perfect_games:
        kind = AGENT_KINDS_OF_ALGORITHMS[metadata.get("algorithm", "ppo")]
        print(perfect_markdown([_perfect_play(checkpoint, kind, learner, variant, args) for learner in learners]))
    return 0


def _perfect_play(
    checkpoint: Path, kind: str, learner: Mover, variant: Variant, args: argparse.Namespace
) -> PerfectPlayReport:
    """The points lost against perfect play by ``learner`` (one way of playing ``checkpoint``, which agents of
    ``kind`` play), named by how it plays."""
    agent = make_agent(_learner_spec(checkpoint, kind, learner, args.device), variant, args.seed)
    report = points_lost(
        agent, variant, args.perfect_games, args.seed, args.opening_plies, progress=not args.no_progress
    )
    report.agent = learner.playing
    return report


def _learner_spec(checkpoint: Path, kind: str, learner: Mover, device: str) -> str:
    """The agent spec that plays ``checkpoint`` (of agent ``kind``) as ``learner`` does: ``az:...,sims=S`` for a
    search, else ``ppo:...`` or ``rllib:...`` with its argmax or sampled policy."""
    if isinstance(learner, PUCTMover):
        return f"az:path={checkpoint},sims={learner.sims},device={device}"
    return f"{kind}:path={checkpoint},deterministic={str(learner.deterministic).lower()},device={device}"


def _openings(plies: int) -> str:
    return f"random {plies}-action openings" if plies else "from the empty board"


def _checked_specs(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """Every agent of the command checked before the learner's network loads: the opponents' specs (read no
    file: a mistyped one is told at once), the learner's checkpoint (:func:`learner_checkpoint`) and its metadata,
    then the opponents built for its rules. The checkpoint's path and metadata."""
    opponents = [("--opponents", spec) for spec in args.opponents]
    check_spec_syntax(opponents)
    checkpoint = learner_checkpoint(args.checkpoint, args.checkpoint_name)
    metadata = read_metadata(checkpoint)
    algorithm = metadata.get("algorithm", "ppo")
    if algorithm != "alphazero" and args.sims is not None:
        raise ConfigError(
            f"--sims is used only with alphazero checkpoints; {shortened(str(checkpoint))!r} is {algorithm}"
        )
    check_agent_specs(opponents, Variant.make(**metadata["variant"]), args.seed)
    return checkpoint, metadata


def check_spec_syntax(named: list[tuple[str, str]]) -> None:
    """Parse the spec of every ``(where, spec)`` pair (its kind, options and values), reading no file;
    :class:`ConfigError` naming where the first bad one was given."""
    for where, spec in named:
        try:
            parse_spec(spec)
        except SpecError as exc:
            raise ConfigError(f"{where}: agent {spec!r} cannot play: {one_line(exc)}") from exc


def learner_checkpoint(learner: str, name: str | None = None) -> Path:
    """The checkpoint file that ``learner`` names: a checkpoint ``.zip``, a run folder (``name``, from
    ``--checkpoint``, chooses within it: :func:`agents.networks.checkpoints.checkpoint_path`), or the spec of an agent
    that plays one (``ppo:RUN``, ``az:PATH,checkpoint=best``), whose kind must be the checkpoint's and which may give
    only its path and checkpoint (the ways of playing are this command's options). A path that exists is a path,
    whatever its name; so is one that does not begin with an agent kind."""
    if os.path.lexists(learner) or learner.partition(":")[0].strip() not in AGENT_KINDS:
        return checkpoint_path(learner, name)
    kind, values = parse_spec(learner)
    if "checkpoint" not in kind.options:
        raise SpecError(
            f"{learner!r} plays no checkpoint: give a checkpoint .zip, a run folder, or the spec of one "
            f"({', '.join(f'{k}:PATH' for k, kind in AGENT_KINDS.items() if 'checkpoint' in kind.options)})"
        )
    other = sorted(key for key, value in values.items() if key not in SPEC_PARTS and value != kind.options[key].default)
    if other:
        raise SpecError(
            f"spec {learner!r}: quarto evaluate takes its path and checkpoint alone, not {', '.join(other)} (it plays "
            "every way the checkpoint can: see --sims and --device)"
        )
    if values["path"] == PRETRAINED:  # the shipped network of the standard rules (agents.networks.pretrained)
        if values["checkpoint"] or name is not None:
            raise SpecError(f"{learner!r} is a shipped network, one file: it has no checkpoint to choose")
        return Path(pretrained_path(PRETRAINED, kind.name))
    if values["checkpoint"] and name is not None and values["checkpoint"] != name:
        raise SpecError(f"spec {learner!r} names checkpoint={values['checkpoint']}, --checkpoint {name}: give one")
    checkpoint = checkpoint_path(values["path"], values["checkpoint"] or name)
    check_algorithm(checkpoint, read_metadata(checkpoint), ALGORITHM_OF_KIND[kind.name])
    return checkpoint


SPEC_PARTS = ("path", "checkpoint")
"""What a learner's spec gives :func:`learner_checkpoint`: where the checkpoint is."""
ALGORITHM_OF_KIND = {kind: algorithm for algorithm, kind in AGENT_KINDS_OF_ALGORITHMS.items()}
"""The training algorithm whose checkpoints each agent kind plays."""


def _learners(checkpoint: Path, metadata: dict[str, Any], args: argparse.Namespace) -> tuple[list[Mover], int]:
    """The ways of playing of the ``checkpoint`` file, whose metadata is ``metadata`` (each named for the table by
    its ``playing``), and its step count."""
    algorithm = metadata.get("algorithm", "ppo")
    if algorithm == "alphazero":
        variant = Variant.make(**metadata["variant"])
        network = load_network_of_either_backend(str(checkpoint), variant, args.device)  # as the az agent plays it
        searches = [
            PUCTMover(network, variant, args.games, sims, DEFAULT_C_PUCT)
            for sims in args.sims or [DEFAULT_PUCT_SIMULATIONS]
        ]
        return list(searches), int(metadata["num_timesteps"])
    if algorithm == RLLIB_ALGORITHM:  # as the rllib agent plays it, read as data: Ray is not needed
        actor_critic, _ = load_rllib_network(checkpoint, device=args.device, metadata=metadata)
        players = learner_players(
            functools.partial(network_actions, actor_critic), observation_kind(metadata["observation"])
        )
        return list(players), int(metadata["num_timesteps"])
    check_algorithm(checkpoint, metadata, "ppo")
    loaded = load_policy(checkpoint, device=args.device)
    players = policy_players(loaded.policy, observation_kind(loaded.observation))
    return list(players), loaded.num_timesteps
