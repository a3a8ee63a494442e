"""``quarto bench jax``: the speed of :mod:`quarto_env.jax` beside pgx's own games and our numba engine, its
move-for-move check against the compiled core, and the one prepared command for a GPU (the page is
``docs/jax.md``).

Three modes:

- **Speed** (the default): steps/s of random play, ``jax.jit(jax.vmap(env.step))`` under pgx's auto-reset with the
  actions drawn on the device, at batch 1,024, 4,096 and 16,384, for each observation kind asked for
  (``quarto_env.jax KIND``), beside ``pgx connect_four`` and ``pgx tic_tac_toe`` played the same way and our numba
  ``VectorQuarto KIND`` on the host's CPU, in one run: every path is a ratio to ``pgx connect_four`` at the same
  batch. The machinery is ``quarto bench vector``'s (:mod:`experiments.bench.vector`): pgx's own benchmark manner
  (100 steps fused into each ``jax.jit`` call by a ``fori_loop``, compilation excluded, ``block_until_ready``
  around each timed slice), slices taken in alternation so that a change in load falls on every path alike,
  medians over the rounds. The headline is ``quarto_env.jax tactical`` (the env's default observation) against
  ``pgx connect_four`` at batch 4,096.
- ``--check N``: :func:`experiments.bench.jax_check.check` for every variant of its ``VARIANTS``, ``N`` random games
  each; a table of the steps compared and the mismatches per field; exit status 1 if any.
- ``--device-check``: the prepared run for one GPU, within 8 minutes there: the speed bench up to batch 65,536
  (``tactical``, pgx's two games and ``VectorQuarto tactical``) and a short AlphaZero run on
  ``configs/alphazero_jax_gpu.yaml``, printing steps/s, positions/s and the device. Where JAX's device is the CPU
  (or with ``--small``) it runs at a small size, so that the tests run it too.

Example usage::

    quarto bench jax                                   # batches 1024 4096 16384, the kinds of DEFAULT_OBSERVATIONS
    quarto bench jax --batches 4096 --observations tactical --seconds 2 --rounds 3 --out runs/bench_jax.json
    quarto bench jax --check 100000                    # every variant; exit status 1 on any mismatch
    quarto bench jax --device-check                    # on a GPU machine
"""

from __future__ import annotations

import argparse
import functools
import importlib
import time
from pathlib import Path
from typing import Any

from experiments.bench import MAX_BATCH, add_batch_arguments, add_timing_arguments, unique_batch_arguments, vector
from experiments.bench.jax_check import FIELDS, VARIANTS, CheckResult, check
from experiments.evaluation.tables import markdown_table
from experiments.options import CommandParser, add_integer_argument, add_seed_argument
from experiments.output import add_overwrite_argument, claim_if_asked
from quarto_env.extras import require
from quarto_env.observation import DEFAULT_OBSERVATION, OBSERVATION_KINDS

PROG = "quarto bench jax"
DEFAULT_BATCHES = (1024, 4096, 16384)
HEADLINE_BATCH = 4096
DEFAULT_OBSERVATIONS = ("tactical", "raw", "lookahead", "parity")
"""The kinds timed unless ``--observations`` says: ``tempo`` only when asked, its planes look one placement ahead
for every piece and square, and its steps are far slower (docs/jax.md has the figures)."""
JAX_WARM_UP_CALLS = 2
"""Warm-up calls of a ``quarto_env.jax`` path: the first compiles, the second runs compiled (a fused call of a slow
kind at a large batch takes seconds)."""
MAX_CHECK_GAMES = 10_000_000
DEFAULT_CHECK_BATCH = 1024

DEVICE_CHECK_CONFIG = "alphazero_jax_gpu.yaml"
"""The config of the device check's AlphaZero run, in the project's ``configs/``."""
DEVICE_CHECK_BATCHES = (1024, 4096, 16384, 65_536)
DEVICE_CHECK_SMALL_BATCHES = (256,)
DEVICE_CHECK_TIMING = {"seconds": 1.0, "rounds": 3}
DEVICE_CHECK_SMALL_TIMING = {"seconds": 0.05, "rounds": 1}
ALPHAZERO_MODULE = "experiments.training.alphazero_jax_timing"
ALPHAZERO_RATE = "selfplay_positions_per_second"
"""``selfplay_positions_per_second(config, seconds)`` in :data:`ALPHAZERO_MODULE`: the searched self-play
positions per second of the config's jitted iteration (self-play and its gradient steps), on its device."""
ALPHAZERO_SECONDS = 30.0
"""The device check's timing of the AlphaZero iteration, after the call that compiles it (small: one call)."""
ALPHAZERO_SMALL = [
    "num_games=4",
    "alphazero.rollout_steps=4",
    "alphazero.sims=4",
    "alphazero.gumbel_actions=4",
    "alphazero.batch_size=8",
    "alphazero.buffer_size=64",
    "net_arch=[16]",
    "observation=raw",
    "device=cpu",
]
"""The small size's overrides of :data:`DEVICE_CHECK_CONFIG`: a few tiny searches, on the CPU."""

