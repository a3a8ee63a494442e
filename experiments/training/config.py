"""The schema of ``quarto train``'s config: its typed sections, each field with its type, range, default and
meaning, and the checks that span several fields.

A config has the common fields of :class:`TrainConfig` at the top level and one section per algorithm, each a
nested mapping of its own fields: ``ppo`` (:class:`PPOConfig`: the PPO learner and its opponents, read by both
PPO backends, sb3 and rllib), ``alphazero`` (:class:`AlphaZeroConfig`) and ``rllib`` (:class:`RLlibConfig`: the
processes of the rllib backend). Reading one from YAML and ``KEY=VALUE`` overrides, writing it, and the older
flat layout of run folders and checkpoints are :mod:`experiments.training.config_file`'s; importing either loads
neither torch nor stable-baselines3.

The defaults
------------
The dataclasses below are the one home of every default: a field's default is the value after its ``=``.
``configs/default.yaml``, the config ``quarto train`` reads when none is given, names only what differs from
them -- nothing: ``quarto train`` trains ``TrainConfig()``. Every other config names what it changes (an explicit
choice may restate a default). The observation default of training is here (``observation``: ``tempo``); the
env's is :data:`quarto_env.observation.DEFAULT_OBSERVATION` (``tactical``).

The checks
----------
Every value is checked when the config is made, so that a config that validates also trains: an unknown key,
a value of the wrong type, a number that is not finite or outside its range, an unparsable agent spec or an
impossible rule variant raises :class:`ConfigError` naming the field and what is allowed. A number field
carries its range in its type (``Annotated[int, Range(1, MAX_STEPS)]``, :mod:`experiments.training.config_checks`),
so ``ppo.batch_size`` and ``alphazero.batch_size`` each have their own. The rule variant and the observation kind
are resolved there too, once: the config holds a :class:`~quarto_env.core.Variant` and an
:class:`~quarto_env.observation.ObservationKind`, and writes them back as the YAML they came from; an empty
``backend`` becomes the algorithm's first (:data:`ALGORITHM_BACKENDS`). :func:`check_agents` goes further and
builds every agent the config names (a ``ppo:`` checkpoint must exist and fit the variant); ``quarto train``
calls it before it writes anything. ``quarto train --help-config`` lists every field with its documentation,
section by section (:func:`describe_fields`).

Resuming
--------
``quarto train --resume RUN KEY=VALUE...`` continues a run with its own ``config.yaml``. The fields in
:data:`FIXED_ON_RESUME` -- the network's shape (``variant``, ``observation``, ``policy``, ``net_arch``,
``alphazero.network_design``) and the
run's identity (``algorithm``, ``backend``, ``name``, ``seed``) -- are fixed by the checkpoint: an override that
changes one is refused. Every other field is applied from the resumed step on: the budgets and intervals, the
hyperparameters (the learner is rebuilt from the config, then given the checkpoint's weights and optimizer
state), the opponent mix, and the evaluations.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import typing
from typing import Annotated, Any

from agents.match import DEFAULT_OPENING_PLIES, MAX_OPENING_PLIES
from agents.networks.choices import (
    DEFAULT_DESIGN,
    DEFAULT_DEVICE,
    EVALUATION_PATHS,
    NETWORK_DESIGNS,
    POLICY_KINDS,
    check_device_name,
    check_network,
)
from agents.networks.onnx_runtime import onnx_available
from agents.specs import MAX_PUCT_SIMULATIONS, SpecError, make_agent, parse_spec
from agents.tree import choices as search
from agents.tree.gumbel_root import DEFAULT_GUMBEL_ACTIONS
from experiments.evaluation.tables import markdown_table
from experiments.options import MAX_SEED
from experiments.training.config_checks import (
    ConfigError,
    Range,
    check_number,
    check_ranges,
    check_types,
    field_ranges,
    require,
    type_name,
)
from experiments.training.field_docs import field_docs
from quarto_env.checks import one_line
from quarto_env.core import NUM_ACTIONS, STANDARD, RulesError, Variant, checked_variant
from quarto_env.errors import QuartoTypeError
from quarto_env.observation import OBSERVATION_KINDS, ObservationKind, observation_kind

LR_SCHEDULES = ("constant", "linear")
ALGORITHM_BACKENDS = {"ppo": ("sb3", "rllib"), "alphazero": ("torch", "jax")}
"""The implementations that train each algorithm (``backend``), the default first."""
ALGORITHMS = tuple(ALGORITHM_BACKENDS)
MAX_ENV_RUNNERS = 1024
"""The most RLlib env runners a config may ask for (each is a process, on this machine or a Ray cluster)."""
MAX_WORKERS = 1024
"""The most AlphaZero self-play workers a config may ask for (each is a Ray actor with one CPU)."""
MAX_LEARNERS = 256
"""The most remote RLlib Learner actors a config may ask for."""
MAX_RESOURCES_PER_ACTOR = 1024
"""The most CPUs or GPUs one RLlib actor (env runner, learner) may reserve."""

SEED_LIMIT = MAX_SEED + 1
"""Seeds are below this (:data:`experiments.options.MAX_SEED`, the arena's bound): numpy's global generator takes no
other (``train`` folds ``seed + step`` below it)."""
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
MAX_ROLLOUT_STEPS = 4096
"""The most ``alphazero.rollout_steps`` of one jitted self-play iteration (``backend: jax``)."""
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
SNAPSHOTS = "snapshots"
"""The key of the learner's frozen past selves in the opponent mix (``ppo.opponents``); its other keys are agent
specs."""
FIXED_ON_RESUME = (
    "algorithm",
    "backend",
    "name",
    "seed",
    "variant",
    "observation",
    "policy",
    "net_arch",
    "alphazero.network_design",
)
"""Fields that ``quarto train --resume`` takes from the checkpoint and refuses to change: the network's shape
and the run's identity (a section's field by its dotted name). Every other field given with ``--resume`` is
applied."""

Steps = Annotated[int, Range(1, MAX_STEPS)]
"""A count of learner steps: a budget or an interval."""
Games = Annotated[int, Range(1, MAX_GAMES)]
"""A count of games played side by side."""
StepSize = Annotated[float, Range(above=0, maximum=1)]
"""An optimizer's step size."""
LossWeight = Annotated[float, Range(0, MAX_LOSS_WEIGHT)]
"""The weight of a loss term."""
Share = Annotated[float, Range(0, 1)]
"""A share, 0 to 1."""


