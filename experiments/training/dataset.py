"""``quarto dataset``: solved positions as arrays, for supervised learning and distillation of the exact solver.

Example usage::

    quarto dataset --out data.npz                                   # the variant's default suite, tactical planes
    quarto dataset --suite standard-v1 --observation parity --symmetries 7 --out data.npz
    quarto dataset --sample 200 --seed 1 --min-empty 4 --max-empty 10 --squares --out squares.npz
    quarto dataset --sample 2000 --min-empty 6 --max-empty 10 --jobs 2 --out big.npz   # Ctrl-C, then again: resumes
    quarto dataset --check big.npz          # hash and rows checked; or a folder of self-play samples (exit 1 if bad)

The positions come from a suite of solved positions (:mod:`agents.suites`: ``--suite`` names a shipped one or a
``.jsonl`` file; the default is the variant's newest shipped suite), or are sampled afresh: ``--sample N`` keeps up
to ``N`` positions at each number of empty squares from ``--max-empty`` down to ``--min-empty``, no two related by
a symmetry, from ``--games`` seeded games (:func:`agents.suites.collect_positions`), and values every legal
action of each with the exact solver (the labeller of :mod:`agents.solver.labels`). ``--jobs N`` plays the games and
labels the positions in ``N`` worker processes; the file is the same for every ``N``. Until the file is written, a
sample's positions and its finished shards of labels are kept in ``OUT.parts/`` (:func:`parts_folder`): after Ctrl-C or
a kill, the same command continues from them, and the file is the one an uninterrupted run writes. Each of them
carries its format and checksum (:mod:`agents.storage.integrity`) and is used only once it proves itself: one that is
damaged, altered or of an older version is drawn or labelled again, and a line on stderr says so. With a suite,
``--min-empty`` and
``--max-empty`` keep the positions within those bounds. ``--symmetries K`` adds up to ``K`` images of each position
under random symmetries of the game (a board symmetry with a relabelling of the pieces' attributes), their action
values moved with them; images equal to the position or to each other are dropped.

The file is an ``.npz`` of plain arrays, read with ``np.load(path, allow_pickle=False)`` (or :func:`load_dataset`,
which checks its hash); ``n`` rows, ``A`` the variant's actions (16: suites and samples hold no positions of the
declaration variant, whose notation cannot say what is claimable):

=================  =====================  ===================================================================
``observations``   ``(n, channels, 16)``  int8: the planes of ``--observation``, as ``quarto_v1`` shows them
``action_mask``    ``(n, A)``             int8: 1 for the legal actions, as ``quarto_v1``'s ``action_mask``
``value``          ``(n,)``               int8: the exact value for the player to move, +1 win, 0 draw, -1 loss
``action_values``  ``(n, A)``             int8: each legal action's exact value; :data:`ILLEGAL` (-2) elsewhere
``empty``          ``(n,)``               int8: empty squares
``placing``        ``(n,)``               bool: a piece in hand to place (else a piece to give)
``critical``       ``(n,)``               bool: some legal action loses value
``origin``         ``(n,)``               int32: the row of the position this row is an image of (itself if none)
``positions``      ``(n,)``               unicode: the position in the project's notation
``header``         ``(bytes,)``           uint8: UTF-8 JSON (below)
=================  =====================  ===================================================================

The header holds the format version, the source (the suite's name and generator, or the sample's settings), the
rule variant, the observation kind and its channel names, the count, ``--symmetries`` and its seed, the code's
version and the SHA-256 of every array. docs/dataset.md has a worked example that trains a network on a file.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.solver.book import shipped_book
from agents.solver.labels import (
    ILLEGAL,
    label_positions,
    remove_shard_folder,
    rows_label_legal_actions,
    values_of_row,
    worker_pool,
)
from agents.storage.files import atomic_write_bytes, input_file, read_file_bytes
from agents.storage.integrity import IntegrityError, read_sealed_json, write_sealed_json
from agents.suites import (
    DEFAULT_SOURCES,
    PositionSource,
    SolvedPosition,
    Suite,
    SuiteError,
    collect_positions,
    default_suite_name,
    load_suite,
    shipped_suite_names,
)
from agents.tree.sample_files import SampleDataset, read_npz
from experiments.evaluation.grading import SOLVER_COMFORT_EMPTY
from experiments.options import (
    CommandParser,
    add_empty_squares_argument,
    add_integer_argument,
    add_jobs_argument,
    add_observation_argument,
    add_progress_and_variant_arguments,
    add_seed_argument,
    parse_command,
    warn,
)
from experiments.output import add_overwrite_argument, claim_output
from experiments.run_folder import code_version
from quarto_env.core import (
    NUM_ACTIONS,
    NUM_SQUARES,
    State,
    Variant,
    compiled_fields,
    position_array,
    state_of_row,
)
from quarto_env.errors import DatasetError
from quarto_env.fast import write_observation
from quarto_env.notation import PositionError, format_position, parse_position
from quarto_env.observation import DEFAULT_OBSERVATION, observation_kind
from quarto_env.symmetry import Symmetries

DATASET_FORMAT = 1
"""The version of the file's layout."""