MODE_OPTIONS = {
    "--check": ("--batch", "--variants", "--planes"),
    "--device-check": ("--small",),
    "speed": ("--batches", "--observations", "--seconds", "--rounds"),
}
"""The options that belong to one mode only: given with another, they are refused in one line."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``quarto bench jax``; a bad value or a mix of modes is one line and exit status 2."""
    parser = CommandParser(
        prog=PROG,
        description="Steps/s of quarto_env.jax (jit(vmap(step)), random play) beside pgx's connect_four and "
        "tic_tac_toe and the numba VectorQuarto, as ratios to connect_four; --check: move for move against the "
        "compiled core; --device-check: the prepared run for one GPU.",
    )
    add_batch_arguments(
        parser, DEFAULT_BATCHES, OBSERVATION_KINDS, DEFAULT_OBSERVATIONS, "quarto_env.jax and VectorQuarto (speed)"
    )
    add_timing_arguments(parser, seconds=1.0, timed="path, batch", rounds=3)
    add_seed_argument(parser, "seed of the games and the random actions")
    check_help = f"check N random games of every variant against the compiled core instead, 1-{MAX_CHECK_GAMES:,}"
    add_integer_argument(parser, "--check", None, check_help, fewest=1, most=MAX_CHECK_GAMES, metavar="N")
    parser.add_argument("--device-check", action="store_true", help="the prepared run for one GPU (see --small)")
    add_integer_argument(
        parser, "--batch", DEFAULT_CHECK_BATCH, "with --check: games per batch", fewest=1, most=MAX_BATCH
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=None,
        metavar="VARIANT",
        help=f"with --check: the variants to check (default: all), of {'; '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--planes",
        choices=list(OBSERVATION_KINDS),
        default="tempo",
        metavar="KIND",
        help="with --check: the observation kind whose planes are compared (tempo holds every kind's; parity, the "
        "kinds but tempo's four planes, far cheaper)",
    )
    parser.add_argument("--small", action="store_true", help="with --device-check: the small size (automatic on a CPU)")
    parser.add_argument("--out", type=Path, metavar="FILE", help="also write the figures as JSON here")
    add_overwrite_argument(parser)
    args = parser.parse_args(argv)
    if args.check is not None and args.device_check:
        parser.error("--check and --device-check are two modes: give one")
    mode = "--check" if args.check is not None else "--device-check" if args.device_check else "speed"
    given = {word.partition("=")[0] for word in argv if word.startswith("--")}
    for other, options in MODE_OPTIONS.items():
        for option in sorted(given & set(options)) if other != mode else ():
            named = "the speed bench (no --check or --device-check)" if other == "speed" else other
            parser.error(f"{option} goes with {named} only")
    if mode == "--check" and args.out:
        parser.error("--out goes with the speed bench and --device-check, not --check")
    args.mode = mode
    unique_batch_arguments(args)
    args.variants = list(dict.fromkeys(args.variants or VARIANTS))
    args.rounds = int(args.rounds)
    return args


def main(argv: list[str]) -> int:
    """Run the mode the command line asks for; returns the exit status (1: the check found a mismatch)."""
    args = parse_args(argv)
    require("jax", "this benchmark")
    if args.mode == "--check":
        return run_check(args)
    with claim_if_asked(args.out, "file", overwrite=args.overwrite, prog=PROG):
        return run_device_check(args, argv) if args.mode == "--device-check" else run_speed(args, argv)


# ---------------------------------------------------------------------------------------------------------
# Speed
# ---------------------------------------------------------------------------------------------------------
class QuartoJaxRunner(vector.PgxRunner):
    """``quarto_env.jax.env(observation=kind)`` played as pgx's games are (:class:`vector.PgxRunner`), warmed up
    with :data:`JAX_WARM_UP_CALLS` calls."""

    warm_up_calls = JAX_WARM_UP_CALLS

    def __init__(self, batch: int, seed: int, kind: str, sampler: str = "act_randomly") -> None:
        import quarto_env.jax

        env = quarto_env.jax.env(observation=kind)
        super().__init__(env, batch, seed, fused=vector.PGX_FUSED_STEPS, sampler=sampler)


