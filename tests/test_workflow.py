"""The whole Snakemake DAG on the smoke config, in a temp dir, through Snakemake's CLI.

One session-scoped run (conftest.smoke_run); the other tests ask Snakemake (dry runs) what it
would redo.
"""

from __future__ import annotations

import copy
import os
import re
import shutil

import pandas as pd
import pytest
import yaml

import lostmid.jobs
from lostmid import config as lostmid_config
from lostmid.tables.keys import without_measurements

from conftest import REPO, SCHEMA, lostmid_arguments, run_snakemake

pytestmark = pytest.mark.slow
# The longest tests (a minute or more each, no module fixture) are pytest-xdist groups of their own (conftest.py),
# so the two workers share them rather than one worker running the whole file at the end of the suite.
ALONE = pytest.mark.xdist_group


def planned_jobs(workdir, configfile=None, *targets) -> dict[str, int]:
    """Jobs per rule that a dry run would execute."""
    out = run_snakemake(workdir, "--dry-run", "--quiet", "rules", *targets, configfile=configfile).stdout
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^(\S+)\s+(\d+)$", out, re.M)
        if m.group(1) not in ("total", "all")
    }


def by_stage(jobs: dict[str, int]) -> dict[str, int]:
    """Jobs per stage: block rules (train_<block>, evaluate_<block>, ...) summed by their prefix."""
    stages: dict[str, int] = {}
    for rule, count in jobs.items():
        stage = next(
            (
                prefix
                for prefix in ("init", "train", "evaluate", "density_flow", "channels")
                if rule.startswith(prefix + "_")
            ),
            rule,
        )
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
    # the stages that ran as 59 jobs with one job per run and stage (the architectures and evidence stages and
    # the report's first screen came later)
    later = ("architectures", "evidence", "report_front")
    assert sum(count for stage, count in jobs.items() if not stage.startswith(later)) <= 31


def test_a_deleted_per_run_table_is_rebuilt_by_the_next_plain_run(smoke_run, tmp_path):
    """A table deleted by hand (or by Snakemake after a failed job) is planned again, even though
    the figures that read it are newer than their other inputs: every per-run table is a target. (On a copy:
    other workers read the session's run meanwhile.)"""
    _, workdir = copy_of(smoke_run, tmp_path)
    deleted = {
        "evaluate_balance_L8_M1_seeds0": workdir / "results/failure/balance/L8_M1_seed0.parquet",
        "train_baseline_L8_M1_seeds0-1": workdir / "results/train/baseline/L8_M1_seed1_step20.parquet",
        "evaluate_reweight_L8_M1_seeds0": workdir / "results/metrics/reweight/L8_M1_seed0.parquet",
        "channels_observability_L8_M1_seeds0": workdir / "results/cross_terms/observability/L8_M1_seed0.parquet",
    }
    for path in deleted.values():
        path.unlink()
    jobs = planned_jobs(workdir)
    # (the retrained segment also reruns its run's analyses: at least one job per rule)
    assert {rule for rule in deleted if jobs.get(rule, 0) >= 1} == set(deleted), jobs


def test_more_steps_train_only_the_new_segments(smoke_run, tmp_path):
    workdir, config = smoke_run
    config = copy.deepcopy(config)
    config["train"]["steps"] += config["train"]["every"]
    longer = tmp_path / "longer.yaml"
    longer.write_text(yaml.safe_dump(config))
    jobs = by_stage(planned_jobs(workdir, configfile=longer))
    assert jobs["train"] == len(lostmid.jobs.blocks(lostmid_config.validate(config)))  # one new segment per block
    assert "init" not in jobs


def test_a_density_flow_key_reruns_the_flow_check_and_what_reads_it_only(smoke_run, tmp_path):
    """Snakemake's own dry run agrees with tests/test_rule_params.py: the evaluation, which reads
    other keys of the influence block, is not rerun."""
    workdir, config = smoke_run
    config = copy.deepcopy(config)
    config["influence"]["flow_step"] = [0.001, 0.0001]
    changed = tmp_path / "flow.yaml"
    changed.write_text(yaml.safe_dump(config))
    # the report's first screen reads the evidence table and the figures
    expected = {"density_flow", "evidence", "figures", "report_front"}
    assert set(by_stage(planned_jobs(workdir, configfile=changed))) == expected


