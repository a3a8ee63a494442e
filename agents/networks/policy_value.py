"""The networks of the trained agents, in plain torch (no stable-baselines3, no ray): the slots network and the
heads each algorithm puts on it.

- :class:`SlotNetwork`: the shared body (below); SB3's ``slots`` policy (:mod:`agents.ppo`) uses it as its
  ``mlp_extractor``.
- :class:`PolicyValueNetwork`: the body with a tanh value head, for AlphaZero (:mod:`agents.alphazero`).
- :class:`ActorCritic`: the body (or two MLPs) with a linear value head, on the flat planes RLlib feeds
  (:mod:`agents.rllib`).

Devices
-------
Training and every agent that runs a network take a ``device``: ``cpu`` (the default), ``cuda``, or ``auto`` (cuda
when torch sees a GPU, else cpu); :func:`resolve_device` is the one place that turns the name into a torch device
and refuses ``cuda`` on a machine without one. The helpers below move their inputs to the network's device and
hand numpy arrays back, so callers stay device-free; checkpoints are written from CPU copies and read onto the
CPU first (:mod:`agents.networks.checkpoints`), so a checkpoint trained on a GPU plays on a CPU and the reverse.

The ``slots`` policy
--------------------
The 16 squares and the 16 pieces are interchangeable *slots*: what matters about square 5 is what lies in its
groups, not that it is number 5. :class:`SlotNetwork` therefore embeds every square and every piece from its
own observation channels with weights shared across slots, lets each square read the groups through it (one
round of message passing over the variant's groups), pools a context vector for the value, and scores each
action from the slot it names with one shared head. A plain MLP must learn "take the win on square s"
sixteen times over; this network learns it once. The other designs of :class:`PolicyValueNetwork`'s body
(``hand``, ``transformer``, ``looped``, ``mlp``) and the pieces all bodies share live in
:mod:`agents.networks.designs`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch as th
import torch.nn.functional as F
from torch import nn

from agents.networks.choices import (  # noqa: F401 -- the names a config checks without torch, re-exported
    DEFAULT_DESIGN,
    DEFAULT_DEVICE,
    DEVICES,
    EVALUATION_PATHS,
    MAX_LAYERS,
    MAX_WIDTH,
    NETWORK_DESIGNS,
    POLICY_KINDS,
    check_device_name,
    check_network,
)
from agents.networks.designs import (
    DEFAULT_ITERATIONS,
    FlatNetwork,
    HandSlotNetwork,
    LoopedNetwork,
    SlotHead,
    TransformerNetwork,
    hidden_layers,
    masked_linear,
    phase_logits,
    register_slot_buffers,
)
from quarto_env.core import NUM_ACTIONS, NUM_SQUARES, Variant
from quarto_env.errors import QuartoValueError
from quarto_env.observation import PLACING, ObservationKind

if TYPE_CHECKING:
    from agents.networks.onnx_runtime import OnnxEvaluator

FAST_MIN_BATCH = 48
"""The smallest batch :meth:`PolicyValueNetwork.evaluate` runs on its fast path (:meth:`SlotNetwork.infer`): on
smaller ones the forward pass's fewer calls take less time (docs/alphazero.md, "Fast evaluation")."""


def resolve_device(name: str) -> th.device:
    """The torch device ``name`` (one of :data:`DEVICES`) means on this machine; ``ValueError`` in one line for
    another name, or for ``cuda`` where torch sees no GPU."""
    check_device_name(name)
    if name == "cpu" or (name == "auto" and not th.cuda.is_available()):
        return th.device("cpu")
    if not th.cuda.is_available():
        reason = "this torch build has no CUDA support" if th.version.cuda is None else "no CUDA GPU is visible"
        raise QuartoValueError(f"device 'cuda' needs a GPU, but torch sees none ({reason}); allowed here: auto, cpu")
    return th.device("cuda")


def device_of(network: nn.Module) -> th.device:
    """The device ``network``'s weights are on."""
    return next(network.parameters()).device


