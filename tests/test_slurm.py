"""The Slurm profile, for real: a one-node Slurm cluster on localhost runs part of the smoke DAG.

Three layers:
- without a cluster: the profile asks one GPU for the rules that run models, none for plots
  and tables, and names every rule that takes ``--device`` (as Snakemake itself resolves the
  resources in a dry run); the library logs when a job was given a GPU torch cannot see;
- with a cluster (root, Debian packages slurm-wlm and munge installable; else skipped with the
  reason): ``scripts/slurm_cluster.sh`` starts munged, slurmctld and slurmd in a temp folder
  with two fake GPUs, ``snakemake --profile profiles/slurm`` runs the targets below, and the
  test checks that every job ran as a Slurm job, that Slurm gave a GPU to exactly the GPU
  rules, and that the tables equal a local run's. The daemons are stopped by their pid.

The cluster run is restricted to one run's failure table (init, two training segments,
failure: four GPU jobs in a chain) plus the algebraic probe table (a CPU job alongside): each
Slurm job starts Snakemake twice (the batch script and its job step) besides the rule's own
command, so the full smoke DAG would take many minutes on a 2-core machine.
Set LOSTMID_SKIP_SLURM=1 to skip it (it installs Debian packages when run as root).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO
from lostmid.core import devices

SCRIPT = REPO / "scripts" / "slurm_cluster.sh"
PROFILE = REPO / "profiles" / "slurm"
TARGETS = ["results/failure/baseline/L8_M1_seed0.parquet", "results/algebraic_probes/probes.parquet"]
# Measurements of the machine (seconds_per_step, peak_mem_mb, max_rss_mb, time_ratio,
# max_rss_ratio, ...) differ between any two runs; everything else must not. Long tables name
# them in a column (remedies_summary's `quantity`): those rows are measured too.
MEASURED = re.compile(r"seconds|time|mem|rss")
LONG_FORMAT_NAMES = ("quantity",)


def unmeasured(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without its measured columns and without the measured rows of a long table."""
    for name in LONG_FORMAT_NAMES:
        if name in table.columns:
            table = table[~table[name].astype(str).str.contains(MEASURED)]
    return table[[c for c in table.columns if not MEASURED.search(c)]].reset_index(drop=True)


def snakemake(workdir: Path, *args, env=None, timeout=300) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir)]
    command += ["--configfile", str(workdir / "config.yaml"), *args]
    # A new session, so a timeout can stop Snakemake and everything it started.
    process = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        out, _ = process.communicate()
        raise AssertionError(f"snakemake did not finish within {timeout} s:\n{out[-5000:]}")
    return subprocess.CompletedProcess(command, process.returncode, out, "")


def dry_run_jobs(workdir: Path, *args) -> list[dict]:
    """Every job of a dry run: its rule, resources (as Snakemake resolved them) and shell command."""
    result = snakemake(workdir, "--dry-run", *args, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    jobs = []
    for block in re.split(r"^(?=(?:local)?rule \w+:$)", result.stdout, flags=re.M)[1:]:
        rule = re.match(r"(?:local)?rule (\w+):", block).group(1)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        shell = re.search(r"^Shell command: (.*)$", block, re.M)
        jobs.append({
            "rule": rule,
            "resources": dict(kv.split("=", 1) for kv in resources.group(1).split(", ")) if resources else {},
            "shell": shell.group(1) if shell else "",
        })
    return jobs


@pytest.fixture
def smoke_workdir(tmp_path, smoke_config):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(smoke_config))
    return tmp_path


# --- without a cluster -------------------------------------------------------------------------


MODEL_RULES = ("init_", "train_", "evaluate_", "density_flow_", "channels_", "bias_fit", "influence_baselines")


def is_model_rule(rule: str) -> bool:
    return rule.startswith(MODEL_RULES)


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_the_slurm_profile_asks_a_gpu_for_the_model_rules_only(smoke_workdir, smoke_config, device):
    """Training, evaluation, influence, channels and remedy fits ask for one GPU (sbatch --gpus=1)
    unless the config pins the CPU; figures, tables and the algebraic simulations never do.
    Checked on Snakemake's own resolution of the resources under the Slurm profile, for every
    job of the smoke DAG."""
    (smoke_workdir / "config.yaml").write_text(yaml.safe_dump({**smoke_config, "device": device}))
    jobs = dry_run_jobs(smoke_workdir, "--profile", str(PROFILE))
    rules = {job["rule"] for job in jobs}
    assert {"figures", "remedies_table", "algebraic"} <= rules and any(rule.startswith("train_") for rule in rules)
    for job in jobs:
        if job["rule"] == "all":
            continue
        gpu = job["resources"].get("gpu")
        where = f"rule {job['rule']} (gpu={gpu}, device {device})"
        if is_model_rule(job["rule"]) and device != "cpu":
            assert gpu == "1", where
        else:
            assert gpu in (None, "0"), where
        assert "--device" in job["shell"] or not is_model_rule(job["rule"]), where
        assert int(job["resources"]["runtime"]) > 0 and int(job["resources"]["mem_mb"]) > 0


