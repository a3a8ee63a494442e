"""How a run's checkpoint becomes a shipped network (:mod:`agents.networks.pretrained`): :func:`playing_copy` keeps what
the agent plays from and drops what only training resumes from (the optimizer's state, the replay buffer, SB3's
learner data), then seals the file again::

    python -c "from experiments.training.ship import playing_copy; playing_copy('az', 'RUN/checkpoints/final.zip',
    'agents/data/pretrained/az-standard.zip')"

then pin its SHA-256 in :data:`agents.networks.pretrained.SHIPPED`.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from agents.alphazero import NETWORK_ENTRY
from agents.networks.checkpoints import METADATA_ENTRY, checkpoint_bytes, read_metadata
from agents.ppo import POLICY_ENTRY
from agents.storage.files import atomic_write_bytes

PLAYING_ENTRIES = {"az": NETWORK_ENTRY, "ppo": POLICY_ENTRY}
"""The one entry besides the metadata that each agent kind reads to play."""


def playing_copy(agent: str, source: str | Path, target: str | Path) -> None:
    """Write to ``target`` the checkpoint ``source`` (proved whole first) with only what ``agent`` (``az`` or
    ``ppo``) plays from, sealed again."""
    read_metadata(source)  # refuses a damaged or altered source in one line
    with zipfile.ZipFile(source) as archive:
        entries = {name: archive.read(name) for name in (METADATA_ENTRY, PLAYING_ENTRIES[agent])}
    atomic_write_bytes(Path(target), checkpoint_bytes(entries))
