"""Self-play and arena sessions: the batched search of :mod:`agents.tree.puct`, driven by any framework's network.

A session owns its games and their search trees; the caller owns the network. The session hands out batches of
leaves to evaluate -- observation planes in any of :mod:`quarto_env.observation`'s kinds, the legal actions, and
which model should evaluate them -- and takes back policy logits and values, checked before the search uses
them. Nothing here imports torch: a numpy function, a JAX model on a GPU or a served model drives the same
search as the AlphaZero trainer, which runs on these sessions itself (docs/sessions.md has the contract)::

    session = SelfPlaySession(8, PUCTOptions(simulations=32), observation="tempo", seed=0)
    while not session.done:
        batch = session.pending()                       # a LeafBatch
        logits, values = my_network(batch.observations)  # (n, 16) and (n,), floating point
        session.submit(logits, values, batch=batch)      # batch=: tied to it (optional)
    samples = session.samples()                          # training samples of the finished games
    session.games                                        # the finished games' records (quarto replay)

- :class:`SelfPlaySession`: ``num_games`` self-play games (or, with ``num_games=None``, games without end, as the
  trainer plays them), ``parallel`` at a time; every searched position becomes a training sample once its game
  ends (:class:`Samples`).
- :class:`ArenaSession`: a match of two models, ``num_pairs`` pairs of games from shared random openings, the
  seats swapped between the two games of a pair; each batch says which model (slot 0 or 1) evaluates it.
- :class:`PUCTSession`: one search of positions given to it: the ``az:`` agent's move, or an analysis.

Failures are one line, and lose nothing: an evaluation the search cannot use (or an evaluator of :meth:`Session.run`
that raises or returns no ``(logits, values)`` pair) is an :class:`~quarto_env.errors.EvaluationError` naming the
batch, which stays pending, to be submitted again; a submit for a batch that :meth:`Session.pending` did not hand
out (a second submit for one batch) is a :class:`~quarto_env.errors.CallOrderError`; an exception or an interrupt
inside the search itself (not in the evaluator) stops the session, and its next use says so. Arguments are checked
when given, counts against this machine's memory before anything is allocated.

:meth:`Session.run` drives a session with one evaluator per model (``batch -> (logits, values)``), and
:meth:`Session.play_round` one round of moves at a time (the trainer's rhythm: it trains between rounds).
:mod:`agents.tree.sample_files` writes the samples as a versioned, sharded dataset.

This module is the sessions' front door: every name above is imported from here. Each lives by what it serves --
the protocol, :class:`PUCTSession` and what the game sessions share in :mod:`agents.tree.session_base`;
self-play and its samples in :mod:`agents.tree.selfplay`; the arena in :mod:`agents.tree.arena`;
:class:`PUCTOptions` in :mod:`agents.tree.options` and :class:`LeafBatch` in :mod:`agents.tree.leaf_batch`.
"""

from agents.tree.arena import ArenaSession
from agents.tree.leaf_batch import LeafBatch
from agents.tree.options import PUCTOptions
from agents.tree.selfplay import Samples, SelfPlayCounters, SelfPlaySession
from agents.tree.session_base import BatchEvaluator, FinishedGame, PUCTSession, Seed, Session

__all__ = [
    "ArenaSession",
    "BatchEvaluator",
    "FinishedGame",
    "LeafBatch",
    "PUCTOptions",
    "PUCTSession",
    "Samples",
    "Seed",
    "SelfPlayCounters",
    "SelfPlaySession",
    "Session",
]
