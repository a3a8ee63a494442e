"""The slots network's leaf evaluation on ONNX Runtime's CPU session: the optional ``onnx`` path of
:meth:`agents.networks.policy_value.PolicyValueNetwork.evaluate` (``pip install 'quarto-env[onnx]'``).

:func:`onnx_graph` writes the inference of :meth:`SlotNetwork.infer <agents.networks.policy_value.SlotNetwork.infer>`
as an ONNX graph: each embedding over its own channels only, one round of message passing over the groups, the
pooled context, each position scored by the one head its phase reads. The network's weights are *inputs* of the
graph, not constants in it: :class:`OnnxEvaluator` binds them once, over the parameters' own memory, so a network
that trains between calls (the optimizer updates the parameters in place) is evaluated with its current weights,
and the graph is built once per network shape, in milliseconds.

Not bit for bit: ONNX Runtime's matrix products (MLAS) sum in another order than torch's (MKL), so the logits and
values differ from the forward pass's in the last bits (the largest difference over self-play batches of a fresh
and a trained network is near ``1e-7``; docs/alphazero.md, "Fast evaluation", has the measurements and what the
searches' moves do). That is why it is an option, off by default: the default path gives the forward pass's
numbers exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from quarto_env.core import NUM_SQUARES
from quarto_env.extras import missing_module, require
from quarto_env.observation import PLACING

if TYPE_CHECKING:
    from agents.networks.policy_value import PolicyValueNetwork, SlotNetwork

OPSET = 17
"""The ONNX opset of the graph (ReduceMean's axes an attribute, as in every runtime of the last years)."""


def onnx_available() -> bool:
    """Whether the ``onnx`` extra (``onnxruntime`` and ``onnx``) is installed; looks the modules up, imports none."""
    return missing_module("onnx") is None


def onnx_graph(network: PolicyValueNetwork) -> Any:
    """The ONNX model of ``network``'s leaf evaluation (a ``slots`` body without action values).

    Inputs: ``planes`` int8 ``(B, C, 16)``; ``square_rows`` and ``piece_rows`` int64, the positions that place and
    those that give; ``order`` int64 ``(B,)``, where each position's row lies in those two taken one after the
    other; and every parameter under its ``state_dict`` name. Outputs: ``logits`` ``(B, 16)`` and ``value`` ``(B,)``
    (the tanh of the value head, or P(win) - P(loss) of its W/D/L softmax, as the network's ``_value``)."""
    import onnx
    from onnx import TensorProto, helper

    graph = _Graph(network.width, len(cast("SlotNetwork", network.body).incidence))
    squares, pieces, context = _body(graph, cast("SlotNetwork", network.body))
    logits = _logits(graph, squares, pieces, context)
    head = graph.linear(graph.linear(context, "value_head.0", relu=True), "value_head.2")
    graph.nodes += [
        helper.make_node("Identity", [logits], ["logits"]),
        helper.make_node("Identity", [_value(graph, head, network.wdl)], ["value"]),
    ]
    parameters = {name: tensor.detach() for name, tensor in network.named_parameters()}
    inputs = [
        helper.make_tensor_value_info("planes", TensorProto.INT8, ["batch", network.kind.num_channels, NUM_SQUARES]),
        *(helper.make_tensor_value_info(name, TensorProto.INT64, [name]) for name in ("square_rows", "piece_rows")),
        helper.make_tensor_value_info("order", TensorProto.INT64, ["batch"]),
        *(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(p.shape)) for name, p in parameters.items()),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", NUM_SQUARES]),
        helper.make_tensor_value_info("value", TensorProto.FLOAT, ["batch"]),
    ]
    body = helper.make_graph(graph.nodes, "slots_inference", inputs, outputs, initializer=graph.initializers)
    model = helper.make_model(body, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # the opset's; a runtime of 2022 on reads it
    onnx.checker.check_model(model)
    return model


class _Graph:
    """The nodes and constants of an ONNX graph as it is written, each node's output named by the graph; with the
    shapes the slots network's tensors are reshaped to, the slots leading (``(16, B, W)`` throughout, so that each
    incidence product is one matrix product over the batch)."""

    def __init__(self, width: int, groups: int) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.slot_rows = self.constant("slot_rows", np.array([NUM_SQUARES, -1, width], np.int64))
        self.slot_columns = self.constant("slot_columns", np.array([NUM_SQUARES, -1], np.int64))
        self.group_columns = self.constant("group_columns", np.array([groups, -1], np.int64))
        self.flat_rows = self.constant("flat_rows", np.array([-1, width], np.int64))

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attributes: Any) -> str:
        """Add an ``op`` node; the name of its output (with ``outputs`` above 1, of its first: the others add
        ``_1``, ``_2``, ...)."""
        from onnx import helper

        name = f"t{len(self.nodes)}"
        names = [name] + [f"{name}_{index}" for index in range(1, outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, **attributes))
        return name

    def constant(self, name: str, values: np.ndarray) -> str:
        """Add ``values`` (int64 or float32) as the constant ``name``."""
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(values, name))
        return name

    def linear(self, x: str, layer: str, relu: bool = False, bias: bool = True) -> str:
        """The torch linear layer ``layer`` (its parameters' names) applied to the rows of ``x``."""
        out = self.node("Gemm", [x, f"{layer}.weight"] + ([f"{layer}.bias"] if bias else []), transB=1)
        return self.node("Relu", [out]) if relu else out


