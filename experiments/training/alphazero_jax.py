"""``quarto train``'s AlphaZero backend on JAX (``algorithm: alphazero``, ``backend: jax``; the ``jax`` extra):
self-play searched by mctx on the pure-JAX rules (:mod:`quarto_env.jax`), an equinox network
(:mod:`agents.networks.jax_network`) trained by optax, one self-play-and-train iteration one jitted function
(``configs/alphazero_jax.yaml``, ``configs/alphazero_jax_gpu.yaml``).

An iteration (:func:`make_iteration`), all on the device:

1. ``num_games`` new games play ``rollout_steps`` actions each, every action searched with ``sims`` simulations:
   ``root: puct`` is mctx's ``muzero_policy`` (PUCT with ``c_puct``, an unvisited action valued as its parent,
   Dirichlet noise at the root, the action sampled from the visits over the first ``temperature_plies`` actions
   of a game and the most visited after), ``root: gumbel`` its ``gumbel_muzero_policy`` (``gumbel_actions``
   candidates, sequential halving, its choice played). A game that ends starts again at once.
2. Each position's policy target (``policy_target``: the visit distribution, or ``softmax(log prior +
   completed_q_beta * completed Q)`` as the torch backend's) and root value are kept; its outcome is the sum of
   the rewards of the rest of its game for the player to move there, so a game still on at the end of the
   iteration stores nothing (:func:`value_targets`). The replay buffer keeps the latest ``buffer_size``.
3. ``sample_reuse * num_games * rollout_steps / batch_size`` gradient steps (at least one) on minibatches drawn
   uniformly from the buffer (once it holds ``batch_size``), on the same losses as the torch backend: the
   policy's cross-entropy plus ``vf_coef`` times the value's squared error to ``(1 - value_mix) * outcome +
   value_mix * root value``; AdamW with ``weight_decay`` after clipping to ``max_grad_norm``.

The sign of a value. In Quarto the same player places and then gives, so a value must not flip at every step:
the search's recurrent function returns the reward of the player who acted at the parent, and a discount of -1
where the player to move changes between parent and child, +1 where it stays, 0 once the game is over
(:func:`step_sign`); the value targets are per seat, read for the player to move (:func:`value_targets`).
tests/test_alphazero_jax.py pins both on positions the solver values.

Around the iteration, every backend's run (:mod:`experiments.training.run`): the run folder, ``total_steps`` in
searched positions (``num_games * rollout_steps`` per iteration), the evaluations and grades of the torch backend
-- the network on the CPU (:class:`agents.networks.jax_network.JaxEvaluator`) with the project's search, ``eval_sims``
simulations --, ``checkpoints/untrained.zip``, and sealed checkpoints marked ``backend: jax`` (the network, and
in ``latest.zip`` and ``final.zip`` the optimizer and the buffer, as plain arrays). ``az:RUN`` plays them on any
host. TensorBoard: ``charts/`` (positions, games and simulations per second, buffer, game length, root value),
``losses/``, ``eval/``.

Unlike the torch backend, every position is searched (the moves the rules decide too), the iteration compiles
once per process (about half a minute on a CPU; the rates in ``charts/`` leave that iteration out), and the
``alphazero`` options without a meaning here are refused in one line (:data:`experiments.training.config.
JAX_FIXED`: another network design, playout-cap randomisation, exact rescoring, Ray workers, augmentation).

``device``: ``cpu`` runs on the CPU, ``auto`` on JAX's default device (a GPU where jax has one), ``cuda`` on a GPU
or is refused. :mod:`experiments.training.alphazero_jax_timing` times the iteration, for the device check, and
the self-play of both backends A/B.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import optax
from tqdm import tqdm

from agents.networks.checkpoints import CheckpointError, CheckpointHeader, entry_bytes
from agents.networks.jax_network import (
    ILLEGAL_LOGIT,
    JaxEvaluator,
    SlotsNetwork,
    arrays_bytes,
    batched,
    load_network,
    masked_logits,
    new_network,
    read_arrays,
    save_checkpoint,
    weight_arrays,
    with_weights,
)
from agents.networks.policy_value import PolicyValueNetwork
from experiments.evaluation.log import EvaluationLog
from experiments.training.alphazero import (
    BUFFER_ENTRY,
    UNTRAINED_CHECKPOINT,
    UNTRAINED_SEED_OFFSET,
    SearchLearner,
)
from experiments.training.config import AlphaZeroConfig, ConfigError, TrainConfig
from experiments.training.loop import train_run
from experiments.training.run import evaluation_log, read_resume_point, restore_evaluations, run_seed
from experiments.training.targets import check_targets
from quarto_env.checks import one_line
from quarto_env.core import Variant
from quarto_env.jax import QuartoEnv
from quarto_env.jax import env as jax_env

OPTIMIZER_ENTRY = "optimizer.npz"
PB_C_BASE = 1e9
"""mctx's ``pb_c_base``: so large that its log term vanishes and ``c_puct`` is the PUCT constant, as in
:mod:`agents.tree.puct`."""


# ---------------------------------------------------------------------------------------------------------
# The sign of a value
# ---------------------------------------------------------------------------------------------------------
def step_sign(parent_player: jax.Array, child: Any) -> tuple[jax.Array, jax.Array]:
    """The reward and discount of the steps from parents whose player to move is ``parent_player`` (``(B,)``) to
    the states ``child``: the reward of the player who acted (``child.rewards[parent_player]``), and a discount of
    0 once the game is over, +1 where the same player moves again (a placement is followed by its give), -1 where
    the other player moves (the child's value is the other player's)."""
    reward = jnp.take_along_axis(child.rewards, parent_player[:, None], axis=1)[:, 0]
    same = child.current_player == parent_player
    discount = jnp.where(child.terminated, 0.0, jnp.where(same, 1.0, -1.0))
    return reward.astype(jnp.float32), discount.astype(jnp.float32)


def value_targets(players: jax.Array, rewards: jax.Array, ended: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The outcome of each position of a rollout for its player to move, and whether it is known: ``players``
    ``(T, B)`` the seat to move at each position, ``rewards`` ``(T, B, 2)`` what the action taken there gave each
    seat, ``ended`` ``(T, B)`` whether it ended the game (the next row of that lane is a new game). The outcome is
    the sum of the rewards from the position to its game's end, read for its player (per seat, so it never
    depends on who moved last); a position whose game had not ended by row ``T - 1`` is unknown."""

    def back(carry: tuple[jax.Array, jax.Array], row: tuple[jax.Array, ...]) -> tuple[Any, Any]:
        later, known = carry
        player, reward, end = row
        total = reward + jnp.where(end[:, None], 0.0, later)
        known = end | known
        return (total, known), (jnp.take_along_axis(total, player[:, None], axis=1)[:, 0], known)

    lanes = players.shape[1]
    start = (jnp.zeros((lanes, 2), jnp.float32), jnp.zeros(lanes, bool))
    _, (outcome, known) = jax.lax.scan(back, start, (players, rewards, ended), reverse=True)
    return jnp.clip(outcome, -1.0, 1.0), known


