"""The probe's supervised training (:mod:`experiments.probe`): a network design fitted to the exact labels of
:mod:`experiments.probe.positions` -- the policy target, the per-action values, the class-balanced value head and
the symmetry augmentation (:func:`train_supervised`, :func:`probe_loss`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator

import numpy as np
import torch as th
import torch.nn.functional as F

from agents.networks.designs import LoopedNetwork
from agents.networks.policy_value import (
    WDL_CLASSES,
    PolicyValueNetwork,
    device_of,
    masked_policy_cross_entropy,
)
from agents.tree.puct import encode_positions
from experiments.probe.positions import ProbeSet
from quarto_env.core import (
    Variant,
)
from quarto_env.errors import QuartoValueError
from quarto_env.symmetry import Symmetries

# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------
TARGETS = ("policy", "action-values", "both")
"""What the policy side trains on: ``policy`` -- uniform over the value-keeping candidates; ``action-values`` --
every candidate's exact W/D/L (a per-action head, ChessBench's target); ``both``."""

VALUE_HEADS = ("wdl", "scalar")
"""The value head: ``wdl`` -- three classes with class-balanced cross-entropy; ``scalar`` -- tanh, squared error
(AlphaZero's)."""


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
    target: str = "both"
    """One of :data:`TARGETS`."""
    value_head: str = "wdl"
    """One of :data:`VALUE_HEADS`."""
    random_iterations: bool = False
    """Run a looped network's block a random number of times per minibatch, 1 to twice its iterations, so that it
    learns a step it can repeat rather than a fixed count (others ignore it)."""


@dataclasses.dataclass(frozen=True)
class ClassWeights:
    """The class-balanced weights of the W/D/L losses, from the training set (index: value + 1)."""

    value: np.ndarray
    """``(3,)``: of the positions' values."""
    action_value: np.ndarray
    """``(3,)``: of the candidates' action values."""


def balanced_class_weights(classes: np.ndarray, count: int = WDL_CLASSES) -> np.ndarray:
    """``(count,)`` float32: ``n / (k * n_c)`` for each class ``c`` that occurs ``n_c`` times among the ``n``
    labels ``classes`` (``k`` classes occur), 0 for a class that does not occur -- so each occurring class weighs
    the same in total and "always the commonest class" is no longer a minimum of the loss."""
    counts = np.bincount(classes, minlength=count).astype(np.float64)
    present = counts > 0
    weights = np.zeros(count)
    weights[present] = len(classes) / (present.sum() * counts[present])
    return weights.astype(np.float32)


def class_weights(train: ProbeSet) -> ClassWeights:
    """The :class:`ClassWeights` of ``train``."""
    candidate_values = train.action_values[train.labels.candidates]
    return ClassWeights(
        balanced_class_weights(train.labels.values + 1), balanced_class_weights(candidate_values.astype(np.int64) + 1)
    )


def weighted_cross_entropy(logits: th.Tensor, classes: th.Tensor, weights: th.Tensor) -> th.Tensor:
    """``sum_i w[y_i] * CE_i / sum_i w[y_i]`` over the rows of ``logits`` ``(N, 3)`` with classes ``classes``."""
    return F.cross_entropy(logits, classes, weight=weights)


def train_supervised(
    network: PolicyValueNetwork, data: ProbeSet, variant: Variant, settings: TrainSettings
) -> list[float]:
    """Train ``network`` in place on ``data`` (:func:`probe_loss`, Adam, minibatches moved by random symmetries
    with ``settings.augment``). Returns the mean loss of each epoch."""
    th.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    symmetries = Symmetries(variant) if settings.augment else None
    weights = class_weights(data)
    optimizer = th.optim.Adam(network.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    loop_counts = _loop_counts(network, settings)
    network.train()
    losses = []
    for _ in range(settings.epochs):
        epoch = []
        order = rng.permutation(len(data))
        for start in range(0, len(data), settings.batch_size):
            batch = _moved(data.subset(order[start : start + settings.batch_size]), symmetries, rng)
            with loop_counts():
                loss = probe_loss(network, batch, variant, settings.target, weights)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch.append(loss.item())
        losses.append(float(np.mean(epoch)))
    network.eval()
    return losses


LoopCounts = Callable[[], contextlib.AbstractContextManager[None]]
"""A factory of contexts that set a looped network's iteration count for one minibatch."""


def _loop_counts(network: PolicyValueNetwork, settings: TrainSettings) -> LoopCounts:
    """A context manager factory: for a looped network trained with ``settings.random_iterations``, each context
    runs the block a random number of times (1 to twice its iterations; its own generator, so the minibatches
    are those of a fixed count) and restores the count on leaving; otherwise nothing."""
    body = network.body
    if not (settings.random_iterations and isinstance(body, LoopedNetwork)):
        return contextlib.nullcontext
    rng = np.random.default_rng(settings.seed + 1)
    trained = body.iterations

    @contextlib.contextmanager
    def random_count() -> Iterator[None]:
        body.iterations = int(rng.integers(1, 2 * trained + 1))
        try:
            yield
        finally:
            body.iterations = trained

    return random_count


def _moved(batch: ProbeSet, symmetries: Symmetries | None, rng: np.random.Generator) -> ProbeSet:
    """``batch`` with each position and its per-action labels moved by one random symmetry (unchanged without
    ``symmetries``)."""
    if symmetries is None:
        return batch
    labels = batch.labels
    boards = rng.integers(len(symmetries.images), size=len(batch))
    relabellings = rng.integers(len(symmetries.sources), size=len(batch))
    per_action = np.stack([labels.keeps, labels.candidates, batch.action_values], axis=2).astype(np.float32)
    moved = [symmetries.apply_chosen(labels.positions, per_action[:, :, k], boards, relabellings) for k in range(3)]
    positions = moved[0][0]
    keeps, candidates, action_values = (moved[k][1] for k in range(3))
    moved_labels = dataclasses.replace(labels, positions=positions, keeps=keeps > 0.5, candidates=candidates > 0.5)
    return ProbeSet(moved_labels, action_values.astype(np.int8), batch.mistake_depths)


def probe_loss(
    network: PolicyValueNetwork, batch: ProbeSet, variant: Variant, target: str, weights: ClassWeights
) -> th.Tensor:
    """The supervised loss of one minibatch: the value loss (class-balanced W/D/L cross-entropy, or the squared
    error of a scalar head), plus for ``target`` ``policy`` or ``both`` the cross-entropy to uniform over the
    value-keeping candidates, plus for ``action-values`` or ``both`` the class-balanced W/D/L cross-entropy of
    every candidate's action value."""
    labels = batch.labels
    planes, candidates = encode_positions(labels.positions, network.kind, variant)
    device = device_of(network)
    out = network.outputs(th.from_numpy(planes).to(device).float())
    values = th.from_numpy(labels.values).to(device)
    if out.value_logits is not None:
        loss = weighted_cross_entropy(out.value_logits, values + 1, th.from_numpy(weights.value).to(device))
    else:
        loss = ((out.value - values.float()) ** 2).mean()
    masks = th.from_numpy(candidates).to(device)
    if target in ("policy", "both"):
        keeps = th.from_numpy(labels.keeps).to(device).float()
        loss = loss + masked_policy_cross_entropy(out.logits, masks, keeps / keeps.sum(1, keepdim=True))
    if target in ("action-values", "both"):
        if out.action_value_logits is None:
            raise QuartoValueError("an action-value target needs a network with action_values=True")
        classes = th.from_numpy(batch.action_values).to(device).long()[masks] + 1
        loss = loss + weighted_cross_entropy(
            out.action_value_logits[masks], classes, th.from_numpy(weights.action_value).to(device)
        )
    return loss
