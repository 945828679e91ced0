# Remedies (DESIGN.md section 6, docs/remedies.md). Algorithms 1-3 are training objectives: their
# variants run through the ordinary training chain (train.smk) and every analysis stage. This
# file adds the attention-bias fit that `remedy: {kind: bias}` variants start from (init_checkpoint
# takes it as input), the remedies table over every run, and the figures.
import json

from lostmid.bias_settings import FitSettings, check_disjoint_from_training
from lostmid.errors import ConfigError

REMEDY_SETTINGS = {"baseline": "baseline", "delta": 0.2, "threshold": 0.99, "window": 20, **config.get("remedies", {})}


def _check_bias_variants():
    # The fit is keyed by (L, depth, block) and uses the config's model with that block, so a
    # bias variant may override only `block`: anything else would need a fit of its own.
    for name, variant in config["variants"].items():
        variant = variant or {}
        if variant.get("remedy", {}).get("kind") == "bias":
            extra = sorted(set(variant.get("model", {})) - {"block"})
            if extra:
                raise ConfigError(f"config key variants.{name}.model.{extra[0]}: a bias variant may override only model.block (the fit is per L, depth and block)")


_check_bias_variants()
# Checked here, not passed to the fit as a parameter: a new training seed must not refit B
# (and so retrain every debiased run).
check_disjoint_from_training(FitSettings.from_dict(config.get("bias_fit", {})), {run.seed for run in RUNS})


def bias_fit_model(wildcards):
    model = {**config["model"], "seq_len": int(wildcards.L), "depth": int(wildcards.depth), "block": wildcards.block}
    return json.dumps(model, sort_keys=True)


def remedy_blocks(wildcards):
    return json.dumps({name: (v or {}).get("remedy", {"kind": "none"}) for name, v in config["variants"].items()}, sort_keys=True)


rule bias_fit:
    output:
        tensor=BIAS_TENSOR,
        matrix="results/bias_fit_matrix/L{L}_M{depth}_{block}.parquet",
        iterations="results/bias_fit_iterations/L{L}_M{depth}_{block}.parquet",
        profiles="results/bias_fit_profiles/L{L}_M{depth}_{block}.parquet",
    wildcard_constraints:
        block=r"sequential|parallel",
    params:
        model=bias_fit_model,
        settings=json.dumps(config.get("bias_fit", {}), sort_keys=True),
    log:
        "results/logs/bias_fit/L{L}_M{depth}_{block}.log",
    benchmark:
        "results/benchmarks/bias_fit/L{L}_M{depth}_{block}.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        gpu=GPU,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid bias-fit --model {params.model:q} --settings {params.settings:q}"
        " --device {config[device]} --threads {threads} --out-tensor {output.tensor} --out-matrix {output.matrix}"
        " --out-iterations {output.iterations} --out-profiles {output.profiles} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


def bias_layouts():
    """(L, depth, block) of every run of a bias variant."""
    found = set()
    for run in RUNS:
        spec = lostmid_config.run_spec(config, run)
        if spec["remedy"].get("kind") == "bias":
            found.add((run.L, run.depth, spec["model"]["block"]))
    return sorted(found)


def bias_outputs(kind):
    return [f"results/bias_fit_{kind}/L{L}_M{depth}_{block}.parquet" for L, depth, block in bias_layouts()]


rule remedies_table:
    input:
        metrics=every_run("results/metrics/" + RUN + ".parquet"),
        failure=every_run("results/failure/" + RUN + ".parquet"),
        train=every_checkpoint("results/train/" + RUN + "_step{step}.parquet", steps=STEPS[1:]),
        benchmarks=training_benchmarks(),
    output:
        table="results/remedies/remedies.parquet",
        summary="results/remedies_summary/summary.parquet",
    params:
        variants=remedy_blocks,
        settings=json.dumps({k: v for k, v in REMEDY_SETTINGS.items() if k != "plot_steps"}, sort_keys=True),
    log:
        "results/logs/remedies/table.log",
    benchmark:
        "results/benchmarks/remedies/table.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        gpu=0,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid remedies-table --threads {threads} --device {config[device]} --variants {params.variants:q}"
        " --settings {params.settings:q} --metrics {input.metrics} --failure {input.failure} --train {input.train}"
        " --benchmarks {input.benchmarks} --out {output.table} --summary {output.summary} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_remedies:
    input:
        table=rules.remedies_table.output.table,
        failure=every_run("results/failure/" + RUN + ".parquet"),
        influence=every_run("results/influence/" + RUN + ".parquet"),
    output:
        failure=report("results/figures/remedy_failure.png", caption="../report/remedies_failure.rst", category="Remedies"),
        influence=report("results/figures/remedy_influence.png", caption="../report/remedies_influence.rst", category="Remedies"),
        ablation=report("results/figures/remedy_ablation.png", caption="../report/remedies_ablation.rst", category="Remedies"),
        overhead=report("results/figures/remedy_overhead.png", caption="../report/remedies_overhead.rst", category="Remedies"),
    params:
        baseline=REMEDY_SETTINGS["baseline"],
        steps=" ".join(str(s) for s in REMEDY_SETTINGS.get("plot_steps", [])),
    log:
        "results/logs/plots/remedies.log",
    benchmark:
        "results/benchmarks/plots/remedies.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-remedies --table {input.table} --failure {input.failure} --influence {input.influence}"
        " --baseline {params.baseline} --steps {params.steps} --out-failure {output.failure}"
        " --out-influence {output.influence} --out-ablation {output.ablation} --out-overhead {output.overhead} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_bias:
    input:
        matrices=bias_outputs("matrix"),
        profiles=bias_outputs("profiles"),
        iterations=bias_outputs("iterations"),
    output:
        heatmap=report("results/figures/bias_heatmap.png", caption="../report/remedies_bias_heatmap.rst", category="Remedies"),
        profile=report("results/figures/bias_profile.png", caption="../report/remedies_bias_profile.rst", category="Remedies"),
    log:
        "results/logs/plots/bias.log",
    benchmark:
        "results/benchmarks/plots/bias.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-bias --matrices {input.matrices} --profiles {input.profiles} --iterations {input.iterations}"
        " --out-heatmap {output.heatmap} --out-profile {output.profile} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


TARGETS += [rules.remedies_table.output.table, rules.remedies_table.output.summary, *rules.plot_remedies.output]
if bias_layouts():
    TARGETS += bias_outputs("matrix") + bias_outputs("iterations") + bias_outputs("profiles") + [*rules.plot_bias.output]
