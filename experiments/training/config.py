"""The typed, validated configuration of ``quarto train``.

A config is a YAML mapping (``configs/default.yaml``): the common fields of :class:`TrainConfig` at the top level,
and one section per algorithm, each a nested mapping of its own fields -- ``ppo`` (:class:`PPOConfig`: the PPO
learner and its opponents, read by both backends, sb3 and rllib), ``alphazero`` (:class:`AlphaZeroConfig`) and
``rllib`` (:class:`RLlibConfig`: the processes of the rllib backend). A field left out keeps its default, and
``KEY=VALUE`` arguments override single fields, with the value read as YAML (``total_steps=200000``,
``ppo.learning_rate=1e-3``, ``variant.squares=true``, ``ppo.opponents.greedy=0.5``). A number field also takes
the forms YAML reads as text (``5e-1``, ``1e3``, ``2.0e6``). An ``opponents.SPEC=WEIGHT`` key is split at its last
``=``, so a spec may hold options: ``ppo.opponents.minimax:depth=2=0.5``.

The flat spelling of the configs from before the sections still loads: a section's field given at the top level
(``learning_rate: 3.0e-4`` in a file, ``learning_rate=1e-3`` or ``opponents.greedy=0.5`` on the command line,
the ``config.yaml`` of an older run folder, the config a checkpoint records) goes into its section. The four fields
that both ``ppo`` and ``alphazero`` have (:data:`SHARED_FIELDS`) go into the section of the config's
``algorithm``, the one that reads them. A field under the wrong section is refused in one line naming its
section (``config key alphazero.n_steps: n_steps belongs to section ppo``).

Every value is checked when the config is made, so that a config that validates also trains: an unknown key,
a value of the wrong type, a number that is not finite or outside its range (each field's range is in
:data:`RANGES`), an unparsable agent spec or an impossible rule variant raises :class:`ConfigError` naming the
field and what is allowed (for a mistyped key or agent kind, also the nearest name: ``totl_steps`` -> ``did
you mean 'total_steps'?``). The rule variant and the observation kind are resolved there too, once: the config
holds a :class:`~quarto_env.core.Variant` and an :class:`~quarto_env.observation.ObservationKind`, and writes
them back as the YAML they came from. :func:`check_agents` goes further and builds every agent the config names
(a ``ppo:`` checkpoint must exist and fit the variant); ``quarto train`` calls it before it writes anything.
``quarto train --help-config`` lists every field with its documentation, section by section.

Resuming
--------
``quarto train --resume RUN KEY=VALUE...`` continues a run with its own ``config.yaml``. The fields in
:data:`FIXED_ON_RESUME` -- the network's shape (``variant``, ``observation``, ``policy``, ``net_arch``) and the
run's identity (``name``, ``seed``) -- are fixed by the checkpoint: an override that changes one is refused.
Every other field is applied from the resumed step on: the budgets and intervals, the PPO hyperparameters
(the learner is rebuilt from the config, then given the checkpoint's weights and optimizer state), the
opponent mix, and the evaluations.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import itertools
import math
import reprlib
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from agents.base import MAX_SEARCH_SIMULATIONS, SpecError, closest_name, did_you_mean, make_agent, parse_spec
from agents.files import input_file
from agents.match import DEFAULT_OPENING_PLIES, MAX_OPENING_PLIES
from agents.networks import DEFAULT_DESIGN, DEFAULT_DEVICE, NETWORK_DESIGNS, POLICY_KINDS, check_network, resolve_device
from agents.puct import DEFAULT_GUMBEL_ACTIONS, ROOTS
from experiments.options import markdown_table
from quarto_env.checks import checked_number, one_line
from quarto_env.core import NUM_ACTIONS, STANDARD, RulesError, Variant
from quarto_env.observation import OBSERVATION_KINDS, ObservationKind

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"
"""The config ``quarto train`` (and ``quarto bench train``) read when none is given."""
LR_SCHEDULES = ("constant", "linear")
POLICY_TARGETS = ("visits", "completed_q")
"""What the alphazero network's policy learns from a search: its visit distribution, or Gumbel MuZero's
improved policy ``softmax(log prior + completed_q_beta * completed Q)``."""
ALGORITHMS = ("ppo", "alphazero")
BACKENDS = ("sb3", "rllib")
MAX_ENV_RUNNERS = 1024
"""The most RLlib env runners a config may ask for (each is a process, on this machine or a Ray cluster)."""
MAX_WORKERS = 1024
"""The most AlphaZero self-play workers a config may ask for (each is a Ray actor with one CPU)."""
MAX_LEARNERS = 256
"""The most remote RLlib Learner actors a config may ask for."""
MAX_RESOURCES_PER_ACTOR = 1024
"""The most CPUs or GPUs one RLlib actor (env runner, learner) may reserve."""

SEED_LIMIT = 2**32
"""Seeds are below this: numpy's global generator takes no other (``train`` folds ``seed + step`` below it)."""
MAX_STEPS = 10**10
"""The most learner steps of a run, and the longest interval between its snapshots, evaluations and checkpoints:
ten billion, days of training at the fastest learner's pace (a larger ``total_steps`` only trains forever)."""
MAX_GAMES = 1_000_000
"""The most games played side by side (training, or one evaluation): they are allocated at once."""
MAX_ROLLOUT = 2**20
"""The most learner steps in one rollout (``num_games * n_steps``): the rollout buffer holds them all."""
MAX_LOSS_WEIGHT = 1000.0
"""The largest weight of the entropy and value losses: far larger ones overflow float32 gradients into NaN
(``vf_coef=1e38`` did, in the first update)."""
MAX_EXACT_OUTCOME_EMPTIES = 12
"""The most empty squares at which ``exact_outcome_empties`` solves positions: the solver's comfort, where a
position still solves fast enough to rescore every game (docs/solver.md gives the times)."""
MAX_EPOCHS = 1000
"""The most ``ppo.n_epochs``, passes over each rollout: PPO's clipping stops learning from a rollout long before."""
MAX_SNAPSHOTS = 1000
"""The most ``ppo.max_snapshots`` kept in the opponent pool: each is a network held in memory."""
MAX_GRADE_POSITIONS = 100_000
"""The most ``grade_positions``, each solved once and graded at every evaluation (``quarto grade``'s own bound)."""
MAX_SAMPLE_GAMES = 16
"""The most ``sample_games``: each is a table of text and a picture in TensorBoard at every evaluation."""
EARLY_EVALS = (0, 16_384, 32_768, 65_536, 131_072)
"""The default ``early_evals``: the untrained network, then doubling steps (4, 8, 16 and 32 rollouts of the
default config) up to the first periodic evaluation."""
MAX_NAME_BYTES = 200
"""The longest run name, in UTF-8 bytes: the run folder's name adds its seed and time within 255."""
RANGES: dict[str, dict[str, float]] = {
    "seed": {"minimum": 0, "maximum": SEED_LIMIT - 1},
    "total_steps": {"minimum": 1, "maximum": MAX_STEPS},
    "num_games": {"minimum": 1, "maximum": MAX_GAMES},
    "n_steps": {"minimum": 1, "maximum": MAX_ROLLOUT},
    "batch_size": {"minimum": 2, "maximum": MAX_ROLLOUT},
    "n_epochs": {"minimum": 1, "maximum": MAX_EPOCHS},
    "learning_rate": {"above": 0, "maximum": 1},
    "gamma": {"above": 0, "maximum": 1},
    "gae_lambda": {"minimum": 0, "maximum": 1},
    "clip_range": {"above": 0},
    "ent_coef": {"minimum": 0, "maximum": MAX_LOSS_WEIGHT},
    "vf_coef": {"minimum": 0, "maximum": MAX_LOSS_WEIGHT},
    "max_grad_norm": {"above": 0},
    "snapshot_every": {"minimum": 1, "maximum": MAX_STEPS},
    "max_snapshots": {"minimum": 1, "maximum": MAX_SNAPSHOTS},
    "eval_every": {"minimum": 1, "maximum": MAX_STEPS},
    "eval_games": {"minimum": 1, "maximum": MAX_GAMES},
    "final_eval_games": {"minimum": 1, "maximum": MAX_GAMES},
    "grade_positions": {"minimum": 0, "maximum": MAX_GRADE_POSITIONS},
    "sample_games": {"minimum": 0, "maximum": MAX_SAMPLE_GAMES},
    "checkpoint_every": {"minimum": 1, "maximum": MAX_STEPS},
    "torch_threads": {"minimum": 1, "maximum": 256},
    "eval_opening_plies": {"minimum": 0, "maximum": MAX_OPENING_PLIES},
    "sims": {"minimum": 1, "maximum": MAX_SEARCH_SIMULATIONS},
    "eval_sims": {"minimum": 0, "maximum": MAX_SEARCH_SIMULATIONS},
    "c_puct": {"above": 0, "maximum": 100},
    "dirichlet_alpha": {"above": 0, "maximum": 100},
    "dirichlet_fraction": {"minimum": 0, "maximum": 1},
    "temperature_plies": {"minimum": 0, "maximum": 33},
    "buffer_size": {"minimum": 2, "maximum": 50_000_000},
    "sample_reuse": {"above": 0, "maximum": 1000},
    "weight_decay": {"minimum": 0, "maximum": 1},
    "gumbel_actions": {"minimum": 1, "maximum": NUM_ACTIONS},
    "completed_q_beta": {"above": 0, "maximum": 1000},
    "value_mix": {"minimum": 0, "maximum": 1},
    "exact_outcome_empties": {"minimum": 0, "maximum": MAX_EXACT_OUTCOME_EMPTIES},
    "full_search_share": {"above": 0, "maximum": 1},
    "cheap_sims": {"minimum": 1, "maximum": MAX_SEARCH_SIMULATIONS},
    "num_env_runners": {"minimum": 0, "maximum": MAX_ENV_RUNNERS},
    "workers": {"minimum": 0, "maximum": MAX_WORKERS},
    "broadcast_every": {"minimum": 1, "maximum": MAX_STEPS},
    "cpus_per_env_runner": {"above": 0, "maximum": MAX_RESOURCES_PER_ACTOR},
    "num_learners": {"minimum": 0, "maximum": MAX_LEARNERS},
    "gpus_per_learner": {"minimum": 0, "maximum": MAX_RESOURCES_PER_ACTOR},
}
"""The allowed range of every number field (each is also finite): the bounds of ``checked_number``."""
SNAPSHOTS = "snapshots"
"""The key of the learner's frozen past selves in the opponent mix (``ppo.opponents``); its other keys are agent
specs."""
FIXED_ON_RESUME = ("algorithm", "backend", "name", "seed", "variant", "observation", "policy", "net_arch")
"""Fields that ``quarto train --resume`` takes from the checkpoint and refuses to change: the network's shape
and the run's identity. Every other field given with ``--resume`` is applied."""