def test_a_new_seed_retrains_its_block_only(smoke_run, tmp_path):
    workdir, config = smoke_run
    config = copy.deepcopy(config)
    config["grid"][1]["seeds"].append(99)  # the block of every variant but baseline
    more = tmp_path / "more.yaml"
    more.write_text(yaml.safe_dump(config))
    jobs = planned_jobs(workdir, configfile=more)
    segments = config["train"]["steps"] // config["train"]["every"]
    assert jobs["init_balance_L8_M1_seeds0_99"] == 1 and jobs["train_balance_L8_M1_seeds0_99"] == segments
    assert not any(rule.startswith(("init_baseline", "train_baseline", "evaluate_baseline")) for rule in jobs)


def test_seed_batches_train_their_seeds_in_one_job_per_segment(tmp_path):
    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
    config["variants"]["baseline"]["train"] = {"seed_batch": 2}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    jobs = planned_jobs(tmp_path)
    segments = config["train"]["steps"] // config["train"]["every"]
    assert jobs["train_baseline_L8_M1_seeds0-1"] == segments

    last = [f"results/checkpoints/baseline/L8_M1_seed{seed}/step{config['train']['steps']}.pt" for seed in (0, 1)]
    run_snakemake(tmp_path, *last)
    assert all((tmp_path / path).is_file() for path in last)
    log = (tmp_path / "results" / "logs" / "train" / "baseline" / "L8_M1_seeds0-1_step20.log").read_text()
    assert "seeds [0, 1]" in log  # one vmapped batch
    rerun = run_snakemake(tmp_path, *last)
    assert "Nothing to be done" in rerun.stdout + rerun.stderr


def test_a_bad_config_stops_snakemake_with_the_key_named(tmp_path):
    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
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
            config_settings=ConfigSettings(configfiles=[REPO / "tests" / "smoke.yaml", override]),
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
        assert any(rule.name.startswith("train_baseline_L8_M1_seeds") for rule in rules)
    # threads default to 1 when left out, so read the declarations themselves (rules in an `if`
    # or a `for` are indented)
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        for block in re.split(r"\n(?=[ ]*rule \w+:)", smk.read_text())[1:]:
            assert re.search(r"\n[ ]+threads:", block), f"{smk.name}: {block.splitlines()[0]} declares no threads"


@ALONE("workflow_kill_9")
def test_a_plain_rerun_after_kill_9_completes(tmp_path):
    """kill -9 Snakemake while a training job runs: the job, orphaned, still writes its outputs,
    which Snakemake's metadata then marks incomplete. `snakemake --unlock` and a plain rerun
    (the workflow profile sets rerun-incomplete) finish the target, leaving no temp file."""
    import signal
    import subprocess
    import sys
    import time

    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    target = "results/failure/baseline/L8_M1_seed0.parquet"
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--cores",
        "1",
        target,
        "--configfile",
        str(tmp_path / "config.yaml"),
    ]
    snakemake = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    log = tmp_path / "results/logs/train/baseline/L8_M1_seeds0-1_step10.log"  # written as <log>.attempt1 while it runs
    outputs = [
        tmp_path / "results/checkpoints/baseline/L8_M1_seed0/step10.pt",
        tmp_path / "results/train/baseline/L8_M1_seed0_step10.parquet",
    ]
    try:
        deadline = time.monotonic() + 120
        while not list(log.parent.glob(log.name + "*")) and snakemake.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not log.exists() and list(log.parent.glob(log.name + "*")), (
            "the training segment did not start, or has ended"
        )
    finally:
        os.kill(snakemake.pid, signal.SIGKILL)  # Snakemake only, as kill -9 <pid> does
        snakemake.wait()
    deadline = time.monotonic() + 120
    while not all(path.exists() for path in outputs) and time.monotonic() < deadline:
        time.sleep(0.1)  # the orphaned job finishes its outputs
    assert all(path.exists() for path in outputs)
    time.sleep(1)  # and exits

    locked = run_snakemake(tmp_path, target, check=False)
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr  # what the README says to do
    run_snakemake(tmp_path, "--unlock")
    killed_at = outputs[0].stat().st_mtime_ns
    run_snakemake(tmp_path, target)  # plain: no --rerun-incomplete on the command line
    assert outputs[0].stat().st_mtime_ns > killed_at  # the interrupted job was redone
    assert (tmp_path / target).is_file()
    assert not list((tmp_path / "results").rglob("*.tmp"))


BROKEN_YAML = "train:\n  steps: 20\n  every: [10\nmodel:\n  d_model: 8\n"


