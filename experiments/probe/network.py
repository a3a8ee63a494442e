"""``quarto bench network``: how much of perfect play a network design can learn, trained supervised on the exact
solver's values, and how fast its forward pass is.

Example usage::

    quarto bench network                                  # slots and hand, 3000 positions with 6-10 empty squares
    quarto bench network --network transformer looped --positions 6000 --epochs 20 --json runs/bench/network.json
    quarto bench network --network slots --target policy --value-head scalar     # the probe before issue 35

What it does:

1. **Label.** Positions are sampled from seeded games (:func:`experiments.evaluation.grading.sample_decisions`), keeping
   only the distinct ones the search asks the network about (no rules shortcut decides them:
   :func:`agents.tree.puct.forced_action`), until there are ``--positions``. The exact solver values the position and
   each of its actions (:class:`experiments.evaluation.grading.PositionValues`, saved to ``--cache`` for later runs).
   From those labels the probe derives every candidate's exact value and, for each *critical* position (where
   some candidate loses value), its *mistake depth*: the shallowest minimax depth, 1 to 4 plies, whose choice keeps
   the value (:func:`.positions.mistake_depths`; "beyond" when none does).
2. **Split** them at random (``--seed``) into a training and a test set (``--test-share``).
3. **Train** each ``--network`` design (:data:`agents.networks.policy_value.NETWORK_DESIGNS`, seeded by
``--network-seed``,
   Adam, ``--epochs``) supervised on the training set (:func:`.fit.probe_loss`). ``--target policy``: the policy
   target is uniform over the *value-keeping candidates*; ``action-values``: every candidate's exact W/D/L, on a
   per-action head; ``both`` (the default). ``--value-head wdl`` (the default): the value is three classes
   trained with class-balanced cross-entropy (each of W, D and L weighs the same in total, so "always draw" is not
   a minimum); ``scalar``: tanh and squared error, as AlphaZero. With ``--augment`` (the default, as AlphaZero's
   training) each minibatch is moved by random symmetries of the game, its per-action labels with it.
4. **Report**, per number of empty squares and overall, on the training and the test set: the *value accuracy*
   (the predicted class equals the exact value), its *balanced* form (the mean over W, D and L of the share of
   each predicted right: 33% for "always draw"), and among the critical positions the share where the network's
   pick loses value (its most likely candidate; with ``--target action-values`` the candidate with the best
   expected action value), beside the share for a uniformly random candidate (its exact expectation). Then the
   test set's critical positions by mistake depth ("tactics": 1-3 plies, "deeper": the rest). A looped design is
   scored again with twice its iterations (in the JSON). Last, one forward pass of a batch of 128 positions on
   one thread, per design, and its ratio to the first design's.

The table goes to stdout; ``--json FILE`` also writes the figures, the configuration, the command and the protocol:
the seeds, the code version, the date and the load (:func:`protocol`). docs/learnability.md has the measurements.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch as th

from agents.networks.designs import DEFAULT_ITERATIONS, MAX_ITERATIONS, TRANSFORMER_HEADS, LoopedNetwork
from agents.networks.policy_value import NETWORK_DESIGNS, PolicyValueNetwork, device_of
from agents.storage.files import atomic_write_text
from agents.tree.puct import encode_positions
from experiments.evaluation.arguments import check_empty_range, values_or_exit
from experiments.evaluation.grading import SOLVER_COMFORT_EMPTY
from experiments.evaluation.tables import markdown_table
from experiments.options import (
    SEED,
    CommandParser,
    add_empty_squares_argument,
    add_integer_argument,
    add_jobs_argument,
    add_number_argument,
    add_observation_argument,
    add_seed_argument,
    add_variant_arguments,
    parse_command,
)
from experiments.output import add_overwrite_argument, claim_if_asked
from experiments.probe.fit import TARGETS, VALUE_HEADS, TrainSettings, train_supervised
from experiments.probe.positions import (
    BEYOND_DEPTHS,
    MINIMAX_DEPTHS,
    TACTICS_DEPTH,
    LabelledPositions,
    ProbeSet,
    probe_set,
    sample_labelled_positions,
    split_rows,
)
from experiments.run_folder import code_version
from quarto_env.core import (
    NUM_ACTIONS,
    Variant,
)
from quarto_env.observation import observation_kind

OBSERVATION = "parity"
"""The observation kind of the probed networks unless ``--observation`` names another: the planes of the probe's
first measurements (docs/learnability.md), kept so that they compare; training's default is ``tempo``
(:class:`experiments.training.config.TrainConfig`)."""

TIMED_BATCH = 128
"""Positions per timed forward pass."""

TIMED_PASSES = 50
"""Forward passes timed per design (the median is reported)."""

MIN_POSITIONS = 4
"""The fewest positions a probe takes: enough for a training and a test set."""

MAX_PROBE_POSITIONS = 200_000
"""The most positions a probe takes: the top of the data-scaling curve (3k, 30k, 200k; docs/learnability.md)."""


# ---------------------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Scores:
    """Per position: what the network got right, and what a random candidate would lose."""

    predicted_value: np.ndarray
    """``(n,)`` int: the predicted value class -- the W/D/L head's most likely, or a scalar rounded to -1, 0, 1."""
    value_correct: np.ndarray
    """``(n,)`` bool: the predicted value equals the exact value."""
    network_lost: np.ndarray
    """``(n,)`` bool: the network's pick (:func:`score`) loses value."""
    random_lost: np.ndarray
    """``(n,)`` float: the share of the candidates that lose value (what a uniformly random candidate loses)."""


