"""The bodies of :class:`agents.networks.policy_value.PolicyValueNetwork` beyond the ``slots`` one, and the pieces every
body is built from (the slot heads, the slot buffers, the hidden layers of an MLP).

The ``hand`` design
-------------------
:class:`~agents.networks.policy_value.PolicyValueNetwork` takes a ``design``
(:data:`~agents.networks.choices.NETWORK_DESIGNS`): ``slots`` is :class:`~agents.networks.policy_value.SlotNetwork` (the
design of every checkpoint that names none), ``hand`` is :class:`HandSlotNetwork`. In ``slots`` the piece in hand
reaches the squares only through a pooled average of all the pieces, yet where to place depends on little else. ``hand``
picks the piece slot the ``in_hand`` channel marks and adds its embedding to every square slot and to every
group, runs two rounds of message passing over the groups, relates every piece to every group (for the gives),
and feeds the value head the hand and the pooled groups directly. ``quarto bench network`` measures the designs
against each other. ``transformer`` (:class:`TransformerNetwork`), ``looped`` (:class:`LoopedNetwork`) and
``mlp`` (:class:`FlatNetwork`) are described where they are defined.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch as th
import torch.nn.functional as F
from torch import nn

from quarto_env.core import NUM_ACTIONS, NUM_SQUARES
from quarto_env.errors import QuartoValueError
from quarto_env.observation import IN_HAND, PLACING, ObservationKind

EQUIVARIANT_DESIGNS = ("slots", "hand", "transformer", "looped")
"""The designs equivariant under the board symmetries by construction; ``mlp`` sees each square as itself and
learns the symmetries, if at all, from the augmentation."""


MAX_ITERATIONS = 64
"""The most iterations a ``looped`` network may run."""


DEFAULT_ITERATIONS = 4
"""The iterations of a ``looped`` network unless told otherwise."""


TRANSFORMER_HEADS = 4
"""The attention heads of a ``transformer`` network: its width must be a multiple of them."""


class SlotHead(nn.Module):
    """One logit per slot from the slot's embedding and the shared context (one hidden layer): ``(B, slots)``; or,
    with ``outputs`` above 1, that many per slot: ``(B, slots, outputs)``."""

    def __init__(self, width: int, outputs: int = 1) -> None:
        super().__init__()
        self.slot = nn.Linear(width, width)
        self.context = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, outputs)

    def forward(self, slots: th.Tensor, context: th.Tensor) -> th.Tensor:
        # Same as a linear layer over [slot, context], without copying the context to every slot.
        hidden = th.relu(self.slot(slots) + self.context(context).unsqueeze(1))
        out = self.out(hidden)
        return out.squeeze(2) if out.shape[2] == 1 else out


def phase_logits(placing: th.Tensor, square_logits: th.Tensor, piece_logits: th.Tensor) -> th.Tensor:
    """The action outputs of a position: actions 0-15 name a square when placing and a piece when giving, so the
    square head's outputs count when ``placing`` (``(B, 1)``, 0 or 1) and the piece head's otherwise (masking
    removes the other kind). The heads' outputs are ``(B, 16)`` or ``(B, 16, K)``."""
    if square_logits.dim() == 3:
        placing = placing.unsqueeze(2)
    return placing * square_logits + (1 - placing) * piece_logits