ARRAYS = (
    "observations",
    "action_mask",
    "value",
    "action_values",
    "empty",
    "placing",
    "critical",
    "origin",
    "positions",
)
"""The data arrays of a file, in the order their hash reads them."""

MAX_DATASET_BYTES = 1 << 34
"""The most bytes of a dataset file, and of its arrays unpacked (16 GiB): a file over it is refused unread."""

SAMPLE_EMPTY = (4, 10)
"""The default ``--min-empty`` and ``--max-empty`` of ``--sample``: the suites' last stage, and grading's bound."""

MAX_SAMPLE = 100_000

GAMES_PER_SAMPLED_POSITION = 2
"""``--games`` when not given: games per position asked for at each number of empty squares. A game passes
each number of empty squares once, so two games a position leave the draw a choice at 6-10 empty squares (the
scarcest stage, 4 empty, fills about two thirds); the suites' 2,000 games for any sample made the games, not the
labels, most of a small sample's time (docs/results.md)."""

MAX_GAMES = GAMES_PER_SAMPLED_POSITION * MAX_SAMPLE
"""The most ``--games``: what the largest ``--sample`` plays by default."""
MAX_SYMMETRY_IMAGES = 32 * 24 * 16 - 1
"""The most ``--symmetries`` of any variant: standard Quarto's symmetries -- its 32 board symmetries, each with the
24 orders and 16 complements of the attributes -- less the identity (a variant's own bound is checked after)."""


# ---------------------------------------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------------------------------------
def dataset_arrays(
    variant: Variant, solved: Sequence[SolvedPosition], kind: str, origin: Sequence[int] | None = None
) -> dict[str, np.ndarray]:
    """The arrays of :data:`ARRAYS` for ``solved`` with the observation planes of ``kind``; ``origin`` (default:
    each row itself) names the position each row is an image of."""
    shape = observation_kind(kind).shape
    count = len(solved)
    observations = np.zeros((count, *shape), dtype=np.int8)
    masks = np.zeros((count, variant.num_actions), dtype=np.int8)
    values = np.full((count, variant.num_actions), ILLEGAL, dtype=np.int8)
    for row, position in enumerate(solved):
        _observe(variant, position.state, kind, observations[row], masks[row])
        for action, value in position.action_values.items():
            values[row, action] = value
    return {
        "observations": observations,
        "action_mask": masks,
        "value": np.array([p.value for p in solved], dtype=np.int8).reshape(count),
        "action_values": values,
        "empty": np.array([p.empty for p in solved], dtype=np.int8).reshape(count),
        "placing": np.array([p.state.placing for p in solved], dtype=bool).reshape(count),
        "critical": np.array([p.critical for p in solved], dtype=bool).reshape(count),
        "origin": np.array(range(count) if origin is None else origin, dtype=np.int32).reshape(count),
        "positions": np.array([p.position for p in solved], dtype=f"<U{NUM_SQUARES + 2}").reshape(count),
    }


