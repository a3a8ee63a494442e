"""``quarto_v1`` driven, unchanged, by the clients people plug it into: TorchRL's ``PettingZooWrapper``,
Tianshou's ``PettingZooEnv`` with its ``Collector``, and PettingZoo's Stable-Baselines3 action-mask tutorial
(``SB3ActionMaskWrapper`` + ``ActionMasker`` + ``MaskablePPO``). Whole games with masks: every action the
client picks is legal, each game ends by the rules (an illegal action would leave the outcome ``IN_PLAY``), and
the rewards and infos name the same winner.

TorchRL and Tianshou are the ``clients`` extra (``pip install -e '.[clients]'``); without them their tests skip
with one line."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from pettingzoo.utils import BaseWrapper

import quarto_env
from quarto_env import NO_WINNER, Outcome

pytestmark = pytest.mark.clients

AGENTS = ("player_0", "player_1")
VARIANTS = {"standard": {}, "declaration": {"declaration": True}}
"""Flag sets whose games end with +1 and -1, or 0 and 0: the false-declaration penalty would add other rewards."""
GAMES = 6


def final_rewards(winner: int) -> list[float]:
    """Each agent's reward for a game won by agent index ``winner`` (``NO_WINNER``: a draw)."""
    if winner == NO_WINNER:
        return [0.0, 0.0]
    return [1.0 if seat == winner else -1.0 for seat in range(len(AGENTS))]


def assert_finished(outcome: int, winner: int, rewards: list[float]) -> None:
    """A game that ended by the rules (not by an illegal action, which leaves the outcome ``IN_PLAY``), whose
    rewards are the winner's."""
    if winner == NO_WINNER:
        assert outcome == Outcome.DRAW
    else:
        assert outcome in (Outcome.WIN, Outcome.FALSE_DECLARATION)
    assert rewards == final_rewards(winner)


# ---------------------------------------------------------------------------------------------------------
# TorchRL
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags", VARIANTS.values(), ids=VARIANTS.keys())
def test_torchrl_pettingzoo_wrapper_plays_whole_games(flags: dict) -> None:
    pytest.importorskip("torchrl", reason="the clients extra is not installed: pip install -e '.[clients]'")
    from torchrl.envs import PettingZooWrapper

    aec = quarto_env.env(**flags)
    env = PettingZooWrapper(env=aec, use_mask=True, seed=0)  # raised TypeError on quarto_v0's string infos
    assert set(env.group_map) == set(AGENTS)
    for _ in range(GAMES):
        rollout = env.rollout(max_steps=100)  # random actions within the action mask, to the game's end
        done = rollout["next", "done"].squeeze(-1)
        assert done[-1] and not done[:-1].any()
        acting = np.stack([rollout[agent, "mask"].squeeze(-1).numpy() for agent in AGENTS], axis=1)
        assert (acting.sum(axis=1) == 1).all()  # one agent acts at each step
        for seat, agent in enumerate(AGENTS):
            actions = rollout[agent, "action"].squeeze(-1).numpy()[acting[:, seat]]
            masks = rollout[agent, "action_mask"].squeeze(1).numpy()[acting[:, seat]]
            assert masks[np.arange(len(actions)), actions].all()
        last = rollout[-1]["next"]
        outcome, winner = (int(last[AGENTS[0], "info", key].item()) for key in ("outcome", "winner"))
        for agent in AGENTS:
            assert (last[agent, "info", "outcome"].item(), last[agent, "info", "winner"].item()) == (outcome, winner)
        rewards = [float(rollout["next", agent, "reward"].sum()) for agent in AGENTS]
        assert_finished(outcome, winner, rewards)
        state_winner = aec.unwrapped.game_state.winner
        assert winner == (NO_WINNER if state_winner == NO_WINNER else AGENTS.index(aec.unwrapped.seats[state_winner]))


