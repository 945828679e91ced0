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

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace

from lostmid import config as cfg
from lostmid.algebraic.settings import AlgebraicSettings
from lostmid.analysis.metrics import check_deltas
from lostmid.analysis.settings import (
    ChannelSettings,
    FitSettings,
    FlowSettings,
    InfluenceSettings,
    InitSweepSettings,
    LengthSettings,
    StructuralSettings,
    TraceSettings,
    check_disjoint_from_training,
    fit_section,
    length_fit_section,
)
from lostmid.architectures.settings import ArchSettings, FlagSettings, RetrievalSettings, TextSettings
from lostmid.errors import ConfigError
from lostmid.evidence.settings import EvidenceSettings
from lostmid.evidence.tables import TABLES as EVIDENCE_INPUTS

# One run's id in paths, and the per-run files of every stage (a table per folder).
RUN = "{variant}/L{L}_M{depth}_seed{seed}"
CHECKPOINT = "results/checkpoints/" + RUN + "/step{step}.pt"
TRAIN_TABLE = "results/train/" + RUN + "_step{step}.parquet"


@dataclass(frozen=True)
class BlockStage:
    """An analysis stage that runs one job per block of seeds (a rule ``<stage>_<block>`` each)."""

    tables: tuple[str, ...]  # the per-run tables its job writes, in the order of the command's outputs
    has: Callable[[Block], bool]  # the blocks that get the stage


# The per-block analysis stages: the one place that says which blocks have which stage. The rule
# files loop over ``stage_blocks``, the default targets and the summaries' inputs follow ``run_tables``.
BLOCK_STAGES = {
    "evaluate": BlockStage(("failure", "influence", "metrics", "answer_influence"), lambda block: True),
    "density_flow": BlockStage(("density_flow",), lambda block: block.flow),  # influence.flow_variants
    # the channel split needs a residual path
    "channels": BlockStage(("channels", "cross_terms", "conditions"), lambda block: block.residual),
    # the loss-free profiles of influence.trace_variants (none by default)
    "observability": BlockStage(("observability",), lambda block: block.traces),
}
# The per-run file of every table the block stages write: table name -> its path pattern.
RUN_TABLES = {name: f"results/{name}/" + RUN + ".parquet" for stage in BLOCK_STAGES.values() for name in stage.tables}
# A fitted attention-logit bias, one per (bias variant, L, depth), on the model its fit_model names:
# its tensor and its tables (matrix, iterations, profiles, summary).
FIT = "{variant}_L{L}_M{depth}"
BIAS_TENSOR = "results/bias_tensors/" + FIT + ".pt"
BIAS_TABLES = {
    name: f"results/bias_fit_{name}/" + FIT + ".parquet" for name in ("matrix", "iterations", "profiles", "summary")
}


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
        """The block in log and benchmark paths: ``{variant}/L{L}_M{depth}_seeds0-23``."""
        return f"{self.variant}/L{self.L}_M{self.depth}_seeds{seed_ranges(self.seeds)}"

    @property
    def rule(self) -> str:
        """The block in rule names: ``{variant}_L{L}_M{depth}_seeds0-23``."""
        return self.id.replace("/", "_")

    @property
    def priority(self) -> int:
        """Snakemake's priority of the block's init and training jobs: its training work, run-steps in
        hundreds. Of the jobs ready to start, Snakemake starts those of higher priority first, so the
        longest chains start first instead of one of them waiting behind the short ones and ending
        the run alone on one core."""
        return len(self.seeds) * self.steps // 100

    def has(self, stage: str) -> bool:
        """Whether the block gets the per-block analysis ``stage`` (BLOCK_STAGES)."""
        return BLOCK_STAGES[stage].has(self)

    @property
    def checkpoint_steps(self) -> list[int]:
        return list(range(0, self.steps + 1, self.every))

    @property
    def seed_list(self) -> str:
        return " ".join(map(str, self.seeds))

    def paths(self, pattern: str, **fields) -> list[str]:
        """``pattern`` for every seed of the block, seed-major; ``fields`` fill the other names
        (``step="{step}"`` leaves a wildcard)."""
        return [
            pattern.format(variant=self.variant, L=self.L, depth=self.depth, seed=seed, **fields) for seed in self.seeds
        ]

    def checkpoints(self) -> list[str]:
        """Every checkpoint of every seed, seed-major, step 0 to the last."""
        return [
            path
            for seed in self.seeds
            for path in (
                CHECKPOINT.format(variant=self.variant, L=self.L, depth=self.depth, seed=seed, step=step)
                for step in self.checkpoint_steps
            )
        ]

    def previous_checkpoints(self, step) -> list[str]:
        """The checkpoints a segment ending at ``step`` continues from."""
        step = int(step)
        if step % self.every or not 0 < step <= self.steps:
            raise ValueError(
                f"no training segment of {self.id} ends at step {step} (every {self.every}, steps {self.steps})"
            )
        return self.paths(CHECKPOINT, step=step - self.every)

    def bias_tensor(self) -> str:
        return BIAS_TENSOR.format(variant=self.variant, L=self.L, depth=self.depth)