class ConfigError(ValueError):
    """A config with an unknown key, a wrong type or an impossible value."""


@dataclasses.dataclass
class PPOConfig:
    """The PPO learner and its opponents: read by both PPO backends, sb3 and rllib (``lr_schedule`` by sb3 only)."""

    n_steps: int = 64
    """Learner steps per game between two PPO updates (a rollout holds ``num_games * n_steps`` steps, at most
    2**20 = 1,048,576; rllib: environment steps of both seats, ``num_games * n_steps`` per update)."""
    batch_size: int = 1024
    """PPO minibatch size: at least 2, and no last minibatch of a single step (its advantages, normalised by
    their spread, would be NaN)."""
    n_epochs: int = 4
    """PPO passes over each rollout."""
    learning_rate: float = 3e-4
    """Adam step size (the initial one with ``lr_schedule: linear``)."""
    lr_schedule: str = "constant"
    """``constant``, or ``linear`` decay to 0 at ``total_steps`` (sb3; the rllib backend keeps the rate constant)."""
    gamma: float = 0.99
    """Discount factor; below 1 it prefers quick wins and slow losses."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_range: float = 0.2
    """PPO clipping of the probability ratio."""
    ent_coef: float = 0.01
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Gradient clipping norm."""
    opponents: dict[str, float] = dataclasses.field(
        default_factory=lambda: {SNAPSHOTS: 0.4, "minimax:depth=2": 0.3, "greedy": 0.2, "random": 0.1}
    )
    """The opponent mix: weights of ``snapshots`` (the learner's frozen past selves) and of agent specs; finite,
    >= 0, with a positive sum."""
    snapshot_every: int = 100_000
    """Learner steps between two snapshots added to the pool (the first is the untrained network)."""
    max_snapshots: int = 20
    """Snapshots kept in the pool; the oldest leaves when a new one comes."""