# ---------------------------------------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------------------------------------
def recurrent_fn(env: QuartoEnv) -> Callable[..., tuple[mctx.RecurrentFnOutput, Any]]:
    """mctx's recurrent function on ``env``'s rules: the embedding is the game state itself, a step is the
    env's, its reward and discount are :func:`step_sign`'s, and a finished game's value is 0."""

    def recurrent(network: SlotsNetwork, key: jax.Array, action: jax.Array, state: Any) -> tuple[Any, Any]:
        child = jax.vmap(env.step)(state, action)
        logits, value = batched(network, child.observation)
        reward, discount = step_sign(state.current_player, child)
        output = mctx.RecurrentFnOutput(
            reward=reward,
            discount=discount,
            prior_logits=masked_logits(logits, child.legal_action_mask),
            value=jnp.where(child.terminated, 0.0, value),
        )
        return output, child

    return recurrent


def puct_q(tree: mctx.Tree, node_index: jax.Array) -> jax.Array:
    """The Q of each action for PUCT's choice at a node, as :mod:`agents.tree.puct` takes it: the mean backed-up value
    of a visited action, the node's own value for an unvisited one, and below any value for an illegal one."""
    visited = tree.children_visits[node_index] > 0
    legal = tree.children_prior_logits[node_index] > ILLEGAL_LOGIT / 2
    q = jnp.where(visited, tree.qvalues(node_index), tree.node_values[node_index])
    return jnp.where(legal, q, -2.0)


