# Channel decomposition of the input adjoint and the sufficient-condition tests (DESIGN.md section 5).
# One job per residual run reads every checkpoint and writes three tables: channel energies,
# cross terms and condition tests. Runs with `model.residual: false` have no residual channel:
# they are left out here (no job, no table), and `lostmid channels` refuses them.
# The settings are the config's `channels` block, passed as JSON so that changing any of them
# reruns exactly these rules (and their figures), never training.
import json

CHANNEL_TABLES = {name: f"results/{name}/" + RUN + ".parquet" for name in ("channels", "cross_terms", "conditions")}
CHANNEL_SETTINGS = json.dumps(config.get("channels", {}), sort_keys=True)


def residual_runs():
    return [run for run in RUNS if lostmid_config.run_spec(config, run)["model"]["residual"]]


def every_residual_run(pattern):
    return [pattern.format(**run.keys()) for run in residual_runs()]


rule channels:
    input:
        run_checkpoints,
    output:
        **CHANNEL_TABLES,
    params:
        spec=spec_json,
        settings=CHANNEL_SETTINGS,
    log:
        "results/logs/channels/" + RUN + ".log",
    benchmark:
        "results/benchmarks/channels/" + RUN + ".tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        gpu=GPU,
        runtime=30,
    shell:
        LOG_ATTEMPT + "lostmid channels --spec {params.spec:q} --device {config[device]} --threads {threads}"
        " --settings {params.settings:q} --checkpoints {input}"
        " --channels {output.channels} --cross-terms {output.cross_terms} --conditions {output.conditions}"
        " >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_channel_energies:
    input:
        channels=every_residual_run(CHANNEL_TABLES["channels"]),
        cross_terms=every_residual_run(CHANNEL_TABLES["cross_terms"]),
    output:
        report(
            "results/figures/channel_energies.png",
            caption="../report/channels_energies.rst",
            category="Channels",
        ),
    log:
        "results/logs/plots/channel_energies.log",
    benchmark:
        "results/benchmarks/plots/channel_energies.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-channels --threads {threads} --channels {input.channels} --cross-terms {input.cross_terms}"
        " --out {output} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


rule plot_conditions:
    input:
        every_residual_run(CHANNEL_TABLES["conditions"]),
    output:
        report(
            "results/figures/conditions.png",
            caption="../report/channels_conditions.rst",
            category="Channels",
        ),
    log:
        "results/logs/plots/conditions.log",
    benchmark:
        "results/benchmarks/plots/conditions.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        attempt=attempt_number,
        runtime=10,
    shell:
        LOG_ATTEMPT + "lostmid plot-conditions --threads {threads} --out {output} {input} >> {log}.attempt{resources.attempt} 2>&1" + LOG_KEEP


if residual_runs():
    TARGETS += (
        [path for pattern in CHANNEL_TABLES.values() for path in every_residual_run(pattern)]
        + rules.plot_channel_energies.output
        + rules.plot_conditions.output
    )
