# Training as a chain of checkpoints: init writes step 0, each segment continues by `every` steps.

def previous_checkpoint(wildcards):
    step = int(wildcards.step)
    if step % EVERY:
        raise ValueError(f"checkpoint step {step} is not a multiple of train.every={EVERY}")
    return CHECKPOINT.format(**run_of(wildcards).keys(), step=step - EVERY)


rule init_checkpoint:
    output:
        CHECKPOINT.replace("{step}", "0"),
    params:
        spec=spec_json,
    log:
        "results/logs/init/" + RUN + ".log",
    benchmark:
        "results/benchmarks/init/" + RUN + ".tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "lostmid init --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " --out {output} > {log} 2>&1"


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
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    shell:
        "lostmid train --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " --checkpoint {input} --steps {params.steps} --out {output.checkpoint} --table {output.table} > {log} 2>&1"
