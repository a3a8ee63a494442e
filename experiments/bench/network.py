"""``quarto bench network``: how much of perfect play a network design can learn, trained supervised on the exact
solver's values, and how fast its forward pass is.

Example usage::

    quarto bench network                                  # slots and hand, 3000 positions with 6-10 empty squares
    quarto bench network --network hand --width 96 --epochs 60 --json runs/bench/network.json

What it does:

1. **Label.** Positions are sampled from seeded games (:func:`experiments.arena.grading.sample_positions`), keeping
   only the distinct ones the search asks the network about (no rules shortcut decides them:
   :func:`agents.puct.forced_action`), until there are ``--positions``. The exact solver values the position and
   each of its actions (:class:`experiments.arena.grading.PositionValues`, saved to ``--cache`` for later runs).
2. **Split** them at random (``--seed``) into a training and a test set (``--test-share``).
3. **Train** each ``--network`` design (:data:`agents.networks.NETWORK_DESIGNS`, seeded, Adam) supervised on the
   training set: the policy target is uniform over the *value-keeping candidates* (the search's candidates whose
   value equals the position's), the value target is the exact value (squared error). With ``--augment`` (the
   default, as AlphaZero's training) each minibatch is moved by random symmetries of the game.
4. **Report**, per number of empty squares and overall, on the training and the test set: the *value accuracy*
   (the predicted value rounded to the nearest of -1, 0, 1 equals the exact value), and among the *critical*
   positions (where some candidate loses value) the share where the network's most likely candidate loses value,
   beside the share for a uniformly random candidate (its exact expectation). Last, one forward pass of a batch
   of 128 positions on one thread, per design, and its ratio to the first design's.

The table goes to stdout; ``--json FILE`` also writes the figures, the configuration and the command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch as th

from agents.networks import NETWORK_DESIGNS, PolicyValueNetwork
from agents.puct import encode_positions, forced_action
from experiments.arena.grade import check_empty_range, values_or_exit
from experiments.arena.grading import MAX_POSITIONS, SOLVER_COMFORT_EMPTY, PositionValues, sample_positions
from experiments.arena.solve import MAX_JOBS
from experiments.bench import exit_if_unwritten
from experiments.options import SEED, CommandParser, add_variant_arguments, markdown_table, variant_from_args
from quarto_env.checks import atomic_write_text, number_argument, output_file_argument
from quarto_env.core import NUM_ACTIONS, NUM_SQUARES, State, Variant, compiled_fields, position_array
from quarto_env.observation import ObservationKind, observation_kind
from quarto_env.symmetry import Symmetries

OBSERVATION = "parity"
"""The observation kind of the probed networks: AlphaZero's."""

TIMED_BATCH = 128
"""Positions per timed forward pass."""

TIMED_PASSES = 50
"""Forward passes timed per design (the median is reported)."""

MIN_POSITIONS = 4
"""The fewest positions a probe takes: enough for a training and a test set."""


# ---------------------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LabelledPositions:
    """Positions the search asks the network about, with their exact values. Row ``i`` of every array is
    position ``i``."""

    positions: np.ndarray
    """``(n, NUM_FIELDS)``: the positions (rows of :func:`quarto_env.core.position_array`)."""
    candidates: np.ndarray
    """``(n, 16)`` bool: the search's candidate actions (:func:`agents.puct.candidates`)."""
    keeps: np.ndarray
    """``(n, 16)`` bool: the candidates whose exact value equals the position's."""
    values: np.ndarray
    """``(n,)`` int: the exact value of the position for the player to move (-1, 0, 1)."""
    empties: np.ndarray
    """``(n,)`` int: empty squares."""

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def critical(self) -> np.ndarray:
        """``(n,)`` bool: whether some candidate loses value."""
        return (self.candidates & ~self.keeps).any(axis=1)

    def subset(self, rows: np.ndarray) -> LabelledPositions:
        """The positions of ``rows`` (indices), in that order."""
        return LabelledPositions(*(getattr(self, f.name)[rows] for f in dataclasses.fields(self)))


