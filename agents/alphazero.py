"""The ``az:PATH`` agent: a network trained by ``quarto train --config configs/alphazero.yaml``, playing with
the search of :mod:`agents.tree.puct` (its PUCT root, or with ``az:PATH,root=gumbel,k=16`` its Gumbel root) on a
:class:`agents.tree.session_base.PUCTSession` per move, and its
checkpoints (``algorithm: alphazero`` in :mod:`agents.networks.checkpoints`' format: ``network.pth``, and for resuming
``optimizer.pth`` and the replay buffer). The network runs on the ``device`` asked for (``az:PATH,device=auto``;
:func:`agents.networks.policy_value.resolve_device`), its checkpoints are device-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Agent
from agents.networks.checkpoints import (
    CheckpointError,
    CheckpointHeader,
    checkpoint_backend,
    checkpoint_metadata,
    checkpoint_path,
    read_metadata,
    read_weights,
    weights_fit,
    write_checkpoint,
)
from agents.networks.policy_value import (
    DEFAULT_DEVICE,
    PolicyValueNetwork,
    network_from_description,
    resolve_device,
    use_one_thread,
)
from agents.networks.pretrained import pretrained_path
from agents.specs import DEFAULT_PUCT_SIMULATIONS, MAX_PUCT_SIMULATIONS
from agents.tree.choices import DEFAULT_C_PUCT, ROOTS, simulations_per_move
from agents.tree.gumbel_root import DEFAULT_GUMBEL_ACTIONS, GumbelRoot
from agents.tree.leaf_batch import LeafBatch
from agents.tree.puct import PUCTResult, PUCTSearch, forced_action
from agents.tree.session_base import PUCTSession
from quarto_env.core import (
    NUM_ACTIONS,
    STANDARD,
    State,
    Variant,
    compiled_fields,
    position_array,
)
from quarto_env.errors import QuartoValueError
from quarto_env.extras import require
from quarto_env.observation import encode_observation, observation_kind

ALGORITHM = "alphazero"
"""The ``algorithm`` a checkpoint of this module records in its ``quarto.json``."""
NETWORK_ENTRY = "network.pth"
OPTIMIZER_ENTRY = "optimizer.pth"


# ---------------------------------------------------------------------------------------------------------
# The network
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# Rules shortcuts, shared by the tree and the agent
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# The batched search
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------
def save_checkpoint(
    path: Path,
    network: PolicyValueNetwork,
    header: CheckpointHeader,
    metadata: dict[str, Any],
    extras: dict[str, bytes] | None = None,
) -> None:
    """Write the network (and ``extras``: the optimizer, the replay buffer) atomically to the zip ``path``."""
    metadata = {"network": network.describe(), **metadata}
    entries = {NETWORK_ENTRY: network.state_dict(), **(extras or {})}
    write_checkpoint(path, ALGORITHM, header, metadata, entries)


def load_network_of_either_backend(path: str, variant: Variant, device: str) -> PolicyValueNetwork:
    """The network of an ``alphazero`` checkpoint of either backend, as :class:`AlphaZeroAgent` plays it: the
    checkpoint's ``backend`` (:func:`agents.networks.checkpoints.checkpoint_backend`) picks the reader -- torch's, on
    ``device`` with one torch thread, or JAX's (the ``jax`` extra), which runs on the CPU whatever ``device``
    says."""
    if checkpoint_backend(read_metadata(checkpoint_path(path))) == "jax":
        require("jax", f"playing the JAX checkpoint {path!r}")  # one line naming the extra where it is missing
        from agents.networks.jax_network import JaxEvaluator
        from agents.networks.jax_network import load_network as load_jax_network

        return JaxEvaluator(load_jax_network(path, variant)[0])  # type: ignore[return-value]
    network, _ = load_network(path, variant, device)
    use_one_thread()  # given a network, as in training, the caller's setting stands
    return network


def load_network(
    path: str | Path,
    variant: Variant | None = None,
    device: str = DEFAULT_DEVICE,
    metadata: dict[str, Any] | None = None,
) -> tuple[PolicyValueNetwork, dict[str, Any]]:
    """The network of an ``alphazero`` checkpoint (read as data; a run folder means its final checkpoint, else its
    latest) on ``device``, and its metadata (``metadata``: already read, :func:`checkpoint_metadata`);
    :class:`CheckpointError` for a missing or damaged file, another algorithm's checkpoint, or one trained for
    another rule variant (``ValueError`` for ``cuda`` without a GPU)."""
    on_device = resolve_device(device)
    path, metadata, trained = checkpoint_metadata(path, ALGORITHM, variant, metadata)
    shape = metadata.get("network")
    with weights_fit(path, NETWORK_ENTRY):
        if not isinstance(shape, dict):
            raise ValueError(f"its network entry is {shape!r}, not a mapping with a width")
        kind = observation_kind(metadata["observation"])
        # Checkpoints written before a field of the description existed lack it: it means the old default.
        network = network_from_description(shape, kind, list(trained.groups))
        network.load_state_dict(read_weights(path, NETWORK_ENTRY))
    network.eval()
    return network.to(on_device), metadata


# ---------------------------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------------------------
class AlphaZeroAgent(Agent):
    """Plays a network with the search: ``az:PATH`` (a checkpoint, or a run folder for its final checkpoint).

    :param sims: simulations per move (:data:`~agents.specs.DEFAULT_PUCT_SIMULATIONS` when ``None``; not with
        ``time``); 0 plays the network's most likely action among the search's candidates
        (the raw policy, with the one-ply rules shortcuts).
    :param time: seconds per move; when above 0 it replaces ``sims`` (at least one simulation).
    :param temperature: 0 plays the most visited action; above 0 samples actions in proportion to
        ``visits ** (1 / temperature)`` (the policy's probabilities with ``sims=0``). With ``root="gumbel"``: 0
        searches without noise and plays the search's choice; above 0 draws the Gumbel noise at this scale.
    :param c: the PUCT exploration constant.
    :param root: ``puct`` or ``gumbel`` (:data:`ROOTS`): the Gumbel root spends ``sims`` by sequential halving over
        the ``k`` best candidates and plays its :attr:`~agents.tree.puct.PUCTResult.chosen` (it takes ``sims``, not
        ``time``).
    :param k: the most candidates the Gumbel root considers (:data:`~agents.tree.gumbel_root.DEFAULT_GUMBEL_ACTIONS`
        when ``None``); only with ``root="gumbel"``.
    :param device: where a loaded network runs: ``cpu``, ``cuda`` or ``auto`` (a ``network`` given stays where it is).

    Loading a checkpoint sets torch to one thread (:func:`agents.networks.policy_value.use_one_thread`).
    """

    def __init__(
        self,
        variant: Variant = STANDARD,
        seed: int | None = None,
        path: str = "",
        sims: int | None = None,
        time: float = 0.0,
        temperature: float = 0.0,
        c: float = DEFAULT_C_PUCT,
        network: PolicyValueNetwork | None = None,
        device: str = DEFAULT_DEVICE,
        root: str = "puct",
        k: int | None = None,
    ) -> None:
        super().__init__(variant, seed)
        if root not in ROOTS:
            raise QuartoValueError(f"root must be one of {', '.join(ROOTS)}, got {root!r}")
        if root == "gumbel" and time:
            raise QuartoValueError("root=gumbel plans its phases for a number of simulations: give sims, not time")
        sims = simulations_per_move(sims, time, DEFAULT_PUCT_SIMULATIONS)
        if root != "gumbel" and k is not None:
            raise QuartoValueError(f"k={k} is used only with root=gumbel (the PUCT root considers every action)")
        self.root = root
        self.k = GumbelRoot(DEFAULT_GUMBEL_ACTIONS if k is None else k).actions  # checked now, not at the first move
        if network is None:
            if not path:
                raise CheckpointError("the az agent needs a checkpoint: az:PATH (a .zip, or a run folder)")
            network = load_network_of_either_backend(pretrained_path(path, "az", variant), variant, device)
        self.network = network
        self.sims = sims
        self.time = time
        self.temperature = temperature
        budget = MAX_PUCT_SIMULATIONS if time else max(sims, 1)
        self.search = PUCTSearch(variant, network.kind, None, 1, budget, c)
        self.last_result: PUCTResult | None = None
        self.act(State())  # load the compiled kernels now, not inside a timed move

    def act(self, state: State) -> int:
        fields = compiled_fields(state)
        action, mask = forced_action(*fields[:4], fields[5], self.variant.group_array, self.variant.counted)
        if action >= 0:
            return int(action)
        if self.sims == 0 and not self.time:
            return self._policy_action(state, mask)
        budget = MAX_PUCT_SIMULATIONS if self.time else self.sims
        gumbel = None
        if self.root == "gumbel":
            gumbel = GumbelRoot(self.k, self.rng if self.temperature else None, scale=self.temperature or 1.0)
        session = PUCTSession(self.search, position_array([state]), budget, seconds=self.time, gumbel=gumbel)
        result = session.run(self._evaluate).result
        self.last_result = result
        if self.temperature and gumbel is None:
            weights = result.visits[0].astype(np.float64) ** (1 / self.temperature)
            return int(self.rng.choice(NUM_ACTIONS, p=weights / weights.sum()))
        return int(result.best()[0])

    def _evaluate(self, batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
        return self.network.evaluate(batch.observations)

    def _policy_action(self, state: State, mask: int) -> int:
        planes = np.zeros((1, *self.search.kind.shape), dtype=np.int8)
        encode_observation(
            planes[0], self.search.kind.level, *compiled_fields(state), self.variant.group_array, self.variant.counted
        )
        logits = self.network.evaluate(planes)[0][0, :NUM_ACTIONS].astype(np.float64)
        allowed = (mask >> np.arange(NUM_ACTIONS)) & 1 == 1
        if not self.temperature:
            return int(np.argmax(np.where(allowed, logits, -np.inf)))
        scaled = np.where(allowed, logits / self.temperature, -np.inf)
        weights = np.exp(scaled - scaled.max())
        return int(self.rng.choice(NUM_ACTIONS, p=weights / weights.sum()))
