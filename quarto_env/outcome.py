"""How a game ended, as the environments' infos report it: plain integers, so that every RL library can turn
an info into a tensor (TorchRL, Tianshou and RLlib make arrays of every info value; a string or ``None`` breaks
them).

- :class:`Outcome`: ``info["outcome"]``, the way the game ended, ``Outcome.IN_PLAY`` (0) while it goes on.
- :data:`NO_WINNER`: ``info["winner"]`` (and :attr:`quarto_env.core.State.winner`) when nobody has won: during
  the game and after a draw.

Standard library only, like the rules core's imports: ``import quarto_env`` exports both without loading any
RL framework.
"""

from __future__ import annotations

import enum

NO_WINNER = -1


class Outcome(enum.IntEnum):
    """``info["outcome"]``: how the game ended. The infos hold the plain ``int``; compare it with these members
    (``info["outcome"] == Outcome.WIN``) or name it with ``Outcome(info["outcome"]).name``."""

    IN_PLAY = 0
    """The game goes on."""
    WIN = 1
    """A player completed (in the declaration variant: declared) a winning group."""
    DRAW = 2
    """The board is full and nobody won."""
    FALSE_DECLARATION = 3
    """A declaration with nothing to claim lost the game (``false_declaration="lose"``)."""
    TIME_LIMIT = 4
    """A player overran ``time_limit`` and forfeits (``quarto_v1`` only)."""
    ILLEGAL_ACTION = 5
    """An agent played an action outside the mask and lost: the single-agent envs (``illegal_action="lose"``) and
    ``quarto_v1`` wrapped by ``quarto_env.env()``."""
