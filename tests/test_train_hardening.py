"""``quarto train`` refuses what it cannot do before it writes anything, and says why in one line: a resume
that would change the network or the run, a checkpoint of the wrong shape, a run folder that another process
holds or that cannot be written, a config file that is not a mapping of fields, and config values that would
crash mid-run. What a resume may change, it applies."""

from __future__ import annotations

import fcntl
import io
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch as th

from agents.networks.checkpoints import CheckpointError, read_metadata
from agents.ppo import load_policy
from experiments import output, run_folder
from experiments.training import train as train_module
from experiments.training.config import FIXED_ON_RESUME, ConfigError, check_agents
from experiments.training.config_file import config_from_dict, load_config
from tests.test_checkpoints import edit_metadata, rewrite

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def copy_run(tiny_run: tuple[Path, str], destination: Path) -> Path:
    shutil.copytree(tiny_run[0], destination)
    return destination


def torch_bytes(value: Any) -> bytes:
    buffer = io.BytesIO()
    th.save(value, buffer)
    return buffer.getvalue()


def folder_bytes(run_dir: Path) -> dict[str, bytes]:
    """Every file of the run folder but its lock, by relative path: what a refused command must leave alone."""
    return {
        str(p.relative_to(run_dir)): p.read_bytes()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and p.name != output.LOCK_FILE
    }