def _observe(variant: Variant, state: State, kind: str, planes: np.ndarray, mask: np.ndarray) -> None:
    """Fill ``planes`` and ``mask`` as ``quarto_v1`` does for the player to move (the env's own kernel)."""
    level = observation_kind(kind).level
    fields = compiled_fields(state)
    write_observation(planes, mask, level, fields, variant.groups, variant.counted, variant.declaration, True)


def with_symmetric_images(
    variant: Variant, solved: Sequence[SolvedPosition], images: int, seed: int
) -> tuple[list[SolvedPosition], list[int]]:
    """Each position of ``solved`` followed by up to ``images`` images of it under distinct random symmetries
    (:class:`quarto_env.symmetry.Symmetries`), and for each of these the index, in the same list, of the position
    it is an image of (its own for the positions of ``solved``). An image equal to the position or to an earlier
    image is left out."""
    symmetries = Symmetries(variant)
    rng = np.random.default_rng(seed)
    out: list[SolvedPosition] = []
    origin: list[int] = []
    for position in solved:
        chosen = 1 + rng.choice(symmetries.count - 1, size=min(images, symmetries.count - 1), replace=False)
        kept = {position.state: position}
        for image in _images(symmetries, position, chosen):
            kept.setdefault(image.state, image)
        origin += [len(out)] * len(kept)
        out += kept.values()
    return out, origin


def _images(symmetries: Symmetries, position: SolvedPosition, chosen: np.ndarray) -> list[SolvedPosition]:
    """``position`` moved by each symmetry in ``chosen`` (indices into ``boards x relabellings``; 0 is the
    identity), its action values with it."""
    boards, labels = np.divmod(chosen, len(symmetries.sources))
    rows = np.repeat(position_array([position.state]), len(chosen), axis=0)
    values = np.full((len(chosen), NUM_ACTIONS), ILLEGAL, dtype=np.int8)
    for action, value in position.action_values.items():
        if action < NUM_ACTIONS:  # the declaration (action 16) is the same action in every image
            values[:, action] = value
    moved_rows, moved_values = symmetries.apply_chosen(rows, values, boards, labels)
    declare = {a: v for a, v in position.action_values.items() if a >= NUM_ACTIONS}
    return [
        SolvedPosition(state_of_row(row), {**{int(a): int(v[a]) for a in np.flatnonzero(v != ILLEGAL)}, **declare})
        for row, v in zip(moved_rows, moved_values, strict=True)
    ]


# ---------------------------------------------------------------------------------------------------------
# The file
# ---------------------------------------------------------------------------------------------------------
def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the arrays of :data:`ARRAYS`: each one's name, dtype, shape and bytes, in that order."""
    digest = hashlib.sha256()
    for name in ARRAYS:
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name} {array.dtype.str} {array.shape}\n".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def save_dataset(path: str | Path, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> dict[str, Any]:
    """Write ``arrays`` (:data:`ARRAYS`) to ``path`` atomically as a compressed ``.npz``, with ``header`` plus the
    format, the count and the hash; returns the full header. A file :func:`load_dataset` would refuse as too large
    (:data:`MAX_DATASET_BYTES`) is refused before it is written."""
    header = {"format": DATASET_FORMAT, **header, "count": len(arrays["value"]), "sha256": arrays_digest(arrays)}
    header_bytes = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    named: dict[str, Any] = {"header": header_bytes, **{name: arrays[name] for name in ARRAYS}}
    unpacked = sum(array.nbytes for array in named.values())
    if unpacked > MAX_DATASET_BYTES:
        raise DatasetError(f"{unpacked:,} bytes of arrays are more than a dataset file holds, {MAX_DATASET_BYTES:,}")
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **named)
    atomic_write_bytes(path, buffer.getvalue())
    return header


