# Issue 55's fix run (docs/positional_bias.md, "The fix run"): with a `fix` block and the plan it answers
# (`plan: study/fix_plan.yaml`, which holds the recipe, the fits, the windows and the record folder), F fits of the
# blog's bias and F calibrations (each with its strength), fit i on reserved window i, a zero-bias check against
# the none record and the gates first, then each fix arm's held-out windows in blocks (window k under fit k mod F):
# at the plan's gate-first n (run.gate_first) those beyond its floor only where its gate there passed.
# Every job writes into the plan's record (a fit or a window already there is kept, so a stopped run resumes);
# its own output is the list of what it wrote, under results/fix/. Its own target: `snakemake fix`.

if FIX_PLAN is not None:
    FIX_FITS = range(fix_plan.fit_count(FIX_PLAN))

    # Fit i of the blog's bias on its one reserved window: the run's longest single jobs (runs/fix_plan/power.md).
    rule fix_fit:
        output:
            "results/fix/fit_{fit}.json",
        log:
            "results/logs/fix/fit_{fit}.log",
        benchmark:
            "results/benchmarks/fix/fit_{fit}.tsv"
        wildcard_constraints:
            fit=r"\d+",
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=12000,
            runtime=720,
            gpu=GPU,
        params:
            device=config["device"],
            plan=config["plan"],
            arguments=ARGUMENTS_FILE,
        shell:
            fix_rule("fit", "fit")

    # Calibration i on its reserved window shuffled, and its strength chosen on that window (the grid's retrieval).
    rule fix_calibrate:
        output:
            "results/fix/calibrate_{fit}.json",
        log:
            "results/logs/fix/calibrate_{fit}.log",
        benchmark:
            "results/benchmarks/fix/calibrate_{fit}.tsv"
        wildcard_constraints:
            fit=r"\d+",
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
            plan=config["plan"],
            arguments=ARGUMENTS_FILE,
        shell:
            fix_rule("calibrate", "fit")

    # Before any fix window counts: a zero bias gives the none record's answers (the arms pair with it).
    rule fix_none_check:
        input:
            str(fix_plan.none_path(FIX_PLAN, min(FIX_PLAN["run"]["windows_by_n"]), 0)),
        output:
            "results/fix/none_check.json",
        log:
            "results/logs/fix/none_check.log",
        benchmark:
            "results/benchmarks/fix/none_check.tsv"
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=8000,
            runtime=30,
            gpu=GPU,
        params:
            device=config["device"],
            plan=config["plan"],
            arguments=ARGUMENTS_FILE,
        shell:
            fix_rule("none-check")

    # One job per (fix arm, n, block of fix.block held-out windows), after the arm's fits (a block spans several:
    # window k under fit k mod F) and the none arm's windows.
    rule fix_block:
        input:
            check=rules.fix_none_check.output,
            bias=lambda wildcards: expand(
                "results/fix/{job}_{fit}.json",
                job="fit" if wildcards.arm == "blog" else "calibrate",
                fit=FIX_FITS,
            ),
            none=fix_none_windows,
        output:
            "results/fix/blocks/{arm}_n{n}_b{block}.json",
        log:
            "results/logs/fix/{arm}_n{n}_b{block}.log",
        benchmark:
            "results/benchmarks/fix/{arm}_n{n}_b{block}.tsv"
        wildcard_constraints:
            arm="blog|fitm",
            n=r"\d+",
            block=r"\d+",
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
            plan=config["plan"],
            size=config["fix"]["block"],
            arguments=ARGUMENTS_FILE,
        shell:
            logged(
                "lostmid fix --job block --device {params.device} --threads {threads} --plan {params.plan:q}"
                " --arm {wildcards.arm} --n {wildcards.n} --block {wildcards.block} --size {params.size}"
                " --done {output}"
            )

    # The gates: each arm's task-free profile on one gate window at n, under its fit; one job a window, so that
    # they run side by side (mem_mb: one window at 4096, runs/notebook.md "The gate at 4096 in window jobs").
    rule fix_gate_window:
        input:
            expand("results/fix/{job}_{fit}.json", job=["fit", "calibrate"], fit=FIX_FITS),
        output:
            "results/fix/gate/n{n}_w{window}.json",
        log:
            "results/logs/fix/gate_n{n}_w{window}.log",
        benchmark:
            "results/benchmarks/fix/gate_n{n}_w{window}.tsv"
        wildcard_constraints:
            n=r"\d+",
            window=r"\d+",
        conda:
            LOSTMID_ENV
        threads: 1
        resources:
            attempt=attempt_number,
            mem_mb=10000,
            runtime=60,
            gpu=GPU,
        params:
            device=config["device"],
            plan=config["plan"],
            arguments=ARGUMENTS_FILE,
        shell:
            fix_rule("gate-window", "n", "window")

    # The gate at n once its windows are recorded (it computes none of them again). A checkpoint: the run's target
    # asks its reading at the gate-first n before it lists the held-out windows (common.smk, fix_blocks).
    checkpoint fix_gate:
        input:
            lambda wildcards: expand(
                "results/fix/gate/n{n}_w{window}.json",
                n=wildcards.n,
                window=fix_plan.gate_windows(FIX_PLAN, int(wildcards.n)),
            ),
        output:
            "results/fix/gate_n{n}.json",
        log:
            "results/logs/fix/gate_n{n}.log",
        benchmark:
            "results/benchmarks/fix/gate_n{n}.tsv"
        wildcard_constraints:
            n=r"\d+",
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
            plan=config["plan"],
            arguments=ARGUMENTS_FILE,
        shell:
            fix_rule("gate", "n")

    # The run's target: the gates, then the blocks of both fix arms that the gate-first order runs.
    rule fix:
        input:
            expand("results/fix/gate_n{n}.json", n=fix_plan.gate_jobs(FIX_PLAN)),
            fix_blocks,
        localrule: True
        threads: 1
        resources:
            gpu=0,
