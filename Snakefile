# lostmid: where a causal Transformer looks in its context, as a Snakemake workflow.
# This file only wires things together: configuration, validation, the stage files, rule all.
# Each stage lives in workflow/rules/<stage>.smk; its logic lives in the lostmid library.
from pathlib import Path

from snakemake.utils import min_version

import lostmid.config as lostmid_config

min_version("9.0")


configfile: "config/config.yaml"


lostmid_config.validate(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")

report: "workflow/report/workflow.rst"

# Each stage file appends the files it contributes to the default target.
TARGETS = []


include: "workflow/rules/common.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/algebraic.smk"
include: "workflow/rules/influence.smk"
include: "workflow/rules/channels.smk"
include: "workflow/rules/remedies.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/evidence.smk"


rule all:
    default_target: True
    input:
        TARGETS,