@dataclasses.dataclass
class AlphaZeroConfig:
    """Search-based self-play (``experiments.training.alphazero``): its network, searches, targets and workers."""

    network_design: str = DEFAULT_DESIGN
    """The body of the policy-value network (:data:`agents.networks.NETWORK_DESIGNS`): ``slots``, the slots
    network (the hand reaches the square slots through the pooled context); ``hand``, which gives every square
    slot the piece in hand and the value head the hand and the groups directly (slower); ``transformer``,
    ``looped`` or the plain ``mlp``. ``quarto bench network`` compares them on exact labels
    (docs/learnability.md)."""
    batch_size: int = 1024
    """Positions per gradient step, drawn from the replay buffer (at most ``buffer_size``)."""
    learning_rate: float = 3e-4
    """AdamW step size."""
    weight_decay: float = 1.0e-4
    """AdamW weight decay."""
    vf_coef: float = 0.5
    """Value loss weight (the policy loss weighs 1)."""
    max_grad_norm: float = 0.5
    """Gradient clipping norm."""
    sims: int = 64
    """Simulations per searched self-play move."""
    eval_sims: int = 64
    """Simulations per move in the evaluations and the grade (0: the network's policy alone)."""
    c_puct: float = 1.5
    """PUCT exploration constant."""
    dirichlet_alpha: float = 0.3
    """Concentration of the Dirichlet noise mixed into the root priors of self-play searches."""
    dirichlet_fraction: float = 0.25
    """Weight of that noise (0: none)."""
    temperature_plies: int = 8
    """The first this many actions of a self-play game (gives and placements) are sampled in proportion to the
    visits; later ones take the most visited action."""
    buffer_size: int = 250_000
    """Searched positions kept in the replay buffer (the newest)."""
    sample_reuse: float = 4.0
    """Training samples drawn per new self-play position: how often, on average, a position is trained on while
    in the buffer."""
    augment: bool = True
    """Move every training sample by a random symmetry of the game (board symmetry and relabelling of the
    counted attributes), its visit distribution alike."""
    policy_target: str = "visits"
    """The policy target of a stored position (:data:`POLICY_TARGETS`): ``visits``, the search's visit
    distribution, or ``completed_q``, ``softmax(log prior + completed_q_beta * Q)`` over the candidates, with Q the
    mean backed-up value of a visited action and the root value for an unvisited one (Gumbel MuZero's improved
    policy: with few simulations the visits barely leave the prior, while Q already ranks the actions)."""
    root: str = "puct"
    """The root of the searches of self-play and of the evaluations (:data:`agents.puct.ROOTS`): ``puct``, with
    Dirichlet noise in self-play's full searches and the first ``temperature_plies`` actions sampled from the
    visits; or ``gumbel``, Gumbel top-k with sequential halving (Gumbel AlphaZero): self-play draws the Gumbel
    noise in every search and plays the root's choice at every action (the noise samples the moves, so
    ``dirichlet_*`` and ``temperature_plies`` do not apply), the evaluations search without noise. Its natural
    policy target is ``completed_q``: the halving's visits are a plan, not a preference."""
    gumbel_actions: int = DEFAULT_GUMBEL_ACTIONS
    """The most candidates the Gumbel root considers, ``k`` (1 to 16; ``root: gumbel``)."""
    completed_q_beta: float = 20.0
    """The inverse temperature of the ``completed_q`` target (0 < beta <= 1000; a larger beta puts more of the
    mass on the actions of the highest Q)."""
    value_mix: float = 0.0
    """The value target: ``(1 - value_mix) * outcome + value_mix * root value``, with the outcome of the game
    (+1, 0, -1) and the search's mean backed-up value at the position, both for the player to move (0 to 1; 0: the
    outcome alone, AlphaZero's; 1: the root value alone). The outcome of a self-play game carries every later
    mistake of the exploring self-play; the root value, the search's own estimate, has less noise and some bias.
    Applied when a sample is drawn, so it may change on ``--resume``."""
    exact_outcome_empties: int = 0
    """Rescore the outcome of every stored position with at most this many empty squares by its exact value
    under perfect play (the solver's), as Leela Chess rescores its games with endgame tablebases: the value target
    there carries no later mistake of self-play (0: off; at most 12, where a position still solves in about a
    second). A training target only: the ``az`` agent never calls the solver, so its grade still measures what
    the network learned."""
    full_search_share: float = 1.0
    """Playout-cap randomisation (KataGo): each round of self-play moves is searched with ``sims`` simulations
    and its positions stored with this probability, else with ``cheap_sims`` simulations, without noise, and not
    stored (0 < share <= 1; 1: every move full and stored). Cheap moves make more games, so more varied
    positions, per simulation; one draw decides for all the games of a round."""
    cheap_sims: int = 16
    """Simulations of a cheap move (``full_search_share`` below 1)."""
    workers: int = 0
    """Self-play processes: 0, the games are played in the training process, between its updates
    (bit-reproducible from ``seed``); N >= 1, N Ray actors (one CPU each, on this machine or a Ray cluster,
    ``quarto train --address``) each play ``num_games`` games with the learner's latest weights while the learner
    trains on the positions as they arrive (not bit-reproducible: the order of arrival varies). Needs the ray
    extra."""
    broadcast_every: int = 1
    """With ``workers``: the learner's gradient steps between two sends of its weights to the workers (each
    worker loads them before its next round of moves)."""


@dataclasses.dataclass
class RLlibConfig:
    """The processes of the rllib backend (``backend: rllib``), on this machine or a Ray cluster."""

    num_env_runners: int = 0
    """RLlib env runner processes that play the training games, each on ``cpus_per_env_runner`` CPUs; 0: the
    games are played in the training process itself (on 2 cores no slower than one runner). On a Ray cluster, as
    many as it has CPUs to spare; each runner plays ``num_games`` games."""
    cpus_per_env_runner: float = 1.0
    """CPUs Ray reserves for each env runner (> 0; fractions share a core): what it schedules by, not a limit on
    the process (torch still uses ``torch_threads``)."""
    num_learners: int = 0
    """RLlib Learner actors that compute the PPO updates: 0, one learner inside the training process (on its
    CPU, or one GPU with ``gpus_per_learner``); 1 or more, remote Learner actors, each on its own CPU or
    ``gpus_per_learner`` GPUs, possibly on other nodes of a Ray cluster. Several learners split each rollout and
    minibatch between them (``num_games * ppo.n_steps`` and ``ppo.batch_size`` stay the totals) and average their
    gradients."""
    gpus_per_learner: float = 0.0
    """GPUs Ray reserves for each learner (0: it trains on CPU; fractions share a GPU). Checked when Ray is up,
    against the GPUs of the whole Ray cluster (the GPU may be on another node than the training process): a run
    that asks for more than the cluster has is refused."""


