"""Which rules a changed config key reruns: each rule passes its command exactly the keys of the
settings class the command builds (lostmid.jobs.settings_json), so a key reruns exactly the
rules that read it and no command reads a default in place of a configured value.

Snakemake reruns a job whose params changed (its `params` rerun trigger); the rules' params are
read here from the parsed workflow (Snakemake's API, no job runs), once per changed key of the
smoke config. tests/test_workflow.py checks one of them against Snakemake's own dry run.
"""

from __future__ import annotations

import copy
import json
import os
import re

import pytest
import yaml

from lostmid import config as cfg
from lostmid.analysis.settings import FlowSettings, InfluenceSettings, InitSweepSettings, StructuralSettings

from conftest import REPO

# Every key of the influence block, a new valid value for it on the smoke config, and the stages
# whose rules read it (a block stage stands for its rules `<stage>_<block>`).
CHANGED = {
    "batch_per_position": (3, {"evaluate"}),
    "seed": (2100, {"evaluate", "density_flow"}),  # the flow check draws the evaluation batch's sequences
    "deltas": ([0.15, 0.2], {"evaluate"}),
    "chunk": (512, {"evaluate"}),
    "flow_step": ([0.001, 0.0001], {"density_flow"}),
    "flow_batch_per_position": (2, {"density_flow"}),
    "init_sweep.L": (9, {"influence_baselines"}),
    "init_sweep.depths": ([1, 3], {"influence_baselines"}),
    "init_sweep.seeds": ([0, 1], {"influence_baselines"}),
    "init_sweep.batch_per_position": (2, {"influence_baselines"}),
    "init_sweep.seed": (2011, {"influence_baselines"}),
    "structural.L": ([8, 12], {"influence_baselines"}),
    "structural.depths": ([1], {"influence_baselines"}),
    "structural.epsilon": (0.5, {"influence_baselines"}),
    "structural.d_model": (6, {"influence_baselines"}),
    "structural.heads": (1, {"influence_baselines"}),
    "structural.batch_per_position": (2, {"influence_baselines"}),
    "structural.seed": (2012, {"influence_baselines"}),
}
BLOCK_STAGE = re.compile(r"^(init|train|evaluate|density_flow|observability|channels)_.*_L\d+_M\d+_seeds[\d_-]+$")


def smoke_config() -> dict:
    return yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())


def with_key(config: dict, key: str, value) -> dict:
    config = copy.deepcopy(config)
    block = config["influence"]
    *outer, last = key.split(".")
    for part in outer:
        block = block[part]
    block[last] = value
    return config


def rule_params(tmp_path, config: dict) -> dict[str, dict[str, str]]:
    """Rule name -> its params (the JSON strings the commands get) as Snakemake parses the workflow."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cwd = os.getcwd()  # Snakemake moves into the working directory
    try:
        with SnakemakeApi(OutputSettings(quiet=True)) as api:
            workflow = api.workflow(
                resource_settings=ResourceSettings(),
                config_settings=ConfigSettings(configfiles=[path]),
                storage_settings=StorageSettings(),
                snakefile=REPO / "Snakefile",
                workdir=tmp_path,
            )
            return {
                rule.name: {name: value for name, value in rule.params.items() if isinstance(value, str)}
                for rule in workflow._workflow.rules
            }
    finally:
        os.chdir(cwd)


def stage(rule: str) -> str:
    match = BLOCK_STAGE.match(rule)
    return match.group(1) if match else rule


@pytest.fixture(scope="module")
def base_params(tmp_path_factory):
    return rule_params(tmp_path_factory.mktemp("base"), smoke_config())


def test_the_test_changes_every_key_of_the_influence_block_but_the_flow_variants():
    block = cfg.validate(smoke_config())["influence"]
    keys = {f"{key}.{inner}" for key, sub in block.items() if isinstance(sub, dict) for inner in sub}
    keys |= {key for key, value in block.items() if not isinstance(value, dict)}
    # which blocks get the flow check and the loss-free profiles: a rule more or less
    assert keys - set(CHANGED) == {"flow_variants", "trace_variants", "trace_batch_per_position"}


@pytest.mark.parametrize("key", sorted(CHANGED))
def test_a_changed_influence_key_reruns_exactly_the_rules_that_read_it(key, base_params, tmp_path):
    value, readers = CHANGED[key]
    params = rule_params(tmp_path, with_key(smoke_config(), key, value))
    assert params.keys() == base_params.keys()
    changed = {stage(rule) for rule in params if params[rule] != base_params[rule]}
    assert changed == readers


def test_every_command_builds_from_its_params_the_settings_the_config_gives(tmp_path):
    """With every key of the influence block changed, the settings each command builds from the JSON
    its rule passes equal those of the config's block: none holds a default in place of a value."""
    config = smoke_config()
    for key, (value, _) in CHANGED.items():
        config = with_key(config, key, value)
    params = rule_params(tmp_path, config)
    block = cfg.validate(copy.deepcopy(config))["influence"]

    def built(cls, rule, name, key="influence"):
        return cfg.settings_from_section(cls, json.loads(params[rule][name]), key)

    evaluate = next(rule for rule in params if stage(rule) == "evaluate")
    flow = next(rule for rule in params if stage(rule) == "density_flow")
    assert built(InfluenceSettings, evaluate, "influence") == cfg.settings_from_section(
        InfluenceSettings, block, "influence"
    )
    assert built(FlowSettings, flow, "settings") == cfg.settings_from_section(FlowSettings, block, "influence")
    for cls, sub in ((InitSweepSettings, "init_sweep"), (StructuralSettings, "structural")):
        expected = cfg.settings_from_section(cls, block[sub], f"influence.{sub}")
        assert built(cls, "influence_baselines", sub, f"influence.{sub}") == expected


def test_each_per_block_check_runs_its_own_command(tmp_path):
    """The density-flow and loss-free-profile rules come from one loop (influence.smk, BLOCK_CHECKS);
    Snakemake reads a shell when its job runs, after the loop, so each rule's command is a param."""
    config = with_key(smoke_config(), "trace_variants", ["baseline"])
    params = rule_params(tmp_path, config)
    commands = {stage(rule): params[rule]["command"] for rule in params if "command" in params[rule]}
    assert commands == {"density_flow": "density-flow", "observability": "observability"}