@dataclasses.dataclass
class PPOConfig:
    """The PPO learner and its opponents: read by both PPO backends, sb3 and rllib (``lr_schedule`` by sb3 only)."""

    n_steps: Annotated[int, Range(1, MAX_ROLLOUT)] = 64
    """Learner steps per game between two PPO updates (a rollout holds ``num_games * n_steps`` steps, at most
    2**20 = 1,048,576; rllib: environment steps of both seats, ``num_games * n_steps`` per update)."""
    batch_size: Annotated[int, Range(2, MAX_ROLLOUT)] = 1024
    """PPO minibatch size: at least 2, and no last minibatch of a single step (its advantages, normalised by
    their spread, would be NaN)."""
    n_epochs: Annotated[int, Range(1, MAX_EPOCHS)] = 4
    """PPO passes over each rollout."""
    learning_rate: StepSize = 3e-4
    """Adam step size (the initial one with ``lr_schedule: linear``)."""
    lr_schedule: str = "constant"
    """``constant``, or ``linear`` decay to 0 at ``total_steps`` (sb3; the rllib backend keeps the rate constant)."""
    gamma: Annotated[float, Range(above=0, maximum=1)] = 0.99
    """Discount factor; below 1 it prefers quick wins and slow losses."""
    gae_lambda: Share = 0.95
    """GAE lambda."""
    clip_range: Annotated[float, Range(above=0)] = 0.2
    """PPO clipping of the probability ratio."""
    ent_coef: LossWeight = 0.01
    """Entropy bonus weight."""
    vf_coef: LossWeight = 0.5
    """Value loss weight."""
    max_grad_norm: Annotated[float, Range(above=0)] = 0.5
    """Gradient clipping norm."""
    opponents: dict[str, float] = dataclasses.field(
        default_factory=lambda: {SNAPSHOTS: 0.4, "minimax:depth=2": 0.3, "greedy": 0.2, "random": 0.1}
    )
    """The opponent mix: weights of ``snapshots`` (the learner's frozen past selves) and of agent specs; finite,
    >= 0, with a positive sum."""
    snapshot_every: Steps = 100_000
    """Learner steps between two snapshots added to the pool (the first is the untrained network)."""
    max_snapshots: Annotated[int, Range(1, MAX_SNAPSHOTS)] = 20
    """Snapshots kept in the pool; the oldest leaves when a new one comes."""