def score(network: PolicyValueNetwork, data: LabelledPositions, variant: Variant, target: str = "policy") -> Scores:
    """The :class:`Scores` of ``network`` on ``data``. The network's pick among the candidates is its most likely
    action under the policy head, or for ``target`` ``action-values`` the one with the highest expected action
    value (P(win) - P(loss) of its action-value head)."""
    planes, candidates = encode_positions(data.positions, network.kind, variant)
    with th.inference_mode():
        out = network.outputs(th.from_numpy(planes).to(device_of(network)).float())
    if target == "action-values":
        assert out.action_value_logits is not None
        probabilities = th.softmax(out.action_value_logits, dim=2)
        preference = (probabilities[..., 2] - probabilities[..., 0]).cpu().numpy()
    else:
        preference = out.logits.cpu().numpy()
    choice = np.where(candidates, preference[:, :NUM_ACTIONS], -np.inf).argmax(axis=1)
    if out.value_logits is not None:
        predicted = out.value_logits.argmax(1).cpu().numpy() - 1
    else:
        predicted = np.clip(np.rint(out.value.cpu().numpy()), -1, 1).astype(np.int64)
    losing = data.candidates & ~data.keeps
    return Scores(
        predicted_value=predicted,
        value_correct=predicted == data.values,
        network_lost=losing[np.arange(len(data)), choice],
        random_lost=losing.sum(1) / data.candidates.sum(1),
    )


def balanced_accuracy(exact: np.ndarray, predicted: np.ndarray) -> float:
    """The mean over the classes present in ``exact`` of the share of their positions predicted right (0 for none):
    0.33 for "always draw" when wins, draws and losses all occur, whatever their shares."""
    recalls = [float((predicted[exact == c] == c).mean()) for c in np.unique(exact)]
    return float(np.mean(recalls)) if recalls else 0.0


def _summary_row(data: LabelledPositions, scores: Scores, rows_in: np.ndarray) -> dict[str, Any]:
    """The figures of the positions ``rows_in`` (bool mask): see :func:`summary_rows`."""
    critical = rows_in & data.critical
    count = int(critical.sum())
    return {
        "positions": int(rows_in.sum()),
        "value_accuracy": float(scores.value_correct[rows_in].mean()) if rows_in.any() else 0.0,
        "value_balanced_accuracy": balanced_accuracy(data.values[rows_in], scores.predicted_value[rows_in]),
        "critical": count,
        "network_lost": float(scores.network_lost[critical].mean()) if count else 0.0,
        "random_lost": float(scores.random_lost[critical].mean()) if count else 0.0,
    }


def summary_rows(data: LabelledPositions, scores: Scores) -> list[dict[str, Any]]:
    """One row per number of empty squares, then one for all: ``empty`` (a count, or ``"all"``), ``positions``,
    ``value_accuracy``, ``value_balanced_accuracy`` (:func:`balanced_accuracy`), ``critical`` (how many),
    ``network_lost`` and ``random_lost`` (shares of the critical positions; 0 where there are none)."""
    buckets: list[tuple[int | str, np.ndarray]] = [(int(e), data.empties == e) for e in np.unique(data.empties)]
    buckets.append(("all", np.ones(len(data), dtype=bool)))
    return [{"empty": empty, **_summary_row(data, scores, rows_in)} for empty, rows_in in buckets]