class Searched(NamedTuple):
    """One search of a batch of positions: the action to play, the policy target, the root value, and whether
    the network's prior agreed with the search's most visited action."""

    action: jax.Array
    target: jax.Array
    root_value: jax.Array
    agreement: jax.Array


def search(network: SlotsNetwork, env: QuartoEnv, settings: AlphaZeroConfig, key: jax.Array, state: Any) -> Searched:
    """Search every position of the batch ``state`` with the config's root, simulations and targets."""
    logits, value = batched(network, state.observation)
    legal = state.legal_action_mask
    prior = masked_logits(logits, legal)
    root = mctx.RootFnOutput(prior_logits=prior, value=value, embedding=state)
    common = (network, key, root, recurrent_fn(env), settings.sims)
    if settings.root == "gumbel":
        out = mctx.gumbel_muzero_policy(
            *common, invalid_actions=~legal, max_num_considered_actions=settings.gumbel_actions
        )
    else:
        out = mctx.muzero_policy(
            *common,
            invalid_actions=~legal,
            qtransform=puct_q,
            dirichlet_fraction=settings.dirichlet_fraction,
            dirichlet_alpha=settings.dirichlet_alpha,
            pb_c_init=settings.c_puct,
            pb_c_base=PB_C_BASE,
        )
    summary = out.search_tree.summary()
    action = out.action
    if settings.root != "gumbel":  # PUCT samples by the visits over the first plies, then plays the most visited
        greedy = jnp.argmax(summary.visit_counts, axis=1)
        action = jnp.where(state._step_count < settings.temperature_plies, out.action, greedy)
    if settings.policy_target == "completed_q":
        completed = jnp.where(summary.visit_counts > 0, summary.qvalues, summary.value[:, None])
        improved = jax.nn.log_softmax(prior) + settings.completed_q_beta * completed
        target = jax.nn.softmax(masked_logits(improved, legal))
    else:
        target = summary.visit_probs
    agreement = jnp.argmax(prior, axis=1) == jnp.argmax(summary.visit_counts, axis=1)
    return Searched(action.astype(jnp.int32), target, summary.value, agreement)


