"""``quarto train`` with ``backend: rllib``: RLlib's PPO on ``quarto_v0``, the same self-play (``configs/rllib.yaml``).

The environment is ``quarto_v0`` itself, one game per env, through :func:`quarto_env.flat.flat_env` (flat
``float32`` planes under ``observations``, the ``action_mask``) and RLlib's ``PettingZooEnv``; each env runner
steps ``num_games`` of them side by side (one batched forward pass per module and step), and
``num_env_runners`` runners play at once (0: in this process). RLlib's PPO (the new API stack: RLModules,
Learners, EnvRunners) trains one module, ``main``, an :class:`agents.rllib.ActorCritic` that masks illegal
actions out of its logits.

Self-play, as with the sb3 backend: each game seats ``main`` in a random seat (``player_0`` or ``player_1``; who
gives first is drawn by the env) against an opponent drawn from ``opponents``: ``snapshots`` -- frozen copies
of ``main`` (the untrained one first, then one every ``snapshot_every`` steps; at most ``max_snapshots``, the
oldest leaves), each an RLModule that is never trained -- or a baseline agent of :mod:`agents` (``random``,
``greedy``, ``minimax:depth=2``, ...), run by :class:`BaselineModule`, which recovers the position from the
planes (:func:`quarto_env.flat.decode`) and asks the agent. When a full pool drops its oldest snapshot, RLlib
restarts the games in progress (that is how it removes a module; the sb3 backend lets them finish against the
newest one). The draw is a function of the episode's id, so both
seats of a game agree on it whatever process maps them. quarto_v0 already gives the loser -1 whichever phase
lost (a placement that let the opponent... or a give that handed over a win); only ``main``'s own experience
trains it.

``total_steps``, ``snapshot_every``, ``eval_every`` and ``checkpoint_every`` count ``main``'s decisions, as the
sb3 backend counts the learner's; a PPO update takes ``num_games * n_steps`` environment steps (both seats).
The run folder is the sb3 backend's: ``config.yaml``, ``command.txt``, ``.lock``, ``tb/`` with the same tags
(``eval/<opponent>/...`` and ``eval_sampled/`` from :func:`experiments.training.train.log_result`, ``charts/SPS`` in
``main``'s steps per second, ``charts/env_steps_per_second``, ``charts/pool_size``, ``charts/train_*_rate``,
``losses/``), ``checkpoints/`` (``latest.zip``, ``step_<N>.zip``, ``final.zip``; the project's own format, read
as data: :mod:`agents.rllib`) and ``final_eval.json`` (:func:`experiments.training.train.write_final_eval`, the final
checkpoint read back from disk). ``rllib:RUN_FOLDER`` plays the result.

Resuming rebuilds the algorithm from the config and restores ``main``'s weights, the snapshots and the step
count from ``latest.zip``; the Adam moments start again from zero (RLlib's optimizer state is not exported), as
after a learning-rate change, and the games in progress when the run stopped are lost.

Ray: if this process has not started Ray yet, ``ray.init()`` starts a local instance, or joins the cluster
that ``RAY_ADDRESS`` names (``ray start --head`` on the head node, ``ray start --address=HEAD:6379`` on the
others). Every process sets torch to ``torch_threads`` threads.
"""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.base import make_agent
from agents.checkpoints import CheckpointError, read_weights
from agents.networks import ActorCritic, network_actions, network_for
from agents.rllib import NETWORK_ENTRY, load_network, save_checkpoint
from experiments.training.config import SEED_LIMIT, TrainConfig, markdown_table
from experiments.training.selfplay import SNAPSHOTS, EvalResult, Opponent
from experiments.training.train import (
    POOL_ENTRY,
    _next_multiple,
    check_resume,
    evaluate_players,
    log_result,
    print_results,
    write_final_eval,
)
from quarto_env.checks import one_line
from quarto_env.core import Variant
from quarto_env.env import AGENTS
from quarto_env.flat import ACTION_MASK, OBSERVATIONS, decode, flat_env
from quarto_env.vector import GameBatch