def seed_ranges(seeds) -> str:
    """Sorted seeds as runs of consecutive ones, ``-`` inside a run and ``_`` between runs:
    (0, 1, ..., 23) -> ``0-23``, (0, 99) -> ``0_99``, (0, 1, 2, 7) -> ``0-2_7``."""
    runs: list[list[int]] = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return "_".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


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
        found.append(
            Block(
                variant=variant,
                L=L,
                depth=depth,
                seeds=tuple(run.seed for run in runs),
                steps=steps,
                every=every,
                spec=cfg.canonical_json(spec),
                residual=spec["model"]["residual"],
                bias=starts_from_bias(spec),
                flow=variant in flow_variants,
                traces=variant in config["influence"]["trace_variants"],
            )
        )
    return found


def starts_from_bias(spec: dict) -> bool:
    """Whether a run starts from a fitted attention bias (a bias variant's: results/bias_tensors)."""
    return spec["remedy"]["kind"] == "bias"


def architecture_flag_runs(config: dict) -> list[tuple[dict, list[str], str | None]]:
    """The flag-recall runs the architectures stage compares with the rollout theories: every run of
    ``architectures.flag.variants``, at its untrained and its last checkpoint, with the fitted
    attention bias its checkpoints must have been made from (None for a variant without one)."""
    variants = cfg.architecture_flag_variants(config)
    found = []
    for run in cfg.runs(config):
        if run.variant in variants:
            spec = cfg.run_spec(config, run)
            steps = cfg.checkpoint_steps(config, run.variant)
            found.append(
                (
                    spec,
                    [CHECKPOINT.format(**run.keys(), step=step) for step in (steps[0], steps[-1])],
                    BIAS_TENSOR.format(**run.keys()) if starts_from_bias(spec) else None,
                )
            )
    return found


def remedy_sections(config: dict) -> str:
    """Variant name -> its remedy block, as JSON (the remedies table's parameter columns)."""
    return cfg.canonical_json(
        {name: (v or {}).get("remedy", {"kind": "none"}) for name, v in config["variants"].items()}
    )


def training_benchmark(block: Block, step="{step}") -> str:
    return f"results/benchmarks/train/{block.id}_step{step}.tsv"


def training_benchmarks(all_blocks: list[Block]) -> list[str]:
    """The benchmark record of every training job (a block's record stands for each of its seeds)."""
    return [training_benchmark(block, step) for block in all_blocks for step in block.checkpoint_steps[1:]]


def stage_blocks(all_blocks: list[Block], stage: str) -> list[Block]:
    """The blocks that get the per-block analysis ``stage`` (BLOCK_STAGES)."""
    return [block for block in all_blocks if block.has(stage)]


def run_tables(all_blocks: list[Block], name: str) -> list[str]:
    """Every per-run file of one table over the blocks that have it."""
    if name == "train":
        return [
            path
            for block in all_blocks
            for step in block.checkpoint_steps[1:]
            for path in block.paths(TRAIN_TABLE, step=step)
        ]
    stage = next(stage for stage, declared in BLOCK_STAGES.items() if name in declared.tables)
    return [path for block in stage_blocks(all_blocks, stage) for path in block.paths(RUN_TABLES[name])]