@dataclasses.dataclass
class AlphaZeroConfig:
    """Search-based self-play (``experiments.training.alphazero``): its network, searches, targets and workers."""

    network_design: str = DEFAULT_DESIGN
    """The body of the policy-value network (:data:`agents.networks.policy_value.NETWORK_DESIGNS`): ``slots``, the slots
    network (the hand reaches the square slots through the pooled context); ``hand``, which gives every square
    slot the piece in hand and the value head the hand and the groups directly (slower); ``transformer``,
    ``looped`` or the plain ``mlp``. ``quarto bench network`` compares them on exact labels
    (docs/learnability.md)."""
    leaf_evaluation: str = "fast"
    """How the searches evaluate their leaves (``PolicyValueNetwork.evaluate``'s path): ``fast``, the forward pass's
    numbers bit for bit in less time; ``forward``, the forward pass; ``onnx``, ONNX Runtime's CPU session (the
    ``onnx`` extra), within about 1e-7 of those numbers and faster again, so not reproducible bit for bit against
    the other two (docs/alphazero.md, "Fast evaluation")."""
    batch_size: Annotated[int, Range(2, MAX_ROLLOUT)] = 1024
    """Positions per gradient step, drawn from the replay buffer (at most ``buffer_size``)."""
    learning_rate: StepSize = 3e-4
    """AdamW step size."""
    weight_decay: Share = 1.0e-4
    """AdamW weight decay."""
    vf_coef: LossWeight = 0.5
    """Value loss weight (the policy loss weighs 1)."""
    max_grad_norm: Annotated[float, Range(above=0)] = 0.5
    """Gradient clipping norm."""
    sims: Annotated[int, Range(1, MAX_PUCT_SIMULATIONS)] = search.DEFAULT_SIMULATIONS
    """Simulations per searched self-play move."""
    eval_sims: Annotated[int, Range(0, MAX_PUCT_SIMULATIONS)] = 64
    """Simulations per move in the evaluations and the grade (0: the network's policy alone)."""
    c_puct: Annotated[float, Range(above=0, maximum=100)] = search.DEFAULT_C_PUCT
    """PUCT exploration constant."""
    dirichlet_alpha: Annotated[float, Range(above=0, maximum=100)] = search.DEFAULT_DIRICHLET_ALPHA
    """Concentration of the Dirichlet noise mixed into the root priors of self-play searches."""
    dirichlet_fraction: Share = search.DEFAULT_DIRICHLET_FRACTION
    """Weight of that noise (0: none)."""
    temperature_plies: Annotated[int, Range(0, 33)] = search.DEFAULT_TEMPERATURE_PLIES
    """The first this many actions of a self-play game (gives and placements) are sampled in proportion to the
    visits; later ones take the most visited action."""
    buffer_size: Annotated[int, Range(2, 50_000_000)] = 250_000
    """Searched positions kept in the replay buffer (the newest)."""
    sample_reuse: Annotated[float, Range(above=0, maximum=1000)] = 4.0
    """Training samples drawn per new self-play position: how often, on average, a position is trained on while
    in the buffer."""
    augment: bool = True
    """Move every training sample by a random symmetry of the game (board symmetry and relabelling of the
    counted attributes), its visit distribution alike."""
    policy_target: str = "visits"
    """The policy target of a stored position (:data:`agents.tree.choices.POLICY_TARGETS`): ``visits``, the search's
    visit distribution, or ``completed_q``, ``softmax(log prior + completed_q_beta * Q)`` over the candidates, with Q
    the mean backed-up value of a visited action and the root value for an unvisited one (Gumbel MuZero's improved
    policy: with few simulations the visits barely leave the prior, while Q already ranks the actions)."""
    root: str = "puct"
    """The root of the searches of self-play and of the evaluations (:data:`agents.tree.choices.ROOTS`): ``puct``, with
    Dirichlet noise in self-play's full searches and the first ``temperature_plies`` actions sampled from the
    visits; or ``gumbel``, Gumbel top-k with sequential halving (Gumbel AlphaZero): self-play draws the Gumbel
    noise in every search and plays the root's choice at every action (the noise samples the moves, so
    ``dirichlet_*`` and ``temperature_plies`` do not apply), the evaluations search without noise. Its natural
    policy target is ``completed_q``: the halving's visits are a plan, not a preference."""
    gumbel_actions: Annotated[int, Range(1, NUM_ACTIONS)] = DEFAULT_GUMBEL_ACTIONS
    """The most candidates the Gumbel root considers, ``k`` (1 to 16; ``root: gumbel``)."""
    completed_q_beta: Annotated[float, Range(above=0, maximum=1000)] = search.DEFAULT_COMPLETED_Q_BETA
    """The inverse temperature of the ``completed_q`` target (0 < beta <= 1000; a larger beta puts more of the
    mass on the actions of the highest Q)."""
    value_mix: Share = 0.0
    """The value target: ``(1 - value_mix) * outcome + value_mix * root value``, with the outcome of the game
    (+1, 0, -1) and the search's mean backed-up value at the position, both for the player to move (0 to 1; 0: the
    outcome alone, AlphaZero's; 1: the root value alone). The outcome of a self-play game carries every later
    mistake of the exploring self-play; the root value, the search's own estimate, has less noise and some bias.
    Applied when a sample is drawn, so it may change on ``--resume``."""
    exact_outcome_empties: Annotated[int, Range(0, MAX_EXACT_OUTCOME_EMPTIES)] = 0
    """Rescore the outcome of every stored position with at most this many empty squares by its exact value
    under perfect play (the solver's), as Leela Chess rescores its games with endgame tablebases: the value target
    there carries no later mistake of self-play (0: off; at most 12, where a position still solves in about a
    second). A training target only: the ``az`` agent never calls the solver, so its grade still measures what
    the network learned."""
    full_search_share: Annotated[float, Range(above=0, maximum=1)] = search.DEFAULT_FULL_SEARCH_SHARE
    """Playout-cap randomisation (KataGo): each round of self-play moves is searched with ``sims`` simulations
    and its positions stored with this probability, else with ``cheap_sims`` simulations, without noise, and not
    stored (0 < share <= 1; 1: every move full and stored). Cheap moves make more games, so more varied
    positions, per simulation; one draw decides for all the games of a round."""
    cheap_sims: Annotated[int, Range(1, MAX_PUCT_SIMULATIONS)] = search.DEFAULT_CHEAP_SIMULATIONS
    """Simulations of a cheap move (``full_search_share`` below 1)."""
    workers: Annotated[int, Range(0, MAX_WORKERS)] = 0
    """Self-play processes: 0, the games are played in the training process, between its updates
    (bit-reproducible from ``seed``); N >= 1, N Ray actors (one CPU each, on this machine or a Ray cluster,
    ``quarto train --address``) each play ``num_games`` games with the learner's latest weights while the learner
    trains on the positions as they arrive (not bit-reproducible: the order of arrival varies). Needs the ray
    extra."""
    broadcast_every: Steps = 1
    """With ``workers``: the learner's gradient steps between two sends of its weights to the workers (each
    worker loads them before its next round of moves)."""
    rollout_steps: Annotated[int, Range(1, MAX_ROLLOUT_STEPS)] = 64
    """``backend: jax``: the actions every one of the ``num_games`` games takes per jitted iteration (new games
    each iteration; the positions of a game still on at its end are not stored). An iteration adds ``num_games *
    rollout_steps`` searched positions and trains on them; a game is at most 33 actions."""


