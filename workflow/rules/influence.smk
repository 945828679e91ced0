# The density-flow check (paper eq. 69) of the blocks of `influence.flow_variants`, one job per
# block; and, independent of training, the influence at initialization versus depth and the
# structural baseline against its closed form, in one job.

for block in jobs.stage_blocks(BLOCKS, "density_flow"):

    rule:
        name:
            f"density_flow_{block.rule}"
        input:
            checkpoints=block.checkpoints(),
            bias=bias_inputs(block),
        output:
            block.paths(jobs.RUN_TABLES["density_flow"]),
        log:
            f"results/logs/density_flow/{block.id}.log",
        benchmark:
            f"results/benchmarks/density_flow/{block.id}.tsv"
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
            settings=jobs.settings_json(config, FlowSettings),
        shell:
            logged(
                "lostmid density-flow --spec {params.spec:q} --seeds {params.seeds} --device {params.device} --threads {threads}"
                " --checkpoints {input.checkpoints} {params.bias} --settings {params.settings:q} --out {output}"
            )


# The loss-free profiles (exact observability traces of Algorithm 3, output-Jacobian norms) of the blocks of
# `influence.trace_variants` (none by default), one job per block (docs/validation.md).
for block in jobs.stage_blocks(BLOCKS, "observability"):

    rule:
        name:
            f"observability_{block.rule}"
        input:
            checkpoints=block.checkpoints(),
            bias=bias_inputs(block),
        output:
            block.paths(jobs.RUN_TABLES["observability"]),
        log:
            f"results/logs/observability/{block.id}.log",
        benchmark:
            f"results/benchmarks/observability/{block.id}.tsv"
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
            settings=jobs.settings_json(config, TraceSettings),
        shell:
            logged(
                "lostmid observability --spec {params.spec:q} --seeds {params.seeds} --device {params.device} --threads {threads}"
                " --checkpoints {input.checkpoints} {params.bias} --settings {params.settings:q} --out {output}"
            )


rule influence_baselines:
    output:
        sweep="results/influence_init_sweep/sweep.parquet",
        structural="results/structural_baseline/baseline.parquet",
    log:
        "results/logs/influence/baselines.log",
    benchmark:
        "results/benchmarks/influence/baselines.tsv"
    group:
        "summary"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=1000,
        runtime=10,
        gpu=GPU,
    params:
        device=config["device"],
        model=config_json("model"),
        init_sweep=jobs.settings_json(config, InitSweepSettings),
        structural=jobs.settings_json(config, StructuralSettings),
    shell:
        logged(
            "lostmid influence-baselines --device {params.device} --threads {threads} --model {params.model:q}"
            " --init-sweep {params.init_sweep:q} --structural {params.structural:q}"
            " --sweep-out {output.sweep} --structural-out {output.structural}"
        )
