"""Without the ``ray`` extra, the commands that need Ray (``quarto sweep``, ``quarto train`` with ``backend:
rllib``, new or resumed, or alphazero's ``workers``) stop with one line naming the install command and exit
status 2 before they write anything, and the one that does not (``rllib:PATH``, played by torch alone) still plays.

Ray is hidden in a fresh process by a finder first on ``sys.meta_path`` that refuses ``ray`` and every
``ray.*``, so an import anywhere -- at the top of a module or inside a function -- fails as it does where Ray
was never installed. All the command lines run in that one process (torch is imported once).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments.training.train import RAY_INSTALL

REPO = Path(__file__).resolve().parent.parent

WITHOUT_RAY = """
import contextlib, io, json, sys, traceback

class HideRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, HideRay())
from experiments import cli

results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = cli.main(argv)
        except SystemExit as exit:
            status = exit.code
        except Exception:
            status = "traceback"
            traceback.print_exc()
    results.append([status, err.getvalue()])
print(json.dumps(results))
"""
"""Runs ``quarto ARGV`` for every ARGV of the JSON list in ``argv[1]`` with Ray hidden; prints each one's exit
status and stderr as JSON."""


def run_without_ray(argvs: list[list[str]], cwd: Path = REPO) -> list[tuple[Any, str]]:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_RAY, json.dumps(argvs)], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return [(status, err) for status, err in json.loads(done.stdout.splitlines()[-1])]


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_finder_hides_ray() -> None:
    """The control: with the finder in place, ``import ray`` fails, as without the extra."""
    hide = WITHOUT_RAY.split("from experiments import cli")[0]
    done = subprocess.run([sys.executable, "-c", f"{hide}\nimport ray"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "ModuleNotFoundError: No module named 'ray'" in done.stderr


@pytest.fixture(scope="module")
def rllib_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained ``rllib:`` checkpoint, written without Ray (the format is the project's own)."""
    from agents.networks.checkpoints import CheckpointHeader
    from agents.networks.policy_value import network_for
    from agents.rllib import save_checkpoint
    from experiments.training.config_file import load_config

    config = load_config(REPO / "configs" / "rllib.yaml")
    network = network_for(config.to_dict(), config.observation, config.variant)
    path = tmp_path_factory.mktemp("rllib") / "final.zip"
    metadata = {"config": config.to_dict()}
    save_checkpoint(path, network.state_dict(), CheckpointHeader(config.variant, config.observation.name, 0), metadata)
    return path


@pytest.mark.slow
def test_commands_that_need_ray_stop_in_one_line_before_writing(rllib_checkpoint: Path, tmp_path: Path) -> None:
    rllib_run = tmp_path / "rllib_run"  # an rllib run folder as a run stopped before its first checkpoint leaves it
    rllib_run.mkdir()
    shutil.copy(REPO / "configs" / "rllib.yaml", rllib_run / "config.yaml")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"config": "configs/default.yaml", "seeds": [0], "sets": []}))
    before = {folder: folder_bytes(folder) for folder in (rllib_run, sweep)}
    new_run, new_sweep, tournament = tmp_path / "new_run", tmp_path / "new_sweep", tmp_path / "tournament"
    refused = {
        "train rllib": ["train", "--config", "configs/rllib.yaml", "--run-dir", str(new_run)],
        "train rllib override": ["train", "backend=rllib", "--run-dir", str(new_run)],
        "train --resume": ["train", "--resume", str(rllib_run)],
        "train workers": ["train", "--config", "configs/alphazero.yaml", "workers=2", "--run-dir", str(new_run)],
        "sweep": ["sweep", "configs/default.yaml", "--seeds", "0", "--out", str(new_sweep)],
        "sweep --resume": ["sweep", "--resume", str(sweep)],
    }
    games = ["--games", "2", "--jobs", "1", "--bootstrap", "100", "--no-progress", "--out", str(tournament)]
    plays = ["tournament", f"rllib:{rllib_checkpoint}", "random", *games]

    *results, played = run_without_ray([*refused.values(), plays])

    for name, (status, err) in zip(refused, results, strict=True):
        command = refused[name][0]
        assert status == 2, (name, err)
        assert err.count("\n") == 1 and err.startswith(f"quarto {command}: "), (name, err)
        assert "needs the ray extra (No module named 'ray')" in err and RAY_INSTALL in err, (name, err)
    assert not new_run.exists() and not new_sweep.exists()  # checked before the folder is made
    assert {folder: folder_bytes(folder) for folder in (rllib_run, sweep)} == before  # nor a line added
    assert played[0] == 0, played[1]  # rllib:PATH needs torch only
    assert (tournament / "games.jsonl").read_text().count("\n") == 2


def test_quarto_evaluate_plays_an_rllib_checkpoint(rllib_checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It refused every rllib checkpoint ('holds a rllib-ppo network, not a ppo one'), rllib:PATH as well."""
    from experiments.training import evaluate

    for given in (str(rllib_checkpoint), f"rllib:{rllib_checkpoint}"):
        assert evaluate.main([given, "--opponents", "random", "--games", "4", "--no-progress"]) == 0
        printed = capsys.readouterr().out
        assert "random" in printed and "argmax" in printed and "sampled" in printed, printed
