"""quarto grade: exact action values checked against an independent brute force, the grading logic on
scripted decisions, the solver at 0% and the baselines above it, caching, and the command itself."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from agents.base import Agent
from agents.specs import make_agent
from agents.storage.integrity import sealed_json, unsealed_json
from agents.suites import PositionSource, Suite, build_suite, save_suite, shipped_suite_names
from experiments.arena import grade
from experiments.evaluation import grading
from experiments.evaluation.grading import PositionValues, exact_action_values, grade_agent, sample_decisions
from experiments.evaluation.ratings import Share, wilson_interval
from quarto_env.core import DECLARE, NO_WINNER, STANDARD, State, Variant, legal_actions, step
from quarto_env.notation import parse_position

SMALL_VARIANTS = [STANDARD, Variant.make(squares=True, attributes=3), Variant.make(declaration=True)]


# ---------------------------------------------------------------------------------------------------------
# An independent reference: plain negamax over core.step, for positions with few empty squares.
# ---------------------------------------------------------------------------------------------------------
@functools.cache
def reference_value(variant: Variant, state: State) -> int:
    """The value of ``state`` for the player to move, by exhaustive search."""
    return max(reference_action_values(variant, state).values())


def reference_action_values(variant: Variant, state: State) -> dict[int, int]:
    values = {}
    for action in legal_actions(variant, state):
        child = step(variant, state, action)
        if child.over:
            values[action] = 0 if child.winner == NO_WINNER else (1 if child.winner == state.to_move else -1)
        else:
            sign = 1 if child.to_move == state.to_move else -1
            values[action] = sign * reference_value(variant, child)
    return values


def reference_solver(variant: Variant, state: State) -> dict[int, int]:
    return reference_action_values(variant, state)


class FixedChoice(Agent):
    """Plays the action with the lowest (or highest) reference value: a worst or a perfect player."""

    def __init__(self, variant: Variant, worst: bool) -> None:
        super().__init__(variant, seed=0)
        self.worst = worst
        self.spec = "worst" if worst else "perfect"

    def act(self, state: State) -> int:
        values = reference_action_values(self.variant, state)
        pick = min if self.worst else max
        return pick(values, key=lambda a: (values[a], a))


# ---------------------------------------------------------------------------------------------------------
# Exact values
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", SMALL_VARIANTS, ids=[v.describe() for v in SMALL_VARIANTS])
def test_exact_action_values_match_the_brute_force(variant: Variant) -> None:
    positions = sample_decisions(variant, 12, seed=5, max_empty=5, min_empty=2)
    for state in positions:
        assert exact_action_values(variant, state) == reference_action_values(variant, state), state


@pytest.mark.parametrize("solver", [reference_solver, exact_action_values], ids=["reference", "exact"])
def test_known_position_values(solver: grading.Solver) -> None:
    # Squares 0, 1, 2 hold pieces 1, 3, 5 (all tall and solid). The short hollow pieces 8, a, c, e are on the
    # board too, so every piece left completes row 0 on square 3: giving any of them loses ...
    lost = solver(STANDARD, parse_position("135.4.a9eb.c.8.7 -"))
    assert set(lost) == {0, 2, 6, 13, 15} and set(lost.values()) == {-1}
    # ... and the receiver of piece 0 (solid) wins on square 3.
    wins = solver(STANDARD, parse_position("135.4.a9eb.c.8.7 0"))
    assert wins[3] == 1 and max(wins.values()) == 1


# ---------------------------------------------------------------------------------------------------------
# Grading logic, with the reference values
# ---------------------------------------------------------------------------------------------------------
def test_perfect_play_loses_nothing_and_worst_play_loses_every_critical_decision() -> None:
    positions = sample_decisions(STANDARD, 40, seed=1, max_empty=5, min_empty=2)
    values = PositionValues(STANDARD, solver=reference_solver)
    perfect = grade_agent(FixedChoice(STANDARD, worst=False), STANDARD, positions, values)
    worst = grade_agent(FixedChoice(STANDARD, worst=True), STANDARD, positions, values)
    assert perfect.share_lost().share == 0.0
    critical = [d for d in worst.decisions if d.critical]
    assert critical and all(d.lost for d in critical)
    assert worst.share_lost().share == len(critical) / len(positions)
    assert worst.critical().share == 1.0
    assert values.solved == len(set(positions))  # two agents graded, each position solved once


def test_report_splits_and_transitions_add_up() -> None:
    positions = sample_decisions(STANDARD, 40, seed=2, max_empty=5, min_empty=1)
    report = grade_agent(
        FixedChoice(STANDARD, worst=True), STANDARD, positions, PositionValues(STANDARD, solver=reference_solver)
    )
    lost = sum(d.lost for d in report.decisions)
    assert sum(report.transitions().values()) == lost
    phases = report.by_phase()
    assert phases["place"].total + phases["give"].total == len(positions)
    assert sum(round(part.share * part.total) for part in report.by_empty().values()) == lost
    share, low, high, n = overall = report.share_lost()
    assert low <= share <= high and n == len(positions)
    assert overall == Share(share=share, low=low, high=high, total=n)  # named, and a tuple still
    assert json.loads(json.dumps(report.summary()))["all"] == [share, low, high, n]


def test_a_missed_win_is_graded_win_to_worse() -> None:
    state = parse_position("135.4.a9eb.c.8.7 0")  # piece 0 completes the solid row 0 on square 3
    report = grade_agent(
        FixedChoice(STANDARD, worst=True), STANDARD, [state], PositionValues(STANDARD, solver=reference_solver)
    )
    (decision,) = report.decisions
    assert decision.value == 1 and decision.lost and decision.action != 3 and decision.phase == "place"
    assert report.transitions()["win->draw"] + report.transitions()["win->loss"] == 1


def test_grading_refuses_mismatched_variants_and_illegal_actions() -> None:
    class Illegal(Agent):
        def act(self, state: State) -> int:
            return DECLARE

    state = parse_position("135.4.a9eb.c.8.7 0")
    with pytest.raises(ValueError, match="values are for"):
        grade_agent(make_agent("random"), STANDARD, [state], PositionValues(Variant.make(squares=True)))
    with pytest.raises(ValueError, match="played illegal action 16"):
        grade_agent(Illegal(), STANDARD, [state], PositionValues(STANDARD, solver=reference_solver))


def test_value_cache_round_trips_through_disk(tmp_path: Path) -> None:
    positions = sample_decisions(STANDARD, 10, seed=3, max_empty=4)
    path = tmp_path / "values.json"
    first = PositionValues(STANDARD, path, solver=reference_solver)
    expected = {s: first.action_values(s) for s in positions}
    first.save()
    second = PositionValues(STANDARD, path, solver=lambda v, s: pytest.fail("should not solve again"))
    assert {s: second.action_values(s) for s in positions} == expected and second.solved == 0
    with pytest.raises(ValueError, match="is for variant"):
        PositionValues(Variant.make(squares=True), path)


def test_sampled_positions_are_seeded_decisions_within_bounds() -> None:
    first = sample_decisions(STANDARD, 30, seed=9, max_empty=8, min_empty=3)
    assert first == sample_decisions(STANDARD, 30, seed=9, max_empty=8, min_empty=3)
    assert first != sample_decisions(STANDARD, 30, seed=10, max_empty=8, min_empty=3)
    assert all(3 <= s.num_empty <= 8 and len(legal_actions(STANDARD, s)) > 1 and not s.over for s in first)
    assert {s.placing for s in first} == {True, False}


@pytest.mark.parametrize("sources", [[], ["random", ""], "random"])
def test_sampling_refuses_sources_that_name_no_agent(sources: object) -> None:
    with pytest.raises(ValueError, match="sources must be a list of one or more agent specs"):
        sample_decisions(STANDARD, 1, seed=0, sources=sources)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# The exact solver as judge, and the command
# ---------------------------------------------------------------------------------------------------------
def test_solver_grades_zero_and_random_and_greedy_clearly_more(tmp_path: Path) -> None:
    positions = sample_decisions(STANDARD, 100, seed=0, max_empty=8)
    values = PositionValues(STANDARD)
    shares = {
        spec: grade_agent(make_agent(spec, STANDARD, seed=1), STANDARD, positions, values).share_lost()
        for spec in ("solver", "greedy", "random")
    }
    assert shares["solver"][0] == 0.0
    # "clearly higher": the baselines' 95% intervals lie above the solver's
    assert shares["random"][1] > shares["greedy"][1] > shares["solver"][2]
    assert shares["random"][0] > shares["greedy"][0]
    assert values.solved == len(set(positions))


def test_command_writes_reports_and_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "grade"
    argv = ["random", "greedy", "--positions", "12", "--max-empty", "6", "--seed", "4", "--no-progress"]
    assert grade.main([*argv, "--out", str(out), "--cache", str(tmp_path / "v.json")]) == 0
    summaries = json.loads((out / "grade.json").read_text())
    assert [s["agent"] for s in summaries] == ["random", "greedy"] and summaries[0]["all"][3] == 12
    assert len((out / "decisions.jsonl").read_text().splitlines()) == 24
    assert "| agent | all decisions |" in (out / "grade.md").read_text()
    assert json.loads((out / "config.json").read_text())["max_empty"] == 6
    assert (out / "command.txt").read_text().startswith("quarto grade random greedy --positions 12")
    assert "12 positions, 12 solved" in capsys.readouterr().out
    assert grade.main([*argv, "--out", str(out), "--cache", str(tmp_path / "v.json"), "--overwrite"]) == 0
    assert "12 positions, 0 solved" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        grade.main([*argv, "--out", str(out), "--cache", str(tmp_path / "v.json"), "--squares"])
    assert "is for variant" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["random", "--max-empty", "20"], "argument --max-empty: max-empty must be an integer >= 2 and <= 16, got 20"),
        (["random", "--max-empty", "1"], "max-empty must be an integer >= 2"),
        (["random", "--max-empty", "nan"], "max-empty must be an integer"),
        (["random", "--min-empty", "0"], "min-empty must be an integer >= 1 and <= 16, got 0"),
        (["random", "--min-empty", "8", "--max-empty", "6"], "--min-empty 8 is above --max-empty 6"),
        (["random", "--positions", "0"], "positions must be an integer >= 1"),
        (["random", "--positions", "inf"], "positions must be an integer >= 1 and <= 100000, got inf"),
        (["random", "--positions", "1e9"], "positions must be an integer >= 1 and <= 100000"),
        (["random", "--seed", "-1"], "seed must be an integer >= 0 and <= 4294967295, got -1"),
        (["random", "--seed", "nan"], "seed must be an integer"),
        (["random", "--seed", "4294967296"], "seed must be an integer >= 0 and <= 4294967295"),
        (["nobody"], "unknown agent kind 'nobody'"),
        (["random", "--sources", "random,alphago"], "unknown agent kind 'alphago'"),
        (["random", "--sources", "random,ppo:/nowhere.zip"], "agent 'ppo:/nowhere.zip' cannot be built: checkpoint"),
        (["random", "--sources", "random,,greedy"], "--sources 'random,,greedy': item 2 of 3 is empty"),
        (["random", "--sources", ""], "--sources '': item 1 of 1 is empty"),
        (["random", "--sources", ","], "--sources ',': item 1 of 2 is empty; give agent specs joined by commas"),
        (["random", "--sources", "minimax:depth=1,time=nan"], "time must be a finite number > 0"),  # one spec
        (["minimax:time=nan"], "time must be a finite number > 0"),
        (["random", "--out", "/dev/null"], "--out '/dev/null' is a file, not a folder"),
    ],
)
def test_bad_input_is_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        grade.main(argv)
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in error and "Traceback" not in error
    assert error.splitlines()[-1].startswith("quarto grade: ")  # one line (after the usage for a syntax error)


def test_out_that_is_a_file_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    for out, message in [(taken, "is a file, not a folder"), (taken / "sub", f"{str(taken)!r} is a file, not a")]:
        with pytest.raises(SystemExit) as exit_info:
            grade.main(["random", "--positions", "3", "--no-progress", "--out", str(out)])
        captured = capsys.readouterr()
        assert exit_info.value.code == 2 and message in captured.err and "solved" not in captured.out


# ---------------------------------------------------------------------------------------------------------
# --cache: the wrong shape gets a message; a stale or tampered cache is solved again
# ---------------------------------------------------------------------------------------------------------
def fake_solver(variant: Variant, state: State) -> dict[int, int]:
    """Every action draws: fast at any number of empty squares, for tests of the command's plumbing."""
    return dict.fromkeys(legal_actions(variant, state), 0)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[]", 'not a value cache: expected a JSON object with "variant" and "positions" objects'),
        (b'{"positions": {}}', "not a value cache: expected a JSON object"),
        (b"not json", "not a value cache: not JSON"),
        (b"\x80\x81\xfe binary", "not a value cache: not UTF-8 text"),
        (b'{"variant": {}, "positions": [1, 2]}', "not a value cache: expected a JSON object"),
        (b'{"variant": {}, "positions": {"1,2": {"0": 1}}}', "not a value cache: entry '1,2' is not a position"),
        (b'{"variant": {}, "positions": {"x": 5}}', "not a value cache: entry 'x' is not a position"),
    ],
    ids=["list", "no-variant", "text", "binary", "positions-list", "short-key", "not-values"],
)
def test_a_cache_of_the_wrong_shape_gets_a_message(
    content: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "values.json"
    cache.write_bytes(content)
    with pytest.raises(SystemExit) as exit_info:
        grade.main(["random", "--positions", "2", "--cache", str(cache), "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in error and "Traceback" not in error
    assert not (tmp_path / "out").exists()  # refused before the run folder is made


def test_a_cache_entry_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    path = tmp_path / "values.json"
    values = PositionValues(STANDARD, path, solver=reference_solver)
    values.action_values(parse_position("135.4.a9eb.c.8.7 0"))
    values.save()
    data = json.loads(path.read_text())
    wrong_shapes: list[dict[str, object]] = [{"1,2": {"3": 1}}, {next(iter(data["positions"])): {"3": 5}}, {"x": []}]
    for entries in wrong_shapes:
        hashed = sealed_json({**data, "positions": entries}, grading.CACHE_KIND, grading.CACHE_FORMAT)
        path.write_text(json.dumps(hashed))
        with pytest.raises(ValueError, match=r"not a value cache: entry .* is not a position with action values"):
            PositionValues(STANDARD, path)


@pytest.mark.parametrize("where", ["/dev/null", "folder"])
def test_a_cache_path_that_cannot_be_a_file_is_refused(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path if where == "folder" else Path(where)
    with pytest.raises(SystemExit) as exit_info:
        grade.main(["random", "--positions", "2", "--cache", str(cache), "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"--cache {str(cache)!r} is" in error


def test_a_tampered_or_stale_cache_is_solved_again_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    positions = sample_decisions(STANDARD, 6, seed=3, max_empty=4)
    path = tmp_path / "values.json"
    honest = PositionValues(STANDARD, path, solver=reference_solver)
    expected = {s: honest.action_values(s) for s in positions}
    honest.save()
    data = json.loads(path.read_text())
    seal = data["seal"]
    assert seal["format"] == grading.CACHE_FORMAT and data["solver"] == grading.SOLVER_VERSION
    assert seal["kind"] == grading.CACHE_KIND and len(seal["sha256"]) == 64

    key = next(iter(data["positions"]))
    flipped = {action: -value for action, value in data["positions"][key].items()}
    tampered = {**data, "positions": {**data["positions"], key: flipped}}
    stale = {key: value for key, value in data.items() if key != "seal"}  # as an older version wrote it
    for changed, reason in [(tampered, "does not match its checksum"), (stale, "written by an older version")]:
        path.write_text(json.dumps(changed))
        again = PositionValues(STANDARD, path, solver=reference_solver)
        assert reason in (again.discarded or "")
        assert {s: again.action_values(s) for s in positions} == expected and again.solved == len(set(positions))

    path.write_text(json.dumps(tampered))
    argv = ["random", "--positions", "6", "--max-empty", "4", "--seed", "3", "--no-progress", "--cache", str(path)]
    assert grade.main([*argv, "--out", str(tmp_path / "out")]) == 0
    assert "does not match its checksum: damaged or altered; solving its positions again" in capsys.readouterr().err
    rewritten = json.loads(path.read_text())
    assert rewritten["positions"][key] == data["positions"][key]  # the honest values, solved again
    unsealed_json(rewritten, grading.CACHE_KIND, grading.CACHE_FORMAT, str(path))  # sealed anew


def test_many_empty_squares_warn_and_grading_shows_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grading, "exact_action_values", fake_solver)  # 14 empty squares would take minutes
    argv = ["random", "greedy", "--positions", "3", "--min-empty", "13", "--max-empty", "14"]
    assert grade.main([*argv, "--out", str(tmp_path)]) == 0
    error = capsys.readouterr().err
    assert "quarto grade: warning: --max-empty 14: valuing a position's actions takes the exact solver" in error
    assert "solving: 100%" in error and "grading random" in error and "grading greedy" in error
    quiet = ["--min-empty", "11", "--max-empty", "12", "--no-progress", "--out", str(tmp_path / "quiet")]
    assert grade.main([*argv, *quiet]) == 0
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------------------------
# Grading on a suite of solved positions: lookups only, and the command's choice of positions
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_suite() -> Suite:
    """Four positions at each of 6, 5 and 4 empty squares, solved (a second or two)."""
    return build_suite(
        "tiny-v1", STANDARD, per_stage=4, seed=0, source=PositionSource(("random", "greedy"), (6, 5, 4), games=30)
    )


@pytest.fixture
def tiny_suite_file(tiny_suite: Suite, tmp_path: Path) -> Path:
    path = tmp_path / "suite-tiny-v1.jsonl"
    save_suite(tiny_suite, path)
    return path


class LowestAction(Agent):
    """Always the lowest legal action: some of its choices lose value, some do not."""

    spec = "lowest"

    def act(self, state: State) -> int:
        return min(legal_actions(self.variant, state))


def test_grading_on_a_suite_gives_the_shares_of_its_action_values(tiny_suite: Suite) -> None:
    values = PositionValues.from_suite(tiny_suite)
    report = grade_agent(LowestAction(STANDARD), STANDARD, grading.suite_states(tiny_suite), values)
    lost = {
        stage: [p.action_values[min(p.action_values)] < max(p.action_values.values()) for p in positions]
        for stage, positions in tiny_suite.stages().items()
    }
    assert list(lost) == [6, 5, 4] and all(len(flags) == 4 for flags in lost.values())
    for stage, flags in lost.items():
        share = sum(flags) / len(flags)
        assert report.by_empty()[stage] == (share, *wilson_interval(share, len(flags)), len(flags))
    everything = [flag for flags in lost.values() for flag in flags]
    assert 0 < sum(everything) < len(everything)  # both kinds of decision occur, so the shares say something
    assert report.share_lost().share == sum(everything) / len(everything)
    assert values.solved == 0
    with pytest.raises(KeyError, match="is not in the suite"):
        values.action_values(parse_position("135.4.a9eb.c.8.7 0"))


def test_the_command_grades_on_a_suite_without_solving(
    tiny_suite: Suite, tiny_suite_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["random", "greedy", "--suite", str(tiny_suite_file), "--seed", "2", "--no-progress", "--out", str(out)]
    assert grade.main([*argv, "--perfect-games", "2"]) == 0
    summaries = json.loads((out / "grade.json").read_text())
    assert [s["graded_on"] for s in summaries] == [{"suite": "tiny-v1"}] * 2
    suite_values = {p.position: p.action_values for p in tiny_suite.positions}
    decisions = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    for summary in summaries:
        mine = [d for d in decisions if d["agent"] == summary["agent"]]
        assert len(mine) == 12
        for d in mine:
            values = suite_values[d["position"]]
            assert (d["action_value"], d["value"]) == (values[d["action"]], max(values.values()))
        for stage in ("6", "5", "4"):
            flags = [d["action_value"] < d["value"] for d in mine if str(d["empty"]) == stage]
            assert summary["by_empty"][stage][0] == sum(flags) / len(flags) and summary["by_empty"][stage][3] == 4
        assert summary["perfect_play"]["games"] == 2 and summary["perfect_play"]["agent"] == summary["agent"]
    report = (out / "grade.md").read_text()
    assert "(suite tiny-v1; share" in report and "| positions | 4 | 4 | 4 |" in report
    assert report.index("6 empty") < report.index("4 empty") and "Points lost against perfect play" in report
    config = json.loads((out / "config.json").read_text())
    assert config["suite"] == "tiny-v1" and config["positions"] is None and config["perfect_games"] == 2
    assert "solved" not in capsys.readouterr().out


def test_the_default_is_the_variants_suite_unless_a_sampling_option_is_given(
    tiny_suite_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grade, "default_suite_name", lambda variant: str(tiny_suite_file))
    assert grade.main(["random", "--no-progress", "--out", str(tmp_path / "suite")]) == 0
    assert json.loads((tmp_path / "suite" / "config.json").read_text())["suite"] == "tiny-v1"
    sampled = ["random", "--positions", "3", "--max-empty", "4", "--no-progress", "--out", str(tmp_path / "sampled")]
    assert grade.main(sampled) == 0
    config = json.loads((tmp_path / "sampled" / "config.json").read_text())
    assert (config["suite"], config["positions"], config["min_empty"], config["sources"]) == (
        None,
        3,
        1,
        ["random", "greedy"],
    )
    graded_on = json.loads((tmp_path / "sampled" / "grade.json").read_text())[0]["graded_on"]
    assert graded_on == {
        "sampled": {"seed": 0, "positions": 3, "min_empty": 1, "max_empty": 4, "sources": ["random", "greedy"]}
    }
    assert "positions sampled with seed 0, 1-4 empty squares" in (tmp_path / "sampled" / "grade.md").read_text()
    assert capsys.readouterr().err == ""


def test_a_variant_without_a_suite_falls_back_to_sampling_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grading, "exact_action_values", fake_solver)  # 200 positions, solved at once
    assert grade.main(["random", "--declaration", "--no-progress", "--out", str(tmp_path)]) == 0
    error = capsys.readouterr().err
    rules = Variant.make(declaration=True).describe()
    assert error == f"quarto grade: note: no suite ships for {rules} rules; grading on positions sampled with seed 0\n"
    assert json.loads((tmp_path / "config.json").read_text())["positions"] == 200


@pytest.mark.parametrize(
    "sampling",
    [["--positions", "5"], ["--min-empty", "2"], ["--max-empty", "6"], ["--sources", "random"], ["--cache", "c.json"]],
)
def test_a_suite_and_a_sampling_option_are_refused_together(
    sampling: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        grade.main(["random", "--suite", "standard-v1", *sampling])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert error.splitlines()[-1] == (
        f"quarto grade: --suite grades on a suite's positions and {sampling[0]} samples positions: give one "
        "or the other"
    )


def test_an_unknown_or_foreign_suite_is_a_usage_error(
    tiny_suite_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        grade.main(["random", "--suite", "nosuch"])
    shipped = ", ".join(shipped_suite_names()) or "none"
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"quarto grade: unknown suite 'nosuch'; shipped suites: {shipped} (or a .jsonl path)"
    )
    with pytest.raises(SystemExit) as exit_info:
        grade.main(["random", "--suite", str(tiny_suite_file), "--squares"])
    assert exit_info.value.code == 2 and "is for standard rules, not squares" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("3", "perfect-games must be even (each opening is played in both seats), got 3"),
        ("-2", "perfect-games must be an integer >= 0 and <= 100000, got -2"),
        ("nan", "perfect-games must be an integer"),
    ],
)
def test_perfect_games_must_be_an_even_count(value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        grade.main(["random", "--perfect-games", value, "--positions", "2"])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1  # a value error is one line, without the usage
    assert lines[0].startswith(f"quarto grade: argument --perfect-games: {message}")
