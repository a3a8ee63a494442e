"""The config's sections: the common fields at the top level, then ``ppo``, ``alphazero`` and ``rllib``, each a
nested mapping in YAML and ``SECTION.FIELD=VALUE`` on the command line. Run folders and checkpoints record the
config in sections; the flat layout of those written before the sections -- a YAML file, a run folder's
``config.yaml``, a checkpoint -- still loads, each field into its section, and so does a section's field given
without its section on the command line; a field under the wrong section is one line naming its section,
exit 2. The defaults have one home, the dataclasses: ``configs/default.yaml`` names nothing."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.networks.checkpoints import read_metadata
from agents.specs import make_agent
from experiments.training import train as train_module
from experiments.training.config import (
    COMMON_FIELDS,
    SECTION_FIELDS,
    SECTIONS,
    AlphaZeroConfig,
    ConfigError,
    PPOConfig,
    TrainConfig,
    config_table,
)
from experiments.training.config_checks import field_ranges
from experiments.training.config_file import (
    check_unchanged_on_resume,
    config_from_dict,
    load_config,
    save_config,
)
from experiments.training.field_docs import field_docs
from experiments.training.shipped_configs import DEFAULT_CONFIG
from quarto_env.core import INITIAL_STATE, STANDARD, Variant, legal_actions
from quarto_env.observation import OBSERVATION_KINDS

DATA = Path(__file__).resolve().parent / "data"
OLD_CONFIGS = sorted((DATA / "old_flat_configs").glob("*.yaml"))
"""The ``config.yaml`` of tiny runs of each backend, as ``quarto train`` wrote them before the sections (commit
838baac): every field at the top level."""
OLD_RUN = DATA / "old_flat_run"
"""A tiny sb3 run folder of the same commit: its flat ``config.yaml`` and its resumable ``latest.zip``."""
ADDED_SINCE = {
    "sample_games": TrainConfig.sample_games,
    "rollout_steps": AlphaZeroConfig.rollout_steps,
    "leaf_evaluation": AlphaZeroConfig.leaf_evaluation,
}
"""The fields added since those files were written, which they load with at their defaults."""
OLD_DEFAULT_CONFIG = DATA / "old_default_config.yaml"
"""``configs/default.yaml`` as it was when it restated every default (and turned on the solver grade)."""


def flat_view(config: TrainConfig) -> dict[str, Any]:
    """The config in the flat layout of the old files, to compare with them: every section's field beside the
    common ones (of the fields of two sections, the ``algorithm``'s)."""
    data = config.to_dict()
    flat = {key: value for key, value in data.items() if key not in SECTIONS}
    for section in sorted(SECTIONS, key=lambda name: name != config.algorithm):  # the algorithm's own first
        for field, value in data[section].items():
            flat.setdefault(field, value)
    return flat


def refused(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Run ``quarto train ARGV``, which must exit with status 2 and one line on stderr; returns that line."""
    assert train_module.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


# ---------------------------------------------------------------------------------------------------------
# Old flat configs, run folders and checkpoints
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", OLD_CONFIGS, ids=lambda path: path.stem)
def test_an_old_flat_config_loads_every_value_into_its_section(path: Path) -> None:
    flat = yaml.safe_load(path.read_text())
    config = load_config(path)
    renamed = {"backend": "torch"} if flat["algorithm"] == "alphazero" else {}  # alphazero ran under backend sb3
    assert flat_view(config) == {**flat, **ADDED_SINCE, **renamed}  # every field back with its value: none dropped
    assert config.variant == STANDARD and config.observation == OBSERVATION_KINDS[flat["observation"]]
    section = getattr(config, flat["algorithm"])  # the fields of two sections go to the algorithm's
    assert section.learning_rate == flat["learning_rate"] and section.batch_size == flat["batch_size"]
    assert config_from_dict(yaml.safe_load(save_config(config))) == config  # and it saves in sections


def test_the_shared_fields_of_an_old_alphazero_config_are_alphazeros() -> None:
    config = load_config(DATA / "old_flat_configs" / "alphazero.yaml")
    assert (config.alphazero.learning_rate, config.alphazero.batch_size, config.alphazero.vf_coef) == (1e-3, 32, 1.0)
    assert (config.ppo.learning_rate, config.ppo.batch_size) == (PPOConfig.learning_rate, PPOConfig.batch_size)
    assert config.alphazero.sims == 8 and config.alphazero.exact_outcome_empties == 6


def test_an_old_checkpoint_plays_and_its_flat_config_is_the_checkpoints_format(tmp_path: Path) -> None:
    latest = OLD_RUN / "checkpoints" / "latest.zip"
    agent = make_agent(f"ppo:{latest}", STANDARD, 0)
    assert agent.act(INITIAL_STATE) in legal_actions(STANDARD, INITIAL_STATE)
    recorded = read_metadata(latest)["config"]
    assert "n_steps" in recorded and "ppo" not in recorded  # the old, flat layout
    config = load_config(OLD_RUN / "config.yaml")
    assert flat_view(config) == {**recorded, **ADDED_SINCE} and config_from_dict(recorded) == config


@pytest.mark.slow
def test_an_old_run_folder_resumes_and_its_new_checkpoints_record_the_config_in_sections(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(OLD_RUN, run_dir)
    old = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert train_module.main(["--resume", str(run_dir), "total_steps=384", "ppo.n_epochs=2", "--no-progress"]) == 0
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["ppo"]["n_epochs"] == 2 and "n_epochs" not in saved  # config.yaml is rewritten in sections
    recorded = read_metadata(run_dir / "checkpoints" / "final.zip")["config"]
    assert recorded == saved  # the checkpoint's config: in sections, as config.yaml
    assert flat_view(config_from_dict(recorded)) == {**old, **ADDED_SINCE, "total_steps": 384, "n_epochs": 2}
    assert read_metadata(run_dir / "checkpoints" / "final.zip")["num_timesteps"] >= 384


# ---------------------------------------------------------------------------------------------------------
# Sections in YAML and overrides, and the flat spelling beside them
# ---------------------------------------------------------------------------------------------------------
def test_sections_flat_keys_and_dotted_overrides_reach_the_same_fields(tmp_path: Path) -> None:
    sectioned = tmp_path / "sectioned.yaml"
    sectioned.write_text("num_games: 8\nppo:\n  n_steps: 16\n  batch_size: 64\n  opponents: {greedy: 1}\n")
    flat = tmp_path / "flat.yaml"
    flat.write_text("num_games: 8\nn_steps: 16\nbatch_size: 64\nopponents: {greedy: 1}\n")
    overrides = ["num_games=8", "ppo.n_steps=16", "ppo.batch_size=64", "ppo.opponents={greedy: 1}"]
    flat_overrides = ["num_games=8", "n_steps=16", "batch_size=64", "opponents={greedy: 1}"]
    configs = [
        load_config(sectioned),
        load_config(flat),
        load_config(None, overrides),
        load_config(None, flat_overrides),
    ]
    assert configs[0].ppo.batch_size == 64 and configs[0].ppo.opponents == {"greedy": 1.0}
    assert all(config == configs[0] for config in configs)


def test_an_override_wins_over_the_file_in_either_spelling(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("ppo: {learning_rate: 1.0e-3, opponents: {greedy: 1}}\nalphazero: {sims: 8}\n")
    assert load_config(path, ["learning_rate=2e-3"]).ppo.learning_rate == 2e-3
    assert load_config(path, ["learning_rate=2e-3", "ppo.learning_rate=4e-3"]).ppo.learning_rate == 4e-3
    assert load_config(path, ["opponents.random=1"]).ppo.opponents == {"greedy": 1.0, "random": 1.0}
    assert load_config(path, ["ppo.opponents.minimax:depth=2=0.5"]).ppo.opponents["minimax:depth=2"] == 0.5
    assert load_config(path, ["ppo={n_epochs: 2}"]).ppo.n_epochs == 2
    assert load_config(path, ["sims=16"]).alphazero.sims == 16


def test_a_flat_shared_field_goes_to_the_section_of_the_algorithm_also_when_given_last() -> None:
    config = load_config(None, ["learning_rate=1e-3", "batch_size=32", "algorithm=alphazero"])
    assert config.alphazero.learning_rate == 1e-3 and config.alphazero.batch_size == 32
    assert config.ppo.learning_rate == PPOConfig.learning_rate
    assert load_config(None, ["learning_rate=1e-3"]).ppo.learning_rate == 1e-3
    assert load_config(None, ["alphazero.learning_rate=1e-3"]).alphazero.learning_rate == 1e-3  # with ppo too


def test_the_variant_and_the_observation_are_resolved_once_and_saved_as_given() -> None:
    config = load_config(None, ["variant.squares=true", "variant.attributes=2", "observation=lookahead"])
    assert config.variant == Variant.make(squares=True, attributes=2)
    assert config.observation is OBSERVATION_KINDS["lookahead"]
    saved = yaml.safe_load(save_config(config))
    assert saved["variant"] == {"attributes": ["height", "colour"], "squares": True}
    assert saved["observation"] == "lookahead"
    assert yaml.safe_load(save_config(TrainConfig()))["variant"] == {}  # standard Quarto, as configs give it


# ---------------------------------------------------------------------------------------------------------
# A key in the wrong place: one line naming where it belongs, exit 2, nothing written
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["alphazero.n_steps=8"], "config key alphazero.n_steps: n_steps belongs to section ppo, not alphazero"),
        (
            ["rllib.learning_rate=1"],
            "rllib.learning_rate: learning_rate belongs to section ppo or alphazero",
        ),
        (["ppo.num_env_runners=2"], "config key ppo.num_env_runners: num_env_runners belongs to section rllib"),
        (["ppo.seed=1"], "config key ppo.seed: seed is a common field, given at the top level"),
        (["ppo.lerning_rate=1"], "unknown config key ppo.lerning_rate; allowed in section ppo: n_steps, "),
        (["ppo=3"], "config key ppo must be a mapping of the fields of section ppo"),
        (["seed.x=1"], "seed takes no dotted key; a dotted key is SECTION.FIELD (ppo.n_steps=..., alphazero."),
    ],
)
def test_a_key_in_the_wrong_section_is_one_line_naming_its_section(
    overrides: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = tmp_path / "run"
    line = refused([*overrides, "--out", str(run_dir)], capsys)
    assert line.startswith("quarto train: ") and message in line, line
    assert not run_dir.exists()


def test_a_misplaced_or_doubled_key_in_a_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("alphazero:\n  gamma: 0.9\n")
    line = refused(["--config", str(path), "--out", str(tmp_path / "run")], capsys)
    assert "config key alphazero.gamma: gamma belongs to section ppo, not alphazero (write ppo.gamma)" in line
    path.write_text("learning_rate: 1.0e-3\nppo:\n  learning_rate: 2.0e-3\n")
    with pytest.raises(ConfigError, match=r"config key ppo.learning_rate is given twice: as learning_rate at the top"):
        load_config(path)
    assert "did you mean 'learning_rate'?" in refused(["ppo.lerning_rate=1"], capsys)
    assert not (tmp_path / "run").exists()


def test_errors_name_a_sections_field_with_its_section() -> None:
    with pytest.raises(ConfigError, match=r"config field ppo\.batch_size must be <= num_games \* ppo\.n_steps"):
        load_config(None, ["num_games=2", "ppo.n_steps=2", "ppo.batch_size=8"])
    with pytest.raises(ConfigError, match=r"config field alphazero\.sims must be an integer >= 1"):
        load_config(None, ["alphazero.sims=0"])
    with pytest.raises(ConfigError, match=r"config field rllib\.cpus_per_env_runner must be float, got 'x'"):
        load_config(None, ["rllib.cpus_per_env_runner=x"])


# ---------------------------------------------------------------------------------------------------------
# --help-config: the common fields, then each section
# ---------------------------------------------------------------------------------------------------------
def test_help_config_lists_the_common_fields_then_each_section(capsys: pytest.CaptureFixture) -> None:
    assert train_module.main(["--help-config"]) == 0
    text = capsys.readouterr().out
    titles = [text.index(title) for title in ("Common fields", "Section ppo", "Section alphazero", "Section rllib")]
    assert titles == sorted(titles)
    for name in COMMON_FIELDS:
        assert f"\n{name} (" in text[: titles[1]], name
    for (section, fields), start, end in zip(SECTION_FIELDS.items(), titles[1:], [*titles[2:], len(text)], strict=True):
        for name in fields:
            assert f"\n{section}.{name} (" in text[start:end], f"{section}.{name}"
    assert "\nppo.learning_rate (float, default 0.0003, range > 0 and <= 1):\n    Adam step size" in text
    assert "\nvariant (dict[str, Any], default {}, fixed on --resume):" in text
    assert "\nalphazero.sims (int, default 64, range >= 1" in text


def test_every_field_has_its_documentation_and_the_sections_are_the_dataclasses() -> None:
    assert set(SECTIONS) == {"ppo", "alphazero", "rllib"} and SECTIONS["alphazero"] is AlphaZeroConfig
    for kind in (TrainConfig, *SECTIONS.values()):
        assert set(field_docs(kind)) == {field.name for field in dataclasses.fields(kind)}, kind
    defaults = TrainConfig().to_dict()
    assert [key for key in defaults if key not in SECTIONS] == list(COMMON_FIELDS)
    for section, fields in SECTION_FIELDS.items():
        assert list(defaults[section]) == list(fields)


def test_the_default_config_file_names_nothing_and_trains_the_default_run_of_before() -> None:
    """The dataclasses are the defaults: ``configs/default.yaml`` names nothing, so ``quarto train`` and
    ``load_config(None)`` are the same run -- and the run that the file used to spell out, to the bit."""
    assert yaml.safe_load(DEFAULT_CONFIG.read_text()) == {}
    assert load_config(DEFAULT_CONFIG) == TrainConfig() == load_config(None)
    assert load_config(OLD_DEFAULT_CONFIG) == TrainConfig()


def test_every_number_field_has_its_range_attached_to_it() -> None:
    """A range belongs to a section's field, not to a bare name: ppo.batch_size and alphazero.batch_size each
    have their own, and a field of the wrong range is named with its section."""
    for kind in (TrainConfig, *SECTIONS.values()):
        numbers = {name for name, hint in typing.get_type_hints(kind).items() if hint in (int, float)}
        assert numbers and set(field_ranges(kind)) == numbers, kind
    assert field_ranges(PPOConfig)["batch_size"] is not None and field_ranges(AlphaZeroConfig)["batch_size"]
    with pytest.raises(ConfigError, match=r"config field alphazero\.batch_size must be an integer >= 2"):
        load_config(None, ["algorithm=alphazero", "alphazero.batch_size=1"])


def test_checkpoints_record_the_config_in_sections_as_the_run_folder(tiny_run: tuple[Path, str]) -> None:
    run_dir, _ = tiny_run
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    for name in ("latest", "final", "best"):
        assert read_metadata(run_dir / "checkpoints" / f"{name}.zip")["config"] == saved, name
    assert saved["ppo"]["n_steps"] == 16 and "n_steps" not in saved
    assert "| ppo.n_steps | 16 |" in config_table(load_config(run_dir / "config.yaml"))  # TensorBoard's table too


def test_alphazero_has_its_own_backend_and_old_alphazero_runs_still_load() -> None:
    assert load_config(DATA.parent.parent / "configs" / "alphazero.yaml").backend == "torch"
    assert load_config(None, ["algorithm=alphazero"]).backend == "torch"
    assert load_config(None).backend == "sb3"
    with pytest.raises(ConfigError, match=r"config field backend must be one of \('torch', 'jax'\) with algor"):
        load_config(None, ["algorithm=alphazero", "backend=rllib"])
    old = DATA / "old_flat_configs" / "alphazero.yaml"
    recorded = yaml.safe_load(old.read_text())
    assert recorded["backend"] == "sb3" and load_config(old).backend == "torch"  # an old run folder's config.yaml
    metadata = {"config": recorded, "variant": {}, "observation": recorded["observation"]}  # an old checkpoint's
    check_unchanged_on_resume(load_config(old), metadata)  # the same backend: not a change
    with pytest.raises(ConfigError, match="config field backend cannot change on --resume"):
        old_ppo = {**metadata, "config": {**recorded, "algorithm": "ppo"}}  # a ppo run's backend sb3 stays sb3
        check_unchanged_on_resume(load_config(None, ["backend=rllib"]), old_ppo)


def test_the_network_design_is_fixed_on_resume() -> None:
    """Changing it loaded the checkpoint's weights into another network: a state_dict traceback."""
    trained = load_config(None, ["algorithm=alphazero"])
    metadata = {"config": trained.to_dict(), "variant": {}, "observation": trained.observation.name}
    check_unchanged_on_resume(load_config(None, ["algorithm=alphazero", "alphazero.sims=8"]), metadata)
    changed = load_config(None, ["algorithm=alphazero", "alphazero.network_design=hand"])
    with pytest.raises(
        ConfigError,
        match=r"^config field alphazero.network_design cannot change on --resume: the "
        r"checkpoint was trained with 'slots', this resume asks for 'hand'",
    ):
        check_unchanged_on_resume(changed, metadata)


def test_the_config_modules_load_without_torch_or_stable_baselines3() -> None:
    """Reading a config needs neither torch nor stable-baselines3: the schema and the loader import only light
    modules (a ``device: cuda`` config loads torch to ask it for a GPU)."""
    code = (
        "import sys, experiments.training.config_file; from experiments.training.config_file import load_config; "
        "load_config('configs/alphazero.yaml'); "
        "print(sorted({'torch', 'stable_baselines3', 'sb3_contrib'} & {*sys.modules}))"
    )
    repo = DATA.parent.parent
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo).stdout
    assert loaded.strip() == "[]"