def load_dataset(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(arrays, header)`` of the dataset file ``path``; :class:`DatasetError` in one line for a file that is
    missing, no regular file or over :data:`MAX_DATASET_BYTES` (refused unread), not a dataset, of another format,
    damaged at any byte (its zip, its arrays' headers, or arrays that do not match the header's hash), or whose
    arrays, under a hash made afresh, are not of the dtypes and shapes its header says."""
    name = repr(str(path))
    payload = read_file_bytes(path, "dataset", MAX_DATASET_BYTES, DatasetError)
    found = read_npz(payload, f"dataset {name}", MAX_DATASET_BYTES)
    missing = [array for array in ("header", *ARRAYS) if array not in found]
    if missing:
        raise DatasetError(f"{name} is damaged or not a dataset: it lacks the arrays {', '.join(missing)}")
    header = _header_of(found["header"], name)
    if header.get("format") != DATASET_FORMAT:
        raise DatasetError(
            f"{name} is dataset format {header.get('format')!r}; this code reads format {DATASET_FORMAT}"
        )
    arrays = {array: found[array] for array in ARRAYS}
    if header.get("sha256") != arrays_digest(arrays):
        raise DatasetError(f"{name} is damaged: its arrays do not match its header's hash")
    _check_layout(arrays, header, name)
    return arrays, header


def _header_of(array: np.ndarray, name: str) -> dict[str, Any]:
    """The header of a file, from its ``header`` array (UTF-8 JSON as bytes)."""
    try:
        if array.dtype != np.uint8 or array.ndim != 1:
            raise ValueError("not a byte array")
        header = json.loads(array.tobytes().decode("utf-8"))
    except (ValueError, RecursionError):  # not bytes, not UTF-8, not JSON, nested too deep
        header = None
    if not isinstance(header, dict):
        raise DatasetError(f"{name} is damaged or not a dataset: its header is no JSON object")
    return header


def _check_layout(arrays: dict[str, np.ndarray], header: dict[str, Any], name: str) -> None:
    """:class:`DatasetError` unless each array has the dtype and shape that the header's count, observation kind
    and actions give it (what a file written by :func:`save_dataset` has, and what :func:`check_rows` reads)."""
    count, actions = header.get("count"), header.get("actions")
    try:
        channels = observation_kind(header.get("observation")).num_channels  # type: ignore[arg-type]
    except ValueError:
        channels = None
    if type(count) is not int or count < 0 or actions not in (NUM_ACTIONS, NUM_ACTIONS + 1) or channels is None:
        raise DatasetError(f"{name}'s header has no count, observation kind and actions that this code reads")
    layout = {
        "observations": (np.int8, (count, channels, NUM_SQUARES)),
        "action_mask": (np.int8, (count, actions)),
        "value": (np.int8, (count,)),
        "action_values": (np.int8, (count, actions)),
        "empty": (np.int8, (count,)),
        "placing": (np.bool_, (count,)),
        "critical": (np.bool_, (count,)),
        "origin": (np.int32, (count,)),
        "positions": (np.str_, (count,)),
    }
    for array, (dtype, shape) in layout.items():
        found = arrays[array]
        text = dtype is np.str_  # of any length
        if (found.dtype.kind != "U" if text else found.dtype != np.dtype(dtype)) or found.shape != shape:
            expected = "unicode" if text else np.dtype(dtype).str
            raise DatasetError(
                f"{name}: {array} is {found.dtype.str} {found.shape}, where its header says {expected} {shape}: "
                "altered, and no dataset of this command"
            )


# ---------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``quarto dataset``."""
    parser = CommandParser(
        prog="quarto dataset",
        description="Solved positions as arrays (.npz) for supervised learning: observations, masks, exact values.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--suite", default=None, metavar="NAME", help="a shipped suite or a .jsonl suite file")
    sample = "sample and solve up to N positions per number of empty squares instead of reading a suite"
    add_integer_argument(source, "--sample", None, sample, fewest=1, most=MAX_SAMPLE, metavar="N")
    add_seed_argument(parser, "seed of the sampled games and the symmetries (0)")
    add_integer_argument(
        parser,
        "--games",
        None,
        f"with --sample: games played for positions (default {GAMES_PER_SAMPLED_POSITION} per position "
        "asked for: twice --sample)",
        fewest=1,
        most=MAX_GAMES,
    )
    low, high = SAMPLE_EMPTY
    add_empty_squares_argument(
        parser, "--min-empty", None, f"fewest empty squares, 2-16 (sample: {low})", fewest=2, name="empty squares"
    )
    add_empty_squares_argument(
        parser, "--max-empty", None, f"most empty squares, 2-16 (sample: {high})", fewest=2, name="empty squares"
    )
    add_observation_argument(parser, f"observation planes (default {DEFAULT_OBSERVATION}, as quarto_v1)")
    symmetries = "add up to K images of each position under random symmetries"
    add_integer_argument(parser, "--symmetries", 0, symmetries, fewest=0, most=MAX_SYMMETRY_IMAGES, metavar="K")
    add_jobs_argument(
        parser,
        "with --sample: worker processes that play the games and label the positions (default 1); "
        "the file does not depend on it",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", type=Path, metavar="FILE", help="the .npz file to write")
    target.add_argument(
        "--check",
        type=Path,
        metavar="PATH",
        help="check a dataset instead of writing one: a file of this command, or a folder of self-play samples "
        "(agents.tree.sample_files); exit 1 if it fails",
    )
    add_overwrite_argument(parser)
    add_progress_and_variant_arguments(parser, "progress bars")
    return parser


def main(argv: list[str]) -> int:
    """Run ``quarto dataset``."""
    parser, args, variant = parse_command(build_parser, argv)
    if args.check is not None:
        options = [token.partition("=")[0] for token in argv if token.startswith("-")]
        others = [option for option in options if option != "--check"]
        if others:
            parser.error(f"--check reads a dataset and takes no other option: drop {' '.join(others)}")
        return _check(parser, args.check)
    _check_symmetries(parser, variant, args.symmetries)
    # Held for the whole run: a second dataset into the same file (or its OUT.parts/) is refused meanwhile.
    with claim_output(args.out, "file", overwrite=args.overwrite, prog=parser.prog):
        return _write_dataset(parser, args, variant)


def _write_dataset(parser: argparse.ArgumentParser, args: argparse.Namespace, variant: Variant) -> int:
    """Collect, label and write the positions of the command line into the claimed ``--out``."""
    if args.sample is None:
        solved, source = _suite_positions(parser, variant, args)
    else:
        solved, source = _sampled_positions(parser, variant, args)
    if not solved:
        parser.error("no positions within --min-empty and --max-empty")
    origin = None
    if args.symmetries:
        solved, origin = with_symmetric_images(variant, solved, int(args.symmetries), args.seed)
    arrays = dataset_arrays(variant, solved, args.observation, origin)
    header = save_dataset(args.out, arrays, _header(variant, args, source))
    if args.sample is not None:
        remove_parts(parts_folder(args.out))
    origin_text = f"suite {source['suite']}" if "suite" in source else f"sampled with seed {args.seed}"
    print(
        f"{args.out}: {header['count']:,} positions ({origin_text}), {args.observation} planes "
        f"{arrays['observations'].shape[1:]}, {variant.num_actions} actions, {os.path.getsize(args.out):,} bytes"
    )
    return 0


def _check(parser: argparse.ArgumentParser, path: Path) -> int:
    """``--check PATH``: one line on what ``path`` holds once every part of it proves itself (exit 0), or on the
    first failure (exit 1)."""
    if not path.is_dir():
        try:  # a path that is no file to read is the command line's fault, not the dataset's
            input_file(path, "--check", DatasetError)
        except DatasetError as error:
            parser.error(f"{error} (a dataset file or a folder of self-play samples)")
    try:
        print(check_dataset(path))
    except DatasetError as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 1
    return 0


def check_dataset(path: Path) -> str:
    """Check the dataset at ``path`` whole -- a file of this command (its hash, then its rows: :func:`check_rows`),
    or a folder of self-play samples (:meth:`agents.tree.sample_files.SampleDataset.validate`) -- and say what it holds,
    in one line; :class:`DatasetError` naming the first failure."""
    if path.is_dir():
        samples = SampleDataset(path)
        counts = samples.validate()
        return (
            f"{path}: {counts['rows']:,} self-play samples in {counts['shards']} shard(s), {samples.kind.name} "
            f"planes, {samples.variant.describe()} rules: every shard checked"
        )
    arrays, header = load_dataset(path)
    check_rows(arrays, repr(str(path)))
    return f"{path}: {header['count']:,} solved positions, {header['observation']} planes: hash and rows checked"


def check_rows(arrays: dict[str, np.ndarray], name: str) -> None:
    """:class:`DatasetError` unless every row labels exactly its legal actions with a value (-1, 0 or +1) and
    :data:`ILLEGAL` elsewhere, its value is the best of them, and ``critical`` says whether one loses value."""
    legal = arrays["action_mask"] == 1
    values = arrays["action_values"].astype(np.int64)
    labelled = rows_label_legal_actions(legal, values) & legal.any(axis=1)
    best = np.where(legal, values, -2).max(axis=1)
    worst = np.where(legal, values, 2).min(axis=1)
    sound = labelled & (arrays["value"] == best) & (arrays["critical"] == (worst < best))
    if not sound.all():
        row = int(np.flatnonzero(~sound)[0])
        raise DatasetError(
            f"{name}: row {row} ({arrays['positions'][row]}) does not hold its legal actions' values, the best of "
            f"them as its value and whether one loses value ({np.count_nonzero(~sound)} such row(s))"
        )


def _check_symmetries(parser: argparse.ArgumentParser, variant: Variant, images: int) -> None:
    most = Symmetries(variant).count - 1
    if images > most:
        parser.error(f"--symmetries must be 0-{most} under {variant.describe()} rules, got {images}")


def _empty_bounds(parser: argparse.ArgumentParser, args: argparse.Namespace, default: tuple[int, int]) -> range:
    low = default[0] if args.min_empty is None else args.min_empty
    high = default[1] if args.max_empty is None else args.max_empty
    if low > high:
        parser.error(f"--min-empty {low} is above --max-empty {high}")
    return range(low, high + 1)


def _suite_positions(
    parser: argparse.ArgumentParser, variant: Variant, args: argparse.Namespace
) -> tuple[list[SolvedPosition], dict[str, Any]]:
    """The positions of ``--suite`` (default: the variant's), within the bounds of empty squares."""
    if args.games is not None:
        parser.error("--games goes with --sample: a suite's positions are chosen already")
    name = args.suite if args.suite is not None else default_suite_name(variant)  # "" is refused as no suite
    if name is None:
        shipped = ", ".join(shipped_suite_names()) or "none"
        parser.error(
            f"no shipped suite for {variant.describe()} rules (shipped: {shipped}); give --suite FILE or --sample N"
        )
    try:
        suite: Suite = load_suite(name, variant)
    except SuiteError as error:
        parser.error(str(error))
    bounds = _empty_bounds(parser, args, (2, NUM_SQUARES))
    solved = [p for p in suite.positions if p.empty in bounds]
    source = {"suite": suite.name, "file": str(name) if str(name) != suite.name else None}
    return solved, {**source, "generator": suite.generator, "min_empty": bounds[0], "max_empty": bounds[-1]}


def _sampled_positions(
    parser: argparse.ArgumentParser, variant: Variant, args: argparse.Namespace
) -> tuple[list[SolvedPosition], dict[str, Any]]:
    """``--sample`` positions per stage, collected from seeded games and labelled (:mod:`agents.solver.labels`), with
    ``--jobs`` worker processes; resumed from :func:`parts_folder` when an earlier run of the same settings
    stopped."""
    if variant.declaration:
        parser.error("--sample takes no --declaration: the notation cannot say what is claimable")
    bounds = _empty_bounds(parser, args, SAMPLE_EMPTY)
    if bounds[-1] > SOLVER_COMFORT_EMPTY and shipped_book(variant) is None:
        warn(
            parser,
            f"no opening book ships for {variant.describe()} rules: above {SOLVER_COMFORT_EMPTY} empty squares "
            "each position may take the solver minutes",
        )
    games = args.games or GAMES_PER_SAMPLED_POSITION * args.sample
    position_source = PositionSource(DEFAULT_SOURCES, tuple(reversed(bounds)), games)
    progress = not args.no_progress
    source = {"sample": args.sample, "seed": args.seed, "games": games, "sources": list(DEFAULT_SOURCES)}
    source |= {"min_empty": bounds[0], "max_empty": bounds[-1]}
    folder = parts_folder(args.out)
    try:
        with worker_pool(args.jobs) if args.jobs > 1 else contextlib.nullcontext() as pool:
            states = _planned_positions(folder, variant, source)
            if states is None:
                states = collect_positions(variant, args.sample, args.seed, position_source, progress, pool=pool)
                if not states:
                    parser.error("no positions within --min-empty and --max-empty")
                _save_plan(folder, variant, source, states)
            labels = label_positions(variant, states, args.jobs, progress, folder=folder, pool=pool)
    except KeyboardInterrupt:
        _say_what_is_kept(folder)
        raise
    return [SolvedPosition(state, values_of_row(row)) for state, row in zip(states, labels, strict=True)], source


# ---------------------------------------------------------------------------------------------------------
# Resuming a sample
# ---------------------------------------------------------------------------------------------------------
PARTS_SUFFIX = ".parts"
"""The suffix of :func:`parts_folder`."""

PLAN_FILE = "positions.json"
"""The file of the parts folder that holds the sample's positions and the settings that drew them: a sealed JSON
object (:mod:`agents.storage.integrity`)."""
PLAN_KIND = "dataset plan"
PLAN_FORMAT = 1
"""The version of :data:`PLAN_FILE`'s layout."""


def parts_folder(out: Path) -> Path:
    """Where a ``--sample`` run for ``out`` keeps its work until the file is written: ``OUT.parts/``, with the
    positions (:data:`PLAN_FILE`) and the finished shards of labels (:mod:`agents.solver.labels`). The same command
    continues from it; the finished file's run removes it."""
    return out.with_name(out.name + PARTS_SUFFIX)


def _planned_positions(folder: Path, variant: Variant, source: dict[str, Any]) -> list[State] | None:
    """The positions an earlier run with the same variant and ``source`` settings drew, or ``None`` (no such
    run, or one of other settings: its plan is then replaced, and its shards with it). A plan that fails its
    check (:mod:`agents.storage.integrity`: altered, damaged, or of an older version) is never used: the positions are
    drawn again, and a line on stderr says so."""
    path = folder / PLAN_FILE
    try:
        plan = read_sealed_json(path, PLAN_KIND, PLAN_FORMAT)
        if plan["variant"] != variant.to_dict() or plan["source"] != source:
            return None
        return [parse_position(position) for position in plan["positions"]]
    except FileNotFoundError:
        return None
    except (OSError, IntegrityError) as error:
        reason = str(error)
    except (ValueError, KeyError, TypeError, PositionError):  # sealed, but not by this command
        reason = f"{path} is no plan of positions"
    print(f"{reason}; drawing the positions again", file=sys.stderr)
    return None


def _save_plan(folder: Path, variant: Variant, source: dict[str, Any], states: Sequence[State]) -> None:
    plan = {"variant": variant.to_dict(), "source": source, "positions": [format_position(s) for s in states]}
    write_sealed_json(folder / PLAN_FILE, plan, PLAN_KIND, PLAN_FORMAT)


def _say_what_is_kept(folder: Path) -> None:
    """Tell an interrupted run's user what a second run of the same command starts from."""
    if not (folder / PLAN_FILE).is_file():
        return
    shards = len(list(folder.glob("shard-*.npy")))
    print(
        f"quarto dataset: the positions and {shards} finished shard(s) of labels are kept in {folder}; "
        "the same command continues from them",
        file=sys.stderr,
    )


def remove_parts(folder: Path) -> None:
    """Delete a finished run's :func:`parts_folder` (its plan and shards; anything else stays, and the folder
    then too)."""
    (folder / PLAN_FILE).unlink(missing_ok=True)
    remove_shard_folder(folder)


def _header(variant: Variant, args: argparse.Namespace, source: dict[str, Any]) -> dict[str, Any]:
    kind = observation_kind(args.observation)
    return {
        "source": source,
        "variant": variant.to_dict(),
        "observation": kind.name,
        "channels": [channel.name for channel in kind.channels],
        "actions": variant.num_actions,
        "illegal": ILLEGAL,
        "symmetries": {"images": args.symmetries, "seed": args.seed},
        "code": code_version(),
    }
