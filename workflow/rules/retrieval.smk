# The retrieval stage (docs/retrieval.md): a needle at every fraction q of windows of real text, a check of
# the corpus, one job per model (the pretrained model or its random-init twin), length n and window, then one
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


# One job per (model, n, window): its examples go straight to the run's record (retrieval.record), so a
# stopped run resumes at the windows it lacks and each finished window can be committed.
rule retrieval_window:
    input:
        ancient(rules.retrieval_corpus.output[0]),
    output:
        f"{RETRIEVAL_RECORD}/windows/{{weights}}_n{{n}}_w{{k}}.parquet",
    log:
        "results/logs/retrieval/{weights}_n{n}_w{k}.log",
    benchmark:
        "results/benchmarks/retrieval/{weights}_n{n}_w{k}.tsv"
    wildcard_constraints:
        weights="pretrained|twin",
        n=r"\d+",
        k=r"\d+",
    conda:
        LOSTMID_ENV
    threads: 1
    resources:
        attempt=attempt_number,
        mem_mb=8000,
        runtime=60,
        gpu=GPU,
    params:
        device=config["device"],
        settings=config_json("retrieval"),
        twin=lambda wildcards: "--twin" if wildcards.weights == "twin" else "",
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid retrieval --device {params.device} --threads {threads} --settings {params.settings:q}"
            " --n {wildcards.n} --window {wildcards.k} {params.twin} --out {output}"
        )


rule retrieval_summary:
    input:
        RETRIEVAL_WINDOWS,
    output:
        examples="results/retrieval/examples.parquet",
        accuracy="results/retrieval/accuracy.parquet",
        predictive="results/retrieval/predictive.parquet",
        figure=report(
            "results/figures/retrieval.png",
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
        arguments=ARGUMENTS_FILE,
    shell:
        logged(
            "lostmid retrieval-summary --threads {threads} --settings {params.settings:q} --windows {input}"
            " --examples {output.examples} --accuracy {output.accuracy} --predictive {output.predictive}"
            " --figure {output.figure}"
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
