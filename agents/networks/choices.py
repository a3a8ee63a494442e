"""What a network is built from, by name, without torch: its kind, its design, its shape and its device.

A training config names these (``policy``, ``alphazero.network_design``, ``net_arch``, ``device``) and checks
them when it is read, which must not load torch (:mod:`experiments.training.config`);
:mod:`agents.networks.policy_value` builds the networks they name.
"""

from __future__ import annotations

from quarto_env.errors import QuartoValueError

POLICY_KINDS = ("mlp", "slots")
"""``mlp``: stable-baselines3's MLP on the flattened planes; ``slots``:
:class:`agents.networks.policy_value.SlotPolicy`."""

NETWORK_DESIGNS = ("slots", "hand", "transformer", "looped", "mlp")
"""The bodies of :class:`agents.networks.policy_value.PolicyValueNetwork`: ``slots`` (``SlotNetwork``, the default and
the design of every checkpoint whose metadata names none), ``hand`` (``HandSlotNetwork``), ``transformer``
(``TransformerNetwork``), ``looped`` (``LoopedNetwork``) and ``mlp`` (``FlatNetwork``)."""

EVALUATION_PATHS = ("fast", "forward", "onnx")
"""The paths of ``PolicyValueNetwork.evaluate`` (a config's ``alphazero.leaf_evaluation``): the fast path, the forward
pass's numbers bit for bit (the default); the forward pass itself; ONNX Runtime's CPU session (the ``onnx`` extra),
within about 1e-7 of them, not bit for bit (docs/alphazero.md, "Fast evaluation")."""

DEFAULT_DESIGN = "slots"
"""The design of a network whose config or checkpoint names none."""

MAX_WIDTH = 4096
"""The widest layer a config or a checkpoint may ask for (one such layer already holds millions of weights)."""

MAX_LAYERS = 8
"""The most hidden layers of an ``mlp`` network."""

DEVICES = ("auto", "cpu", "cuda")
"""The devices a network may run on: ``auto`` is ``cuda`` when torch sees a GPU, else ``cpu``."""

DEFAULT_DEVICE = "cpu"
"""Where networks run unless told otherwise (when a GPU could pay, not measured: docs/training.md)."""


def check_network(policy: object, net_arch: object) -> list[int]:
    """``net_arch`` as the layer sizes of a ``policy`` network: for ``mlp`` 1 to :data:`MAX_LAYERS` sizes, for
    ``slots`` one width, each an integer from 1 to :data:`MAX_WIDTH`; ``ValueError`` saying what is allowed."""
    if policy not in POLICY_KINDS:
        raise QuartoValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICY_KINDS)}")
    layers = 1 if policy == "slots" else MAX_LAYERS
    if (
        not isinstance(net_arch, list)
        or not 1 <= len(net_arch) <= layers
        or not all(type(size) is int and 1 <= size <= MAX_WIDTH for size in net_arch)
    ):
        shape = "[width]" if policy == "slots" else f"a list of 1 to {MAX_LAYERS} layer sizes"
        raise QuartoValueError(
            f"net_arch of a {policy} network must be {shape}, each 1 to {MAX_WIDTH}, got {net_arch!r}"
        )
    return net_arch


def check_device_name(name: str) -> None:
    """``ValueError`` in one line for a device that is none of :data:`DEVICES` (whether torch sees the GPU that
    ``cuda`` asks for is :func:`agents.networks.policy_value.resolve_device`'s check)."""
    if name not in DEVICES:
        raise QuartoValueError(f"unknown device {name!r}; allowed: {', '.join(DEVICES)}")
