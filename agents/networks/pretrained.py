"""Trained networks shipped in the wheel, playable with no training: ``az:pretrained`` and ``ppo:pretrained``.

The rules pick the network: ``quarto play --opponent az:pretrained`` plays the standard rules' AlphaZero network,
``quarto grade az:pretrained --squares`` the squares one. Each file is an ordinary checkpoint of ``quarto train``
(sealed like every checkpoint, read as data, never unpickled): the final checkpoint of the training command beside
it, cut down to what the agent plays from (:mod:`experiments.training.ship`). Its grade and its score against
minimax are its row on docs/leaderboard.md. Its SHA-256 is pinned here as well, so a file
altered after install is refused in one line before a byte of it is read as a network.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from agents.storage.integrity import sha256
from quarto_env.core import STANDARD, Variant
from quarto_env.errors import CheckpointError

PRETRAINED = "pretrained"
"""The path that names a shipped network in an agent spec (``az:pretrained``)."""

PRETRAINED_FOLDER = Path(__file__).resolve().parent.parent / "data" / "pretrained"

SQUARES = Variant.make(squares=True)


@dataclasses.dataclass(frozen=True)
class ShippedNetwork:
    """One shipped checkpoint: who plays it, for which rules, the file, its digest and the command that made it."""

    agent: str
    """The agent kind that plays it, as specs write it (``az``, ``ppo``)."""
    variant: Variant
    file: str
    """The file's name in :data:`PRETRAINED_FOLDER`."""
    sha256: str
    training: str
    """The command that trained it, in the run folder ``RUN`` (its final checkpoint, cut down)."""


SHIPPED: tuple[ShippedNetwork, ...] = (
    ShippedNetwork(
        "az",
        STANDARD,
        "az-standard.zip",
        "d3d87027922d543b697c6b3693094626010df0cc975cbd83a5d2f96067e34e31",
        "quarto train --config configs/alphazero.yaml --out RUN",
    ),
    ShippedNetwork(
        "az",
        SQUARES,
        "az-squares.zip",
        "35aa7036dd2ac9443f73d9269db776e20a00d0af4c488c0a4763149c06b0a354",
        "quarto train --config configs/alphazero.yaml variant.squares=true --out RUN",
    ),
    ShippedNetwork(
        "ppo",
        STANDARD,
        "ppo-standard.zip",
        "475cdd76cb83e22ed7f42e9d0af9aeaf6b4311e2bf5d1dd264d39b138ca09fe6",
        "quarto train seed=0 --out RUN",
    ),
)
"""Every shipped network; at most one per agent kind and rules."""


def pretrained_path(path: str, agent: str, variant: Variant = STANDARD) -> str:
    """``path`` itself, unless it is :data:`PRETRAINED`: then the shipped checkpoint of ``agent`` for ``variant``,
    checked against its pinned digest. :class:`CheckpointError` in one line where none is shipped (naming those
    that are) or where the file is missing or altered."""
    if path != PRETRAINED:
        return path
    shipped = next((item for item in SHIPPED if item.agent == agent and item.variant == variant), None)
    if shipped is None:
        offered = "; ".join(f"{item.agent}:{PRETRAINED} ({item.variant.describe()})" for item in SHIPPED) or "none"
        raise CheckpointError(f"no {agent} network is shipped for {variant.describe()}: the shipped ones are {offered}")
    file = PRETRAINED_FOLDER / shipped.file
    try:
        digest = sha256(file.read_bytes())
    except OSError as exc:
        raise CheckpointError(f"the shipped network {str(file)!r} cannot be read ({exc.strerror}): reinstall") from exc
    if digest != shipped.sha256:
        raise CheckpointError(
            f"the shipped network {str(file)!r} was altered after install (its SHA-256 differs): reinstall"
        )
    return str(file)
