# Failure rate by flag position at every checkpoint, on the fixed stratified evaluation set.
# One job per run reads all its checkpoints: a job costs seconds of interpreter start-up,
# the evaluation itself a fraction of that.


rule failure:
    input:
        run_checkpoints,
    output:
        "results/failure/" + RUN + ".parquet",
    params:
        spec=spec_json,
        per_position=config["evaluation"]["per_position"],
        eval_seed=config["evaluation"]["seed"],
    log:
        "results/logs/failure/" + RUN + ".log",
    benchmark:
        "results/benchmarks/failure/" + RUN + ".tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        gpu=GPU,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid failure --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " --checkpoints {input} --per-position {params.per_position} --eval-seed {params.eval_seed}"
        " --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


# Every per-run table is a target itself, not only through the figures that read it: a table
# deleted by hand or by a failed job is rebuilt by the next plain run.
TARGETS += every_run(rules.failure.output[0])
