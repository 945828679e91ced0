# Every figure of the report and the HTML summary tables, drawn by one job (a figure is mostly
# interpreter and seaborn start-up). Included last: its inputs are the other stages' outputs.

# The tables `lostmid figures` takes (an option each), with their files: not every summary table (the
# loss-free profiles feed the evidence stage only).
FIGURE_INPUTS = {name: summary_tables()[name] for name in catalogue.FIGURE_TABLES}
FIGURE_NAMES = catalogue.figures(FIGURE_INPUTS)  # those whose tables the run has
PAGE_NAMES = catalogue.pages(FIGURE_INPUTS)


rule figures:
    input:
        **FIGURE_INPUTS,
    output:
        figures=[
            report(
                f"results/figures/{name}.png",
                caption=f"../report/{name}.rst",
                category=catalogue.FIGURES[name].category,
            )
            for name in FIGURE_NAMES
        ],
        vectors=[f"results/figures/{name}.pdf" for name in FIGURE_NAMES],  # the same figures for a paper
        pages=[
            report(
                f"results/report_tables/{name}.html", caption=f"../report/table_{name}.rst", category="Summary tables"
            )
            for name in PAGE_NAMES
        ],
    log:
        "results/logs/figures/figures.log",
    benchmark:
        "results/benchmarks/figures/figures.tsv"
    group:
        "summary"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=2000,
        runtime=20,
        gpu=0,
    params:
        figures=" ".join(FIGURE_NAMES),
        pages=" ".join(PAGE_NAMES),
        baseline=config["remedies"]["baseline"],
        delta=config["remedies"]["delta"],
        mid_accuracy=config["evidence"]["mid_accuracy"],
        variants=config_json("variants"),
        steps=" ".join(str(s) for s in config["remedies"].get("plot_steps", [])),  # none: the middle and last
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid figures --threads {threads} "
            + jobs.input_options(FIGURE_INPUTS)
            + " --figures {params.figures} --out-dir results/figures --pages {params.pages} --pages-dir results/report_tables"
            " --baseline {params.baseline} --delta {params.delta} --steps {params.steps}"
            " --mid-accuracy {params.mid_accuracy} --variants {params.variants:q}"
        )