@dataclass(frozen=True)
class Fit:
    """The job of one fitted bias: a bias variant at one L and depth (module ``lostmid.analysis.bias_fit``)."""

    variant: str
    L: int
    depth: int
    fit_model: str  # the variant whose model the fit runs on
    model: str  # canonical JSON of the model B is inserted into (the variant's own)
    fit_model_spec: str  # ... of the model the fit runs on
    settings: str  # canonical JSON of the fit block (bias_fit under the variant's remedy.fit)
    training_seeds: str  # every training seed of the grid, space-separated (the fit must avoid them)
    priority: int  # that of the longest chain it starts (Block.priority)

    @property
    def id(self) -> str:
        return FIT.format(variant=self.variant, L=self.L, depth=self.depth)

    @property
    def rule(self) -> str:
        return re.sub(r"\W", "_", self.id)

    def path(self, pattern: str) -> str:
        return pattern.format(variant=self.variant, L=self.L, depth=self.depth)


def fit_keys(all_blocks: list[Block]) -> list[tuple[str, int, int]]:
    """(variant, L, depth) of every fitted bias the grid trains with."""
    return sorted({(b.variant, b.L, b.depth) for b in all_blocks if b.bias})


def bias_fits(config: dict, all_blocks: list[Block]) -> list[Fit]:
    """The fit jobs: one per bias variant, L and depth of the grid, each with its own fit block."""
    seeds = " ".join(map(str, sorted({run.seed for run in cfg.runs(config)})))
    found = []
    for variant, L, depth in fit_keys(all_blocks):
        remedy = config["variants"][variant]["remedy"]
        if "control" in remedy:  # built from another variant's fit: bias_controls
            continue
        fit_model = (remedy.get("fit") or {}).get("fit_model", variant)
        if fit_model not in config["variants"]:
            raise ConfigError(
                f"config key variants.{variant}.remedy.fit.fit_model: {fit_model!r} is not a variant of the config"
            )
        found.append(
            Fit(
                variant=variant,
                L=L,
                depth=depth,
                fit_model=fit_model,
                model=cfg.canonical_json(cfg.model_spec(config, variant, L, depth)),
                fit_model_spec=cfg.canonical_json(cfg.model_spec(config, fit_model, L, depth)),
                settings=cfg.canonical_json(fit_section(config.get("bias_fit"), remedy)),
                training_seeds=seeds,
                priority=max(b.priority for b in all_blocks if (b.variant, b.L, b.depth) == (variant, L, depth)),
            )
        )
    return found


@dataclass(frozen=True)
class Control:
    """The job of one control bias (lostmid.analysis.bias_controls): built by ``rule`` from the fitted B of
    the variant ``source`` at the same L and depth, measured on that fit's held-out initializations."""

    fit: Fit  # the source's fit job with the control's own variant and model (its tables' paths and keys)
    source: str  # the fitted variant the control is built from
    rule: str
    seed: int

    def source_tensor(self) -> str:
        return BIAS_TENSOR.format(variant=self.source, L=self.fit.L, depth=self.fit.depth)


def bias_controls(config: dict, all_blocks: list[Block]) -> list[Control]:
    """The control jobs: one per control variant (``remedy.control``), L and depth of the grid; its source
    must be a fitted bias variant (no control itself) trained at the same L and depth."""
    fits = {(fit.variant, fit.L, fit.depth): fit for fit in bias_fits(config, all_blocks)}
    found = []
    for variant, L, depth in fit_keys(all_blocks):
        remedy = config["variants"][variant]["remedy"]
        control = remedy.get("control")
        if control is None:
            continue
        key = f"config key variants.{variant}.remedy.control.of"
        source = fits.get((control["of"], L, depth))
        if source is None:
            raise ConfigError(
                f"{key}: {control['of']!r} is not a fitted bias variant trained at L {L}, depth {depth} in the grid"
            )
        own = cfg.canonical_json(cfg.model_spec(config, variant, L, depth))
        priority = max(b.priority for b in all_blocks if (b.variant, b.L, b.depth) == (variant, L, depth))
        fit = replace(source, variant=variant, model=own, priority=priority)
        found.append(Control(fit, control["of"], control["rule"], int(control.get("seed", 0))))
    return found


def bias_tables(all_blocks: list[Block], name: str) -> list[str]:
    return [BIAS_TABLES[name].format(variant=v, L=L, depth=d) for v, L, d in fit_keys(all_blocks)]


