# Algebraic controlled simulations of the paper's section 4 (docs/algebraic.md), independent of
# training: the remedy table, its profiles and the probe study, in one job.


rule algebraic:
    output:
        table="results/algebraic_table/table.parquet",
        profiles="results/algebraic_profiles/profiles.parquet",
        probes="results/algebraic_probes/probes.parquet",
    log:
        "results/logs/algebraic/algebraic.log",
    benchmark:
        "results/benchmarks/algebraic/algebraic.tsv"
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
        settings=jobs.settings_json(config, AlgebraicSettings),
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid algebraic --threads {threads} --settings {params.settings:q}"
            " --table {output.table} --profiles {output.profiles} --probes {output.probes}"
        )
