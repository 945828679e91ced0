# Algebraic controlled simulations of the paper's section 4 (DESIGN.md section 7).
# Independent of training: the settings are the config's `algebraic` block, passed as JSON so
# that changing any algebraic constant reruns exactly these rules (params are part of the
# rerun triggers). The library fills defaults for keys the block leaves out.
import json


def algebraic_settings(wildcards):
    return json.dumps(config.get("algebraic", {}), sort_keys=True)


rule algebraic_table:
    output:
        table="results/algebraic_table/table.parquet",
        profiles="results/algebraic_profiles/profiles.parquet",
    params:
        settings=algebraic_settings,
    log:
        "results/logs/algebraic/table.log",
    benchmark:
        "results/benchmarks/algebraic/table.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        runtime=5,
    shell:
        LOG_ATTEMPT + "lostmid algebraic-table --threads {threads} --settings {params.settings:q}"
        " --out {output.table} --profiles {output.profiles} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule algebraic_probes:
    output:
        "results/algebraic_probes/probes.parquet",
    params:
        settings=algebraic_settings,
    log:
        "results/logs/algebraic/probes.log",
    benchmark:
        "results/benchmarks/algebraic/probes.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        runtime=5,
    shell:
        LOG_ATTEMPT + "lostmid algebraic-probes --threads {threads} --settings {params.settings:q} --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_algebraic_table:
    input:
        table=rules.algebraic_table.output.table,
        profiles=rules.algebraic_table.output.profiles,
    output:
        report(
            "results/figures/algebraic_table.png",
            caption="../report/algebraic_table.rst",
            category="Algebraic simulations",
        ),
    log:
        "results/logs/algebraic/plot_table.log",
    benchmark:
        "results/benchmarks/algebraic/plot_table.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        runtime=5,
    shell:
        LOG_ATTEMPT + "lostmid plot-algebraic --table {input.table} --profiles {input.profiles} --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_algebraic_probes:
    input:
        rules.algebraic_probes.output[0],
    output:
        report(
            "results/figures/algebraic_probes.png",
            caption="../report/algebraic_probes.rst",
            category="Algebraic simulations",
        ),
    log:
        "results/logs/algebraic/plot_probes.log",
    benchmark:
        "results/benchmarks/algebraic/plot_probes.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        runtime=5,
    shell:
        LOG_ATTEMPT + "lostmid plot-algebraic --probes {input} --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


TARGETS += [
    rules.algebraic_table.output.table,
    rules.algebraic_table.output.profiles,
    rules.algebraic_probes.output[0],
    rules.plot_algebraic_table.output[0],
    rules.plot_algebraic_probes.output[0],
]