def label_positions(
    variant: Variant,
    kind: ObservationKind,
    count: int,
    seed: int,
    min_empty: int,
    max_empty: int,
    values: PositionValues,
    jobs: int = 1,
) -> LabelledPositions:
    """``count`` distinct seeded positions with ``min_empty`` to ``max_empty`` empty squares that the search asks
    the network about, each labelled by ``values`` (the exact solver, cached; those it lacks are solved in one
    batch by the labeller of :mod:`agents.labels`, with ``jobs`` worker processes). Sampled in rounds of
    ``count`` games (seeds ``seed``, ``seed + 1``, ...) until enough are found; ``RuntimeError`` if ten rounds
    find too few."""
    found: dict[State, None] = {}
    for round_ in range(10):
        for state in sample_positions(variant, count, seed + round_, max_empty, min_empty):
            if len(found) < count and _searched(variant, state):
                found[state] = None
        if len(found) == count:
            break
    else:
        raise RuntimeError(f"only {len(found)} of {count} searched positions found in {10 * count} games")
    states = list(found)
    values.label_missing(states, jobs)
    positions = position_array(states)
    candidates = encode_positions(positions, kind, variant)[1]
    keeps = np.zeros_like(candidates)
    for row, state in enumerate(states):
        action_values = values.action_values(state)
        best = max(action_values.values())
        for action in np.flatnonzero(candidates[row]):
            keeps[row, action] = action_values[int(action)] == best
    exact = np.array([values.value(state) for state in states])
    empties = np.array([state.num_empty for state in states])
    return LabelledPositions(positions, candidates, keeps, exact, empties)


def _searched(variant: Variant, state: State) -> bool:
    """Whether the search asks the network about ``state`` (no rules shortcut dictates its action)."""
    fields = compiled_fields(state)
    return forced_action(*fields[:4], fields[5], variant.group_array, variant.counted)[0] < 0


def split(data: LabelledPositions, test_share: float, seed: int) -> tuple[LabelledPositions, LabelledPositions]:
    """``(train, test)``: a seeded random split with ``test_share`` of the positions (at least one in each) in
    the test set."""
    order = np.random.default_rng(seed).permutation(len(data))
    tests = min(max(round(test_share * len(data)), 1), len(data) - 1)
    return data.subset(order[tests:]), data.subset(order[:tests])


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """How a probed network is trained."""

    epochs: int = 40
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-4
    """Adam's L2 penalty, as configs/alphazero.yaml."""
    augment: bool = True
    """Move each minibatch by random symmetries of the game."""
    seed: int = 0


