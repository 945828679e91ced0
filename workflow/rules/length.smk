# The sequence-length study (docs/length.md), when the config has a `length` block: the influence profiles
# at initialization at every L (one job), and the literal bias fit at every L with its held-out profiles
# and cost (one job). Trained lengths are ordinary grid blocks (config/length.yaml).

LENGTH = "length" in config

if LENGTH:

    rule length_init:
        output:
            "results/length/init.parquet",
        log:
            "results/logs/length/init.log",
        benchmark:
            "results/benchmarks/length/init.tsv"
        group:
            "summary"
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=2000,
            runtime=20,
            gpu=GPU,
        params:
            device=config["device"],
            model=config_json("model"),
            settings=jobs.settings_json(config, LengthSettings),
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid length-init --device {params.device} --threads {threads} --model {params.model:q}"
                " --settings {params.settings:q} --out {output}"
            )

    rule length_fit:
        output:
            profiles="results/length/fit_profiles.parquet",
            fits="results/length/fits.parquet",
        log:
            "results/logs/length/fit.log",
        benchmark:
            "results/benchmarks/length/fit.tsv"
        group:
            "summary"
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=8000,
            runtime=60,
            gpu=0,
        params:
            model=config_json("model"),
            settings=jobs.settings_json(config, LengthSettings),
            fit=jobs.length_fit_json(config),
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid length-fit --threads {threads} --model {params.model:q} --settings {params.settings:q}"
                " --fit {params.fit:q} --out {output.profiles} --fits {output.fits}"
            )

    # The study's target: its tables, the evidence and the figure; it runs nothing itself.
    rule length:
        input:
            rules.length_init.output,
            rules.length_fit.output,
            "results/evidence/evidence.parquet",
            "results/figures/length_imbalance.png",
        localrule: True
        threads: 1
