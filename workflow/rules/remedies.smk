# Remedies (docs/remedies.md). Algorithms 1-3 are training objectives: their variants run through
# the ordinary training chain and every analysis stage. This file adds the attention-bias fit that
# a `remedy: {kind: bias}` variant starts from (one job per bias variant, L and depth:
# lostmid.jobs.bias_fits) and the remedies table over every run.


for fit in FITS:

    rule:
        name:
            f"bias_fit_{fit.rule}"
        output:
            **{name: fit.path(pattern) for name, pattern in jobs.BIAS_TABLES.items()},
            tensor=fit.path(jobs.BIAS_TENSOR),
        log:
            f"results/logs/bias_fit/{fit.id}.log",
        benchmark:
            f"results/benchmarks/bias_fit/{fit.id}.tsv"
        priority: fit.priority
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
        params:
            variant=fit.variant,
            fit_model=fit.fit_model,
            model=fit.model,
            fit_model_spec=fit.fit_model_spec,
            settings=fit.settings,
            training_seeds=fit.training_seeds,
            device=config["device"],
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid bias-fit --variant {params.variant} --fit-model {params.fit_model}"
                " --model {params.model:q} --fit-model-spec {params.fit_model_spec:q} --settings {params.settings:q}"
                " --training-seeds {params.training_seeds} --device {params.device} --threads {threads}"
                " --out-tensor {output.tensor} --out-matrix {output.matrix} --out-iterations {output.iterations}"
                " --out-profiles {output.profiles} --out-summary {output.summary}"
            )


rule remedies_table:
    input:
        metrics=run_tables("metrics"),
        failure=run_tables("failure"),
        train=run_tables("train"),
        benchmarks=jobs.training_benchmarks(BLOCKS),
    output:
        table="results/remedies/remedies.parquet",
        summary="results/remedies_summary/summary.parquet",
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
    params:
        variants=jobs.remedy_sections(config),
        settings=config_json("remedies", exclude=("plot_steps",)),
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid remedies-table --threads {threads} --variants {params.variants:q}"
            " --settings {params.settings:q} --metrics {input.metrics} --failure {input.failure} --train {input.train}"
            " --benchmarks {input.benchmarks} --out {output.table} --summary {output.summary}"
        )
