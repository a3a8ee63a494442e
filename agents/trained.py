"""What every agent that plays a trained checkpoint shares (``ppo:PATH``, ``rllib:PATH``): the options, the
refusal of a missing path, the shipped networks (``ppo:pretrained``), one torch thread, the seed, and a first
move played at once.

A subclass reads its own checkpoint format in :meth:`TrainedAgent.load` and plays in ``act``.
"""

from __future__ import annotations

from abc import abstractmethod

import torch as th

from agents.base import Agent
from agents.networks.checkpoints import CheckpointError
from agents.networks.policy_value import DEFAULT_DEVICE, use_one_thread
from agents.networks.pretrained import pretrained_path
from quarto_env.core import INITIAL_STATE, STANDARD, Variant
from quarto_env.observation import observation_kind


class TrainedAgent(Agent):
    """Plays the network of the checkpoint at ``path`` (a ``.zip``, or a run folder for the checkpoint the spec's
    ``checkpoint=`` names), on ``device``, its most likely action (``deterministic``) or a sample."""

    kind_name = ""
    """The agent kind's name, as specs write it (``ppo``, ``rllib``)."""

    def __init__(
        self,
        variant: Variant = STANDARD,
        seed: int | None = None,
        path: str = "",
        deterministic: bool = True,
        device: str = DEFAULT_DEVICE,
    ) -> None:
        super().__init__(variant, seed)
        if not path:
            name = self.kind_name
            raise CheckpointError(f"the {name} agent needs a checkpoint: {name}:PATH (a .zip, or a run folder)")
        observation = self.load(pretrained_path(path, self.kind_name, variant), device)
        use_one_thread()
        self.kind = observation_kind(observation)
        self.deterministic = deterministic
        if seed is not None:
            th.manual_seed(seed)
        # The first move loads the compiled kernels and warms torch up: done here, so that it is not charged to
        # a timed move.
        self.act(INITIAL_STATE)

    @abstractmethod
    def load(self, path: str, device: str) -> str:
        """Read the checkpoint at ``path`` onto ``device`` (as data, never unpickled); returns the name of the
        observation kind its network reads."""
