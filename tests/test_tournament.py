"""quarto tournament: reproducible whatever the number of jobs, seats balanced, outputs complete and
replayable, forfeits counted, bad input refused with a clear message."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from experiments import replay, tournament
from quarto_env.checks import atomic_write, atomic_write_text
from quarto_env.core import INITIAL_STATE, Variant, step
from quarto_env.notation import format_position

AGENTS = ["random", "greedy", "mcts:sims=30"]
TIMING_FIELDS = ("move_seconds",)
TIMING_COLUMNS = ("mean_move_seconds", "max_move_seconds")


def run(out: Path, *extra: str, agents: list[str] = AGENTS) -> Path:
    argv = [*agents, "--games", "4", "--seed", "7", "--bootstrap", "50", "--no-progress", "--out", str(out), *extra]
    assert tournament.main(argv) == 0
    return out


def games(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "games.jsonl").read_text().splitlines()]


def without_timing(rows: list[dict], fields: tuple[str, ...]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in fields} for row in rows]


def read_csv(path: Path) -> list[dict]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(tmp_path_factory.mktemp("serial"), "--jobs", "1")


def test_results_do_not_depend_on_the_number_of_jobs_and_rerun_gives_the_same_numbers(
    serial: Path, tmp_path: Path
) -> None:
    parallel = run(tmp_path / "parallel", "--jobs", "2")
    again = run(tmp_path / "again", "--jobs", "1")
    for other in (parallel, again):
        assert without_timing(games(other), TIMING_FIELDS) == without_timing(games(serial), TIMING_FIELDS)
        assert read_csv(other / "results.csv") == read_csv(serial / "results.csv")
        ratings = without_timing(read_csv(other / "ratings.csv"), TIMING_COLUMNS)
        assert ratings == without_timing(read_csv(serial / "ratings.csv"), TIMING_COLUMNS)
    assert without_timing(games(run(tmp_path / "seed8", "--jobs", "1", "--seed", "8")), TIMING_FIELDS) != (
        without_timing(games(serial), TIMING_FIELDS)
    )


def test_every_pair_plays_both_seatings_equally(serial: Path) -> None:
    seatings: dict[tuple[str, str], int] = {}
    for game in games(serial):
        seatings[tuple(game["seats"])] = seatings.get(tuple(game["seats"]), 0) + 1
    for i, a in enumerate(AGENTS):
        for b in AGENTS[i + 1 :]:
            assert seatings[(a, b)] == seatings[(b, a)] == 2


def test_output_folder_is_complete(serial: Path) -> None:
    expected = {"results.csv", "results.md", "ratings.csv", "ratings.md", "ratings.png", "games.jsonl"}
    assert expected | {"config.json", "command.txt"} <= {p.name for p in serial.iterdir()}
    assert (serial / "ratings.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = json.loads((serial / "config.json").read_text())
    assert config["seed"] == 7 and config["agents"] == AGENTS and config["anchor"] == "random"
    assert config["variant"] == Variant().to_dict()
    assert config["code"]["commit"] is None or len(config["code"]["commit"]) == 40  # None outside a git checkout
    assert (serial / "command.txt").read_text().startswith("quarto tournament random greedy mcts:sims=30 --games 4")
    pairs = read_csv(serial / "results.csv")
    assert [(p["a"], p["b"]) for p in pairs] == [(a, b) for i, a in enumerate(AGENTS) for b in AGENTS[i + 1 :]]
    for p in pairs:
        assert int(p["wins"]) + int(p["draws"]) + int(p["losses"]) == int(p["games"]) == 4
        assert float(p["low"]) <= float(p["score"]) <= float(p["high"])
    ratings = {r["name"]: r for r in read_csv(serial / "ratings.csv")}
    assert float(ratings["random"]["rating"]) == 0.0
    assert "| rank | agent |" in (serial / "ratings.md").read_text()


def test_records_replay_through_the_rules(serial: Path) -> None:
    for game in games(serial):
        variant = Variant.make(**game["variant"])
        state = INITIAL_STATE
        for action in game["opening"]:
            state = step(variant, state, action)
        for position, action in zip(game["positions"], game["actions"], strict=True):
            assert position == format_position(state)
            state = step(variant, state, action)
        assert state.over and state.winner == game["winner"]
        frames = list(replay.replay_frames(game))
        assert frames[-1][0] == state and len(frames) == 1 + len(game["opening"]) + len(game["actions"])


def test_both_seatings_share_each_random_opening(serial: Path) -> None:
    played = games(serial)
    assert all(len(g["opening"]) == tournament.DEFAULT_OPENING_PLIES for g in played)
    for first, second in zip(played[::2], played[1::2], strict=True):
        assert first["pair"] == second["pair"] and first["seats"] == second["seats"][::-1]
        assert first["opening"] == second["opening"]
    assert len({tuple(g["opening"]) for g in played}) > len(played) // 2 - 2  # openings vary between rounds


def test_vs_field_mode_and_a_variant(tmp_path: Path) -> None:
    out = run(
        tmp_path,
        "--jobs",
        "1",
        "--mode",
        "vs-field",
        "--field",
        "greedy",
        "--attributes",
        "colour,shape",
        "--squares",
        "--intervals",
        "hessian",
        agents=["random", "mcts:sims=20"],
    )
    ratings = {r["name"]: r for r in read_csv(out / "ratings.csv")}
    assert float(ratings["greedy"]["low"]) < float(ratings["greedy"]["rating"]) < float(ratings["greedy"]["high"])
    assert {tuple(sorted(g["seats"])) for g in games(out)} == {("greedy", "random"), ("greedy", "mcts:sims=20")}
    assert all(g["variant"]["attributes"] == ["colour", "shape"] and g["variant"]["squares"] for g in games(out))


def test_overrunning_the_time_limit_forfeits_and_is_counted(tmp_path: Path) -> None:
    # mcts:time=0.1 searches for 0.1 s per move, past the 0.025 s limit; random needs microseconds.
    out = run(tmp_path, "--jobs", "1", "--time-limit", "0.025", agents=["random", "mcts:time=0.1"])
    assert all(g["end"] == "forfeit" and g["seats"][g["winner"]] == "random" for g in games(out))
    ratings = {r["name"]: r for r in read_csv(out / "ratings.csv")}
    assert float(ratings["mcts:time=0.1"]["forfeits"]) == 4 and float(ratings["random"]["forfeits"]) == 0
    assert read_csv(out / "results.csv")[0]["forfeits_b"] == "4"


def test_tensorboard_logging(tmp_path: Path) -> None:
    out = run(tmp_path, "--jobs", "1", "--tensorboard", agents=["random", "greedy"])
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["random", "greedy", "--games", "3"], "--games must be an even number"),
        (["random", "alphazero"], "unknown agent kind 'alphazero'"),
        (["random", "random"], "agent spec(s) listed twice: random"),
        (["random", "--mode", "vs-field"], "--mode vs-field needs --field SPEC"),
        (["random", "greedy", "--anchor", "solver"], "--anchor 'solver' is not one of the agents"),
        (["random", "greedy", "--attributes", "size"], "unknown attribute(s) ['size']"),
        (["random", "greedy", "--time-limit", "0"], "--time-limit must be > 0"),
        (["random"], "at least two agents"),
        (["random", "greedy", "--opening-plies", "8"], "--opening-plies must be 0-7"),
        (["random", "ppo:/nowhere/best.zip"], "agent 'ppo:/nowhere/best.zip' cannot be built: checkpoint"),
        (["random", "greedy", "--seed", "-1"], "--seed must be >= 0"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        tournament.main([*argv, "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_schedule_seeds_games_from_seed_pair_and_round_only() -> None:
    jobs = tournament.schedule(3, "round-robin", 4, seed=1)
    assert len(jobs) == 12 and len({j.seed for j in jobs}) == 12
    assert [j.seats for j in jobs[:4]] == [(0, 1), (1, 0), (0, 1), (1, 0)]
    bigger = tournament.schedule(3, "round-robin", 6, seed=1)
    assert [j.seed for j in bigger if j.round < 4] == [j.seed for j in jobs]


def test_atomic_writes_leave_the_old_file_whole_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "results.csv"
    atomic_write_text(target, "old\n")

    def fail_halfway(temporary: Path) -> None:
        temporary.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail_halfway)
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["results.csv"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # the permissions of any new file, not private