# ---------------------------------------------------------------------------------------------------------
# The replay buffer and the iteration
# ---------------------------------------------------------------------------------------------------------
class Replay(NamedTuple):
    """The replay buffer on the device: the latest ``capacity`` positions (planes and legal actions) with their
    policy targets, outcomes and root values, a ring from ``next``."""

    planes: jax.Array
    legal: jax.Array
    policy: jax.Array
    outcome: jax.Array
    root_value: jax.Array
    size: jax.Array
    next: jax.Array

    @staticmethod
    def empty(capacity: int, shape: tuple[int, ...], num_actions: int) -> Replay:
        return Replay(
            jnp.zeros((capacity, *shape), bool),
            jnp.zeros((capacity, num_actions), bool),
            jnp.zeros((capacity, num_actions), jnp.float32),
            jnp.zeros(capacity, jnp.float32),
            jnp.zeros(capacity, jnp.float32),
            jnp.int32(0),
            jnp.int32(0),
        )

    @property
    def capacity(self) -> int:
        return len(self.outcome)

    def add(self, rows: Replay, keep: jax.Array) -> Replay:
        """The buffer with the rows of ``rows`` that ``keep`` marks written after the newest (the oldest go)."""
        order = jnp.cumsum(keep) - 1
        at = jnp.where(keep, (self.next + order) % self.capacity, self.capacity)  # out of range: dropped
        planes, legal, policy, outcome, root_value = (
            getattr(self, name).at[at].set(getattr(rows, name), mode="drop")
            for name in ("planes", "legal", "policy", "outcome", "root_value")
        )
        added = keep.sum(dtype=jnp.int32)
        size = jnp.minimum(self.size + added, self.capacity)
        return Replay(planes, legal, policy, outcome, root_value, size, (self.next + added) % self.capacity)

    def to_bytes(self) -> bytes:
        """The kept rows, oldest first, as an ``.npz`` of plain arrays (the planes and masks bit-packed)."""
        host = jax.device_get(self)
        size, start = int(host.size), int(host.next) if int(host.size) == self.capacity else 0
        order = (np.arange(size) + start) % self.capacity
        out = io.BytesIO()
        np.savez(
            out,
            planes=np.packbits(host.planes[order], axis=-1),
            legal=host.legal[order],
            policy=host.policy[order],
            outcome=host.outcome[order],
            root_value=host.root_value[order],
        )
        return out.getvalue()

    def loaded(self, data: bytes) -> Replay:
        """This (empty) buffer holding the rows of :meth:`to_bytes`'s ``data``, the newest where they are more
        than it holds; ``ValueError`` for arrays of other shapes."""
        arrays = read_arrays(data)
        planes = np.unpackbits(arrays["planes"], axis=-1, count=self.planes.shape[-1]).astype(bool)
        count = len(planes)
        shapes = {
            "planes": (planes.shape, (count, *self.planes.shape[1:])),
            "legal": (arrays["legal"].shape, (count, self.legal.shape[1])),
            "policy": (arrays["policy"].shape, (count, self.policy.shape[1])),
            "outcome": (arrays["outcome"].shape, (count,)),
            "root_value": (arrays["root_value"].shape, (count,)),
        }
        for name, (found, expected) in shapes.items():
            if found != expected:
                raise ValueError(f"the buffer's {name} has shape {found}, not {expected}")
        check_targets(arrays["policy"], arrays["outcome"], arrays["root_value"])
        rows = Replay(
            jnp.asarray(planes),
            jnp.asarray(arrays["legal"], bool),
            jnp.asarray(arrays["policy"], jnp.float32),
            jnp.asarray(arrays["outcome"], jnp.float32),
            jnp.asarray(arrays["root_value"], jnp.float32),
            jnp.int32(0),
            jnp.int32(0),
        )
        keep = jnp.arange(count) >= count - self.capacity
        return self.add(rows, keep)


class Metrics(NamedTuple):
    """What an iteration reports (sums over its positions, means over its gradient steps)."""

    games: jax.Array
    length_sum: jax.Array
    decisive: jax.Array
    stored: jax.Array
    agreement: jax.Array
    root_abs_value: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    updates: jax.Array


def make_optimizer(settings: AlphaZeroConfig) -> optax.GradientTransformation:
    """AdamW after clipping the gradients' global norm, as the torch backend's."""
    return optax.chain(
        optax.clip_by_global_norm(settings.max_grad_norm),
        optax.adamw(settings.learning_rate, weight_decay=settings.weight_decay),
    )


def updates_per_iteration(config: TrainConfig) -> int:
    """Gradient steps of an iteration: ``sample_reuse`` samples per position it plays, at least one step."""
    settings = config.alphazero
    return max(1, round(settings.sample_reuse * config.num_games * settings.rollout_steps / settings.batch_size))


def losses(network: SlotsNetwork, rows: Replay, value_mix: float) -> tuple[jax.Array, jax.Array]:
    """``(policy loss, value loss)`` of a minibatch: the cross-entropy of the masked policy to the policy targets,
    and the squared error of the value to ``(1 - value_mix) * outcome + value_mix * root value``."""
    logits, value = batched(network, rows.planes)
    log_policy = jax.nn.log_softmax(masked_logits(logits, rows.legal))
    policy_loss = -(rows.policy * log_policy).sum(1).mean()
    target = (1 - value_mix) * rows.outcome + value_mix * rows.root_value
    return policy_loss, ((value - target) ** 2).mean()


