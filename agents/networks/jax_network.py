"""The AlphaZero network of ``backend: jax`` (``experiments.training.alphazero_jax``), in equinox, and its
checkpoints: what ``az:RUN`` reads to play a JAX run on any host, the CPU included.

The network is the ``slots`` design of :class:`agents.networks.policy_value.PolicyValueNetwork` written for JAX: every
square and every piece embedded from its own observation channels with weights shared across slots, one round of
messages over the variant's groups, a pooled context, one shared head scoring each square (placing) or piece
(giving), a ``declare`` logit in the declaration variant, and a tanh value head on the context. Equinox because
its modules are plain pytrees: no framework state, and the leaves are the arrays a checkpoint stores.

A JAX checkpoint is the project's sealed zip (:func:`agents.networks.checkpoints.write_checkpoint`, ``algorithm:
alphazero``) marked ``backend: jax`` in its ``quarto.json``, its weights in ``network.npz``: plain arrays named by
their path in the module (``embed_square.weight``...), read back with ``allow_pickle=False`` into a freshly built
network of the shape its metadata describes. The torch loaders refuse it in one line, and :func:`load_network`
refuses a torch checkpoint alike (:func:`agents.networks.checkpoints.check_backend`).

:class:`JaxEvaluator` runs a network on the CPU for the project's own search (:class:`agents.tree.puct.PUCTSearch`,
the ``az`` agent): it has the ``kind`` and the ``evaluate(planes)`` that search reads, on batches padded to a
power of two so that jit compiles a handful of shapes.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from agents.networks.checkpoints import (
    CheckpointHeader,
    checkpoint_metadata,
    entry_bytes,
    weights_fit,
    write_checkpoint,
)
from quarto_env.core import NUM_ACTIONS, NUM_SQUARES, Variant
from quarto_env.observation import PLACING, ObservationKind, observation_kind

ALGORITHM = "alphazero"
BACKEND = "jax"
"""The ``backend`` a JAX checkpoint records in its ``quarto.json`` (a checkpoint without one is torch's)."""
NETWORK_ENTRY = "network.npz"
DESIGN = "slots"
"""The one network design of the JAX backend."""
ILLEGAL_LOGIT = -1e9
"""The logit of an illegal action: no softmax gives it weight, and no search expands it."""


# ---------------------------------------------------------------------------------------------------------
# The network
# ---------------------------------------------------------------------------------------------------------
class _SlotHead(eqx.Module):
    """One logit per slot from the slot's embedding and the shared context, through one hidden layer."""

    slot: eqx.nn.Linear
    context: eqx.nn.Linear
    out: eqx.nn.Linear

    def __init__(self, width: int, key: jax.Array) -> None:
        keys = jax.random.split(key, 3)
        self.slot = eqx.nn.Linear(width, width, key=keys[0])
        self.context = eqx.nn.Linear(width, width, use_bias=False, key=keys[1])
        self.out = eqx.nn.Linear(width, 1, key=keys[2])

    def __call__(self, slots: jax.Array, context: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(jax.vmap(self.slot)(slots) + self.context(context))
        return jax.vmap(self.out)(hidden)[:, 0]


class SlotsNetwork(eqx.Module):
    """Action logits ``(num_actions,)`` and a value in [-1, 1] for the player to move, from one position's planes
    ``(channels, 16)``; ``jax.vmap`` it for a batch (:func:`batched`)."""

    embed_square: eqx.nn.Linear
    embed_piece: eqx.nn.Linear
    group_update: eqx.nn.Linear
    context_in: eqx.nn.Linear
    context_out: eqx.nn.Linear
    score_square: _SlotHead
    score_piece: _SlotHead
    score_declare: eqx.nn.Linear | None
    value_hidden: eqx.nn.Linear
    value_out: eqx.nn.Linear
    observation: str = eqx.field(static=True)
    groups: tuple[int, ...] = eqx.field(static=True)
    width: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)

    def __init__(self, observation: str, groups: tuple[int, ...], width: int, num_actions: int, key: jax.Array):
        channels = observation_kind(observation).num_channels
        keys = jax.random.split(key, 10)
        self.embed_square = eqx.nn.Linear(channels, width, key=keys[0])
        self.embed_piece = eqx.nn.Linear(channels, width, key=keys[1])
        self.group_update = eqx.nn.Linear(width, width, key=keys[2])
        self.context_in = eqx.nn.Linear(3 * width, width, key=keys[3])
        self.context_out = eqx.nn.Linear(width, width, key=keys[4])
        self.score_square = _SlotHead(width, keys[5])
        self.score_piece = _SlotHead(width, keys[6])
        self.score_declare = eqx.nn.Linear(width, 1, key=keys[7]) if num_actions > NUM_ACTIONS else None
        self.value_hidden = eqx.nn.Linear(width, width, key=keys[8])
        self.value_out = eqx.nn.Linear(width, 1, key=keys[9])
        self.observation, self.groups, self.width, self.num_actions = observation, tuple(groups), width, num_actions

    def __call__(self, planes: jax.Array) -> tuple[jax.Array, jax.Array]:
        kind = observation_kind(self.observation)
        planes = planes.astype(jnp.float32)
        slots = planes.T  # (16, C): row i describes square i and piece i
        square_mask, piece_mask = _channel_masks(kind)
        incidence = jnp.asarray([[g >> s & 1 for s in range(NUM_SQUARES)] for g in self.groups], jnp.float32)
        squares = jax.nn.relu(jax.vmap(self.embed_square)(slots * square_mask))  # (16, W)
        pieces = jax.nn.relu(jax.vmap(self.embed_piece)(slots * piece_mask))
        groups = jax.nn.relu(jax.vmap(self.group_update)(incidence @ squares))  # each group sums its squares
        squares = squares + incidence.T @ groups  # each square adds back what its groups saw
        pooled = jnp.concatenate([squares.mean(0), squares.max(0), pieces.mean(0)])
        context = jax.nn.relu(self.context_out(jax.nn.relu(self.context_in(pooled))))
        placing = planes[PLACING, 0]
        logits = placing * self.score_square(squares, context) + (1 - placing) * self.score_piece(pieces, context)
        if self.score_declare is not None:
            logits = jnp.concatenate([logits, self.score_declare(context)])
        value = jnp.tanh(self.value_out(jax.nn.relu(self.value_hidden(context)))[0])
        return logits, value

    def describe(self) -> dict[str, Any]:
        """What rebuilds this network (:func:`network_from_description`): stored in checkpoints."""
        return {
            "observation": self.observation,
            "groups": list(self.groups),
            "width": self.width,
            "design": DESIGN,
            "num_actions": self.num_actions,
        }


def _channel_masks(kind: ObservationKind) -> tuple[np.ndarray, np.ndarray]:
    """The 0/1 masks of the channels a square slot and a piece slot read."""
    masks = np.zeros((2, kind.num_channels), np.float32)
    masks[0, kind.square_channels] = masks[1, kind.piece_channels] = 1.0
    return masks[0], masks[1]


def new_network(kind: ObservationKind, variant: Variant, width: int, seed: int) -> SlotsNetwork:
    """A freshly initialised network for ``variant``'s groups and actions, drawn from ``seed``."""
    return SlotsNetwork(kind.name, tuple(variant.groups), width, variant.num_actions, jax.random.key(seed))


def batched(network: SlotsNetwork, planes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``network`` over a batch of planes ``(B, channels, 16)``: logits ``(B, num_actions)``, values ``(B,)``."""
    return jax.vmap(network)(planes)  # type: ignore[no-any-return]


def masked_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """``logits`` with every illegal action at :data:`ILLEGAL_LOGIT`."""
    return jnp.where(legal, logits, ILLEGAL_LOGIT)


# ---------------------------------------------------------------------------------------------------------
# The weights as plain arrays
# ---------------------------------------------------------------------------------------------------------
def _leaf_name(path: tuple[Any, ...]) -> str:
    return ".".join(str(getattr(part, "name", getattr(part, "idx", part))) for part in path)


def weight_arrays(network: Any) -> dict[str, np.ndarray]:
    """The arrays of ``network`` (any pytree of arrays: a module, an optimizer state) by their path, on the host."""
    leaves = jax.tree_util.tree_flatten_with_path(eqx.filter(network, eqx.is_array))[0]
    return {_leaf_name(path) or "value": np.asarray(jax.device_get(leaf)) for path, leaf in leaves}


def with_weights(template: Any, arrays: dict[str, np.ndarray], what: str) -> Any:
    """``template`` with every array replaced by the one of ``arrays`` of its path; ``ValueError`` in one line for
    a missing, extra or misshapen one (``what`` names them)."""
    params, static = eqx.partition(template, eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
    names = [_leaf_name(path) or "value" for path, _ in leaves]
    if set(names) != set(arrays):
        missing, extra = sorted(set(names) - set(arrays)), sorted(set(arrays) - set(names))
        raise ValueError(f"{what} do not fit: missing {missing}, unexpected {extra}")
    loaded = []
    for name, (_, leaf) in zip(names, leaves, strict=True):
        array = arrays[name]
        if array.shape != leaf.shape or array.dtype != leaf.dtype:
            raise ValueError(f"{what}: {name} is {array.dtype}{list(array.shape)}, not {leaf.dtype}{list(leaf.shape)}")
        loaded.append(jnp.asarray(array))
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, loaded), static)


def arrays_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """``arrays`` as an ``.npz`` (read back by :func:`read_arrays`)."""
    out = io.BytesIO()
    np.savez(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


def read_arrays(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz``, read as data (``allow_pickle=False``)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


# ---------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------
def save_checkpoint(
    path: Path,
    network: SlotsNetwork,
    header: CheckpointHeader,
    metadata: dict[str, Any],
    extras: dict[str, bytes] | None = None,
) -> None:
    """Write ``network`` (and ``extras``: the optimizer, the replay buffer) atomically to the zip ``path``, marked
    ``backend: jax``."""
    metadata = {"backend": BACKEND, "network": network.describe(), "jax_versions": _versions(), **metadata}
    entries = {NETWORK_ENTRY: arrays_bytes(weight_arrays(network)), **(extras or {})}
    write_checkpoint(path, ALGORITHM, header, metadata, entries)


def _versions() -> dict[str, str]:
    """The versions of the JAX libraries a checkpoint was written with (beside ``versions``, torch's and the rest)."""
    import importlib.metadata

    found = {}
    for name in ("jax", "jaxlib", "equinox", "optax", "mctx", "pgx"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "unknown"
    return found


def network_from_description(shape: Any, variant: Variant) -> SlotsNetwork:
    """The untrained network that :meth:`SlotsNetwork.describe` described as ``shape``; ``ValueError`` otherwise."""
    if not isinstance(shape, dict):
        raise ValueError(f"its network entry is {shape!r}, not a mapping with a width")
    if shape.get("design", DESIGN) != DESIGN:
        raise ValueError(f"network design {shape.get('design')!r} is not {DESIGN!r}")
    kind = observation_kind(shape["observation"])
    network = new_network(kind, variant, int(shape["width"]), 0)
    if list(network.groups) != list(shape["groups"]) or network.num_actions != int(shape["num_actions"]):
        raise ValueError("its groups or actions are not those of its rule variant")
    return network


def load_network(
    path: str | Path, variant: Variant | None = None, metadata: dict[str, Any] | None = None
) -> tuple[SlotsNetwork, dict[str, Any]]:
    """The network of a JAX ``alphazero`` checkpoint (read as data; a run folder means its final checkpoint, else
    its latest) and its metadata; :class:`CheckpointError` in one line for a missing or damaged file, another
    algorithm's or backend's checkpoint, or one trained for another rule variant."""
    path, metadata, trained = checkpoint_metadata(path, ALGORITHM, variant, metadata, backend=BACKEND)
    with weights_fit(path, NETWORK_ENTRY):
        network = network_from_description(metadata.get("network"), trained)
        network = with_weights(network, read_arrays(entry_bytes(path, NETWORK_ENTRY)), "its weights")
    return network, metadata


# ---------------------------------------------------------------------------------------------------------
# On the CPU, for the project's search
# ---------------------------------------------------------------------------------------------------------
class JaxEvaluator:
    """A network as the evaluator of :class:`agents.tree.puct.PUCTSearch` (its ``kind`` and ``evaluate``), on the
    CPU: the ``az`` agent and the evaluations of ``backend: jax`` play it with the project's search."""

    def __init__(self, network: SlotsNetwork) -> None:
        cpu = jax.devices("cpu")[0]
        self.network = jax.device_put(network, cpu)
        self.kind = observation_kind(network.observation)
        self._forward = jax.jit(batched)

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits of the 16 slot actions ``(B, 16)`` and values ``(B,)`` of ``int8`` planes, as float32 arrays
        (the search plays the declaration by its rules, not by the network)."""
        count = len(planes)
        size = 1 << max(count - 1, 0).bit_length()  # a power of two: a few shapes to compile
        padded = np.zeros((size, *planes.shape[1:]), np.int8)
        padded[:count] = planes
        logits, value = self._forward(self.network, jax.device_put(padded, jax.devices("cpu")[0]))
        return np.asarray(logits[:count, :NUM_ACTIONS], np.float32), np.asarray(value[:count], np.float32)
