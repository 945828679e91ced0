# Adjoint influence (DESIGN.md section 4): per run, one job reads every checkpoint and writes
# the influence profiles (every residual step) and the regional metrics; a second per-run job
# checks the density flow (eq. 69). The initialization sweep and the structural baseline do
# not depend on training and have their own rules. Each rule receives only the keys of the
# config's `influence` block it reads (as JSON params), so changing e.g. `deltas` reruns the
# influence rule and its readers, never training and never the density-flow check.
import json

INFLUENCE = config.get("influence", {})
INFLUENCE_KEYS = ("batch_per_position", "seed", "deltas", "chunk")
FLOW_KEYS = ("seed", "flow_step", "flow_batch_per_position")


def influence_block(keys):
    return json.dumps({key: INFLUENCE[key] for key in keys if key in INFLUENCE}, sort_keys=True)


# The density-flow check follows gradient flow of the plain task risk, so it describes training
# only for variants trained on that risk; `flow_variants` (default: every variant) limits it.
# (lostmid.config.check_cross_keys has checked that every name is a defined variant.)
FLOW_VARIANTS = INFLUENCE.get("flow_variants") or sorted(config["variants"])
FLOW_RUNS = [run for run in RUNS if run.variant in FLOW_VARIANTS]


def every_flow_run(pattern):
    return [pattern.format(**run.keys()) for run in FLOW_RUNS]


rule influence:
    input:
        run_checkpoints,
    output:
        profiles="results/influence/" + RUN + ".parquet",
        metrics="results/metrics/" + RUN + ".parquet",
    params:
        spec=spec_json,
        settings=influence_block(INFLUENCE_KEYS),
    log:
        "results/logs/influence/" + RUN + ".log",
    benchmark:
        "results/benchmarks/influence/" + RUN + ".tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        gpu=GPU,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid influence --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " --checkpoints {input} --settings {params.settings:q}"
        " --profiles {output.profiles} --metrics {output.metrics} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule density_flow:
    input:
        run_checkpoints,
    output:
        "results/density_flow/" + RUN + ".parquet",
    params:
        spec=spec_json,
        settings=influence_block(FLOW_KEYS),
    log:
        "results/logs/density_flow/" + RUN + ".log",
    benchmark:
        "results/benchmarks/density_flow/" + RUN + ".tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        gpu=GPU,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid density-flow --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " --checkpoints {input} --settings {params.settings:q} --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule influence_init_sweep:
    output:
        "results/influence_init_sweep/sweep.parquet",
    params:
        model=json.dumps(config["model"], sort_keys=True),
        settings=json.dumps(INFLUENCE.get("init_sweep", {}), sort_keys=True),
    log:
        "results/logs/influence/init_sweep.log",
    benchmark:
        "results/benchmarks/influence/init_sweep.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        gpu=GPU,
        runtime=5,
    shell:
        LOG_ATTEMPT + "lostmid influence-init-sweep --device {config[device]} --threads {threads}"
        " --model {params.model:q} --settings {params.settings:q} --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule structural_baseline:
    output:
        "results/structural_baseline/baseline.parquet",
    params:
        settings=json.dumps(INFLUENCE.get("structural", {}), sort_keys=True),
    log:
        "results/logs/influence/structural.log",
    benchmark:
        "results/benchmarks/influence/structural.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=1000,
        attempt=attempt_number,
        gpu=GPU,
        runtime=5,
    shell:
        LOG_ATTEMPT + "lostmid structural-baseline --device {config[device]} --threads {threads}"
        " --settings {params.settings:q} --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_influence_profiles:
    input:
        every_run("results/influence/" + RUN + ".parquet"),
    output:
        report("results/figures/influence_profiles.png", caption="../report/influence_profiles.rst", category="Influence"),
    log:
        "results/logs/plots/influence_profiles.log",
    benchmark:
        "results/benchmarks/plots/influence_profiles.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-influence --kind profiles --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_influence_depth:
    input:
        every_run("results/influence/" + RUN + ".parquet"),
    output:
        report("results/figures/influence_depth.png", caption="../report/influence_depth.rst", category="Influence"),
    log:
        "results/logs/plots/influence_depth.log",
    benchmark:
        "results/benchmarks/plots/influence_depth.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-influence --kind depth --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_influence_metrics:
    input:
        every_run("results/metrics/" + RUN + ".parquet"),
    output:
        report("results/figures/influence_metrics.png", caption="../report/influence_metrics.rst", category="Influence"),
    params:
        delta=0.2,  # region scale shown; the nearest configured delta is used
    log:
        "results/logs/plots/influence_metrics.log",
    benchmark:
        "results/benchmarks/plots/influence_metrics.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-influence --kind metrics --delta {params.delta} --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_density_flow:
    input:
        every_flow_run("results/density_flow/" + RUN + ".parquet"),
    output:
        report("results/figures/density_flow.png", caption="../report/influence_density_flow.rst", category="Influence"),
    log:
        "results/logs/plots/density_flow.log",
    benchmark:
        "results/benchmarks/plots/density_flow.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-influence --kind flow --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_influence_init_sweep:
    input:
        rules.influence_init_sweep.output[0],
    output:
        report("results/figures/influence_init_sweep.png", caption="../report/influence_init_sweep.rst", category="Influence"),
    log:
        "results/logs/plots/influence_init_sweep.log",
    benchmark:
        "results/benchmarks/plots/influence_init_sweep.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-influence --kind init-sweep --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_structural_baseline:
    input:
        rules.structural_baseline.output[0],
    output:
        report("results/figures/structural_baseline.png", caption="../report/influence_structural.rst", category="Influence"),
    log:
        "results/logs/plots/structural_baseline.log",
    benchmark:
        "results/benchmarks/plots/structural_baseline.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-influence --kind structural --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


TARGETS += (
    every_run(rules.influence.output.profiles)
    + every_run(rules.influence.output.metrics)
    + every_flow_run(rules.density_flow.output[0])
    + rules.influence_init_sweep.output
    + rules.structural_baseline.output
    + rules.plot_influence_profiles.output
    + rules.plot_influence_depth.output
    + rules.plot_influence_metrics.output
    + (rules.plot_density_flow.output if FLOW_RUNS else [])
    + rules.plot_influence_init_sweep.output
    + rules.plot_structural_baseline.output
)
