# Remedies (docs/remedies.md). Algorithms 1-3 are training objectives: their variants run through
# the ordinary training chain and every analysis stage. This file adds the attention-bias fit that
# a `remedy: {kind: bias}` variant starts from (one per bias variant, L and depth, on the variant's
# own model) and the remedies table over every run.


rule bias_fit:
    output:
        tensor=wf.BIAS_TENSOR,
        matrix=wf.BIAS_TABLES["matrix"],
        iterations=wf.BIAS_TABLES["iterations"],
        profiles=wf.BIAS_TABLES["profiles"],
    params:
        model=lambda wildcards: wf.bias_fit_model(config, wildcards.variant, wildcards.L, wildcards.depth),
        settings=config_json("bias_fit"),
    log:
        "results/logs/bias_fit/" + wf.FIT + ".log",
    benchmark:
        "results/benchmarks/bias_fit/" + wf.FIT + ".tsv"
    group:
        "chain"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=1000,
        runtime=10,
        gpu=GPU,
    shell:
        LOG_ATTEMPT
        + "lostmid bias-fit --variant {wildcards.variant} --model {params.model:q} --settings {params.settings:q}"
        " --device {config[device]} --threads {threads} --out-tensor {output.tensor} --out-matrix {output.matrix}"
        " --out-iterations {output.iterations} --out-profiles {output.profiles} >> {log}.attempt{resources.attempt} 2>&1"
        + LOG_KEEP


rule remedies_table:
    input:
        metrics=run_tables("metrics"),
        failure=run_tables("failure"),
        train=run_tables("train"),
        benchmarks=wf.training_benchmarks(BLOCKS),
    output:
        table="results/remedies/remedies.parquet",
        summary="results/remedies_summary/summary.parquet",
    params:
        variants=wf.remedy_blocks(config),
        settings=canonical_json({k: v for k, v in config["remedies"].items() if k != "plot_steps"}),
    log:
        "results/logs/remedies/table.log",
    benchmark:
        "results/benchmarks/remedies/table.tsv"
    group:
        "summary"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=1000,
        runtime=10,
        gpu=0,
    shell:
        LOG_ATTEMPT
        + "lostmid remedies-table --threads {threads} --variants {params.variants:q}"
        " --settings {params.settings:q} --metrics {input.metrics} --failure {input.failure} --train {input.train}"
        " --benchmarks {input.benchmarks} --out {output.table} --summary {output.summary} >> {log}.attempt{resources.attempt} 2>&1"
        + LOG_KEEP