UNIFORM = ", uniform sampler"
"""The suffix of the paths whose random actions are drawn by :func:`vector.uniform_legal_actions` instead of pgx's
``act_randomly``: connect_four and the default kind, so that the sampler's cost, which grows steeply with the
number of actions (16 in Quarto, 7 in connect_four), can be told from the game's."""


def speed_paths(observations: list[str]) -> dict[str, vector.Maker]:
    """pgx's two games as its own benchmark plays them, ``quarto_env.jax KIND`` and ``VectorQuarto KIND`` for each
    kind."""
    ours: dict[str, vector.Maker] = {
        jax_path(kind): functools.partial(QuartoJaxRunner, kind=kind) for kind in observations
    }
    uniform: dict[str, vector.Maker] = {
        vector.REFERENCE + UNIFORM: functools.partial(
            vector.PgxRunner, "connect_four", fused=vector.PGX_FUSED_STEPS, sampler="uniform"
        ),
        jax_path(DEFAULT_OBSERVATION) + UNIFORM: functools.partial(
            QuartoJaxRunner, kind=DEFAULT_OBSERVATION, sampler="uniform"
        ),
    }
    return {**vector.pgx_paths(per_step=False), **ours, **uniform, **vector.vector_paths(observations)}


def jax_path(kind: str) -> str:
    return f"quarto_env.jax {kind}"


def bench(args: argparse.Namespace, title: str) -> tuple[dict, dict, dict, dict[str, Any]]:
    """Print the header, measure every path of ``args.observations`` at ``args.batches``, print the table and the
    headline; returns (rounds, medians, ratios, the machine)."""
    machine = machine_record()
    print(header(title, args, machine))
    rounds = vector.measure(speed_paths(args.observations), args)
    medians = vector.medians_of(rounds)
    ratios = vector.ratios_to_reference(medians)
    print(vector.results_table(medians, ratios, args.batches))
    print("VectorQuarto runs on the host's CPU, one thread; the JAX paths on the device above.")
    headline = jax_path(DEFAULT_OBSERVATION)
    if headline in ratios:
        cells = ", ".join(f"{ratios[headline][b]:.2f}x at batch {b}" for b in args.batches)
        goal = " (goal on CPU: >= 1.00x at batch 4096)" if HEADLINE_BATCH in args.batches else ""
        print(f"headline: {headline} / {vector.REFERENCE}: {cells}{goal}")
        same = {b: medians[headline + UNIFORM][b] / medians[vector.REFERENCE + UNIFORM][b] for b in args.batches}
        cells = ", ".join(f"{ratio:.2f}x at batch {b}" for b, ratio in same.items())
        print(f"both with the uniform sampler: {headline} / {vector.REFERENCE}: {cells}")
    return rounds, medians, ratios, machine


def run_speed(args: argparse.Namespace, argv: list[str]) -> int:
    rounds, medians, ratios, machine = bench(args, PROG)
    if args.out:
        vector.write_record(args.out, [*PROG.split(), *argv], _config(args, machine), rounds, medians, ratios)
    return 0


def machine_record() -> dict[str, Any]:
    """:func:`vector.machine_record` with JAX's first device."""
    import jax

    device = jax.devices()[0]
    return vector.machine_record(with_pgx=True) | {"device": str(device), "device_kind": device.device_kind}


def header(title: str, args: argparse.Namespace, machine: dict[str, Any]) -> str:
    return (
        f"{title} -- device {machine['device']} ({machine['device_kind']}, JAX backend {machine['jax_backend']}); "
        f"CPU {machine['cpu_model']}, {machine['cpu_count']} CPUs (load {vector.load_text(machine)})\n"
        f"JAX {machine['jax']}, pgx {machine['pgx']}, Python {machine['python']}, numpy {machine['numpy']}, "
        f"seed {args.seed}\n{vector.timing_line(args)}"
    )


def _config(args: argparse.Namespace, machine: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in vars(args).items() if key not in ("check", "batch", "variants")} | machine