@dataclasses.dataclass
class TrainConfig:
    """Everything a training run depends on (besides the code): saved as ``config.yaml`` in the run folder. Its
    fields are the common ones, read by every algorithm and backend; each algorithm's own are in its section."""

    algorithm: str = "ppo"
    """``ppo``: PPO against a pool of past selves and baselines, with the ``ppo`` section (and ``rllib``'s with
    ``backend: rllib``); ``alphazero``: search-based self-play (``experiments.training.alphazero``), with the
    ``alphazero`` section."""
    backend: str = "sb3"
    """With ``algorithm: ppo``: ``sb3``, sb3-contrib's MaskablePPO on games stepped side by side in one process
    (``experiments.training.sb3_ppo``), or ``rllib``, RLlib's PPO on ``quarto_v1`` through PettingZoo, sampled by
    ``rllib.num_env_runners`` processes, on one machine or a Ray cluster (``experiments.training.rllib_ppo``).
    ``algorithm: alphazero`` takes ``sb3``, the default."""
    name: str = "default"
    """Run name; the run folder is ``runs/<name>__<seed>__<time>/`` unless ``--run-dir`` names one. Printable,
    without a path separator, at most 200 bytes."""
    seed: int = 0
    """Seed of torch, the seats, the opponents' draws and the evaluation games."""
    variant: Variant = STANDARD
    """Rule variant, as the keywords of ``Variant.make``: ``attributes`` (a count 1-4 or names), ``squares``,
    ``declaration``, ``false_declaration`` (``lose`` or ``penalty``). Empty: standard Quarto."""
    observation: ObservationKind = OBSERVATION_KINDS["tempo"]
    """Observation planes: ``raw``, ``tactical`` (+ 1-ply win/lose planes), ``lookahead`` (+ trap planes),
    ``parity`` (+ parity of the safe pieces after each action) or ``tempo`` (+ the trap and parity planes one turn
    further on: the default, as in ``configs/default.yaml``); the table is ``quarto_env.observation``."""
    policy: str = "slots"
    """Network: ``slots`` (shared weights over square and piece slots, ``agents.networks.SlotNetwork``) or ``mlp``
    (PPO only: alphazero's network is the slots network with a value head)."""
    net_arch: list[int] = dataclasses.field(default_factory=lambda: [32])
    """``mlp``: the hidden layer sizes of the policy and value networks (1 to 8 layers); ``slots``: ``[width]``.
    Sizes 1 to 4096."""
    total_steps: int = 1_500_000
    """Learner decisions to train for (each game step of the learner is one; opponents' moves do not count;
    alphazero: searched self-play positions)."""
    num_games: int = 64
    """Games played side by side in one process (rllib: in each env runner, one batched forward pass per step;
    alphazero: games searched side by side, in each worker)."""
    eval_every: int = 250_000
    """Learner steps between two periodic evaluations (besides ``early_evals``; the final table is one more)."""
    early_evals: list[int] = dataclasses.field(default_factory=lambda: list(EARLY_EVALS))
    """Learner steps of the evaluations before the periodic ones take over: 0 evaluates the untrained network
    before training starts, and the doubling steps after it catch the early learning, when the scores move
    fastest. Each falls, like the periodic ones, at the first step at or past it; steps >= 0 and <= 10,000,000,000
    in increasing order, [] for none. A resumed run evaluates only at steps past its checkpoint's."""
    eval_games: int = 200
    """Games against each evaluation opponent, half in each seat, in each evaluation during training."""
    eval_opponents: list[str] = dataclasses.field(default_factory=lambda: ["random", "greedy", "minimax:depth=2"])
    """Agent specs the learner is evaluated against (deterministic play, both seats); at least one."""
    final_eval_games: int = 400
    """Games against each evaluation opponent for the final table, with the final checkpoint."""
    grade_positions: int = 0
    """Positions on which every evaluation also grades the learner with the exact solver (``quarto grade``):
    the share of its decisions that lose value under perfect play, logged under ``eval/grade/``. The positions
    (at most 10 empty squares, from seeded random and greedy games) are sampled and solved once. 0: off. Not
    read by the rllib backend."""
    sample_games: int = 0
    """Games of every evaluation shown move by move in TensorBoard, at the evaluation's step: the first games of the
    learner (its most likely action, or its search) against the last of ``eval_opponents``, the strongest as the
    configs list them, from the evaluation's seeded openings, so the same games recur all through the run. Under
    Text, ``games/sample_<n>`` lists the moves (in words and in position notation), each of the learner's
    decisions marked by the exact solver -- kept, won->drawn, won->lost or drawn->lost -- where the solver is
    fast (at most 10 empty squares, or where the rules' opening book values the position) and "not graded"
    elsewhere; under Images, ``games/sample_<n>/first_mistake`` shows the position of the learner's first
    value-losing decision (the final position when it made none). 0 to 16, at most ``eval_games``; 0: off."""
    eval_opening_plies: int = DEFAULT_OPENING_PLIES
    """Random actions that start every evaluation game and the final table's, each opening shared by a pair of
    games with the seats swapped (0 to 7; at most three pieces placed, so no opening decides a game); the default
    is ``quarto tournament``'s. 0: from the empty board, where a deterministic learner and opponent (argmax
    against minimax) replay the same two games however many are counted."""
    checkpoint_every: int = 250_000
    """Learner steps between two checkpoints; a resumed run loses at most this many."""
    torch_threads: int = 1
    """CPU threads for torch (1 is fastest for these small networks: more threads fight over 2 cores)."""
    device: str = DEFAULT_DEVICE
    """Where the learner's network trains: ``cpu``, ``cuda`` (refused where torch sees no GPU) or ``auto`` (cuda
    when torch sees one, else cpu). Read by the sb3 backend and by alphazero (its network and search evaluator);
    the rllib backend refuses any but cpu (Ray places its learner and runners). The periodic evaluations play
    the learner there; the frozen snapshots and the final table's reloaded checkpoint play on the CPU.
    Checkpoints are device-free: a run may resume on another device, and this field may change on
    ``--resume``."""
    ppo: PPOConfig = dataclasses.field(default_factory=PPOConfig)
    """The ``ppo`` section."""
    alphazero: AlphaZeroConfig = dataclasses.field(default_factory=AlphaZeroConfig)
    """The ``alphazero`` section."""
    rllib: RLlibConfig = dataclasses.field(default_factory=RLlibConfig)
    """The ``rllib`` section."""

    def __post_init__(self) -> None:
        self.variant = _resolved_variant(self.variant)  # given as plain data, as a config file holds them
        self.observation = _resolved_observation(self.observation)
        for prefix, part in _parts(self):
            _check_types(part, prefix)
        _check_values(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as written to ``config.yaml``: the common fields -- the variant as the keywords of
        ``Variant.make`` that differ from standard Quarto's, the observation kind by name -- then each section."""
        data = {name: copy.deepcopy(getattr(self, name)) for name in COMMON_FIELDS}
        data.update(variant=variant_keywords(self.variant), observation=self.observation.name)
        return data | {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}

    def to_flat_dict(self) -> dict[str, Any]:
        """The config as one flat mapping, each section's fields beside the common ones (of the fields of two
        sections, :data:`SHARED_FIELDS`, the ``algorithm``'s): as a checkpoint's ``quarto.json`` records it (the
        agents read its ``policy`` and ``net_arch``) and as TensorBoard's config table shows it."""
        data = self.to_dict()
        flat = {key: value for key, value in data.items() if key not in SECTIONS}
        for section in sorted(SECTIONS, key=lambda name: name != self.algorithm):  # the algorithm's own first
            for field, value in data[section].items():
                flat.setdefault(field, value)
        return flat


SECTIONS: dict[str, type] = {"ppo": PPOConfig, "alphazero": AlphaZeroConfig, "rllib": RLlibConfig}
"""Each section of a config by its key: the dataclass of its fields."""
SECTION_FIELDS = {section: tuple(f.name for f in dataclasses.fields(kind)) for section, kind in SECTIONS.items()}
"""The fields of each section, in order."""
COMMON_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in SECTIONS)
"""The common fields: the top level of a config."""
SHARED_FIELDS = tuple(
    field for field in SECTION_FIELDS["ppo"] if any(field in SECTION_FIELDS[s] for s in SECTIONS if s != "ppo")
)
"""The fields that two sections have (``ppo`` and ``alphazero``: the optimizer's): given flat, at the top level,
each goes into the section of the config's ``algorithm``."""
MAPPING_FIELDS = ("variant", "opponents")
"""The fields that are mappings: an override reaches one key inside them (``variant.squares=true``)."""


