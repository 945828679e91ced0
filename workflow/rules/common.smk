# Shared helpers of the stage files: the run grid, wildcard patterns and run specs.
import lostmid.config as lostmid_config

RUNS = lostmid_config.runs(config)
STEPS = lostmid_config.checkpoint_steps(config)
EVERY = config["train"]["every"]

# GPUs a rule that runs models asks for (`sbatch --gpus`; locally, with `--resources gpu=N`):
# one, unless the config runs on the CPU (`device: cpu`), where a GPU would sit idle. Rules that
# only read tables declare gpu=0. Declared in the rules, not in the profiles' set-resources,
# which would override them whatever the device.
GPU = 0 if config.get("device", "auto") == "cpu" else 1

# Rule logs with retries (--retries; the Slurm profile sets 2): Snakemake deletes a job's log
# before each attempt, so every attempt writes {log}.attempt<N> (under a header line) and the
# log proper receives the copy of the attempt that ended the job; a failed or killed attempt's
# file stays beside it, so a retry never loses the first attempt's output. A new run of the job
# (attempt 1) removes the attempt files of the run before. `attempt` is a resource only to hand
# Snakemake's attempt number to the shell ({resources.attempt}); nothing schedules on it.
def attempt_number(wildcards, attempt):
    return attempt


LOG_ATTEMPT = (
    "if [ {resources.attempt} -le 1 ]; then rm -f {log}.attempt*; fi; "
    'echo "== rule {rule}, attempt {resources.attempt}, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(uname -n) ==" > {log}.attempt{resources.attempt}; '
)
LOG_KEEP = (
    " || {{ status=$?; cp {log}.attempt{resources.attempt} {log}; exit $status; }};"
    " mv {log}.attempt{resources.attempt} {log}"
)


# The conda environment of every job (used with --software-deployment-method conda).
LOSTMID_ENV = "../../envs/lostmid.yaml"

# One run's id in paths; wildcards are constrained to characters safe in file names.
RUN = "{variant}/L{L}_M{depth}_seed{seed}"
CHECKPOINT = "results/checkpoints/" + RUN + "/step{step}.pt"


wildcard_constraints:
    variant=r"[A-Za-z][A-Za-z0-9_-]*",
    L=r"\d+",
    depth=r"\d+",
    seed=r"\d+",
    step=r"\d+",


def run_of(wildcards):
    return lostmid_config.Run(wildcards.variant, int(wildcards.L), int(wildcards.depth), int(wildcards.seed))


def spec_json(wildcards):
    """The run spec passed to the library; a change of it reruns the rule and what reads it."""
    return lostmid_config.canonical_json(lostmid_config.run_spec(config, run_of(wildcards)))


def every_checkpoint(pattern, steps=None):
    """``pattern`` expanded over every run of the grid and every checkpoint step."""
    steps = STEPS if steps is None else steps
    return [pattern.format(**run.keys(), step=step) for run in RUNS for step in steps]


def run_checkpoints(wildcards):
    """Every checkpoint of one run, step 0 to train.steps."""
    return [CHECKPOINT.format(**run_of(wildcards).keys(), step=step) for step in STEPS]


def every_run(pattern):
    return [pattern.format(**run.keys()) for run in RUNS]
