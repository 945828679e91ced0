# lostmid: where a causal Transformer looks in its context, as a Snakemake workflow.
# This file only wires things together: configuration, validation, the stage files, rule all.
# Each stage lives in workflow/rules/<stage>.smk; its logic lives in the lostmid library
# (the jobs and paths in lostmid.jobs, the computations behind the `lostmid` command line).
from pathlib import Path

from snakemake.utils import min_version

import lostmid
import lostmid.config as lostmid_config
import lostmid.jobs as jobs
from lostmid import numerics
from lostmid.seed_ledger import LEDGER, check_fresh_seeds

min_version("9.0")


# The config is config/config.yaml, or, when --configfile is given, those files alone (merged in
# order): a config file means what it says, whatever the working directory holds; an overlay names
# its base (`base:`) and goes after it (`--configfile config/config.yaml config/ablations.yaml`).
# Each file is read here too, by lostmid's reader: it refuses a key written twice in one mapping
# (YAML keeps the last), names the file and line of a syntax error, which Snakemake's message does
# not, and an overlay given without its base. (Snakemake reads a --configfile before this file runs,
# so a missing or unparsable one stops it first: then `lostmid check-config FILE` names the problem.)
lostmid_config.read_merged(workflow.overwrite_configfiles or ["config/config.yaml"])
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


lostmid_config.validate(config)  # src/lostmid/config.schema.yaml; fills in its defaults: the rules pass complete blocks
# The math libraries of every job held to the config's numerics mode (lostmid.numerics): the jobs inherit
# this process's environment. And the lostmid this workflow runs must be this checkout's own.
numerics.pin(config["numerics"])
lostmid_config.check_checkout(lostmid.__file__, workflow.basedir)
jobs.check(config)
# A config declaring its seeds fresh (fresh_seeds) is refused if runs/seed_ledger.yaml records one for another.
check_fresh_seeds(config, Path(workflow.basedir) / LEDGER)


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/influence.smk"
include: "workflow/rules/channels.smk"
include: "workflow/rules/remedies.smk"
include: "workflow/rules/controls.smk"
include: "workflow/rules/algebraic.smk"
include: "workflow/rules/architectures.smk"
include: "workflow/rules/retrieval.smk"
include: "workflow/rules/fix.smk"
include: "workflow/rules/length.smk"
include: "workflow/rules/study.smk"
include: "workflow/rules/evidence.smk"
include: "workflow/rules/figures.smk"


rule all:
    default_target: True
    input:
        jobs.default_targets(BLOCKS),
        rules.remedies_table.output,
        rules.influence_baselines.output,
        rules.algebraic.output,
        rules.architectures_sweep.output if ARCHITECTURES else [],
        rules.architectures_pretrained.output if ARCHITECTURES.get("pretrained") else [],
        rules.architectures_flag.output if ARCHITECTURE_FLAG_RUNS else [],
        rules.retrieval.output if RETRIEVAL else [],
        rules.length.input if LENGTH else [],
        rules.evidence.output,
        rules.figures.output,
        rules.report_front.output,
