"""Agents trained with MaskablePPO: the SB3 policy over the slots network, its checkpoints, and :class:`PPOAgent`.

A MaskablePPO checkpoint is the ``.zip`` file that stable-baselines3 writes, with the project's
``quarto.json`` added (:mod:`agents.networks.checkpoints`). :func:`load_policy` rebuilds the network from that
metadata and loads ``policy.pth`` as weights; resuming (:func:`load_training_state`) reads the optimizer's
state the same way and the step count from ``quarto.json``. stable-baselines3's ``data`` entry, which holds
cloudpickled objects, is never deserialized. A stable-baselines3 zip opened with SB3's own
``MaskablePPO.load`` unpickles code, so only load zips you trust that way.

A checkpoint's weights are saved from CPU copies and loaded onto the ``device`` asked for (``cpu`` by default;
:func:`agents.networks.policy_value.resolve_device`), so a checkpoint trained on a GPU plays on a CPU and the reverse.

The ``slots`` policy (:class:`SlotPolicy`) is :class:`agents.networks.policy_value.SlotNetwork` as SB3's
``mlp_extractor``.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn

from agents.base import Agent
from agents.networks.checkpoints import (
    CHECKPOINT_FORMAT,
    METADATA_ENTRY,
    CheckpointError,
    CheckpointHeader,
    checkpoint_bytes,
    checkpoint_metadata,
    library_versions,
    read_weights,
    saved_bytes,
    weights_fit,
)
from agents.networks.policy_value import (
    DEFAULT_DEVICE,
    POLICY_KINDS,
    SlotNetwork,
    check_network,
    choose_actions,
    resolve_device,
)
from agents.storage.files import atomic_write_bytes
from agents.storage.integrity import ARCHIVE_DAMAGE
from agents.trained import TrainedAgent
from quarto_env.checks import one_line
from quarto_env.core import State, Variant, checked_variant
from quarto_env.errors import QuartoValueError
from quarto_env.observation import ObservationKind, observation_kind
from quarto_env.vector import GameBatch

POLICY_ENTRY = "policy.pth"
"""stable-baselines3's entry holding the policy's ``state_dict``."""
OPTIMIZER_ENTRY = "policy.optimizer.pth"


# ---------------------------------------------------------------------------------------------------------
# The slots network
# ---------------------------------------------------------------------------------------------------------


class SlotPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy whose body is a :class:`SlotNetwork`.

    :param groups: the rule variant's groups (``Variant.groups``), for the square-group message passing
    :param observation: the observation kind (:mod:`quarto_env.observation`): which channels describe squares
    :param width: the width of every slot embedding and hidden layer
    """

    def __init__(
        self, *args: Any, groups: list[int], observation: ObservationKind, width: int = 64, **kwargs: Any
    ) -> None:
        self.groups = list(groups)
        self.kind = observation
        self.width = width
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        actions = int(cast(spaces.Discrete, self.action_space).n)  # the env's Discrete(16) or Discrete(17)
        self.mlp_extractor = SlotNetwork(self.kind, self.groups, actions, self.width)  # type: ignore[assignment]

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        # The network already ends in one logit per action: no extra linear layer mixing them.
        self.action_net = nn.Identity()  # type: ignore[assignment]
        network = cast(SlotNetwork, self.mlp_extractor)  # built by _build_mlp_extractor above
        if self.ortho_init:
            for head in (network.score_square, network.score_piece):
                nn.init.orthogonal_(head.out.weight, gain=0.01)  # a near-uniform initial policy, as SB3 does
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(groups=self.groups, observation=self.kind, width=self.width)
        return data


def policy_setup(
    policy: str, variant: Variant, net_arch: list[int], observation: ObservationKind
) -> tuple[type, dict[str, Any]]:
    """The policy class and ``policy_kwargs`` for MaskablePPO: ``net_arch`` gives the MLP's layers, or for
    ``slots`` its width (the first entry)."""
    if policy == "mlp":
        return MaskableActorCriticPolicy, {"net_arch": list(net_arch)}
    if policy == "slots":
        return SlotPolicy, {"groups": list(variant.groups), "observation": observation, "width": net_arch[0]}
    raise QuartoValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICY_KINDS)}")


# ---------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------


def save_checkpoint(
    path: str | Path,
    model: BaseAlgorithm,
    header: CheckpointHeader,
    metadata: dict[str, Any],
    extras: dict[str, bytes] | None = None,
) -> None:
    """Write ``model`` with ``header`` and ``metadata`` to ``path``; ``extras`` are more zip entries (the trainer
    stores its opponent pool there). The weights are saved from CPU copies, wherever the model runs."""
    saved = io.BytesIO()
    model.save(saved)
    weights = {f"{name}.pth": saved_bytes(state) for name, state in model.get_parameters().items()}
    full = {"format": CHECKPOINT_FORMAT, **header.fields(), "versions": library_versions(), **metadata}
    with zipfile.ZipFile(saved) as archive:
        entries = {name: weights.get(name) or archive.read(name) for name in archive.namelist()}
    entries[METADATA_ENTRY] = json.dumps(full, indent=2, default=str).encode()
    atomic_write_bytes(Path(path), checkpoint_bytes({**entries, **(extras or {})}))


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