def load_config(path: str | Path | None, overrides: list[str] = ()) -> TrainConfig:  # type: ignore[assignment]
    """The config in the YAML file ``path`` (``None``: the defaults) with ``KEY=VALUE`` ``overrides`` applied."""
    data = _read_config_file(Path(path)) if path is not None else {}
    assignments = [(override, *_parse_override(override)) for override in overrides]
    given = [value for _, key, value in assignments if key == "algorithm"]  # the last one counts
    algorithm = given[-1] if given else data.get("algorithm", TrainConfig.algorithm)  # where shared fields go
    nested = nested_data(data, algorithm)
    for override, key, value in assignments:
        _apply_override(nested, override, key, value, algorithm)
    return config_from_dict(nested)


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """A validated config from plain data, in sections or flat (as older run folders and checkpoints hold it);
    unknown keys are errors."""
    nested = nested_data(data, data.get("algorithm", TrainConfig.algorithm))
    common = {key: value for key, value in nested.items() if key not in SECTIONS}
    sections = {section: kind(**nested.get(section, {})) for section, kind in SECTIONS.items()}
    return TrainConfig(**common, **sections)


def nested_data(data: dict[str, Any], algorithm: Any) -> dict[str, Any]:
    """``data`` with every section's field in its section's mapping: a field given at the top level (the flat
    spelling) moves into its section (one of :data:`SHARED_FIELDS` into ``algorithm``'s); a section's mapping is
    checked key by key. :class:`ConfigError` for an unknown key, a field under the wrong section or one given
    twice."""
    nested: dict[str, Any] = {}
    unknown = []
    for key, value in data.items():
        if key in SECTIONS:
            for field, item in _section_mapping(key, value).items():
                _check_section_key(key, field)
                _put(nested, key, field, item)
        elif key in COMMON_FIELDS:
            nested[key] = value
        elif section := home_section(key, algorithm):
            _put(nested, section, key, value)
        else:
            unknown.append(str(key))
    if unknown:
        raise unknown_keys(unknown)
    return nested


def unknown_keys(unknown: list[str]) -> ConfigError:
    """The error for config keys that are none of a config's: it lists the allowed ones -- the common fields, and
    each section with its fields -- and the nearest name of a mistyped one."""
    allowed = {*COMMON_FIELDS, *SECTIONS, *itertools.chain(*SECTION_FIELDS.values())}
    sections = "; ".join(f"section {section}: {', '.join(fields)}" for section, fields in SECTION_FIELDS.items())
    return ConfigError(
        f"unknown config key(s) {', '.join(sorted(unknown))}; allowed: common fields: {', '.join(COMMON_FIELDS)}; "
        f"{sections} (a section's field also at the top level){_suggested_fields(sorted(unknown), allowed)}"
    )


def sections_of(field: str) -> list[str]:
    """The sections that have a field called ``field`` (none for a common field or an unknown one)."""
    return [section for section, fields in SECTION_FIELDS.items() if field in fields]


def home_section(field: Any, algorithm: Any) -> str | None:
    """The section of ``field`` given at the top level: its own, or for one of :data:`SHARED_FIELDS` the section
    of ``algorithm`` (the first of its sections when ``algorithm`` is none of them, for the check to refuse)."""
    owners = sections_of(field)
    if not owners:
        return None
    return algorithm if algorithm in owners else owners[0]


def variant_keywords(variant: Variant) -> dict[str, Any]:
    """``variant`` as the keywords of ``Variant.make`` that differ from standard Quarto's (``{}`` for it): the
    form a config gives it in."""
    standard = STANDARD.to_dict()
    return {key: value for key, value in variant.to_dict().items() if value != standard[key]}


def _suggested_fields(unknown: list[str], fields: set[str]) -> str:
    """``"; did you mean 'total_steps'?"`` for one mistyped key; for several, each near field with its key."""
    if len(unknown) == 1:
        return did_you_mean(unknown[0], fields)
    near = [f"{closest!r} for {key!r}" for key in unknown if (closest := closest_name(key, fields))]
    return f"; did you mean {', '.join(near)}?" if near else ""


