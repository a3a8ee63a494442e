"""The networks of the trained agents: what a network is built from (:mod:`agents.networks.choices`, no torch),
the torch bodies and heads (:mod:`agents.networks.designs`, :mod:`agents.networks.policy_value`), the checkpoint
format every backend writes (:mod:`agents.networks.checkpoints`), and the equinox network of ``backend: jax``
(:mod:`agents.networks.jax_network`, the ``jax`` extra)."""
