"""Agents trained with MaskablePPO: the policy networks, the checkpoint format, and :class:`PPOAgent`.

Checkpoints
-----------
A checkpoint is the ``.zip`` file that stable-baselines3 writes, with one more entry, ``quarto.json``: the
metadata (format, rule variant, observation kind, ``env_kwargs`` -- the keyword arguments of
``quarto_env.env`` that rebuild its rules and observation --, learner steps, the training config, library
versions). It is written atomically (a temporary file, then ``os.replace``), so a run killed mid-write never
leaves a torn file.

Checkpoints written by ``quarto train`` are read as data by every command of this project, never unpickled:
:func:`load_policy` rebuilds the network from ``quarto.json`` and loads ``policy.pth`` with
``torch.load(weights_only=True)``; resuming (:func:`load_training_state`) reads the optimizer's state the same
way and the step count from ``quarto.json``. stable-baselines3's ``data`` entry, which holds cloudpickled
objects, is never deserialized. A stable-baselines3 zip opened with SB3's own ``MaskablePPO.load`` unpickles
code, so only load zips you trust that way. Every failure is a :class:`CheckpointError` naming the file and
the problem: missing, corrupt or truncated, an entry that is not plain weights, a format this version does
not read (it reads formats 1 and 2), or a different rule variant.

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
import pickle
import platform
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn

from agents.base import Agent
from quarto_env.checks import atomic_write_bytes, checked_number, one_line
from quarto_env.core import INITIAL_STATE, NUM_ACTIONS, NUM_SQUARES, STANDARD, State, Variant
from quarto_env.observation import PLACING, ObservationKind, observation_kind
from quarto_env.vector import GameBatch

CHECKPOINT_FORMAT = 2
"""The format :func:`save_checkpoint` writes; format 1 (which had no ``env_kwargs``) is read too."""
READABLE_FORMATS = (1, CHECKPOINT_FORMAT)
METADATA_ENTRY = "quarto.json"
POLICY_ENTRY = "policy.pth"
"""stable-baselines3's entry holding the policy's ``state_dict``."""
OPTIMIZER_ENTRY = "policy.optimizer.pth"
POLICY_KINDS = ("mlp", "slots")
"""``mlp``: stable-baselines3's MLP on the flattened planes; ``slots``: :class:`SlotPolicy`."""
MAX_WIDTH = 4096
"""The widest layer a config or a checkpoint may ask for (one such layer already holds millions of weights)."""
MAX_LAYERS = 8
"""The most hidden layers of an ``mlp`` network."""


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, or made for another rule variant."""


AGENT_KINDS_OF_ALGORITHMS = {"ppo": "ppo", "alphazero": "az", "rllib-ppo": "rllib"}
"""The agent kind that plays a checkpoint of each training algorithm (``algorithm`` in ``quarto.json``)."""


def check_algorithm(path: str | Path, metadata: dict[str, Any], expected: str) -> None:
    """Refuse a checkpoint of another training algorithm than ``expected``, naming the agent kind that plays it
    (checkpoints written before the ``algorithm`` entry are ``ppo``)."""
    found = metadata.get("algorithm", "ppo")
    if found != expected:
        kind = AGENT_KINDS_OF_ALGORITHMS.get(str(found))
        hint = f": play it with {kind}:PATH" if kind else ""
        raise CheckpointError(f"checkpoint {str(path)!r} holds a {found} network, not a {expected} one{hint}")


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

    def __init__(self, kind: ObservationKind, groups: list[int], num_actions: int, width: int) -> None:
        super().__init__()
        num_channels = kind.num_channels
        # Masks over the channels instead of gathering them: a square slot reads only square channels.
        self.register_buffer("square_channels", _channel_mask(num_channels, kind.square_channels), persistent=False)
        self.register_buffer("piece_channels", _channel_mask(num_channels, kind.piece_channels), persistent=False)
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
    :param observation: the observation kind (:mod:`quarto_env.observation`): which channels describe squares
    :param width: the width of every slot embedding and hidden layer
    """

    def __init__(self, *args: Any, groups: list[int], observation: str, width: int = 64, **kwargs: Any) -> None:
        self.groups = list(groups)
        self.observation = observation_kind(observation).name
        self.width = width
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        assert isinstance(self.action_space, spaces.Discrete)
        self.mlp_extractor = SlotNetwork(  # type: ignore[assignment]
            observation_kind(self.observation), self.groups, int(self.action_space.n), self.width
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
        data.update(groups=self.groups, observation=self.observation, width=self.width)
        return data


def policy_setup(policy: str, variant: Variant, net_arch: list[int], observation: str) -> tuple[type, dict[str, Any]]:
    """The policy class and ``policy_kwargs`` for MaskablePPO: ``net_arch`` gives the MLP's layers, or for
    ``slots`` its width (the first entry)."""
    if policy == "mlp":
        return MaskableActorCriticPolicy, {"net_arch": list(net_arch)}
    if policy == "slots":
        return SlotPolicy, {"groups": list(variant.groups), "observation": observation, "width": net_arch[0]}
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


def save_checkpoint(
    model: BaseAlgorithm, path: str | Path, metadata: dict[str, Any], extras: dict[str, bytes] | None = None
) -> None:
    """Write ``model`` with ``metadata`` (which must hold ``variant`` and ``observation``) to ``path``;
    ``extras`` are more zip entries (the trainer stores its opponent pool there). The metadata gains
    ``env_kwargs``, derived from those two."""
    for key in ("variant", "observation"):
        if key not in metadata:
            raise ValueError(f"checkpoint metadata needs {key!r}")
    buffer = io.BytesIO()
    model.save(buffer)
    full = {
        "format": CHECKPOINT_FORMAT,
        "num_timesteps": int(model.num_timesteps),
        "env_kwargs": env_kwargs_for(Variant.make(**metadata["variant"]), metadata["observation"]),
        "versions": library_versions(),
        **metadata,
    }
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(METADATA_ENTRY, json.dumps(full, indent=2, default=str))
        for name, data in (extras or {}).items():
            archive.writestr(name, data)
    atomic_write_bytes(Path(path), buffer.getvalue())


def env_kwargs_for(variant: Variant, observation: str) -> dict[str, Any]:
    """The keyword arguments of ``quarto_env.env`` that play ``variant`` with ``observation`` planes."""
    return {**variant.to_dict(), "observation": observation}


def write_checkpoint(
    path: str | Path,
    algorithm: str,
    variant: Variant,
    observation: str,
    num_timesteps: int,
    metadata: dict[str, Any],
    entries: dict[str, Any],
) -> None:
    """Write a checkpoint of the project's own format (the ``az`` and ``rllib`` ones) atomically to the zip
    ``path``: :data:`METADATA_ENTRY` (format, ``algorithm``, steps, rules, observation, ``env_kwargs``, library
    versions, then ``metadata``) and ``entries``, each ``bytes`` as they are or tensors and plain data saved
    with ``torch.save`` (:func:`read_weights` reads them back as data)."""
    full = {
        "format": CHECKPOINT_FORMAT,
        "algorithm": algorithm,
        "num_timesteps": int(num_timesteps),
        "variant": variant.to_dict(),
        "observation": observation,
        "env_kwargs": env_kwargs_for(variant, observation),
        "versions": library_versions(),
        **metadata,
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(METADATA_ENTRY, json.dumps(full, indent=2, default=str))
        for name, entry in entries.items():
            archive.writestr(name, entry if isinstance(entry, bytes) else _saved_bytes(entry))
    atomic_write_bytes(Path(path), buffer.getvalue())


def _saved_bytes(obj: Any) -> bytes:
    buffer = io.BytesIO()
    th.save(obj, buffer)
    return buffer.getvalue()


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of the checkpoint at ``path``, with ``env_kwargs`` derived from its variant and observation
    (so that they always agree); :class:`CheckpointError` if it is missing, corrupt, of another format, or its
    ``quarto.json`` is not a mapping with a valid variant, observation kind and step count."""
    path = Path(path)
    if not path.is_file():
        problem = "is not a file" if path.exists() else "does not exist"
        raise CheckpointError(f"checkpoint {str(path)!r} {problem} (expected a .zip written by quarto train)")
    metadata = _read_metadata_entry(path)
    if not isinstance(metadata, dict):
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {METADATA_ENTRY} holds {type(metadata).__name__} data, not a mapping of fields"
        )
    found = metadata.get("format")
    if isinstance(found, bool) or found not in READABLE_FORMATS:
        readable = " and ".join(map(str, READABLE_FORMATS))
        raise CheckpointError(f"checkpoint {str(path)!r} has format {found!r}; this version reads formats {readable}")
    missing = [key for key in ("variant", "observation", "num_timesteps") if key not in metadata]
    if missing or not isinstance(metadata["variant"], dict):
        problem = f"it lacks {', '.join(missing)}" if missing else f"variant {metadata['variant']!r} is no mapping"
        raise CheckpointError(f"checkpoint {str(path)!r} has invalid metadata in {METADATA_ENTRY}: {problem}")
    try:
        variant = Variant.make(**metadata["variant"])
        observation = observation_kind(metadata["observation"]).name
        checked_number(metadata["num_timesteps"], "num_timesteps", minimum=0, integer=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has invalid metadata in {METADATA_ENTRY}: {one_line(exc)}"
        ) from exc
    metadata["env_kwargs"] = env_kwargs_for(variant, observation)  # format 1 did not store them
    return metadata


def _read_metadata_entry(path: Path) -> Any:
    """The parsed JSON of the checkpoint's ``quarto.json``, whatever its shape."""
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
            return json.loads(archive.read(METADATA_ENTRY))
    except RecursionError:
        raise CheckpointError(f"checkpoint {str(path)!r}: {METADATA_ENTRY} is nested too deeply") from None
    except (zipfile.BadZipFile, zlib.error, json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or truncated ({one_line(exc)})") from exc


def read_weights(path: str | Path, entry: str) -> Any:
    """The ``torch.save`` entry ``entry`` of the checkpoint at ``path``, read with ``weights_only=True``: tensors,
    numbers, strings and containers of them, never code. :class:`CheckpointError` if it is missing, damaged,
    or holds anything else (it is refused unread)."""
    try:
        with zipfile.ZipFile(path) as archive:
            if entry not in archive.namelist():
                raise CheckpointError(f"checkpoint {str(path)!r} has no {entry} entry")
            data = archive.read(entry)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: entry {entry} is corrupt or truncated ({one_line(exc)})"
        ) from exc
    try:
        return th.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: entry {entry} is not plain weights and was refused ({_refusal(exc)})"
        ) from exc
    except Exception as exc:  # torch's reader fails on junk bytes in many ways (struct.error, EOFError, ...)
        raise CheckpointError(
            f"checkpoint {str(path)!r}: entry {entry} is corrupt or truncated ({type(exc).__name__}: {one_line(exc)})"
        ) from exc


class LoadedPolicy:
    """A checkpoint's policy, loaded as data by :func:`load_policy`, with what it takes to play it.

    ``predict`` is stable-baselines3's: pass the ``"observation"`` planes and the ``"action_mask"`` of
    ``quarto_env.env(**loaded.env_kwargs)``.
    """

    def __init__(self, policy: MaskableActorCriticPolicy, metadata: dict[str, Any]) -> None:
        self.policy = policy
        """The network, in evaluation mode."""
        self.metadata = metadata
        """The checkpoint's ``quarto.json`` (see :func:`read_metadata`)."""
        self.env_kwargs: dict[str, Any] = metadata["env_kwargs"]
        """The keyword arguments of ``quarto_env.env`` that rebuild the checkpoint's rules and observation."""
        self.variant = Variant.make(**metadata["variant"])
        self.observation: str = metadata["observation"]
        self.num_timesteps = int(metadata["num_timesteps"])
        """Learner steps trained."""

    def predict(
        self,
        observation: np.ndarray,
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """The action(s) for ``observation`` (one or a batch) under ``action_masks``, and the recurrent state
        (``None``: the policy has none) -- stable-baselines3's ``predict``."""
        return self.policy.predict(observation, state, episode_start, deterministic, action_masks)


def load_policy(path: str | Path, variant: Variant | None = None) -> LoadedPolicy:
    """The policy of the checkpoint at ``path``, rebuilt from its metadata and loaded with ``policy.pth`` read as
    weights: nothing in the file is unpickled, so nothing in it runs. With ``variant``, a checkpoint trained for
    another rule variant is refused. Every failure is a :class:`CheckpointError` naming the file."""
    metadata = read_metadata(path)
    check_algorithm(path, metadata, "ppo")
    policy = _policy_for(path, metadata, trained_variant(path, metadata, variant))
    weights = read_weights(path, POLICY_ENTRY)
    try:
        policy.load_state_dict(weights)
    except (RuntimeError, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {POLICY_ENTRY} does not fit the network its {METADATA_ENTRY} describes "
            f"({one_line(exc)})"
        ) from exc
    return LoadedPolicy(policy, metadata)


def load_training_state(model: BaseAlgorithm, path: str | Path, variant: Variant | None = None) -> dict[str, Any]:
    """Load the checkpoint at ``path`` into ``model``, a learner freshly built from the same config: the
    policy's and the optimizer's state (read as weights, never unpickled) and the step count. Returns the
    metadata; :class:`CheckpointError` as :func:`load_policy`."""
    metadata = read_metadata(path)
    check_algorithm(path, metadata, "ppo")
    trained_variant(path, metadata, variant)
    parameters = {entry.removesuffix(".pth"): read_weights(path, entry) for entry in (POLICY_ENTRY, OPTIMIZER_ENTRY)}
    try:
        model.set_parameters(parameters, exact_match=True, device="cpu")
    except (RuntimeError, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} does not fit this run's learner ({one_line(exc)})") from exc
    model.num_timesteps = int(metadata["num_timesteps"])
    model._n_updates = _saved_update_count(path)
    return metadata


def policy_spaces(variant: Variant, observation: str) -> tuple[spaces.Box, spaces.Discrete]:
    """The observation and action spaces of a policy for ``variant`` and the ``observation`` kind (those of the
    trainer's environment)."""
    return (
        spaces.Box(0, 1, shape=observation_kind(observation).shape, dtype=np.int8),
        spaces.Discrete(variant.num_actions),
    )


def inference_policy(policy_class: type[MaskableActorCriticPolicy], **parameters: Any) -> MaskableActorCriticPolicy:
    """A ``policy_class`` network built with ``parameters`` to receive trained weights: without orthogonal
    initialisation (it costs a QR per layer, and the weights are overwritten), in evaluation mode, without
    gradients."""
    policy = policy_class(**{**parameters, "ortho_init": False})
    policy.set_training_mode(False)
    policy.requires_grad_(False)
    return policy


def trained_variant(path: str | Path, metadata: dict[str, Any], variant: Variant | None) -> Variant:
    """The rule variant the checkpoint at ``path`` was trained for; with ``variant``, :class:`CheckpointError` if
    it is another."""
    trained_for = Variant.make(**metadata["variant"])
    if variant is not None and trained_for != variant:
        raise CheckpointError(
            f"checkpoint {str(path)!r} was trained for rule variant {trained_for.describe()!r}, "
            f"not {variant.describe()!r}"
        )
    return trained_for


def _policy_for(path: str | Path, metadata: dict[str, Any], variant: Variant) -> MaskableActorCriticPolicy:
    """The untrained network that the checkpoint's training config describes."""
    config = metadata.get("config")
    if not isinstance(config, dict) or not {"policy", "net_arch"} <= set(config):
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {METADATA_ENTRY} describes no network (its config has no policy and net_arch)"
        )
    try:
        net_arch = check_network(config["policy"], config["net_arch"])
        policy_class, policy_kwargs = policy_setup(config["policy"], variant, net_arch, metadata["observation"])
        observation_space, action_space = policy_spaces(variant, metadata["observation"])
        return inference_policy(
            policy_class,
            observation_space=observation_space,
            action_space=action_space,
            lr_schedule=_no_learning,
            **policy_kwargs,
        )
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {METADATA_ENTRY} describes no valid policy ({one_line(exc)})"
        ) from exc