class SlotNetwork(nn.Module):
    """Actor-critic body over square and piece slots; plugs in as a policy's ``mlp_extractor``.

    ``forward`` returns ``(action logits, value features)``: the logits are final (one per action), the
    value features go through the policy's linear value head.
    """

    square_channels: th.Tensor
    piece_channels: th.Tensor
    incidence: th.Tensor

    def __init__(
        self, kind: ObservationKind, groups: list[int], num_actions: int, width: int, outputs: int = 1
    ) -> None:
        super().__init__()
        num_channels = kind.num_channels
        register_slot_buffers(self, kind, groups)
        self.num_channels = num_channels
        self.has_declare = num_actions > NUM_ACTIONS
        self.latent_dim_pi = num_actions
        self.latent_dim_vf = width

        self.embed_square = nn.Linear(num_channels, width)
        self.embed_piece = nn.Linear(num_channels, width)
        self.group_update = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.context = nn.Sequential(nn.Linear(3 * width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.score_square = SlotHead(width, outputs)
        self.score_piece = SlotHead(width, outputs)
        self.score_declare = nn.Linear(width, 1)

    def _encode(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        planes = features.view(-1, self.num_channels, NUM_SQUARES)
        slots = planes.transpose(1, 2)  # (B, 16, C): row i describes square i and piece i
        squares = th.relu(masked_linear(self.embed_square, slots, self.square_channels))  # (B, 16, W)
        pieces = th.relu(masked_linear(self.embed_piece, slots, self.piece_channels))  # (B, 16, W)
        # Each group sums its four squares; each square adds back what its groups saw.
        groups = self.group_update(self.incidence @ squares)  # (B, G, W)
        squares = squares + self.incidence.T @ groups
        context = self.context(th.cat([squares.mean(1), squares.amax(1), pieces.mean(1)], dim=1))
        placing = planes[:, PLACING, 0:1]
        return squares, pieces, context, placing

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        squares, pieces, context, placing = self._encode(features)
        return self._logits(squares, pieces, context, placing), context

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        squares, pieces, context, placing = self._encode(features)
        return self._logits(squares, pieces, context, placing)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self._encode(features)[2]

    def _logits(self, squares: th.Tensor, pieces: th.Tensor, context: th.Tensor, placing: th.Tensor) -> th.Tensor:
        logits = phase_logits(placing, self.score_square(squares, context), self.score_piece(pieces, context))
        if self.has_declare:
            logits = th.cat([logits, self.score_declare(context)], dim=1)
        return logits

    def infer(self, planes: np.ndarray, workspace: Workspace) -> tuple[th.Tensor, th.Tensor]:
        """What :meth:`forward` returns for a batch of planes ``(B, C, 16)`` on the CPU whose placing plane is 0 or 1
        in every row (as the env writes them), bit for bit on MKL, in less time (docs/alphazero.md, "Fast
        evaluation"); inference only, inside ``torch.inference_mode``, without the ``declare`` action. The same
        products in the same order, with less work around them: each embedding over its own channels only (a masked
        channel's products are zeros, which leave the sums as they are), the biases of a product as the weights of
        an input column of ones (added last, as ``addmm`` adds them), each position scored by the one head its phase
        reads (the other head's logits are multiplied by 0 in :func:`phase_logits`), in-place activations, and the
        large intermediates in ``workspace``'s buffers: fresh ones cost hundreds of page faults a pass."""
        batch, width = len(planes), self.latent_dim_vf
        square_slots, piece_slots, squares, pieces, summed, seen, squares_after, chosen, hidden, scores = (
            workspace.views(batch, self._views)
        )
        for slots, layer, channels, out in (
            (square_slots, self.embed_square, self.square_channel_numbers, squares),
            (piece_slots, self.embed_piece, self.piece_channel_numbers, pieces),
        ):
            slots[..., :-1].copy_(th.from_numpy(planes[:, channels]).transpose(1, 2))
            weights = th.cat([layer.weight[:, channels], layer.bias[:, None]], 1)
            th.mm(slots.view(batch * NUM_SQUARES, -1), weights.T, out=out.view(-1, width)).relu_()
        th.matmul(self.incidence, squares, out=summed)
        update = cast(nn.Linear, self.group_update[0])
        th.addmm(update.bias, summed.view(-1, width), update.weight.T, out=seen.view(-1, width)).relu_()
        squares = th.matmul(self.incidence.T, seen, out=squares_after).add_(squares)
        context = apply_layers(self.context, th.cat([squares.mean(1), squares.amax(1), pieces.mean(1)], dim=1))
        # Each head's rows, placing ones first, gathered into one buffer and scored in another.
        giving = planes[:, PLACING, 0] == 0
        order = np.argsort(giving, kind="stable")
        placed, rows, phase = (
            int(batch - giving.sum()),
            th.from_numpy(order),
            th.from_numpy(giving[order].astype(np.int64)),
        )
        th.index_select(squares, 0, rows[:placed], out=chosen[:placed])
        th.index_select(pieces, 0, rows[placed:], out=chosen[placed:])
        heads, split = (self.score_square, self.score_piece), placed * NUM_SQUARES
        for head, part in zip(heads, (slice(0, split), slice(split, None)), strict=True):
            th.addmm(head.slot.bias, chosen.view(-1, width)[part], head.slot.weight.T, out=hidden[part])
        # The heads' context layers over every row, as forward (a row's product is then its own), then each row's.
        terms = th.mm(context, th.cat([head.context.weight for head in heads]).T).view(batch, 2, width)[rows, phase]
        hidden.view(batch, NUM_SQUARES, width).add_(terms.unsqueeze(1)).relu_()
        for head, part in zip(heads, (slice(0, split), slice(split, None)), strict=True):
            th.addmm(head.out.bias, hidden[part], head.out.weight.T, out=scores[part])
        return th.empty(batch, NUM_SQUARES).index_copy_(0, rows, scores.view(batch, NUM_SQUARES)), context

    @functools.cached_property
    def square_channel_numbers(self) -> np.ndarray:
        """The channels a square slot reads (where :attr:`square_channels` is 1)."""
        return np.flatnonzero(self.square_channels.numpy())

    @functools.cached_property
    def piece_channel_numbers(self) -> np.ndarray:
        """The channels a piece slot reads (where :attr:`piece_channels` is 1)."""
        return np.flatnonzero(self.piece_channels.numpy())

    def _views(self, workspace: Workspace, batch: int) -> tuple[th.Tensor, ...]:
        """The buffers :meth:`infer` uses for ``batch`` positions: the square and piece slots (each with its column
        of ones), their embeddings, the groups' sums and states, the squares after the round, the heads' rows (over
        the groups', done with by then), their hidden layers (over the square embeddings') and their scores."""
        width, groups = self.latent_dim_vf, len(self.incidence)
        slots = []
        for name, channels in (
            ("square slots", self.square_channel_numbers),
            ("piece slots", self.piece_channel_numbers),
        ):
            slots.append(workspace.take(name, batch, NUM_SQUARES, len(channels) + 1))
            slots[-1][..., -1] = 1.0
        summed, seen = workspace.take("groups", 2, batch, groups, width)
        return (
            *slots,
            workspace.take("squares", batch, NUM_SQUARES, width),
            workspace.take("pieces", batch, NUM_SQUARES, width),
            summed,
            seen,
            workspace.take("squares after", batch, NUM_SQUARES, width),
            workspace.take("groups", batch, NUM_SQUARES, width),
            workspace.take("squares", batch * NUM_SQUARES, width),
            workspace.take("scores", batch * NUM_SQUARES, 1),
        )


def apply_layers(layers: nn.Sequential, x: th.Tensor) -> th.Tensor:
    """``layers(x)``, the same numbers, for a stack of linear layers and ReLUs run at inference without the modules'
    calls, whose overhead is a large share of a pass over a small batch."""
    for layer in layers:
        if isinstance(layer, nn.Linear):
            x = F.linear(x, layer.weight, layer.bias)
        elif isinstance(layer, nn.ReLU):
            x = th.relu(x)
        else:
            x = layer(x)
    return x


class Workspace:
    """Buffers that one network's evaluations reuse (:meth:`SlotNetwork.infer`), as large as the largest batch so
    far: the tensors a pass at 128 leaves would allocate afresh are freed to the OS by glibc after the pass and
    faulted in again page by page on the next."""

    def __init__(self) -> None:
        self.buffers: dict[str, th.Tensor] = {}
        self._views: dict[int, tuple[th.Tensor, ...]] = {}

    def take(self, name: str, *shape: int) -> th.Tensor:
        """A contiguous float32 tensor of ``shape`` over the start of buffer ``name`` (made larger as needed): two
        takes of one name share memory, so a buffer serves again once what it held is used."""
        size = math.prod(shape)
        buffer = self.buffers.get(name)
        if buffer is None or len(buffer) < size:
            buffer = self.buffers[name] = th.empty(size)
            self._views.clear()  # they hold the smaller buffers
        return buffer[:size].view(shape)

    def views(self, batch: int, make: Callable[[Workspace, int], tuple[th.Tensor, ...]]) -> tuple[th.Tensor, ...]:
        """``make(self, batch)``: views of the buffers for a batch of ``batch``, made once (again after a buffer
        grew)."""
        views = self._views.get(batch)
        if views is None:
            views = make(self, batch)
            self._views[batch] = views
        return views


class RowWeights(nn.Module):
    """Networks of one architecture made of linear layers, run as one: row ``i`` of a batch goes through network
    ``which[i]``'s weights. Every ``nn.Linear`` of a copy of the first network is swapped for a
    :class:`_RowLinear` holding that layer's weights from all of them, stacked; so one forward pass does the work
    of one pass per network, without ``torch.func.vmap``'s overhead on small batches (a snapshot opponent moves
    in a few dozen games at a time). The weights are copied: later changes to the networks are not seen.
    ``ValueError`` for a network with parameters outside linear layers.
    """

    def __init__(self, networks: Sequence[nn.Module]) -> None:
        super().__init__()
        self.network = copy.deepcopy(networks[0])
        self.layers: list[_RowLinear] = []
        for name, module in list(self.network.named_modules()):
            if isinstance(module, nn.Linear):
                layer = _RowLinear([net.get_submodule(name) for net in networks])  # type: ignore[misc]
                self.network.set_submodule(name, layer)
                self.layers.append(layer)
        left = [name for name, _ in self.network.named_parameters()]
        if left:
            raise QuartoValueError(f"RowWeights stacks linear layers only; these parameters are not in one: {left}")

    def forward(self, x: th.Tensor, which: np.ndarray) -> th.Tensor:
        rows = th.as_tensor(which, dtype=th.long)
        for layer in self.layers:
            layer.rows = rows
        return self.network(x)


class _RowLinear(nn.Module):
    """One linear layer of many networks: input row ``i`` is multiplied by the weights of network ``rows[i]``."""

    weight: th.Tensor
    bias: th.Tensor | None

    def __init__(self, layers: list[nn.Linear]) -> None:
        super().__init__()
        self.register_buffer("weight", th.stack([layer.weight.detach() for layer in layers]))  # (N, out, in)
        has_bias = layers[0].bias is not None
        self.register_buffer("bias", th.stack([layer.bias.detach() for layer in layers]) if has_bias else None)
        self.rows = th.zeros(0, dtype=th.long)

    def forward(self, x: th.Tensor) -> th.Tensor:
        rows = x.reshape(len(self.rows), -1, x.shape[-1])  # (B, anything, in)
        out = rows @ self.weight[self.rows].transpose(1, 2)
        if self.bias is not None:
            out = out + self.bias[self.rows].unsqueeze(1)
        return out.reshape(*x.shape[:-1], out.shape[-1])


def use_one_thread() -> None:
    """Run torch on one thread, as the agents that load a checkpoint do: their forward passes are on a batch of one
    position, which gains nothing from more threads; they only wait on each other (docs/alphazero.md)."""
    th.set_num_threads(1)


def choose_actions(logits: th.Tensor, masks: np.ndarray, deterministic: bool) -> np.ndarray:
    """The most likely legal action of each row (``deterministic``), or one sampled from the masked softmax
    (by the Gumbel-max trick: the argmax of the logits plus Gumbel noise)."""
    masked = logits.masked_fill(~th.as_tensor(masks, dtype=th.bool, device=logits.device), -th.inf)
    if not deterministic:
        masked = masked - th.log(-th.log(th.rand_like(masked)))
    return masked.argmax(dim=-1).cpu().numpy()


WDL_CLASSES = 3
"""The classes of a W/D/L head: 0 loss, 1 draw, 2 win (the exact value plus one)."""


@dataclasses.dataclass(frozen=True)
class NetworkOutputs:
    """Everything a :class:`PolicyValueNetwork` computes for a batch of ``B`` positions."""

    logits: th.Tensor
    """``(B, 16)``: the policy's action logits (before masking)."""
    value: th.Tensor
    """``(B,)`` in [-1, 1]: the value for the player to move (with a W/D/L head, P(win) - P(loss))."""
    value_logits: th.Tensor | None
    """``(B, 3)``: the W/D/L head's logits (loss, draw, win), or ``None`` without one."""
    action_value_logits: th.Tensor | None
    """``(B, 16, 3)``: per action, W/D/L logits of its exact value for the player to move, or ``None``."""


class PolicyValueNetwork(nn.Module):
    """Action logits and a value in [-1, 1] for the player to move, from observation planes.

    The body is ``design`` (:data:`NETWORK_DESIGNS`): the slots network (:class:`SlotNetwork`, shared weights over
    square and piece slots, one logit per slot), the same with the piece in hand reaching every slot
    (:class:`HandSlotNetwork`), attention over square, piece and hand tokens (:class:`TransformerNetwork`), or a
    weight-tied loop of the hand body's group round (:class:`LoopedNetwork`, ``iterations`` of it). Its context
    vector feeds a small value head: one tanh output, or with ``wdl`` three W/D/L logits (the value is then
    P(win) - P(loss)). With ``action_values`` the body also scores every action's W/D/L (ChessBench's action-value
    target). ``ValueError`` in one line for an unknown design.
    """

    def __init__(
        self,
        kind: ObservationKind,
        groups: list[int],
        width: int,
        design: str = DEFAULT_DESIGN,
        wdl: bool = False,
        action_values: bool = False,
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        super().__init__()
        if design not in NETWORK_DESIGNS:
            raise QuartoValueError(f"unknown network design {design!r}; allowed: {', '.join(NETWORK_DESIGNS)}")
        self.kind = kind
        self.groups = list(groups)
        self.width = width
        self.design = design
        self.wdl = wdl
        self.action_values = action_values
        outputs = 1 + WDL_CLASSES if action_values else 1
        self.body = _body(design, kind, self.groups, width, outputs, iterations)
        self.value_head = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, WDL_CLASSES if wdl else 1))
        self.evaluation_path = "fast"
        """The path of :meth:`evaluate` when it names none (:data:`EVALUATION_PATHS`): a choice of the process that
        runs the network, not part of it (checkpoints do not keep it)."""

    def outputs(self, planes: th.Tensor) -> NetworkOutputs:
        """Every head's outputs for float planes of shape ``(B, channels, 16)``."""
        actions, context = self.body(planes)
        logits, action_value_logits = (actions[..., 0], actions[..., 1:]) if self.action_values else (actions, None)
        head = self.value_head(context)
        return NetworkOutputs(logits, self._value(head), head if self.wdl else None, action_value_logits)

    def _value(self, head: th.Tensor) -> th.Tensor:
        """The value ``(B,)`` of the value head's outputs: P(win) - P(loss) of W/D/L logits, or the tanh."""
        if self.wdl:
            probabilities = th.softmax(head, dim=1)
            return probabilities[:, 2] - probabilities[:, 0]
        return th.tanh(head.squeeze(1))

    def forward(self, planes: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """``(logits, value)`` for float planes of shape ``(B, channels, 16)``: logits ``(B, 16)``, value ``(B,)``."""
        out = self.outputs(planes)
        return out.logits, out.value

    def evaluate(self, planes: np.ndarray, path: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Logits and values of ``int8`` planes, as float32 arrays: the evaluator :class:`PUCTSearch` calls
        (the planes go to the network's device, the results come back). ``path`` (:data:`EVALUATION_PATHS`; by
        default the network's :attr:`evaluation_path`): ``fast`` runs a batch of at least :data:`FAST_MIN_BATCH` of a
        ``slots`` network on the CPU on :meth:`SlotNetwork.infer`, the same numbers in less time; ``onnx`` runs such
        a batch on ONNX Runtime (:mod:`agents.networks.onnx_runtime`, the ``onnx`` extra), close to those numbers
        but not bit for bit; ``forward`` runs :meth:`forward` always, the reference that ``quarto bench az`` and the
        tests hold the others to. Other batches and networks run :meth:`forward` on every path. ``ValueError`` in one
        line for another path."""
        path = path or self.evaluation_path
        if path not in EVALUATION_PATHS:
            raise QuartoValueError(f"unknown evaluation path {path!r}; allowed: {', '.join(EVALUATION_PATHS)}")
        if path == "onnx" and self._infers(planes):
            return _onnx_evaluator(self)(planes)  # numpy in and out: no torch call on this path
        with th.inference_mode():
            if path == "fast" and self._infers(planes):
                logits, context = cast(SlotNetwork, self.body).infer(planes, _workspace(self))
                value = self._value(apply_layers(self.value_head, context))
            else:
                logits, value = self(th.from_numpy(planes).to(device_of(self)).float())
        return logits.cpu().numpy(), value.cpu().numpy()

    def _infers(self, planes: np.ndarray) -> bool:
        """Whether :meth:`SlotNetwork.infer` computes what :meth:`forward` does for ``planes``, and sooner: a
        ``slots`` body on the CPU without action values, and at least :data:`FAST_MIN_BATCH` of this network's
        ``int8`` planes, each placing or giving."""
        # Few and cheap calls: this runs before every leaf batch, right after the previous batch's products have
        # left the caches cold, where a walk over the parameters (device_of) and four numpy calls cost a visible
        # share of the batch (docs/results.md, "A sixth look").
        if not isinstance(self.body, SlotNetwork) or self.action_values or not self.value_head[0].weight.is_cpu:
            return False
        if planes.dtype != np.int8 or planes.ndim != 3 or planes.shape[1:] != self.kind.shape:
            return False
        return len(planes) >= FAST_MIN_BATCH and not (planes[:, PLACING, 0] & ~1).any()  # 0 or 1 in every row

    def losses(
        self, planes: np.ndarray, masks: np.ndarray, policy: np.ndarray, value: np.ndarray
    ) -> tuple[th.Tensor, th.Tensor]:
        """``(policy loss, value loss)`` of a minibatch (numpy arrays, moved to the network's device): the
        cross-entropy of the masked policy to the ``policy`` targets (rows summing to 1 over ``masks``) and the
        squared error of the value to ``value``, each a batch mean -- what AlphaZero's training minimises."""
        device = device_of(self)
        logits, predicted = self(th.from_numpy(planes).to(device).float())
        policy_loss = masked_policy_cross_entropy(
            logits, th.from_numpy(masks).to(device), th.from_numpy(policy).to(device)
        )
        value_loss = ((predicted - th.from_numpy(value).to(device).float()) ** 2).mean()
        return policy_loss, value_loss

    def describe(self) -> dict[str, Any]:
        """What rebuilds this network (:func:`network_from_description`): stored in checkpoints."""
        shape = {"observation": self.kind.name, "groups": self.groups, "width": self.width, "design": self.design}
        shape.update(wdl=self.wdl, action_values=self.action_values)
        if isinstance(self.body, LoopedNetwork):
            shape["iterations"] = self.body.iterations
        return shape


_WORKSPACES: weakref.WeakKeyDictionary[nn.Module, Workspace] = weakref.WeakKeyDictionary()
"""The :class:`Workspace` of each network that has evaluated (kept off the network: copies and pickles of it
stay without)."""


def _workspace(network: nn.Module) -> Workspace:
    """``network``'s :class:`Workspace`, made on its first use."""
    workspace = _WORKSPACES.get(network)
    if workspace is None:
        workspace = _WORKSPACES[network] = Workspace()
    return workspace


_ONNX_EVALUATORS: weakref.WeakKeyDictionary[nn.Module, OnnxEvaluator] = weakref.WeakKeyDictionary()
"""The ONNX Runtime session of each network that has evaluated on the ``onnx`` path (kept off the network, as
:data:`_WORKSPACES`)."""


def _onnx_evaluator(network: PolicyValueNetwork) -> OnnxEvaluator:
    """``network``'s :class:`OnnxEvaluator`, made on its first use: :class:`~quarto_env.errors.MissingExtra` naming
    the ``onnx`` extra where it is not installed."""
    evaluator = _ONNX_EVALUATORS.get(network)
    if evaluator is None:
        from agents.networks.onnx_runtime import OnnxEvaluator

        evaluator = _ONNX_EVALUATORS[network] = OnnxEvaluator(network)
    return evaluator


def masked_policy_cross_entropy(logits: th.Tensor, masks: th.Tensor, target: th.Tensor) -> th.Tensor:
    """The batch mean of the cross-entropy of the softmax of ``logits`` over the actions ``masks`` allows (bool
    ``(B, A)``) to the ``target`` distributions (rows summing to 1 over ``masks``)."""
    log_probs = th.log_softmax(logits.masked_fill(~masks, -1e9), dim=1)
    return -(target.float() * log_probs).sum(1).mean()


def network_from_description(shape: dict[str, Any], kind: ObservationKind, groups: list[int]) -> PolicyValueNetwork:
    """The untrained network that :meth:`PolicyValueNetwork.describe` described as ``shape``. Descriptions written
    before a field existed lack it and mean its old default: no ``design`` is ``slots``, no ``wdl`` or
    ``action_values`` is off, no ``iterations`` is :data:`DEFAULT_ITERATIONS`. ``ValueError`` or ``KeyError`` for
    one that no network matches."""
    width = int(shape["width"])
    if not 1 <= width <= MAX_WIDTH:
        raise ValueError(f"width {width} is outside 1..{MAX_WIDTH}")
    flags = {name: shape.get(name, False) for name in ("wdl", "action_values")}
    if not all(isinstance(flag, bool) for flag in flags.values()):
        raise ValueError(f"wdl and action_values must be true or false, got {flags}")
    iterations = int(shape.get("iterations", DEFAULT_ITERATIONS))
    return PolicyValueNetwork(kind, groups, width, shape.get("design", DEFAULT_DESIGN), iterations=iterations, **flags)


def _body(
    design: str, kind: ObservationKind, groups: list[int], width: int, outputs: int, iterations: int
) -> nn.Module:
    """The body of a :class:`PolicyValueNetwork` of ``design``, with ``outputs`` per action."""
    if design == "slots":
        return SlotNetwork(kind, groups, NUM_ACTIONS, width, outputs)
    if design == "hand":
        return HandSlotNetwork(kind, groups, width, outputs=outputs)
    if design == "transformer":
        return TransformerNetwork(kind, groups, width, outputs=outputs)
    if design == "mlp":
        return FlatNetwork(kind, width, outputs)
    return LoopedNetwork(kind, groups, width, iterations, outputs)


class ActorCritic(nn.Module):
    """Action logits (before masking) and a value from the flat planes of an observation ``kind``."""

    def __init__(self, policy: str, net_arch: list[int], kind: ObservationKind, variant: Variant) -> None:
        super().__init__()
        inputs, actions = kind.num_channels * NUM_SQUARES, variant.num_actions
        self.slots: SlotNetwork | None = None
        if policy == "slots":
            self.slots = SlotNetwork(kind, list(variant.groups), actions, net_arch[0])
            self.value_head: nn.Module = nn.Linear(net_arch[0], 1)
            for head in (self.slots.score_square, self.slots.score_piece):
                nn.init.orthogonal_(head.out.weight, gain=0.01)  # a near-uniform initial policy
        else:
            self.policy_net = _mlp(inputs, net_arch, actions)
            self.value_head = _mlp(inputs, net_arch, 1)
            last = cast(nn.Linear, self.policy_net[-1])  # _mlp ends in a linear layer
            nn.init.orthogonal_(last.weight, gain=0.01)

    def forward(self, observations: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """``(logits, values)`` for a batch of flat observations."""
        if self.slots is not None:
            logits, context = self.slots(observations)
            return logits, self.value_head(context).squeeze(-1)
        return self.policy_net(observations), self.value_head(observations).squeeze(-1)

    def logits(self, observations: th.Tensor) -> th.Tensor:
        """The action logits alone."""
        if self.slots is not None:
            return self.slots.forward_actor(observations)
        return self.policy_net(observations)


def _mlp(inputs: int, hidden: list[int], outputs: int) -> nn.Sequential:
    return nn.Sequential(*hidden_layers(inputs, hidden, nn.Tanh), nn.Linear(hidden[-1] if hidden else inputs, outputs))


def network_for(config: dict[str, Any], kind: ObservationKind, variant: Variant) -> ActorCritic:
    """The untrained network of a training ``config`` (its ``policy`` and ``net_arch``)."""
    return ActorCritic(config["policy"], check_network(config["policy"], config["net_arch"]), kind, variant)


def network_actions(
    network: ActorCritic, observations: np.ndarray, masks: np.ndarray, deterministic: bool
) -> np.ndarray:
    """The actions ``network`` picks for a batch of planes (any shape ``(n, channels, 16)`` or flat) under
    legal-action ``masks``: its most likely legal action, or one sampled from the masked softmax."""
    flat = th.as_tensor(observations, dtype=th.float32, device=device_of(network)).reshape(len(observations), -1)
    with th.no_grad():
        return choose_actions(network.logits(flat), masks, deterministic)
