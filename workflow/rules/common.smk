# Shared helpers of the stage files: the jobs of the grid (lostmid.workflow), the conda
# environment, the GPU request, the logged shell command, the config sections passed to the library
# as JSON params (a changed value reruns exactly the rules that read it, never training) and the
# tables of the summary rules. The stage files only declare rules.
import functools

import lostmid.catalogue as catalogue
import lostmid.workflow as wf
from lostmid.algebraic.settings import AlgebraicSettings
from lostmid.analysis.settings import (
    ChannelSettings,
    FlowSettings,
    InfluenceSettings,
    InitSweepSettings,
    StructuralSettings,
    TraceSettings,
)
from lostmid.config import canonical_json
from lostmid.evidence.settings import EvidenceSettings

BLOCKS = wf.blocks(config)
FITS = wf.bias_fits(config, BLOCKS)
CONTROLS = wf.bias_controls(config, BLOCKS)
ARCHITECTURES = config.get("architectures") or {}
ARCHITECTURE_FLAG_RUNS = wf.architecture_flag_runs(config)

# GPUs asked for by each rule that runs models (`sbatch --gpus`; locally, `--resources gpu=N`) --
# one, unless the config runs on the CPU (`device: cpu`), where a GPU would sit idle. Rules that
# only read tables declare gpu=0. Declared in the rules, not in the profiles' set-resources,
# which would override them whatever the device.
GPU = 0 if config["device"] == "cpu" else 1


# Rule logs with retries (--retries; the Slurm profile sets 2): Snakemake deletes a job's log
# before each attempt, so every attempt writes {log}.attempt<N> (under a header line) and the
# log proper receives the copy of the attempt that ended the job; a failed or killed attempt's
# file stays beside it, so a retry never loses the first attempt's output. A new run of the job
# (attempt 1) removes the attempt files of the run before. `attempt` is a resource only to hand
# Snakemake's attempt number to the shell ({resources.attempt}); nothing schedules on it.
def attempt_number(wildcards, attempt):
    return attempt


LOG_ATTEMPT = (
    "if [ {resources.attempt} -le 1 ]; then rm -f {log}.attempt*; fi; "
    'echo "== log {log}, attempt {resources.attempt}, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(uname -n) ==" > {log}.attempt{resources.attempt}; '
)
# A failed job prints its log's last error line (lostmid's `lostmid <command>: error: ...`, or a
# traceback's last line) to the terminal, above Snakemake's report of the failed command.
LOG_KEEP = (
    " || {{ status=$?; cp {log}.attempt{resources.attempt} {log};"
    " echo \"$(grep -iE 'error|exception' {log} | tail -n 1) (log: {log})\" >&2; exit $status; }};"
    " mv {log}.attempt{resources.attempt} {log}"
)


def logged(command):
    """A rule's shell: ``command`` with its output going to this attempt's log, between
    LOG_ATTEMPT and LOG_KEEP (which prints the log's last error line when the command fails)."""
    return "".join((LOG_ATTEMPT, command, " >> {log}.attempt{resources.attempt} 2>&1", LOG_KEEP))


# A bias variant's block: its fitted attention bias is an input of init and of every job that reads
# its checkpoints (training segments and analyses), each of which checks that they were made from it
# (lostmid.training.checkpoint). The
# option is a param: a rule's shell text is evaluated when the job runs, after the loop over blocks.
def bias_inputs(block):
    return [block.bias_tensor()] if block.bias else []


def bias_option(block):
    return f"--attention-bias {block.bias_tensor()}" if block.bias else ""


# The conda environment of every job (used with --software-deployment-method conda).
LOSTMID_ENV = "../../envs/lostmid.yaml"


def config_json(section, keys=None, exclude=()):
    """The config's ``section`` (or only its ``keys``, and never the keys in ``exclude``: those of
    other rules) as canonical JSON; validation filled in the defaults. A section read through a
    settings class is passed with wf.settings_json instead: exactly the class's keys."""
    values = config.get(section) or {}
    if keys is not None:
        values = {key: values[key] for key in keys if key in values}
    return canonical_json({key: value for key, value in values.items() if key not in exclude})


def run_tables(name):
    return wf.run_tables(BLOCKS, name)


@functools.cache
def summary_tables():
    """Every table the figures and summary pages are drawn from: name -> its files. Built once per
    parse, on the first call (by the summary stage files, included after every other stage's rules)."""
    return {
        **{name: run_tables(name) for name in ("train", *wf.RUN_TABLES)},
        "init_sweep": [rules.influence_baselines.output.sweep],
        "structural": [rules.influence_baselines.output.structural],
        "remedies": [rules.remedies_table.output.table],
        **{f"bias_{name}": wf.bias_tables(BLOCKS, name) for name in wf.BIAS_TABLES},
        **{f"algebraic_{name}": [rules.algebraic.output[name]] for name in ("table", "profiles", "probes")},
    }


def evidence_tables():
    """The tables the evidence stage reads (lostmid.workflow.EVIDENCE_TABLES, in the order of its
    options): name -> its files (none where the run has no such table: its option is left out and its
    claims say "not run")."""
    return {name: summary_tables()[name] for name in wf.EVIDENCE_TABLES}