ENV_NAME = "quarto_flat"
"""The name the flat ``quarto_v0`` is registered under with Ray (``env_config``: the ``quarto_env.env`` flags)."""
MAIN = "main"
"""The module that trains."""
MASKED_LOGIT = -1e9
"""The logit of an illegal action: ``exp`` of it is 0, and unlike ``-inf`` it keeps the entropy finite."""


# ---------------------------------------------------------------------------------------------------------
# Modules: the trained network, and the baseline agents
# ---------------------------------------------------------------------------------------------------------
def _module_classes() -> tuple[type, type]:
    """The RLModule classes, defined on first use so that importing this module does not import ray."""
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
    from ray.rllib.core.rl_module.rl_module import RLModule
    from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule

    class NetworkModule(TorchRLModule, ValueFunctionAPI):  # type: ignore[misc]
        """An :class:`ActorCritic` whose logits are masked by the observation's ``action_mask``.
        ``model_config``: ``network`` (the training config's ``policy`` and ``net_arch``), ``observation``,
        ``variant``, ``torch_threads``."""

        def setup(self) -> None:
            options: dict[str, Any] = self.model_config  # type: ignore[assignment]  # the dict build_algorithm gives
            th.set_num_threads(options["torch_threads"])  # in every env runner and learner process
            variant = Variant.make(**options["variant"])
            self.network = network_for(options["network"], options["observation"], variant)

        def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            observation = batch[Columns.OBS]
            logits = self.network.logits(observation[OBSERVATIONS])
            return {Columns.ACTION_DIST_INPUTS: _masked(logits, observation[ACTION_MASK])}

        def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            observation = batch[Columns.OBS]
            logits, values = self.network(observation[OBSERVATIONS])
            return {Columns.ACTION_DIST_INPUTS: _masked(logits, observation[ACTION_MASK]), Columns.EMBEDDINGS: values}

        def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> th.Tensor:
            if embeddings is not None:  # the values of _forward_train
                return embeddings
            return self.network(batch[Columns.OBS][OBSERVATIONS])[1]

    class BaselineModule(RLModule):  # type: ignore[misc]
        """A baseline agent (``model_config``: ``spec``, ``variant``, ``seed``) playing from the planes."""

        def setup(self) -> None:
            options: dict[str, Any] = self.model_config  # type: ignore[assignment]  # the dict build_algorithm gives
            self.variant = Variant.make(**options["variant"])
            self.agent = make_agent(options["spec"], self.variant, options["seed"])

        def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            planes = np.asarray(batch[Columns.OBS][OBSERVATIONS])
            actions = [self.agent.act(decode(self.variant, p)) for p in planes]
            return {Columns.ACTIONS: np.array(actions, dtype=np.int64)}

        def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            raise NotImplementedError("a baseline agent is not trained")

    return NetworkModule, BaselineModule


def _masked(logits: th.Tensor, mask: th.Tensor) -> th.Tensor:
    return logits.masked_fill(mask < 0.5, MASKED_LOGIT)


@dataclasses.dataclass(frozen=True)
class OpponentMapping:
    """RLlib's agent-to-module mapping: per game, ``main`` in a random seat against an opponent drawn with the
    mix's weights -- a baseline module, or (with the weight of ``snapshots``) one of ``snapshot_ids``, uniformly.
    The draws are a function of ``seed`` and the episode's id, so both seats of a game agree on them."""

    seed: int
    baselines: tuple[tuple[str, float], ...]
    """``(module id, weight)`` of each baseline agent."""
    snapshot_weight: float
    snapshot_ids: tuple[str, ...]

    def __call__(self, agent_id: Hashable, episode: Any, **kwargs: Any) -> str:
        rng = np.random.default_rng([self.seed, zlib.crc32(str(episode.id_).encode())])
        if agent_id == AGENTS[rng.integers(2)]:
            return MAIN
        ids = [module for module, _ in self.baselines]
        weights = [weight for _, weight in self.baselines]
        if self.snapshot_ids:
            ids.append(self.snapshot_ids[rng.integers(len(self.snapshot_ids))])
            weights.append(self.snapshot_weight)
        weights_array = np.array(weights, dtype=np.float64)
        return ids[rng.choice(len(ids), p=weights_array / weights_array.sum())]