def test_no_profile_sets_gpu_which_would_override_the_rules_whatever_the_device():
    for profile in ("local", "slurm", "default"):
        settings = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())
        assert "gpu" not in settings.get("default-resources", {}), profile
        assert {rule for rule, res in settings.get("set-resources", {}).items() if "gpu" in res} == set(), profile


def test_the_slurm_profile_polls_with_squeue_and_retries_preempted_jobs():
    settings = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert settings["executor"] == "slurm"
    assert settings["slurm-status-command"] == "squeue"  # works without slurmdbd
    assert settings["slurm-requeue"] and settings["retries"] >= 1
    assert "slurm_account" not in settings["default-resources"]  # see docs/cluster.md


def test_a_job_given_a_gpu_that_torch_cannot_see_says_so(monkeypatch, caplog):
    monkeypatch.setattr(devices.torch.cuda, "is_available", lambda: False)
    for name in devices.GPU_REQUEST_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with caplog.at_level(logging.WARNING, logger="lostmid.core.devices"):
        assert devices.resolve("auto").type == "cpu"
    assert not caplog.records  # no GPU asked for, nothing to say

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "1")
    with caplog.at_level(logging.WARNING, logger="lostmid.core.devices"):
        assert devices.resolve("auto").type == "cpu"
    assert "asked for a GPU and was given one (SLURM_GPUS_ON_NODE=1, CUDA_VISIBLE_DEVICES=0)" in caplog.text
    assert "torch sees no CUDA device" in caplog.text


def test_hidden_gpus_are_not_a_request():
    assert devices.requested_gpus({"CUDA_VISIBLE_DEVICES": "-1", "SLURM_GPUS_ON_NODE": "0"}) == {}
    assert devices.requested_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}) == {"CUDA_VISIBLE_DEVICES": "0,1"}


def test_the_comparison_leaves_out_every_measured_column_and_row():
    """Regression: max_rss_* columns and the measured rows of remedies_summary slipped through."""
    wide = pd.DataFrame({"variant": ["a"], "accuracy": [0.5], "seconds_per_step": [0.1], "peak_mem_mb": [3.0],
                         "max_rss_mb": [100.0], "time_ratio": [1.1], "peak_mem_ratio": [1.0], "max_rss_ratio": [0.9]})
    assert list(unmeasured(wide).columns) == ["variant", "accuracy"]
    quantities = ["final_accuracy", "LIM", "seconds_per_step", "peak_mem_mb", "max_rss_mb", "time_ratio", "max_rss_ratio"]
    long = pd.DataFrame({"quantity": quantities, "mean": range(len(quantities))})
    assert unmeasured(long)["quantity"].tolist() == ["final_accuracy", "LIM"]


def test_the_cluster_script_and_profiles_refer_only_to_files_in_the_repository():
    files = {str(p.relative_to(REPO)) for p in REPO.rglob("*") if ".git" not in p.parts}
    names = {Path(f).name for f in files}
    for source in [SCRIPT, *REPO.glob("profiles/*/config.yaml")]:
        for ref in re.findall(r"[\w./-]+\.(?:md|sh|yaml|py)\b", source.read_text()):
            if ref.lower().startswith("dir/"):  # files the script writes into its cluster folder DIR
                continue
            assert ref in files or ("/" not in ref and ref in names), f"{source.relative_to(REPO)} refers to {ref}, which is not in the repository"


# --- with a one-node Slurm cluster -------------------------------------------------------------


