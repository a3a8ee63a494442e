"""quarto tournament: reproducible whatever the number of jobs, seats balanced, outputs complete and
replayable, forfeits counted, bad input refused with a clear message."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.storage.files import atomic_write, atomic_write_text
from agents.storage.integrity import sealed_json
from experiments.arena import replay, schedule, tournament
from experiments.arena.records import RECORD_FORMAT, RECORD_KIND
from quarto_env.core import INITIAL_STATE, Variant, step
from quarto_env.notation import format_position

AGENTS = ["random", "greedy", "mcts:sims=30"]
TIMING_FIELDS = ("move_seconds", "seal")  # a record's seal covers its timings too
TIMING_COLUMNS = ("mean_move_seconds", "max_move_seconds")
REPOSITORY = Path(__file__).resolve().parent.parent


def run(out: Path, *extra: str, agents: list[str] = AGENTS) -> Path:
    argv = [*agents, "--games", "4", "--seed", "7", "--bootstrap", "100", "--no-progress", "--out", str(out), *extra]
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
        (["random", "greedy", "--time-limit", "0"], "time-limit must be a finite number > 0 and <= 86400, got 0"),
        (["random", "greedy", "--time-limit", "nan"], "time-limit must be a finite number > 0 and <= 86400, got nan"),
        (["random", "greedy", "--time-limit", "inf"], "time-limit must be a finite number > 0 and <= 86400, got inf"),
        (["random"], "at least two agents"),
        (["random", "greedy", "--opening-plies", "8"], "opening-plies must be an integer >= 0 and <= 7, got 8"),
        (["random", "greedy", "--opening-plies", "-1"], "opening-plies must be an integer >= 0 and <= 7"),
        (["random", "ppo:/nowhere/best.zip"], "agent 'ppo:/nowhere/best.zip' cannot be built: checkpoint"),
        (["random", "greedy", "--seed", "-1"], "seed must be an integer >= 0 and <= 4294967295, got -1"),
        (["random", "greedy", "--seed", "4294967296"], "seed must be an integer >= 0 and <= 4294967295"),
        (["random", "greedy", "--seed", "1.5"], "seed must be an integer"),
        (["random", "greedy", "--games", "0"], "games must be an integer >= 2 and <= 100000, got 0"),
        (["random", "greedy", "--games", "1e9"], "games must be an integer >= 2 and <= 100000"),
        (["random", "greedy", "--games", "nan"], "games must be an integer"),
        (["random", "greedy", "--prior-draws", "nan"], "prior-draws must be a finite number > 0 and <= 100000, got n"),
        (["random", "greedy", "--prior-draws", "inf"], "prior-draws must be a finite number > 0 and <= 100000, got i"),
        (["random", "greedy", "--prior-draws", "-1"], "prior-draws must be a finite number > 0"),
        (["random", "greedy", "--bootstrap", "-1"], "bootstrap must be an integer >= 100 and <= 100000"),
        (["random", "greedy", "--bootstrap", "inf"], "bootstrap must be an integer"),
        (["random", "greedy", "--jobs", "0"], "jobs must be an integer >= 1 and <= 64, got 0"),
        (["random", "greedy", "--jobs", "nan"], "jobs must be an integer >= 1"),
        (["random", "minimax:time=nan"], "bad value 'nan' for time in spec 'minimax:time=nan': time must be a finite"),
        (["random", "solver:time=nan"], "bad value 'nan' for time in spec 'solver:time=nan'"),
        (["random", "minimax:time=inf"], "bad value 'inf' for time in spec 'minimax:time=inf'"),
        (["random", "mcts:time=inf"], "bad value 'inf' for time in spec 'mcts:time=inf'"),
        (["random", "mcts:sims=1e12"], "sims must be an integer >= 1 and <= 1000000"),
        (["random", "mcts:c=nan"], "c must be a finite number > 0"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        tournament.main([*argv, "--out", str(tmp_path)])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in error
    assert error.splitlines()[-1].startswith("quarto tournament: ")  # one line (after the usage for a syntax error)
    assert not list(tmp_path.iterdir())  # refused before anything is written


def test_a_nan_time_budget_is_refused_by_the_command_at_once(tmp_path: Path) -> None:
    # The command that hung before: minimax:time=nan never runs out of time, even under --time-limit.
    command = [sys.executable, "-m", "experiments.cli", "tournament", "random", "minimax:time=nan"]
    done = subprocess.run(
        [*command, "--time-limit", "2", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPOSITORY,
    )
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "quarto tournament: bad value 'nan' for time in spec 'minimax:time=nan': "
        "time must be a finite number > 0 and <= 86400, got nan"
    )


def test_a_ppo_spec_takes_options_after_its_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        tournament.main(["random", "ppo:/nowhere/best.zip,deterministic=false", "--out", str(tmp_path)])
    assert "checkpoint '/nowhere/best.zip' does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["file", "/dev/null", "under a file", "/proc/quarto-tournament"])
def test_an_out_that_cannot_be_a_folder_is_refused_before_any_game(
    where: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    out = {"file": tmp_path / "file", "under a file": tmp_path / "file" / "sub"}.get(where, Path(where))
    with pytest.raises(SystemExit) as exit_info:
        tournament.main(["random", "greedy", "--games", "2", "--no-progress", "--out", str(out)])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and captured.out == ""  # not one game played
    assert captured.err.splitlines()[-1].startswith(f"quarto tournament: --out {str(out)!r} ")


def test_jobs_above_the_core_count_warn_and_are_capped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    run(tmp_path / "out", "--jobs", "32", agents=["random", "greedy"])
    captured = capsys.readouterr()
    assert "quarto tournament: warning: --jobs 32 is more than the 1 cores of this machine; using 1" in captured.err
    assert "1 jobs" in captured.out and json.loads((tmp_path / "out" / "config.json").read_text())["jobs"] == 1


# ---------------------------------------------------------------------------------------------------------
# Nothing is lost: games saved as they end, --resume, and no silent overwrite
# ---------------------------------------------------------------------------------------------------------
def killed_copy(finished: Path, folder: Path, kept: int) -> Path:
    """A copy of a finished run as a kill would leave it: ``kept`` games, in the order parallel workers might
    end them, a last line cut short, and no results yet."""
    shutil.copytree(finished, folder)
    lines = (finished / "games.jsonl").read_text().splitlines(keepends=True)
    torn = lines[kept][: len(lines[kept]) // 2]
    (folder / "games.jsonl").write_text("".join(lines[kept - 1 :: -1]) + torn)
    for name in ("results.csv", "results.md", "ratings.csv", "ratings.md", "ratings.png"):
        (folder / name).unlink()
    (folder / ".ratings.csv.abc123.tmp.csv").write_text("half")  # an atomic write cut short
    return folder


def test_resume_after_a_kill_gives_the_games_and_results_of_an_uninterrupted_run(
    serial: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    resumed = killed_copy(serial, tmp_path / "killed", kept=5)
    assert tournament.main(["--resume", str(resumed), "--seed", "7", "--jobs", "1", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "dropped its last line, cut short when the run was stopped" in captured.err
    assert "5 of 12 games already played" in captured.out and "7 games between 3 agents" in captured.out
    assert without_timing(games(resumed), TIMING_FIELDS) == without_timing(games(serial), TIMING_FIELDS)
    assert read_csv(resumed / "results.csv") == read_csv(serial / "results.csv")
    ratings = without_timing(read_csv(resumed / "ratings.csv"), TIMING_COLUMNS)
    assert ratings == without_timing(read_csv(serial / "ratings.csv"), TIMING_COLUMNS)
    assert not list(resumed.glob(".*.tmp*"))  # the orphan temporary file is gone
    assert tournament.main(["--resume", str(resumed), "--no-progress"]) == 0  # a finished run: results again
    assert "12 of 12 games already played" in capsys.readouterr().out


def test_each_game_is_in_games_jsonl_as_soon_as_it_ends(tmp_path: Path) -> None:
    argv = ["random", "greedy", "--games", "4", "--jobs", "1", "--no-progress", "--out", str(tmp_path)]
    config, variant = tournament.tournament_config(
        tournament.build_parser(), tournament.build_parser().parse_args(argv)
    )
    jobs = schedule.schedule(2, "round-robin", 4, 0, variant, 4)
    seen = []

    def check_saved(game: schedule.PlayedGame) -> None:
        tournament.append_game(log, variant, game)
        seen.append(len((tmp_path / "games.jsonl").read_text().splitlines()))  # read back by another handle

    with (tmp_path / "games.jsonl").open("a") as log:
        tournament.play_all(config["agents"], jobs, variant, None, 1, False, check_saved)
    assert seen == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seed", "8"], "changes settings of the run: --seed 7 -> 8"),
        (["random", "greedy"], "the agents random greedy mcts:sims=30 -> random greedy"),
        (["--games", "6", "--squares"], "--games 4 -> 6; the rule variant (standard) -> (squares)"),
        (["--out", "elsewhere"], "writes into that folder; drop --out elsewhere"),
    ],
)
def test_resume_refuses_settings_that_change_the_run(
    extra: list[str], message: str, serial: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    resumed = killed_copy(serial, tmp_path / "killed", kept=3)
    with pytest.raises(SystemExit) as exit_info:
        tournament.main(["--resume", str(resumed), *extra])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err.splitlines()[-1]


def test_resume_refuses_what_is_not_an_interrupted_tournament(
    serial: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(folder: Path) -> str:
        with pytest.raises(SystemExit) as exit_info:
            tournament.main(["--resume", str(folder), "--no-progress"])
        assert exit_info.value.code == 2
        return capsys.readouterr().err.splitlines()[-1]

    assert "no such folder" in refused(tmp_path / "nowhere")
    (tmp_path / "a.zip").write_bytes(b"PK")
    assert "a file, not a tournament's folder" in refused(tmp_path / "a.zip")
    (tmp_path / "empty").mkdir()
    assert "no config.json there" in refused(tmp_path / "empty")
    other = killed_copy(serial, tmp_path / "other", kept=4)
    (other / "config.json").write_text('{"positions": 200}')
    assert "not that of a tournament" in refused(other)
    broken = killed_copy(serial, tmp_path / "broken", kept=4)
    lines = (broken / "games.jsonl").read_text().splitlines(keepends=True)
    (broken / "games.jsonl").write_text("".join([lines[0], "{not json\n", *lines[1:]]))
    assert "games.jsonl line 2: Expecting property name" in refused(broken)
    foreign = killed_copy(serial, tmp_path / "foreign", kept=4)
    record = json.loads(lines[0])
    foreign_record = sealed_json({**record, "seed": record["seed"] + 1}, RECORD_KIND, RECORD_FORMAT)
    (foreign / "games.jsonl").write_text(json.dumps(foreign_record) + "\n")  # sealed, so it gets to the schedule
    assert f"line 1: game {record['game']} is not the one this tournament schedules: its seed differ" in refused(
        foreign
    )
    cheated = killed_copy(serial, tmp_path / "cheated", kept=4)
    cheated_record = sealed_json({**record, "winner": 1 - record["winner"]}, RECORD_KIND, RECORD_FORMAT)
    (cheated / "games.jsonl").write_text(json.dumps(cheated_record) + "\n")
    assert "its moves do not lead to its recorded end and winner" in refused(cheated)


def test_reusing_out_refuses_and_names_resume(serial: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (serial / "games.jsonl").read_text()
    with pytest.raises(SystemExit) as exit_info:
        run(serial, "--jobs", "1")
    refusal = f"--resume {serial} continues it, --overwrite replaces it"
    assert exit_info.value.code == 2 and refusal in capsys.readouterr().err
    assert (serial / "games.jsonl").read_text() == before


@pytest.mark.slow
def test_a_kill_9_loses_at_most_the_game_in_progress(tmp_path: Path) -> None:
    # Games of a few tenths of a second each, so that the kill lands with games left to play even when this
    # process waits for a core: with random against mcts:sims=150 the last twelve games took 15 ms in all.
    argv = ["mcts:sims=20000", "mcts:sims=25000", "--games", "10", "--seed", "3", "--jobs", "1", "--bootstrap", "100"]
    log = tmp_path / "killed" / "games.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "tournament", *argv, "--no-progress", "--out", str(log.parent)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPOSITORY,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 4):
            time.sleep(0.02)
        played = len(log.read_text().splitlines())
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        process.kill()
    saved = len(log.read_text().splitlines())
    assert 4 <= played <= saved < 10  # the games saved before the kill survive it, and some were left to play
    assert tournament.main(["--resume", str(log.parent), "--no-progress"]) == 0
    full = run(tmp_path / "full", *argv[2:], agents=argv[:2])
    assert without_timing(games(log.parent), TIMING_FIELDS) == without_timing(games(full), TIMING_FIELDS)
    assert read_csv(log.parent / "results.csv") == read_csv(full / "results.csv")


def test_schedule_seeds_games_from_seed_pair_and_round_only() -> None:
    jobs = schedule.schedule(3, "round-robin", 4, seed=1)
    assert len(jobs) == 12 and len({j.seed for j in jobs}) == 12
    assert [j.seats for j in jobs[:4]] == [(0, 1), (1, 0), (0, 1), (1, 0)]
    bigger = schedule.schedule(3, "round-robin", 6, seed=1)
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