def test_a_yaml_error_in_the_workflow_config_names_the_file_and_line(tmp_path):
    """The workflow's own config/config.yaml (relative to the working directory; the config when no
    --configfile is given) is read by the Snakefile before Snakemake's `configfile:`, whose message
    names neither file nor line."""
    import subprocess
    import sys

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(BROKEN_YAML)
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--dry-run",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    assert (
        "config file config/config.yaml, line 4, column 6: not valid YAML: while parsing a flow sequence"
        " started at line 3, column 10"
    ) in result.stdout + result.stderr


def test_a_yaml_error_in_a_configfile_is_located_by_lostmid_check_config(tmp_path, capsys):
    """Snakemake parses --configfile files itself, before the Snakefile runs, and says only that
    the file is not valid YAML; `lostmid check-config FILE` names the line (README, Configuration)."""
    from lostmid.cli import main as cli

    bad = tmp_path / "bad.yaml"
    bad.write_text(BROKEN_YAML)
    result = run_snakemake(tmp_path, "--dry-run", configfile=bad, check=False)
    assert result.returncode != 0 and "not valid JSON or YAML" in result.stdout + result.stderr
    assert (
        cli.main(["check-config", "--base", str(REPO / "config" / "config.yaml"), "--schema", str(SCHEMA), str(bad)])
        == 2
    )
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"lostmid check-config: error: config file {bad}, line 4, column 6: not valid YAML:"
        " while parsing a flow sequence started at line 3, column 10: expected ',' or ']', but got ':'"
    )
    assert (
        cli.main(
            [
                "check-config",
                "--base",
                str(REPO / "config" / "config.yaml"),
                "--schema",
                str(SCHEMA),
                str(REPO / "tests" / "smoke.yaml"),
            ]
        )
        == 0
    )


def test_every_table_folder_holds_one_table(smoke_run):
    """pd.read_parquet(folder) must read every file of a folder with the same columns: two
    tables in one folder (bias_fit/, algebraic/ before) came out as one with NaN-padded rows."""
    import pyarrow.parquet as pq

    workdir, _ = smoke_run
    folders = {}
    for path in (workdir / "results").rglob("*.parquet"):
        top = path.relative_to(workdir / "results").parts[0]
        folders.setdefault(top, set()).add(tuple(pq.read_schema(path).names))
    assert {
        "bias_fit_matrix",
        "bias_fit_iterations",
        "bias_fit_profiles",
        "algebraic_table",
        "algebraic_profiles",
        "algebraic_probes",
        "failure",
        "train",
        "remedies_summary",
    } <= set(folders)
    assert {top: schemas for top, schemas in folders.items() if len(schemas) > 1} == {}


@ALONE("workflow_retries")
def test_a_retried_job_keeps_the_log_of_every_attempt(tmp_path):
    """With --retries (the Slurm profile sets 2) a retry must not lose the first attempt's log:
    Snakemake deletes the rule's log before each attempt, so each attempt writes its own
    {log}.attempt<N>, and the log itself is the copy of the last attempt."""
    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    starts = [tmp_path / f"results/checkpoints/baseline/L8_M1_seed{seed}/step0.pt" for seed in (0, 1)]
    for start in starts:
        start.mkdir(parents=True)  # every attempt of the block's next segment fails on it ("does not exist": a
        # damaged file would be moved aside by the first attempt, and a retry would find its input missing)
    target = "results/checkpoints/baseline/L8_M1_seed0/step10.pt"
    log = tmp_path / "results/logs/train/baseline/L8_M1_seeds0-1_step10.log"

    def attempts():
        found = {}
        for path in [log, *log.parent.glob(log.name + ".attempt*")]:
            text = path.read_text()
            headers = re.findall(
                r"^== log results/logs/train/baseline/L8_M1_seeds0-1_step\d+.log, attempt (\d+), .* ==$", text, re.M
            )
            assert len(headers) == 1 and "lostmid train: error: " in text, (path, text)
            found[path.name] = headers[0]
        return found

    result = run_snakemake(tmp_path, target, "--retries", "1", check=False)
    assert result.returncode != 0
    assert attempts() == {log.name: "2", log.name + ".attempt1": "1", log.name + ".attempt2": "2"}
    # the failed job printed its log's error line, not only Snakemake's report of the command
    assert re.search(
        r"^lostmid train: error: .*\(log: results/logs/train/baseline/L8_M1_seeds0-1_step10\.log\)$",
        result.stderr,
        re.M,
    ), result.stderr[-3000:]
    # a new run of the job (not a retry) starts afresh
    assert run_snakemake(tmp_path, target, check=False).returncode != 0
    assert attempts() == {log.name: "1", log.name + ".attempt1": "1"}
    # a successful attempt leaves the log only
    for start in starts:
        start.rmdir()
    run_snakemake(tmp_path, target)
    assert sorted(p.name for p in log.parent.iterdir() if p.name.startswith(log.name)) == [log.name]
    assert re.findall(
        r"^== log results/logs/train/baseline/L8_M1_seeds0-1_step\d+.log, attempt (\d+)", log.read_text(), re.M
    ) == ["1"]


