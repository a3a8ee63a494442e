"""Self-play PPO on :class:`quarto_env.VectorQuarto`, both seats played by one network (CleanRL style).

One file, read top to bottom: a typed config parsed from the command line, a small MLP over the flattened
observation planes with masked logits (illegal actions get a large negative logit), a rollout over ``num_envs``
games where the network acts for whichever seat is to move in each game (``info["current_player"]``), GAE per
seat, the clipped PPO update, and a periodic batched evaluation against the compiled ``random`` and ``greedy``
opponents of :class:`quarto_env.vector_env.QuartoVectorVsAgent` (a few hundred games each, the learner's seat
drawn per game, from the opening)::

    python -m experiments.training.selfplay_vector_ppo --total-seconds 600
    tensorboard --logdir runs

Each run writes ``runs/selfplay_vector_ppo__SEED__TIME/``: ``config.json`` (the resolved config), ``command.txt``
and the TensorBoard events, tagged ``charts/`` (speed, games, time), ``losses/`` and ``eval/`` (the score
against each opponent: 1 a win, 0.5 a draw, 0 a loss, averaged).

# Two seats, one network: the per-seat trajectories

Step ``t`` of the rollout holds one transition per game, that of the seat to act (``seat[t, i]``); seat ``s``'s
trajectory in game ``i`` is the subsequence of the steps where ``seat[t, i] == s`` (a seat often acts twice in a
row: it places, then gives). A game's result comes to both seats in the step that ends it -- to the seat that did
not act too, whose last action was a step or more earlier. So the rollout keeps, per game and seat,
``last[i, s]``: the step of seat ``s``'s latest transition in the current game (-1 when none).
:func:`credit_rewards` adds each step's ``rewards[i, s]`` to transition ``last[i, s]`` and, where the game ended,
marks that transition as the seat's last in its game (``ended``) and clears ``last[i]`` for the new game. GAE
then runs backwards with a carry per game and seat (:func:`per_seat_advantages`): a transition's next value is
that of the same seat's next transition in the same game, or nothing after an ``ended`` one. At the end of a
rollout a seat whose game goes on bootstraps from the current position: ``V(obs)`` when it is to move, ``-V(obs)``
when the other seat is (the value is the mover's, and the game is zero-sum; ``gamma`` is 1 by default). Rewards
that arrive in the next rollout for a transition of this one are then dropped (``last`` starts at -1): the
bootstrap stood for them.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.tensorboard import SummaryWriter

from agents.networks.designs import hidden_layers
from experiments.options import CommandParser
from experiments.training.field_docs import field_docs
from quarto_env import VectorQuarto
from quarto_env.vector_env import QuartoVectorVsAgent


@dataclasses.dataclass
class Config:
    seed: int = 1
    """seed of numpy, torch and the games"""
    observation: str = "parity"
    """observation kind of quarto_v1: raw, tactical, lookahead or parity (parity learns the greedy rule fastest)"""
    num_envs: int = 128
    """games played side by side"""
    num_steps: int = 32
    """steps of every game per rollout (each step one decision, of the seat to act)"""
    total_seconds: float = 600.0
    """stop after this many seconds of wall clock (evaluations included)"""
    total_timesteps: int = 50_000_000
    """stop after this many decisions, whichever comes first"""
    learning_rate: float = 1e-3
    """Adam's learning rate"""
    width: int = 256
    """units of each of the two hidden layers"""
    gamma: float = 1.0
    """discount (a game is at most 33 decisions of each seat)"""
    gae_lambda: float = 0.95
    """lambda of the generalized advantage estimate"""
    num_minibatches: int = 4
    """minibatches per epoch"""
    update_epochs: int = 4
    """epochs over each rollout"""
    clip_coef: float = 0.2
    """PPO's ratio clip"""
    ent_coef: float = 0.01
    """weight of the entropy bonus"""
    vf_coef: float = 0.5
    """weight of the value loss"""
    max_grad_norm: float = 0.5
    """gradient clipping"""
    eval_every: float = 60.0
    """seconds of training between evaluations (and one at the end)"""
    eval_games: int = 256
    """games against each of random and greedy per evaluation"""
    threads: int = 1
    """torch threads"""
    env_threads: int = 1
    """threads of each batched step of the games (VectorQuarto's threads): more pays with thousands of games"""
    runs_dir: str = "runs"
    """folder of the run folders"""


def parse_config(argv: list[str] | None = None) -> Config:
    parser = CommandParser(description=(__doc__ or "").split("\n\n")[0])
    docs = field_docs(Config)
    for field in dataclasses.fields(Config):
        default = field.default
        parser.add_argument(
            f"--{field.name.replace('_', '-')}", type=type(default), default=default, help=docs.get(field.name)
        )
    return Config(**vars(parser.parse_args(argv)))