def baseline_ids(config: TrainConfig) -> dict[str, str]:
    """The module id of each baseline agent spec of the opponent mix (a spec is not a valid module id)."""
    return {spec: f"baseline_{i}" for i, spec in enumerate(s for s in config.opponents if s != SNAPSHOTS)}


# ---------------------------------------------------------------------------------------------------------
# The algorithm
# ---------------------------------------------------------------------------------------------------------
def _outcome_callback() -> type:
    from ray.rllib.callbacks.callbacks import RLlibCallback

    class MainOutcomes(RLlibCallback):  # type: ignore[misc]
        """Logs ``main``'s result of every finished game (``main_win``, ``main_draw``, ``main_loss``)."""

        def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
            for agent_id, agent_episode in episode.agent_episodes.items():
                if episode.module_for(agent_id) == MAIN and metrics_logger is not None:
                    result = agent_episode.get_return()
                    for outcome, happened in (("win", result > 0), ("draw", result == 0), ("loss", result < 0)):
                        metrics_logger.log_value(f"main_{outcome}", float(happened), reduce="mean", window=1000)

    return MainOutcomes


def build_algorithm(config: TrainConfig, variant: Variant, seed: int) -> Any:
    """RLlib's PPO for ``config``: ``main`` to train, the baseline modules, no snapshots yet."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv
    from ray.tune.registry import register_env

    register_env(ENV_NAME, lambda env_kwargs: PettingZooEnv(flat_env(**env_kwargs)))
    network_module, baseline_module = _module_classes()
    specs = {MAIN: RLModuleSpec(module_class=network_module, model_config=network_model_config(config))}
    for spec, module_id in baseline_ids(config).items():
        options = {"spec": spec, "variant": variant.to_dict(), "seed": seed}
        specs[module_id] = RLModuleSpec(module_class=baseline_module, model_config=options)
    algorithm_config = (
        PPOConfig()
        .environment(ENV_NAME, env_config={**variant.to_dict(), "observation": config.observation})
        .env_runners(
            num_env_runners=config.num_env_runners,
            num_envs_per_env_runner=config.num_games,
            num_cpus_per_env_runner=1,
        )
        .learners(num_learners=0)
        .multi_agent(
            policies=set(specs),
            policy_mapping_fn=opponent_mapping(config, seed, ()),
            policies_to_train=[MAIN],
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .training(
            lr=config.learning_rate,
            gamma=config.gamma,
            lambda_=config.gae_lambda,
            clip_param=config.clip_range,
            entropy_coeff=config.ent_coef,
            vf_loss_coeff=config.vf_coef,
            grad_clip=config.max_grad_norm,
            num_epochs=config.n_epochs,
            minibatch_size=config.batch_size,
            train_batch_size_per_learner=config.num_games * config.n_steps,
            use_kl_loss=False,  # clipping alone, as stable-baselines3's PPO
        )
        .callbacks(_outcome_callback())
        .debugging(seed=seed, log_level="ERROR")
    )
    return algorithm_config.build_algo()


def network_model_config(config: TrainConfig) -> dict[str, Any]:
    """The ``model_config`` of ``main`` and of its snapshots."""
    return {
        "network": {"policy": config.policy, "net_arch": list(config.net_arch)},
        "observation": config.observation,
        "variant": config.resolved_variant().to_dict(),
        "torch_threads": config.torch_threads,
    }


def opponent_mapping(config: TrainConfig, seed: int, snapshot_ids: tuple[str, ...]) -> OpponentMapping:
    """The mapping of ``config``'s opponent mix with these snapshots in the pool."""
    baselines = tuple((module_id, config.opponents[spec]) for spec, module_id in baseline_ids(config).items())
    return OpponentMapping(seed, baselines, float(config.opponents.get(SNAPSHOTS, 0.0)), snapshot_ids)