# ---------------------------------------------------------------------------------------------------------
# Tianshou
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags", VARIANTS.values(), ids=VARIANTS.keys())
def test_tianshou_collector_plays_whole_games(flags: dict) -> None:
    pytest.importorskip("tianshou", reason="the clients extra is not installed: pip install -e '.[clients]'")
    from tianshou.algorithm.multiagent.marl import MultiAgentPolicy
    from tianshou.algorithm.random import MARLRandomDiscreteMaskedOffPolicyAlgorithm
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv, PettingZooEnv

    envs = DummyVectorEnv([lambda: PettingZooEnv(quarto_env.env(**flags)) for _ in range(2)])
    space = quarto_env.env(**flags).action_space(AGENTS[0])
    random_player = MARLRandomDiscreteMaskedOffPolicyAlgorithm.Policy
    policy = MultiAgentPolicy({agent: random_player(space) for agent in AGENTS})
    buffer = VectorReplayBuffer(1000, len(envs))
    stats = Collector(policy, envs, buffer).collect(n_episode=GAMES, reset_before_collect=True)

    assert stats.n_collected_episodes == GAMES and len(buffer) == stats.n_collected_steps == stats.lens.sum()
    assert {tuple(returns) for returns in stats.returns} <= {(1.0, -1.0), (-1.0, 1.0), (0.0, 0.0)}
    steps = buffer.sample(0)[0]
    assert steps.obs.mask[np.arange(len(steps)), steps.act].all()  # every action within the acting agent's mask
    ended = steps.terminated
    assert ended.sum() == GAMES and not steps.truncated.any()
    outcomes, winners, rewards = steps.info.outcome, steps.info.winner, steps.rew
    assert (outcomes[~ended] == Outcome.IN_PLAY).all() and (winners[~ended] == NO_WINNER).all()
    assert not rewards[~ended].any()  # rewards come at the end
    for outcome, winner, reward in zip(outcomes[ended], winners[ended], rewards[ended], strict=True):
        assert_finished(int(outcome), int(winner), reward.tolist())


# ---------------------------------------------------------------------------------------------------------
# Stable-Baselines3: PettingZoo's action-mask tutorial
# ---------------------------------------------------------------------------------------------------------
class SB3ActionMaskWrapper(BaseWrapper, gymnasium.Env):
    """The wrapper of PettingZoo's SB3 action-mask tutorial: both seats played by one Gymnasium-style agent,
    the observation without its mask, the mask through ``action_mask()``."""

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed, options)
        # SB3 reads the spaces as attributes, the same for both agents
        self.observation_space = super().observation_space(self.possible_agents[0])["observation"]
        self.action_space = super().action_space(self.possible_agents[0])
        return self.observe(self.agent_selection), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[override]
        """The next agent's observation; the reward, end and info of the agent that acted."""
        acting = self.agent_selection
        super().step(action)
        return (
            self.observe(self.agent_selection),
            self._cumulative_rewards[acting],
            self.terminations[acting],
            self.truncations[acting],
            self.infos[acting],
        )

    def observe(self, agent: str) -> np.ndarray:  # type: ignore[override]
        return super().observe(agent)["observation"]

    def action_mask(self) -> np.ndarray:
        return super().observe(self.agent_selection)["action_mask"]


def test_sb3_action_mask_tutorial_learns_and_plays_a_game() -> None:
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.wrappers import ActionMasker

    env = SB3ActionMaskWrapper(quarto_env.env())
    env.reset(seed=0)  # defines the spaces
    model = MaskablePPO("MlpPolicy", ActionMasker(env, lambda e: e.action_mask()), n_steps=64, batch_size=32, seed=0)
    model.learn(total_timesteps=128)
    episodes = list(model.ep_info_buffer)
    assert model.num_timesteps >= 128 and episodes
    # The game always ends on the step of the agent that won or filled the board: the mover's reward.
    assert {episode["r"] for episode in episodes} <= {0.0, 1.0}

    game = quarto_env.env()
    game.reset(seed=1)
    game.action_space(AGENTS[0]).seed(1)
    for agent in game.agent_iter():
        observation, _, terminated, truncated, info = game.last()
        if terminated or truncated:
            break
        if agent == AGENTS[0]:
            action = game.action_space(agent).sample(observation["action_mask"])
        else:
            predicted, _ = model.predict(observation["observation"], action_masks=observation["action_mask"])
            action = int(predicted)
            assert observation["action_mask"][action]
        game.step(action)
    rewards = [game.rewards[agent] for agent in AGENTS]
    assert_finished(info["outcome"], info["winner"], rewards)