class MlpActorCritic(nn.Module):
    """The policy and value network: a shared tanh trunk, one masked logit per action and a value head."""

    def __init__(self, inputs: int, actions: int, width: int) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Flatten(), *hidden_layers(inputs, [width, width], nn.Tanh))
        self.actor = nn.Linear(width, actions)
        self.critic = nn.Linear(width, 1)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked logits (illegal actions -1e9) and the value for the player to move."""
        hidden = self.trunk(obs)
        return self.actor(hidden).masked_fill(mask == 0, -1e9), self.critic(hidden).squeeze(-1)


def credit_rewards(
    rewards_buf: np.ndarray, ended_buf: np.ndarray, last: np.ndarray, rewards: np.ndarray, terminated: np.ndarray
) -> None:
    """Add a step's per-seat ``rewards`` ``(num_envs, 2)`` to each seat's latest transition ``last[i, s]`` (a step
    of the rollout, -1 when none) in ``rewards_buf`` ``(num_steps, num_envs)``; where the game ended, mark those
    transitions in ``ended_buf`` and clear ``last`` for the new game. In place."""
    rows = np.arange(len(last))
    for seat in (0, 1):
        known = last[:, seat] >= 0
        rewards_buf[last[known, seat], rows[known]] += rewards[known, seat]
        done = known & terminated
        ended_buf[last[done, seat], rows[done]] = True
    last[terminated] = -1


def per_seat_advantages(
    rewards: np.ndarray,
    values: np.ndarray,
    seats: np.ndarray,
    ended: np.ndarray,
    bootstrap: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> np.ndarray:
    """GAE over each seat's own trajectory in each game; ``bootstrap`` ``(num_envs, 2)`` is each seat's value
    after the rollout (used where its last transition has not ``ended``)."""
    num_steps, num_envs = rewards.shape
    rows = np.arange(num_envs)
    next_value = bootstrap.astype(np.float32).copy()
    next_advantage = np.zeros((num_envs, 2), dtype=np.float32)
    advantages = np.zeros_like(rewards)
    for t in reversed(range(num_steps)):
        seat = seats[t]
        going_on = 1.0 - ended[t]
        delta = rewards[t] + gamma * next_value[rows, seat] * going_on - values[t]
        advantages[t] = delta + gamma * gae_lambda * going_on * next_advantage[rows, seat]
        next_value[rows, seat] = values[t]
        next_advantage[rows, seat] = advantages[t]
    return advantages


@torch.no_grad()
def evaluate(agent: MlpActorCritic, config: Config, opponent: str, seed: int) -> float:
    """The greedy policy's mean score (1 win, 0.5 draw, 0 loss) over ``eval_games`` games against ``opponent``,
    one game per env, the learner's seat drawn per game."""
    envs = QuartoVectorVsAgent(config.eval_games, opponent, observation=config.observation, learner_seat="random")
    obs, info = envs.reset(seed=seed)
    scores = np.full(config.eval_games, np.nan)
    while np.isnan(scores).any():
        logits, _ = agent(torch.as_tensor(obs), torch.as_tensor(info["action_mask"]))
        obs, rewards, terminated, _, info = envs.step(logits.argmax(1).numpy())
        first = terminated & np.isnan(scores)
        scores[first] = (rewards[first] + 1) / 2
    return float(scores.mean())