# ---------------------------------------------------------------------------------------------------------
# --check
# ---------------------------------------------------------------------------------------------------------
def run_check(args: argparse.Namespace) -> int:
    """Check every variant asked for; print the table; 1 if any step of any game differs."""
    import jax

    print(
        f"{PROG} --check {args.check} -- {len(args.variants)} variant(s), {args.planes} planes, batch {args.batch}, "
        f"seed {args.seed}, "
        f"device {jax.devices()[0]}\n"
    )
    results = []
    for name in args.variants:
        results.append(check(name, VARIANTS[name], args.check, args.batch, args.seed, args.planes))
        print(f"{name}: {results[-1].total} mismatches, {results[-1].seconds:.1f} s", flush=True)
    print("\n" + check_table(results))
    total = sum(result.total for result in results)
    if total:
        print(f"{total} mismatching game steps: quarto_env.jax differs from the compiled core")
        return 1
    print(f"0 mismatches in {sum(r.steps for r in results):,} steps of {sum(r.games for r in results):,} games")
    return 0


def check_table(results: list[CheckResult]) -> str:
    """A Markdown table: variant, games, steps compared, the mismatches of each field, seconds."""
    header = ["variant", "games", "steps", *(f"{field} mismatches" for field in FIELDS), "seconds"]
    rows = [
        [r.variant, f"{r.games:,}", f"{r.steps:,}", *(f"{r.mismatches[f]:,}" for f in FIELDS), f"{r.seconds:.1f}"]
        for r in results
    ]
    return markdown_table(header, rows)


# ---------------------------------------------------------------------------------------------------------
# --device-check
# ---------------------------------------------------------------------------------------------------------
def run_device_check(args: argparse.Namespace, argv: list[str]) -> int:
    """The bench at the device check's sizes, then the short AlphaZero run; everything it measured, printed."""
    import jax

    start = time.perf_counter()
    small = args.small or jax.default_backend() == "cpu"
    timing = DEVICE_CHECK_SMALL_TIMING if small else DEVICE_CHECK_TIMING
    args.batches = list(DEVICE_CHECK_SMALL_BATCHES if small else DEVICE_CHECK_BATCHES)
    args.observations = [DEFAULT_OBSERVATION]
    args.seconds, args.rounds = timing["seconds"], timing["rounds"]
    size = "small size" if small else "full size"
    rounds, medians, ratios, machine = bench(args, f"{PROG} --device-check ({size})")
    print(f"\nAlphaZero (backend: jax) on configs/{DEVICE_CHECK_CONFIG}" + (", small" if small else "") + ":")
    alphazero = alphazero_short_run(small)
    print(alphazero["line"])
    took = time.perf_counter() - start
    device = f"{machine['device']} ({machine['device_kind']})"
    print(f"\ndevice check: {took:.0f} s on {device} (goal: under 480 s on one GPU)")
    if args.out:
        config = _config(args, machine) | {"small": small, "alphazero": alphazero, "seconds_in_all": took}
        vector.write_record(args.out, [*PROG.split(), *argv], config, rounds, medians, ratios)
    return 0


def alphazero_short_run(small: bool) -> dict[str, Any]:
    """The self-play-and-train iteration of ``backend: jax`` on :data:`DEVICE_CHECK_CONFIG` (small: with
    :data:`ALPHAZERO_SMALL`), timed by the backend's :data:`ALPHAZERO_RATE`, or one line saying what is not there;
    ``line`` is what to print."""
    from experiments.training.config_file import load_config
    from experiments.training.shipped_configs import CONFIGS

    device_config = CONFIGS / DEVICE_CHECK_CONFIG
    try:
        module = importlib.import_module(ALPHAZERO_MODULE)
    except ModuleNotFoundError as error:
        if error.name != ALPHAZERO_MODULE:
            raise
        module = None
    rate_of = getattr(module, ALPHAZERO_RATE, None)
    missing = None if device_config.is_file() else f"configs/{DEVICE_CHECK_CONFIG} is not there"
    if rate_of is None:
        missing = f"{ALPHAZERO_MODULE}.{ALPHAZERO_RATE} is not there"
    if rate_of is None or missing:
        return {"available": False, "line": f"AlphaZero on JAX: not available ({missing})"}
    config = load_config(device_config, ALPHAZERO_SMALL if small else [])
    start = time.perf_counter()
    rate = float(rate_of(config, 0.0 if small else ALPHAZERO_SECONDS))
    seconds = time.perf_counter() - start
    searched = f"{config.num_games} games x {config.alphazero.rollout_steps} steps, {config.alphazero.sims} sims"
    line = (
        f"AlphaZero on JAX: {rate:,.0f} positions/s (searched self-play and training; {searched}; "
        f"{config.device} device; {seconds:.0f} s with compilation)"
    )
    return {"available": True, "line": line, "positions_per_second": rate, "seconds": seconds}