def run_script(*args, timeout) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        return subprocess.CompletedProcess(error.cmd, 124, "", f"timed out after {timeout} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A started one-node cluster (its folder and client environment); stopped at the end."""
    if os.environ.get("LOSTMID_SKIP_SLURM") == "1":
        pytest.skip("LOSTMID_SKIP_SLURM=1")
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("a local Slurm cluster needs Linux and root (slurmd runs jobs as any user); CI runs as root")
    installed = run_script("install", timeout=900)
    if installed.returncode:
        pytest.skip(f"cannot install slurm-wlm and munge: {installed.stderr.strip()[-500:]}")
    folder = tmp_path_factory.mktemp("slurm")
    started = run_script("start", str(folder), "2", timeout=120)
    try:
        if started.returncode:
            pytest.skip(f"the Slurm daemons did not start: {started.stderr.strip()[-800:]}")
        env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"), PATH=f"{folder / 'bin'}:{os.environ['PATH']}")
        yield folder, env
    finally:
        stopped = run_script("stop", str(folder), timeout=60)
        assert stopped.returncode == 0 or not (folder / "slurm.conf").exists(), stopped.stderr
        for name in ("munged", "slurmctld", "slurmd"):
            assert not (folder / f"{name}.pid").exists(), f"{name} was not stopped"


def slurm_jobs(env) -> pd.DataFrame:
    """Every job the cluster knows (finished ones stay listed for MinJobAge = 10 minutes)."""
    fields = "JobID:20,Name:60,Comment:200,State:20,tres-per-job:40,Reason:40"
    out = subprocess.run(["squeue", "--states=all", "--noheader", "-O", fields], env=env, capture_output=True, text=True, timeout=30, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    jobs = pd.DataFrame(rows, columns=["jobid", "name", "comment", "state", "tres_per_job", "reason"])
    # The plugin's comment is rule_<rule> or rule_<rule>_wildcards_<values>.
    jobs["rule"] = jobs["comment"].str.removeprefix("rule_").str.replace(r"_wildcards_.*$", "", regex=True)
    return jobs


@pytest.fixture(scope="module")
def slurm_and_local_runs(cluster, tmp_path_factory):
    folder, env = cluster
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["device"] = "auto"  # cuda where torch sees it, else the CPU, and say so in the log
    runs = {}
    for kind in ("local", "slurm"):
        workdir = tmp_path_factory.mktemp(kind)
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
        runs[kind] = workdir
    planned_jobs = dry_run_jobs(runs["slurm"], "--profile", str(PROFILE), *TARGETS)
    planned = {rule: sum(job["rule"] == rule for job in planned_jobs) for rule in {job["rule"] for job in planned_jobs}}
    gpu_rules = {job["rule"] for job in planned_jobs if job["resources"].get("gpu") == "1"}

    local = snakemake(runs["local"], "--cores", "2", *TARGETS, timeout=300)
    assert local.returncode == 0, local.stdout[-5000:]
    # The profile as users run it; only faster first status checks and no retries for a test.
    slurm = snakemake(
        runs["slurm"], "--profile", str(PROFILE), "--slurm-init-seconds-before-status-checks", "2",
        "--retries", "0", *TARGETS, env=env, timeout=600,
    )
    jobs = slurm_jobs(env)
    print(f"\nsnakemake --profile profiles/slurm, then squeue --states=all:\n{jobs.to_string(index=False)}")
    assert slurm.returncode == 0, slurm.stdout[-8000:]
    return runs, planned, jobs, gpu_rules


@pytest.mark.slow
def test_every_job_ran_as_a_slurm_job(slurm_and_local_runs):
    runs, planned, jobs, _ = slurm_and_local_runs
    planned = {rule: n for rule, n in planned.items() if rule != "all"}  # `all` has nothing to run
    assert jobs["name"].nunique() == 1  # one Snakemake run: the plugin names jobs by its run id
    assert (jobs["state"] == "COMPLETED").all(), jobs
    assert jobs.groupby("rule").size().to_dict() == planned
    # Each job left the plugin's log of its batch script, in which Snakemake ran the rule.
    logs = list((runs["slurm"] / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert sorted(p.stem for p in logs) == sorted(jobs["jobid"])


@pytest.mark.slow
def test_slurm_gave_a_gpu_to_exactly_the_gpu_rules(slurm_and_local_runs):
    runs, _, jobs, gpu_rules = slurm_and_local_runs
    asked = jobs.set_index("jobid")["tres_per_job"].eq("gres:gpu:1")
    expected = jobs.set_index("jobid")["rule"].isin(gpu_rules)
    assert asked.equals(expected), jobs
    assert expected.any() and not expected.all()  # both kinds were exercised
    # The fake GPUs are not CUDA devices: a GPU rule's own log says it ran on the CPU.
    log = (runs["slurm"] / "results/logs/failure/baseline/L8_M1_seed0.log").read_text()
    if "device: cuda" not in log:
        assert "asked for a GPU and was given one" in log and "running on the CPU" in log, log


@pytest.mark.slow
def test_the_slurm_results_equal_a_local_run(slurm_and_local_runs):
    runs, _, _, _ = slurm_and_local_runs
    tables = {kind: sorted(p.relative_to(workdir) for p in (workdir / "results").rglob("*.parquet")) for kind, workdir in runs.items()}
    assert tables["slurm"] == tables["local"] and tables["local"]
    for path in tables["local"]:
        local, slurm = (unmeasured(pd.read_parquet(runs[kind] / path)) for kind in ("local", "slurm"))
        pd.testing.assert_frame_equal(slurm, local, check_exact=False, rtol=1e-6, obj=str(path))