def start_ray() -> bool:
    """Start Ray (or join ``RAY_ADDRESS``'s cluster) unless this process already has; whether it did."""
    import ray

    if ray.is_initialized():
        return False
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    return True


# ---------------------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Begin:
    """Where a run starts: from scratch, or ``main``'s weights, the snapshots and the step count of a checkpoint."""

    steps: int = 0
    weights: dict[str, th.Tensor] | None = None
    snapshots: list[tuple[int, dict[str, th.Tensor]]] = dataclasses.field(default_factory=list)


def start(config: TrainConfig, run_dir: Path, resume: bool) -> Begin:
    """Where the run starts; on ``resume``, ``latest.zip`` checked and read (as data). Writes nothing."""
    if not resume:
        return Begin()
    latest = run_dir / "checkpoints" / "latest.zip"
    load_network(latest, config.resolved_variant())  # the kind of checkpoint, its variant and its network
    metadata, pool = check_resume(config, latest)
    fresh = network_for(config.to_dict(), config.observation, config.resolved_variant())
    try:
        for weights in pool["weights"]:
            fresh.load_state_dict(weights)
    except (RuntimeError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"checkpoint {str(latest)!r}: {POOL_ENTRY} holds snapshots of another network ({one_line(exc)})"
        ) from exc
    snapshots = list(zip(pool["steps"], pool["weights"], strict=True))
    return Begin(int(metadata["num_timesteps"]), read_weights(latest, NETWORK_ENTRY), snapshots)


