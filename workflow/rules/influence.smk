# The per-block influence checks, one job per block, declared once: the density-flow check
# (paper eq. 69) of the blocks of `influence.flow_variants`, and the loss-free profiles (exact
# observability traces of Algorithm 3, output-Jacobian norms) of those of `influence.trace_variants`
# (none by default; docs/validation.md). And, independent of training, the influence at
# initialization versus depth and the structural baseline against its closed form, in one job.
BLOCK_CHECKS = {  # stage -> its command and the settings class it reads
    "density_flow": ("lostmid density-flow", FlowSettings),
    "observability": ("lostmid observability", TraceSettings),
}

for stage, (command, settings_class) in BLOCK_CHECKS.items():
    for block in jobs.stage_blocks(BLOCKS, stage):

        rule:
            name:
                f"{stage}_{block.rule}"
            input:
                checkpoints=block.checkpoints(),
                bias=bias_inputs(block),
            output:
                block.paths(jobs.RUN_TABLES[stage]),
            log:
                f"results/logs/{stage}/{block.id}.log",
            benchmark:
                f"results/benchmarks/{stage}/{block.id}.tsv"
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
                settings=jobs.settings_json(config, settings_class),
                command=command.removeprefix("lostmid "),  # a param: the shell is read when the job runs
                arguments=ARGUMENTS_FILE,
            shell:
                logged(
                    "lostmid {params.command} --spec {params.spec:q} --seeds {params.seeds} --device {params.device}"
                    " --threads {threads} --checkpoints {input.checkpoints} {params.bias} --settings {params.settings:q}"
                    " --out {output}"
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
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid influence-baselines --device {params.device} --threads {threads} --model {params.model:q}"
            " --init-sweep {params.init_sweep:q} --structural {params.structural:q}"
            " --sweep-out {output.sweep} --structural-out {output.structural}"
        )
