# Controls for the blog's fix (docs/remedies.md, "Controls for the fix"): a control variant's B is built
# by a rule (lostmid.analysis.bias_controls) from the fitted B of another bias variant at the same L and
# depth, one job per control (lostmid.jobs.bias_controls), which writes the tables a fit writes.


for control in CONTROLS:

    rule:
        name:
            f"bias_control_{control.fit.rule}"
        input:
            source=control.source_tensor(),
        output:
            **{name: control.fit.path(pattern) for name, pattern in jobs.BIAS_TABLES.items()},
            tensor=control.fit.path(jobs.BIAS_TENSOR),
        log:
            f"results/logs/bias_control/{control.fit.id}.log",
        benchmark:
            f"results/benchmarks/bias_control/{control.fit.id}.tsv"
        priority: control.fit.priority
        group:
            "chain"
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=1000,
            runtime=10,
            gpu=GPU,
        params:
            variant=control.fit.variant,
            rule=control.rule,
            seed=control.seed,
            fit_model=control.fit.fit_model,
            model=control.fit.model,
            fit_model_spec=control.fit.fit_model_spec,
            settings=control.fit.settings,
            training_seeds=control.fit.training_seeds,
            device=config["device"],
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid bias-control --variant {params.variant} --rule {params.rule} --seed {params.seed}"
                " --source {input.source} --fit-model {params.fit_model}"
                " --model {params.model:q} --fit-model-spec {params.fit_model_spec:q} --settings {params.settings:q}"
                " --training-seeds {params.training_seeds} --device {params.device} --threads {threads}"
                " --out-tensor {output.tensor} --out-matrix {output.matrix} --out-iterations {output.iterations}"
                " --out-profiles {output.profiles} --out-summary {output.summary}"
            )