class Trainer:
    """The algorithm, its pool of snapshots and the run's bookkeeping (step count, schedules, TensorBoard)."""

    def __init__(self, config: TrainConfig, run_dir: Path, begin: Begin) -> None:
        self.config = config
        self.variant = config.resolved_variant()
        self.run_dir = run_dir
        # A resumed run reseeds from its step count, so it does not replay the games it already saw.
        self.seed = (config.seed + begin.steps) % SEED_LIMIT
        self.algorithm = build_algorithm(config, self.variant, self.seed)
        self.base_steps = self.steps = begin.steps
        self.snapshot_steps: list[int] = []
        if begin.weights is not None:
            self.set_weights(MAIN, begin.weights)
        for step, weights in begin.snapshots or [(0, self.main_weights())]:
            self.add_snapshot(weights, step)
        self.writer = SummaryWriter(str(run_dir / "tb"))
        self.latest_eval: dict[str, float] = {}

    # Weights and snapshots ------------------------------------------------------------------------------
    def main_weights(self) -> dict[str, th.Tensor]:
        """``main``'s network weights, as held by the learner."""
        state = self.algorithm.learner_group.get_weights(module_ids=[MAIN])[MAIN]
        return {key.removeprefix("network."): th.as_tensor(np.asarray(value)) for key, value in state.items()}

    def set_weights(self, module_id: str, weights: dict[str, th.Tensor]) -> None:
        """Give the module ``module_id`` these network weights, in the learner and every env runner."""
        state = {f"network.{key}": value for key, value in weights.items()}
        self.algorithm.learner_group.set_weights({module_id: state})
        self.algorithm.env_runner_group.sync_weights(
            from_worker_or_learner_group=self.algorithm.learner_group, policies=[module_id], inference_only=True
        )

    def add_snapshot(self, weights: dict[str, th.Tensor], step: int) -> None:
        """Freeze ``weights`` (``main``'s at ``step``) into the pool; the oldest snapshot leaves a full pool."""
        from ray.rllib.core.rl_module.rl_module import RLModuleSpec

        self.snapshot_steps.append(step)
        spec = RLModuleSpec.from_module(self.algorithm.get_module(MAIN))
        self.algorithm.add_module(
            _snapshot_id(step), spec, new_agent_to_module_mapping_fn=self.mapping(), new_should_module_be_updated=[MAIN]
        )
        self.set_weights(_snapshot_id(step), weights)
        if len(self.snapshot_steps) > self.config.max_snapshots:
            oldest = self.snapshot_steps.pop(0)
            self.algorithm.remove_module(
                _snapshot_id(oldest), new_agent_to_module_mapping_fn=self.mapping(), new_should_module_be_updated=[MAIN]
            )

    def mapping(self) -> OpponentMapping:
        return opponent_mapping(self.config, self.seed, tuple(map(_snapshot_id, self.snapshot_steps)))

    def snapshot_weights(self) -> dict[str, Any]:
        """The pool, as ``pool.pt`` holds it: the steps and the network weights of the snapshots."""
        states = self.algorithm.learner_group.get_weights(module_ids=[_snapshot_id(s) for s in self.snapshot_steps])
        weights = [
            {key.removeprefix("network."): th.as_tensor(np.asarray(v)) for key, v in states[_snapshot_id(s)].items()}
            for s in self.snapshot_steps
        ]
        return {"steps": list(self.snapshot_steps), "weights": weights}

    # Training ---------------------------------------------------------------------------------------------
    def train_once(self) -> None:
        """One PPO iteration: sample ``num_games * n_steps`` env steps, update ``main``, log."""
        started, steps_before = time.perf_counter(), self.steps
        result = self.algorithm.train()
        runners = result.get("env_runners", {})
        sampled = runners.get("num_module_steps_sampled_lifetime", {}).get(MAIN, 0)
        self.steps = self.base_steps + int(sampled)
        seconds = max(time.perf_counter() - started, 1e-9)
        record = self.record
        record("charts/SPS", (self.steps - steps_before) / seconds)
        record("charts/env_steps_per_second", runners.get("num_env_steps_sampled", 0) / seconds)
        record("charts/pool_size", len(self.snapshot_steps))
        for outcome in ("win", "draw", "loss"):
            if f"main_{outcome}" in runners:
                record(f"charts/train_{outcome}_rate", runners[f"main_{outcome}"])
        if "episode_len_mean" in runners:
            record("charts/episode_length", runners["episode_len_mean"])
        losses = result.get("learners", {}).get(MAIN, {})
        for tag, key in LOSS_TAGS.items():
            if key in losses:
                record(f"losses/{tag}", losses[key])

    def record(self, key: str, value: Any) -> None:
        self.writer.add_scalar(key, float(value), self.steps)

    def evaluate(self, games: int, seed: int, network: ActorCritic | None = None) -> list[EvalResult]:
        """``main`` (or ``network``) against every evaluation opponent, most likely action then sampled."""
        if network is None:
            network = network_for(self.config.to_dict(), self.config.observation, self.variant)
            network.load_state_dict(self.main_weights())
        observation = self.config.observation
        return evaluate_players(
            lambda deterministic: NetworkOpponent(network, observation, deterministic),
            self.config,
            self.variant,
            games,
            seed,
        )

    def save(self, path: Path, with_pool: bool) -> None:
        """Checkpoint ``main`` (with the snapshots when ``with_pool``) atomically at ``path``."""
        metadata = {"config": self.config.to_dict(), "latest_eval": self.latest_eval}
        extras = {POOL_ENTRY: self.snapshot_weights()} if with_pool else {}
        save_checkpoint(path, self.main_weights(), self.variant, self.config.observation, self.steps, metadata, extras)


