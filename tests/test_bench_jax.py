"""``quarto bench jax`` and ``quarto_env.jax`` under pgx's own checks: the move-for-move check over every variant
(and that it can fail), the speed table, the device check's small run, pgx's API validators in a loop of our own
(``pgx.api_test`` itself asserts the env id is pgx's and draws its pictures), ``pgx.experimental.auto_reset``,
and the refusals. No test asserts on wall time; the tests marked ``jax`` skip without the extra."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest

from experiments import cli
from experiments.bench import jax as bench_jax
from experiments.bench.jax_check import FIELDS, VARIANTS
from quarto_env.core import FIELD_AVAILABLE, FIELD_OCCUPIED

CHECK_GAMES = 30
"""Games per variant in the tests' check, 210 in all (the goal, 100,000 a variant, is the command's to run)."""
API_GAMES = 3
"""Games per variant of the API loop, single and batched."""


def _table_rows(printed: str) -> dict[str, list[str]]:
    """The check table's rows by variant: the cells after the name."""
    rows = {}
    for line in printed.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] in VARIANTS:
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.jax
@pytest.mark.slow
def test_the_check_finds_every_variant_equal_to_the_compiled_core(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_jax.main(["--check", str(CHECK_GAMES), "--batch", str(CHECK_GAMES)]) == 0
    printed = capsys.readouterr().out
    rows = _table_rows(printed)
    assert list(rows) == list(VARIANTS)
    for name, (games, steps, *mismatches, _seconds) in rows.items():
        assert int(games) == CHECK_GAMES and int(steps.replace(",", "")) >= 8 * CHECK_GAMES, name
        assert mismatches == ["0"] * len(FIELDS), (name, mismatches)
    assert "0 mismatches in" in printed


@pytest.mark.jax
def test_the_check_counts_a_broken_rule(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A JAX core that never sees a win must be caught: games the compiled core ends go on here."""
    import jax.numpy as jnp

    from quarto_env.jax import rules

    monkeypatch.setattr(rules, "winning_groups_through", lambda *position: jnp.int32(0))
    assert bench_jax.main(["--check", "20", "--batch", "20", "--variants", "standard"]) == 1
    printed = capsys.readouterr().out
    mismatches = _table_rows(printed)["standard"][2:-1]  # after games and steps, before seconds
    counted = dict(zip(FIELDS, map(int, mismatches), strict=True))
    assert counted["end"] > 0 and counted["rewards"] > 0, counted
    assert "differs from the compiled core" in printed


@pytest.mark.jax
def test_the_speed_bench_prints_its_table_with_ratios_to_connect_four(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "jax.json"
    argv = ["--batches", "4", "--observations", "tactical", "--seconds", "0.01", "--rounds", "1", "--out", str(out)]
    assert bench_jax.main(argv) == 0
    printed = capsys.readouterr().out
    assert re.search(r"device \S+ \(", printed) and "CPU " in printed
    for path in ("pgx connect_four", "pgx tic_tac_toe", "quarto_env.jax tactical", "VectorQuarto tactical"):
        assert re.search(rf"^{re.escape(path)}\s+[\d,]+ \(\d+\.\d\d\)$", printed, re.MULTILINE), path
    assert "headline: quarto_env.jax tactical / pgx connect_four:" in printed
    record = json.loads(out.read_text())
    ratios = record["results"]["ratio_to_pgx connect_four"]
    assert ratios["pgx connect_four"]["4"] == 1.0 and ratios["quarto_env.jax tactical"]["4"] > 0
    assert record["command"] == "quarto bench jax " + " ".join(argv)
    assert record["config"]["device"] and record["config"]["cpu_model"]


@pytest.mark.jax
def test_the_device_check_runs_small_on_a_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import jax

    from experiments.training.shipped_configs import DEFAULT_CONFIG

    if not (DEFAULT_CONFIG.parent / bench_jax.DEVICE_CHECK_CONFIG).is_file():  # the CPU config, till the GPU one is
        monkeypatch.setattr(bench_jax, "DEVICE_CHECK_CONFIG", "alphazero_jax.yaml")
    out = tmp_path / "device.json"
    argv = ["--device-check", "--out", str(out)] + ([] if jax.default_backend() == "cpu" else ["--small"])
    assert bench_jax.main(argv) == 0
    printed = capsys.readouterr().out
    assert "(small size)" in printed and "device check:" in printed
    assert re.search(r"^quarto_env\.jax tactical\s+[\d,]+ \(", printed, re.MULTILINE)
    assert re.search(r"^AlphaZero on JAX: [\d,]+ positions/s", printed, re.MULTILINE), printed
    config = json.loads(out.read_text())["config"]
    assert config["small"] is True and config["alphazero"]["positions_per_second"] > 0


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--batches", "0"], "--batches"),
        (["--batches", "65537"], "--batches"),
        (["--check", "-1"], "--check"),
        (["--check", "0"], "--check"),
        (["--check", "3", "--batch", "0"], "--batch"),
        (["--observations", "none"], "--observations"),
        (["--seconds", "0"], "--seconds"),
        (["--small"], "--small goes with --device-check"),
        (["--batch", "8"], "--batch goes with --check"),
        (["--check", "3", "--batches", "8"], "--batches goes with the speed bench"),
        (["--check", "3", "--device-check"], "two modes"),
        (["--check", "3", "--out", "x.json"], "--out goes with"),
        (["--variants", "nonsense", "--check", "3"], "--variants"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench_jax.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("quarto bench jax: ") and says in err, err


def test_without_the_extra_it_names_it_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from quarto_env import extras

    monkeypatch.setattr(extras, "missing_module", lambda extra, modules=(): "jax" if extra == "jax" else None)
    assert cli.main(["bench", "jax", "--batches", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "jax" in err and "pip install -e '.[jax]'" in err, err


# ---------------------------------------------------------------------------------------------------------
# pgx's API checks, with the env-id assertion bypassed
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pgx_validators() -> Iterator[Any]:
    """``pgx._src.api_test`` with its ``get_args`` answering pgx's env ids plus ``"quarto"``: ``_validate_state``
    asserts ``state.env_id in get_args(EnvId)``, which no game from outside pgx can pass; the rest is pgx's own."""
    pytest.importorskip("pgx")
    from pgx._src import api_test
    from pgx.core import EnvId

    import quarto_env.jax

    def env_ids(literal: Any) -> tuple[Any, ...]:
        ids = get_args(literal)
        return (*ids, quarto_env.jax.ENV_ID) if literal is EnvId else ids

    saved = api_test.get_args
    api_test.get_args = env_ids
    yield api_test
    api_test.get_args = saved


def _validate(api_test: Any, state: Any, at_init: bool) -> None:
    """pgx's validators on one state (unbatched), as ``pgx.api_test_single`` runs them."""
    api_test._validate_state(state)
    api_test._validate_current_player(state)
    api_test._validate_legal_actions(state)
    if at_init:
        api_test._validate_init_reward(state)
        assert state.legal_action_mask.sum() != 0 and state._step_count == 0


@pytest.mark.jax
@pytest.mark.parametrize("name", list(VARIANTS))
def test_pgx_api_validators_pass_single_and_batched(name: str, pgx_validators: Any) -> None:
    import jax
    import jax.numpy as jnp

    import quarto_env.jax

    env = quarto_env.jax.env(observation="tactical" if name == "standard" else "raw", **VARIANTS[name])

    def random_legal(key: jax.Array, mask: jax.Array) -> jax.Array:
        # pgx's act_randomly draws along axis 1, which a single (1-d) mask has not under jax 0.10
        return jax.random.categorical(key, jnp.log(mask.astype(jnp.float32)), axis=-1).astype(jnp.int32)

    assert env.id == quarto_env.jax.ENV_ID and env.num_players == 2
    init, step, draw = jax.jit(env.init), jax.jit(env.step), jax.jit(random_legal)
    key = jax.random.PRNGKey(849020)
    for _ in range(API_GAMES):  # pgx's api_test_single, in our loop
        key, init_key = jax.random.split(key)
        state = init(init_key)
        assert state.env_id == env.id
        _validate(pgx_validators, state, at_init=True)
        steps = 0
        while not state.terminated:
            key, act_key, step_key = jax.random.split(key, 3)
            state = step(state, draw(act_key, state.legal_action_mask), step_key)
            steps += 1
            assert state._step_count == steps
            _validate(pgx_validators, state, at_init=False)
        ended = step(state, jnp.int32(0), key)  # a step after the end: nothing changes, no reward
        assert (ended.rewards == 0).all() and ended.terminated

    batch = 4  # pgx's api_test_batch, in our loop, every state's games validated one by one
    init, step = jax.jit(jax.vmap(env.init)), jax.jit(jax.vmap(env.step))
    for _ in range(API_GAMES):
        key, init_key = jax.random.split(key)
        state = init(jax.random.split(init_key, batch))
        at_init = True
        while not state.terminated.all():
            for game in range(batch):
                _validate(pgx_validators, jax.tree.map(lambda a, g=game: a[g], state), at_init)
            key, act_key, step_key = jax.random.split(key, 3)
            state = step(state, draw(act_key, state.legal_action_mask), jax.random.split(step_key, batch))
            at_init = False


@pytest.mark.jax
def test_it_runs_under_pgx_auto_reset() -> None:
    import jax
    from pgx.experimental import auto_reset

    import quarto_env.jax

    env = quarto_env.jax.env()
    batch = 16
    step = jax.jit(jax.vmap(auto_reset(env.step, env.init)))
    state = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.PRNGKey(0), batch))
    rng = np.random.default_rng(0)
    key = jax.random.PRNGKey(1)
    ended_before = np.zeros(batch, dtype=bool)
    games_ended = 0
    for _ in range(60):
        mask = np.asarray(state.legal_action_mask)
        assert mask.any(axis=1).all()  # a game in play always has a move; an ended one was reset
        actions = np.argmax(rng.random(mask.shape) * mask, axis=1).astype(np.int32)
        key, step_key = jax.random.split(key)
        state = step(state, actions, jax.random.split(step_key, batch))
        ended = np.asarray(state.terminated)
        rewards = np.asarray(state.rewards)
        assert (rewards[~ended] == 0).all()  # rewards only where a game ended (and none the step after)
        assert (rewards.sum(axis=1) == 0).all() and np.isin(rewards, (-1.0, 0.0, 1.0)).all()
        assert (np.asarray(state._step_count)[ended] == 0).all()  # ended games come back as new ones
        rows, _ = env.to_positions(state)
        assert (rows[ended, FIELD_OCCUPIED] == 0).all() and (rows[ended, FIELD_AVAILABLE] == 0xFFFF).all()
        assert not (ended & ended_before).any()
        ended_before = ended
        games_ended += int(ended.sum())
    assert games_ended >= batch  # 60 steps hold two games of each of 16 at least, about