# The tables the evidence stage reads (lostmid.evidence.tables.TABLES, the one declaration), in the
# order of its options (`lostmid evidence --failure ... --algebraic-probes ...`).
EVIDENCE_TABLES = tuple(EVIDENCE_INPUTS)


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


# The settings classes of the analysis sections and the config section each is read from (the influence
# section has two readers: the evaluation and the density flow). They are built when the workflow starts,
# so that a section's own rules (the check of its class) fail before any job; the classes are free of
# torch. The evaluation, remedies and remedy sections have no rules beyond the schema's, which validation checks.
SETTINGS = {
    InfluenceSettings: "influence",
    FlowSettings: "influence",
    TraceSettings: "influence",
    InitSweepSettings: "influence.init_sweep",
    StructuralSettings: "influence.structural",
    ChannelSettings: "channels",
    FitSettings: "bias_fit",
    AlgebraicSettings: "algebraic",
    EvidenceSettings: "evidence",
    ArchSettings: "architectures",
    FlagSettings: "architectures.flag",
    TextSettings: "architectures.text",
    RetrievalSettings: "retrieval",
    LengthSettings: "length",
}


def _section(config: dict, key: str):
    """The config's section ``key`` (dotted for a subsection: ``influence.init_sweep``); None if absent."""
    section = config
    for part in key.split("."):
        section = (section or {}).get(part)
    return section


def settings(config: dict) -> dict:
    """Settings class -> its settings (lostmid.config.settings_from_section), for every class of ``SETTINGS``
    whose section a validated config has: all but ``architectures``, whose absence turns the stage off."""
    return {
        cls: cfg.settings_from_section(cls, _section(config, key), key)
        for cls, key in SETTINGS.items()
        if key.partition(".")[0] in config
    }


def settings_json(config: dict, cls) -> str:
    """Exactly the keys of its section that the settings class ``cls`` holds, as canonical JSON: what a
    rule passes to the command that builds ``cls`` from it. A key the class holds is always passed
    (validation filled in the defaults), so no command reads a default in place of a configured
    value; a key it does not hold is never passed, so changing it reruns no job of that rule."""
    section = _section(config, SETTINGS[cls])
    return cfg.canonical_json({field.name: section[field.name] for field in fields(cls)})


def check(config: dict) -> None:
    """The rules of a validated config that need the analysis modules: every section's own cross-key
    rules (its settings are built), the bias fit's seeds disjoint from the training seeds (checked
    here, at parse time, before any job; each fit job gets the training seeds too and checks again,
    so a new training seed reruns the fit jobs, which give the same B),
    and region scales that leave no region empty at any L of the grid; a packaged pretrained model
    installed, before any job (its job comes after the whole random-init sweep)."""
    for i, entry in enumerate(config.get("architectures", {}).get("pretrained", [])):
        if entry.get("model"):
            from lostmid.architectures.models import packaged_file  # imports torch: only for such an entry

            packaged_file(entry["model"], f"architectures.pretrained[{i}]")
    parsed = settings(config)
    grid = cfg.runs(config)
    check_disjoint_from_training(parsed[FitSettings], {run.seed for run in grid})
    for fit in bias_fits(config, blocks(config)):
        key = f"variants.{fit.variant}.remedy.fit"
        fit_settings = cfg.settings_from_section(FitSettings, json.loads(fit.settings), key)
        check_disjoint_from_training(fit_settings, {run.seed for run in grid}, key)
    for cls, key in ((InfluenceSettings, "influence"), (ChannelSettings, "channels")):
        for L in sorted({run.L for run in grid}):
            check_deltas(L, parsed[cls].deltas, f"{key}.deltas")
    if LengthSettings in parsed:
        from lostmid.analysis.length import check_lengths  # imports torch: only for a config with the study

        check_disjoint_from_training(length_fit_settings(config), {run.seed for run in grid}, "length.fit")
        check_lengths(config["model"], parsed[LengthSettings], length_fit_settings(config))


def length_fit_settings(config: dict) -> FitSettings:
    """The length study's fit settings (lostmid.analysis.settings.length_fit_section)."""
    return cfg.settings_from_section(FitSettings, length_fit_section(config), "bias_fit")  # its keys


def length_fit_json(config: dict) -> str:
    """The length study's fit settings as canonical JSON (what ``lostmid length-fit --fit`` takes)."""
    return cfg.canonical_json(asdict(length_fit_settings(config)))
