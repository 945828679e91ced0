# Real architectures (docs/architectures.md): influence profiles of Hugging Face causal LMs
# (GPT-2, Llama, Qwen2; random init with stated seeds, or local pretrained folders) and of the
# flag-recall checkpoints, against the Cesaro and rollout theories. Python start-up costs ~3 s a
# job, so the whole random-init sweep is one job, the flag-recall comparison one job, the figures
# one job. Each job receives only its part of the config's `architectures` block.
import json

ARCH = config.get("architectures") or {}
ARCH_SWEEP = {key: value for key, value in ARCH.items() if key != "flag"}
if ARCH.get("d_model", 32) % ARCH.get("heads", 4):
    raise ValueError(f"config key architectures.d_model={ARCH.get('d_model', 32)} is not divisible by architectures.heads={ARCH.get('heads', 4)}")
ARCH_FLAG_VARIANTS = (ARCH.get("flag") or {}).get("variants", ["baseline"])
_unknown = sorted(set(ARCH_FLAG_VARIANTS) - set(config["variants"]))
if _unknown:
    raise ValueError(f"config key architectures.flag.variants names {_unknown}, which are not defined under variants")
ARCH_FLAG_RUNS = [run for run in RUNS if run.variant in ARCH_FLAG_VARIANTS]
if not ARCH_FLAG_RUNS:
    raise ValueError(f"config key architectures.flag.variants: no run of the grid has variant {ARCH_FLAG_VARIANTS}")
ARCH_FLAG_STEPS = sorted({STEPS[0], STEPS[-1]})  # the untrained and the fully trained checkpoint


def arch_flag_checkpoints():
    return [CHECKPOINT.format(**run.keys(), step=step) for run in ARCH_FLAG_RUNS for step in ARCH_FLAG_STEPS]


def arch_flag_runs():
    """[run spec, [checkpoints]] per run, as JSON: the command checks each checkpoint against its spec."""
    runs = [[lostmid_config.run_spec(config, run), [CHECKPOINT.format(**run.keys(), step=step) for step in ARCH_FLAG_STEPS]]
            for run in ARCH_FLAG_RUNS]
    return lostmid_config.canonical_json(runs)


def arch_table(name, part):
    return f"results/architectures_{name}/{part}.parquet"


rule architectures_sweep:
    input:
        [entry["path"] for entry in ARCH.get("pretrained", [])],
    output:
        profiles=arch_table("profiles", "sweep"),
        layers=arch_table("layers", "sweep"),
        comparison=arch_table("comparison", "sweep"),
    params:
        settings=json.dumps(ARCH_SWEEP, sort_keys=True),
    log:
        "results/logs/architectures/sweep.log",
    benchmark:
        "results/benchmarks/architectures/sweep.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "lostmid architectures --device {config[device]} --threads {threads} --settings {params.settings:q}"
        " --profiles {output.profiles} --layers {output.layers} --comparison {output.comparison} > {log} 2>&1"


rule architectures_flag:
    input:
        arch_flag_checkpoints(),
    output:
        profiles=arch_table("profiles", "flag"),
        layers=arch_table("layers", "flag"),
        comparison=arch_table("comparison", "flag"),
    params:
        settings=json.dumps({"flag": ARCH.get("flag") or {}}, sort_keys=True),
        runs=arch_flag_runs(),
    log:
        "results/logs/architectures/flag.log",
    benchmark:
        "results/benchmarks/architectures/flag.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "lostmid architectures-flag --device {config[device]} --threads {threads} --settings {params.settings:q}"
        " --runs {params.runs:q} --profiles {output.profiles} --layers {output.layers} --comparison {output.comparison} > {log} 2>&1"


rule plot_architectures:
    input:
        sweep=rules.architectures_sweep.output.profiles,
        flag=rules.architectures_flag.output.profiles,
    output:
        sweep=report("results/figures/architectures_sweep.png", caption="../report/architectures_sweep.rst", category="Architectures"),
        flag=report("results/figures/architectures_flag.png", caption="../report/architectures_flag.rst", category="Architectures"),
    log:
        "results/logs/plots/architectures.log",
    benchmark:
        "results/benchmarks/plots/architectures.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "lostmid plot-architectures --sweep {input.sweep} --flag {input.flag} --out {output.sweep} {output.flag} > {log} 2>&1"


TARGETS += [*rules.architectures_sweep.output, *rules.architectures_flag.output, *rules.plot_architectures.output]
