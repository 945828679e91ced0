"""What the Snakemake rule files need from a validated config, without torch: the jobs, their
paths and parameters, and the default target.

A *block* is the set of runs one job processes: the seeds of one (variant, L, depth), all of them
by default or aligned groups of ``seeds_per_job`` (seeds 0..S-1, S..2S-1, ...). Training, the
evaluation, the density-flow check and the channel analysis run one job per block and write the
same per-run files as one job per run would; inside a job the seeds run one after another (or,
with ``train.seed_batch`` > 1, as vmapped batches), so the numbers are those of per-run jobs.
A job costs seconds of interpreter and ``import torch`` start-up; blocks make that cost grow
with the grid's (variant, L, depth) points, not with its seeds.

The rule files call these functions and declare rules; this module never imports Snakemake.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lostmid import config as cfg
from lostmid.algebraic.settings import AlgebraicSettings
from lostmid.analysis.metrics import check_deltas
from lostmid.analysis.settings import (ChannelSettings, FitSettings, InfluenceSettings, InitSweepSettings, StructuralSettings,
                                       check_disjoint_from_training)
from lostmid.architectures.settings import ArchSettings, FlagSettings
from lostmid.evidence.settings import EvidenceSettings

# One run's id in paths, and the per-run files of every stage (a table per folder).
RUN = "{variant}/L{L}_M{depth}_seed{seed}"
CHECKPOINT = "results/checkpoints/" + RUN + "/step{step}.pt"
TRAIN_TABLE = "results/train/" + RUN + "_step{step}.parquet"
RUN_TABLES = {name: f"results/{name}/" + RUN + ".parquet"
              for name in ("failure", "influence", "metrics", "density_flow", "channels", "cross_terms", "conditions",
                           "observability")}
# A fitted attention-logit bias, one per (bias variant, L, depth): the fit uses the variant's own model.
FIT = "{variant}_L{L}_M{depth}"
BIAS_TENSOR = "results/bias_tensors/" + FIT + ".pt"
BIAS_TABLES = {name: f"results/bias_fit_{name}/" + FIT + ".parquet" for name in ("matrix", "iterations", "profiles")}


@dataclass(frozen=True)
class Block:
    """The runs of one job: seeds of one variant, L and depth, with the variant's schedule."""

    variant: str
    L: int
    depth: int
    seeds: tuple[int, ...]
    steps: int  # train.steps of the variant
    every: int  # its checkpoint interval
    spec: str  # canonical JSON spec of the first run (the others differ only in the seed)
    residual: bool
    bias: bool  # trains from a fitted attention-logit bias
    flow: bool  # gets the density-flow check
    traces: bool = False  # gets the loss-free profiles (influence.trace_variants)

    @property
    def id(self) -> str:
        """The block in log and benchmark paths: ``{variant}/L{L}_M{depth}_seeds0-1-2``."""
        return f"{self.variant}/L{self.L}_M{self.depth}_seeds" + "-".join(map(str, self.seeds))

    @property
    def rule(self) -> str:
        """The block in rule names (word characters only)."""
        return re.sub(r"\W", "_", f"{self.variant}_L{self.L}_M{self.depth}_seeds_" + "_".join(map(str, self.seeds)))

    @property
    def checkpoint_steps(self) -> list[int]:
        return list(range(0, self.steps + 1, self.every))

    @property
    def seed_list(self) -> str:
        return " ".join(map(str, self.seeds))

    def paths(self, pattern: str, **fields) -> list[str]:
        """``pattern`` for every seed of the block, seed-major; ``fields`` fill the other names
        (``step="{step}"`` leaves a wildcard)."""
        return [pattern.format(variant=self.variant, L=self.L, depth=self.depth, seed=seed, **fields) for seed in self.seeds]

    def checkpoints(self) -> list[str]:
        """Every checkpoint of every seed, seed-major, step 0 to the last."""
        return [path for seed in self.seeds for path in
                (CHECKPOINT.format(variant=self.variant, L=self.L, depth=self.depth, seed=seed, step=step)
                 for step in self.checkpoint_steps)]

    def previous_checkpoints(self, step) -> list[str]:
        """The checkpoints a segment ending at ``step`` continues from."""
        step = int(step)
        if step % self.every or not 0 < step <= self.steps:
            raise ValueError(f"no training segment of {self.id} ends at step {step} (every {self.every}, steps {self.steps})")
        return self.paths(CHECKPOINT, step=step - self.every)

    def bias_tensor(self) -> str:
        return BIAS_TENSOR.format(variant=self.variant, L=self.L, depth=self.depth)