def check_network(policy: object, net_arch: object) -> list[int]:
    """``net_arch`` as the layer sizes of a ``policy`` network: for ``mlp`` 1 to :data:`MAX_LAYERS` sizes, for
    ``slots`` one width, each an integer from 1 to :data:`MAX_WIDTH`; ``ValueError`` saying what is allowed."""
    if policy not in POLICY_KINDS:
        raise ValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICY_KINDS)}")
    layers = 1 if policy == "slots" else MAX_LAYERS
    if (
        not isinstance(net_arch, list)
        or not 1 <= len(net_arch) <= layers
        or not all(type(size) is int and 1 <= size <= MAX_WIDTH for size in net_arch)
    ):
        shape = "[width]" if policy == "slots" else f"a list of 1 to {MAX_LAYERS} layer sizes"
        raise ValueError(f"net_arch of a {policy} network must be {shape}, each 1 to {MAX_WIDTH}, got {net_arch!r}")
    return net_arch


def _no_learning(progress_remaining: float) -> float:
    del progress_remaining  # Unused: a loaded policy only plays.
    return 0.0


def _saved_update_count(path: str | Path) -> int:
    """stable-baselines3's count of gradient updates, read from its ``data`` entry as plain JSON (its pickled
    values stay unread); 0 where there is none."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (KeyError, zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError):
        return 0
    count = data.get("_n_updates") if isinstance(data, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def _refusal(exc: pickle.UnpicklingError) -> str:
    """torch's reason for refusing a file, without its advice to load it with ``weights_only=False``."""
    for line in str(exc).splitlines():
        if "WeightsUnpickler error:" in line:
            return line.split("WeightsUnpickler error:", 1)[1].split(" was not an allowed global")[0].strip()
    return "not a torch weights file"


# ---------------------------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------------------------
def use_one_thread() -> None:
    """Run torch on one thread, as the agents that load a checkpoint do: their forward passes are on a batch of one
    position, where more threads only wait on each other. Measured on the 2-core machine, busy with a training
    run: a ``ppo`` move took 12.5 ms on two threads and 1.0 ms on one; an ``az`` move of 200 simulations 34 s
    and 0.6 s."""
    th.set_num_threads(1)


class PPOAgent(Agent):
    """Plays the policy of a checkpoint: ``ppo:PATH`` (``ppo:path=PATH,deterministic=false`` to sample).

    ``PATH`` may also be a run folder, meaning its ``checkpoints/best.zip``. Loading sets torch to one thread
    (:func:`use_one_thread`).
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
        loaded = load_policy(checkpoint, variant)
        use_one_thread()
        self.policy = loaded.policy
        self.observation = loaded.observation
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