def train(config: Config, argv: list[str] | None = None) -> Path:
    """Train until ``total_seconds`` or ``total_timesteps``; returns the run folder."""
    start = time.time()
    run_dir = Path(config.runs_dir) / f"selfplay_vector_ppo__{config.seed}__{int(start)}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    command = ["python", "-m", "experiments.training.selfplay_vector_ppo", *(sys.argv[1:] if argv is None else argv)]
    (run_dir / "command.txt").write_text(shlex.join(command) + "\n")
    writer = SummaryWriter(str(run_dir))
    writer.add_text("config", "\n".join(f"- {k}: {v}" for k, v in dataclasses.asdict(config).items()))

    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    envs = VectorQuarto(config.num_envs, observation=config.observation, seed=config.seed, threads=config.env_threads)
    obs_np, info = envs.reset()
    assert obs_np is not None
    n, steps, actions_n = config.num_envs, config.num_steps, envs.num_actions
    agent = MlpActorCritic(obs_np[0].size, actions_n, config.width)
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate, eps=1e-5)

    obs_buf = torch.zeros((steps, n, *obs_np.shape[1:]))
    mask_buf = torch.zeros((steps, n, actions_n), dtype=torch.bool)
    action_buf = torch.zeros((steps, n), dtype=torch.long)
    logprob_buf = torch.zeros((steps, n))
    value_buf = np.zeros((steps, n), dtype=np.float32)
    seat_buf = np.zeros((steps, n), dtype=np.int64)
    batch_size = steps * n
    minibatch_size = batch_size // config.num_minibatches
    global_step, games, update, next_eval, eval_time = 0, 0, 0, 0.0, 0.0

    while True:
        training_time = time.time() - start - eval_time
        out_of_time = time.time() - start >= config.total_seconds or global_step >= config.total_timesteps
        if training_time >= next_eval or out_of_time:  # evaluate at the start, every eval_every s, and at the end
            began = time.time()
            agent.eval()
            for opponent in ("random", "greedy"):
                score = evaluate(agent, config, opponent, seed=config.seed + update)
                writer.add_scalar(f"eval/{opponent}_score", score, global_step)
                print(f"{time.time() - start:7.1f}s step {global_step:>9}: {opponent} {score:.3f}", flush=True)
            agent.train()
            eval_time += time.time() - began
            writer.add_scalar("charts/wall_clock_s", time.time() - start, global_step)
            next_eval = training_time + config.eval_every
        if out_of_time:
            break

        # Rollout: one decision per game per step, by the seat to act; rewards credited to each seat's own.
        rewards_buf = np.zeros((steps, n), dtype=np.float32)
        ended_buf = np.zeros((steps, n), dtype=np.float32)
        last = np.full((n, 2), -1, dtype=np.int64)
        for t in range(steps):
            obs = torch.as_tensor(obs_np, dtype=torch.float32)
            mask = torch.as_tensor(info["action_mask"], dtype=torch.bool)
            seat = info["current_player"].astype(np.int64)
            with torch.no_grad():
                logits, value = agent(obs, mask)
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            obs_buf[t], mask_buf[t], action_buf[t] = obs, mask, action
            logprob_buf[t], value_buf[t], seat_buf[t] = dist.log_prob(action), value.numpy(), seat
            last[np.arange(n), seat] = t
            obs_np, rewards, terminated, _, info = envs.step(action.numpy())
            credit_rewards(rewards_buf, ended_buf, last, rewards, terminated)
            games += int(terminated.sum())
        global_step += batch_size

        # Bootstrap each seat whose game goes on: V(obs) for the seat to move, -V(obs) for the other.
        with torch.no_grad():
            _, value_now = agent(torch.as_tensor(obs_np, dtype=torch.float32), torch.as_tensor(info["action_mask"]))
        to_move = info["current_player"].astype(np.int64)
        bootstrap = np.stack([value_now.numpy(), value_now.numpy()], axis=1)
        bootstrap[np.arange(n), 1 - to_move] *= -1
        advantages = per_seat_advantages(
            rewards_buf, value_buf, seat_buf, ended_buf, bootstrap, config.gamma, config.gae_lambda
        )
        returns = torch.as_tensor(advantages + value_buf).flatten()
        b_advantages = torch.as_tensor(advantages).flatten()
        b_obs, b_mask = obs_buf.flatten(0, 1), mask_buf.flatten(0, 1)
        b_actions, b_logprobs = action_buf.flatten(), logprob_buf.flatten()

        # PPO update: clipped policy ratio, value regression, entropy bonus.
        clip_fractions = []
        for _epoch in range(config.update_epochs):
            order = torch.randperm(batch_size)
            for begin in range(0, batch_size, minibatch_size):
                mb = order[begin : begin + minibatch_size]
                logits, value = agent(b_obs[mb], b_mask[mb])
                dist = torch.distributions.Categorical(logits=logits)
                log_ratio = dist.log_prob(b_actions[mb]) - b_logprobs[mb]
                ratio = log_ratio.exp()
                adv = b_advantages[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef)).mean()
                v_loss = 0.5 * ((value - returns[mb]) ** 2).mean()
                entropy = dist.entropy().mean()
                loss = pg_loss - config.ent_coef * entropy + config.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), config.max_grad_norm)
                optimizer.step()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    clip_fractions.append(((ratio - 1).abs() > config.clip_coef).float().mean().item())
        update += 1

        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", float(np.mean(clip_fractions)), global_step)
        elapsed = time.time() - start
        writer.add_scalar("charts/SPS", int(global_step / max(elapsed - eval_time, 1e-9)), global_step)
        writer.add_scalar("charts/games", games, global_step)
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)

    writer.close()
    return run_dir


if __name__ == "__main__":
    print(train(parse_config()))
