# Channel decomposition of the input adjoint and the sufficient-condition tests (docs/channels.md),
# one job per block of residual runs; runs with `model.residual: false` have no residual channel
# and get no job (`lostmid channels` refuses them).

for block in jobs.stage_blocks(BLOCKS, "channels"):

    rule:
        name:
            f"channels_{block.rule}"
        input:
            checkpoints=block.checkpoints(),
            bias=bias_inputs(block),
        output:
            channels=block.paths(jobs.RUN_TABLES["channels"]),
            cross_terms=block.paths(jobs.RUN_TABLES["cross_terms"]),
            conditions=block.paths(jobs.RUN_TABLES["conditions"]),
        log:
            f"results/logs/channels/{block.id}.log",
        benchmark:
            f"results/benchmarks/channels/{block.id}.tsv"
        group:
            "chain"
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=2000,
            runtime=30 * len(block.seeds),
            gpu=GPU,
        params:
            spec=block.spec,
            seeds=block.seed_list,
            device=config["device"],
            bias=bias_option(block),
            settings=jobs.settings_json(config, ChannelSettings),
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid channels --spec {params.spec:q} --seeds {params.seeds} --device {params.device} --threads {threads}"
                " --settings {params.settings:q} --checkpoints {input.checkpoints} {params.bias}"
                " --channels {output.channels} --cross-terms {output.cross_terms} --conditions {output.conditions}"
            )
