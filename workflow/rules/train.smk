# Training as chained checkpoints, one job per block of seeds (lostmid.jobs.Block): init
# writes step 0 of every seed of the block, each segment continues them by the variant's
# `every` steps. A bias variant's block starts from its fitted attention bias (remedies.smk), and
# each segment checks that its checkpoints were made from that bias (its digest is in their fingerprint).

for block in BLOCKS:

    rule:
        name:
            f"init_{block.rule}"
        input:
            bias=bias_inputs(block),
        output:
            block.paths(jobs.CHECKPOINT, step=0),
        log:
            f"results/logs/init/{block.id}.log",
        benchmark:
            f"results/benchmarks/init/{block.id}.tsv"
        priority: block.priority
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
            spec=block.spec,
            seeds=block.seed_list,
            device=config["device"],
            bias=bias_option(block),
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid init --spec {params.spec:q} --seeds {params.seeds} --device {params.device}"
                " --threads {threads} {params.bias} --out {output}"
            )

    rule:
        name:
            f"train_{block.rule}"
        input:
            checkpoints=lambda wildcards, block=block: block.previous_checkpoints(wildcards.step),
            bias=bias_inputs(block),
        output:
            checkpoints=block.paths(jobs.CHECKPOINT, step="{step}"),
            tables=block.paths(jobs.TRAIN_TABLE, step="{step}"),
        log:
            f"results/logs/train/{block.id}_step{{step}}.log",
        benchmark:
            jobs.training_benchmark(block)
        wildcard_constraints:
            step=r"[1-9]\d*",
        priority: block.priority
        group:
            "chain"
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=2000,
            runtime=60 * len(block.seeds),
            gpu=GPU,
        params:
            spec=block.spec,
            seeds=block.seed_list,
            device=config["device"],
            steps=block.every,
            bias=bias_option(block),
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid train --spec {params.spec:q} --seeds {params.seeds} --device {params.device} --threads {threads}"
                " --checkpoint {input.checkpoints} {params.bias} --steps {params.steps} --out {output.checkpoints}"
                " --table {output.tables}"
            )