def check_agents(config: TrainConfig) -> None:
    """Build every agent that ``config`` names -- opponents and evaluation opponents -- for its variant, so that a
    missing or foreign ``ppo:`` checkpoint, or an option an agent refuses, fails before training starts."""
    named = [(f"config field {field}", spec) for field, spec in _agent_specs(config)]
    check_agent_specs(named, config.variant, config.seed)


def check_agent_specs(named: list[tuple[str, str]], variant: Variant, seed: int) -> None:
    """Build the agent of every ``(where, spec)`` pair for ``variant``; :class:`ConfigError` naming where the
    first one that cannot play was given, and why."""
    for where, spec in named:
        try:
            make_agent(spec, variant, seed)
        except (ValueError, OSError) as exc:  # SpecError, CheckpointError and RulesError are ValueErrors
            raise ConfigError(f"{where}: agent {spec!r} cannot play: {one_line(exc)}") from exc


def check_unchanged_on_resume(config: TrainConfig, metadata: dict[str, Any]) -> None:
    """Refuse a resumed ``config`` that changes a field of :data:`FIXED_ON_RESUME` from the value the checkpoint
    was trained with; ``metadata`` is the checkpoint's ``quarto.json`` (its ``config``, ``variant`` and
    ``observation``)."""
    trained = {
        "algorithm": "ppo",  # checkpoints from before the alphazero algorithm and the rllib backend record neither
        "backend": "sb3",
        **metadata["config"],
        "variant": Variant.make(**metadata["variant"]),
        "observation": metadata["observation"],
    }
    for field in FIXED_ON_RESUME:
        asked = getattr(config, field)
        asked = asked.name if isinstance(asked, ObservationKind) else asked
        if asked != trained[field]:
            raise ConfigError(
                f"config field {field} cannot change on --resume: the checkpoint was trained with "
                f"{_shown(trained[field])}, this resume asks for {_shown(asked)} (config.yaml with the overrides). "
                f"Fixed on resume: {', '.join(FIXED_ON_RESUME)}; every other field given with --resume is applied"
            )


def save_config(config: TrainConfig) -> str:
    """The config as YAML text (every field, resolved; the sections as nested mappings)."""
    return yaml.safe_dump(config.to_dict(), sort_keys=False)


def field_docs(kind: type = TrainConfig) -> dict[str, str]:
    """Each field's docstring, read from the source of the dataclass ``kind`` (:class:`TrainConfig` or a
    section's)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(kind)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
        ):
            docs[node.target.id] = " ".join(str(following.value.value).split())
    return docs


def describe_fields() -> str:
    """Every field with its type, default and documentation, for ``--help-config``: the common fields, then
    each section's."""
    defaults = TrainConfig().to_dict()
    common = {name: defaults[name] for name in COMMON_FIELDS}
    parts = [_describe("Common fields (the top level of a config)", "", TrainConfig, "", common)]
    for section, kind in SECTIONS.items():
        title = f"Section {section}: {' '.join((kind.__doc__ or '').split())}"
        spelling = f"In a config {section}: {{FIELD: VALUE, ...}}; on the command line {section}.FIELD=VALUE."
        parts.append(_describe(title, spelling, kind, f"{section}.", defaults[section]))
    return "\n\n".join(parts)


def _describe(title: str, spelling: str, kind: type, prefix: str, defaults: dict[str, Any]) -> str:
    """A titled list of the fields of the dataclass ``kind``, named with ``prefix``."""
    hints, docs = typing.get_type_hints(kind), field_docs(kind)
    fields = [
        f"{_heading(prefix + name, hints[name], default)}:\n    {docs[name]}" for name, default in defaults.items()
    ]
    return "\n".join([title, *([spelling] if spelling else []), "=" * min(len(title), 110), *fields])


def _heading(name: str, hint: Any, default: Any) -> str:
    """``seed (int, default 0, range >= 0 and <= 4,294,967,295, fixed on --resume)``: a field's facts."""
    signs = {"minimum": ">=", "above": ">", "maximum": "<="}
    bounds = [
        f"{signs[kind]} {int(v):,}" if v == int(v) else f"{signs[kind]} {v:g}"
        for kind, v in RANGES.get(name.rpartition(".")[2], {}).items()
    ]
    facts = [_type_name(hint), f"default {default!r}"]
    facts += [f"range {' and '.join(bounds)}"] if bounds else []
    facts += ["fixed on --resume"] if name in FIXED_ON_RESUME else []
    return f"{name} ({', '.join(facts)})"


_YAML_TYPES = {Variant: "dict[str, Any]", ObservationKind: "str"}
"""The type a config gives a field in, where the config holds it resolved."""


def config_table(config: TrainConfig) -> str:
    """The config as a Markdown table, for TensorBoard's text tab (flat, as checkpoints record it)."""
    return markdown_table(["field", "value"], [[key, str(value)] for key, value in config.to_flat_dict().items()])


# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------
class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if not isinstance(key, typing.Hashable):
                continue  # the safe loader refuses it below, with its own message
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (a config names each field once)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _read_config_file(path: Path) -> dict[str, Any]:
    """The mapping of fields in the YAML file ``path``; :class:`ConfigError` for anything else."""
    input_file(path, "config file", ConfigError)
    try:
        loaded = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # SafeLoader underneath
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text (a binary file?)") from None
    except OSError as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    except RecursionError:
        raise ConfigError(f"config file {str(path)!r} is nested too deeply to be a config") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {one_line(exc)}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping of fields, got {type(loaded).__name__}")
    return loaded or {}


def _parse_override(override: str) -> tuple[str, Any]:
    """The key and the value (read as YAML) of a ``KEY=VALUE`` override."""
    # A spec in an opponents key may hold '=' (minimax:depth=2) and a weight never does: split at the last one.
    at_last = override.startswith(("opponents.", "ppo.opponents."))
    key, eq, text = override.rpartition("=") if at_last else override.partition("=")
    if not eq or not key:
        raise ConfigError(
            f"override {override!r} must be KEY=VALUE, e.g. total_steps=200000, ppo.learning_rate=1e-3 or "
            "variant.squares=true"
        )
    try:
        return key, yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {override!r}: the value is not valid YAML: {one_line(exc)}") from None


