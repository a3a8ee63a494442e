"""Quarto in pure JAX, as a ``pgx.Env``: ``quarto_env.jax.env(**flags)`` (the ``jax`` extra; the page is
``docs/jax.md``).

It plays ``quarto_v1`` -- every rule flag of :func:`quarto_env.env`, the same action numbers, seats, rewards and
observation planes -- with ``init`` and ``step`` jittable and vmappable on any device, so that pgx's ecosystem
(mctx's searches, PureJaxRL-style loops, ``pgx.experimental.auto_reset``) takes it as it takes pgx's own games::

    import jax
    import quarto_env.jax

    env = quarto_env.jax.env(squares=True)
    init, step = jax.jit(jax.vmap(env.init)), jax.jit(jax.vmap(env.step))
    state = init(jax.random.split(jax.random.key(0), 1024))

It is a second implementation of the rules (:mod:`quarto_env.jax.rules`), checked move for move against the
compiled core (``quarto bench jax --check``).
"""

from __future__ import annotations

from typing import Any

from quarto_env.extras import require

require("jax", "quarto_env.jax", "jax", "pgx")  # the env alone; the search and training need the rest

from quarto_env.jax.env import ENV_ID, VERSION, QuartoEnv, State  # noqa: E402
from quarto_env.observation import DEFAULT_OBSERVATION  # noqa: E402

__all__ = ["ENV_ID", "VERSION", "QuartoEnv", "State", "env"]


def env(observation: str = DEFAULT_OBSERVATION, **flags: Any) -> QuartoEnv:
    """A :class:`QuartoEnv` for the rule ``flags`` of :func:`quarto_env.env` (``attributes``, ``squares``,
    ``declaration``, ``false_declaration``, ``false_declaration_penalty``, ``first_player``) and one of the
    observation kinds (``raw``, ``tactical``, ``lookahead``, ``parity``, ``tempo``). Bad flags are refused in
    one line, as there."""
    return QuartoEnv(observation, **flags)