Iteration = Callable[[Any, Any, Replay, jax.Array], tuple[Any, Any, Replay, Metrics]]
"""``(params, optimizer state, buffer, key) -> (params, optimizer state, buffer, metrics)``."""


def make_selfplay(config: TrainConfig, env: QuartoEnv) -> Callable[[SlotsNetwork, jax.Array], Any]:
    """Self-play of an iteration (not jitted): ``(network, key) -> (rows, keep, metrics)``, the ``num_games *
    rollout_steps`` searched positions with their targets, which of them to store (their game ended), and the
    counts of :class:`Metrics` (no losses)."""
    settings, games, steps = config.alphazero, config.num_games, config.alphazero.rollout_steps

    def play(network: SlotsNetwork, key: jax.Array) -> tuple[Replay, jax.Array, Metrics]:
        def one_step(state: Any, key: jax.Array) -> tuple[Any, Any]:
            search_key, reset_key = jax.random.split(key)
            searched = search(network, env, settings, search_key, state)
            child = jax.vmap(env.step)(state, searched.action)
            fresh = jax.vmap(env.init)(jax.random.split(reset_key, games))
            ended = child.terminated
            decisive = ended & (jnp.abs(child.rewards).max(1) >= 1)
            record = (
                state.observation,
                state.legal_action_mask,
                searched.target,
                state.current_player,
                searched.root_value,
                child.rewards,
                ended,
                jnp.where(ended, child._step_count, 0),
                decisive,
                searched.agreement,
            )
            restarted = jax.tree_util.tree_map(
                lambda new, old: jnp.where(ended.reshape(-1, *[1] * (old.ndim - 1)), new, old), fresh, child
            )
            return restarted, record

        init_key, play_key = jax.random.split(key)
        start = jax.vmap(env.init)(jax.random.split(init_key, games))
        _, record = jax.lax.scan(one_step, start, jax.random.split(play_key, steps))
        planes, legal, target, player, root_value, rewards, ended, length, decisive, agreement = record
        outcome, known = value_targets(player, rewards, ended)

        def flat(x: jax.Array) -> jax.Array:
            return x.reshape(steps * games, *x.shape[2:])

        zero = jnp.int32(0)
        rows = Replay(flat(planes), flat(legal), flat(target), flat(outcome), flat(root_value), zero, zero)
        metrics = Metrics(
            ended.sum(dtype=jnp.int32),
            length.sum(dtype=jnp.int32),
            decisive.sum(dtype=jnp.int32),
            known.sum(dtype=jnp.int32),
            agreement.mean(),
            jnp.abs(root_value).mean(),
            jnp.float32(0),
            jnp.float32(0),
            jnp.int32(0),
        )
        return rows, flat(known), metrics

    return play


def make_iteration(
    config: TrainConfig, env: QuartoEnv, static: Any, optimizer: optax.GradientTransformation, donates: bool = False
) -> Any:
    """The jitted self-play-and-train iteration of ``config`` (:data:`Iteration`): ``static`` is the network's
    non-array part (``eqx.partition``); ``donates``: the buffer given is reused for the one returned (on an
    accelerator; the CPU does not reuse donated arrays)."""
    settings = config.alphazero
    updates = updates_per_iteration(config)
    play = make_selfplay(config, env)

    def train_step(carry: tuple[Any, Any, Replay], key: jax.Array) -> tuple[Any, Any]:
        params, opt_state, buffer = carry
        rows = jax.random.randint(key, (settings.batch_size,), 0, jnp.maximum(buffer.size, 1))
        batch = jax.tree_util.tree_map(lambda x: x[rows] if jnp.ndim(x) else x, buffer)

        def loss(params: Any) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
            policy_loss, value_loss = losses(eqx.combine(params, static), batch, settings.value_mix)
            return policy_loss + settings.vf_coef * value_loss, (policy_loss, value_loss)

        (_, parts), grads = jax.value_and_grad(loss, has_aux=True)(params)
        changes, new_opt_state = optimizer.update(grads, opt_state, params)
        ready = buffer.size >= settings.batch_size

        def choose(new: Any, old: Any) -> Any:
            return jax.tree_util.tree_map(lambda a, b: jnp.where(ready, a, b), new, old)

        params = choose(optax.apply_updates(params, changes), params)
        return (params, choose(new_opt_state, opt_state), buffer), (parts, ready)

    def iteration(params: Any, opt_state: Any, buffer: Replay, key: jax.Array) -> tuple[Any, Any, Replay, Metrics]:
        play_key, train_key = jax.random.split(key)
        rows, keep, metrics = play(eqx.combine(params, static), play_key)
        buffer = buffer.add(rows, keep)
        (params, opt_state, buffer), ((policy_loss, value_loss), ready) = jax.lax.scan(
            train_step, (params, opt_state, buffer), jax.random.split(train_key, updates)
        )
        done = ready.sum(dtype=jnp.int32)
        weight = ready / jnp.maximum(done, 1)
        metrics = metrics._replace(
            policy_loss=(policy_loss * weight).sum(), value_loss=(value_loss * weight).sum(), updates=done
        )
        return params, opt_state, buffer, metrics

    return jax.jit(iteration, donate_argnums=(2,) if donates else ())


