# Evaluation at every checkpoint, one job per block of seeds: the failure rate by flag position on
# the fixed evaluation set, and the adjoint influence profiles (every residual step) with their
# regional metrics. The influence keys passed are exactly those of InfluenceSettings, so changing
# the density-flow keys never reruns it (lostmid.jobs.settings_json).

for block in jobs.stage_blocks(BLOCKS, "evaluate"):

    rule:
        name:
            f"evaluate_{block.rule}"
        input:
            checkpoints=block.checkpoints(),
            bias=bias_inputs(block),
        output:
            failure=block.paths(jobs.RUN_TABLES["failure"]),
            profiles=block.paths(jobs.RUN_TABLES["influence"]),
            metrics=block.paths(jobs.RUN_TABLES["metrics"]),
            answer_influence=block.paths(jobs.RUN_TABLES["answer_influence"]),
        log:
            f"results/logs/evaluate/{block.id}.log",
        benchmark:
            f"results/benchmarks/evaluate/{block.id}.tsv"
        group:
            "chain"
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=2000,
            runtime=10 * len(block.seeds),
            gpu=GPU,
        params:
            spec=block.spec,
            seeds=block.seed_list,
            device=config["device"],
            bias=bias_option(block),
            evaluation=config_json("evaluation"),
            influence=jobs.settings_json(config, InfluenceSettings),
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid evaluate --spec {params.spec:q} --seeds {params.seeds} --device {params.device} --threads {threads}"
                " --checkpoints {input.checkpoints} {params.bias} --evaluation {params.evaluation:q} --influence {params.influence:q}"
                " --failure {output.failure} --profiles {output.profiles} --metrics {output.metrics}"
                " --answer-influence {output.answer_influence}"
            )
