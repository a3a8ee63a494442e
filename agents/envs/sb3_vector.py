"""A Gymnasium ``VectorEnv`` with ``SAME_STEP`` auto-reset as a Stable-Baselines3 ``VecEnv``, so that SB3 and
sb3-contrib's MaskablePPO train on :class:`quarto_env.vector_env.QuartoVectorVsAgent` (see its docstring)."""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from quarto_env.errors import QuartoValueError


class InProcessVecEnv(VecEnv):
    """The part of SB3's ``VecEnv`` interface that a vector env living in this process answers alike: its
    attributes are the object's own, nothing is wrapped, and ``env_method("action_masks")`` is one array for
    every env (sb3-contrib stacks it unchanged). Subclasses define ``action_masks``."""

    def action_masks(self) -> np.ndarray:
        raise NotImplementedError

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(self, attr_name)] * len(list(self._get_indices(indices)))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: VecEnvIndices = None, **kwargs: Any) -> Any:
        if method_name == "action_masks":
            return self.action_masks()
        return [getattr(self, method_name)(*args, **kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))


class SB3VectorEnv(InProcessVecEnv):
    """``envs`` seen by SB3: ``dones`` are ``terminated | truncated``, ``action_masks`` is ``envs.action_masks()``,
    and the infos are one dict per env, as SB3's callbacks read them. A running game's are the env's own keys
    (``seat``, ``illegal_action``, ...). A finished game's are its ``final_info`` (Gymnasium's record of the
    finished game), its last observation (``terminal_observation``), ``TimeLimit.truncated`` and its ``episode``
    statistics (as SB3's ``Monitor`` writes them: MaskablePPO logs ``rollout/ep_rew_mean`` from them); the new
    game's keys go to ``reset_infos``, as SB3's own VecEnvs put them."""

    def __init__(self, envs: gymnasium.vector.VectorEnv) -> None:
        mode = envs.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise QuartoValueError(f"SB3VectorEnv needs autoreset_mode {AutoresetMode.SAME_STEP}; the env has {mode}")
        self.envs = envs
        self._masks_of_envs = getattr(envs, "action_masks", None)
        self.render_mode = None
        super().__init__(envs.num_envs, envs.single_observation_space, envs.single_action_space)
        self._actions = np.zeros(envs.num_envs, dtype=np.int64)
        self._returns = np.zeros(envs.num_envs, dtype=np.float64)
        self._lengths = np.zeros(envs.num_envs, dtype=np.int64)
        self._started = time.time()

    def reset(self) -> np.ndarray:
        """Reset every env, with the seed and the options of ``seed`` and ``set_options`` if given (the options
        once for all the envs: a Gymnasium vector env takes one dict)."""
        seed = self._seeds[0] if self._seeds else None
        options = self._options[0] if self._options else {}
        if any(other != options for other in self._options):
            raise QuartoValueError(
                f"SB3VectorEnv resets every env with the same options; set_options gave {len(self._options)} "
                "different dicts: pass one dict"
            )
        self._reset_seeds()
        self._reset_options()
        observations, info = self.envs.reset(seed=seed, options=options or None)
        self.reset_infos = per_env_infos(info, self.num_envs)
        self._returns[:], self._lengths[:] = 0.0, 0
        return observations

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, terminated, truncated, info = self.envs.step(self._actions)
        dones = terminated | truncated
        self._returns += rewards
        self._lengths += 1
        infos = per_env_infos(info, self.num_envs)
        if dones.any():
            finals = per_env_infos(info.get("final_info", {}), self.num_envs)
            for i in np.flatnonzero(dones):
                self.reset_infos[i] = infos[i]  # the new game's
                infos[i] = {
                    **finals[i],
                    "terminal_observation": info["final_obs"][i],
                    "TimeLimit.truncated": bool(~terminated[i]),
                    "episode": episode_statistics(self._returns[i], self._lengths[i], self._started),
                }
            self._returns[dones], self._lengths[dones] = 0.0, 0
        return observations, rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        """The legal actions of every env (what MaskablePPO asks for before each step)."""
        if self._masks_of_envs is None:
            raise AttributeError(f"{self.envs} has no action_masks(): nothing to mask with")
        return np.asarray(self._masks_of_envs(), dtype=bool)

    def close(self) -> None:
        self.envs.close()


def episode_statistics(reward: float, length: int, started: float) -> dict[str, float | int]:
    """A finished game's ``info["episode"]``, as SB3's ``Monitor`` writes it: its return ``r``, its length ``l``
    and ``t``, the seconds since the env was made (``started``, a ``time.time()``)."""
    return {"r": float(reward), "l": int(length), "t": round(time.time() - started, 6)}


AUTORESET_KEYS = ("final_obs", "final_info")
"""What a same-step auto-reset adds to a Gymnasium vector env's info, read apart by :class:`SB3VectorEnv`."""


def per_env_infos(info: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """A Gymnasium vector env's info (a dict of arrays, each ``key`` beside its mask ``_key`` of the envs that have
    it) as one dict per env, nested dicts alike; the auto-reset's own keys are left out. (Gymnasium's
    ``DictInfoToList`` wrapper does the same in a private method, and as a wrapper it would change the env.)"""
    infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, values in info.items():
        if key.startswith("_") or key in AUTORESET_KEYS:
            continue
        present = info.get(f"_{key}", np.ones(num_envs, dtype=bool))
        split = per_env_infos(values, num_envs) if isinstance(values, dict) else values
        for i in np.flatnonzero(present):
            infos[i][key] = split[i]
    return infos
