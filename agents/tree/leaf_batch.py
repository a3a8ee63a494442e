"""The batch of leaves a session hands out to evaluate (:class:`LeafBatch`), and the check of the evaluation that
comes back (:meth:`LeafBatch.checked`): the contract between :mod:`agents.tree.sessions` and any framework's network.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from agents.tree.puct import PUCTSearch
from quarto_env.checks import one_line
from quarto_env.core import NUM_ACTIONS
from quarto_env.errors import CallOrderError, EvaluationError


class LeafBatch:
    """The leaves of one round of a search, to evaluate with one model.

    Arrays, ``n`` leaves: :attr:`observations` ``(n, channels, 16)`` int8, the planes of the session's
    observation kind for that model (a view of the search's buffer: valid until :meth:`Session.submit`, and not
    to be written to; copy it to keep it); :attr:`legal` ``(n, 16)`` bool, the actions the search considers at
    each leaf (the empty squares, or the safe pieces: never none); :attr:`positions` ``(n, NUM_FIELDS)`` int64,
    each leaf's position (a row of :func:`quarto_env.core.position_array`, for an evaluator that reads positions,
    such as a solver); :attr:`games` ``(n,)`` int64, the session's number of the game each leaf belongs to. The
    last three are read from the trees when first asked for, so before :meth:`Session.submit`.
    """

    def __init__(self, index: int, model: int, search: PUCTSearch, planes: np.ndarray, games: np.ndarray) -> None:
        self.index = index
        """The batch's number in its session, from 0: error messages name it."""
        self.model = model
        """The model slot that evaluates it: 0 in self-play, 0 or 1 in an arena."""
        self.observations = planes
        self._search, self._session_games = search, games
        self._open = True

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def label(self) -> str:
        """How error messages name the batch: ``batch 7 (model 1, 128 leaves)``."""
        return f"batch {self.index} (model {self.model}, {len(self)} leaves)"

    # Read from the search's trees when first asked (most evaluators need the planes alone), so before submit().
    @functools.cached_property
    def legal(self) -> np.ndarray:
        """``(n, 16)`` bool: the actions the search considers at each leaf."""
        return self._leaf_array(self._search.leaf_masks)

    @functools.cached_property
    def positions(self) -> np.ndarray:
        """``(n, NUM_FIELDS)`` int64: each leaf's position."""
        return self._leaf_array(self._search.leaf_positions)

    @functools.cached_property
    def games(self) -> np.ndarray:
        """``(n,)`` int64: the session's number of each leaf's game."""
        return self._leaf_array(lambda leaves: self._session_games[self._search.leaf_games[:leaves]])

    def _leaf_array(self, read: Callable[[int], np.ndarray]) -> np.ndarray:
        if not self._open:
            raise CallOrderError(
                f"batch {self.index} was submitted: read its legal, positions or games before submit()"
            )
        return read(len(self))

    def close(self) -> None:
        """The batch is evaluated: the search moves on, and what it did not read yet is gone."""
        self._open = False

    def checked(self, logits: object, values: object) -> tuple[np.ndarray, np.ndarray]:
        """``(logits, values)`` as float32 arrays once checked; :class:`EvaluationError` naming this batch unless
        logits are ``(n, 16)`` and values ``(n,)``, both floating point, the logits finite at every legal action
        (anything, ``-inf`` included, elsewhere: ignored) and the values finite and within [-1, 1], as float32."""
        n, where = len(self), self.label
        arrays = []
        for name, given, shape in (("logits", logits, (n, NUM_ACTIONS)), ("values", values, (n,))):
            try:
                array = np.asarray(given)
            except (TypeError, ValueError, RuntimeError) as error:  # a tensor that needs .detach(), a ragged list
                hint = " (bfloat16 has no numpy type: hand over .float())" if "BFloat16" in str(error) else ""
                raise EvaluationError(f"{where}: {name} are no array ({one_line(error)}){hint}") from None
            if array.dtype.kind != "f":
                raise EvaluationError(f"{where}: {name} must be floating point (float16/32/64), got {array.dtype}")
            if array.shape != shape:
                raise EvaluationError(f"{where}: {name} must have shape {shape}, got {array.shape}")
            arrays.append(np.ascontiguousarray(array, np.float32))
        logits_array, values_array = arrays
        if not np.isfinite(logits_array).all():  # then, as -inf is fine where the search never looks, look closer
            finite = np.isfinite(logits_array) | ~self.legal
            if not finite.all():
                leaf = int(np.flatnonzero(~finite.all(1))[0])
                raise EvaluationError(
                    f"{where}: logits of leaf {leaf} are not finite at a legal action (NaN or inf, or beyond "
                    "float32's range, which they are read as)"
                )
        within = np.abs(values_array) <= 1  # NaN is not
        if not within.all():
            leaf = int(np.flatnonzero(~within)[0])
            raise EvaluationError(
                f"{where}: values must be finite and within [-1, 1]; leaf {leaf} has {values_array[leaf]}"
            )
        return logits_array, values_array
