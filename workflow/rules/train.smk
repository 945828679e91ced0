# Training as a chain of checkpoints: init writes step 0, each segment continues by `every` steps.

def previous_checkpoint(wildcards):
    step = int(wildcards.step)
    if step % EVERY:
        raise ValueError(f"checkpoint step {step} is not a multiple of train.every={EVERY}")
    return CHECKPOINT.format(**run_of(wildcards).keys(), step=step - EVERY)


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
        runtime=10,
    shell:
        "lostmid init --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " {params.bias} --out {output} > {log} 2>&1"


rule train_segment:
    input:
        previous_checkpoint,
    output:
        checkpoint=CHECKPOINT,
        table="results/train/" + RUN + "_step{step}.parquet",
    wildcard_constraints:
        step=r"[1-9]\d*",
    params:
        spec=spec_json,
        steps=EVERY,
    log:
        "results/logs/train/" + RUN + "_step{step}.log",
    benchmark:
        "results/benchmarks/train/" + RUN + "_step{step}.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    shell:
        "lostmid train --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " --checkpoint {input} --steps {params.steps} --out {output.checkpoint} --table {output.table} > {log} 2>&1"