# ---------------------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Trainer:
    """Everything a run holds: the network's arrays, the optimizer and its state, the buffer, and counters."""

    config: TrainConfig
    variant: Variant
    env: QuartoEnv
    device: Any
    params: Any
    static: Any
    optimizer: optax.GradientTransformation
    opt_state: Any
    buffer: Replay
    evaluations: EvaluationLog
    steps: int = 0
    games_played: int = 0

    @property
    def network(self) -> SlotsNetwork:
        return cast(SlotsNetwork, eqx.combine(self.params, self.static))


def jax_device(name: str) -> Any:
    """The JAX device of the config's ``device``: ``cpu``, ``auto`` (JAX's default) or ``cuda`` (a GPU, refused
    in one line where JAX has none)."""
    if name == "cpu":
        return jax.devices("cpu")[0]
    if name == "cuda":
        try:
            return jax.devices("gpu")[0]
        except RuntimeError:
            raise ConfigError(
                "config field device: 'cuda' needs a GPU, but JAX sees none (a GPU build of jax: pip install "
                "'jax[cuda12]'); allowed here: auto, cpu"
            ) from None
    return jax.devices()[0]


def start(config: TrainConfig, run_dir: Path, resume: bool) -> Trainer:
    """A fresh trainer, or the one saved in the run's ``latest.zip``. Reads only."""
    variant = config.variant
    device = jax_device(config.device)
    env = jax_env(config.observation.name, **_rule_flags(variant))
    network = new_network(config.observation, variant, config.net_arch[0], config.seed)
    params, static = eqx.partition(network, eqx.is_array)
    optimizer = make_optimizer(config.alphazero)
    buffer = Replay.empty(config.alphazero.buffer_size, env.observation_shape, env.num_actions)
    evaluations = evaluation_log(config)
    trainer = Trainer(
        config, variant, env, device, params, static, optimizer, optimizer.init(params), buffer, evaluations
    )
    if resume:
        _restore(trainer, run_dir)
    trainer.params, trainer.opt_state, trainer.buffer = jax.device_put(
        (trainer.params, trainer.opt_state, trainer.buffer), device
    )
    return trainer


_ITERATIONS: dict[str, Any] = {}
"""The jitted iteration of each config, by what shapes it (:func:`compiled_iteration`)."""


def compiled_iteration(trainer: Trainer) -> Any:
    """The trainer's jitted iteration (:func:`make_iteration`), one per process for the configs that differ only
    in what the iteration does not read (budgets, evaluations, seed): XLA compiles it once, which takes a while
    on a CPU (about half a minute)."""
    config = trainer.config
    data = config.to_dict()
    shape = {name: data[name] for name in ("variant", "observation", "net_arch", "num_games", "alphazero")}
    key = f"{sorted(shape.items())!r} on {trainer.device}"
    if key not in _ITERATIONS:
        donates = bool(trainer.device.platform != "cpu")  # the CPU does not reuse donated arrays
        _ITERATIONS[key] = make_iteration(config, trainer.env, trainer.static, trainer.optimizer, donates)
    return _ITERATIONS[key]


