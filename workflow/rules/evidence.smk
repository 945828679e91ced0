# The evidence stage (docs/evidence.md): one job reads the per-run tables and the deterministic
# tables, and writes one row per claim of the blog and the paper (estimate, interval over seeds,
# verdict, decision rule in words) and its page in the report (a table, lostmid.plots.evidence). Its logic lives in
# lostmid.evidence; the decision rules are the config's `evidence` block.

EVIDENCE_TABLES = evidence_tables()


rule evidence:
    input:
        **EVIDENCE_TABLES,
    output:
        table="results/evidence/evidence.parquet",
        # "1." sorts the category after the findings ("0. Findings") and before every stage.
        page=report(
            "results/report_tables/evidence.html", caption="../report/table_evidence.rst", category="1. Evidence"
        ),
    log:
        "results/logs/evidence/evidence.log",
    benchmark:
        "results/benchmarks/evidence/evidence.tsv"
    group:
        "summary"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=2000,
        runtime=10,
        gpu=0,
    params:
        settings=jobs.settings_json(config, EvidenceSettings),
        variants=canonical_json(config["variants"]),
        model=config_json("model"),
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid evidence --threads {threads} --settings {params.settings:q} --variants {params.variants:q} --model {params.model:q} "
            + jobs.input_options(EVIDENCE_TABLES)
            + (" --without-family retrieval" if RETRIEVAL else "")  # decided by rule retrieval
            + " --out {output.table} --page {output.page}"
        )
