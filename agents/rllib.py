"""Networks trained by RLlib's PPO (``quarto train`` with ``backend: rllib``) and the ``rllib:PATH`` agent.

The network, :class:`agents.networks.policy_value.ActorCritic`, is a plain torch module -- no ray needed to play it.
During training it lives inside an RLlib ``RLModule`` (:mod:`experiments.training.rllib_ppo`).

Checkpoints
-----------
RLlib's own checkpoints hold pickled objects, so the trainer exports its own: a zip of ``quarto.json`` (format,
``algorithm: rllib-ppo``, ``backend: rllib``, variant, observation, ``env_kwargs``, learner steps, the
training config, library versions) and ``network.pth``, the network's ``state_dict``; ``latest.zip`` and
``final.zip`` add ``pool.pt`` (the frozen past selves) and ``optimizer.pth`` (``main``'s Adam state), for
``--resume``. Everything is read as data:
:func:`load_network` rebuilds the network from ``quarto.json`` and reads the weights with
``torch.load(weights_only=True)`` (:func:`agents.networks.checkpoints.read_weights`). A missing, damaged or foreign file
is a :class:`agents.networks.checkpoints.CheckpointError` naming the file and the problem; a checkpoint of MaskablePPO
or AlphaZero names the agent kind that plays it. The weights are saved from CPU copies and loaded onto the ``device``
asked for (``rllib:PATH,device=auto``; :func:`agents.networks.policy_value.resolve_device`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch as th

from agents.networks.checkpoints import (
    CheckpointHeader,
    checkpoint_metadata,
    read_weights,
    weights_fit,
    write_checkpoint,
)
from agents.networks.policy_value import DEFAULT_DEVICE, ActorCritic, network_actions, network_for, resolve_device
from agents.trained import TrainedAgent
from quarto_env.core import State, Variant
from quarto_env.observation import observation_kind
from quarto_env.vector import GameBatch

ALGORITHM = "rllib-ppo"
"""``algorithm`` in the ``quarto.json`` of these checkpoints (the config's own is ``ppo``, ``backend: rllib``)."""
NETWORK_ENTRY = "network.pth"
SNAPSHOTS_ENTRY = "snapshots.pth"
"""The frozen past selves (``{"steps": [...], "weights": [state_dict, ...]}``), in ``latest.zip`` and ``final.zip``."""
OPTIMIZER_ENTRY = "optimizer.pth"
"""``main``'s optimizer state (per optimizer, the per-parameter buffers of its ``state_dict``: Adam's ``step``,
``exp_avg``, ``exp_avg_sq``), in ``latest.zip`` and ``final.zip``, for ``--resume``."""


# ---------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------
def save_checkpoint(
    path: Path,
    weights: dict[str, th.Tensor],
    header: CheckpointHeader,
    metadata: dict[str, Any],
    extras: dict[str, Any] | None = None,
) -> None:
    """Write the network's ``weights`` (and ``extras``, each a ``torch.save``-able entry of tensors and plain
    data) with their metadata, atomically, to the zip ``path``."""
    entries = {NETWORK_ENTRY: weights, **(extras or {})}
    write_checkpoint(path, ALGORITHM, header, {"backend": "rllib", **metadata}, entries)


def load_network(
    path: str | Path,
    variant: Variant | None = None,
    device: str = DEFAULT_DEVICE,
    metadata: dict[str, Any] | None = None,
) -> tuple[ActorCritic, dict[str, Any]]:
    """The network of an rllib checkpoint (a zip, or a run folder for its final checkpoint, else its latest), read
    as data, in evaluation mode, on ``device``, and its metadata (``metadata``: already read,
    :func:`~agents.networks.checkpoints.checkpoint_metadata`). With ``variant``, a checkpoint trained for another rule
    variant is refused. Every failure of the file is a :class:`CheckpointError` naming it (``ValueError`` for ``cuda``
    without a GPU)."""
    on_device = resolve_device(device)
    path, metadata, trained = checkpoint_metadata(path, ALGORITHM, variant, metadata)
    with weights_fit(path, NETWORK_ENTRY):
        network = network_for(metadata["config"], observation_kind(metadata["observation"]), trained)
        network.load_state_dict(read_weights(path, NETWORK_ENTRY))
    network.eval()
    network.requires_grad_(False)
    return network.to(on_device), metadata


# ---------------------------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------------------------
class RLlibAgent(TrainedAgent):
    """Plays the network of an rllib checkpoint: ``rllib:PATH`` (a ``.zip``, or a run folder for its
    ``checkpoints/final.zip``; ``deterministic=false`` samples; ``device=auto`` or ``cuda`` runs it on a GPU).
    Loading sets torch to one thread."""

    kind_name = "rllib"

    def load(self, path: str, device: str) -> str:
        self.network, metadata = load_network(path, self.variant, device)
        return str(metadata["observation"])

    def act(self, state: State) -> int:
        batch = GameBatch.from_states(self.variant, [state])
        games = batch.all_games
        masks = batch.action_masks(games, false_declarations=False)
        return int(network_actions(self.network, batch.observe(games, self.kind), masks, self.deterministic)[0])