def train_supervised(
    network: PolicyValueNetwork, data: LabelledPositions, variant: Variant, settings: TrainSettings
) -> list[float]:
    """Train ``network`` in place on ``data``: cross-entropy to the uniform distribution over the value-keeping
    candidates (softmax over the candidates) plus the squared error of the value. Returns the mean loss of each
    epoch."""
    th.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    symmetries = Symmetries(variant) if settings.augment else None
    optimizer = th.optim.Adam(network.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    network.train()
    losses = []
    for _ in range(settings.epochs):
        epoch = []
        order = rng.permutation(len(data))
        for start in range(0, len(data), settings.batch_size):
            batch = data.subset(order[start : start + settings.batch_size])
            positions, keeps = batch.positions, batch.keeps.astype(np.float32)
            if symmetries is not None:
                positions, keeps = symmetries.apply(positions, keeps, rng)
            planes, candidates = encode_positions(positions, network.kind, variant)
            loss = _loss(network, planes, candidates, keeps, batch.values)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch.append(loss.item())
        losses.append(float(np.mean(epoch)))
    network.eval()
    return losses


def _loss(
    network: PolicyValueNetwork, planes: np.ndarray, candidates: np.ndarray, keeps: np.ndarray, values: np.ndarray
) -> th.Tensor:
    """The supervised loss of one minibatch: policy cross-entropy to uniform over ``keeps``, plus value MSE."""
    target = keeps / keeps.sum(1, keepdims=True)
    policy_loss, value_loss = network.losses(planes, candidates, target, values)
    return policy_loss + value_loss


# ---------------------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Scores:
    """Per position: what the network got right, and what a random candidate would lose."""

    value_correct: np.ndarray
    """``(n,)`` bool: the predicted value rounded to the nearest of -1, 0, 1 equals the exact value."""
    network_lost: np.ndarray
    """``(n,)`` bool: the network's most likely candidate loses value."""
    random_lost: np.ndarray
    """``(n,)`` float: the share of the candidates that lose value (what a uniformly random candidate loses)."""


def score(network: PolicyValueNetwork, data: LabelledPositions, variant: Variant) -> Scores:
    """The :class:`Scores` of ``network`` on ``data``."""
    planes, candidates = encode_positions(data.positions, network.kind, variant)
    logits, value = network.evaluate(planes)
    choice = np.where(candidates, logits[:, :NUM_ACTIONS], -np.inf).argmax(axis=1)
    losing = data.candidates & ~data.keeps
    return Scores(
        value_correct=np.clip(np.rint(value), -1, 1) == data.values,
        network_lost=losing[np.arange(len(data)), choice],
        random_lost=losing.sum(1) / data.candidates.sum(1),
    )


def summary_rows(data: LabelledPositions, scores: Scores) -> list[dict[str, Any]]:
    """One row per number of empty squares, then one for all: ``empty`` (a count, or ``"all"``), ``positions``,
    ``value_accuracy``, ``critical`` (how many), ``network_lost`` and ``random_lost`` (shares of the critical
    positions; 0 where there are none)."""
    buckets: list[tuple[int | str, np.ndarray]] = [(int(e), data.empties == e) for e in np.unique(data.empties)]
    rows = []
    for empty, rows_in in [*buckets, ("all", np.ones(len(data), dtype=bool))]:
        critical = rows_in & data.critical
        count = int(critical.sum())
        rows.append(
            {
                "empty": empty,
                "positions": int(rows_in.sum()),
                "value_accuracy": float(scores.value_correct[rows_in].mean()),
                "critical": count,
                "network_lost": float(scores.network_lost[critical].mean()) if count else 0.0,
                "random_lost": float(scores.random_lost[critical].mean()) if count else 0.0,
            }
        )
    return rows


def forward_seconds(network: PolicyValueNetwork, planes: np.ndarray) -> float:
    """The median time of one forward pass of ``network`` on ``planes`` (on the current torch threads), over
    :data:`TIMED_PASSES` passes after a few untimed ones."""
    for _ in range(5):
        network.evaluate(planes)
    times = []
    for _ in range(TIMED_PASSES):
        start = time.perf_counter()
        network.evaluate(planes)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------------------
# The probe
# ---------------------------------------------------------------------------------------------------------
def trained_network(
    design: str, width: int, train: LabelledPositions, variant: Variant, settings: TrainSettings
) -> tuple[PolicyValueNetwork, list[float], float]:
    """A fresh ``design`` network of ``width`` (seeded by ``settings.seed``) trained on ``train``: the network, its
    mean loss per epoch and the training time in seconds."""
    th.manual_seed(settings.seed)
    network = PolicyValueNetwork(observation_kind(OBSERVATION), list(variant.groups), width, design)
    start = time.perf_counter()
    losses = train_supervised(network, train, variant, settings)
    return network, losses, time.perf_counter() - start


def probe_design(
    design: str,
    width: int,
    train: LabelledPositions,
    test: LabelledPositions,
    variant: Variant,
    settings: TrainSettings,
) -> dict[str, Any]:
    """Train a fresh ``design`` network of ``width`` on ``train`` (:func:`trained_network`) and return its
    figures: ``design``, ``width``, ``parameters``, ``losses`` (per epoch), ``train_seconds``, ``forward_seconds``
    (a batch of :data:`TIMED_BATCH` test positions, repeated when there are fewer) and ``train``/``test``
    (:func:`summary_rows`)."""
    network, losses, train_seconds = trained_network(design, width, train, variant, settings)
    timed = np.resize(np.arange(len(test)), TIMED_BATCH)
    planes = encode_positions(test.positions[timed], network.kind, variant)[0]
    return {
        "design": design,
        "width": width,
        "parameters": sum(p.numel() for p in network.parameters()),
        "losses": losses,
        "train_seconds": train_seconds,
        "forward_seconds": forward_seconds(network, planes),
        "train": summary_rows(train, score(network, train, variant)),
        "test": summary_rows(test, score(network, test, variant)),
    }


def report_markdown(results: Sequence[dict[str, Any]]) -> str:
    """The probe's tables: fit per design, set and number of empty squares; then the forward-pass times."""
    header = ["design", "set", "empty", "positions", "value acc.", "critical", "net loses", "random loses"]
    rows = [
        [
            f"`{r['design']}` w{r['width']}",
            part,
            str(row["empty"]),
            str(row["positions"]),
            f"{row['value_accuracy']:.1%}",
            str(row["critical"]),
            f"{row['network_lost']:.1%}",
            f"{row['random_lost']:.1%}",
        ]
        for r in results
        for part in ("train", "test")
        for row in r[part]
    ]
    reference = results[0]["forward_seconds"]
    timing = [
        [
            f"`{r['design']}` w{r['width']}",
            f"{r['parameters']:,}",
            f"{1000 * r['forward_seconds']:.2f}",
            f"{r['forward_seconds'] / reference:.2f}",
            f"{r['train_seconds']:.0f}",
        ]
        for r in results
    ]
    return (
        "Supervised fit (critical: some candidate loses value; the shares lost are among the critical positions)\n\n"
        + markdown_table(header, rows)
        + f"\nForward pass, batch {TIMED_BATCH}, one thread (ratio to the first design)\n\n"
        + markdown_table(["design", "parameters", "ms", "ratio", "train s"], timing)
    )


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    parser = CommandParser(prog="quarto bench network", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--positions",
        type=number_argument("positions", minimum=MIN_POSITIONS, maximum=MAX_POSITIONS, integer=True),
        default=3000,
        help="labelled positions, train and test together (default 3000)",
    )
    parser.add_argument(
        "--min-empty",
        type=number_argument("min-empty", minimum=1, maximum=NUM_SQUARES, integer=True),
        default=6,
        help="fewest empty squares (default 6)",
    )
    parser.add_argument(
        "--max-empty",
        type=number_argument("max-empty", minimum=1, maximum=NUM_SQUARES, integer=True),
        default=10,
        help=f"most empty squares (default 10; above {SOLVER_COMFORT_EMPTY} the solver takes minutes per position)",
    )
    parser.add_argument("--seed", type=SEED, default=0, help="seed of the positions, the split and the networks")
    parser.add_argument(
        "--test-share",
        type=number_argument("test-share", above=0, maximum=0.9),
        default=0.25,
        help="share of the positions held out for testing, above 0 and at most 0.9 (default 0.25)",
    )
    parser.add_argument(
        "--network",
        nargs="+",
        choices=NETWORK_DESIGNS,
        default=list(NETWORK_DESIGNS),
        help=f"designs to train, the first is the time reference (default: {' '.join(NETWORK_DESIGNS)})",
    )
    parser.add_argument("--width", type=number_argument("width", minimum=1, maximum=1024, integer=True), default=64)
    defaults = TrainSettings()
    parser.add_argument(
        "--epochs",
        type=number_argument("epochs", minimum=1, maximum=10_000, integer=True),
        default=defaults.epochs,
        help=f"passes over the training set (default {defaults.epochs})",
    )
    parser.add_argument(
        "--batch-size",
        type=number_argument("batch-size", minimum=1, maximum=65_536, integer=True),
        default=defaults.batch_size,
        help=f"positions per gradient step (default {defaults.batch_size})",
    )
    parser.add_argument(
        "--lr",
        type=number_argument("lr", above=0, maximum=1),
        default=defaults.lr,
        help=f"Adam's learning rate (default {defaults.lr:g})",
    )
    parser.add_argument(
        "--augment",
        action=argparse.BooleanOptionalAction,
        default=defaults.augment,
        help="move each minibatch by random symmetries (default: on)",
    )
    parser.add_argument(
        "--jobs",
        type=number_argument("jobs", minimum=1, maximum=MAX_JOBS, integer=True),
        default=1,
        help="worker processes that label the positions (default 1); the labels do not depend on it",
    )
    parser.add_argument(
        "--cache", type=Path, default=None, metavar="FILE", help="JSON file of solved values to reuse and update"
    )
    parser.add_argument(
        "--json", type=output_file_argument("--json"), default=None, metavar="FILE", help="also write the figures here"
    )
    add_variant_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto bench network``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    variant = variant_from_args(parser, args)
    check_empty_range(parser, args.min_empty, args.max_empty)
    values = values_or_exit(parser, variant, args.cache)
    th.set_num_threads(1)
    command = "quarto bench network " + " ".join(argv)
    print(f"# {command}\n# variant: {variant.describe()}, observation {OBSERVATION}, seed {args.seed}")

    start = time.perf_counter()
    try:
        data = label_positions(
            variant,
            observation_kind(OBSERVATION),
            args.positions,
            args.seed,
            args.min_empty,
            args.max_empty,
            values,
            args.jobs,
        )
    except RuntimeError as error:
        parser.error(f"{error}: widen --min-empty / --max-empty")
    if args.cache:
        values.save()
    train, test = split(data, args.test_share, args.seed)
    print(
        f"{len(data)} positions labelled in {time.perf_counter() - start:.1f} s ({values.solved} solved); "
        f"{len(train)} to train on, {len(test)} to test"
    )
    settings = TrainSettings(args.epochs, args.batch_size, args.lr, augment=args.augment, seed=args.seed)
    results = [probe_design(design, args.width, train, test, variant, settings) for design in args.network]
    print("\n" + report_markdown(results))
    if args.json:
        config = {**vars(args), "json": str(args.json), "cache": args.cache and str(args.cache)}
        record = {"command": command, "config": {**config, "variant": variant.to_dict()}, "results": results}
        with exit_if_unwritten(parser.prog, "--json", args.json):
            atomic_write_text(args.json, json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0