def _rule_flags(variant: Variant) -> dict[str, Any]:
    """The keywords of ``quarto_env.jax.env`` for ``variant``'s rules (self-play draws the first seat)."""
    return {**variant.to_dict(), "first_player": "random"}


def _restore(trainer: Trainer, run_dir: Path) -> None:
    """Give ``trainer`` the network, optimizer, buffer and counters of the run's ``latest.zip``, checked first (or
    the network alone from a ``step_N.zip`` where ``latest.zip`` is damaged); a torch checkpoint is refused."""
    resumed = read_resume_point(trainer.config, run_dir, with_pool=False)
    checkpoint = resumed.checkpoint
    network, _ = load_network(checkpoint, trainer.variant, metadata=resumed.metadata)
    trainer.params = eqx.filter(network, eqx.is_array)
    trainer.steps = resumed.steps
    restore_evaluations(trainer.evaluations, resumed)
    if not resumed.complete:
        return
    try:
        arrays = read_arrays(entry_bytes(checkpoint, OPTIMIZER_ENTRY))
        trainer.opt_state = with_weights(trainer.opt_state, arrays, "its optimizer state")
        trainer.buffer = trainer.buffer.loaded(entry_bytes(checkpoint, BUFFER_ENTRY))
        trainer.games_played = int(resumed.metadata.get("games_played", 0))
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise CheckpointError(f"checkpoint {str(checkpoint)!r} cannot be resumed: {one_line(exc)}") from exc


def run(config: TrainConfig, run_dir: Path, trainer: Trainer) -> Path:
    """Self-play and train up to ``total_steps`` positions in the run's life
    (:func:`experiments.training.loop.train_run`); returns the final checkpoint's path."""
    return train_run(config, run_dir, IterationLearner(trainer))


class IterationLearner(SearchLearner):
    """The JAX AlphaZero learner (:class:`Trainer`): a leap is one jitted iteration of self-play and training."""

    def __init__(self, trainer: Trainer) -> None:
        config = trainer.config
        self.size = config.num_games * config.alphazero.rollout_steps
        super().__init__(trainer, self.size, "each iteration plays num_games * rollout_steps = {leap}")
        self.iteration = compiled_iteration(trainer)
        self.key = jax.device_put(jax.random.key(run_seed(config, trainer.steps)), trainer.device)
        self.stats = _Stats()

    def write_untrained(self, run_dir: Path) -> None:
        write_untrained_checkpoint(self.trainer.config, run_dir)

    def untrained(self) -> PolicyValueNetwork:
        return evaluator(untrained_network(self.trainer.config))

    def network(self, checkpoint: Path | None = None) -> PolicyValueNetwork:
        """The network on the CPU, as the project's search reads it."""
        network = self.trainer.network if checkpoint is None else load_network(checkpoint, self.trainer.variant)[0]
        return evaluator(network)

    def leap(self) -> None:
        trainer = self.trainer
        if not self.stats.compiled:
            tqdm.write("compiling the jitted self-play-and-train iteration (once per run) ...")
        self.key, step_key = jax.random.split(self.key)
        began = time.perf_counter()
        trainer.params, trainer.opt_state, trainer.buffer, metrics = self.iteration(
            trainer.params, trainer.opt_state, trainer.buffer, step_key
        )
        report = jax.device_get(metrics)  # waits for the iteration
        trainer.steps += self.size
        trainer.games_played += int(report.games)
        self.stats.add(report, self.size, time.perf_counter() - began)

    def log_charts(self) -> None:
        self.stats = self.stats.log(self.writer, self.trainer)

    def save(self, path: Path, resumable: bool) -> None:
        _save(self.trainer, path, resumable)


