# Shared helpers of the stage files: the jobs of the grid (lostmid.workflow), the conda
# environment, the GPU request and the config blocks passed to the library as JSON params
# (a changed value reruns exactly the rules that read it, never training).
import lostmid.workflow as wf
from lostmid.config import canonical_json

BLOCKS = wf.blocks(config)

# The conda environment of every job (used with --software-deployment-method conda).
LOSTMID_ENV = "../../envs/lostmid.yaml"

# Jobs that run models ask the scheduler for one GPU, unless the config pins the CPU.
GPU = 0 if config["device"] == "cpu" else 1


# One log per attempt. Snakemake deletes a job's declared log before every attempt, so a retry
# (`retries` in the Slurm profile, or --retries) would overwrite the failed attempt's log; the
# attempt number reaches a shell command only through a resource, as Snakemake passes `attempt`
# to resource functions (every rule declares `attempt=ATTEMPT`; no scheduler reads it). Each
# rule's command runs as `logged(command)`: its stdout and stderr, after a header line naming
# the attempt, the host and the Slurm job, go both to the rule's log (the last attempt, which
# Snakemake prints when a job fails) and to `<log>.attempt<N>`, which later attempts leave alone.
# The pipe keeps the command's exit status: Snakemake runs shell commands under bash's
# `set -euo pipefail`.
def ATTEMPT(wildcards, attempt):
    return attempt


ATTEMPT_HEADER = (
    'echo "# attempt {resources.attempt} of rule {rule}, $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n),'
    ' Slurm job ${{SLURM_JOB_ID:-none}}"'
)


def logged(command):
    return "{{ " + ATTEMPT_HEADER + "; " + command + "; }} 2>&1 | tee {log}.attempt{resources.attempt} > {log}"


def config_json(block, keys=None):
    """The config's ``block`` (or only its ``keys``) as canonical JSON."""
    values = config.get(block, {})
    if keys is not None:
        values = {key: values[key] for key in keys if key in values}
    return canonical_json(values)


def run_tables(name):
    return wf.run_tables(BLOCKS, name)


def summary_tables():
    """Every table the figures and summary pages are drawn from: name -> its files (the stage
    rules are declared by the time this is called)."""
    return {
        **{name: run_tables(name) for name in ("failure", "train", "influence", "metrics", "density_flow", "channels", "cross_terms", "conditions")},
        "init_sweep": [rules.influence_baselines.output.sweep],
        "structural": [rules.influence_baselines.output.structural],
        "remedies": [rules.remedies_table.output.table],
        **{f"bias_{name}": wf.bias_tables(BLOCKS, name) for name in ("matrix", "profiles", "iterations")},
        **{f"algebraic_{name}": [rules.algebraic.output[name]] for name in ("table", "profiles", "probes")},
    }
