# The evidence stage (docs/evidence.md): one job reads the per-run tables and the deterministic
# tables, and writes one row per claim of the blog and the paper (estimate, interval over seeds,
# verdict, decision rule in words) and the forest plot that opens the report. Its logic lives in
# lostmid.evidence.claims; the decision rules are the config's `evidence` block.
import json


def evidence_variants():
    return json.dumps(config["variants"], sort_keys=True)


rule evidence:
    input:
        failure=every_run("results/failure/" + RUN + ".parquet"),
        metrics=every_run("results/metrics/" + RUN + ".parquet"),
        density_flow=every_flow_run("results/density_flow/" + RUN + ".parquet"),
        conditions=every_residual_run(CHANNEL_TABLES["conditions"]),
        structural=rules.structural_baseline.output[0],
        init_sweep=rules.influence_init_sweep.output[0],
        bias_matrix=bias_outputs("matrix"),
        algebraic_table=rules.algebraic_table.output.table,
        algebraic_probes=rules.algebraic_probes.output[0],
    output:
        table="results/evidence/evidence.parquet",
        # "0." sorts the category before every other one: the forest plot opens the report.
        forest=report("results/figures/evidence_forest.png", caption="../report/evidence_forest.rst", category="0. Evidence"),
    params:
        settings=json.dumps(config.get("evidence", {}), sort_keys=True),
        variants=evidence_variants(),
        model=json.dumps(config["model"], sort_keys=True),
        # An empty list (e.g. no bias variant) must not become a bare option.
        flow=lambda wildcards, input: " ".join(["--density-flow", *input.density_flow]) if input.density_flow else "",
        conditions=lambda wildcards, input: " ".join(["--conditions", *input.conditions]) if input.conditions else "",
        bias=lambda wildcards, input: " ".join(["--bias-matrix", *input.bias_matrix]) if input.bias_matrix else "",
    log:
        "results/logs/evidence/evidence.log",
    benchmark:
        "results/benchmarks/evidence/evidence.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "lostmid evidence --threads {threads} --settings {params.settings:q} --variants {params.variants:q}"
        " --model {params.model:q} --failure {input.failure} --metrics {input.metrics} {params.flow}"
        " {params.conditions} {params.bias} --structural {input.structural} --init-sweep {input.init_sweep}"
        " --algebraic-table {input.algebraic_table} --algebraic-probes {input.algebraic_probes}"
        " --out {output.table} --forest {output.forest} > {log} 2>&1"


TARGETS += [rules.evidence.output.table, rules.evidence.output.forest]
