# Summary tables for the report: failure by position third, influence metrics, condition
# tests and the algebraic table, as HTML pages that `snakemake --report` shows inline.

REPORT_TABLES = ["failure", "metrics", "conditions", "algebraic"]


rule report_tables:
    input:
        failure=every_run("results/failure/" + RUN + ".parquet"),
        metrics=every_run("results/metrics/" + RUN + ".parquet"),
        conditions=every_residual_run(CHANNEL_TABLES["conditions"]),
        algebraic=rules.algebraic_table.output.table,
    output:
        [
            report(f"results/report_tables/{name}.html", caption=f"../report/table_{name}.rst", category="Summary tables")
            for name in REPORT_TABLES
        ],
    log:
        "results/logs/report_tables/report_tables.log",
    benchmark:
        "results/benchmarks/report_tables/report_tables.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid report-tables --failure {input.failure} --metrics {input.metrics}"
        " --conditions {input.conditions} --algebraic {input.algebraic} --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


TARGETS += rules.report_tables.output