@dataclasses.dataclass
class _Stats:
    """What the iterations since the last log reported. The rates count the iterations alone (not the
    evaluations) and leave out a run's first, which compiles."""

    compiled: bool = False
    reports: list[Metrics] = dataclasses.field(default_factory=list)
    leap: int = 0
    timed: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    """Per timed iteration: its finished games and its seconds."""

    def add(self, report: Metrics, leap: int, seconds: float) -> None:
        self.reports.append(report)
        self.leap = leap
        if self.compiled:
            self.timed.append((int(report.games), seconds))
        self.compiled = True

    def log(self, writer: Any, trainer: Trainer) -> _Stats:
        """Write the charts and losses at the trainer's step; returns the statistics to count from now on."""
        reports, step, sims = self.reports, trainer.steps, trainer.config.alphazero.sims
        seconds = sum(seconds for _, seconds in self.timed)
        timed_positions = self.leap * len(self.timed)
        games = sum(int(r.games) for r in reports)
        trained = [r for r in reports if int(r.updates)]
        rate = seconds > 0
        scalars = {
            "charts/positions_per_s": timed_positions / seconds if rate else None,
            "charts/games_per_s": sum(games for games, _ in self.timed) / seconds if rate else None,
            "charts/sims_per_s": timed_positions * sims / seconds if rate else None,
            "charts/buffer_size": int(trainer.buffer.size),
            "charts/games_played": trainer.games_played,
            "charts/game_length": sum(int(r.length_sum) for r in reports) / games if games else None,
            "charts/decisive_share": sum(int(r.decisive) for r in reports) / games if games else None,
            "charts/root_abs_value": float(np.mean([r.root_abs_value for r in reports])) if reports else None,
            "charts/stored_share": sum(int(r.stored) for r in reports) / (self.leap * len(reports))
            if reports
            else None,
            "losses/policy_agreement": float(np.mean([r.agreement for r in reports])) if reports else None,
            "losses/policy_loss": float(np.mean([r.policy_loss for r in trained])) if trained else None,
            "losses/value_loss": float(np.mean([r.value_loss for r in trained])) if trained else None,
        }
        for key, value in scalars.items():
            if value is not None:
                writer.add_scalar(key, value, step)
        return _Stats(compiled=True)


# ---------------------------------------------------------------------------------------------------------
# Evaluations, checkpoints
# ---------------------------------------------------------------------------------------------------------
def evaluator(network: SlotsNetwork) -> PolicyValueNetwork:
    """``network`` on the CPU as the project's search reads a network (its kind, its evaluation)."""
    return cast(PolicyValueNetwork, JaxEvaluator(network))


def untrained_network(config: TrainConfig) -> SlotsNetwork:
    """The run's untrained reference network: the config's shape, drawn from its seed plus
    :data:`~experiments.training.alphazero.UNTRAINED_SEED_OFFSET`."""
    return new_network(config.observation, config.variant, config.net_arch[0], config.seed + UNTRAINED_SEED_OFFSET)


def write_untrained_checkpoint(config: TrainConfig, run_dir: Path) -> Path:
    """``checkpoints/untrained.zip``, the untrained reference network as a checkpoint of step 0, unless the run
    has it. Returns its path."""
    path = run_dir / "checkpoints" / UNTRAINED_CHECKPOINT
    if not path.is_file():
        metadata = {"config": config.to_dict(), "games_played": 0, "reference": "untrained"}
        header = CheckpointHeader(config.variant, config.observation.name, 0)
        save_checkpoint(path, untrained_network(config), header, metadata)
    return path


def _save(trainer: Trainer, path: Path, resumable: bool) -> None:
    """Checkpoint the network atomically; ``resumable`` adds the optimizer's state and the buffer."""
    extras = {}
    if resumable:
        extras = {
            OPTIMIZER_ENTRY: arrays_bytes(weight_arrays(trainer.opt_state)),
            BUFFER_ENTRY: trainer.buffer.to_bytes(),
        }
    metadata = {"config": trainer.config.to_dict(), "games_played": trainer.games_played}
    metadata |= trainer.evaluations.checkpoint_fields()
    header = CheckpointHeader(trainer.variant, trainer.config.observation.name, trainer.steps)
    save_checkpoint(path, trainer.network, header, metadata, extras)
