"""The Slurm profile, for real: a one-node Slurm cluster on localhost runs the whole smoke DAG.

Three layers:
- without a cluster: the profile asks one GPU for the rules that run models, none for plots
  and tables, and names every rule that takes ``--device`` (as Snakemake itself resolves the
  resources in a dry run); the library logs when a job was given a GPU torch cannot see; a
  failed attempt keeps its own log when the job is retried (a local run with ``--retries 1``);
- with a cluster (root, Debian packages slurm-wlm and munge installable; else skipped with the
  reason): ``scripts/slurm_cluster.sh`` starts munged, slurmctld and slurmd in a temp folder
  with two fake GPUs, ``snakemake --profile profiles/slurm`` runs the whole smoke DAG with
  ``device: auto``, and the tests check that every planned rule job ran inside a Slurm job and
  every Slurm job completed, that Slurm gave a GPU to exactly the submissions that hold a GPU
  rule, that the tables equal a local run's, and that the groups of the profile make at most one
  Slurm submission per three rule jobs. The daemons are stopped by their pid.

Rules belong to Snakemake groups (``chain``: a block's training chain and its analyses, and the
bias fits; ``summary``: the summaries): Snakemake submits a group job, several connected parts
of a group (``group-components`` in the profile) as one Slurm job, whose job step runs
Snakemake again on the node and that runs the rule jobs one after another. So a Slurm job is
not a rule job: what ran where is read from the plugin's log of each submission
(``.snakemake/slurm_logs/group_<group>_<rules>/<slurm job id>.log``), in which the job step's
Snakemake prints ``localrule <rule>:`` and the outputs of every rule job it runs.
Set LOSTMID_SKIP_SLURM=1 to skip the cluster tests (they install Debian packages when run as root).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lostmid.core import devices
from lostmid.tables.keys import without_measurements

from conftest import REPO, lostmid_arguments

SCRIPT = REPO / "scripts" / "slurm_cluster.sh"
PROFILE = REPO / "profiles" / "slurm"


def snakemake(workdir: Path, *args, env=None, timeout=300) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir)]
    command += ["--configfile", str(workdir / "config.yaml"), *args]
    # A new session, so a timeout can stop Snakemake and everything it started.
    process = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        out, _ = process.communicate()
        raise AssertionError(f"snakemake did not finish within {timeout} s:\n{out[-5000:]}") from None
    return subprocess.CompletedProcess(command, process.returncode, out, "")


def dry_run_jobs(workdir: Path, *args) -> list[dict]:
    """Every job of a dry run: its rule, outputs, resources (as Snakemake resolved them), shell
    command and ``lostmid`` arguments. The jobs of a group are listed indented under ``Group job <group>``."""
    result = snakemake(workdir, "--dry-run", *args, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    jobs = []
    for block in re.split(r"^(?=[ \t]*(?:local)?rule \S+:$)", result.stdout, flags=re.M)[1:]:
        rule = re.match(r"\s*(?:local)?rule (\S+):", block).group(1)
        output = re.search(r"^\s+output: (.*)$", block, re.M)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        shell = re.search(r"^Shell command: (lostmid .*)$", block, re.M)  # rule all's: "None"
        jobs.append(
            {
                "rule": rule,
                "output": output.group(1) if output else "",
                "resources": dict(kv.split("=", 1) for kv in resources.group(1).split(", ")) if resources else {},
                "shell": shell.group(1) if shell else "",
                "arguments": lostmid_arguments(workdir, shell.group(1)) if shell else [],
            }
        )
    return jobs


@pytest.fixture
def smoke_workdir(tmp_path, smoke_config):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(smoke_config))
    return tmp_path


# --- without a cluster -------------------------------------------------------------------------


MODEL_RULES = (
    "init_",
    "train_",
    "evaluate_",
    "density_flow_",
    "channels_",
    "bias_fit",
    "influence_baselines",
    "architectures_",
)


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
        assert "--device" in job["arguments"] or not is_model_rule(job["rule"]), where
        assert int(job["resources"]["runtime"]) > 0 and int(job["resources"]["mem_mb"]) > 0
        # every rule logs each attempt separately (test_a_retried_job_keeps_the_log_of_each_attempt)
        # one log per attempt (lostmid.cli.joblog)
        assert job["resources"]["attempt"] == "1" and re.search(r"lostmid --log \S+\.log --attempt 1 ", job["shell"]), (
            where
        )


def test_the_slurm_profile_polls_with_squeue_and_retries_preempted_jobs():
    settings = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert settings["executor"] == "slurm"
    assert settings["slurm-status-command"] == "squeue"  # works without slurmdbd
    assert settings["slurm-requeue"] and settings["retries"] >= 1
    assert "slurm_account" not in settings["default-resources"]  # see docs/cluster.md
    # One CPU per submission: Snakemake stacks the parallel jobs of a group job in series instead
    # of summing their CPUs, GPUs and memory (docs/cluster.md, Groups).
    assert settings["cores"] == 1 and settings["group-components"]


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


def test_no_profile_sets_gpu_which_would_override_the_rules_whatever_the_device():
    for profile in ("local", "slurm", "default"):
        settings = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())
        assert "gpu" not in settings.get("default-resources", {}), profile
        assert {rule for rule, res in settings.get("set-resources", {}).items() if "gpu" in res} == set(), profile


def test_the_comparison_leaves_out_every_measured_column_and_row():
    """Regression: max_rss_* columns and the measured rows of remedies_summary slipped through."""
    wide = pd.DataFrame(
        {
            "variant": ["a"],
            "accuracy": [0.5],
            "seconds_per_step": [0.1],
            "peak_mem_mb": [3.0],
            "max_rss_mb": [100.0],
            "time_ratio": [1.1],
            "peak_mem_ratio": [1.0],
            "max_rss_ratio": [0.9],
        }
    )
    assert list(without_measurements(wide).columns) == ["variant", "accuracy"]
    quantities = [
        "final_accuracy",
        "LIM",
        "seconds_per_step",
        "peak_mem_mb",
        "max_rss_mb",
        "time_ratio",
        "max_rss_ratio",
    ]
    long = pd.DataFrame({"quantity": quantities, "mean": range(len(quantities))})
    assert without_measurements(long)["quantity"].tolist() == ["final_accuracy", "LIM"]


def test_the_cluster_script_and_profiles_refer_only_to_files_in_the_repository():
    files = {str(p.relative_to(REPO)) for p in REPO.rglob("*") if ".git" not in p.parts}
    names = {Path(f).name for f in files}
    for source in [SCRIPT, *REPO.glob("profiles/*/config.yaml")]:
        for ref in re.findall(r"[\w./-]+\.(?:md|sh|yaml|py)\b", source.read_text()):
            if ref.lower().startswith("dir/"):  # files the script writes into its cluster folder DIR
                continue
            assert ref in files or ("/" not in ref and ref in names), (
                f"{source.relative_to(REPO)} refers to {ref}, which is not in the repository"
            )


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


def test_the_node_has_the_cpus_the_tests_may_run_on(cluster):
    """The cluster's node has the CPUs this process may run on, whatever OMP_NUM_THREADS says (the tests' pinned
    numerics set it to 1, which GNU nproc obeys): on a one-CPU node the Slurm jobs of a run would queue one
    behind the other."""
    _, env = cluster
    found = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--format", "%c"], env=env, capture_output=True, text=True, timeout=30
    )
    assert os.environ.get("OMP_NUM_THREADS") == "1"  # as lostmid.numerics pins it: the case the node must survive
    assert found.stdout.split() == [str(len(os.sched_getaffinity(0)))], found


def slurm_jobs(env) -> pd.DataFrame:
    """Every job the cluster knows (finished ones stay listed for MinJobAge = 10 minutes)."""
    fields = "JobID:20,Name:60,State:20,tres-per-job:40,TimeLimit:20,Reason:40,Comment:200"
    out = subprocess.run(
        ["squeue", "--states=all", "--noheader", "-O", fields],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    # The plugin's comment is rule_<group>_<its rules, cut after five>: no spaces.
    return pd.DataFrame(rows, columns=["jobid", "name", "state", "tres_per_job", "time_limit", "reason", "comment"])


def submission_logs(workdir: Path) -> dict[str, list[tuple[str, str]]]:
    """Slurm job id -> the rule jobs (rule, outputs) Snakemake ran inside that Slurm job, from the
    plugin's log of each submission. In the batch script Snakemake runs each connected part of
    the group job in turn as a job step (``srun``) of Snakemake, which prints ``localrule <rule>:``
    and its ``output:`` line for every rule job it runs; the batch script's Snakemake ends with
    ``N of N steps (100%) done`` over the whole submission."""
    found = {}
    for log in (workdir / ".snakemake" / "slurm_logs").rglob("*.log"):
        text = log.read_text()
        jobs = re.findall(r"^localrule ([\w-]+):\n(?:    .*\n)*?    output: (.*)$", text, re.M)
        done = re.findall(r"^(\d+) of (\d+) steps \(100%\) done$", text, re.M)
        assert jobs and done and done[-1] == (str(len(jobs)),) * 2, (
            f"{log} did not run its jobs to the end:\n{text[-3000:]}"
        )
        found[log.stem] = jobs
    return found


SLURM_ARGS = ("--slurm-init-seconds-before-status-checks", "2")


@pytest.fixture(scope="module")
def slurm_and_local_runs(cluster, smoke_run, tmp_path_factory):
    """The whole smoke DAG (device auto) under the Slurm profile, beside the session's local smoke run
    (conftest.smoke_run: device cpu, which names no run: the tables must be equal): (workdirs, the planned
    rule jobs, squeue's jobs, the rule jobs of each Slurm job, the Slurm run's wall-clock seconds)."""
    folder, env = cluster
    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
    config["device"] = "auto"  # cuda where torch sees it, else the CPU, and say so in the log
    runs = {"local": smoke_run[0], "slurm": tmp_path_factory.mktemp("slurm_run")}
    (runs["slurm"] / "config.yaml").write_text(yaml.safe_dump(config))
    planned = [
        job for job in dry_run_jobs(runs["slurm"], "--profile", str(PROFILE)) if job["rule"] != "all"
    ]  # `all` runs nothing

    # The profile as users run it; only faster first status checks and no retries for a test.
    start = time.monotonic()
    slurm = snakemake(runs["slurm"], "--profile", str(PROFILE), *SLURM_ARGS, "--retries", "0", env=env, timeout=1200)
    seconds = time.monotonic() - start
    jobs = slurm_jobs(env)
    print(
        f"\nsnakemake --profile profiles/slurm (whole smoke DAG): {seconds:.0f} s; "
        f"squeue --states=all:\n{jobs.to_string(index=False)}"
    )
    assert slurm.returncode == 0, slurm.stdout[-8000:]
    return runs, planned, jobs, submission_logs(runs["slurm"]), seconds


@pytest.mark.slow
def test_every_rule_job_ran_inside_a_completed_slurm_job(slurm_and_local_runs):
    runs, planned, jobs, submissions, _ = slurm_and_local_runs
    assert jobs["name"].nunique() == 1  # one Snakemake run: the plugin names jobs by its run id
    assert (jobs["state"] == "COMPLETED").all(), jobs
    # Each Slurm job left the plugin's log, and each planned rule job ran in exactly one of them.
    assert sorted(submissions) == sorted(jobs["jobid"])
    ran = sorted(job for inside in submissions.values() for job in inside)
    assert ran == sorted((job["rule"], job["output"]) for job in planned)


@pytest.mark.slow
def test_slurm_gave_a_gpu_to_exactly_the_submissions_with_gpu_rules(slurm_and_local_runs):
    runs, planned, jobs, submissions, _ = slurm_and_local_runs
    gpu_rules = {job["rule"] for job in planned if job["resources"].get("gpu") == "1"}
    assert gpu_rules == {job["rule"] for job in planned if is_model_rule(job["rule"])}
    asked = jobs.set_index("jobid")["tres_per_job"]
    # `cores: 1` in the profile runs a submission's rule jobs one after another: one GPU at most.
    expected = {
        jobid: "gres:gpu:1" if any(rule in gpu_rules for rule, _ in inside) else "N/A"
        for jobid, inside in submissions.items()
    }
    assert asked.to_dict() == expected, jobs
    assert "gres:gpu:1" in expected.values()
    # The fake GPUs are not CUDA devices: a GPU rule's own log says it ran on the CPU.
    log = (runs["slurm"] / "results/logs/evaluate/baseline/L8_M1_seeds0-1.log").read_text()
    if "device: cuda" not in log:
        assert "asked for a GPU and was given one" in log and "running on the CPU" in log, log
    assert re.match(
        r"== log results/logs/evaluate/baseline/L8_M1_seeds0-1.log, attempt 1, .* ==$", log.splitlines()[0]
    ), log


@pytest.mark.slow
def test_the_slurm_results_equal_a_local_run(slurm_and_local_runs):
    runs = slurm_and_local_runs[0]
    tables = {
        kind: sorted(p.relative_to(workdir) for p in (workdir / "results").rglob("*.parquet"))
        for kind, workdir in runs.items()
    }
    assert tables["slurm"] == tables["local"] and tables["local"]
    for path in tables["local"]:
        local, slurm = (without_measurements(pd.read_parquet(runs[kind] / path)) for kind in ("local", "slurm"))
        pd.testing.assert_frame_equal(slurm, local, check_exact=False, rtol=1e-6, obj=str(path))


@pytest.mark.slow
def test_groups_make_at_most_one_slurm_job_per_three_rule_jobs(slurm_and_local_runs):
    """The issue's target: Slurm submissions <= 1/3 of the rule jobs, for the whole smoke DAG."""
    runs, planned, jobs, submissions, seconds = slurm_and_local_runs
    log = max((runs["slurm"] / ".snakemake" / "log").glob("*.snakemake.log")).read_text()
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", log)
    assert sorted(submitted) == sorted(jobs["jobid"]) == sorted(submissions)
    sizes = sorted((len(inside) for inside in submissions.values()), reverse=True)
    print(
        f"\nwhole smoke DAG under Slurm: {len(planned)} rule jobs in {len(submitted)} Slurm jobs "
        f"(rule jobs per Slurm job: {sizes}), {seconds:.0f} s"
    )
    assert 3 * len(submitted) <= len(planned)