def _body(graph: _Graph, body: SlotNetwork) -> tuple[str, str, str]:
    """The slots body: the squares after the groups' round and the pieces ``(16, B, W)``, and the context ``(B, W)``."""
    from onnx import TensorProto

    embedded = {}
    for part, wanted in (("square", body.square_channel_numbers), ("piece", body.piece_channel_numbers)):
        # Each embedding over its own channels (the others have no weight in it), gathered before the transpose.
        channels = graph.constant(f"{part}_channels", wanted.astype(np.int64))
        own = graph.node("Gather", ["planes", channels], axis=1)  # (B, C', 16) int8
        own = graph.node("Transpose", [graph.node("Cast", [own], to=TensorProto.FLOAT)], perm=[2, 0, 1])
        own = graph.node("Reshape", [own, graph.constant(f"{part}_inputs", np.array([-1, len(wanted)], np.int64))])
        weight = graph.node("Gather", [f"body.embed_{part}.weight", channels], axis=1)
        out = graph.node("Relu", [graph.node("Gemm", [own, weight, f"body.embed_{part}.bias"], transB=1)])
        embedded[part] = graph.node("Reshape", [out, graph.slot_columns])  # (16, B * W)
    incidence = body.incidence.numpy()
    summed = graph.node("MatMul", [graph.constant("incidence", incidence), embedded["square"]])  # (G, B * W)
    seen = graph.linear(graph.node("Reshape", [summed, graph.flat_rows]), "body.group_update.0", relu=True)
    seen = graph.node("Reshape", [seen, graph.group_columns])
    back = graph.node("MatMul", [graph.constant("incidence_t", incidence.T.copy()), seen])
    squares = graph.node("Add", [back, embedded["square"]])  # (16, B * W)
    # Pooled over the slots by a matrix product and an elementwise max: ONNX Runtime's reductions over a leading
    # axis took several times as long.
    mean = graph.constant("mean", np.full((1, NUM_SQUARES), 1 / NUM_SQUARES, np.float32))
    split = graph.node("Split", [squares], outputs=NUM_SQUARES, axis=0)
    slots = [split] + [f"{split}_{index}" for index in range(1, NUM_SQUARES)]
    pooled = [
        graph.node("MatMul", [mean, squares]),
        graph.node("Max", slots),
        graph.node("MatMul", [mean, embedded["piece"]]),
    ]
    pooled = [graph.node("Reshape", [part, graph.flat_rows]) for part in pooled]
    context = graph.linear(graph.node("Concat", pooled, axis=1), "body.context.0", relu=True)
    context = graph.linear(context, "body.context.2", relu=True)
    return (
        graph.node("Reshape", [squares, graph.slot_rows]),
        graph.node("Reshape", [embedded["piece"], graph.slot_rows]),
        context,
    )