class HandSlotNetwork(nn.Module):
    """The ``hand`` body of :class:`PolicyValueNetwork`: the slots of :class:`SlotNetwork`, with the piece in hand
    added to every square slot and every group, ``rounds`` rounds of message passing over the groups, every piece
    related to every group, and a context that reads the hand and the groups.

    ``forward`` returns ``(logits, context)``: logits ``(B, 16)`` (one per square when placing, per piece when
    giving), and the context ``(B, width)`` that the value head reads.
    """

    square_channels: th.Tensor
    piece_channels: th.Tensor
    incidence: th.Tensor

    def __init__(self, kind: ObservationKind, groups: list[int], width: int, rounds: int = 2, outputs: int = 1) -> None:
        super().__init__()
        # The layers' names are those of the checkpoints written before the looped design shared them: keep them.
        register_slot_buffers(self, kind, groups)
        self.num_channels = kind.num_channels
        self.embed_square = nn.Linear(kind.num_channels, width)
        self.embed_piece = nn.Linear(kind.num_channels, width)
        self.hand_to_squares = nn.Linear(width, width, bias=False)
        self.rounds = nn.ModuleList(GroupRound(width) for _ in range(rounds))
        self.relate_pieces = PieceGroupRelation(width)
        self.context = nn.Sequential(nn.Linear(6 * width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.score_square = SlotHead(width, outputs)
        self.score_piece = SlotHead(width, outputs)

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        planes, squares, pieces, hand = self._embed(features)
        groups = self.incidence @ squares
        for round_ in self.rounds:
            squares, groups = round_(squares, hand, self.incidence)
        return self._readout(planes, squares, pieces, groups, hand)

    def _embed(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        """``(planes (B, C, 16), squares (B, 16, W), pieces (B, 16, W), hand (B, 1, W))``: every slot embedded from
        its own channels, the piece in hand (zeros when giving) added to every square."""
        planes = features.view(-1, self.num_channels, NUM_SQUARES)
        slots = planes.transpose(1, 2)  # (B, 16, C): row i describes square i and piece i
        pieces = th.relu(masked_linear(self.embed_piece, slots, self.piece_channels))  # (B, 16, W)
        hand = planes[:, IN_HAND].unsqueeze(1) @ pieces  # (B, 1, W): the piece in hand's slot, zeros when giving
        squares = th.relu(masked_linear(self.embed_square, slots, self.square_channels) + self.hand_to_squares(hand))
        return planes, squares, pieces, hand

    def _readout(
        self, planes: th.Tensor, squares: th.Tensor, pieces: th.Tensor, groups: th.Tensor, hand: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor]:
        """``(action outputs, context)``: every piece related to every group, a context pooled from all the slots,
        and the outputs from the square slots (placing) or the piece slots (giving)."""
        pieces = self.relate_pieces(pieces, groups)
        pooled = [squares.mean(1), squares.amax(1), pieces.mean(1), groups.mean(1), groups.amax(1), hand.squeeze(1)]
        context = self.context(th.cat(pooled, dim=1))
        placing = planes[:, PLACING, 0:1]
        return phase_logits(placing, self.score_square(squares, context), self.score_piece(pieces, context)), context


class LoopedNetwork(HandSlotNetwork):
    """The ``looped`` body: the ``hand`` body with one weight-tied :class:`GroupRound` run ``iterations`` times, the
    embedded input recalled before every iteration (each square reads its current state beside its input
    embedding), as the recurrent networks of Bansal, Schwarzschild et al. (NeurIPS 2022). ``iterations`` is a
    constructor default that ``forward`` can override, or that can be raised on a trained network
    (``body.iterations = 8``) to let it think longer at play time. Returns what :class:`HandSlotNetwork` returns.
    """

    def __init__(
        self, kind: ObservationKind, groups: list[int], width: int, iterations: int = 4, outputs: int = 1
    ) -> None:
        super().__init__(kind, groups, width, rounds=1, outputs=outputs)
        if not 1 <= iterations <= MAX_ITERATIONS:
            raise QuartoValueError(f"looped iterations must be 1 to {MAX_ITERATIONS}, got {iterations}")
        self.iterations = iterations
        self.recall = nn.Linear(2 * width, width)

    def forward(self, features: th.Tensor, iterations: int | None = None) -> tuple[th.Tensor, th.Tensor]:
        planes, embedded, pieces, hand = self._embed(features)
        squares, groups = embedded, self.incidence @ embedded
        block = self.rounds[0]
        for _ in range(iterations or self.iterations):
            squares = th.relu(self.recall(th.cat([squares, embedded], dim=2)))
            squares, groups = block(squares, hand, self.incidence)
        return self._readout(planes, squares, pieces, groups, hand)


class TransformerNetwork(nn.Module):
    """The ``transformer`` body: attention over 33 tokens -- the 16 squares, the 16 pieces (each embedded from its
    own channels with weights shared across slots, as the slots bodies) and the piece in hand -- with no position
    embedding. What a token knows of where it is comes from a learned attention bias per head and per *relation*
    of the two tokens (:func:`token_relations`: for two squares, how many groups they share), as Leela Chess's
    learned square bias but tied to the groups, so the body is equivariant under the board symmetries by
    construction. The square tokens score the placements, the piece tokens the gives. Returns ``(action outputs,
    context)`` as :class:`HandSlotNetwork`.
    """

    square_channels: th.Tensor
    piece_channels: th.Tensor
    incidence: th.Tensor
    relations: th.Tensor

    def __init__(
        self,
        kind: ObservationKind,
        groups: list[int],
        width: int,
        layers: int = 3,
        heads: int = TRANSFORMER_HEADS,
        outputs: int = 1,
    ) -> None:
        super().__init__()
        if width % heads:
            raise QuartoValueError(f"a transformer's width must be a multiple of its {heads} heads, got {width}")
        register_slot_buffers(self, kind, groups)
        self.register_buffer("relations", token_relations(self.incidence), persistent=False)
        self.num_channels = kind.num_channels
        self.heads = heads
        self.embed_square = nn.Linear(kind.num_channels, width)
        self.embed_piece = nn.Linear(kind.num_channels, width)
        self.hand_token = nn.Parameter(th.zeros(width))
        self.relation_bias = nn.Embedding(NUM_RELATIONS, heads)
        nn.init.zeros_(self.relation_bias.weight)
        self.layers = nn.ModuleList(BiasedAttentionLayer(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.context = nn.Sequential(nn.Linear(2 * width, width), nn.ReLU())
        self.score_square = SlotHead(width, outputs)
        self.score_piece = SlotHead(width, outputs)

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        planes = features.view(-1, self.num_channels, NUM_SQUARES)
        slots = planes.transpose(1, 2)  # (B, 16, C): row i describes square i and piece i
        squares = masked_linear(self.embed_square, slots, self.square_channels)
        pieces = masked_linear(self.embed_piece, slots, self.piece_channels)
        hand = planes[:, IN_HAND].unsqueeze(1) @ pieces + self.hand_token  # (B, 1, W)
        tokens = th.cat([squares, pieces, hand], dim=1)  # (B, 33, W)
        bias = self.relation_bias(self.relations).permute(2, 0, 1)  # (heads, 33, 33), added to the scores
        for layer in self.layers:
            tokens = layer(tokens, bias)
        tokens = self.norm(tokens)
        squares, pieces, hand = tokens[:, :NUM_SQUARES], tokens[:, NUM_SQUARES:-1], tokens[:, -1]
        context = self.context(th.cat([tokens.mean(1), hand], dim=1))
        placing = planes[:, PLACING, 0:1]
        return phase_logits(placing, self.score_square(squares, context), self.score_piece(pieces, context)), context


class BiasedAttentionLayer(nn.Module):
    """One pre-norm transformer layer whose attention scores get an additive bias per head: ``x + attention(norm(x))``
    then ``x + feed-forward(norm(x))``. Written out rather than ``nn.TransformerEncoderLayer``, whose inference fast
    path returned NaN here with a per-head float mask."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm_attention = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.mix = nn.Linear(width, width)
        self.norm_feed = nn.LayerNorm(width)
        self.feed = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, width))

    def forward(self, tokens: th.Tensor, bias: th.Tensor) -> th.Tensor:
        """``tokens`` ``(B, T, W)`` with the attention ``bias`` ``(heads, T, T)``: the tokens after the layer."""
        batch, count, width = tokens.shape
        q, k, v = self.qkv(self.norm_attention(tokens)).view(batch, count, 3, self.heads, -1).unbind(2)
        attended = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), bias)
        tokens = tokens + self.mix(attended.transpose(1, 2).reshape(batch, count, width))
        return tokens + self.feed(self.norm_feed(tokens))


NUM_RELATIONS = 14
"""The relations :func:`token_relations` tells apart."""


def token_relations(incidence: th.Tensor) -> th.Tensor:
    """``(33, 33)`` long: the relation of token ``i`` to token ``j`` (squares 0-15, pieces 16-31, the hand 32).
    Two squares: 0 for the same square, else 1 + the groups they share (at most 3). Then one relation per ordered
    pair of kinds (square-piece 5, piece-square 6, ...), the same piece 7, two pieces 8. Built from the groups
    alone, so a board symmetry (which maps groups onto groups) keeps every relation between the squares."""
    shared = (incidence.T @ incidence).long()  # (16, 16): groups through both squares
    square_pairs = th.where(th.eye(NUM_SQUARES, dtype=th.bool), 0, 1 + shared.clamp(max=3))
    kinds = th.tensor([0] * NUM_SQUARES + [1] * NUM_SQUARES + [2])
    # Ordered pairs of different kinds: (square, piece) 5, (piece, square) 6, (hand, square) 9, (square, hand) 10,
    # (hand, piece) 11, (piece, hand) 12; the hand with itself 13.
    by_kinds = th.tensor([[0, 5, 10], [6, 8, 12], [9, 11, 13]])
    relations = by_kinds[kinds.unsqueeze(1), kinds.unsqueeze(0)]
    relations[:NUM_SQUARES, :NUM_SQUARES] = square_pairs
    pieces = slice(NUM_SQUARES, 2 * NUM_SQUARES)
    relations[pieces, pieces] = th.where(th.eye(NUM_SQUARES, dtype=th.bool), 7, 8)
    return relations


class GroupRound(nn.Module):
    """One round of message passing that sees the hand: each group reads the sum of its squares and the piece in
    hand, each square adds back what its groups saw. Returns ``(squares, groups)``."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.group = nn.Linear(width, width)
        self.hand = nn.Linear(width, width, bias=False)
        self.square = nn.Linear(width, width)

    def forward(self, squares: th.Tensor, hand: th.Tensor, incidence: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        groups = th.relu(self.group(incidence @ squares) + self.hand(hand))  # (B, G, W)
        return squares + th.relu(self.square(incidence.T @ groups)), groups


class PieceGroupRelation(nn.Module):
    """Each piece slot plus what it makes of the groups: one hidden layer over every (piece, group) pair, the
    strongest pair feature over the groups kept (a piece that completes one group is what matters)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.piece = nn.Linear(width, width)
        self.group = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width)

    def forward(self, pieces: th.Tensor, groups: th.Tensor) -> th.Tensor:
        pairs = th.relu(self.piece(pieces).unsqueeze(2) + self.group(groups).unsqueeze(1))  # (B, 16, G, W)
        return pieces + th.relu(self.out(pairs.amax(2)))


def register_slot_buffers(module: nn.Module, kind: ObservationKind, groups: list[int]) -> None:
    """Give a slots body its constant buffers (not saved in checkpoints): the channel masks of the square and
    piece slots, and the groups' incidence matrix ``(G, 16)``."""
    # Masks over the channels instead of gathering them: a square slot reads only square channels.
    module.register_buffer("square_channels", _channel_mask(kind.num_channels, kind.square_channels), persistent=False)
    module.register_buffer("piece_channels", _channel_mask(kind.num_channels, kind.piece_channels), persistent=False)
    incidence = th.tensor([[g >> s & 1 for s in range(NUM_SQUARES)] for g in groups], dtype=th.float32)
    module.register_buffer("incidence", incidence, persistent=False)


def _channel_mask(num_channels: int, channels: list[int]) -> th.Tensor:
    mask = th.zeros(num_channels)
    mask[channels] = 1.0
    return mask


def masked_linear(layer: nn.Module, x: th.Tensor, mask: th.Tensor) -> th.Tensor:
    # Masking the input rather than the weights keeps the layer a plain call (RowWeights swaps it); with a 0/1
    # mask both give the same products.
    return layer(x * mask)


class FlatNetwork(nn.Module):
    """The ``mlp`` body: two ReLU layers over the flattened planes, the context, and every action's outputs from
    it by one linear layer. No slot shares weights with another: the baseline that shows what the structure of
    the other designs buys (a network of this kind fits any small training set, see docs/learnability.md)."""

    def __init__(self, kind: ObservationKind, width: int, outputs: int = 1) -> None:
        super().__init__()
        self.outputs = outputs
        inputs = kind.num_channels * NUM_SQUARES
        self.context = nn.Sequential(*hidden_layers(inputs, [width, width], nn.ReLU))
        self.actions = nn.Linear(width, NUM_ACTIONS * outputs)

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        context = self.context(features.flatten(1))
        actions = self.actions(context)
        shape = (-1, NUM_ACTIONS) if self.outputs == 1 else (-1, NUM_ACTIONS, self.outputs)
        return actions.view(shape), context


def hidden_layers(inputs: int, sizes: Sequence[int], activation: type[nn.Module]) -> list[nn.Module]:
    """The hidden layers of a multilayer perceptron over ``inputs`` features: for each of ``sizes``, a linear layer
    to that many units and then ``activation`` (``nn.ReLU``, ``nn.Tanh``). In an ``nn.Sequential`` they are
    numbered from 0, linear layers at the even places."""
    layers: list[nn.Module] = []
    for size in sizes:
        layers += [nn.Linear(inputs, size), activation()]
        inputs = size
    return layers
