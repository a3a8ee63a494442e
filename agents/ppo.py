"""Agents trained with MaskablePPO: the policy networks, the checkpoint format, and :class:`PPOAgent`.

Checkpoints
-----------
A checkpoint is the ``.zip`` file that stable-baselines3 writes, with one more entry, ``quarto.json``: the
metadata (rule variant, observation kind, learner steps, the training config, library versions). It is
written atomically (a temporary file, then ``os.replace``), so a run killed mid-write never leaves a torn
file. :func:`load_checkpoint` checks the metadata before building anything and raises
:class:`CheckpointError` naming the problem: a missing or corrupt file, or a different rule variant.

The ``slots`` policy
--------------------
The 16 squares and the 16 pieces are interchangeable *slots*: what matters about square 5 is what lies in its
groups, not that it is number 5. :class:`SlotNetwork` therefore embeds every square and every piece from its
own observation channels with weights shared across slots, lets each square read the groups through it (one
round of message passing over the variant's groups), pools a context vector for the value, and scores each
action from the slot it names with one shared head. A plain MLP must learn "take the win on square s"
sixteen times over; this network learns it once.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import platform
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn

from agents.base import Agent
from quarto_env.core import INITIAL_STATE, NUM_ACTIONS, NUM_SQUARES, STANDARD, State, Variant
from quarto_env.vector import OBSERVATION_KINDS, GameBatch, check_observation_kind, num_observation_channels

CHECKPOINT_FORMAT = 1
METADATA_ENTRY = "quarto.json"
POLICY_KINDS = ("mlp", "slots")
"""``mlp``: stable-baselines3's MLP on the flattened planes; ``slots``: :class:`SlotPolicy`."""

# Observation channels (see quarto_env.observation and quarto_env.vector) that describe one square / one piece.
_PLACING_CHANNEL = 16
_SQUARE_CHANNELS = {
    "raw": [*range(10), 16],
    "tactical": [*range(10), 16, 17],
    "lookahead": [*range(10), 16, 17, 19],
    "parity": [*range(10), 16, 17, 19, 21],
}
_PIECE_CHANNELS = {
    "raw": [*range(10, 17)],
    "tactical": [*range(10, 17), 18],
    "lookahead": [*range(10, 17), 18, 20],
    "parity": [*range(10, 17), 18, 20, 22],
}
_KIND_BY_CHANNELS = {num_observation_channels(kind): kind for kind in OBSERVATION_KINDS}


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, or made for another rule variant."""


# ---------------------------------------------------------------------------------------------------------
# The slots network
# ---------------------------------------------------------------------------------------------------------
class SlotNetwork(nn.Module):
    """Actor-critic body over square and piece slots; plugs in as a policy's ``mlp_extractor``.

    ``forward`` returns ``(action logits, value features)``: the logits are final (one per action), the
    value features go through the policy's linear value head.
    """

    square_channels: th.Tensor
    piece_channels: th.Tensor
    incidence: th.Tensor

    def __init__(self, num_channels: int, groups: list[int], num_actions: int, width: int) -> None:
        super().__init__()
        kind = _KIND_BY_CHANNELS[num_channels]
        # Masks over the channels instead of gathering them: a square slot reads only square channels.
        self.register_buffer("square_channels", _channel_mask(num_channels, _SQUARE_CHANNELS[kind]), persistent=False)
        self.register_buffer("piece_channels", _channel_mask(num_channels, _PIECE_CHANNELS[kind]), persistent=False)
        incidence = th.tensor([[g >> s & 1 for s in range(NUM_SQUARES)] for g in groups], dtype=th.float32)
        self.register_buffer("incidence", incidence, persistent=False)
        self.num_channels = num_channels
        self.has_declare = num_actions > NUM_ACTIONS
        self.latent_dim_pi = num_actions
        self.latent_dim_vf = width

        self.embed_square = nn.Linear(num_channels, width)
        self.embed_piece = nn.Linear(num_channels, width)
        self.group_update = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.context = nn.Sequential(nn.Linear(3 * width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.score_square = SlotHead(width)
        self.score_piece = SlotHead(width)
        self.score_declare = nn.Linear(width, 1)

    def _encode(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        planes = features.view(-1, self.num_channels, NUM_SQUARES)
        slots = planes.transpose(1, 2)  # (B, 16, C): row i describes square i and piece i
        squares = th.relu(_masked_linear(self.embed_square, slots, self.square_channels))  # (B, 16, W)
        pieces = th.relu(_masked_linear(self.embed_piece, slots, self.piece_channels))  # (B, 16, W)
        # Each group sums its four squares; each square adds back what its groups saw.
        groups = self.group_update(self.incidence @ squares)  # (B, G, W)
        squares = squares + self.incidence.T @ groups
        context = self.context(th.cat([squares.mean(1), squares.amax(1), pieces.mean(1)], dim=1))
        placing = planes[:, _PLACING_CHANNEL, 0:1]
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
        # Actions 0-15 name a square when placing and a piece when giving; masking removes the other kind.
        logits = placing * self.score_square(squares, context) + (1 - placing) * self.score_piece(pieces, context)
        if self.has_declare:
            logits = th.cat([logits, self.score_declare(context)], dim=1)
        return logits


class SlotHead(nn.Module):
    """One logit per slot from the slot's embedding and the shared context (one hidden layer)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.slot = nn.Linear(width, width)
        self.context = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, 1)

    def forward(self, slots: th.Tensor, context: th.Tensor) -> th.Tensor:
        # Same as a linear layer over [slot, context], without copying the context to every slot.
        hidden = th.relu(self.slot(slots) + self.context(context).unsqueeze(1))
        return self.out(hidden).squeeze(2)