def depth_rows(data: ProbeSet, scores: Scores) -> list[dict[str, Any]]:
    """The figures of :func:`summary_rows` over the critical positions by mistake depth: one row per depth of
    :data:`MINIMAX_DEPTHS` and beyond (``depth`` 1, 2, ..., ``"beyond"``), then ``"tactics"`` (a minimax of at most
    :data:`TACTICS_DEPTH` plies avoids the mistake) and ``"deeper"`` (the rest)."""
    depths = data.mistake_depths
    buckets: list[tuple[int | str, np.ndarray]] = [(d, depths == d) for d in MINIMAX_DEPTHS]
    buckets.append(("beyond", depths == BEYOND_DEPTHS))
    buckets.append(("tactics", (depths >= 1) & (depths <= TACTICS_DEPTH)))
    buckets.append(("deeper", depths > TACTICS_DEPTH))
    return [{"depth": depth, **_summary_row(data.labels, scores, rows_in)} for depth, rows_in in buckets]


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
@dataclasses.dataclass(frozen=True)
class DesignChoice:
    """A network design as the probe builds it."""

    design: str
    width: int = 64
    iterations: int = DEFAULT_ITERATIONS
    """Of a ``looped`` design (the others ignore it)."""
    observation: str = OBSERVATION
    """The planes the network reads (:data:`quarto_env.observation.OBSERVATION_KINDS`): what the derived planes
    buy shows against ``raw``."""


def new_network(choice: DesignChoice, variant: Variant, settings: TrainSettings) -> PolicyValueNetwork:
    """A fresh network of ``choice`` with the heads ``settings`` trains (seeded by ``settings.seed``)."""
    th.manual_seed(settings.seed)
    return PolicyValueNetwork(
        observation_kind(choice.observation),
        list(variant.groups),
        choice.width,
        choice.design,
        wdl=settings.value_head == "wdl",
        action_values=settings.target != "policy",
        iterations=choice.iterations,
    )


def trained_network(
    choice: DesignChoice, train: ProbeSet, variant: Variant, settings: TrainSettings
) -> tuple[PolicyValueNetwork, list[float], float]:
    """A fresh ``choice`` network (:func:`new_network`) trained on ``train``: the network, its mean loss per epoch
    and the training time in seconds."""
    network = new_network(choice, variant, settings)
    start = time.perf_counter()
    losses = train_supervised(network, train, variant, settings)
    return network, losses, time.perf_counter() - start


def _part_figures(
    network: PolicyValueNetwork, data: ProbeSet, variant: Variant, target: str
) -> dict[str, list[dict[str, Any]]]:
    """The rows by empty squares and by mistake depth of ``network`` on ``data``, for the pick of ``target`` and,
    where the network has an action-value head and the target is ``both``, for that head's pick too."""
    picks = {"": target} | ({"action_value_": "action-values"} if target == "both" else {})
    figures: dict[str, list[dict[str, Any]]] = {}
    for prefix, pick in picks.items():
        scores = score(network, data.labels, variant, pick)
        figures[f"{prefix}empty"] = summary_rows(data.labels, scores)
        figures[f"{prefix}depth"] = depth_rows(data, scores)
    return figures


def probe_design(
    choice: DesignChoice, train: ProbeSet, test: ProbeSet, variant: Variant, settings: TrainSettings
) -> dict[str, Any]:
    """Train a fresh ``choice`` network on ``train`` (:func:`trained_network`) and return its figures:
    ``design``, ``width``, ``iterations`` (looped only), ``parameters``, ``losses`` (per epoch), ``train_seconds``,
    ``forward_seconds`` (a batch of :data:`TIMED_BATCH` test positions, repeated when there are fewer) and
    ``train``/``test``: ``{"empty": summary_rows, "depth": depth_rows}`` (:func:`_part_figures`); a looped design
    also gets ``test_twice_the_iterations``, its test figures run with twice the iterations it trained with."""
    network, losses, train_seconds = trained_network(choice, train, variant, settings)
    timed = np.resize(np.arange(len(test)), TIMED_BATCH)
    planes = encode_positions(test.labels.positions[timed], network.kind, variant)[0]
    result: dict[str, Any] = {
        "design": choice.design,
        "width": choice.width,
        "observation": choice.observation,
        "parameters": sum(p.numel() for p in network.parameters()),
        "losses": losses,
        "train_seconds": train_seconds,
        "forward_seconds": forward_seconds(network, planes),
        "train": _part_figures(network, train, variant, settings.target),
        "test": _part_figures(network, test, variant, settings.target),
    }
    if isinstance(network.body, LoopedNetwork):
        result["iterations"] = choice.iterations
        network.body.iterations = 2 * choice.iterations  # thinking longer at play time
        result["test_twice_the_iterations"] = _part_figures(network, test, variant, settings.target)
        network.body.iterations = choice.iterations
    return result


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def report_markdown(results: Sequence[dict[str, Any]]) -> str:
    """The probe's tables: fit per design, set and number of empty squares; the test set's critical positions by
    mistake depth; then the forward-pass times."""
    header = ["design", "set", "empty", "positions", "value acc.", "balanced", "critical", "net loses", "random loses"]
    rows = [_fit_cells(r, part, row) for r in results for part in ("train", "test") for row in r[part]["empty"]]
    depth_header = ["design", "mistake depth", "critical", "net loses", "action-value head loses", "random loses"]
    by_depth = [_depth_cells(r, index, row) for r in results for index, row in enumerate(r["test"]["depth"])]
    reference = results[0]["forward_seconds"]
    timing = [_timing_cells(r, reference) for r in results]
    return (
        "Supervised fit (critical: some candidate loses value; the shares lost are among the critical positions; "
        "balanced: the value accuracy averaged over W, D and L)\n\n"
        + markdown_table(header, rows)
        + f"\nTest set, critical positions by the shallowest minimax depth (plies) that avoids the mistake "
        f"(tactics: 1-{TACTICS_DEPTH}; deeper: beyond)\n\n"
        + markdown_table(depth_header, by_depth)
        + f"\nForward pass, batch {TIMED_BATCH}, one thread (ratio to the first design)\n\n"
        + markdown_table(["design", "parameters", "ms", "ratio", "train s"], timing)
    )