LOSS_TAGS = {
    "policy_loss": "policy_loss",
    "value_loss": "vf_loss",
    "entropy": "entropy",
    "explained_variance": "vf_explained_var",
    "grad_norm": "gradients_default_optimizer_global_norm",
}
"""``losses/<tag>``: RLlib's learner result of ``main`` under each key."""


def _snapshot_id(step: int) -> str:
    return f"snapshot_{step}"


class NetworkOpponent(Opponent):
    """An :class:`ActorCritic` playing in a batch of games (for the evaluations)."""

    def __init__(self, network: ActorCritic, observation: str, deterministic: bool) -> None:
        self.name = "learner"
        self.network = network
        self.observation = observation
        self.deterministic = deterministic

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        masks = batch.action_masks(games, false_declarations=False)
        return network_actions(self.network, batch.observe(games, self.observation), masks, self.deterministic)


# ---------------------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------------------
def run(config: TrainConfig, run_dir: Path, begin: Begin) -> Path:
    """Train up to ``total_steps``, save ``final.zip`` and ``latest.zip``, and evaluate the final checkpoint as
    read back from disk; returns its path."""
    th.set_num_threads(config.torch_threads)
    started_ray = start_ray()
    try:
        trainer = Trainer(config, run_dir, begin)
        try:
            return _train(trainer)
        finally:
            trainer.writer.close()
            trainer.algorithm.stop()
    finally:
        if started_ray:
            import ray

            ray.shutdown()


def _train(trainer: Trainer) -> Path:
    config, checkpoints = trainer.config, trainer.run_dir / "checkpoints"
    if trainer.steps:
        print(f"resuming {trainer.run_dir} at step {trainer.steps:,} with {len(trainer.snapshot_steps)} snapshots")
    trainer.writer.add_text("config", markdown_table(config), trainer.steps)
    schedule = {name: _next_multiple(trainer.steps, every) for name, every in _intervals(config).items()}
    with tqdm(total=config.total_steps, initial=trainer.steps, unit="step", unit_scale=True, smoothing=0.1) as bar:
        while trainer.steps < config.total_steps:
            trainer.train_once()
            bar.update(trainer.steps - bar.n)
            step = trainer.steps
            if step >= schedule["snapshot"]:
                trainer.add_snapshot(trainer.main_weights(), step)
            if step >= schedule["eval"]:
                results = trainer.evaluate(config.eval_games, config.seed)
                for result in results:
                    log_result(trainer.record, result)
                trainer.record("eval/score", float(np.mean([r.score() for r in results])))
                trainer.latest_eval = {f"{r.opponent} ({r.playing})": r.score() for r in results}
                bar.set_postfix_str(" ".join(f"{k} {v:.2f}" for k, v in trainer.latest_eval.items()))
            if step >= schedule["checkpoint"]:
                trainer.save(checkpoints / f"step_{step:09d}.zip", with_pool=False)
                trainer.save(checkpoints / "latest.zip", with_pool=True)
            for name, every in _intervals(config).items():
                if step >= schedule[name]:
                    schedule[name] = _next_multiple(step, every)
    final = checkpoints / "final.zip"
    trainer.save(final, with_pool=True)
    trainer.save(checkpoints / "latest.zip", with_pool=True)

    # The final table, from the final checkpoint as written on disk; also the last point of the eval curves.
    network, _ = load_network(final, trainer.variant)
    results = trainer.evaluate(config.final_eval_games, config.seed + 1000, network)
    write_final_eval(trainer.run_dir, final, trainer.steps, results)
    for result in results:
        log_result(trainer.record, result)
    print_results(results, trainer.steps)
    print(f"\nfinal checkpoint: {final}\nagent spec: rllib:{trainer.run_dir}")
    print(f"TensorBoard: tensorboard --logdir {trainer.run_dir / 'tb'}   (then open http://localhost:6006)")
    return final


def _intervals(config: TrainConfig) -> dict[str, int]:
    return {"snapshot": config.snapshot_every, "eval": config.eval_every, "checkpoint": config.checkpoint_every}