def _channel_mask(num_channels: int, channels: list[int]) -> th.Tensor:
    mask = th.zeros(num_channels)
    mask[channels] = 1.0
    return mask


def _masked_linear(layer: nn.Linear, x: th.Tensor, mask: th.Tensor) -> th.Tensor:
    return nn.functional.linear(x, layer.weight * mask, layer.bias)


class SlotPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy whose body is a :class:`SlotNetwork`.

    :param groups: the rule variant's groups (``Variant.groups``), for the square-group message passing
    :param width: the width of every slot embedding and hidden layer
    """

    def __init__(self, *args: Any, groups: list[int], width: int = 64, **kwargs: Any) -> None:
        self.groups = list(groups)
        self.width = width
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        assert isinstance(self.observation_space, spaces.Box) and isinstance(self.action_space, spaces.Discrete)
        self.mlp_extractor = SlotNetwork(  # type: ignore[assignment]
            self.observation_space.shape[0], self.groups, int(self.action_space.n), self.width
        )

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        # The network already ends in one logit per action: no extra linear layer mixing them.
        self.action_net = nn.Identity()  # type: ignore[assignment]
        network = self.mlp_extractor
        assert isinstance(network, SlotNetwork)
        if self.ortho_init:
            for head in (network.score_square, network.score_piece):
                nn.init.orthogonal_(head.out.weight, gain=0.01)  # a near-uniform initial policy, as SB3 does
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(groups=self.groups, width=self.width)
        return data


def policy_setup(policy: str, variant: Variant, net_arch: list[int]) -> tuple[type, dict[str, Any]]:
    """The policy class and ``policy_kwargs`` for MaskablePPO: ``net_arch`` gives the MLP's layers, or for
    ``slots`` its width (the first entry)."""
    if policy == "mlp":
        return MaskableActorCriticPolicy, {"net_arch": list(net_arch)}
    if policy == "slots":
        return SlotPolicy, {"groups": list(variant.groups), "width": net_arch[0]}
    raise ValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICY_KINDS)}")


# ---------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------
def library_versions() -> dict[str, str]:
    """Versions of the libraries a checkpoint depends on."""
    versions = {"python": platform.python_version()}
    for name in ("quarto-env", "torch", "stable_baselines3", "sb3_contrib", "numpy", "gymnasium"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "unknown"
    return versions


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes the file private; give it the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_checkpoint(
    model: BaseAlgorithm, path: str | Path, metadata: dict[str, Any], extras: dict[str, bytes] | None = None
) -> None:
    """Write ``model`` with ``metadata`` (which must hold ``variant`` and ``observation``) to ``path``;
    ``extras`` are more zip entries (the trainer stores its opponent pool there)."""
    for key in ("variant", "observation"):
        if key not in metadata:
            raise ValueError(f"checkpoint metadata needs {key!r}")
    buffer = io.BytesIO()
    model.save(buffer)
    full = {
        "format": CHECKPOINT_FORMAT,
        "num_timesteps": int(model.num_timesteps),
        "versions": library_versions(),
        **metadata,
    }
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(METADATA_ENTRY, json.dumps(full, indent=2, default=str))
        for name, data in (extras or {}).items():
            archive.writestr(name, data)
    atomic_write_bytes(Path(path), buffer.getvalue())


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of the checkpoint at ``path``; :class:`CheckpointError` if it is missing or corrupt."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist (expected a .zip written by quarto train)")
    try:
        with zipfile.ZipFile(path) as archive:
            # A truncated checkpoint can still look like a zip: the torch archive inside it has a directory too.
            if METADATA_ENTRY not in archive.namelist():
                raise CheckpointError(
                    f"checkpoint {str(path)!r} is corrupt or truncated, or was not written by quarto train: "
                    f"it has no {METADATA_ENTRY}"
                )
            damaged = archive.testzip()
            if damaged is not None:
                raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or truncated: entry {damaged} is damaged")
            metadata = json.loads(archive.read(METADATA_ENTRY))
    except (zipfile.BadZipFile, zlib.error, json.JSONDecodeError, OSError, EOFError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or truncated ({exc})") from exc
    if metadata.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has format {metadata.get('format')!r}; this version reads {CHECKPOINT_FORMAT}"
        )
    return metadata


def load_checkpoint(
    path: str | Path, variant: Variant | None = None, **load_kwargs: Any
) -> tuple[MaskablePPO, dict[str, Any]]:
    """The model and metadata at ``path``. With ``variant``, a checkpoint trained for another rule variant is
    refused with a :class:`CheckpointError` naming both. ``load_kwargs`` go to ``MaskablePPO.load``."""
    metadata = read_metadata(path)
    trained_for = Variant.make(**metadata["variant"])
    if variant is not None and trained_for != variant:
        raise CheckpointError(
            f"checkpoint {str(path)!r} was trained for rule variant {trained_for.describe()!r}, "
            f"not {variant.describe()!r}"
        )
    try:
        model = MaskablePPO.load(path, device="cpu", **load_kwargs)
    except (zipfile.BadZipFile, KeyError, RuntimeError, ValueError, EOFError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} could not be loaded: {exc}") from exc
    return model, metadata


# ---------------------------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------------------------
class PPOAgent(Agent):
    """Plays the policy of a checkpoint: ``ppo:PATH`` (``ppo:path=PATH,deterministic=false`` to sample).

    ``PATH`` may also be a run folder, meaning its ``checkpoints/best.zip``.
    """

    def __init__(
        self, variant: Variant = STANDARD, seed: int | None = None, path: str = "", deterministic: bool = True
    ) -> None:
        super().__init__(variant, seed)
        if not path:
            raise CheckpointError("the ppo agent needs a checkpoint: ppo:PATH (a .zip, or a run folder)")
        checkpoint = Path(path)
        if checkpoint.is_dir():
            checkpoint = checkpoint / "checkpoints" / "best.zip"
        model, metadata = load_checkpoint(checkpoint, variant)
        self.policy = model.policy
        self.policy.set_training_mode(False)
        self.observation = metadata["observation"]
        check_observation_kind(self.observation)
        self.deterministic = deterministic
        if seed is not None:
            th.manual_seed(seed)
        # The first move loads the compiled kernels and warms torch up (about 0.8 s): do it here, so that it
        # is not charged to a timed move.
        self.act(INITIAL_STATE)

    @classmethod
    def from_policy(
        cls, policy: MaskableActorCriticPolicy, variant: Variant, observation: str, deterministic: bool = True
    ) -> PPOAgent:
        """An agent that plays a live policy (the learner's, during training) rather than a checkpoint."""
        agent = cls.__new__(cls)
        Agent.__init__(agent, variant)
        agent.policy, agent.observation, agent.deterministic = policy, observation, deterministic
        agent.spec = "learner"
        return agent

    def act(self, state: State) -> int:
        batch = GameBatch.from_states(self.variant, [state])
        games = batch.all_games
        return int(self.act_batch(batch.observe(games, self.observation), batch.action_masks(games, False))[0])

    def act_batch(self, observations: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Actions for a batch of observations and legal-action masks, in one forward pass."""
        return policy_actions(self.policy, observations, masks, self.deterministic)


def policy_logits(policy: MaskableActorCriticPolicy, observations: th.Tensor) -> th.Tensor:
    """The action logits of ``policy`` (before masking), the same ones its action distribution uses."""
    features = policy.extract_features(observations)
    assert isinstance(features, th.Tensor)  # one shared features extractor
    return policy.action_net(policy.mlp_extractor.forward_actor(features))


def choose_actions(logits: th.Tensor, masks: np.ndarray, deterministic: bool) -> np.ndarray:
    """The most likely legal action of each row (``deterministic``), or one sampled from the masked softmax
    (by the Gumbel-max trick: the argmax of the logits plus Gumbel noise)."""
    masked = logits.masked_fill(~th.as_tensor(masks, dtype=th.bool), -th.inf)
    if not deterministic:
        masked = masked - th.log(-th.log(th.rand_like(masked)))
    return masked.argmax(dim=-1).numpy()


def policy_actions(
    policy: MaskableActorCriticPolicy, observations: np.ndarray, masks: np.ndarray, deterministic: bool
) -> np.ndarray:
    """The actions ``policy`` picks for a batch of observations under legal-action ``masks``: one forward pass."""
    with th.no_grad():
        return choose_actions(policy_logits(policy, th.as_tensor(observations, dtype=th.float32)), masks, deterministic)
