"""The one check of a replay buffer's training targets as a checkpoint hands them back, shared by the AlphaZero
backends (:mod:`experiments.training.az_selfplay`, :mod:`experiments.training.alphazero_jax`): a resealed file
with a NaN or an outcome of 5 would train on without a word."""

from __future__ import annotations

import numpy as np

SLACK = 1e-3
"""Beyond the targets' range by this much is still in it: the last bits of a mean of values in float32."""


def check_targets(policy: np.ndarray, outcome: np.ndarray, root_value: np.ndarray) -> None:
    """``ValueError`` naming the first of the targets that is not finite or lies outside its range: the policy's
    probabilities in [0, 1], the outcomes and root values in [-1, 1]."""
    for name, target, low in (("policy", policy, 0), ("outcome", outcome, -1), ("root_value", root_value, -1)):
        values = np.asarray(target, dtype=np.float64)
        if not (np.isfinite(values).all() and (values >= low - SLACK).all() and (values <= 1 + SLACK).all()):
            raise ValueError(f"{name} targets beyond [{low}, 1] or not finite")
