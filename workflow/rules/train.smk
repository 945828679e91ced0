# Training as a chain of checkpoints: init writes step 0, each segment continues by `every` steps.

import re


def previous_step(wildcards):
    step = int(wildcards.step)
    if step % EVERY:
        raise ValueError(f"checkpoint step {step} is not a multiple of train.every={EVERY}")
    return step - EVERY


def previous_checkpoint(wildcards):
    return CHECKPOINT.format(**run_of(wildcards).keys(), step=previous_step(wildcards))


# Seed batches (train.seed_batch > 1): one job trains a block of seeds of a variant, L and depth
# in one vmapped step. Their variants train through the per-batch rules at the end of this file.
SEED_BATCHES = lostmid_config.seed_batches(config)
BATCHED_VARIANTS = {run.variant for batch in SEED_BATCHES for run in batch}
UNBATCHED_VARIANTS = sorted({run.variant for run in RUNS} - BATCHED_VARIANTS)
TRAIN_TABLE = "results/train/" + RUN + "_step{step}.parquet"
# Log and benchmark record of one training job; {id}: the run (RUN) or the seed batch (batch_id).
TRAIN_LOG = "results/logs/train/{id}_step{step}.log"
TRAIN_BENCHMARK = "results/benchmarks/train/{id}_step{step}.tsv"


def batch_id(batch):
    """A seed batch's id in log and benchmark paths: ``{variant}/L{L}_M{depth}_seeds0-1-2``."""
    first = batch[0]
    return f"{first.variant}/L{first.L}_M{first.depth}_seeds" + "-".join(str(run.seed) for run in batch)


def training_benchmarks():
    """The benchmark record of every training segment: one per run, or one per seed batch."""
    ids = [RUN.format(**run.keys()) for run in RUNS if run.variant not in BATCHED_VARIANTS]
    ids += [batch_id(batch) for batch in SEED_BATCHES]
    return [TRAIN_BENCHMARK.format(id=id_, step=step) for id_ in ids for step in STEPS[1:]]


# The fitted attention-logit bias of `remedy: {kind: bias}` variants (rule bias_fit, remedies.smk).
BIAS_TENSOR = "results/bias_tensors/L{L}_M{depth}_{block}.pt"


def attention_bias(wildcards):
    """{"bias": fitted bias file} for a bias variant's run, else nothing."""
    spec = lostmid_config.run_spec(config, run_of(wildcards))
    if spec["remedy"].get("kind") != "bias":
        return {}
    return {"bias": BIAS_TENSOR.format(L=wildcards.L, depth=wildcards.depth, block=spec["model"]["block"])}


rule init_checkpoint:
    input:
        unpack(attention_bias),
    output:
        CHECKPOINT.replace("{step}", "0"),
    params:
        spec=spec_json,
        bias=lambda wildcards, input: f"--attention-bias {input.bias}" if hasattr(input, "bias") else "",
    log:
        "results/logs/init/" + RUN + ".log",
    benchmark:
        "results/benchmarks/init/" + RUN + ".tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        gpu=GPU,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid init --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " {params.bias} --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


if UNBATCHED_VARIANTS:

    rule train_segment:
        input:
            previous_checkpoint,
        output:
            checkpoint=CHECKPOINT,
            table=TRAIN_TABLE,
        wildcard_constraints:
            step=r"[1-9]\d*",
            variant="|".join(map(re.escape, UNBATCHED_VARIANTS)),
        params:
            spec=spec_json,
            steps=EVERY,
        log:
            TRAIN_LOG.format(id=RUN, step="{step}"),
        benchmark:
            TRAIN_BENCHMARK.format(id=RUN, step="{step}")
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            mem_mb=2000,
            attempt=attempt_number,
            gpu=GPU,
            runtime=60,
        shell:
            LOG_ATTEMPT + "lostmid train --spec {params.spec:q} --device {config[device]} --threads {threads}"
            " --checkpoint {input} --steps {params.steps} --out {output.checkpoint} --table {output.table} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


for batch in SEED_BATCHES:
    first, seeds = batch[0], [str(run.seed) for run in batch]

    rule:
        name:
            re.sub(r"\W", "_", f"train_{first.variant}_L{first.L}_M{first.depth}_seeds_{'_'.join(seeds)}")
        input:
            lambda wildcards, batch=batch: [CHECKPOINT.format(**run.keys(), step=previous_step(wildcards)) for run in batch],
        output:
            checkpoints=[CHECKPOINT.format(**run.keys(), step="{step}") for run in batch],
            tables=[TRAIN_TABLE.format(**run.keys(), step="{step}") for run in batch],
        wildcard_constraints:
            step=r"[1-9]\d*",
        params:
            spec=lostmid_config.canonical_json(lostmid_config.run_spec(config, first)),
            seeds=" ".join(seeds),
            steps=EVERY,
        log:
            TRAIN_LOG.format(id=batch_id(batch), step="{step}"),
        benchmark:
            TRAIN_BENCHMARK.format(id=batch_id(batch), step="{step}")
        conda:
            LOSTMID_ENV
        threads: 1
        # Declared here, not in the profiles' set-resources (keyed by rule name): these rules'
        # names follow the grid. One GPU for the batch, as for train_segment; a batch of an
        # objective that is not functional trains its seeds in turn, hence the runtime per seed.
        resources:
            mem_mb=2000,
            attempt=attempt_number,
            runtime=120 * len(batch),
            gpu=GPU,
        shell:
            LOG_ATTEMPT + "lostmid train --spec {params.spec:q} --seeds {params.seeds} --device {config[device]} --threads {threads}"
            " --checkpoint {input} --steps {params.steps} --out {output.checkpoints} --table {output.tables} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP
