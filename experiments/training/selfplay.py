"""Self-play for MaskablePPO: the learner's vectorised environment and its pool of opponents.

:class:`SelfPlayVecEnv` is a stable-baselines3 ``VecEnv`` over a :class:`quarto_env.vector.GameBatch` of
``num_games`` games played in-process side by side. In every game:

- the learner holds a random seat (player 0 gives first), drawn again each game;
- its opponent is drawn each game from an :class:`OpponentPool`: frozen snapshots of the learner mixed with
  baseline agents (any agent spec: ``random``, ``greedy``, ``minimax:depth=1``, ...) with the config's weights;
- the opponents' moves are played inside ``step``, so the learner only ever sees its own decisions. The
  snapshots move as one :class:`SnapshotBank`: in every round, one forward pass with each row's own snapshot
  weights computes the moves of every snapshot in all of its games; baseline agents are asked game by game;
- the reward is the learner's, whichever seat it holds and whichever phase ended the game: +1 when it wins,
  -1 when it loses -- also when the losing decision was its *give* and the opponent's placement won -- and 0
  for a draw. The episode statistics (``info["episode"]``) are the learner's too.

Training choice: where nothing can be claimed, the declaration (declaration variant only) is masked out for
the learner and the network opponents: it is legal, but it either loses or changes nothing.

The opponents move as :class:`experiments.evaluation.games.Mover`, the one way of moving in a batch of games
that the evaluations share; :func:`policy_players` is how a MaskablePPO policy plays in them.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from typing import Any

import numpy as np
import torch as th
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn
from torch import nn

from agents.envs.sb3_vector import InProcessVecEnv, episode_statistics
from agents.networks.policy_value import RowWeights, choose_actions
from agents.ppo import inference_policy, policy_actions, policy_logits, policy_spaces
from agents.specs import make_agent
from experiments.evaluation.games import AgentMover, Mover, NetworkMover, learner_players, move
from experiments.training.config import SNAPSHOTS
from quarto_env.core import State, Variant
from quarto_env.errors import QuartoValueError
from quarto_env.observation import ObservationKind
from quarto_env.single_agent import OPENING_TRIES, every_opening_ended
from quarto_env.vector import GameBatch


# ---------------------------------------------------------------------------------------------------------
# The opponent pool
# ---------------------------------------------------------------------------------------------------------
def frozen_copy(policy: MaskableActorCriticPolicy) -> MaskableActorCriticPolicy:
    """A copy of ``policy``'s network, in evaluation mode, without gradients or optimizer state."""
    copy = inference_policy(type(policy), **policy._get_constructor_parameters())
    copy.load_state_dict(policy.state_dict())
    return copy


class _Logits(nn.Module):
    """A policy seen as a module whose forward pass gives the action logits."""

    def __init__(self, policy: MaskableActorCriticPolicy) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return policy_logits(self.policy, observations)


