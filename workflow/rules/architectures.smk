# Real architectures (docs/architectures.md): influence profiles of Hugging Face causal LMs
# (GPT-2, Llama, Qwen2 at random init with stated seeds; pretrained models on real text beside
# their random-init twins) and of the flag-recall checkpoints, against the Cesaro and rollout
# theories. One job for the random-init sweep, one for the pretrained models and one for the
# flag-recall comparison, each drawing its own figure; each receives only its part of the
# config's `architectures` block.


rule architectures_sweep:
    output:
        profiles="results/architectures_profiles/sweep.parquet",
        layers="results/architectures_layers/sweep.parquet",
        comparison="results/architectures_comparison/sweep.parquet",
        figure="results/figures/architectures_sweep.png",
        # the figure as a page that scrolls from its top (the viewer centres a bare image)
        viewer=report(
            "results/report_figures/architectures_sweep.html",
            caption="../report/architectures_sweep.rst",
            category="Architectures",
        ),
    log:
        "results/logs/architectures/sweep.log",
    benchmark:
        "results/benchmarks/architectures/sweep.tsv"
    group:
        "summary"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=4000,
        runtime=30,
        gpu=GPU,
    params:
        device=config["device"],
        settings=config_json("architectures", exclude=("flag", "pretrained", "text")),
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid architectures --device {params.device} --threads {threads} --settings {params.settings:q}"
            " --profiles {output.profiles} --layers {output.layers} --comparison {output.comparison}"
            " --figure {output.figure} --viewer {output.viewer}"
        )


rule architectures_pretrained:
    input:
        [entry["path"] for entry in ARCHITECTURES.get("pretrained", []) if "path" in entry],
    output:
        profiles="results/architectures_pretrained/profiles.parquet",
        layers="results/architectures_pretrained/layers.parquet",
        comparison="results/architectures_pretrained/comparison.parquet",
        figure="results/figures/architectures_pretrained.png",
        # the figure as a page that scrolls from its top (the viewer centres a bare image)
        viewer=report(
            "results/report_figures/architectures_pretrained.html",
            caption="../report/architectures_pretrained.rst",
            category="Architectures",
        ),
    log:
        "results/logs/architectures/pretrained.log",
    benchmark:
        "results/benchmarks/architectures/pretrained.tsv"
    group:
        "summary"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=8000,
        runtime=120,
        gpu=GPU,
    params:
        device=config["device"],
        settings=config_json("architectures", ("pretrained", "text")),
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid architectures-pretrained --device {params.device} --threads {threads} --settings {params.settings:q}"
            " --profiles {output.profiles} --layers {output.layers} --comparison {output.comparison}"
            " --figure {output.figure} --viewer {output.viewer}"
        )


rule architectures_flag:
    input:
        checkpoints=[path for _, paths, _ in ARCHITECTURE_FLAG_RUNS for path in paths],
        bias=[bias for _, _, bias in ARCHITECTURE_FLAG_RUNS if bias],
    output:
        profiles="results/architectures_profiles/flag.parquet",
        layers="results/architectures_layers/flag.parquet",
        comparison="results/architectures_comparison/flag.parquet",
        figure="results/figures/architectures_flag.png",
        # the figure as a page that scrolls from its top (the viewer centres a bare image)
        viewer=report(
            "results/report_figures/architectures_flag.html",
            caption="../report/architectures_flag.rst",
            category="Architectures",
        ),
    log:
        "results/logs/architectures/flag.log",
    benchmark:
        "results/benchmarks/architectures/flag.tsv"
    group:
        "summary"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=2000,
        runtime=10,
        gpu=GPU,
    params:
        device=config["device"],
        settings=config_json("architectures", ("flag",)),
        runs=canonical_json(ARCHITECTURE_FLAG_RUNS),
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid architectures-flag --device {params.device} --threads {threads} --settings {params.settings:q}"
            " --runs {params.runs:q} --profiles {output.profiles} --layers {output.layers} --comparison {output.comparison}"
            " --figure {output.figure} --viewer {output.viewer}"
        )