def _value(graph: _Graph, head: str, wdl: bool) -> str:
    """Each position's value ``(B,)`` from the value head's outputs ``head``: P(win) - P(loss) of W/D/L logits (the
    columns loss, draw, win), or the tanh of the one output."""
    if wdl:
        probabilities = graph.node("Softmax", [head], axis=1)
        win, loss = (
            graph.node("Gather", [probabilities, graph.constant(name, np.array(column, np.int64))], axis=1)
            for name, column in (("win_column", 2), ("loss_column", 0))
        )
        return graph.node("Sub", [win, loss])
    return graph.node("Reshape", [graph.node("Tanh", [head]), graph.constant("batch", np.array([-1], np.int64))])


def _logits(graph: _Graph, squares: str, pieces: str, context: str) -> str:
    """Each position's logits ``(B, 16)``, scored by the head its phase reads (the rows of ``square_rows`` by the
    square head, those of ``piece_rows`` by the piece head), put back in the batch's order."""
    scores = []
    for head, rows, slots in (("square", "square_rows", squares), ("piece", "piece_rows", pieces)):
        chosen = graph.node("Reshape", [graph.node("Gather", [slots, rows], axis=1), graph.flat_rows])  # (16 * P, W)
        hidden = graph.node("Reshape", [graph.linear(chosen, f"body.score_{head}.slot"), graph.slot_rows])
        term = graph.linear(graph.node("Gather", [context, rows], axis=0), f"body.score_{head}.context", bias=False)
        hidden = graph.node("Relu", [graph.node("Add", [hidden, term])])  # the context's term on every slot
        out = graph.linear(graph.node("Reshape", [hidden, graph.flat_rows]), f"body.score_{head}.out")
        scores.append(graph.node("Reshape", [out, graph.slot_columns]))  # (16, P)
    ordered = graph.node("Gather", [graph.node("Concat", scores, axis=1), "order"], axis=1)
    return graph.node("Transpose", [ordered], perm=[1, 0])


class OnnxEvaluator:
    """``network``'s leaf evaluation on one ONNX Runtime CPU session of one thread (as torch runs in self-play):
    ``evaluator(planes)`` is ``(logits, values)`` as float32 arrays, with the weights ``network`` has at the call.
    :class:`~quarto_env.errors.MissingExtra` naming the ``onnx`` extra where it is not installed."""

    def __init__(self, network: PolicyValueNetwork) -> None:
        require("onnx", "the onnx leaf evaluation")
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        model = onnx_graph(network).SerializeToString()
        self.session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        # The weights are bound once, as ONNX Runtime values over the parameters' own memory, not copies: an
        # optimizer's in-place steps are seen at the next call, and a call binds only the batch's four inputs
        # (a feed of every parameter at each call cost more: docs/alphazero.md).
        self.weights = {name: tensor.detach().numpy() for name, tensor in network.named_parameters()}
        self.binding = self.session.io_binding()
        for name, weight in self.weights.items():
            self.binding.bind_ortvalue_input(name, onnxruntime.OrtValue.ortvalue_from_numpy(weight))

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        giving = planes[:, PLACING, 0] == 0
        rows = np.argsort(giving, kind="stable")
        placed = len(planes) - int(giving.sum())
        order = np.empty(len(planes), np.int64)
        order[rows] = np.arange(len(planes))
        feeds = {"planes": planes, "square_rows": rows[:placed], "piece_rows": rows[placed:], "order": order}
        for name, values in feeds.items():
            self.binding.bind_cpu_input(name, np.ascontiguousarray(values))
        for name in ("logits", "value"):  # bound afresh: outputs kept from a call keep its batch's shape
            self.binding.bind_output(name)
        self.session.run_with_iobinding(self.binding)
        logits, values = self.binding.copy_outputs_to_cpu()
        return logits, values