class SnapshotBank(Mover):
    """The learner's frozen past selves, moving as one opponent.

    Each game against the bank is assigned one snapshot when it starts (:meth:`assign`). A move in many games
    is one forward pass for all of them: the snapshots share one architecture, so their weights are stacked
    layer by layer (:class:`agents.networks.policy_value.RowWeights`) and every row of the batch goes through its own
    snapshot's weights -- one network call per round instead of one per snapshot. When the bank is full the
    oldest snapshot leaves it; its games in progress continue against the newest one.
    """

    name = SNAPSHOTS

    def __init__(self, kind: ObservationKind, max_snapshots: int) -> None:
        self.kind = kind
        self.max_snapshots = max_snapshots
        self.networks: list[_Logits] = []
        self.steps: list[int] = []
        """The learner step at which each snapshot was taken, oldest first."""
        self.of_game = np.zeros(0, dtype=np.int64)
        """The snapshot (index into ``networks``) each game plays."""
        self._stacked: RowWeights | None = None

    def __len__(self) -> int:
        return len(self.networks)

    def add(self, policy: MaskableActorCriticPolicy, step: int) -> None:
        """Freeze a copy of ``policy`` (at learner step ``step``) into the bank."""
        self.networks.append(_Logits(frozen_copy(policy)))
        self.steps.append(step)
        if len(self.networks) > self.max_snapshots:
            del self.networks[0], self.steps[0]
            self.of_game = np.where(self.of_game == 0, len(self.networks) - 1, self.of_game - 1)
        self._stacked = RowWeights(self.networks)

    def assign(self, games: np.ndarray, rng: np.random.Generator) -> None:
        """Give each of ``games`` a snapshot drawn uniformly."""
        if len(games) and games.max() >= len(self.of_game):
            self.of_game = np.pad(self.of_game, (0, games.max() + 1 - len(self.of_game)))
        self.of_game[games] = rng.integers(len(self.networks), size=len(games))

    def act(self, batch: GameBatch, games: np.ndarray) -> np.ndarray:
        masks = batch.action_masks(games, false_declarations=False)
        observations = th.as_tensor(batch.observe(games, self.kind), dtype=th.float32)
        with th.no_grad():
            logits = self.logits(observations, self.of_game[games])
        return choose_actions(logits, masks, deterministic=False)

    def logits(self, observations: th.Tensor, snapshots: np.ndarray) -> th.Tensor:
        """Row ``i``'s logits under snapshot ``snapshots[i]``, in one pass."""
        used = np.unique(snapshots)
        if len(used) == 1:
            return self.networks[int(used[0])](observations)
        assert self._stacked is not None  # set by every add
        return self._stacked(observations, snapshots)

    def state_dict(self) -> dict[str, Any]:
        """The snapshots' steps and weights."""
        return {"steps": list(self.steps), "weights": [n.policy.state_dict() for n in self.networks]}

    def load_state_dict(self, state: dict[str, Any], policy: MaskableActorCriticPolicy) -> None:
        """Restore the snapshots saved by :meth:`state_dict`; ``policy`` gives the network's shape."""
        self.networks, self.steps = [], []
        for step, weights in zip(state["steps"], state["weights"], strict=True):
            snapshot = frozen_copy(policy)
            snapshot.load_state_dict(weights)
            self.add(snapshot, int(step))
        self.of_game[:] = 0


class OpponentPool:
    """The learner's opponents: a :class:`SnapshotBank` of up to ``max_snapshots`` past selves, plus baselines.

    ``mix`` maps ``"snapshots"`` and agent specs to weights; a game's opponent is a baseline with its weight,
    or, with the weight of ``"snapshots"``, one snapshot drawn uniformly from the bank.
    """

    def __init__(
        self, variant: Variant, kind: ObservationKind, mix: dict[str, float], max_snapshots: int, seed: int
    ) -> None:
        self.variant = variant
        self.snapshots = SnapshotBank(kind, max_snapshots)
        self.snapshot_weight = float(mix.get(SNAPSHOTS, 0.0))
        specs = [spec for spec in mix if spec != SNAPSHOTS]
        self.baselines: list[Mover] = [AgentMover(make_agent(spec, variant, seed + i)) for i, spec in enumerate(specs)]
        self.baseline_weights = np.array([mix[spec] for spec in specs], dtype=np.float64)

    def add_snapshot(self, policy: MaskableActorCriticPolicy, step: int) -> None:
        """Freeze a copy of ``policy`` (at learner step ``step``) into the pool."""
        self.snapshots.add(policy, step)

    def draw(self, rng: np.random.Generator, games: np.ndarray) -> list[Mover]:
        """Opponents for ``games``, drawn independently with the mix's weights (snapshots assigned too)."""
        snapshot_weight = self.snapshot_weight if len(self.snapshots) else 0.0
        weights = np.append(self.baseline_weights, snapshot_weight)
        if weights.sum() <= 0:
            raise QuartoValueError("the opponent mix gives no weight to any available opponent")
        choices = rng.choice(len(weights), size=len(games), p=weights / weights.sum())
        against_snapshots = choices == len(self.baselines)
        if against_snapshots.any():
            self.snapshots.assign(games[against_snapshots], rng)
        return [self.snapshots if c == len(self.baselines) else self.baselines[c] for c in choices]

    def state_dict(self) -> dict[str, Any]:
        """The snapshots, to save the pool beside a checkpoint."""
        return self.snapshots.state_dict()

    def load_state_dict(self, state: dict[str, Any], policy: MaskableActorCriticPolicy) -> None:
        """Restore the snapshots saved by :meth:`state_dict`."""
        self.snapshots.load_state_dict(state, policy)