def blocks(config: dict) -> list[Block]:
    """The jobs of the grid, one per block of seeds (see the module doc)."""
    per_job = config["seeds_per_job"]
    flow_variants = set(config["influence"]["flow_variants"] or config["variants"])
    grouped: dict[tuple, list[cfg.Run]] = {}
    for run in cfg.runs(config):
        group = run.seed // per_job if per_job else 0
        grouped.setdefault((run.variant, run.L, run.depth, group), []).append(run)
    found = []
    for (variant, L, depth, _), runs in sorted(grouped.items()):
        spec = cfg.run_spec(config, runs[0])
        steps, every = cfg.schedule(config, variant)
        found.append(Block(
            variant=variant, L=L, depth=depth, seeds=tuple(run.seed for run in runs), steps=steps, every=every,
            spec=cfg.canonical_json(spec), residual=spec["model"]["residual"], bias=spec["remedy"]["kind"] == "bias",
            flow=variant in flow_variants, traces=variant in config["influence"]["trace_variants"],
        ))
    return found


def architecture_flag_runs(config: dict) -> list[tuple[dict, list[str]]]:
    """The flag-recall runs the architectures stage compares with the rollout theories: every run of
    ``architectures.flag.variants``, at its untrained and its last checkpoint."""
    variants = cfg.architecture_flag_variants(config)
    found = []
    for run in cfg.runs(config):
        if run.variant in variants:
            steps = cfg.checkpoint_steps(config, run.variant)
            found.append((cfg.run_spec(config, run), [CHECKPOINT.format(**run.keys(), step=step) for step in (steps[0], steps[-1])]))
    return found


def bias_fit_model(config: dict, variant: str, L: int, depth: int) -> str:
    """The model a bias variant trains with (its own overrides applied), as the fit's JSON."""
    spec = cfg.run_spec(config, cfg.Run(variant, int(L), int(depth), 0))
    return cfg.canonical_json(spec["model"])


def remedy_blocks(config: dict) -> str:
    """Variant name -> its remedy block, as JSON (the remedies table's parameter columns)."""
    return cfg.canonical_json({name: (v or {}).get("remedy", {"kind": "none"}) for name, v in config["variants"].items()})


def training_benchmark(block: Block, step="{step}") -> str:
    return f"results/benchmarks/train/{block.id}_step{step}.tsv"


def training_benchmarks(all_blocks: list[Block]) -> list[str]:
    """The benchmark record of every training job (a block's record stands for each of its seeds)."""
    return [training_benchmark(block, step) for block in all_blocks for step in block.checkpoint_steps[1:]]


def run_tables(all_blocks: list[Block], name: str) -> list[str]:
    """Every per-run file of one table over the blocks that have it."""
    if name == "train":
        return [path for block in all_blocks for step in block.checkpoint_steps[1:] for path in block.paths(TRAIN_TABLE, step=step)]
    has = {"density_flow": lambda b: b.flow, "observability": lambda b: b.traces, "channels": lambda b: b.residual, "cross_terms": lambda b: b.residual,
           "conditions": lambda b: b.residual}.get(name, lambda b: True)
    return [path for block in all_blocks if has(block) for path in block.paths(RUN_TABLES[name])]


def bias_fits(all_blocks: list[Block]) -> list[dict]:
    """(variant, L, depth) of every fitted bias the grid trains with."""
    return [dict(variant=v, L=L, depth=d) for v, L, d in sorted({(b.variant, b.L, b.depth) for b in all_blocks if b.bias})]


def bias_tables(all_blocks: list[Block], name: str) -> list[str]:
    return [BIAS_TABLES[name].format(**fit) for fit in bias_fits(all_blocks)]


# The figures of the report: name -> (report category, the tables it is drawn from); lostmid.cli.figures
# draws them, workflow/report/<name>.rst is the caption.
FIGURES = {
    "failure_by_position": ("Training", ("failure",)),
    "training_curves": ("Training", ("train",)),
    "influence_profiles": ("Influence", ("influence",)),
    "influence_depth": ("Influence", ("influence",)),
    "influence_metrics": ("Influence", ("metrics",)),
    "density_flow": ("Influence", ("density_flow",)),
    "influence_init_sweep": ("Influence", ("init_sweep",)),
    "structural_baseline": ("Influence", ("structural",)),
    "channel_energies": ("Channels", ("channels", "cross_terms")),
    "conditions": ("Channels", ("conditions",)),
    "remedy_failure": ("Remedies", ("remedies", "failure")),
    "remedy_influence": ("Remedies", ("remedies", "influence")),
    "remedy_ablation": ("Remedies", ("remedies",)),
    "remedy_overhead": ("Remedies", ("remedies",)),
    "bias_heatmap": ("Remedies", ("bias_matrix",)),
    "bias_profile": ("Remedies", ("bias_profiles", "bias_iterations")),
    "algebraic_table": ("Algebraic simulations", ("algebraic_table", "algebraic_profiles")),
    "algebraic_probes": ("Algebraic simulations", ("algebraic_probes",)),
}
# The HTML summary pages of the report: name -> (the tables it is drawn from, title, note);
# lostmid.cli.figures writes them (lostmid.tables.summaries), workflow/report/table_<name>.rst is the caption.
PAGES = {
    "failure": (("failure",), "Failure by flag-position third", "Mean failure rate over seeds (± 95% t-interval) in the early, middle and late third of flag positions, at every checkpoint. Source: results/failure."),
    "metrics": (("metrics",), "Influence metrics (δ = 0.2)", "Regional metrics of the adjoint influence density at every checkpoint, mean over seeds (± 95% t-interval). Source: results/metrics."),
    "conditions": (("conditions",), "Sufficient-condition tests", "Share of rows (runs × checkpoints × δ) where each test holds, where its conclusion holds, where it is conservative; violations must be 0. Source: results/conditions."),
    "algebraic": (("algebraic_table",), "Algebraic simulations (paper §4, Table 1)", "Regional densities and metrics of each method on the linear causal model. Source: results/algebraic_table."),
}
# Every table `lostmid figures` takes (an option each): those of the figures and the pages, in order of first use.
FIGURE_TABLES = tuple(dict.fromkeys([table for _, needs in FIGURES.values() for table in needs]
                                    + [table for needs, _, _ in PAGES.values() for table in needs]))
