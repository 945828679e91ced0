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