# ---------------------------------------------------------------------------------------------------------
# The learner's environment
# ---------------------------------------------------------------------------------------------------------
class SelfPlayVecEnv(InProcessVecEnv):
    """``num_games`` games against pool opponents, seen from the learner's seat (see the module docstring)."""

    def __init__(self, variant: Variant, num_games: int, kind: ObservationKind, pool: OpponentPool, seed: int) -> None:
        self.render_mode = None  # games are pictured by quarto_env.render, not through the VecEnv
        self.kind = kind
        super().__init__(num_games, *policy_spaces(variant, self.kind))
        self.variant = variant
        self.pool = pool
        self.batch = GameBatch(variant, num_games)
        self.rng = np.random.default_rng(seed)
        self.learner_seat = np.zeros(num_games, dtype=np.int64)
        self.opponents: list[Mover] = pool.draw(self.rng, self.batch.all_games)
        self.episode_steps = np.zeros(num_games, dtype=np.int64)
        self.started = time.time()
        """When the env was made: the episode statistics' ``t`` counts from it, as SB3's ``Monitor``'s does."""
        self.outcomes: Counter[str] = Counter()
        """Finished games since the last :meth:`pop_outcomes`: ``"win"``, ``"draw"``, ``"loss"``."""
        self.last_final_state: State | None = None
        self._actions = np.zeros(num_games, dtype=np.int64)

    def reset(self) -> np.ndarray:
        self._start(self.batch.all_games)
        return self.batch.observe(self.batch.all_games, self.kind)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        games = self.batch.all_games
        self.batch.step(games, self._actions)
        self.episode_steps += 1
        self._play_opponents()
        dones = self.batch.over.copy()
        rewards = self.batch.returns(games, self.learner_seat)
        infos: list[dict[str, Any]] = [{} for _ in games]
        finished = np.flatnonzero(dones)
        if finished.size:
            self._finish(finished, rewards, infos)
            self._start(finished)
        return self.batch.observe(games, self.kind), rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        """The learner's legal actions in every game (MaskablePPO asks for them before each step)."""
        return self.batch.action_masks(self.batch.all_games, false_declarations=False)

    def pop_outcomes(self) -> Counter[str]:
        """The learner's results since the last call, and start counting again."""
        outcomes, self.outcomes = self.outcomes, Counter()
        return outcomes

    def _start(self, games: np.ndarray) -> None:
        """New games: random seats, fresh opponents, and the opponent's first moves where it starts. A game the
        opponent ends before the learner's first decision (a random opponent's false declaration, under
        ``false_declaration="lose"``) gives the learner nothing to act on: as ``QuartoVectorVsAgent`` does, it starts
        again with its seats (drawn anew, they would give the learner the first give more often than not) and
        another opponent, up to :data:`~quarto_env.single_agent.OPENING_TRIES` times."""
        self.learner_seat[games] = self.rng.integers(2, size=len(games))
        for _ in range(OPENING_TRIES):
            self.batch.reset(games)
            for game, opponent in zip(games, self.pool.draw(self.rng, games), strict=True):
                self.opponents[game] = opponent
            self.episode_steps[games] = 0
            self._play_opponents()
            games = games[self.batch.over[games]]
            if not games.size:
                return
        raise every_opening_ended(f"the opponents {sorted({self.opponents[game].name for game in games})}")

    def _play_opponents(self) -> None:
        """Opponents move until every game is over or waits for the learner (a turn is a place then a give)."""
        while True:
            waiting = np.flatnonzero(~self.batch.over & (self.batch.to_move != self.learner_seat))
            if waiting.size == 0:
                return
            move(self.batch, waiting, [self.opponents[g] for g in waiting])

    def _finish(self, finished: np.ndarray, rewards: np.ndarray, infos: list[dict[str, Any]]) -> None:
        terminal = self.batch.observe(finished, self.kind)
        for i, game in enumerate(finished):
            reward = float(rewards[game])
            infos[game] = {
                "terminal_observation": terminal[i],
                "episode": episode_statistics(reward, int(self.episode_steps[game]), self.started),
                "opponent": self.opponents[game].name,
            }
            self.outcomes["win" if reward > 0 else "loss" if reward < 0 else "draw"] += 1
        self.last_final_state = self.batch.state(int(finished[-1]))

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------------------
# In evaluations
# ---------------------------------------------------------------------------------------------------------
def policy_players(policy: MaskableActorCriticPolicy, kind: ObservationKind) -> list[NetworkMover]:
    """A MaskablePPO policy's two ways of playing in evaluations
    (:func:`experiments.evaluation.games.learner_players`)."""
    return learner_players(functools.partial(policy_actions, policy), kind)
