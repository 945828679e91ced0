# The retrieval stage (docs/retrieval.md): a needle at every fraction q of windows of real text, a check of
# the corpus, one job per model (the pretrained model or its random-init twin), length n and block of windows, then one
# job for the tables with intervals over windows and the figure, and one (rule retrieval) for the stage's rows
# of the evidence table. Runs only with a `retrieval` block (config/retrieval.yaml); its own target: `snakemake retrieval`.


# Before any window job: the corpus holds the windows asked for at every n (one line otherwise). Its output
# is part of the record, beside the windows, and the window jobs take it as ancient: a record that has it
# (a resumed run, a fresh clone) runs no check and reruns no window for it.
rule retrieval_corpus:
    output:
        f"{RETRIEVAL_RECORD}/corpus.json",
    log:
        "results/logs/retrieval/corpus.log",
    benchmark:
        "results/benchmarks/retrieval/corpus.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=2000,
        runtime=10,
        gpu=0,
    params:
        settings=config_json("retrieval"),
        arguments=ARGUMENTS_FILE,
    shell:
        logged("lostmid retrieval-corpus --settings {params.settings:q} --out {output}")


# One job per (model, n, block of retrieval.block windows): the model is loaded once per job, and each
# window's examples go straight to the run's record (retrieval.record) as soon as the window is done, so a
# stopped job resumes at the first window its record lacks and each finished window can be committed. The
# job's own output is the list of its window files (results/, never the record).
rule retrieval_block:
    input:
        ancient(rules.retrieval_corpus.output[0]),
    output:
        "results/retrieval/blocks/{weights}_n{n}_b{b}.json",
    log:
        "results/logs/retrieval/{weights}_n{n}_b{b}.log",
    benchmark:
        "results/benchmarks/retrieval/{weights}_n{n}_b{b}.tsv"
    wildcard_constraints:
        weights="pretrained|twin",
        n=r"\d+",
        b=r"\d+",
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=8000,
        runtime=240,
        gpu=GPU,
    params:
        device=config["device"],
        settings=config_json("retrieval"),
        record=lambda wildcards, input: os.path.dirname(input[0]),  # the record holds corpus.json
        twin=lambda wildcards: "--twin" if wildcards.weights == "twin" else "",
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid retrieval --device {params.device} --threads {threads} --settings {params.settings:q}"
            " --n {wildcards.n} --block {wildcards.b} {params.twin} --record {params.record:q} --done {output}"
        )


rule retrieval_summary:
    input:
        RETRIEVAL_BLOCKS,
    output:
        examples="results/retrieval/examples.parquet",
        accuracy="results/retrieval/accuracy.parquet",
        predictive="results/retrieval/predictive.parquet",
        figure="results/figures/retrieval.png",
        # the figure as a page that scrolls from its top (the viewer centres a bare image)
        viewer=report(
            "results/report_figures/retrieval.html",
            caption="../report/retrieval.rst",
            category="Architectures",
        ),
    log:
        "results/logs/retrieval/summary.log",
    benchmark:
        "results/benchmarks/retrieval/summary.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=2000,
        runtime=10,
        gpu=0,
    params:
        settings=config_json("retrieval"),
        windows=RETRIEVAL_WINDOWS,
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid retrieval-summary --threads {threads} --settings {params.settings:q} --windows {params.windows}"
            " --examples {output.examples} --accuracy {output.accuracy} --predictive {output.predictive}"
            " --figure {output.figure} --viewer {output.viewer}"
        )


# The stage's rows of the evidence table; as a target (`snakemake retrieval`) it pulls every job of the stage.
rule retrieval:
    input:
        rules.retrieval_summary.output.examples,
    output:
        "results/evidence/retrieval.parquet",
    log:
        "results/logs/evidence/retrieval.log",
    benchmark:
        "results/benchmarks/evidence/retrieval.tsv"
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=2000,
        runtime=10,
        gpu=0,
    params:
        settings=jobs.settings_json(config, EvidenceSettings),
        variants=canonical_json(config["variants"]),
        model=config_json("model"),
        retrieval=config_json("retrieval"),
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid evidence --threads {threads} --settings {params.settings:q} --variants {params.variants:q}"
            " --model {params.model:q} --retrieval-settings {params.retrieval:q} --family retrieval"
            " --retrieval {input} --out {output}"
        )
