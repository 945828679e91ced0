# The pre-registered study's run (docs/study.md), when the config names its plan (`plan:`; config/study.yaml, its
# plan study/plan.yaml, which the run's manifest records): every table the study's estimators read, for every
# block of the grid.

if config.get("plan"):

    # The study's target: it runs nothing itself.
    rule study_run:
        input:
            *(run_tables(name) for name in ("train", "failure", "influence", "metrics", "answer_influence")),
            jobs.bias_tables(BLOCKS, "summary"),
            jobs.bias_tables(BLOCKS, "matrix"),
            jobs.bias_tables(BLOCKS, "iterations"),  # every start's convergence trace
            rules.length_init.output if LENGTH else [],
            rules.length_fit.output if LENGTH else [],
        localrule: True
        threads: 1
