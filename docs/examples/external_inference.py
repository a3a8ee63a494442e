"""Drive the batched search with a network of your own: here a numpy MLP with random weights, no framework.

    python docs/examples/external_inference.py --games 8 --pairs 4 --sims 32

The session owns the games and the search trees; this script owns the network. Each batch the session hands out
holds the leaves of one round of the search (observation planes, legal actions, which model); the script answers
with policy logits and values, and the search goes on. It plays self-play games (training samples, written as a
dataset with ``--dataset DIR``; the games for ``quarto replay`` with ``--records FILE``), then a match of the MLP
against a uniform evaluator, its score with a 95% interval. The contract is in docs/sessions.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from agents.tree.sample_files import SampleDataset, SampleWriter
from agents.tree.sessions import ArenaSession, BatchEvaluator, LeafBatch, PUCTOptions, SelfPlaySession
from experiments.arena.records import record_line
from experiments.evaluation.ratings import wilson_interval
from quarto_env.errors import QuartoError
from quarto_env.observation import observation_kind

OBSERVATION = "tactical"


class NumpyMLP:
    """A two-layer perceptron over the flattened planes: 16 policy logits and a tanh value."""

    def __init__(self, channels: int, hidden: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        inputs = channels * 16
        self.w1 = rng.normal(0, 1 / np.sqrt(inputs), (inputs, hidden)).astype(np.float32)
        self.w2 = rng.normal(0, 1 / np.sqrt(hidden), (hidden, 17)).astype(np.float32)

    def __call__(self, batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
        x = batch.observations.reshape(len(batch), -1).astype(np.float32)
        out = np.maximum(x @ self.w1, 0) @ self.w2
        return out[:, :16], np.tanh(out[:, 16])


def uniform(batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
    """Equal priors and a value of 0: the search alone, with its rules shortcuts."""
    return np.zeros((len(batch), 16), np.float32), np.zeros(len(batch), np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=8, help="self-play games")
    parser.add_argument("--pairs", type=int, default=4, help="pairs of match games (seats swapped)")
    parser.add_argument("--sims", type=int, default=32, help="simulations per searched move")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", type=Path, help="write the self-play samples to this dataset folder")
    parser.add_argument("--records", type=Path, help="write the self-play games here, for quarto replay")
    args = parser.parse_args()
    network = NumpyMLP(observation_kind(OBSERVATION).num_channels, hidden=64, seed=args.seed)

    # Self-play: the loop form of the protocol.
    options = PUCTOptions(simulations=args.sims)
    selfplay = SelfPlaySession(args.games, options, observation=OBSERVATION, seed=args.seed)
    while not selfplay.done:
        batch = selfplay.pending()
        selfplay.submit(*network(batch), batch=batch)
    samples = selfplay.samples()
    lengths = [len(game.record.actions) for game in selfplay.games]
    print(
        f"self-play: {len(selfplay.games)} games, {selfplay.batches} batches, {len(samples)} samples "
        f"(observations {samples.observations.shape}, policy {samples.policy.shape}), "
        f"mean length {np.mean(lengths):.1f} actions"
    )
    if args.dataset:
        with SampleWriter(args.dataset, OBSERVATION, selfplay.variant) as writer:
            writer.write(samples)
        print(f"dataset: {SampleDataset(args.dataset).validate()} in {args.dataset}")
    if args.records:
        lines = [record_line(game.record, selfplay.variant, **game.extra) for game in selfplay.games]
        args.records.write_text("".join(lines))
        print(f"records: quarto replay {args.records}")

    # A match: model 0 the MLP, model 1 the uniform evaluator; run() passes each batch to its model.
    arena = ArenaSession(args.pairs, options, observation=OBSERVATION, seed=args.seed, names=("mlp", "uniform"))
    print(play_match(arena, network, uniform)[0])


def play_match(arena: ArenaSession, *evaluators: BatchEvaluator) -> tuple[str, float, float]:
    """Play ``arena`` to its end, one evaluator per model: its result in a line, model 0's score with its 95%
    interval, and that interval."""
    summary = arena.run(*evaluators).summary()
    low, high = wilson_interval(summary["score"], summary["games"])  # a draw counts as half a win
    first, second = arena.names
    line = (
        f"match: {first} against {second}, {summary['games']} games: {summary['wins']} won, {summary['draws']} "
        f"drawn, {summary['losses']} lost, score {summary['score']:.3f} (95% interval {low:.3f} to {high:.3f})"
    )
    return line, low, high


if __name__ == "__main__":
    try:
        main()
    except QuartoError as error:  # the library's refusal (a dataset of other planes, a bad count): its one line
        sys.exit(f"{Path(__file__).name}: {error}")
