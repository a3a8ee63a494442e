"""``quarto train`` with ``backend: rllib``: RLlib's PPO on ``quarto_v1``, the same self-play (``configs/rllib.yaml``).

The environment is ``quarto_v1`` itself, one game per env, through :func:`quarto_env.flat.flat_env` (flat
``float32`` planes under ``observations``, the ``action_mask``) and RLlib's ``PettingZooEnv``; each env runner
steps ``num_games`` of them side by side (one batched forward pass per module and step), and
``num_env_runners`` runners play at once (0: in this process). RLlib's PPO (the new API stack: RLModules,
Learners, EnvRunners) trains one module, ``main``, an :class:`agents.networks.policy_value.ActorCritic` that masks
illegal actions out of its logits.

Self-play, as with the sb3 backend: each game seats ``main`` in a random seat (``player_0`` or ``player_1``; who
gives first is drawn by the env) against an opponent drawn from ``opponents``: ``snapshots`` -- frozen copies
of ``main`` (the untrained one first, then one every ``snapshot_every`` steps; at most ``max_snapshots``, the
oldest leaves), each an RLModule that is never trained -- or a baseline agent of :mod:`agents` (``random``,
``greedy``, ``minimax:depth=2``, ...), run by :class:`BaselineModule`, which recovers the position from the
planes (:func:`quarto_env.flat.decode`) and asks the agent. When a full pool drops its oldest snapshot, RLlib
restarts the games in progress (that is how it removes a module; the sb3 backend lets them finish against the
newest one). The draw is a function of the episode's id, so both
seats of a game agree on it whatever process maps them. quarto_v1 already gives the loser -1 whichever phase
lost (a placement that let the opponent... or a give that handed over a win); only ``main``'s own experience
trains it.

``total_steps``, ``snapshot_every``, ``eval_every``, ``early_evals`` and ``checkpoint_every`` count ``main``'s
decisions, as the sb3 backend counts the learner's; a PPO update takes ``num_games * n_steps`` environment steps
(both seats), so ``main``'s steps come in leaps of about half that, and the run stops at the first update at or
past ``total_steps``. The scheduled tasks run after each update, and a fresh run's evaluation at step 0 before the
first.
The run folder is the sb3 backend's, and the run's life -- its schedule, checkpoints, evaluations and final
table -- every backend's (:func:`experiments.training.loop.train_run`, driving a :class:`Trainer`):
``config.yaml``, ``command.txt``, ``.lock``, ``tb/`` with the same tags
(``eval/<opponent>/...``, ``eval_sampled/``, ``eval/score`` and, with ``sample_games``, ``games/`` from
:class:`experiments.evaluation.log.EvaluationLog`,
``charts/SPS`` in ``main``'s steps per second, ``charts/env_steps_per_second``, ``charts/pool_size``,
``charts/train_*_rate``, ``losses/``), ``checkpoints/`` (``latest.zip``, ``step_<N>.zip``, ``final.zip``; no
``best.zip``; the project's own format, read as data: :mod:`agents.rllib`) and ``final_eval.json`` (the final
checkpoint read back from disk). ``rllib:RUN_FOLDER`` plays the result. Ctrl-C saves ``latest.zip`` first, as
for the other backends.

Resuming rebuilds the algorithm from the config and restores ``main``'s weights, its optimizer state (Adam's
moments and step counts; the learning rate is the config's), the snapshots and the step count from
``latest.zip`` (one written before the optimizer state was saved resumes with Adam from zero); the games in
progress when the run stopped are lost.

Ray: ``quarto train`` starts a local instance before the run, or joins the cluster of ``--address`` or
``RAY_ADDRESS`` (``ray start --head`` on the head node, ``ray start --address=HEAD:6379`` on the others;
:mod:`experiments.training.ray_runtime`). Every process sets torch to ``torch_threads`` threads. The learner
trains in this process (``num_learners: 0``) or in ``num_learners`` Learner actors, on ``gpus_per_learner`` GPUs
each (refused when the cluster has fewer); Ray reserves ``cpus_per_env_runner`` CPUs for each env runner. In a
Tune trial (``quarto sweep``), the env runners and learners take the bundles of the trial's placement group,
which :func:`resource_bundles` lays out.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import zlib
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from torch.utils.tensorboard import SummaryWriter

from agents.networks.checkpoints import CheckpointError, CheckpointHeader, read_weights
from agents.networks.policy_value import ActorCritic, network_actions, network_for
from agents.rllib import NETWORK_ENTRY, OPTIMIZER_ENTRY, load_network, save_checkpoint
from agents.specs import make_agent
from experiments.evaluation.games import Mover, NetworkMover, learner_players
from experiments.training.config import SNAPSHOTS, ConfigError, TrainConfig
from experiments.training.loop import Habits, Learner, train_run
from experiments.training.ray_runtime import quiet_logger
from experiments.training.run import POOL_ENTRY, ResumePoint, evaluation_log, read_resume_point, run_seed
from quarto_env.checks import one_line
from quarto_env.core import Variant
from quarto_env.env import AGENTS
from quarto_env.flat import ACTION_MASK, OBSERVATIONS, decode, flat_env
from quarto_env.observation import observation_kind

ENV_NAME = "quarto_flat"
"""The name the flat ``quarto_v1`` is registered under with Ray (``env_config``: the ``quarto_env.env`` flags)."""
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
            variant = Variant.make(**options["variant"])  # plain data: the model config travels to other processes
            self.network = network_for(options["network"], observation_kind(options["observation"]), variant)

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
    return {spec: f"baseline_{i}" for i, spec in enumerate(s for s in config.ppo.opponents if s != SNAPSHOTS)}


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
    from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv
    from ray.tune.registry import register_env

    register_env(ENV_NAME, lambda env_kwargs: PettingZooEnv(flat_env(**env_kwargs)))
    return algorithm_config(config, variant, seed).build_algo()


def resource_bundles(config: TrainConfig) -> list[dict[str, float]]:
    """The Ray resources a run of ``config`` takes, as RLlib requests them (``PPO.default_resource_request``):
    the training process's bundle (with the local learner's GPUs), then one per env runner and one per remote
    learner. Inside a placement group, env runner ``i`` takes bundle ``i``: a Tune trial must reserve them all."""
    from ray.rllib.algorithms.ppo import PPO
    from ray.tune import PlacementGroupFactory

    with quiet_logger("ray.rllib.algorithms.algorithm_config"):  # its note that PPO runs on the new API stack
        request = PPO.default_resource_request(algorithm_config(config, config.variant, config.seed))
    assert isinstance(request, PlacementGroupFactory)  # the new API stack's request
    return [{kind: float(amount) for kind, amount in bundle.items() if amount} for bundle in request.bundles]


def check_gpus(config: TrainConfig) -> None:
    """Refuse a config whose learners ask for more GPUs than the Ray cluster this process is connected to has (the
    GPUs may be on other nodes than this one, so torch's view of this machine does not decide)."""
    import ray

    resources, learners = config.rllib, max(1, config.rllib.num_learners)
    wanted = resources.gpus_per_learner * learners
    available = float(ray.cluster_resources().get("GPU", 0))
    if wanted > available:
        raise ConfigError(
            f"config field rllib.gpus_per_learner must fit the Ray cluster: {learners} learner(s) "
            f"x {resources.gpus_per_learner:g} GPU(s) = {wanted:g}, and the cluster has {available:g}; give "
            "rllib.gpus_per_learner=0 (train on CPU), or join a cluster with GPUs (quarto train --address HEAD:PORT, "
            "or quarto sweep --address)"
        )


def algorithm_config(config: TrainConfig, variant: Variant, seed: int) -> Any:
    """The ``PPOConfig`` of :func:`build_algorithm` (the env must be registered before it builds)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    network_module, baseline_module = _module_classes()
    specs = {MAIN: RLModuleSpec(module_class=network_module, model_config=network_model_config(config))}
    for spec, module_id in baseline_ids(config).items():
        options = {"spec": spec, "variant": variant.to_dict(), "seed": seed}
        specs[module_id] = RLModuleSpec(module_class=baseline_module, model_config=options)
    learners = max(1, config.rllib.num_learners)  # RLlib's batch sizes are per learner; the config's are totals
    return (
        PPOConfig()
        .environment(ENV_NAME, env_config={**variant.to_dict(), "observation": config.observation.name})
        .env_runners(
            num_env_runners=config.rllib.num_env_runners,
            num_envs_per_env_runner=config.num_games,
            num_cpus_per_env_runner=config.rllib.cpus_per_env_runner,  # type: ignore[arg-type]  # Ray takes fractions
        )
        .learners(num_learners=config.rllib.num_learners, num_gpus_per_learner=config.rllib.gpus_per_learner)
        .multi_agent(
            policies=set(specs),
            policy_mapping_fn=opponent_mapping(config, seed, ()),
            policies_to_train=[MAIN],
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .training(
            lr=config.ppo.learning_rate,
            gamma=config.ppo.gamma,
            lambda_=config.ppo.gae_lambda,
            clip_param=config.ppo.clip_range,
            entropy_coeff=config.ppo.ent_coef,
            vf_loss_coeff=config.ppo.vf_coef,
            grad_clip=config.ppo.max_grad_norm,
            num_epochs=config.ppo.n_epochs,
            minibatch_size=-(-config.ppo.batch_size // learners),
            train_batch_size_per_learner=-(-config.num_games * config.ppo.n_steps // learners),
            use_kl_loss=False,  # clipping alone, as stable-baselines3's PPO
        )
        .callbacks(_outcome_callback())
        .debugging(seed=seed, log_level="ERROR")
    )


def network_model_config(config: TrainConfig) -> dict[str, Any]:
    """The ``model_config`` of ``main`` and of its snapshots."""
    return {
        "network": {"policy": config.policy, "net_arch": list(config.net_arch)},
        "observation": config.observation.name,
        "variant": config.variant.to_dict(),
        "torch_threads": config.torch_threads,
    }


def opponent_mapping(config: TrainConfig, seed: int, snapshot_ids: tuple[str, ...]) -> OpponentMapping:
    """The mapping of ``config``'s opponent mix with these snapshots in the pool."""
    baselines = tuple((module_id, config.ppo.opponents[spec]) for spec, module_id in baseline_ids(config).items())
    return OpponentMapping(seed, baselines, float(config.ppo.opponents.get(SNAPSHOTS, 0.0)), snapshot_ids)


# ---------------------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Begin:
    """Where a run starts: from scratch, or ``main``'s weights, optimizer state, the snapshots and the step count of
    a checkpoint."""

    steps: int = 0
    weights: dict[str, th.Tensor] | None = None
    snapshots: list[tuple[int, dict[str, th.Tensor]]] = dataclasses.field(default_factory=list)
    optimizer: dict[str, Any] | None = None
    """``main``'s optimizer state (:meth:`Trainer.optimizer_state`); ``None``: Adam starts from zero."""
    resumed: ResumePoint | None = None
    """The checkpoint's record of the evaluations (:func:`~experiments.training.run.evaluation_log`)."""


def start(config: TrainConfig, run_dir: Path, resume: bool) -> Begin:
    """Where the run starts; on ``resume``, ``latest.zip`` checked and read (as data). Writes nothing."""
    if not resume:
        return Begin()
    resumed = read_resume_point(config, run_dir, with_pool=True)
    latest = resumed.checkpoint  # latest.zip, or the newest intact checkpoint where it is damaged
    load_network(latest, config.variant, metadata=resumed.metadata)  # the kind of checkpoint, its variant, its network
    weights = read_weights(latest, NETWORK_ENTRY)
    if resumed.pool is None:  # a checkpoint of the network alone: the pool starts with it, Adam from zero
        return Begin(resumed.steps, weights, [(resumed.steps, weights)], None, resumed)
    fresh = network_for(config.to_dict(), config.observation, config.variant)
    try:
        for snapshot in resumed.pool["weights"]:
            fresh.load_state_dict(snapshot)
    except (RuntimeError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"checkpoint {str(latest)!r}: {POOL_ENTRY} holds snapshots of another network ({one_line(exc)})"
        ) from exc
    snapshots = list(zip(resumed.pool["steps"], resumed.pool["weights"], strict=True))
    optimizer = read_weights(latest, OPTIMIZER_ENTRY, missing_ok=True)  # older checkpoints have none
    return Begin(resumed.steps, weights, snapshots, optimizer, resumed)


class Trainer(Learner):
    """The algorithm, its pool of snapshots and its step count: the learner of the run's life
    (:func:`experiments.training.loop.train_run`); the RLlib backend keeps no ``best.zip``, and ``main``'s steps per
    update vary."""

    habits = Habits("step", snapshots=True, keeps_best=False)
    steps = 0
    """``main``'s steps so far."""

    def __init__(self, config: TrainConfig, run_dir: Path, begin: Begin) -> None:
        self.config = config
        self.variant = config.variant
        self.run_dir = run_dir
        self.seed = run_seed(config, begin.steps)
        self.algorithm = build_algorithm(config, self.variant, self.seed)
        self.base_steps = self.steps = begin.steps
        self.snapshot_steps: list[int] = []
        if begin.weights is not None:
            self.set_weights(MAIN, begin.weights)
        if begin.optimizer is not None:
            self.set_optimizer_state(begin.optimizer)
        for step, weights in begin.snapshots or [(0, self.main_weights())]:
            self.add_snapshot(weights, step)
        # No grade (grade_positions is ignored); the sample games are graded.
        self.evaluations = evaluation_log(config, begin.resumed)

    def begin(self, run_dir: Path, writer: SummaryWriter) -> str:
        self.writer = writer
        return f"{len(self.snapshot_steps)} snapshots"

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
        if len(self.snapshot_steps) > self.config.ppo.max_snapshots:
            oldest = self.snapshot_steps.pop(0)
            self.algorithm.remove_module(
                _snapshot_id(oldest), new_agent_to_module_mapping_fn=self.mapping(), new_should_module_be_updated=[MAIN]
            )

    def optimizer_state(self) -> dict[str, Any]:
        """``main``'s optimizer state as its learner holds it: per optimizer, the per-parameter buffers of its
        ``state_dict()`` (Adam's ``step``, ``exp_avg``, ``exp_avg_sq``) as tensors, which a checkpoint holds as
        data. The param groups (learning rate, betas) are left out: they are the config's."""
        return {
            name: {
                index: {key: th.as_tensor(value) for key, value in buffers.items()}
                for index, buffers in entry["state"]["state"].items()
            }
            for name, entry in self._optimizers().items()
            if entry["module_id"] == MAIN
        }

    def set_optimizer_state(self, saved: dict[str, Any]) -> None:
        """Give ``main``'s learner(s) the optimizer state ``saved`` (:meth:`optimizer_state`), keeping the param
        groups the config gave them (a resume may change the learning rate)."""
        from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_OPTIMIZER

        current = self._optimizers()
        try:
            if set(saved) != {name for name, entry in current.items() if entry["module_id"] == MAIN}:
                raise ValueError(f"it holds optimizers {sorted(saved)}, the learner has {sorted(current)}")
            restored = {
                name: {**current[name], "state": {**current[name]["state"], "state": saved[name]}} for name in saved
            }
            self.algorithm.learner_group.set_state({COMPONENT_LEARNER: {COMPONENT_OPTIMIZER: restored}})
        except (ValueError, RuntimeError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"checkpoint {str(self.run_dir / 'checkpoints' / 'latest.zip')!r}: {OPTIMIZER_ENTRY} does not fit "
                f"main's optimizer ({one_line(exc)})"
            ) from exc

    def _optimizers(self) -> dict[str, Any]:
        """The learner's optimizers, as RLlib gives them: name -> ``module_id`` and ``state`` (a ``state_dict``)."""
        from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_OPTIMIZER

        state = self.algorithm.learner_group.get_state(components=f"{COMPONENT_LEARNER}/{COMPONENT_OPTIMIZER}")
        return state[COMPONENT_LEARNER][COMPONENT_OPTIMIZER]

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
    def leap(self) -> None:
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
        for tag, (key, sign) in LOSS_TAGS.items():
            if key in losses:
                record(f"losses/{tag}", sign * float(losses[key]))

    def record(self, key: str, value: Any) -> None:
        self.writer.add_scalar(key, float(value), self.steps)

    def snapshot(self) -> None:
        self.add_snapshot(self.main_weights(), self.steps)

    def players(self, checkpoint: Path | None = None) -> list[Mover]:
        """``main``'s network -- as the learner holds it now, or in ``checkpoint`` -- in its ways of playing for
        the evaluations."""
        if checkpoint is not None:
            return list(network_players(load_network(checkpoint, self.variant)[0], self.config))
        network = network_for(self.config.to_dict(), self.config.observation, self.variant)
        network.load_state_dict(self.main_weights())
        return list(network_players(network, self.config))

    def agent_spec(self, final: Path) -> str:
        return f"rllib:{self.run_dir}"

    def save(self, path: Path, resumable: bool) -> None:
        """Checkpoint ``main`` (with the snapshots when ``resumable``) atomically at ``path``."""
        metadata = {"config": self.config.to_dict(), **self.evaluations.checkpoint_fields()}
        extras = {POOL_ENTRY: self.snapshot_weights(), OPTIMIZER_ENTRY: self.optimizer_state()} if resumable else {}
        header = CheckpointHeader(self.variant, self.config.observation.name, self.steps)
        save_checkpoint(path, self.main_weights(), header, metadata, extras)


LOSS_TAGS = {
    "policy_loss": ("policy_loss", 1),
    "value_loss": ("vf_loss", 1),
    "entropy_loss": ("entropy", -1),
    "explained_variance": ("vf_explained_var", 1),
    "loss": ("total_loss", 1),
    "grad_norm": ("gradients_default_optimizer_global_norm", 1),
}
"""``losses/<tag>``: RLlib's learner result of ``main`` under a key, times a sign -- the tags and signs of the
other backends (``entropy_loss`` is minus the entropy, as stable-baselines3 logs it). RLlib's PPO has no clip
fraction, and no KL without its KL loss (off: clipping alone); ``grad_norm`` is its own."""


def _snapshot_id(step: int) -> str:
    return f"snapshot_{step}"


def network_players(network: ActorCritic, config: TrainConfig) -> list[NetworkMover]:
    """An :class:`ActorCritic`'s ways of playing in the evaluations: its most likely action, then sampled."""
    return learner_players(functools.partial(network_actions, network), config.observation)


# ---------------------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------------------
def run(config: TrainConfig, run_dir: Path, begin: Begin) -> Path:
    """Train up to ``total_steps`` on the Ray that ``quarto train`` started or joined, in the run's life
    (:func:`experiments.training.loop.train_run`); returns the final checkpoint's path."""
    th.set_num_threads(config.torch_threads)
    trainer = Trainer(config, run_dir, begin)
    try:
        return train_run(config, run_dir, trainer)
    finally:
        trainer.algorithm.stop()