def refused(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Run ``quarto train ARGV``, which must exit with status 2 and one line on stderr; returns that line."""
    assert train_module.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# ---------------------------------------------------------------------------------------------------------
# Resume: checked before anything is written; every override applied or refused
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "override",
    ["observation=raw", "variant.squares=true", "policy=mlp", "net_arch=[64]", "seed=1", "name=other"],
)
def test_a_refused_resume_leaves_the_run_folder_byte_identical(
    override: str, tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    before = folder_bytes(run_dir)
    field = override.split("=")[0].split(".")[0]
    message = refused(["--resume", str(run_dir), override, "total_steps=4096"], capsys)
    assert f"config field {field} cannot change on --resume" in message
    assert f"Fixed on resume: {', '.join(FIXED_ON_RESUME)}" in message
    assert folder_bytes(run_dir) == before  # config.yaml and command.txt above all
    refused(["--resume", str(run_dir), override], capsys)  # and the run still refuses the same way, not worse


def test_a_run_whose_config_yaml_disagrees_with_its_checkpoint_is_refused_then_repaired(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    config = run_dir / "config.yaml"
    trained = read_metadata(run_dir / "checkpoints" / "final.zip")["observation"]
    assert f"observation: {trained}" in config.read_text() and trained != "raw"
    config.write_text(config.read_text().replace(f"observation: {trained}", "observation: raw"))  # the old bug's trace
    before = folder_bytes(run_dir)
    message = refused(["--resume", str(run_dir)], capsys)
    assert f"trained with '{trained}', this resume asks for 'raw' (config.yaml with the overrides)" in message
    assert folder_bytes(run_dir) == before
    repaired = ["--resume", str(run_dir), f"observation={trained}", "total_steps=1536", "final_eval_games=2"]
    assert train_module.main(repaired) == 0  # goes on (a finished run at its total_steps is left alone)
    assert f"observation: {trained}" in config.read_text()


def test_resume_applies_the_hyperparameters_it_is_given(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    stopped_at = read_metadata(run_dir / "checkpoints" / "latest.zip")["num_timesteps"]
    applied = {"learning_rate": 1e-3, "batch_size": 32, "ent_coef": 0.05, "n_epochs": 2, "gamma": 0.9}
    overrides = [f"{key}={value}" for key, value in applied.items()]
    argv = ["--resume", str(run_dir), *overrides, f"total_steps={stopped_at + 128}", "final_eval_games=2"]
    assert train_module.main([*argv, "opponents.greedy=5e-1"]) == 0
    final = run_dir / "checkpoints" / "final.zip"
    recorded = read_metadata(final)["config"]["ppo"]
    assert {key: recorded[key] for key in applied} == applied and recorded["opponents"]["greedy"] == 0.5
    with zipfile.ZipFile(final) as archive:
        model_data = json.loads(archive.read("data"))  # SB3's own record of the learner, as plain JSON
        optimizer = th.load(io.BytesIO(archive.read("policy.optimizer.pth")), weights_only=True)
    assert all(model_data[key] == applied[key] for key in ("batch_size", "ent_coef", "n_epochs", "gamma"))
    assert optimizer["param_groups"][0]["lr"] == pytest.approx(1e-3)  # Adam stepped with the new rate
    assert read_metadata(final)["num_timesteps"] >= stopped_at + 128


# ---------------------------------------------------------------------------------------------------------
# The code's version: on each command's line in command.txt and in every checkpoint
# ---------------------------------------------------------------------------------------------------------
def test_a_run_records_the_code_version_in_command_txt_and_every_checkpoint(tiny_run: tuple[Path, str]) -> None:
    commit = run_folder.code_version()["commit"]
    assert commit is not None  # the tests run in a git checkout
    (line,) = (tiny_run[0] / "command.txt").read_text().splitlines()
    assert re.fullmatch(rf"\S+  quarto train .*  # code commit {commit}(, uncommitted changes)?", line), line
    for checkpoint in sorted((tiny_run[0] / "checkpoints").glob("*.zip")):
        code = read_metadata(checkpoint)["versions"]["code"]
        assert code["commit"] == commit and isinstance(code["uncommitted_changes"], bool), checkpoint.name


def test_a_resumed_run_records_the_version_it_resumed_with_also_from_an_older_checkpoint(
    tiny_run: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    latest = run_dir / "checkpoints" / "latest.zip"
    versions = read_metadata(latest)["versions"]
    edit_metadata(latest, versions={key: value for key, value in versions.items() if key != "code"})  # as of old
    resumed = {"commit": "0123456789abcdef" * 2 + "01234567", "uncommitted_changes": True}
    monkeypatch.setattr(run_folder, "code_version", lambda: resumed)  # command.txt's
    monkeypatch.setattr(train_module, "code_version", lambda: resumed)  # the checkpoints'
    total = read_metadata(latest)["num_timesteps"] + 128
    assert train_module.main(["--resume", str(run_dir), f"total_steps={total}", "final_eval_games=2"]) == 0
    first, then = (run_dir / "command.txt").read_text().splitlines()
    assert then.endswith(f"final_eval_games=2  # code commit {resumed['commit']}, uncommitted changes")
    assert "0123456789abcdef" not in first
    for name in ("latest.zip", "final.zip"):
        assert read_metadata(run_dir / "checkpoints" / name)["versions"]["code"] == resumed
    assert read_metadata(run_dir / "checkpoints" / "step_000000512.zip")["versions"]["code"] != resumed


def test_the_project_format_records_the_code_version_only_while_asked(tmp_path: Path) -> None:
    """The az and rllib checkpoints' writer: the version inside the block, none outside (as before)."""
    from agents.networks.checkpoints import CheckpointHeader, recording_code_version, write_checkpoint
    from quarto_env.core import STANDARD

    version = {"commit": "ab" * 20, "uncommitted_changes": False}
    with recording_code_version(version):
        write_checkpoint(
            tmp_path / "inside.zip", "alphazero", CheckpointHeader(STANDARD, "parity", 0), {}, {"x.pth": {}}
        )
    write_checkpoint(tmp_path / "outside.zip", "alphazero", CheckpointHeader(STANDARD, "parity", 0), {}, {"x.pth": {}})
    assert read_metadata(tmp_path / "inside.zip")["versions"]["code"] == version
    assert "code" not in read_metadata(tmp_path / "outside.zip")["versions"]


@pytest.mark.parametrize(
    ("version", "words"),
    [
        ({"commit": "ab" * 20, "uncommitted_changes": False}, f"commit {'ab' * 20}"),
        ({"commit": "ab" * 20, "uncommitted_changes": True}, f"commit {'ab' * 20}, uncommitted changes"),
        ({"commit": "ab" * 20, "uncommitted_changes": None}, f"commit {'ab' * 20}, changes unknown"),
        ({"commit": None, "uncommitted_changes": None}, "not a git checkout"),
    ],
)
def test_the_code_version_in_words(version: dict[str, Any], words: str) -> None:
    assert run_folder.describe_code_version(version) == words


# ---------------------------------------------------------------------------------------------------------
# One process per run folder; orphan temporaries cleared
# ---------------------------------------------------------------------------------------------------------
HOLD_LOCK = """
import fcntl, sys, time
lock = open(sys.argv[1], "a+")
fcntl.flock(lock, fcntl.LOCK_EX)
lock.truncate(0); lock.write("4242\\n"); lock.flush()
print("locked", flush=True)
time.sleep(120)
"""


def test_a_second_process_in_the_same_run_folder_is_refused_until_the_first_dies(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    before = folder_bytes(run_dir)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(run_dir / output.LOCK_FILE)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        message = refused(["--resume", str(run_dir), "total_steps=4096"], capsys)
        assert "is in use by another process (pid 4242)" in message
        assert "in use" in refused(["--run-dir", str(run_dir)], capsys)  # a new run into it too
    finally:
        holder.kill()  # SIGKILL: the kernel drops the lock with the process
        holder.wait()
    assert folder_bytes(run_dir) == before
    with output.claim_output(run_dir, "run", resume=True):  # the stale lock file blocks nobody
        assert (run_dir / output.LOCK_FILE).read_text().split()[0] != "4242"


def test_the_lock_is_held_for_the_run_and_released_after(tmp_path: Path) -> None:
    with output.claim_output(tmp_path, "run"), open(tmp_path / output.LOCK_FILE) as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with (
            pytest.raises(output.OutputInUseError, match="in use by another writer in this process"),
            output.claim_output(tmp_path, "run"),
        ):
            pass
    with output.claim_output(tmp_path, "run"):
        pass


def test_a_start_removes_the_temporaries_of_a_killed_write(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    orphans = [run_dir / "checkpoints" / ".latest.zip.k1ll3d_9.tmp.zip", run_dir / ".config.yaml.a8c_x2.tmp.yaml"]
    for orphan in orphans:
        orphan.write_bytes(b"half a file")
    kept = run_dir / "checkpoints" / ".keep"
    kept.write_text("not a temporary")
    (run_dir / output.LOCK_FILE).write_text("99999999\n")  # left by a killed process
    stopped_at = read_metadata(run_dir / "checkpoints" / "latest.zip")["num_timesteps"]
    assert train_module.main(["--resume", str(run_dir), f"total_steps={stopped_at}", "final_eval_games=2"]) == 0
    assert not any(orphan.exists() for orphan in orphans) and kept.exists()


# ---------------------------------------------------------------------------------------------------------
# Checkpoints of the wrong shape: CheckpointError, exit 2, one line
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("copied", ["best.zip", "step_000000512.zip"])
def test_a_checkpoint_without_pool_copied_over_latest_says_what_resuming_needs(
    copied: str, tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    shutil.copy(run_dir / "checkpoints" / copied, run_dir / "checkpoints" / "latest.zip")
    before = folder_bytes(run_dir)
    message = refused(["--resume", str(run_dir)], capsys)
    assert "latest.zip' holds no opponent pool (pool.pt)" in message
    assert "Resuming needs the run's latest.zip or final.zip" in message
    assert folder_bytes(run_dir) == before


@pytest.mark.parametrize(
    "pool",
    [
        b"junk",
        torch_bytes(th.zeros(3)),
        torch_bytes([1, 2]),
        torch_bytes({"steps": "many", "weights": []}),
        torch_bytes({"steps": [0, 256], "weights": [{}]}),
        torch_bytes({"steps": [0], "weights": [{"w": th.zeros(2)}]}),
    ],
    ids=["bytes", "tensor", "list", "steps-text", "unequal", "foreign-weights"],
)
def test_a_junk_pool_is_a_checkpoint_error(
    pool: bytes, tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    rewrite(run_dir / "checkpoints" / "latest.zip", {"pool.pt": pool})
    before = folder_bytes(run_dir)
    assert "pool.pt" in refused(["--resume", str(run_dir), "total_steps=2048"], capsys)  # the run ended at 1024
    assert folder_bytes(run_dir) == before


NOT_A_MAPPING = ([1, 2], "text", 3, None)
WITHOUT = [("without", key) for key in ("format", "variant", "observation", "num_timesteps", "config")]
BAD_FIELDS: list[dict[str, Any]] = [
    {"format": None},
    {"format": True},
    {"format": "2"},
    {"variant": None},
    {"variant": "standard"},
    {"variant": [1]},
    {"variant": {"attributes": 9}},
    {"observation": None},
    {"observation": ["parity"]},
    {"num_timesteps": None},
    {"num_timesteps": "1024"},
    {"num_timesteps": -1},
    {"num_timesteps": 1.5},
    {"num_timesteps": float("inf")},
    {"num_timesteps": [1024]},
    {"config": None},
    {"config": [1]},
    {"config": {"policy": "slots"}},
    {"config": {"policy": "slots", "net_arch": "wide"}},
    {"config": {"policy": "slots", "net_arch": [-1]}},
    {"config": {"policy": "slots", "net_arch": [10**12]}},
    {"config": {"policy": ["slots"], "net_arch": [32]}},
]


def metadata_with(checkpoint: Path, change: Any) -> bytes:
    """The checkpoint's ``quarto.json`` with ``change`` applied: a dict of fields to set, ``("without", KEY)``,
    or anything else to replace it whole."""
    if not isinstance(change, dict | tuple):
        return json.dumps(change).encode()
    with zipfile.ZipFile(checkpoint) as archive:
        metadata = json.loads(archive.read("quarto.json"))
    if isinstance(change, tuple):
        return json.dumps({key: value for key, value in metadata.items() if key != change[1]}).encode()
    return json.dumps({**metadata, **change}).encode()


@pytest.mark.parametrize("change", [*NOT_A_MAPPING, *WITHOUT, *BAD_FIELDS], ids=repr)
def test_metadata_of_any_wrong_shape_is_a_checkpoint_error(
    change: Any, tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    for name in ("latest.zip", "final.zip"):
        checkpoint = run_dir / "checkpoints" / name
        rewrite(checkpoint, {"quarto.json": metadata_with(checkpoint, change)})
    with pytest.raises(CheckpointError, match=r"checkpoint '.*final\.zip'"):
        load_policy(run_dir / "checkpoints" / "final.zip")
    before = folder_bytes(run_dir)
    assert "latest.zip" in refused(["--resume", str(run_dir)], capsys)
    assert folder_bytes(run_dir) == before


@pytest.mark.parametrize("best_score", ["high", float("nan"), 7])
def test_a_bad_best_score_refuses_the_resume(
    best_score: Any, tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = copy_run(tiny_run, tmp_path / "run")
    latest = run_dir / "checkpoints" / "latest.zip"
    rewrite(latest, {"quarto.json": metadata_with(latest, {"best_score": best_score})})
    assert "best_score" in refused(["--resume", str(run_dir)], capsys)


def test_deeply_nested_metadata_is_a_checkpoint_error(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    checkpoint = tmp_path / "nested.zip"
    shutil.copy(tiny_run[0] / "checkpoints" / "final.zip", checkpoint)
    rewrite(checkpoint, {"quarto.json": b"[" * 100_000 + b"]" * 100_000})
    with pytest.raises(CheckpointError, match="nested too deeply"):
        read_metadata(checkpoint)


# ---------------------------------------------------------------------------------------------------------
# Config values that validate also train
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("learning_rate=.inf", r"learning_rate must be a finite number > 0 and <= 1, got inf"),
        ("learning_rate=1e308", r"learning_rate must be a finite number > 0 and <= 1, got 1e\+308"),
        ("learning_rate=.nan", r"learning_rate must be a finite number > 0 and <= 1, got nan"),
        ("learning_rate=" + "9" * 400, r"learning_rate must be a finite number > 0 and <= 1, got inf"),
        ("ent_coef=.inf", r"ent_coef must be a finite number >= 0 and <= 1000, got inf"),
        ("vf_coef=1e38", r"vf_coef must be a finite number >= 0 and <= 1000"),
        ("clip_range=.inf", r"clip_range must be a finite number > 0, got inf"),
        ("max_grad_norm=0", r"max_grad_norm must be a finite number > 0, got 0"),
        ("batch_size=1", r"batch_size must be an integer >= 2 and <= 1048576, got 1"),
        ("batch_size=4095", r"batch_size must not leave a last minibatch of one step"),
        ("opponents.random=.inf", r"opponents.random must be a finite number >= 0, got inf"),
        ("opponents={random: 1.7e308, greedy: 1.7e308}", r"opponents must give weights with a positive, finite sum"),
        ("eval_opponents=[]", r"eval_opponents must name at least one agent spec"),
        ("seed=4294967296", r"seed must be an integer >= 0 and <= 4"),
        ("seed=-1", r"seed must be an integer >= 0"),
        ("net_arch=[32, 32]", r"net_arch of a slots network must be \[width\]"),
        ("net_arch=[100000]", r"net_arch of a slots network must be \[width\], each 1 to 4096"),
        ("torch_threads=1000000", r"torch_threads must be an integer >= 1 and <= 256"),
        ("num_games=10000000", r"num_games must be an integer >= 1 and <= 1"),
        ("n_steps=100000", r"ppo.n_steps must keep num_games \* ppo.n_steps <= 1048576"),
        ("eval_games=1e12", r"eval_games must be an integer >= 1 and <= 1"),
        ("variant=5", r"variant must be dict"),
        ("eval_opponents=[minimax:time=nan]", r"config field eval_opponents: bad value 'nan' for time"),
    ],
)
def test_values_that_would_crash_a_run_are_refused_up_front(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_an_evaluation_schedule_out_of_order_is_one_line_and_writes_nothing(
    tiny_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    new = tmp_path / "new"
    message = refused(["early_evals=[5000, 100]", "--run-dir", str(new)], capsys)
    assert "config field early_evals must list learner steps >= 0 in increasing order" in message
    assert not new.exists() and capsys.readouterr().out == ""
    run_dir = copy_run(tiny_run, tmp_path / "run")
    before = folder_bytes(run_dir)
    assert "early_evals" in refused(["--resume", str(run_dir), "early_evals=[-8]"], capsys)
    assert folder_bytes(run_dir) == before


@pytest.mark.parametrize("name", ["a\0b", "runs/x", "a\\b", "", "  ", "line\nbreak", "x" * 201, "é" * 101])
def test_run_names_that_cannot_name_a_folder_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="config field name must be"):
        config_from_dict({"name": name})


def test_numbers_in_every_notation_are_numbers() -> None:
    config = load_config(
        None,
        ["opponents.greedy=5e-1", "opponents.minimax:depth=2=0.25", "opponents.minimax:depth=3=1E-1", "gamma=.5"],
    )
    assert config.ppo.opponents["greedy"] == 0.5 and config.ppo.opponents["minimax:depth=2"] == 0.25
    assert config.ppo.opponents["minimax:depth=3"] == 0.1 and config.ppo.gamma == 0.5
    assert load_config(None, ["total_steps=1e3", "learning_rate=5e-4"]).total_steps == 1000


def test_a_missing_ppo_opponent_fails_before_the_run_starts(
    tmp_path: Path, tiny: list[str], capsys: pytest.CaptureFixture
) -> None:
    missing = tmp_path / "missing.zip"
    for field in ("eval_opponents=[random, ppo:{}]", "opponents.ppo:{}=0.5"):
        with pytest.raises(ConfigError, match=r"config field [\w.]+: agent 'ppo:.*missing\.zip' cannot play: .*exist"):
            check_agents(load_config(None, [field.format(missing)]))
        run_dir = tmp_path / "run"
        message = refused([*tiny, field.format(missing), "--run-dir", str(run_dir)], capsys)
        assert "missing.zip' does not exist" in message and not run_dir.exists()  # nothing made, nothing written


# ---------------------------------------------------------------------------------------------------------
# Paths and config files: one line and exit 2
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("run_dir", "message"),
    [
        ("/dev/null", "is a file, not a folder"),
        ("/proc/quarto-run", "cannot be created"),
        ("a\0b", "is not a valid path"),
        ("{file}", "is a file, not a folder"),
        ("{file}/run", "cannot be created"),
    ],
    ids=["dev-null", "unwritable", "nul-byte", "a-file", "under-a-file"],
)
def test_a_run_folder_that_cannot_be_written_is_one_line(
    run_dir: str, message: str, tmp_path: Path, tiny: list[str], capsys: pytest.CaptureFixture
) -> None:
    file = tmp_path / "file"
    file.write_text("a file")
    assert message in refused([*tiny, "--run-dir", run_dir.format(file=file)], capsys)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)), "is not UTF-8 text"),
        (b"\xff\xfe name: x", "is not UTF-8 text"),
        (b"\x00\x01\x02", "is not valid YAML"),
        (b"- 1\n- 2\n", "must hold a mapping of fields, got list"),
        (b"just text", "must hold a mapping of fields, got str"),
        (b"[" * 500 + b"]" * 500, "is nested too deeply"),
        (b"1: 2\nseed: 3\n", "unknown config key(s) 1"),
        (b"opponents: 5\n", "opponents must be dict"),
        (b"seed: 1\nname: x\nseed: 2\n", "the key 'seed' is given twice"),
        (b"variant:\n  squares: true\n  squares: false\n", "the key 'squares' is given twice"),
        (b"? [1, 2]\n: 3\n", "found unhashable key"),
    ],
    ids=[
        "binary",
        "not-utf8",
        "control",
        "list",
        "text",
        "nested",
        "int-key",
        "opponents-scalar",
        "twice",
        "twice-nested",
        "unhashable-key",
    ],
)
def test_a_config_file_that_is_no_mapping_of_fields_is_one_line(
    content: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(content)
    assert message in refused(["--config", str(config), "--run-dir", str(tmp_path / "run")], capsys)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("overrides", "hint"),
    [
        (["totl_steps=5"], "; did you mean 'total_steps'?"),
        (["totl_steps=5", "sed=1"], "; did you mean 'seed' for 'sed', 'total_steps' for 'totl_steps'?"),
        (["xyzzy=1"], "; allowed: common fields: algorithm, "),  # nothing near: the list alone
    ],
)
def test_a_mistyped_config_key_gets_the_nearest_field(
    overrides: list[str], hint: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    message = refused([*overrides, "--run-dir", str(tmp_path / "run")], capsys).strip()
    assert message.startswith("quarto train: unknown config key(s) ") and hint in message
    assert message.endswith("?") == ("did you mean" in hint)
    assert not (tmp_path / "run").exists()


def test_a_folder_or_missing_config_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for path, problem in ((tmp_path, "is a folder; name a file"), (tmp_path / "missing.yaml", "does not exist")):
        assert problem in refused(["--config", str(path)], capsys)
    with pytest.raises(ConfigError, match=r"config field ppo.opponents must be a mapping"):
        (tmp_path / "scalar.yaml").write_text("opponents: 5\n")
        load_config(tmp_path / "scalar.yaml", ["opponents.greedy=1"])


# ---------------------------------------------------------------------------------------------------------
# python -m experiments.training.evaluate: the same checks, before any game
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--games", "0"], "games must be an integer >= 1"),
        (["--games", "nan"], "games must be an integer >= 1"),
        (["--games", "1e10"], "games must be an integer >= 1 and <= 1000000"),
        (["--seed", "-1"], "seed must be an integer >= 0"),
        (["--opponents", "alphazero"], "--opponents: agent 'alphazero' cannot play: unknown agent kind"),
        (["--opponents", "minimax:time=nan"], "time must be a finite number"),
        (["--opponents", "greedy", "ppo:/missing.zip"], "agent 'ppo:/missing.zip' cannot play: checkpoint"),
    ],
)
def test_evaluate_refuses_bad_options_in_one_line(
    args: list[str], message: str, tiny_run: tuple[Path, str], capsys: pytest.CaptureFixture
) -> None:
    from experiments.training import evaluate

    try:
        status = evaluate.main([str(tiny_run[0] / "checkpoints" / "final.zip"), *args])
    except SystemExit as refusal:  # argparse's refusal of an option
        status = refusal.code
    captured = capsys.readouterr()
    assert status == 2 and message in captured.err and "Traceback" not in captured.err
    assert captured.out == ""  # no game was played, no table printed


def test_the_largest_seed_trains_and_resumes(tiny: list[str], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    budget = [*tiny[1:5], "eval_every=100000", "early_evals=[]", "final_eval_games=2", "grade_positions=0"]
    assert train_module.main([*budget, "seed=4294967295", "total_steps=128", "--run-dir", str(run_dir)]) == 0
    assert train_module.main(["--resume", str(run_dir), "total_steps=256"]) == 0  # reseeded at seed + 128
    assert read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"] >= 256
