# Figures of the training stage, registered for `snakemake --report`.


rule plot_failure:
    input:
        every_run("results/failure/" + RUN + ".parquet"),
    output:
        report(
            "results/figures/failure_by_position.png",
            caption="../report/failure_by_position.rst",
            category="Training",
        ),
    log:
        "results/logs/plots/failure_by_position.log",
    benchmark:
        "results/benchmarks/plots/failure_by_position.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-failure --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_training:
    input:
        every_checkpoint("results/train/" + RUN + "_step{step}.parquet", steps=STEPS[1:]),
    output:
        report(
            "results/figures/training_curves.png",
            caption="../report/training_curves.rst",
            category="Training",
        ),
    log:
        "results/logs/plots/training_curves.log",
    benchmark:
        "results/benchmarks/plots/training_curves.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-training --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


# Every segment's training table is a target itself (not only through the figure), so a table
# deleted by hand or by a failed job is rebuilt by the next plain run.
TARGETS += every_checkpoint(TRAIN_TABLE, steps=STEPS[1:]) + rules.plot_failure.output + rules.plot_training.output
