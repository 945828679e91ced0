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
        figures=[f"results/figures/{name}.png" for name in FIGURE_NAMES],
        # each figure in the report as a page that scrolls from its top (the viewer centres a bare image)
        viewers=[
            report(
                f"results/report_figures/{name}.html",
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
            + " --figures {params.figures} --out-dir results/figures --viewers-dir results/report_figures"
            " --pages {params.pages} --pages-dir results/report_tables"
            " --baseline {params.baseline} --delta {params.delta} --steps {params.steps}"
            " --mid-accuracy {params.mid_accuracy} --variants {params.variants:q}"
        )


# The report's first screen (workflow/report/workflow.rst includes it first): docs/findings.md's
# sentences and figures where the checkout has the page, else the run's headline and the blog's
# figures. (Not the manifest's stamp: the run is not finished while the job runs; the report shows
# the config and Snakemake's metadata, a run record's page its stamp.)
FINDINGS_PAGE = Path(workflow.basedir) / "docs" / "findings.md"
# The headline figure beside the answers: SmolLM2's accuracy by needle position (Liu et al.'s Figure 1 form),
# drawn from its committed record by `lostmid retrieval-page --record runs/smollm2_retrieval`.
HEADLINE = Path(workflow.basedir) / "runs" / "smollm2_retrieval" / "accuracy_by_position.png"
FRONT_FIGURES = (
    front.findings_figures(FINDINGS_PAGE.read_text(), FINDINGS_PAGE.parent) if FINDINGS_PAGE.exists() else []
) or [
    f"results/figures/{name}.png"
    for name in ("blog_failure", "blog_training", "blog_jacobian", "failure_by_position")
    if name in FIGURE_NAMES
]


rule report_front:
    input:
        evidence=rules.evidence.output.table,
        findings=[FINDINGS_PAGE] if FINDINGS_PAGE.exists() else [],
        figures=FRONT_FIGURES,
        headline=[HEADLINE] if HEADLINE.exists() else [],
    output:
        report(
            "results/report_front/findings.html",
            caption="../report/findings.rst",
            category="0. Findings",
        ),
    log:
        "results/logs/figures/report_front.log",
    benchmark:
        "results/benchmarks/figures/report_front.tsv"
    group:
        "summary"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=1000,
        runtime=5,
        gpu=0,
    params:
        findings=lambda wildcards, input: f"--findings {input.findings}" if input.findings else "",
        headline=lambda wildcards, input: f"--headline {input.headline}" if input.headline else "",
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid report-front --evidence {input.evidence} {params.findings} {params.headline} --figures {input.figures}"
            " --out {output}"
        )