def load_policy(path: str | Path, variant: Variant | None = None, device: str = DEFAULT_DEVICE) -> LoadedPolicy:
    """The policy of the checkpoint at ``path`` (or of a run folder's ``checkpoints/final.zip``, as ``ppo:RUN``
    plays: :func:`agents.networks.checkpoints.checkpoint_path`), rebuilt from its metadata and loaded with
    ``policy.pth`` read as weights: nothing in the file is unpickled, so nothing in it runs. With ``variant``, a
    checkpoint trained for another rule variant is refused. The policy runs on ``device`` (``auto``, ``cpu`` or
    ``cuda``; ``ValueError`` for ``cuda`` without a GPU). Every failure of the file is a :class:`CheckpointError` naming
    it."""
    on_device = resolve_device(device)
    path, metadata, trained = checkpoint_metadata(path, "ppo", None if variant is None else checked_variant(variant))
    policy = _policy_for(path, metadata, trained)
    weights = read_weights(path, POLICY_ENTRY)
    with weights_fit(path, POLICY_ENTRY):
        policy.load_state_dict(weights)
    return LoadedPolicy(policy.to(on_device), metadata)


def load_training_state(
    model: BaseAlgorithm, path: str | Path, variant: Variant | None = None, metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Load the checkpoint at ``path`` into ``model``, a learner freshly built from the same config: the
    policy's and the optimizer's state (read as weights, never unpickled) and the step count. Returns the
    metadata (``metadata``: already read, :func:`~agents.networks.checkpoints.checkpoint_metadata`);
    :class:`CheckpointError` as :func:`load_policy`."""
    path, metadata, _ = checkpoint_metadata(path, "ppo", variant, metadata)
    parameters = {entry.removesuffix(".pth"): read_weights(path, entry) for entry in (POLICY_ENTRY, OPTIMIZER_ENTRY)}
    try:
        model.set_parameters(parameters, exact_match=True, device=model.device)
    except (RuntimeError, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} does not fit this run's learner ({one_line(exc)})") from exc
    model.num_timesteps = int(metadata["num_timesteps"])
    model._n_updates = _saved_update_count(path)
    return metadata


def policy_spaces(variant: Variant, kind: ObservationKind) -> tuple[spaces.Box, spaces.Discrete]:
    """The observation and action spaces of a policy for ``variant`` and the observation ``kind`` (those of the
    trainer's environment)."""
    return (
        spaces.Box(0, 1, shape=kind.shape, dtype=np.int8),
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


def _policy_for(path: str | Path, metadata: dict[str, Any], variant: Variant) -> MaskableActorCriticPolicy:
    """The untrained network that the checkpoint's training config describes."""
    config = metadata.get("config")
    if not isinstance(config, dict) or not {"policy", "net_arch"} <= set(config):
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {METADATA_ENTRY} describes no network (its config has no policy and net_arch)"
        )
    try:
        net_arch = check_network(config["policy"], config["net_arch"])
        kind = observation_kind(metadata["observation"])
        policy_class, policy_kwargs = policy_setup(config["policy"], variant, net_arch, kind)
        observation_space, action_space = policy_spaces(variant, kind)
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


def _no_learning(progress_remaining: float) -> float:
    del progress_remaining  # Unused: a loaded policy only plays.
    return 0.0


def _saved_update_count(path: str | Path) -> int:
    """stable-baselines3's count of gradient updates, read from its ``data`` entry as plain JSON (its pickled
    values stay unread); 0 where there is none."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except ARCHIVE_DAMAGE:
        return 0
    count = data.get("_n_updates") if isinstance(data, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


# ---------------------------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------------------------


class PPOAgent(TrainedAgent):
    """Plays the policy of a checkpoint: ``ppo:PATH`` (``ppo:path=PATH,deterministic=false`` to sample).

    ``PATH`` may also be a run folder, meaning its ``checkpoints/final.zip`` (``checkpoint=best``: its
    ``best.zip``). The network runs on ``device`` (``ppo:PATH,device=auto``;
    :func:`agents.networks.policy_value.resolve_device`). Loading sets torch to one thread (:func:`use_one_thread`).
    """

    kind_name = "ppo"

    def load(self, path: str, device: str) -> str:
        loaded = load_policy(path, self.variant, device)
        self.policy = loaded.policy
        return loaded.observation

    @classmethod
    def from_policy(
        cls, policy: MaskableActorCriticPolicy, variant: Variant, kind: ObservationKind, deterministic: bool = True
    ) -> PPOAgent:
        """An agent that plays a live policy (the learner's, during training) rather than a checkpoint."""
        agent = cls.__new__(cls)
        Agent.__init__(agent, variant)
        agent.policy, agent.kind, agent.deterministic = policy, kind, deterministic
        agent.spec = "learner"
        return agent

    def act(self, state: State) -> int:
        batch = GameBatch.from_states(self.variant, [state])
        games = batch.all_games
        return int(self.act_batch(batch.observe(games, self.kind), batch.action_masks(games, False))[0])

    def act_batch(self, observations: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Actions for a batch of observations and legal-action masks, in one forward pass."""
        return policy_actions(self.policy, observations, masks, self.deterministic)


def policy_logits(policy: MaskableActorCriticPolicy, observations: th.Tensor) -> th.Tensor:
    """The action logits of ``policy`` (before masking), the same ones its action distribution uses."""
    features = cast(th.Tensor, policy.extract_features(observations))  # one shared features extractor
    return policy.action_net(policy.mlp_extractor.forward_actor(features))


def policy_actions(
    policy: MaskableActorCriticPolicy, observations: np.ndarray, masks: np.ndarray, deterministic: bool
) -> np.ndarray:
    """The actions ``policy`` picks for a batch of observations under legal-action ``masks``: one forward pass on
    the policy's device."""
    planes = th.as_tensor(observations, dtype=th.float32, device=policy.device)
    with th.no_grad():
        return choose_actions(policy_logits(policy, planes), masks, deterministic)
