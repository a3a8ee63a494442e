"""Quarto for reinforcement learning: a fast rules core and the PettingZoo AEC environment ``quarto_v0``.

``quarto_env.env(**flags)`` is the environment wrapped like PettingZoo's classic games, ``quarto_env.raw_env``
the bare one; importing the package also registers ``quarto_v0`` with PettingZoo's registry where the
installed PettingZoo has one, so ``pettingzoo.make("aec", "quarto_v0", **flags)`` works too. The rules core
(:mod:`quarto_env.core`) imports no RL framework.
"""

from quarto_env.env import env, raw_env

__all__ = ["env", "raw_env"]

ENV_ID = "quarto_v0"


def _register_with_pettingzoo() -> None:
    try:
        from pettingzoo import aec_registry, register
    except ImportError:  # PettingZoo before 1.27 has no registry: quarto_env.env() is the way in
        return
    if not any(spec.name == "quarto" and spec.version == 0 for spec in aec_registry.values()):
        register("aec", ENV_ID, entry_point="quarto_env.env:env")


_register_with_pettingzoo()