# --- A damaged input is repaired, not propagated ----------------------------------------

BALANCE_TABLES = [
    f"results/{name}/balance/L8_M1_seed0.parquet"
    for name in ("failure", "influence", "metrics", "channels", "cross_terms", "conditions")
]


def copy_of(smoke_run, tmp_path):
    """A copy of the session's finished smoke run (outputs, times and Snakemake's metadata)."""
    workdir, config = smoke_run
    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    return workdir, copy


def moved_aside(workdir, damage):
    """Damage one input of the run in ``workdir`` as ``damage`` names, run Snakemake on the balance arm's tables
    and the remedies table, and check that the job that reads the damaged file said so in one line, moved the
    file aside and failed."""
    checkpoint = workdir / "results/checkpoints/balance/L8_M1_seed0/step10.pt"
    if damage == "truncated checkpoint":
        os.truncate(checkpoint, 3000)
        damaged, line = checkpoint, "is corrupt or truncated"
    elif damage == "checkpoint of another run":
        shutil.copy(workdir / "results/checkpoints/reweight/L8_M1_seed0/step10.pt", checkpoint)
        damaged, line = checkpoint, "belongs to another run"
    elif damage == "zero-byte table":
        damaged, line = workdir / BALANCE_TABLES[0], "is not a readable Parquet file"
        damaged.write_bytes(b"")
    else:
        damaged, line = workdir / BALANCE_TABLES[2], "lacks the column(s) ['LIM', 'E_inf']"
        pd.read_parquet(damaged).rename(columns={"E_inf": "x", "LIM": "y"}).to_parquet(damaged)
    targets = [*BALANCE_TABLES, "results/remedies/remedies.parquet"]
    failed = run_snakemake(workdir, *targets, check=False)
    aside = damaged.with_name(f".{damaged.name}.damaged")
    assert failed.returncode != 0 and not damaged.exists() and aside.is_file()
    printed = [text for text in failed.stderr.splitlines() if f"moved it aside to {aside.relative_to(workdir)}" in text]
    assert printed and line in printed[0] and "(log: results/logs/" in printed[0], failed.stderr[-3000:]


@pytest.mark.parametrize("damage", ["checkpoint of another run", "renamed columns"])
def test_a_damaged_input_is_named_in_one_line_and_moved_aside(smoke_run, tmp_path, damage):
    """A checkpoint of another run, a table with renamed columns: the job that reads it says so in one line,
    moves it aside and fails (the next plain run rebuilds it as the test below shows for the other damage of
    each kind of file)."""
    moved_aside(copy_of(smoke_run, tmp_path)[1], damage)


@ALONE("workflow_rebuild")
def test_one_plain_rerun_rebuilds_a_damaged_checkpoint_and_table_and_every_table_after_them(smoke_run, tmp_path):
    """A zero-byte table, then a truncated checkpoint, each named in one line and moved aside by the job that
    reads it (``moved_aside``); then one plain rerun rebuilds both and everything after them, equal to the
    untouched run. A plain run (the default target: every checkpoint and per-run table) is the whole DAG's
    check: with only the tables as targets Snakemake would not rebuild the checkpoints, whose consumers are up
    to date. Both damages in one copy: one plain rerun checks them together."""
    reference, workdir = copy_of(smoke_run, tmp_path)
    moved_aside(workdir, "zero-byte table")
    moved_aside(workdir, "truncated checkpoint")  # a job of its chain reads it while rebuilding the table
    run_snakemake(workdir)
    trained = [f"results/train/balance/L8_M1_seed0_step{step}.parquet" for step in (10, 20)]
    for table in [*BALANCE_TABLES, *trained, "results/remedies/remedies.parquet"]:
        pd.testing.assert_frame_equal(
            *(without_measurements(pd.read_parquet(folder / table)) for folder in (workdir, reference))
        )
    assert (workdir / "results/checkpoints/balance/L8_M1_seed0/step10.pt").is_file()


