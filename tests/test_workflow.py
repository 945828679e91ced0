"""The whole Snakemake DAG on the smoke config, in a temp dir, through Snakemake's CLI.

One session-scoped run (conftest.smoke_run); the other tests ask Snakemake (dry runs) what it
would redo.
"""

from __future__ import annotations

import copy
import os
import re

import pandas as pd
import pytest
import yaml

from lostmid import config as lostmid_config
from lostmid import workflow

from conftest import REPO, run_snakemake

pytestmark = pytest.mark.slow


def planned_jobs(workdir, configfile=None, *targets) -> dict[str, int]:
    """Jobs per rule that a dry run would execute."""
    out = run_snakemake(workdir, "--dry-run", "--quiet", "rules", *targets, configfile=configfile).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", out, re.M) if m.group(1) not in ("total", "all")}


def by_stage(jobs: dict[str, int]) -> dict[str, int]:
    """Jobs per stage: block rules (train_<block>, evaluate_<block>, ...) summed by their prefix."""
    stages: dict[str, int] = {}
    for rule, count in jobs.items():
        stage = next((prefix for prefix in ("init", "train", "evaluate", "density_flow", "channels") if rule.startswith(prefix + "_")), rule)
        stages[stage] = stages.get(stage, 0) + count
    return stages


def test_the_dag_writes_every_table_with_the_grid_keys(smoke_run):
    workdir, config = smoke_run
    failure = pd.read_parquet(workdir / "results" / "failure")
    train = pd.read_parquet(workdir / "results" / "train")
    for table in (failure, train):
        assert {"variant", "L", "depth", "seed", "step"} <= set(table.columns)
    steps = config["train"]["steps"]
    assert sorted(failure["step"].unique()) == list(range(0, steps + 1, config["train"]["every"]))
    assert sorted(train["step"].unique()) == list(range(1, steps + 1))
    assert set(failure["seed"]) == set(config["grid"][0]["seeds"])
    assert (workdir / "results" / "figures" / "failure_by_position.png").stat().st_size > 10_000


def test_every_job_left_a_log_and_a_benchmark(smoke_run):
    workdir, _ = smoke_run
    logs = list((workdir / "results" / "logs").rglob("*.log"))
    benchmarks = list((workdir / "results" / "benchmarks").rglob("*.tsv"))
    assert logs and len(logs) == len(benchmarks)


def test_a_second_run_has_nothing_to_do(smoke_run):
    workdir, _ = smoke_run
    assert planned_jobs(workdir) == {}


def test_one_job_per_block_of_seeds_and_stage(smoke_run):
    workdir, config = smoke_run
    blocks = len({(run.variant, run.L, run.depth) for run in lostmid_config.runs(config)})
    jobs = by_stage(planned_jobs(workdir, None, "--forceall"))
    segments = config["train"]["steps"] // config["train"]["every"]
    assert jobs["init"] == blocks and jobs["train"] == blocks * segments and jobs["evaluate"] == blocks
    assert jobs["train"] == blocks * segments and "train_segment" not in jobs
    assert sum(jobs.values()) <= 33  # 59 with one job per run and stage


def test_more_steps_train_only_the_new_segments(smoke_run, tmp_path):
    workdir, config = smoke_run
    config = copy.deepcopy(config)
    config["train"]["steps"] += config["train"]["every"]
    longer = tmp_path / "longer.yaml"
    longer.write_text(yaml.safe_dump(config))
    jobs = by_stage(planned_jobs(workdir, configfile=longer))
    assert jobs["train"] == len(workflow.blocks(config))  # one new segment per block
    assert "init" not in jobs


def test_a_new_seed_retrains_its_block_only(smoke_run, tmp_path):
    workdir, config = smoke_run
    config = copy.deepcopy(config)
    config["grid"][1]["seeds"].append(99)  # the block of every variant but baseline
    more = tmp_path / "more.yaml"
    more.write_text(yaml.safe_dump(config))
    jobs = planned_jobs(workdir, configfile=more)
    segments = config["train"]["steps"] // config["train"]["every"]
    assert jobs["init_balance_L8_M1_seeds_0_99"] == 1 and jobs["train_balance_L8_M1_seeds_0_99"] == segments
    assert not any(rule.startswith(("init_baseline", "train_baseline", "evaluate_baseline")) for rule in jobs)


def test_seed_batches_train_their_seeds_in_one_job_per_segment(tmp_path):
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["variants"]["baseline"]["train"] = {"seed_batch": 2}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    jobs = planned_jobs(tmp_path)
    segments = config["train"]["steps"] // config["train"]["every"]
    assert jobs["train_baseline_L8_M1_seeds_0_1"] == segments

    last = [f"results/checkpoints/baseline/L8_M1_seed{seed}/step{config['train']['steps']}.pt" for seed in (0, 1)]
    run_snakemake(tmp_path, *last)
    assert all((tmp_path / path).is_file() for path in last)
    log = (tmp_path / "results" / "logs" / "train" / "baseline" / "L8_M1_seeds0-1_step20.log").read_text()
    assert "seeds [0, 1]" in log  # one vmapped batch
    rerun = run_snakemake(tmp_path, *last)
    assert "Nothing to be done" in rerun.stdout + rerun.stderr


def test_a_bad_config_stops_snakemake_with_the_key_named(tmp_path):
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["train"]["every"] = 7
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "--dry-run", configfile=bad, check=False)
    assert result.returncode != 0
    assert "train.every=7 does not divide train.steps=20" in result.stdout + result.stderr


@pytest.mark.parametrize("seed_batch", [1, 2], ids=["per-run training", "seed batches"])
def test_every_rule_declares_log_benchmark_threads_resources_and_conda(tmp_path, seed_batch):
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    override = tmp_path / "seed_batch.yaml"
    override.write_text(yaml.safe_dump({"train": {"seed_batch": seed_batch}}))
    cwd = os.getcwd()  # Snakemake moves into the working directory
    with SnakemakeApi(OutputSettings(quiet=True)) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(),
            config_settings=ConfigSettings(configfiles=[REPO / "config" / "smoke.yaml", override]),
            storage_settings=StorageSettings(),
            snakefile=REPO / "Snakefile",
            workdir=tmp_path,
        )
        rules = [rule for rule in workflow._workflow.rules if rule.name != "all"]
        missing = {
            rule.name: [
                what
                for what, present in {
                    "log": bool(rule.log),
                    "benchmark": rule.benchmark is not None,
                    "mem_mb": "mem_mb" in rule.resources,
                    "runtime": "runtime" in rule.resources,
                    "conda": rule.conda_env is not None,
                }.items()
                if not present
            ]
            for rule in rules
        }
    os.chdir(cwd)
    assert len(rules) > 20
    assert {name: what for name, what in missing.items() if what} == {}
    if seed_batch > 1:
        assert any(rule.name.startswith("train_baseline_L8_M1_seeds_") for rule in rules)
    # threads default to 1 when left out, so read the declarations themselves (rules in an `if`
    # or a `for` are indented)
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        for block in re.split(r"\n(?=[ ]*rule\b)", smk.read_text())[1:]:
            assert re.search(r"\n[ ]+threads:", block), f"{smk.name}: {block.splitlines()[0]} declares no threads"