# The tables the evidence stage reads (lostmid.evidence.inputs.TABLES), in the order of its options
# (`lostmid evidence --failure ... --algebraic-probes ...`).
EVIDENCE_TABLES = ("failure", "metrics", "density_flow", "conditions", "structural", "init_sweep", "bias_matrix",
                   "algebraic_table", "algebraic_probes", "observability", "train")


def _drawable(needs, tables: dict[str, list[str]]) -> bool:
    return all(tables.get(table) for table in needs)


def figures(tables: dict[str, list[str]]) -> list[str]:
    """The figures whose tables the run has (``tables``: table name -> its files)."""
    return [name for name, (_, needs) in FIGURES.items() if _drawable(needs, tables)]


def pages(tables: dict[str, list[str]]) -> list[str]:
    """The HTML summary pages whose tables the run has (the conditions page needs a residual run)."""
    return [name for name, (needs, _, _) in PAGES.items() if _drawable(needs, tables)]


def input_options(tables: dict[str, list[str]]) -> str:
    """The shell options ``--<table-name> {input.<table_name>}`` of a rule whose named inputs are
    ``tables`` (table name -> its files); a table the run does not have (no bias variant, no
    residual run, ...) is left out rather than passed as a bare option."""
    return " ".join(f"--{name.replace('_', '-')} {{input.{name}}}" for name, files in tables.items() if files)


def default_targets(all_blocks: list[Block]) -> list[str]:
    """Every checkpoint, every per-run table of every stage and every fitted bias.

    Per-run tables are targets themselves, not only inputs of the summaries: a table deleted by
    hand or by a failed job is rebuilt by the next plain run.
    """
    found = [path for block in all_blocks for path in block.checkpoints()]
    for name in ("train", *RUN_TABLES):
        found += run_tables(all_blocks, name)
    for name in BIAS_TABLES:
        found += bias_tables(all_blocks, name)
    return found


# The settings of the analysis blocks, built when the workflow starts so that a block's own rules (the
# check of its class) fail before any job; the classes are free of torch. The evaluation, remedies and
# remedy blocks have no rules beyond the schema's, which validation checks.
SETTINGS = {
    "influence": InfluenceSettings,
    "influence.init_sweep": InitSweepSettings,
    "influence.structural": StructuralSettings,
    "channels": ChannelSettings,
    "bias_fit": FitSettings,
    "algebraic": AlgebraicSettings,
    "evidence": EvidenceSettings,
    "architectures": ArchSettings,
    "architectures.flag": FlagSettings,
}


def settings(config: dict) -> dict:
    """Block key -> its settings (lostmid.config.settings_from_block), for every block of ``SETTINGS``
    that a validated config has: all but ``architectures``, whose absence turns the stage off."""
    found = {}
    for key, cls in SETTINGS.items():
        outer, _, inner = key.partition(".")
        if outer in config:
            found[key] = cfg.settings_from_block(cls, config[outer][inner] if inner else config[outer], key)
    return found


def check(config: dict) -> None:
    """The rules of a validated config that need the analysis modules: every block's own cross-key
    rules (its settings are built), the bias fit's seeds disjoint from the training seeds (checked
    here, at parse time, rather than passed to the fit, so that a new training seed never refits B),
    and region scales that leave no region empty at any L of the grid."""
    parsed = settings(config)
    grid = cfg.runs(config)
    check_disjoint_from_training(parsed["bias_fit"], {run.seed for run in grid})
    for block in ("influence", "channels"):
        for L in sorted({run.L for run in grid}):
            check_deltas(L, parsed[block].deltas, f"{block}.deltas")