def test_the_smoke_config_stands_alone_whatever_the_working_directory_holds(smoke_run, tmp_path):
    """`--configfile tests/smoke.yaml` run where config/config.yaml exists (the checkout) plans the
    smoke DAG, not the smoke keys merged onto the default (1500-step baselines, 43 jobs)."""
    workdir, config = smoke_run
    beside_default = tmp_path / "checkout"
    (beside_default / "config").mkdir(parents=True)
    shutil.copy(REPO / "config" / "config.yaml", beside_default / "config" / "config.yaml")
    alone = planned_jobs(tmp_path / "empty", REPO / "tests" / "smoke.yaml", "--forceall")
    assert planned_jobs(beside_default, REPO / "tests" / "smoke.yaml", "--forceall") == alone
    assert alone["train_baseline_L8_M1_seeds0-1"] == config["train"]["steps"] // config["train"]["every"]
    assert sum(alone.values()) == 35  # README, Performance


def test_a_key_written_twice_in_a_configfile_stops_snakemake_naming_the_line(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text((REPO / "tests" / "smoke.yaml").read_text() + "train: {batch_size: 8}\n")
    result = run_snakemake(tmp_path, "--dry-run", configfile=twice, check=False)
    assert result.returncode != 0
    assert re.search(
        rf"config file {twice}, line \d+, column 1: not valid YAML: key 'train' appears twice in one mapping",
        result.stdout + result.stderr,
    )


def test_every_per_run_table_has_its_declared_columns(smoke_run):
    from lostmid.tables import keys

    workdir, _ = smoke_run
    for name in keys.RUN_TABLE_COLUMNS:
        if name == "observability":  # the loss-free profiles run only for influence.trace_variants (none here)
            continue
        files = sorted((workdir / "results" / name).rglob("*.parquet"))
        assert files and list(keys.read(files, name).columns) == list(keys.RUN_TABLE_COLUMNS[name]), name


def lostmid_commands(workdir, dry_run: str) -> list[str]:
    """The ``lostmid`` command of each job a dry run with --printshellcmds shows, its arguments read
    from the job's arguments file (``lostmid --log LOG --attempt N @ARGS``) and joined by spaces."""
    shells = [line.removeprefix("Shell command: ") for line in dry_run.splitlines()]
    return [
        " ".join(["lostmid", *lostmid_arguments(workdir, shell)]) for shell in shells if shell.startswith("lostmid ")
    ]


def test_each_bias_fit_job_runs_its_own_variant_with_the_training_seeds(tmp_path):
    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
    config["variants"]["debiased_context"] = {"remedy": {"kind": "bias", "fit": {"positions": "context"}}}
    config["grid"][1]["variants"].append("debiased_context")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = run_snakemake(
        tmp_path,
        "--dry-run",
        "--printshellcmds",
        "results/bias_fit_summary/debiased_L8_M1.parquet",
        "results/bias_fit_summary/debiased_context_L8_M1.parquet",
    ).stdout
    commands = [line for line in lostmid_commands(tmp_path, out) if line.startswith("lostmid bias-fit ")]
    assert len(commands) == 2
    for variant in ("debiased", "debiased_context"):
        (command,) = [c for c in commands if f"--out-summary results/bias_fit_summary/{variant}_L8_M1.parquet" in c]
        assert f"--variant {variant} " in command and "--training-seeds 0 1 " in command
        assert ('"positions":"context"' in command) == (variant == "debiased_context")


def test_every_job_that_reads_a_bias_variants_checkpoints_is_given_its_fitted_bias(tmp_path):
    """Training, evaluation, channels, density flow, loss-free profiles and the architectures stage's
    flag comparison: each checks the checkpoints' recorded B digest against results/bias_tensors."""
    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
    config["influence"] = {**config.get("influence", {}), "flow_variants": ["debiased"], "trace_variants": ["debiased"]}
    config["architectures"]["flag"] = {**config["architectures"].get("flag", {}), "variants": ["debiased"]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = run_snakemake(tmp_path, "--dry-run", "--printshellcmds", "--forceall").stdout
    commands = [tuple(line.removeprefix("lostmid ").split(" ", 1)) for line in lostmid_commands(tmp_path, out)]
    readers = {(name, args) for name, args in commands if name != "init" and "results/checkpoints/debiased/" in args}
    assert {name for name, _ in readers} == {
        "train",
        "evaluate",
        "channels",
        "density-flow",
        "observability",
        "architectures-flag",
    }
    for name, args in readers:
        assert "results/bias_tensors/debiased_L8_M1.pt" in args, name
