"""Networks trained by RLlib's PPO (``quarto train`` with ``backend: rllib``) and the ``rllib:PATH`` agent.

The network
-----------
:class:`ActorCritic` is a plain torch module -- no ray needed to play it -- mapping the flat planes of
:func:`quarto_env.flat.flat_env` (``observations``, ``channels * 16`` floats) to action logits and a value. Its
body is the config's ``policy``: ``slots`` reuses :class:`agents.ppo.SlotNetwork` (the SB3 path's network) with a
linear value head, ``mlp`` is two tanh MLPs of ``net_arch`` (policy and value), like stable-baselines3's.
During training it lives inside an RLlib ``RLModule`` (``experiments.rllib_train``).

Checkpoints
-----------
RLlib's own checkpoints hold pickled objects, so the trainer exports its own: a zip of ``quarto.json`` (format,
``algorithm: rllib-ppo``, ``backend: rllib``, variant, observation, ``env_kwargs``, learner steps, the
training config, library versions) and ``network.pth``, the network's ``state_dict``; ``latest.zip`` and
``final.zip`` add ``snapshots.pth`` (the frozen past selves, for ``--resume``). Everything is read as data:
:func:`load_network` rebuilds the network from ``quarto.json`` and reads the weights with
``torch.load(weights_only=True)`` (:func:`agents.ppo.read_weights`). A missing, damaged or foreign file is a
:class:`agents.ppo.CheckpointError` naming the file and the problem; a checkpoint of MaskablePPO or AlphaZero
names the agent kind that plays it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from torch import nn

from agents.alphazero import checkpoint_path
from agents.base import Agent
from agents.ppo import (
    METADATA_ENTRY,
    CheckpointError,
    SlotNetwork,
    check_algorithm,
    check_network,
    choose_actions,
    read_metadata,
    read_weights,
    trained_variant,
    use_one_thread,
    write_checkpoint,
)
from quarto_env.checks import one_line
from quarto_env.core import INITIAL_STATE, NUM_SQUARES, STANDARD, State, Variant
from quarto_env.observation import observation_kind
from quarto_env.vector import GameBatch

ALGORITHM = "rllib-ppo"
"""``algorithm`` in the ``quarto.json`` of these checkpoints (the config's own is ``ppo``, ``backend: rllib``)."""
NETWORK_ENTRY = "network.pth"
SNAPSHOTS_ENTRY = "snapshots.pth"
"""The frozen past selves (``{"steps": [...], "weights": [state_dict, ...]}``), in ``latest.zip`` and ``final.zip``."""


class ActorCritic(nn.Module):
    """Action logits (before masking) and a value from the flat planes of an ``observation`` kind."""

    def __init__(self, policy: str, net_arch: list[int], observation: str, variant: Variant) -> None:
        super().__init__()
        kind = observation_kind(observation)
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
            last = self.policy_net[-1]
            assert isinstance(last, nn.Linear)
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
    layers: list[nn.Module] = []
    for size in hidden:
        layers += [nn.Linear(inputs, size), nn.Tanh()]
        inputs = size
    return nn.Sequential(*layers, nn.Linear(inputs, outputs))


def network_for(config: dict[str, Any], observation: str, variant: Variant) -> ActorCritic:
    """The untrained network of a training ``config`` (its ``policy`` and ``net_arch``)."""
    return ActorCritic(config["policy"], check_network(config["policy"], config["net_arch"]), observation, variant)


def network_actions(
    network: ActorCritic, observations: np.ndarray, masks: np.ndarray, deterministic: bool
) -> np.ndarray:
    """The actions ``network`` picks for a batch of planes (any shape ``(n, channels, 16)`` or flat) under
    legal-action ``masks``: its most likely legal action, or one sampled from the masked softmax."""
    flat = th.as_tensor(observations, dtype=th.float32).reshape(len(observations), -1)
    with th.no_grad():
        return choose_actions(network.logits(flat), masks, deterministic)


# ---------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------
def save_checkpoint(
    path: Path,
    weights: dict[str, th.Tensor],
    variant: Variant,
    observation: str,
    num_timesteps: int,
    metadata: dict[str, Any],
    extras: dict[str, Any] | None = None,
) -> None:
    """Write the network's ``weights`` (and ``extras``, each a ``torch.save``-able entry of tensors and plain
    data) with their metadata, atomically, to the zip ``path``."""
    entries = {NETWORK_ENTRY: weights, **(extras or {})}
    write_checkpoint(path, ALGORITHM, variant, observation, num_timesteps, {"backend": "rllib", **metadata}, entries)


def load_network(path: str | Path, variant: Variant | None = None) -> tuple[ActorCritic, dict[str, Any]]:
    """The network of an rllib checkpoint (a zip, or a run folder for its final checkpoint), read as data, in
    evaluation mode, and its metadata. With ``variant``, a checkpoint trained for another rule variant is
    refused. Every failure is a :class:`CheckpointError` naming the file."""
    path = checkpoint_path(path)
    metadata = read_metadata(path)
    check_algorithm(path, metadata, ALGORITHM)
    trained = trained_variant(path, metadata, variant)
    try:
        network = network_for(metadata["config"], metadata["observation"], trained)
        network.load_state_dict(read_weights(path, NETWORK_ENTRY))
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {NETWORK_ENTRY} does not fit the network its {METADATA_ENTRY} describes "
            f"({one_line(exc)})"
        ) from exc
    network.eval()
    network.requires_grad_(False)
    return network, metadata


# ---------------------------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------------------------
class RLlibAgent(Agent):
    """Plays the network of an rllib checkpoint: ``rllib:PATH`` (a ``.zip``, or a run folder for its
    ``checkpoints/final.zip``; ``deterministic=false`` samples). Loading sets torch to one thread."""

    def __init__(
        self, variant: Variant = STANDARD, seed: int | None = None, path: str = "", deterministic: bool = True
    ) -> None:
        super().__init__(variant, seed)
        if not path:
            raise CheckpointError("the rllib agent needs a checkpoint: rllib:PATH (a .zip, or a run folder)")
        self.network, metadata = load_network(path, variant)
        use_one_thread()
        self.observation: str = metadata["observation"]
        self.deterministic = deterministic
        if seed is not None:
            th.manual_seed(seed)
        self.act(INITIAL_STATE)  # warm torch and the compiled kernels up before any timed move

    def act(self, state: State) -> int:
        batch = GameBatch.from_states(self.variant, [state])
        games = batch.all_games
        masks = batch.action_masks(games, false_declarations=False)
        return int(network_actions(self.network, batch.observe(games, self.observation), masks, self.deterministic)[0])