def _fit_cells(result: dict[str, Any], part: str, row: dict[str, Any]) -> list[str]:
    shares = ("value_accuracy", "value_balanced_accuracy")
    return [
        _label(result),
        part,
        str(row["empty"]),
        str(row["positions"]),
        *(_percent(row[key]) for key in shares),
        str(row["critical"]),
        _percent(row["network_lost"]),
        _percent(row["random_lost"]),
    ]


def _depth_cells(result: dict[str, Any], index: int, row: dict[str, Any]) -> list[str]:
    lost = (row["network_lost"], _action_value_lost(result, index), row["random_lost"])
    return [_label(result), str(row["depth"]), str(row["critical"]), *(_percent(share) for share in lost)]


def _timing_cells(result: dict[str, Any], reference: float) -> list[str]:
    seconds = result["forward_seconds"]
    ratio = seconds / reference
    return [
        _label(result),
        f"{result['parameters']:,}",
        f"{1000 * seconds:.2f}",
        f"{ratio:.2f}",
        f"{result['train_seconds']:.0f}",
    ]


def _label(result: dict[str, Any]) -> str:
    iterations = f" x{result['iterations']}" if "iterations" in result else ""
    planes = f" ({result['observation']} planes)" if result["observation"] != OBSERVATION else ""
    return f"`{result['design']}` w{result['width']}{iterations}{planes}"


def _action_value_lost(result: dict[str, Any], index: int) -> float | None:
    """The test share lost by the action-value head's pick in depth row ``index``, where it was scored."""
    rows = result["test"].get("action_value_depth")
    return rows[index]["network_lost"] if rows else None


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    parser = CommandParser(prog="quarto bench network", description=__doc__.split("\n\n")[0])
    positions = "labelled positions, train and test together"
    add_integer_argument(parser, "--positions", 3000, positions, fewest=MIN_POSITIONS, most=MAX_PROBE_POSITIONS)
    add_empty_squares_argument(parser, "--min-empty", 6, "fewest empty squares")
    add_empty_squares_argument(
        parser,
        "--max-empty",
        10,
        f"most empty squares (default 10; above {SOLVER_COMFORT_EMPTY} the solver takes minutes per position)",
    )
    add_seed_argument(parser, "seed of the positions, the split and the networks")
    parser.add_argument(
        "--network-seed",
        type=SEED,
        default=None,
        help="seed of the networks' weights and minibatches alone (default: --seed), to repeat a row on the same "
        "labels and split",
    )
    test_share = "share of the positions held out for testing, above 0 and at most 0.9"
    add_number_argument(parser, "--test-share", 0.25, test_share, above=0, maximum=0.9)
    parser.add_argument(
        "--network",
        nargs="+",
        choices=NETWORK_DESIGNS,
        default=["slots", "hand"],
        help=f"designs to train, the first is the time reference (of {', '.join(NETWORK_DESIGNS)}; "
        "default: slots hand)",
    )
    add_integer_argument(parser, "--width", 64, fewest=1, most=1024)
    iterations = "iterations of the looped design's weight-tied block"
    add_integer_argument(parser, "--iterations", DEFAULT_ITERATIONS, iterations, fewest=1, most=MAX_ITERATIONS)
    add_observation_argument(
        parser,
        f"the planes the networks read (default {OBSERVATION}, as the probe's first measurements; tempo: training's "
        "default; raw: the position alone)",
        OBSERVATION,
    )
    defaults = TrainSettings()
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default=defaults.target,
        help="policy: uniform over the value-keeping candidates; action-values: every candidate's W/D/L; both",
    )
    parser.add_argument(
        "--value-head",
        choices=VALUE_HEADS,
        default=defaults.value_head,
        help=f"wdl: three classes, class-balanced cross-entropy; scalar: tanh, squared error (default "
        f"{defaults.value_head})",
    )
    parser.add_argument(
        "--random-iterations",
        action="store_true",
        help="train a looped design with a random number of iterations per minibatch (1 to twice --iterations)",
    )
    add_integer_argument(parser, "--epochs", defaults.epochs, "passes over the training set", fewest=1, most=10_000)
    batch = "positions per gradient step"
    add_integer_argument(parser, "--batch-size", defaults.batch_size, batch, fewest=1, most=65_536)
    add_number_argument(parser, "--lr", defaults.lr, "Adam's learning rate", above=0, maximum=1)
    parser.add_argument(
        "--augment",
        action=argparse.BooleanOptionalAction,
        default=defaults.augment,
        help="move each minibatch by random symmetries (default: on)",
    )
    add_jobs_argument(
        parser,
        "worker processes that label the positions (default 1); the labels do not depend on it",
    )
    parser.add_argument(
        "--cache", type=Path, default=None, metavar="FILE", help="JSON file of solved values to reuse and update"
    )
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the figures here")
    add_overwrite_argument(parser, "--json")
    add_variant_arguments(parser)
    return parser


