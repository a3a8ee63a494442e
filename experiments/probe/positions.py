"""The probe's positions (:mod:`experiments.probe`): positions the search asks a network about, sampled from
seeded games and labelled with the exact solver's values (:func:`sample_labelled_positions`), split into a training
and a test set (:func:`split`), and what the probe derives from the labels: every candidate's exact value and each
critical position's mistake depth (:func:`probe_set`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from agents.solver.minimax import MinimaxAgent
from agents.tree.puct import encode_positions, forced_action
from experiments.evaluation.grading import PositionValues, sample_decisions
from quarto_env.core import (
    State,
    Variant,
    compiled_fields,
    position_array,
    state_of_row,
)
from quarto_env.errors import SamplingError
from quarto_env.observation import ObservationKind


# ---------------------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LabelledPositions:
    """Positions the search asks the network about, with their exact values. Row ``i`` of every array is
    position ``i``."""

    positions: np.ndarray
    """``(n, NUM_FIELDS)``: the positions (rows of :func:`quarto_env.core.position_array`)."""
    candidates: np.ndarray
    """``(n, 16)`` bool: the search's candidate actions (:func:`agents.tree.puct.candidates`)."""
    keeps: np.ndarray
    """``(n, 16)`` bool: the candidates whose exact value equals the position's."""
    values: np.ndarray
    """``(n,)`` int: the exact value of the position for the player to move (-1, 0, 1)."""
    empties: np.ndarray
    """``(n,)`` int: empty squares."""

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def critical(self) -> np.ndarray:
        """``(n,)`` bool: whether some candidate loses value."""
        return (self.candidates & ~self.keeps).any(axis=1)

    def subset(self, rows: np.ndarray) -> LabelledPositions:
        """The positions of ``rows`` (indices), in that order."""
        return LabelledPositions(*(getattr(self, f.name)[rows] for f in dataclasses.fields(self)))


def sample_labelled_positions(
    variant: Variant,
    kind: ObservationKind,
    count: int,
    seed: int,
    min_empty: int,
    max_empty: int,
    values: PositionValues,
    jobs: int = 1,
) -> LabelledPositions:
    """``count`` distinct seeded positions with ``min_empty`` to ``max_empty`` empty squares that the search asks
    the network about, each labelled by ``values`` (the exact solver, cached; those it lacks are solved in one
    batch by the labeller of :mod:`agents.solver.labels`, with ``jobs`` worker processes). Sampled in rounds of
    ``count`` games (seeds ``seed``, ``seed + 1``, ...) until enough are found; ``RuntimeError`` if ten rounds
    find too few."""
    found: dict[State, None] = {}
    for round_ in range(10):
        for state in sample_decisions(variant, count, seed + round_, max_empty, min_empty):
            if len(found) < count and _searched(variant, state):
                found[state] = None
        if len(found) == count:
            break
    else:
        raise SamplingError(f"only {len(found)} of {count} searched positions found in {10 * count} games")
    states = list(found)
    values.label_missing(states, jobs)
    positions = position_array(states)
    candidates = encode_positions(positions, kind, variant)[1]
    keeps = np.zeros_like(candidates)
    for row, state in enumerate(states):
        action_values = values.action_values(state)
        best = max(action_values.values())
        for action in np.flatnonzero(candidates[row]):
            keeps[row, action] = action_values[int(action)] == best
    exact = np.array([values.value(state) for state in states])
    empties = np.array([state.num_empty for state in states])
    return LabelledPositions(positions, candidates, keeps, exact, empties)


def _searched(variant: Variant, state: State) -> bool:
    """Whether the search asks the network about ``state`` (no rules shortcut dictates its action)."""
    fields = compiled_fields(state)
    return forced_action(*fields[:4], fields[5], variant.group_array, variant.counted)[0] < 0


def split(data: LabelledPositions, test_share: float, seed: int) -> tuple[LabelledPositions, LabelledPositions]:
    """``(train, test)``: a seeded random split with ``test_share`` of the positions (at least one in each) in
    the test set."""
    train_rows, test_rows = split_rows(len(data), test_share, seed)
    return data.subset(train_rows), data.subset(test_rows)


def split_rows(count: int, test_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of :func:`split`'s training and test sets among ``count`` positions."""
    order = np.random.default_rng(seed).permutation(count)
    tests = min(max(round(test_share * count), 1), count - 1)
    return order[tests:], order[:tests]


# ---------------------------------------------------------------------------------------------------------
# What the probe derives from the labels
# ---------------------------------------------------------------------------------------------------------
NO_ACTION_VALUE = -2
"""The action value of an action that is not a candidate (no target)."""

MINIMAX_DEPTHS = (1, 2, 3, 4)
"""The minimax depths (plies) tried on each critical position to find its mistake depth."""

BEYOND_DEPTHS = MINIMAX_DEPTHS[-1] + 1
"""The mistake depth of a critical position that no depth of :data:`MINIMAX_DEPTHS` gets right."""

TACTICS_DEPTH = 3
"""Mistakes that a minimax of at most this many plies avoids are *tactics*; the rest are *deeper*."""


@dataclasses.dataclass(frozen=True)
class ProbeSet:
    """Labelled positions with what the probe derives from their labels; row ``i`` is position ``i``."""

    labels: LabelledPositions
    action_values: np.ndarray
    """``(n, 16)`` int: each candidate's exact value for the player to move; :data:`NO_ACTION_VALUE` elsewhere."""
    mistake_depths: np.ndarray
    """``(n,)`` int: :func:`mistake_depths` (0 for a position that is not critical)."""

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, rows: np.ndarray) -> ProbeSet:
        """The positions of ``rows`` (indices), in that order."""
        return ProbeSet(self.labels.subset(rows), self.action_values[rows], self.mistake_depths[rows])


def action_value_labels(labels: LabelledPositions, values: PositionValues) -> np.ndarray:
    """``(n, 16)`` int8: the exact value of each candidate of each position (looked up in ``values``, which
    labelled them), :data:`NO_ACTION_VALUE` for the other actions."""
    out = np.full(labels.candidates.shape, NO_ACTION_VALUE, dtype=np.int8)
    for row, position in enumerate(labels.positions):
        action_values = values.action_values(state_of_row(position))
        for action in np.flatnonzero(labels.candidates[row]):
            out[row, action] = action_values[int(action)]
    return out


def mistake_depths(labels: LabelledPositions, variant: Variant, values: PositionValues) -> np.ndarray:
    """``(n,)`` int: for each critical position the shallowest depth of :data:`MINIMAX_DEPTHS` at which the
    project's minimax (:class:`agents.solver.minimax.MinimaxAgent`, deterministic) plays an action that keeps the exact
    value -- how deep a search must look not to make the mistake; :data:`BEYOND_DEPTHS` when none does, 0 for a
    position where no candidate loses value."""
    searchers = [MinimaxAgent(variant, depth=depth) for depth in MINIMAX_DEPTHS]
    depths = np.zeros(len(labels), dtype=np.int64)
    for row in np.flatnonzero(labels.critical):
        state = state_of_row(labels.positions[row])
        action_values = values.action_values(state)
        best = max(action_values.values())
        keeping = (
            depth
            for depth, agent in zip(MINIMAX_DEPTHS, searchers, strict=True)
            if action_values[agent.act(state)] == best
        )
        depths[row] = next(keeping, BEYOND_DEPTHS)
    return depths


def probe_set(labels: LabelledPositions, variant: Variant, values: PositionValues) -> ProbeSet:
    """``labels`` with their action values and mistake depths."""
    return ProbeSet(labels, action_value_labels(labels, values), mistake_depths(labels, variant, values))