def _apply_override(nested: dict[str, Any], override: str, key: str, value: Any, algorithm: Any) -> None:
    """Set the field ``key`` names (``seed``, ``ppo.n_steps``, the flat ``n_steps``, ``ppo={n_steps: 8}``, a key
    inside a mapping field: ``variant.squares``, ``ppo.opponents.greedy``) in the sectioned ``nested`` data."""
    if key in SECTIONS:
        for field, item in _section_mapping(key, value).items():
            _check_section_key(key, field)
            nested.setdefault(key, {})[field] = item
        return
    section, field, inner = _override_target(key, algorithm)
    target = nested if section is None else nested.setdefault(section, {})
    if inner is None:
        target[field] = value
        return
    if section is None and field not in COMMON_FIELDS:
        raise unknown_keys([key])
    name = field if section is None else f"{section}.{field}"
    if field in MAPPING_FIELDS and not inner:
        raise ConfigError(f"override {override!r}: name a key of {name} after the dot, e.g. variant.squares=true")
    if field not in MAPPING_FIELDS:
        raise ConfigError(
            f"override {override!r}: {name} takes no dotted key; a dotted key is SECTION.FIELD "
            f"({', '.join(f'{s}.{SECTION_FIELDS[s][0]}=...' for s in SECTIONS)}) or a key inside a mapping field "
            "(variant.squares=true, ppo.opponents.greedy=0.5)"
        )
    defaults = TrainConfig().to_dict()
    mapping = target.get(field, (defaults if section is None else defaults[section])[field])
    if not isinstance(mapping, dict):
        raise ConfigError(f"override {override!r}: config field {name} must be a mapping, got {mapping!r}")
    target[field] = {**mapping, inner: value}


def _override_target(key: str, algorithm: Any) -> tuple[str | None, str, str | None]:
    """The section (``None``: the top level), the field and the key inside it (``None``: the field itself) of
    an override's dotted ``key``; a flat field goes into its section (:func:`home_section`)."""
    head, dot, rest = key.partition(".")
    if head in SECTIONS:
        field, inner_dot, inner = rest.partition(".")
        _check_section_key(head, field)
        return head, field, inner if inner_dot else None
    section = None if head in COMMON_FIELDS else home_section(head, algorithm)  # None for an unknown key
    return section, head, rest if dot else None


def _section_mapping(section: str, value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"config key {section} must be a mapping of the fields of section {section}, e.g. "
            f"{section}: {{{SECTION_FIELDS[section][0]}: ...}}, got {_SHORT.repr(value)}"
        )
    return value


def _check_section_key(section: str, field: Any) -> None:
    """Refuse a key of section ``section`` that is not one of its fields, in one line naming where it belongs."""
    if field in SECTION_FIELDS[section]:
        return
    where = f"config key {section}.{field}"
    if owners := sections_of(field):
        sections = " or ".join(owners)
        raise ConfigError(f"{where}: {field} belongs to section {sections}, not {section} (write {owners[0]}.{field})")
    if field in COMMON_FIELDS:
        raise ConfigError(f"{where}: {field} is a common field, given at the top level of the config, not in a section")
    allowed = SECTION_FIELDS[section]
    raise ConfigError(
        f"unknown {where}; allowed in section {section}: {', '.join(allowed)}{did_you_mean(str(field), allowed)}"
    )


def _put(nested: dict[str, Any], section: str, field: str, value: Any) -> None:
    """Set a section's field, refusing one given twice: flat, at the top level, and in its section."""
    fields = nested.setdefault(section, {})
    if field in fields:
        raise ConfigError(
            f"config key {section}.{field} is given twice: as {field} at the top level (the flat spelling) and "
            f"in section {section}; keep one"
        )
    fields[field] = value


def _resolved_variant(value: Any) -> Variant:
    """The rule variant a config's ``variant`` names."""
    if isinstance(value, Variant):
        return value
    _require(isinstance(value, dict), "variant", "must be dict[str, Any], the keywords of Variant.make", value)
    try:
        return Variant.make(**value)
    except (RulesError, TypeError) as exc:
        raise ConfigError(
            f"config field variant is not a valid rule variant ({one_line(exc)}), got {_SHORT.repr(value)}"
        ) from exc


def _resolved_observation(value: Any) -> ObservationKind:
    """The observation kind a config's ``observation`` names."""
    if isinstance(value, ObservationKind):
        return value
    known = isinstance(value, str) and value in OBSERVATION_KINDS
    _require(known, "observation", f"must be one of {tuple(OBSERVATION_KINDS)}", value)
    return OBSERVATION_KINDS[value]


def _parts(config: TrainConfig) -> list[tuple[str, Any]]:
    """The config and its sections, each with the prefix of its fields' names: ``("", config)``,
    ``("ppo.", config.ppo)``..."""
    return [("", config)] + [(f"{section}.", getattr(config, section)) for section in SECTIONS]


def _shown(value: Any) -> str:
    return repr(value.describe()) if isinstance(value, Variant) else repr(value)


def _type_name(hint: Any) -> str:
    """The name of a field's type, as a config gives it (``dict[str, Any]`` for the variant)."""
    if hint in _YAML_TYPES:
        return _YAML_TYPES[hint]
    return getattr(hint, "__name__", None) if typing.get_origin(hint) is None else str(hint)  # type: ignore[return-value]


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_matches(v, item) for v in value)
    if origin is dict:
        key_hint, value_hint = typing.get_args(hint)
        return isinstance(value, dict) and all(
            _matches(k, key_hint) and _matches(v, value_hint) for k, v in value.items()
        )
    return isinstance(value, hint)


def _as_number(value: Any, hint: Any) -> Any:
    """``value`` with its numbers in the type ``hint`` asks for, also inside lists and mappings: YAML reads
    ``1e-3`` and ``5e-1`` as strings and ``2.0e6`` as a float; a float field takes both (and ints), an int field
    an integral value. Anything else is left for the type check to refuse."""
    origin = typing.get_origin(hint)
    if origin is list and isinstance(value, list):
        return [_as_number(item, typing.get_args(hint)[0]) for item in value]
    if origin is dict and isinstance(value, dict):
        return {key: _as_number(item, typing.get_args(hint)[1]) for key, item in value.items()}
    if hint not in (int, float) or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if hint is int else _int_as_float(value)
    if not isinstance(value, (str, float)):
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    if hint is float:
        return number
    return int(number) if number.is_integer() else value