def protocol(args: argparse.Namespace, settings: TrainSettings, train: ProbeSet, test: ProbeSet) -> dict[str, Any]:
    """What must match for two probe rows to compare: the labels (their seed, count and empty squares), the split,
    the training and the seeds -- and when and where it ran (the code version, the date, the load)."""
    return {
        "label_seed": args.seed,
        "split_seed": args.seed,
        "network_seed": settings.seed,
        "augment_seed": settings.seed,
        "positions": args.positions,
        "empty": [args.min_empty, args.max_empty],
        "train_positions": len(train),
        "test_positions": len(test),
        "settings": dataclasses.asdict(settings),
        "observation": args.observation,
        "code": code_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average": list(os.getloadavg()),
        "torch_threads": th.get_num_threads(),
    }


def main(argv: list[str]) -> int:
    """Run ``quarto bench network``."""
    parser, args, variant = parse_command(build_parser, argv)
    with claim_if_asked(args.json, "file", option="--json", overwrite=args.overwrite, prog=parser.prog):
        return _run(parser, args, variant, argv)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, variant: Variant, argv: list[str]) -> int:
    """Fit the designs, print the table and write the figures to the claimed ``--json`` if given."""
    check_empty_range(parser, args.min_empty, args.max_empty)
    if "transformer" in args.network and args.width % TRANSFORMER_HEADS:
        parser.error(f"--width {args.width}: the transformer needs a multiple of its {TRANSFORMER_HEADS} heads")
    values = values_or_exit(parser, variant, args.cache)
    th.set_num_threads(1)
    command = "quarto bench network " + " ".join(argv)
    print(f"# {command}\n# variant: {variant.describe()}, observation {args.observation}, seed {args.seed}")

    start = time.perf_counter()
    try:
        labels = sample_labelled_positions(
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
    data = probe_set(labels, variant, values)
    train_rows, test_rows = split_rows(len(data), args.test_share, args.seed)
    train, test = data.subset(train_rows), data.subset(test_rows)
    print(
        f"{len(data)} positions labelled in {time.perf_counter() - start:.1f} s ({values.solved} solved); "
        f"{len(train)} to train on, {len(test)} to test"
    )
    settings = TrainSettings(
        args.epochs, args.batch_size, args.lr, augment=args.augment, target=args.target,
        seed=args.seed if args.network_seed is None else args.network_seed,
        value_head=args.value_head, random_iterations=args.random_iterations,
    )  # fmt: skip
    choices = [DesignChoice(design, args.width, args.iterations, args.observation) for design in args.network]
    results = [probe_design(choice, train, test, variant, settings) for choice in choices]
    print("\n" + report_markdown(results))
    if args.json:
        config = {**vars(args), "json": str(args.json), "cache": args.cache and str(args.cache)}
        record = {
            "command": command,
            "config": {**config, "variant": variant.to_dict()},
            "protocol": protocol(args, settings, train, test),
            "results": results,
        }
        atomic_write_text(args.json, json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0