@dataclasses.dataclass
class RLlibConfig:
    """The processes of the rllib backend (``backend: rllib``), on this machine or a Ray cluster."""

    num_env_runners: Annotated[int, Range(0, MAX_ENV_RUNNERS)] = 0
    """RLlib env runner processes that play the training games, each on ``cpus_per_env_runner`` CPUs; 0: the
    games are played in the training process itself (on 2 cores no slower than one runner). On a Ray cluster, as
    many as it has CPUs to spare; each runner plays ``num_games`` games."""
    cpus_per_env_runner: Annotated[float, Range(above=0, maximum=MAX_RESOURCES_PER_ACTOR)] = 1.0
    """CPUs Ray reserves for each env runner (> 0; fractions share a core): what it schedules by, not a limit on
    the process (torch still uses ``torch_threads``)."""
    num_learners: Annotated[int, Range(0, MAX_LEARNERS)] = 0
    """RLlib Learner actors that compute the PPO updates: 0, one learner inside the training process (on its
    CPU, or one GPU with ``gpus_per_learner``); 1 or more, remote Learner actors, each on its own CPU or
    ``gpus_per_learner`` GPUs, possibly on other nodes of a Ray cluster. Several learners split each rollout and
    minibatch between them (``num_games * ppo.n_steps`` and ``ppo.batch_size`` stay the totals) and average their
    gradients."""
    gpus_per_learner: Annotated[float, Range(0, MAX_RESOURCES_PER_ACTOR)] = 0.0
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
    backend: str = ""
    """The implementation that trains the ``algorithm`` (:data:`ALGORITHM_BACKENDS`); left out (or empty), the
    algorithm's first: ``sb3`` for ppo, ``torch`` for alphazero. With ``algorithm: ppo``: ``sb3``, sb3-contrib's
    MaskablePPO on games stepped side by side in one process (``experiments.training.sb3_ppo``), or ``rllib``,
    RLlib's PPO on ``quarto_v1`` through PettingZoo, sampled by ``rllib.num_env_runners`` processes, on one machine
    or a Ray cluster (``experiments.training.rllib_ppo``). With ``algorithm: alphazero``: ``torch``, its own
    trainer in plain torch (``experiments.training.alphazero``; an older config's ``backend: sb3`` reads as
    ``torch``)."""
    name: str = "default"
    """Run name; the run folder is ``runs/<name>__<seed>__<time>/`` unless ``--run-dir`` names one. Printable,
    without a path separator, at most 200 bytes."""
    seed: Annotated[int, Range(0, MAX_SEED)] = 0
    """Seed of torch, the seats, the opponents' draws and the evaluation games."""
    variant: Variant = STANDARD
    """Rule variant, as the keywords of ``Variant.make``: ``attributes`` (a count 1-4 or names), ``squares``,
    ``declaration``, ``false_declaration`` (``lose`` or ``penalty``). Empty: standard Quarto."""
    observation: ObservationKind = OBSERVATION_KINDS["tempo"]
    """Observation planes: ``raw``, ``tactical`` (+ 1-ply win/lose planes), ``lookahead`` (+ trap planes),
    ``parity`` (+ parity of the safe pieces after each action) or ``tempo`` (+ the trap and parity planes one turn
    further on: training's default, where the env's is ``tactical``); the table is ``quarto_env.observation``."""
    policy: str = "slots"
    """Network: ``slots`` (shared weights over square and piece slots, ``agents.networks.policy_value.SlotNetwork``) or
    ``mlp`` (PPO only: alphazero's network is the slots network with a value head)."""
    net_arch: list[int] = dataclasses.field(default_factory=lambda: [32])
    """``mlp``: the hidden layer sizes of the policy and value networks (1 to 8 layers); ``slots``: ``[width]``.
    Sizes 1 to 4096."""
    total_steps: Steps = 1_500_000
    """Learner decisions to train for (each game step of the learner is one; opponents' moves do not count;
    alphazero: searched self-play positions)."""
    num_games: Games = 64
    """Games played side by side in one process (rllib: in each env runner, one batched forward pass per step;
    alphazero: games searched side by side, in each worker)."""
    eval_every: Steps = 250_000
    """Learner steps between two periodic evaluations (besides ``early_evals``, and the last step's, which ends the
    curves; the final table is played after it)."""
    early_evals: list[int] = dataclasses.field(default_factory=lambda: list(EARLY_EVALS))
    """Learner steps of the evaluations before the periodic ones take over: 0 evaluates the untrained network
    before training starts, and the doubling steps after it catch the early learning, when the scores move
    fastest. Each falls, like the periodic ones, at the first step at or past it; steps >= 0 and <= 10,000,000,000
    in increasing order, [] for none. A resumed run evaluates only at steps past its checkpoint's."""
    eval_games: Games = 200
    """Games against each evaluation opponent, half in each seat, in each evaluation during training."""
    eval_opponents: list[str] = dataclasses.field(default_factory=lambda: ["random", "greedy", "minimax:depth=2"])
    """Agent specs the learner is evaluated against (deterministic play, both seats); at least one."""
    final_eval_games: Games = 400
    """Games against each evaluation opponent for the final table, with the final checkpoint."""
    grade_positions: Annotated[int, Range(0, MAX_GRADE_POSITIONS)] = 200
    """Positions on which every evaluation also grades the learner with the exact solver (``quarto grade``):
    the share of its decisions that lose value under perfect play, logged under ``eval/grade/``. The positions
    (at most 10 empty squares, from seeded random and greedy games) are sampled and solved once. 0: off. Not
    read by the rllib backend."""
    sample_games: Annotated[int, Range(0, MAX_SAMPLE_GAMES)] = 0
    """Games of every evaluation shown move by move in TensorBoard, at the evaluation's step: the first games of the
    learner (its most likely action, or its search) against the last of ``eval_opponents``, the strongest as the
    configs list them, from the evaluation's seeded openings, so the same games recur all through the run. Under
    Text, ``games/sample_<n>`` lists the moves (in words and in position notation), each of the learner's
    decisions marked by the exact solver -- kept, won->drawn, won->lost or drawn->lost -- where the solver is
    fast (at most 10 empty squares, or where the rules' opening book values the position) and "not graded"
    elsewhere; under Images, ``games/sample_<n>/first_mistake`` shows the position of the learner's first
    value-losing decision (the final position when it made none). 0 to 16, at most ``eval_games``; 0: off."""
    eval_opening_plies: Annotated[int, Range(0, MAX_OPENING_PLIES)] = DEFAULT_OPENING_PLIES
    """Random actions that start every evaluation game and the final table's, each opening shared by a pair of
    games with the seats swapped (0 to 7; at most three pieces placed, so no opening decides a game); the default
    is ``quarto tournament``'s. 0: from the empty board, where a deterministic learner and opponent (argmax
    against minimax) replay the same two games however many are counted."""
    checkpoint_every: Steps = 250_000
    """Learner steps between two checkpoints; a resumed run loses at most this many."""
    torch_threads: Annotated[int, Range(1, 256)] = 1
    """CPU threads for torch (1 is fastest for these small networks: more threads fight over 2 cores)."""
    device: str = DEFAULT_DEVICE
    """Where the learner's network trains: ``cpu``, ``cuda`` (refused where torch sees no GPU) or ``auto`` (cuda
    when torch sees one, else cpu). Read by the sb3 backend and by alphazero (its network and search evaluator);
    the rllib backend refuses any but cpu (Ray places its learner and runners). The periodic evaluations play
    the learner there; the frozen snapshots and the final table's reloaded checkpoint play on the CPU.
    Checkpoints are device-free: a run may resume on another device, and this field may change on
    ``--resume``. With ``backend: jax`` it is JAX's device: ``cpu``, ``auto`` (JAX's default, a GPU where a GPU
    build of jax sees one) or ``cuda`` (refused where JAX sees no GPU); its evaluations run on the CPU."""
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
            check_types(part, prefix)
        if not self.backend and self.algorithm in ALGORITHM_BACKENDS:
            self.backend = ALGORITHM_BACKENDS[self.algorithm][0]
        _check_values(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as written to ``config.yaml`` and recorded in a checkpoint's ``quarto.json``: the common
        fields -- the variant as the keywords of ``Variant.make`` that differ from standard Quarto's, the
        observation kind by name -- then each section as a mapping of its fields."""
        data = {name: copy.deepcopy(getattr(self, name)) for name in COMMON_FIELDS}
        data.update(variant=variant_keywords(self.variant), observation=self.observation.name)
        return data | {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}


SECTIONS: dict[str, type] = {"ppo": PPOConfig, "alphazero": AlphaZeroConfig, "rllib": RLlibConfig}
"""Each section of a config by its key: the dataclass of its fields."""
SECTION_FIELDS = {section: tuple(f.name for f in dataclasses.fields(kind)) for section, kind in SECTIONS.items()}
"""The fields of each section, in order."""
COMMON_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in SECTIONS)
"""The common fields: the top level of a config."""


def variant_keywords(variant: Variant) -> dict[str, Any]:
    """``variant`` as the keywords of ``Variant.make`` that differ from standard Quarto's (``{}`` for it): the
    form a config gives it in."""
    standard = STANDARD.to_dict()
    return {key: value for key, value in variant.to_dict().items() if value != standard[key]}


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


# ---------------------------------------------------------------------------------------------------------
# The schema described: --help-config, TensorBoard's config table
# ---------------------------------------------------------------------------------------------------------
def describe_fields() -> str:
    """Every field with its type, default, range and documentation, for ``--help-config``: the common fields,
    then each section's."""
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
    hints, docs, ranges = typing.get_type_hints(kind), field_docs(kind), field_ranges(kind)
    fields = [
        f"{_heading(prefix + name, hints[name], default, ranges.get(name))}:\n    {docs[name]}"
        for name, default in defaults.items()
    ]
    return "\n".join([title, *([spelling] if spelling else []), "=" * min(len(title), 110), *fields])


def _heading(name: str, hint: Any, default: Any, allowed: Range | None) -> str:
    """``seed (int, default 0, range >= 0 and <= 4,294,967,295, fixed on --resume)``: a field's facts."""
    signs = {"minimum": ">=", "above": ">", "maximum": "<="}
    bounds = [
        f"{signs[kind]} {int(v):,}" if v == int(v) else f"{signs[kind]} {v:g}"
        for kind, v in (allowed.bounds() if allowed else {}).items()
    ]
    facts = [_YAML_TYPES.get(hint) or type_name(hint), f"default {default!r}"]
    facts += [f"range {' and '.join(bounds)}"] if bounds else []
    facts += ["fixed on --resume"] if name in FIXED_ON_RESUME else []
    return f"{name} ({', '.join(facts)})"


_YAML_TYPES = {Variant: "dict[str, Any]", ObservationKind: "str"}
"""The type a config gives a field in, where the config holds it resolved."""


def config_table(config: TrainConfig) -> str:
    """The config as a Markdown table, for TensorBoard's text tab: the common fields, then each section's as
    ``SECTION.FIELD``."""
    data = config.to_dict()
    rows = [[key, str(value)] for key, value in data.items() if key not in SECTIONS]
    rows += [[f"{section}.{key}", str(value)] for section in SECTIONS for key, value in data[section].items()]
    return markdown_table(["field", "value"], rows)


# ---------------------------------------------------------------------------------------------------------
# The checks of a config's values
# ---------------------------------------------------------------------------------------------------------
def _resolved_variant(value: Any) -> Variant:
    """The rule variant a config's ``variant`` names (:func:`quarto_env.core.checked_variant`)."""
    require(isinstance(value, dict | Variant), "variant", "must be dict[str, Any], the keywords of Variant.make", value)
    try:
        return checked_variant(value)
    except (QuartoTypeError, RulesError) as exc:
        raise ConfigError(f"config field {one_line(exc)}") from exc


def _resolved_observation(value: Any) -> ObservationKind:
    """The observation kind a config's ``observation`` names (:func:`quarto_env.observation.observation_kind`)."""
    try:
        return observation_kind(value)
    except ValueError as exc:
        raise ConfigError(f"config field observation: {exc}") from None


def _parts(config: TrainConfig) -> list[tuple[str, Any]]:
    """The config and its sections, each with the prefix of its fields' names: ``("", config)``,
    ``("ppo.", config.ppo)``..."""
    return [("", config)] + [(f"{section}.", getattr(config, section)) for section in SECTIONS]


def _check_values(c: TrainConfig) -> None:
    for prefix, part in _parts(c):
        check_ranges(part, prefix)
    _check_name(c.name)
    _check_choices(c)
    try:
        check_network(c.policy, c.net_arch)
    except ValueError as exc:
        raise ConfigError(f"config field {exc}") from None
    require(
        all(0 <= step <= MAX_STEPS for step in c.early_evals) and c.early_evals == sorted(set(c.early_evals)),
        "early_evals",
        f"must list learner steps >= 0 in increasing order, e.g. [0, 16384, 32768], or [] for none (each <= "
        f"{MAX_STEPS})",
        c.early_evals,
    )
    if c.backend == "jax":  # JAX places its arrays itself: torch's view of the GPUs does not apply
        try:
            check_device_name(c.device)
        except ValueError as exc:
            raise ConfigError(f"config field device: {exc}") from None
        _check_jax(c)
    else:
        _check_device(c.device)
    _check_combinations(c)
    _check_opponents(c)


def _check_device(device: str) -> None:
    """A device by name; ``cuda`` only where torch sees a GPU (the one check that loads torch: a config that asks
    for a GPU trains with it)."""
    try:
        check_device_name(device)
        if device == "cuda":
            from agents.networks.policy_value import resolve_device

            resolve_device(device)
    except ValueError as exc:
        raise ConfigError(f"config field device: {exc}") from None


def _check_choices(c: TrainConfig) -> None:
    """Every field that names one of a few choices names one of them."""
    choices = [
        ("algorithm", c.algorithm, ALGORITHMS),
        ("backend", c.backend, ALGORITHM_BACKENDS.get(c.algorithm, ())),
        ("policy", c.policy, POLICY_KINDS),
        ("ppo.lr_schedule", c.ppo.lr_schedule, LR_SCHEDULES),
        ("alphazero.network_design", c.alphazero.network_design, NETWORK_DESIGNS),
        ("alphazero.leaf_evaluation", c.alphazero.leaf_evaluation, EVALUATION_PATHS),
        ("alphazero.root", c.alphazero.root, search.ROOTS),
        ("alphazero.policy_target", c.alphazero.policy_target, search.POLICY_TARGETS),
    ]
    for field, value, allowed in choices:
        within = f" with algorithm {c.algorithm}" if field == "backend" else ""
        require(value in allowed, field, f"must be one of {tuple(allowed)}{within}", value)


def _check_combinations(c: TrainConfig) -> None:
    """The fields that depend on the algorithm and the backend fit them."""
    require(
        c.algorithm != "alphazero" or c.policy == "slots",
        "policy",
        "must be slots with algorithm alphazero (its network is the slots network with a value head)",
        c.policy,
    )
    require(
        c.backend != "rllib" or c.device == DEFAULT_DEVICE,
        "device",
        f"must be {DEFAULT_DEVICE} with backend rllib (Ray places RLlib's learner and runners, not this field)",
        c.device,
    )
    require(
        c.alphazero.workers == 0 or c.algorithm == "alphazero",
        "alphazero.workers",
        "must be 0 with algorithm ppo (self-play workers are alphazero's; rllib's processes are num_env_runners)",
        c.alphazero.workers,
    )
    require(
        c.sample_games <= c.eval_games,
        "sample_games",
        f"must be <= eval_games = {c.eval_games} (the sample games are the first games of an evaluation)",
        c.sample_games,
    )
    if c.algorithm == "ppo":
        _check_rollout(c)
    else:
        needs_onnx = c.alphazero.leaf_evaluation == "onnx" and not onnx_available()
        require(
            not needs_onnx, "alphazero.leaf_evaluation", "needs the onnx extra: pip install 'quarto-env[onnx]'", "onnx"
        )
        buffer = c.alphazero.buffer_size
        require(
            c.alphazero.batch_size <= buffer,
            "alphazero.batch_size",
            f"must be <= alphazero.buffer_size = {buffer}",
            c.alphazero.batch_size,
        )
        _check_unused_alphazero(c.alphazero)


def _check_unused_alphazero(settings: AlphaZeroConfig) -> None:
    """An ``alphazero`` option that the rest of the section leaves unused keeps its default: a value set there
    would be read by nothing, and a run that seems to try it would not."""
    defaults = AlphaZeroConfig()
    for field, unused, why in (
        ("gumbel_actions", settings.root != "gumbel", "only with root gumbel (the PUCT root considers every action)"),
        ("cheap_sims", settings.full_search_share == 1, "only with full_search_share below 1 (no move is cheap)"),
        ("broadcast_every", settings.workers == 0, "only with workers (no weights are sent without them)"),
    ):
        default = getattr(defaults, field)
        require(
            not unused or getattr(settings, field) == default,
            f"alphazero.{field}",
            f"is used {why}; leave it at {default}",
            getattr(settings, field),
        )


JAX_FIXED: dict[str, tuple[Any, str]] = {
    "network_design": ("slots", "its network is the slots network in equinox"),
    "leaf_evaluation": ("fast", "its network runs in JAX"),
    "full_search_share": (1.0, "every position of its jitted self-play is searched alike"),
    "exact_outcome_empties": (0, "the solver runs on the CPU, outside the jitted iteration"),
    "workers": (0, "its self-play is batched on one device"),
    "augment": (False, "the symmetries are not applied on the device"),
}
"""The ``alphazero`` options that mean nothing to ``backend: jax``, each with the one value it takes and why."""


def _check_jax(c: TrainConfig) -> None:
    """``backend: jax`` takes the ``alphazero`` options that have a meaning in its jitted self-play."""
    for field, (allowed, why) in JAX_FIXED.items():
        value = getattr(c.alphazero, field)
        require(value == allowed, f"alphazero.{field}", f"must be {allowed!r} with backend jax ({why})", value)
    rollout = c.num_games * c.alphazero.rollout_steps
    require(
        c.alphazero.buffer_size >= rollout,
        "alphazero.buffer_size",
        f"must be >= num_games * alphazero.rollout_steps = {rollout} with backend jax (an iteration stores them at "
        "once)",
        c.alphazero.buffer_size,
    )


def _check_name(name: str) -> None:
    require(
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
    require(rollout <= MAX_ROLLOUT, "ppo.n_steps", f"must keep num_games * ppo.n_steps <= {MAX_ROLLOUT}", n_steps)
    require(batch_size <= rollout, "ppo.batch_size", f"must be <= num_games * ppo.n_steps = {rollout}", batch_size)
    require(
        rollout % batch_size != 1,
        "ppo.batch_size",
        f"must not leave a last minibatch of one step (num_games * ppo.n_steps = {rollout} leaves {rollout} % "
        f"ppo.batch_size = 1; its advantages, normalised by their spread, would be NaN)",
        batch_size,
    )


def _check_opponents(c: TrainConfig) -> None:
    for spec, weight in c.ppo.opponents.items():
        check_number(weight, f"ppo.opponents.{spec}", minimum=0)
    total = sum(c.ppo.opponents.values())
    require(0 < total < math.inf, "ppo.opponents", "must give weights with a positive, finite sum", c.ppo.opponents)
    require(len(c.eval_opponents) >= 1, "eval_opponents", "must name at least one agent spec", c.eval_opponents)
    for field, spec in _agent_specs(c):
        try:
            parse_spec(spec)
        except SpecError as exc:
            raise ConfigError(f"config field {field}: {one_line(exc)}") from exc


def _agent_specs(c: TrainConfig) -> list[tuple[str, str]]:
    """Every agent spec of the config, with its field: the opponents (but ``snapshots``) and eval opponents."""
    opponents = [("ppo.opponents", spec) for spec in c.ppo.opponents if spec != SNAPSHOTS]
    return opponents + [("eval_opponents", spec) for spec in c.eval_opponents]
