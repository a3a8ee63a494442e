"""quarto_env.jax: the rules in pure JAX as a pgx.Env, against the rules core and positions whose answer is known.

The move-for-move replay against the compiled core (every variant, thousands of games) is tests/test_bench_jax.py;
here: scripted games, every observation kind on random core positions, the conversions, illegal actions, the
pgx step contract and bad input."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.jax
jax = pytest.importorskip("jax")
pytest.importorskip("pgx")

import jax.numpy as jnp  # noqa: E402

import quarto_env.jax  # noqa: E402
from quarto_env.core import State, Variant, legal_actions, position_array, step  # noqa: E402
from quarto_env.errors import ActionTypeError, QuartoTypeError, QuartoValueError, RulesError  # noqa: E402
from quarto_env.observation import OBSERVATION_KINDS, observe  # noqa: E402

VARIANT_FLAGS = [
    {},
    {"squares": True},
    {"attributes": "colour"},
    {"attributes": 3, "squares": True, "declaration": True},
    {"declaration": True, "false_declaration": "penalty"},
]


def random_positions(variant: Variant, seed: int, games: int) -> list[State]:
    """Every position of ``games`` random games under ``variant`` (the rules core's own step)."""
    rng = np.random.default_rng(seed)
    positions = []
    for _ in range(games):
        state = State()
        while not state.over:
            positions.append(state)
            actions = legal_actions(variant, state)
            state = step(variant, state, actions[rng.integers(len(actions))])
        positions.append(state)
    return positions


def play(env: quarto_env.jax.QuartoEnv, state: quarto_env.jax.State, *actions: int) -> quarto_env.jax.State:
    for action in actions:
        state = env.step(state, jnp.int32(action))
    return state


@pytest.fixture(scope="module")
def standard() -> quarto_env.jax.QuartoEnv:
    return quarto_env.jax.env(first_player=0)


@pytest.mark.parametrize(
    ("kind", "flags"), [(kind, VARIANT_FLAGS[i % len(VARIANT_FLAGS)]) for i, kind in enumerate(OBSERVATION_KINDS)]
)
def test_the_planes_of_every_kind_are_the_cores(kind: str, flags: dict) -> None:
    """A batch of core positions through from_positions: the planes equal quarto_env.observation.observe's (each
    kind under one variant here; tempo, which holds every kind's planes, under every variant in the replay)."""
    env = quarto_env.jax.env(observation=kind, **flags)
    positions = random_positions(env.variant, seed=len(kind), games=12)
    state = env.from_positions(position_array(positions))
    planes = np.asarray(state.observation)
    assert planes.shape == (len(positions), *OBSERVATION_KINDS[kind].shape) and planes.dtype == bool
    for i, position in enumerate(positions):
        np.testing.assert_array_equal(planes[i], observe(env.variant, position, kind), err_msg=str(position))


@pytest.mark.parametrize("flags", VARIANT_FLAGS, ids=str)
def test_positions_go_to_jax_and_back_unchanged(flags: dict) -> None:
    env = quarto_env.jax.env(**flags)
    rows = position_array(random_positions(env.variant, seed=1, games=4))
    seats = np.arange(len(rows)) % 2
    state = env.from_positions(rows, seats)
    back, back_seats = env.to_positions(state)
    np.testing.assert_array_equal(back, rows)
    np.testing.assert_array_equal(back_seats, seats)
    # The seat to act follows the seat of the core's player 0; an ended game's mask is all True, as pgx's.
    np.testing.assert_array_equal(np.asarray(state.current_player), rows[:, 4] ^ seats)
    over = rows[:, 7] == 1
    assert np.asarray(state.legal_action_mask)[over].all()


def test_a_turn_is_a_placement_then_a_give_by_the_same_seat(standard: quarto_env.jax.QuartoEnv) -> None:
    state = standard.init(jax.random.key(0))
    assert int(state.current_player) == 0 and int(state._hand) == -1  # the first action is a give
    state = play(standard, state, 5)  # player_0 gives piece 5
    assert int(state.current_player) == 1 and int(state._hand) == 5
    assert np.asarray(state.legal_action_mask).all()  # every square is empty
    state = play(standard, state, 0)  # player_1 places it on square 0 ...
    assert int(state.current_player) == 1 and int(state._hand) == -1
    assert not np.asarray(state.legal_action_mask)[5]  # ... and gives next: piece 5 is gone
    state = play(standard, state, 7)
    assert int(state.current_player) == 0


def test_a_row_of_tall_pieces_wins_for_the_placer() -> None:
    """Tall pieces 1, 3, 5, 7 on squares 0-3: the fourth placement wins for the seat that placed it."""
    env = quarto_env.jax.env(first_player=1)  # player_1 gives first: the core's player 0 is seat 1
    state = env.init(jax.random.key(0))
    state = play(env, state, 1, 0, 3, 1, 5, 2, 7)  # give 1, place on 0, give 3, place on 1, ... give 7
    placer = int(state.current_player)
    state = play(env, state, 3)
    assert bool(state.terminated)
    assert np.asarray(state.rewards).tolist() == ([1.0, -1.0] if placer == 0 else [-1.0, 1.0])
    assert np.asarray(state.legal_action_mask).all()  # pgx: every action legal once the game has ended
    again = play(env, state, 0)  # a step after the end changes nothing and rewards nothing
    assert np.asarray(again.rewards).tolist() == [0.0, 0.0] and int(again._step_count) == int(state._step_count)
    np.testing.assert_array_equal(np.asarray(again._lanes), np.asarray(state._lanes))


def test_without_the_attribute_counted_the_same_row_does_not_win() -> None:
    env = quarto_env.jax.env(attributes="colour", first_player=0)  # pieces 1, 3, 5, 7: light, dark, light, dark
    state = play(env, env.init(jax.random.key(0)), 1, 0, 3, 1, 5, 2, 7, 3)
    assert not bool(state.terminated) and np.asarray(state.rewards).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("action", [5, 16, 99, -1])
def test_an_illegal_action_ends_the_game_against_the_seat_that_took_it(
    standard: quarto_env.jax.QuartoEnv, action: int
) -> None:
    """Masked (piece 5, already given) or outside the action space: -1 for the actor, +1 for the other, and the
    position as it was (pgx's indexing would have clamped 99 to a legal action)."""
    state = play(standard, standard.init(jax.random.key(0)), 5, 0)  # player_1 to give; piece 5 is on the board
    after = standard.step(state, jnp.int32(action))
    assert bool(after.terminated)
    assert np.asarray(after.rewards).tolist() == [1.0, -1.0]
    assert int(after._occupied) == int(state._occupied) and int(after._hand) == int(state._hand)
    assert int(after._available) == int(state._available)


def test_an_ignored_false_declaration_costs_the_penalty_and_masks_the_declaration() -> None:
    env = quarto_env.jax.env(declaration=True, false_declaration="penalty", false_declaration_penalty=-0.5,
                             first_player=1)  # fmt: skip
    state = env.init(jax.random.key(0))
    after = play(env, state, 16)
    assert not bool(after.terminated) and np.asarray(after.rewards).tolist() == [0.0, -0.5]
    assert int(after.current_player) == 1 and not bool(after.legal_action_mask[16])
    assert bool(play(env, after, 3).legal_action_mask[16])  # after a give it may declare again


def test_a_false_declaration_loses_under_the_lose_policy() -> None:
    env = quarto_env.jax.env(declaration=True, first_player=0)
    state = play(env, env.init(jax.random.key(0)), 16)
    assert bool(state.terminated) and np.asarray(state.rewards).tolist() == [-1.0, 1.0]


def test_a_random_first_player_draws_both_seats_and_a_fixed_one_keeps_its_seat() -> None:
    keys = jax.random.split(jax.random.key(3), 64)
    drawn = np.asarray(jax.vmap(quarto_env.jax.env().init)(keys).current_player)
    assert set(drawn.tolist()) == {0, 1}
    fixed = np.asarray(jax.vmap(quarto_env.jax.env(first_player="player_1").init)(keys).current_player)
    assert set(fixed.tolist()) == {1}


def test_jit_vmap_plays_whole_games_and_calls_nothing_on_the_host() -> None:
    env = quarto_env.jax.env(squares=True, declaration=True, false_declaration="penalty")
    init, step_batch = jax.jit(jax.vmap(env.init)), jax.jit(jax.vmap(env.step))
    state = init(jax.random.split(jax.random.key(1), 32))
    key = jax.random.key(2)
    for _ in range(70):  # every game ends within 65 actions
        key, subkey = jax.random.split(key)
        logits = jnp.log(state.legal_action_mask.astype(jnp.float32))
        state = step_batch(state, jax.random.categorical(subkey, logits).astype(jnp.int32))
    assert np.asarray(state.terminated).all()
    jaxpr = str(jax.make_jaxpr(jax.vmap(env.step))(state, jnp.zeros(32, jnp.int32)))
    assert "callback" not in jaxpr


@pytest.mark.parametrize(
    ("action", "error", "message"),
    [
        (1.0, ActionTypeError, r"^an action must be an integer 0-15 \(int32 under jit\), got float"),
        (jnp.float32(1), ActionTypeError, r"got float32$"),
        (True, ActionTypeError, r"got bool$"),
        (jnp.zeros(3, jnp.int32), QuartoValueError, r"^the action's shape \(3,\) is not the state's \(\); for a batch"),
    ],
)
def test_a_malformed_action_is_refused_in_one_line(
    standard: quarto_env.jax.QuartoEnv, action: object, error: type, message: str
) -> None:
    state = standard.init(jax.random.key(0))
    with pytest.raises(error, match=message) as raised:
        standard.step(state, action)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("actions", [0, 4, 16], ids=["one action", "one per game", "another count"])
def test_a_batched_state_stepped_without_vmap_says_to_vmap(standard: quarto_env.jax.QuartoEnv, actions: int) -> None:
    states = jax.vmap(standard.init)(jax.random.split(jax.random.key(0), 4))
    action = jnp.zeros(actions, jnp.int32) if actions else jnp.int32(0)
    with pytest.raises(QuartoValueError, match=r"holds a batch of shape \(4,\); for a batch, step with jax.vmap"):
        standard.step(states, action)


@pytest.mark.parametrize("action", [2**32 + 3, np.int64(2**32 + 3), np.array(2**32 + 3), np.uint64(2**63), -(2**40)])
def test_an_action_beyond_int32_is_illegal_not_wrapped(standard: quarto_env.jax.QuartoEnv, action: object) -> None:
    state = standard.init(jax.random.key(0))
    after = standard.step(state, action)  # type: ignore[arg-type]
    assert bool(after.terminated) and after.rewards[state.current_player] == -1.0  # not square 3, a legal give


def test_a_truncated_game_stays_truncated_and_unterminated_as_in_pgx(standard: quarto_env.jax.QuartoEnv) -> None:
    state = standard.init(jax.random.key(0))
    truncated = state.replace(truncated=jnp.bool_(True))  # type: ignore[attr-defined]
    after = standard.step(truncated, jnp.int32(1))
    assert bool(after.truncated) and not bool(after.terminated) and not after.rewards.any()
    assert (after.legal_action_mask == truncated.legal_action_mask).all() and after._step_count == state._step_count


@pytest.mark.parametrize(
    ("flags", "error", "message"),
    [
        ({"sqaures": True}, QuartoTypeError, r"^quarto_env.jax.env has no flag sqaures; its flags: attributes, "),
        ({"attributes": "weight"}, RulesError, r"^unknown attribute\(s\) \['weight'\]; allowed: height, colour"),
        ({"observation": "pixels"}, QuartoValueError, r"^unknown observation kind 'pixels'; allowed: raw, "),
        ({"false_declaration": "penalty"}, RulesError, r"needs declaration=True"),
    ],
)
def test_bad_flags_are_refused_as_the_aec_env_refuses_them(flags: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        quarto_env.jax.env(**flags)
    if "observation" not in flags:  # the AEC env says the same
        builtin = TypeError if issubclass(error, TypeError) else ValueError
        with pytest.raises(builtin):  # the AEC env's own wording differs, not the kind of error
            quarto_env.env(**flags)  # its builtin base: TypeError or ValueError


def test_from_positions_refuses_rows_of_the_wrong_width(standard: quarto_env.jax.QuartoEnv) -> None:
    with pytest.raises(QuartoValueError, match=r"^positions must have 8 fields in their last axis, got shape \(2, 7\)"):
        standard.from_positions(np.zeros((2, 7), dtype=np.int64))


def test_a_state_draws_through_its_env_and_shows_in_a_notebook_without_a_traceback() -> None:
    env = quarto_env.jax.env(squares=True)
    state = env.init(jax.random.key(0))
    for action in (3, 5, 7):  # give 3, place it on square 5, give 7
        state = env.step(state, jnp.int32(action))
    svg = env.svg(state)
    assert svg.startswith("<svg") and 'data-position=".....3.......... 7"' in svg and "2x2 blocks win" in svg
    assert state._repr_html_() is None  # pgx's drawing would raise for a game it does not know
    with pytest.raises(QuartoValueError, match=r"draw it with env.svg\(state\)$"):
        state.to_svg()
    with pytest.raises(QuartoValueError, match=r"write env.svg\(state\) to the file$"):
        state.save_svg("board.svg")
    batch = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 2))
    with pytest.raises(QuartoValueError, match=r"draws one game; this state holds a batch of shape \(2,\)$"):
        env.svg(batch)
