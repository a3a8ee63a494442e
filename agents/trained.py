"""What every agent that plays a trained checkpoint shares (``ppo:PATH``, ``rllib:PATH``): the options, the
refusal of a missing path, one torch thread, the seed, and a first move played at once. And ``az:PATH``'s
builder, :func:`alphazero_agent`, which reads a checkpoint of either AlphaZero backend, torch or JAX.

A subclass reads its own checkpoint format in :meth:`TrainedAgent.load` and plays in ``act``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch as th

from agents.base import DEFAULT_SEARCH_SIMULATIONS, Agent
from agents.checkpoints import CheckpointError, checkpoint_backend, checkpoint_path, read_metadata
from agents.gumbel_root import DEFAULT_GUMBEL_ACTIONS
from agents.networks import DEFAULT_DEVICE, use_one_thread
from quarto_env.core import INITIAL_STATE, STANDARD, Variant
from quarto_env.extras import require
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
        observation = self.load(path, device)
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


def alphazero_agent(
    variant: Variant = STANDARD,
    seed: int | None = None,
    path: str = "",
    sims: int = DEFAULT_SEARCH_SIMULATIONS,
    time: float = 0.0,
    temperature: float = 0.0,
    c: float = 1.5,  # agents.puct.DEFAULT_C_PUCT, not imported here: that module loads the search's kernels
    device: str = DEFAULT_DEVICE,
    root: str = "puct",
    k: int = DEFAULT_GUMBEL_ACTIONS,
) -> Agent:
    """The ``az:PATH`` agent (:class:`agents.alphazero.AlphaZeroAgent`, whose options these are) for the network
    of either AlphaZero backend: the checkpoint's ``backend`` (:func:`agents.checkpoints.checkpoint_backend`) picks
    the reader -- torch's, on ``device``, or JAX's (the ``jax`` extra), which runs on the CPU whatever ``device``
    says -- and the project's search plays it alike."""
    from agents.alphazero import AlphaZeroAgent  # here: the agent loads the search's kernels

    options: dict[str, Any] = {"sims": sims, "time": time, "temperature": temperature, "c": c, "root": root, "k": k}
    if path and checkpoint_backend(read_metadata(checkpoint_path(path))) == "jax":
        require("jax", f"playing the JAX checkpoint {path!r}")  # one line naming the extra where it is missing
        from agents.jax_network import JaxEvaluator, load_network

        network = JaxEvaluator(load_network(path, variant)[0])
        return AlphaZeroAgent(variant, seed, network=network, **options)  # type: ignore[arg-type]
    return AlphaZeroAgent(variant, seed, path=path, device=device, **options)
