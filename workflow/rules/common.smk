# Shared helpers of the stage files: the jobs of the grid (lostmid.jobs), the conda
# environment, the GPU request, the logged shell command, the config sections passed to the library
# as JSON params (a changed value reruns exactly the rules that read it, never training) and the
# tables of the summary rules. The stage files only declare rules.
import functools
import os
import threading

import lostmid.architectures.fix_plan as fix_plan
import lostmid.catalogue as catalogue
import lostmid.front as front
import lostmid.jobs as jobs
import lostmid.manifest as manifest
from lostmid.algebraic.settings import AlgebraicSettings
from lostmid.analysis.settings import (
    ChannelSettings,
    FlowSettings,
    InfluenceSettings,
    InitSweepSettings,
    LengthSettings,
    StructuralSettings,
    TraceSettings,
)
from lostmid.architectures.settings import RetrievalSettings
from lostmid.cli import argfile
from lostmid.config import canonical_json, settings_from_section
from lostmid.evidence.settings import EvidenceSettings

BLOCKS = jobs.blocks(config)
FITS = jobs.bias_fits(config, BLOCKS)
CONTROLS = jobs.bias_controls(config, BLOCKS)
ARCHITECTURES = config.get("architectures") or {}
ARCHITECTURE_FLAG_RUNS = jobs.architecture_flag_runs(config)
RETRIEVAL = config.get("retrieval")

# GPUs asked for by each rule that runs models (`sbatch --gpus`; locally, `--resources gpu=N`) --
# one, unless the config runs on the CPU (`device: cpu`), where a GPU would sit idle. Rules that
# only read tables declare gpu=0. Declared in the rules, not in the profiles' set-resources,
# which would override them whatever the device.
GPU = 0 if config["device"] == "cpu" else 1


# Rule logs with retries: `lostmid --log {log} --attempt N` writes each attempt's own log and, when
# the command fails, prints the log's last error line and its path (lostmid.cli.joblog). `attempt`
# is a resource only to hand Snakemake's attempt number to the shell; nothing schedules on it.
def attempt_number(wildcards, attempt):
    return attempt


# A job's arguments go to a file beside its log (lostmid.cli.argfile), so that the shell Snakemake
# runs, prints and echoes when the job fails is one short line: `lostmid --log LOG --attempt N @ARGS`.
# The file is written when Snakemake formats the shell (a dry run with --printshellcmds too): the
# rule's command is the format spec of its param `arguments` (ARGUMENTS_FILE), whose fields Snakemake
# fills in as in any shell before the param turns the command into the file. The rule's shell text,
# which Snakemake compares to rerun a job whose code changed, still holds the whole command; the
# param itself is no rerun trigger (Snakemake records no value it cannot represent).
ARGUMENTS_FILE = argfile.ARGUMENTS_FILE


def logged(command):
    """A rule's shell: the ``lostmid ...`` ``command`` with its output in this attempt's log and its
    arguments in a file (the param ``arguments=ARGUMENTS_FILE`` of every rule that runs one)."""
    # The format spec: the log's path, a newline, the arguments and a newline (a spec ending in q or
    # u would tell Snakemake to quote the field or not).
    arguments = command.removeprefix("lostmid ")
    return f"lostmid --log {{log}} --attempt {{resources.attempt}} @{{params.arguments:{{log}}\n{arguments}\n}}"


# A bias variant's block: its fitted attention bias is an input of init and of every job that reads
# its checkpoints (training segments and analyses), each of which checks that they were made from it
# (lostmid.training.checkpoint). The option is a param: a rule's shell text is evaluated when the
# job runs, after the loop over blocks.
def bias_inputs(block):
    return [block.bias_tensor()] if block.bias else []


def bias_option(block):
    return f"--attention-bias {block.bias_tensor()}" if block.bias else ""


# The conda environment of every job (used with --software-deployment-method conda).
LOSTMID_ENV = "../../envs/lostmid.yaml"


def config_json(section, keys=None, exclude=()):
    """The config's ``section`` (or only its ``keys``, and never the keys in ``exclude``: those of
    other rules) as canonical JSON; validation filled in the defaults. A section read through a
    settings class is passed with jobs.settings_json instead: exactly the class's keys."""
    values = config.get(section) or {}
    if keys is not None:
        values = {key: values[key] for key in keys if key in values}
    return canonical_json({key: value for key, value in values.items() if key not in exclude})


def run_tables(name):
    return jobs.run_tables(BLOCKS, name)


