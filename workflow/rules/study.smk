# The pre-registered study's run (docs/study.md; config/study.yaml, its plan study/plan.yaml): the record of the
# plan the run begins under (its first job), and every table the study's estimators read, for every block of
# the grid.

STUDY_PLAN = Path(workflow.basedir) / "study" / "plan.yaml"


# The plan's sha256 and commit and the run's commit, written once, as the run begins (the highest priority: of
# the jobs ready at the start Snakemake starts it first); the findings compare the plan with it.
rule study_plan_stamp:
    output:
        "results/study/plan_stamp.json",
    log:
        "results/logs/study/plan_stamp.log",
    priority: 100000
    localrule: True
    threads: 1
    resources:
        attempt=attempt_number,
    params:
        repo=workflow.basedir,
        plan=STUDY_PLAN,
        arguments=ARGUMENTS_FILE,
    shell:
        logged("lostmid study-stamp --repo {params.repo:q} --plan {params.plan:q} --out {output}")


# The study's target: the stamp and its tables; it runs nothing itself.
rule study_run:
    input:
        rules.study_plan_stamp.output,
        *(run_tables(name) for name in ("train", "failure", "influence", "metrics", "answer_influence")),
        jobs.bias_tables(BLOCKS, "summary"),
        jobs.bias_tables(BLOCKS, "matrix"),
        rules.length_init.output if LENGTH else [],
        rules.length_fit.output if LENGTH else [],
    localrule: True
