"""Drive the sessions with a torch model: self-play, a few gradient steps on its samples, then a match of the
trained model against the one it started from. Any framework works alike (docs/sessions.md); without torch
this script says so and stops.

    python docs/examples/external_inference_torch.py --games 16 --sims 32 --steps 50 --pairs 100

The match's score comes with its 95% interval: 50 steps on 16 games change the model little, and a match of a
few games cannot tell a change that small from chance (16 games give an interval about 0.45 wide), so the
default plays 200 (about 0.14 wide, a few seconds more); the script says whether 0.5 lies inside.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np
from external_inference import play_match  # the numpy example beside this one: its match, played alike

from agents.tree.sessions import ArenaSession, LeafBatch, PUCTOptions, SelfPlaySession
from quarto_env.errors import QuartoError
from quarto_env.observation import observation_kind

try:
    import torch
except ImportError:
    print("this example needs torch (pip install torch); the numpy one does not: external_inference.py")
    sys.exit(0)

OBSERVATION = "tactical"


class Model(torch.nn.Module):
    """Flattened planes -> 16 policy logits and a tanh value."""

    def __init__(self, channels: int, hidden: int = 128) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(channels * 16, hidden), torch.nn.ReLU())
        self.policy = torch.nn.Linear(hidden, 16)
        self.value = torch.nn.Linear(hidden, 1)

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.body(planes)
        return self.policy(hidden), torch.tanh(self.value(hidden)).squeeze(1)


def evaluator(model: Model):  # type: ignore[no-untyped-def]
    """``model`` as a session's evaluator: a batch's planes in, numpy logits and values out."""

    def evaluate(batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
        with torch.inference_mode():
            logits, values = model(torch.from_numpy(batch.observations).float())
        return logits.numpy(), values.numpy()

    return evaluate


def train(model: Model, batches: list[dict[str, np.ndarray]], steps: int) -> float:
    """``steps`` AdamW steps on the samples (policy cross-entropy over the legal actions, value squared error)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = torch.zeros(())
    for step in range(steps):
        batch = {name: torch.from_numpy(array) for name, array in batches[step % len(batches)].items()}
        logits, values = model(batch["observations"].float())
        log_policy = torch.log_softmax(logits.masked_fill(~batch["legal"], -1e9), dim=1)
        loss = -(batch["policy"] * log_policy).sum(1).mean() + ((values - batch["value"]) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def _verdict(low: float, high: float) -> str:
    """What a match's interval says about the trained model against its start."""
    if low > 0.5:
        return "the trained model is stronger"
    if high < 0.5:
        return "the trained model is weaker"
    return "0.5 is inside it, no difference measured at this many games"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--pairs", type=int, default=100, help="pairs of match games (seats swapped)")
    parser.add_argument("--sims", type=int, default=32)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = Model(observation_kind(OBSERVATION).num_channels)
    start = copy.deepcopy(model)
    options = PUCTOptions(simulations=args.sims)

    selfplay = SelfPlaySession(args.games, options, observation=OBSERVATION, seed=args.seed)
    samples = selfplay.run(evaluator(model)).samples()
    arrays = samples.arrays()
    rows = np.random.default_rng(args.seed).permutation(len(samples))
    batches = [
        {name: arrays[name][part] for name in ("observations", "legal", "policy", "value")}
        for part in np.array_split(rows, max(1, len(rows) // 64))
    ]
    loss = train(model, batches, args.steps)
    print(f"self-play: {len(selfplay.games)} games, {len(samples)} samples; {args.steps} steps, last loss {loss:.3f}")

    arena = ArenaSession(args.pairs, options, observation=OBSERVATION, seed=args.seed, names=("trained", "start"))
    line, low, high = play_match(arena, evaluator(model.eval()), evaluator(start.eval()))
    print(f"{line}: {_verdict(low, high)}")


if __name__ == "__main__":
    try:
        main()
    except QuartoError as error:  # the library's refusal (a dataset of other planes, a bad count): its one line
        sys.exit(f"{Path(__file__).name}: {error}")