@functools.cache
def summary_tables():
    """Every table the figures and summary pages are drawn from: name -> its files. Built once per
    parse, on the first call (by the summary stage files, included after every other stage's rules)."""
    return {
        **{name: run_tables(name) for name in ("train", *jobs.RUN_TABLES)},
        "init_sweep": [rules.influence_baselines.output.sweep],
        "structural": [rules.influence_baselines.output.structural],
        "remedies": [rules.remedies_table.output.table],
        **{f"bias_{name}": jobs.bias_tables(BLOCKS, name) for name in jobs.BIAS_TABLES},
        **{f"algebraic_{name}": [rules.algebraic.output[name]] for name in ("table", "profiles", "probes")},
        "retrieval": [],  # its claims are decided by rule retrieval (results/evidence/retrieval.parquet)
        # The length study's tables (workflow/rules/length.smk), where the config has the study.
        "length_init": [rules.length_init.output[0]] if LENGTH else [],
        "length_fit": [rules.length_fit.output.profiles] if LENGTH else [],
        "length_fits": [rules.length_fit.output.fits] if LENGTH else [],
    }


def evidence_tables():
    """The tables the evidence stage reads (lostmid.jobs.EVIDENCE_TABLES, in the order of its
    options): name -> its files (none where the run has no such table: its option is left out and its
    claims say "not run")."""
    return {name: summary_tables()[name] for name in jobs.EVIDENCE_TABLES}


# Snakemake's job-rate limiter (--max-jobs-per-timespan) runs the scheduler again one timespan
# after each of its rounds, on timer threads that keep the process alive after the last job. When
# the run ends, the timers have nothing left to schedule: cancel them, so the run ends when its
# work ends, whatever the timespan.
def cancel_scheduler_timers():
    timers = [thread for thread in threading.enumerate() if isinstance(thread, threading.Timer)]
    for timer in timers:
        timer.cancel()


# The run's manifest (lostmid.manifest): results/manifest.json, written when the run starts and completed
# when it ends, with the config files as given (or the default) and the plan the config records.
CONFIG_FILES = [os.path.relpath(path) for path in workflow.overwrite_configfiles] or ["config/config.yaml"]


onstart:
    manifest.start("results", workflow.basedir, CONFIG_FILES, records=[config["plan"]] if config.get("plan") else [])


onsuccess:
    cancel_scheduler_timers()
    manifest.finish("results", "success")


onerror:
    cancel_scheduler_timers()
    manifest.finish("results", "error")


def retrieval_jobs(name):
    """The retrieval stage's ``name`` jobs (RetrievalSettings.window_jobs or block_jobs), the model's then its twin's."""
    if not RETRIEVAL:
        return []
    return getattr(settings_from_section(RetrievalSettings, RETRIEVAL, "retrieval"), name)()


RETRIEVAL_RECORD = RETRIEVAL["record"] if RETRIEVAL else "results/retrieval_windows"  # the schema default
# The window records (in the run's record) and the jobs that write them, a block of windows each.
RETRIEVAL_WINDOWS = [f"{RETRIEVAL_RECORD}/windows/{w}_n{n}_w{k}.parquet" for w, n, k in retrieval_jobs("window_jobs")]
RETRIEVAL_BLOCKS = [f"results/retrieval/blocks/{w}_n{n}_b{b}.json" for w, n, b in retrieval_jobs("block_jobs")]


# Issue 55's fix run (fix.smk): its plan (study/fix_plan.yaml) where the config has a `fix` block, else None.
FIX_PLAN = fix_plan.config_plan(config)


def fix_rule(job, *options):
    """The shell of one `lostmid fix` job (its log, its plan, its list of files written)."""
    return logged(
        f"lostmid fix --job {job} --device {{params.device}} --threads {{threads}} --plan {{params.plan:q}}"
        + "".join(f" --{name} {{wildcards.{name}}}" for name in options)
        + " --done {output}"
    )


def fix_blocks(wildcards):
    """The fix run's block jobs (fix_plan.block_jobs), listed once the gate of the plan's gate-first order has run
    (the checkpoint fix_gate at its n): beyond the floor there only where that gate passed, as the page reads it
    (fix_reading.gate_first_passed; imported here, not at parse: the other targets need none of it)."""
    first = fix_plan.gate_first(FIX_PLAN)
    if first is not None:
        checkpoints.fix_gate.get(n=first[0])
    from lostmid.study.fix_reading import gate_first_passed

    jobs = fix_plan.block_jobs(FIX_PLAN, config["fix"]["block"], gate_first_passed(FIX_PLAN))
    return [f"results/fix/blocks/{arm}_n{n}_b{b}.json" for arm, n, b in jobs]


def fix_none_windows(wildcards):
    """The none arm's window files of a fix block (its own record: the run needs them done)."""
    draws = fix_plan.block_draws(FIX_PLAN, int(wildcards.n), int(wildcards.block), config["fix"]["block"])
    return [str(fix_plan.none_path(FIX_PLAN, int(wildcards.n), k)) for k in draws]