def _int_as_float(value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # beyond a float's range: infinite, for the range check to refuse
        return math.inf if value > 0 else -math.inf


_SHORT = reprlib.Repr()
"""Values in messages, shortened: a long value given by mistake is not printed whole."""
_SHORT.maxstring = _SHORT.maxother = 80


def _check_types(part: Any, prefix: str) -> None:
    """Check the type of every field of ``part``, the config or a section whose fields' names start with
    ``prefix``; numbers are made the type asked for (:func:`_as_number`)."""
    for name, hint in typing.get_type_hints(type(part)).items():
        value = _as_number(getattr(part, name), hint)
        if not _matches(value, hint):
            shown = f"{_SHORT.repr(value)} ({type(value).__name__})"
            raise ConfigError(f"config field {prefix}{name} must be {_type_name(hint)}, got {shown}")
        setattr(part, name, value)


def _require(condition: bool, field: str, message: str, value: Any) -> None:
    if not condition:
        raise ConfigError(f"config field {field} {message}, got {_SHORT.repr(value)}")


def _check_number(value: Any, field: str, integer: bool = False, **bounds: float) -> None:
    try:
        checked_number(value, f"config field {field}", integer=integer, **bounds)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _check_values(c: TrainConfig) -> None:
    _check_ranges(c)
    _check_name(c.name)
    _check_choices(c)
    try:
        check_network(c.policy, c.net_arch)
    except ValueError as exc:
        raise ConfigError(f"config field {exc}") from None
    _require(
        all(0 <= step <= MAX_STEPS for step in c.early_evals) and c.early_evals == sorted(set(c.early_evals)),
        "early_evals",
        f"must list learner steps >= 0 in increasing order, e.g. [0, 16384, 32768], or [] for none (each <= "
        f"{MAX_STEPS})",
        c.early_evals,
    )
    try:
        resolve_device(c.device)
    except ValueError as exc:
        raise ConfigError(f"config field device: {exc}") from None
    _check_combinations(c)
    _check_opponents(c)


def _check_ranges(c: TrainConfig) -> None:
    """Every number field of the config and its sections within its :data:`RANGES`."""
    for prefix, part in _parts(c):
        for name, hint in typing.get_type_hints(type(part)).items():
            if name in RANGES:
                _check_number(getattr(part, name), prefix + name, integer=hint is int, **RANGES[name])


def _check_choices(c: TrainConfig) -> None:
    """Every field that names one of a few choices names one of them."""
    choices = [
        ("algorithm", c.algorithm, ALGORITHMS),
        ("backend", c.backend, BACKENDS),
        ("policy", c.policy, POLICY_KINDS),
        ("ppo.lr_schedule", c.ppo.lr_schedule, LR_SCHEDULES),
        ("alphazero.network_design", c.alphazero.network_design, NETWORK_DESIGNS),
        ("alphazero.root", c.alphazero.root, ROOTS),
        ("alphazero.policy_target", c.alphazero.policy_target, POLICY_TARGETS),
    ]
    for field, value, allowed in choices:
        _require(value in allowed, field, f"must be one of {tuple(allowed)}", value)


def _check_combinations(c: TrainConfig) -> None:
    """The fields that depend on the algorithm and the backend fit them."""
    _require(
        c.backend == "sb3" or c.algorithm == "ppo",
        "backend",
        f"must be sb3 with algorithm {c.algorithm} (the rllib backend trains algorithm ppo only; backends: {BACKENDS})",
        c.backend,
    )
    _require(
        c.algorithm != "alphazero" or c.policy == "slots",
        "policy",
        "must be slots with algorithm alphazero (its network is the slots network with a value head)",
        c.policy,
    )
    _require(
        c.backend != "rllib" or c.device == DEFAULT_DEVICE,
        "device",
        f"must be {DEFAULT_DEVICE} with backend rllib (Ray places RLlib's learner and runners, not this field)",
        c.device,
    )
    _require(
        c.alphazero.workers == 0 or c.algorithm == "alphazero",
        "alphazero.workers",
        "must be 0 with algorithm ppo (self-play workers are alphazero's; rllib's processes are num_env_runners)",
        c.alphazero.workers,
    )
    _require(
        c.sample_games <= c.eval_games,
        "sample_games",
        f"must be <= eval_games = {c.eval_games} (the sample games are the first games of an evaluation)",
        c.sample_games,
    )
    if c.algorithm == "ppo":
        _check_rollout(c)
    else:
        buffer = c.alphazero.buffer_size
        _require(
            c.alphazero.batch_size <= buffer,
            "alphazero.batch_size",
            f"must be <= alphazero.buffer_size = {buffer}",
            c.alphazero.batch_size,
        )


def _check_name(name: str) -> None:
    _require(
        name.isprintable() and name.strip() != "" and not set(name) & {"/", "\\"},
        "name",
        "must be printable text, not blank, without '/' or '\\' (it names the run folder)",
        name,
    )
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise ConfigError(f"config field name must be at most {MAX_NAME_BYTES} bytes (UTF-8), got {size} bytes")


def _check_rollout(c: TrainConfig) -> None:
    rollout, n_steps, batch_size = c.num_games * c.ppo.n_steps, c.ppo.n_steps, c.ppo.batch_size
    _require(rollout <= MAX_ROLLOUT, "ppo.n_steps", f"must keep num_games * ppo.n_steps <= {MAX_ROLLOUT}", n_steps)
    _require(batch_size <= rollout, "ppo.batch_size", f"must be <= num_games * ppo.n_steps = {rollout}", batch_size)
    _require(
        rollout % batch_size != 1,
        "ppo.batch_size",
        f"must not leave a last minibatch of one step (num_games * ppo.n_steps = {rollout} leaves {rollout} % "
        f"ppo.batch_size = 1; its advantages, normalised by their spread, would be NaN)",
        batch_size,
    )


def _check_opponents(c: TrainConfig) -> None:
    for spec, weight in c.ppo.opponents.items():
        _check_number(weight, f"ppo.opponents.{spec}", minimum=0)
    total = sum(c.ppo.opponents.values())
    _require(0 < total < math.inf, "ppo.opponents", "must give weights with a positive, finite sum", c.ppo.opponents)
    _require(len(c.eval_opponents) >= 1, "eval_opponents", "must name at least one agent spec", c.eval_opponents)
    for field, spec in _agent_specs(c):
        try:
            parse_spec(spec)
        except SpecError as exc:
            raise ConfigError(f"config field {field}: {one_line(exc)}") from exc


def _agent_specs(c: TrainConfig) -> list[tuple[str, str]]:
    """Every agent spec of the config, with its field: the opponents (but ``snapshots``) and eval opponents."""
    opponents = [("ppo.opponents", spec) for spec in c.ppo.opponents if spec != SNAPSHOTS]
    return opponents + [("eval_opponents", spec) for spec in c.eval_opponents]
