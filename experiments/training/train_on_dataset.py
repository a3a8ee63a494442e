"""Train a small network on a ``quarto dataset`` file, and print how often it agrees with perfect play.

One file, read top to bottom (CleanRL style). The network reads the observation planes and has two heads: the
value (loss, draw or win for the player to move; cross-entropy) and a policy over the legal actions whose target
is the uniform distribution over the best actions (those whose exact value is the position's). Positions are held
out with all their symmetric images (the ``origin`` array), so the held-out accuracy is on unseen positions::

    quarto dataset --suite standard-v1 --observation parity --symmetries 7 --out data.npz
    python -m experiments.training.train_on_dataset data.npz --epochs 30
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torch import nn

from agents.networks.designs import hidden_layers
from experiments.options import CommandParser
from experiments.training.dataset import load_dataset


@dataclasses.dataclass
class Config:
    dataset: str = "data.npz"  # the file that `quarto dataset` wrote
    epochs: int = 30
    batch_size: int = 128
    learning_rate: float = 1e-3
    width: int = 256  # units of each hidden layer
    holdout: float = 0.2  # share of the positions held out, with their symmetric images
    seed: int = 0


def parse_config(argv: list[str] | None = None) -> Config:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    for field in dataclasses.fields(Config)[1:]:
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default)
    return Config(**vars(parser.parse_args(argv)))


class Network(nn.Module):
    def __init__(self, inputs: int, actions: int, width: int) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Flatten(), *hidden_layers(inputs, [width, width], nn.ReLU))
        self.value_head = nn.Linear(width, 3)  # logits of loss, draw, win
        self.policy_head = nn.Linear(width, actions)

    def forward(self, observations: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.trunk(observations)
        return self.value_head(hidden), self.policy_head(hidden).masked_fill(mask == 0, -1e9)


def tensors(arrays: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, torch.Tensor]:
    best = arrays["action_values"] == arrays["value"][:, None]  # illegal actions hold -2: never best
    return {
        "observations": torch.as_tensor(arrays["observations"][rows], dtype=torch.float32),
        "mask": torch.as_tensor(arrays["action_mask"][rows]),
        "value_class": torch.as_tensor(arrays["value"][rows] + 1, dtype=torch.long),  # 0 loss, 1 draw, 2 win
        "best": torch.as_tensor(best[rows], dtype=torch.float32),
    }


def losses(model: Network, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    value_logits, policy_logits = model(batch["observations"], batch["mask"])
    value_loss = nn.functional.cross_entropy(value_logits, batch["value_class"])
    target = batch["best"] / batch["best"].sum(1, keepdim=True)
    policy_loss = -(target * policy_logits.log_softmax(1)).sum(1).mean()
    return value_loss, policy_loss


@torch.no_grad()
def accuracy(model: Network, data: dict[str, torch.Tensor]) -> tuple[float, float]:
    """The share of right values, and of positions whose most likely action is a best one."""
    value_logits, policy_logits = model(data["observations"], data["mask"])
    value_right = (value_logits.argmax(1) == data["value_class"]).float().mean()
    best_chosen = data["best"].gather(1, policy_logits.argmax(1, keepdim=True)).mean()
    return value_right.item(), best_chosen.item()


def split(origin: np.ndarray, holdout: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    positions = np.unique(origin)
    held = rng.choice(positions, size=round(len(positions) * holdout), replace=False)
    test = np.isin(origin, held)
    return np.flatnonzero(~test), np.flatnonzero(test)


def train(config: Config) -> list[float]:
    """Train, printing each epoch's loss and held-out accuracy; returns each epoch's mean training loss."""
    torch.manual_seed(config.seed)
    arrays, header = load_dataset(config.dataset)
    train_rows, test_rows = split(arrays["origin"], config.holdout, np.random.default_rng(config.seed))
    train_set, test_set = tensors(arrays, train_rows), tensors(arrays, test_rows)
    print(f"{len(train_rows)} training rows, {len(test_rows)} held out; {header['observation']} planes")
    commonest = np.bincount(arrays["value"][test_rows] + 1, minlength=3).max() / max(len(test_rows), 1)
    lucky = (test_set["best"].sum(1) / test_set["mask"].sum(1)).mean().item()
    print(f"held out: the commonest value is right {commonest:.3f}, a random legal action is best {lucky:.3f}")
    model = Network(arrays["observations"][0].size, header["actions"], config.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    history = []
    for epoch in range(1, config.epochs + 1):
        order = torch.randperm(len(train_rows))
        total = 0.0
        for start in range(0, len(order), config.batch_size):
            batch = {name: tensor[order[start : start + config.batch_size]] for name, tensor in train_set.items()}
            value_loss, policy_loss = losses(model, batch)
            optimizer.zero_grad()
            (value_loss + policy_loss).backward()
            optimizer.step()
            total += (value_loss + policy_loss).item() * len(batch["mask"])
        history.append(total / len(order))
        value_right, best_chosen = accuracy(model, test_set)
        print(f"epoch {epoch}: loss {history[-1]:.3f}; held out: value {value_right:.3f}, best {best_chosen:.3f}")
    return history


if __name__ == "__main__":
    train(parse_config())
