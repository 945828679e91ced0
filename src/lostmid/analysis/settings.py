"""Settings of the analysis blocks: ``influence`` (its evaluation and density-flow keys, its
``init_sweep`` and ``structural`` subsections), ``channels`` and ``bias_fit``. Each is built by
``lostmid.config.settings_from_section``
(defaults and value checks: the config schema; cross-key rules: the class's ``check``), and the
module is free of torch, so that the workflow builds them all when it parses the config."""

from __future__ import annotations

from dataclasses import dataclass

from lostmid.errors import ConfigError


@dataclass(frozen=True)
class InfluenceSettings:
    """The keys of the config's ``influence`` section that the evaluation reads (``lostmid evaluate``)."""

    batch_per_position: int  # evaluation sequences at every flag position 2..L
    seed: int  # seed of the evaluation batch; distinct from evaluation.seed
    deltas: tuple[float, ...]  # region scales of the metrics table
    chunk: int  # sequences per forward/backward pass (memory bound only; results do not depend on it)


@dataclass(frozen=True)
class FlowSettings:
    """The keys of the config's ``influence`` section that the density-flow check reads (``lostmid density-flow``)."""

    seed: int  # seed of its batch: the evaluation batch's seed, so that both draw the same sequences
    flow_step: float | tuple[float, ...]  # eta(s) of the density-flow finite difference
    flow_batch_per_position: int  # the density-flow batch (forward-over-reverse in float64 costs ~10 backward passes)


@dataclass(frozen=True)
class TraceSettings:
    """The keys of the config's ``influence`` section that the loss-free profiles read (``lostmid observability``)."""

    seed: int  # seed of its batch: the evaluation batch's seed, so that both draw the same sequences
    trace_batch_per_position: int  # the batch of the loss-free profiles (exact traces: L d tangents per sequence)


@dataclass(frozen=True)
class InitSweepSettings:
    """Influence at step 0 versus depth, with and without the residual path (``influence.init_sweep``)."""

    L: int
    depths: tuple[int, ...]
    seeds: tuple[int, ...]
    batch_per_position: int
    seed: int  # evaluation batch seed


@dataclass(frozen=True)
class StructuralSettings:
    """The structural baseline, closed form against measurement (``influence.structural``)."""

    L: tuple[int, ...]
    depths: tuple[int, ...]
    epsilon: float  # h in N = I + h C
    d_model: int
    heads: int
    batch_per_position: int
    seed: int

    def check(self) -> None:
        if self.d_model % self.heads:
            raise ConfigError(
                f"config key influence.structural.d_model={self.d_model} is not divisible by "
                f"influence.structural.heads={self.heads}"
            )


@dataclass(frozen=True)
class ChannelSettings:
    """The channel decomposition and condition tests (``channels``)."""

    batch_per_position: int  # sequences per flag position of the stratified analysis set
    seed: int  # seed of that set and of the power-iteration start vectors
    deltas: tuple[float, ...]  # region scales
    power_iterations: int  # JVP/VJP pairs per operator norm (0: skip residual persistence)
    batch_size: int  # sequences per forward/backward pass
    float64: bool  # analyse in double precision (tolerance 1e-9 instead of 1e-4)


# The bias fit's seeds, relative to bias_fit.seed (the one home of these offsets): initialization j
# of the fit draws its weights from seed + FIT_INITS + j and its batch from seed + BATCHES + FIT_INITS
# + j; held-out initialization j the same with HELD_OUT in place of FIT_INITS; the start of restart r
# of lostmid.analysis.bias_fit.fit_restarts (not a model: no weights) seed + RESTARTS + r. The schema
# bounds inits and heldout by 500, so that no two of these ranges overlap.
FIT_INITS, HELD_OUT, BATCHES, RESTARTS = 0, 500, 1000, 2000


@dataclass(frozen=True)
class FitSettings:
    """The attention-bias fit of one bias variant: the config's ``bias_fit`` section under the variant's
    ``remedy.fit`` (docs/theory.md §6, docs/remedies.md; the fit itself is lostmid.analysis.bias_fit)."""

    target: str  # loss: the squared loss-gradient energy; output_jacobian: E ||d output_L / d x_j||
    positions: str  # context: positions 1..L-1 (context share held >= its B = 0 value); all: the whole profile
    param: str  # distance: B_ij = c(i - j) (L numbers); full: every entry free; layer_head: full, per step and head
    inits: int  # random initializations averaged in the objective
    heldout: int  # held-out initializations that judge the fit (the unit of its interval)
    batch: int  # sequences per initialization (one fixed batch each)
    max_iter: int  # Adam iterations at most
    lr: float  # Adam step on the logit bias
    tol: float  # stop when the best objective improved by less than tol (relative) ...
    patience: int  # ... over the last `patience` iterations
    level: float  # level of the held-out interval of the guard
    seed: int  # base of the fit's seeds (FIT_INITS, HELD_OUT, BATCHES, RESTARTS above)
    restarts: int  # starts of the descent: B = 0 and restarts - 1 random ones (lostmid.analysis.bias_fit.fit_bias)

    def seeds(self) -> list[int]:
        """Every seed the fit uses: check these are not training seeds."""
        weights = [self.seed + FIT_INITS + j for j in range(self.inits)] + [
            self.seed + HELD_OUT + j for j in range(self.heldout)
        ]
        return weights + [seed + BATCHES for seed in weights]


def fit_section(global_section: dict | None, remedy: dict) -> dict:
    """The fit section of a bias variant: its ``remedy.fit`` keys over the config's ``bias_fit`` section,
    without ``fit_model`` (which names the model, not a setting of the fit)."""
    own = {key: value for key, value in (remedy.get("fit") or {}).items() if key != "fit_model"}
    return {**(global_section or {}), **own}


def check_disjoint_from_training(settings: FitSettings, training_seeds, key: str = "bias_fit") -> None:
    """The fit must draw its initializations and batches from seeds no training run uses."""
    clash = sorted(set(settings.seeds()) & set(training_seeds))
    if clash:
        raise ConfigError(
            f"config key {key}.seed={settings.seed}: the fit would use training seeds {clash[:5]}; "
            "choose a seed far from them"
        )


@dataclass(frozen=True)
class LengthSettings:
    """The sequence-length study (``length``; docs/length.md): influence at initialization and the
    literal bias fit at every L of ``L``, at one depth, with and without the residual path."""

    L: tuple[int, ...]  # the lengths, increasing
    depth: int
    seeds: tuple[int, ...]  # initialization seeds of the profiles at init (the unit of their intervals)
    batch_per_position: int  # sequences per flag position 2..L of the profiles' batch
    seed: int  # seed of that batch
    full_max_L: int  # the full-form B (every entry free) is fitted up to this L ...
    fit_max_L: int  # ... and the distance form B_ij = c(i - j) up to this one (its cost: docs/performance.md)
    carry_from: int  # the L whose distance-form B is carried over to every longer L
    max_memory_mb: int  # refuse a length whose fit would hold more than this (``fit_memory_mb``)

    def check(self) -> None:
        if list(self.L) != sorted(set(self.L)) or self.L[0] < 3:
            raise ConfigError(f"config key length.L={list(self.L)}: lengths must be increasing and each >= 3")
        if self.carry_from not in self.L or self.carry_from == self.L[-1]:
            raise ConfigError(
                f"config key length.carry_from={self.carry_from}: must be one of length.L and not the longest"
            )
        if not self.full_max_L <= self.fit_max_L or self.carry_from > self.fit_max_L:
            raise ConfigError(
                f"config key length: need full_max_L ({self.full_max_L}) <= fit_max_L ({self.fit_max_L}) and "
                f"carry_from ({self.carry_from}) <= fit_max_L"
            )
        if len(self.seeds) < 2:
            raise ConfigError("config key length.seeds: an interval over initializations needs at least 2 seeds")


# The length study fits the blog's literal B (docs/length.md): these keys are the reading's, whatever bias_fit says.
LITERAL_FIT = {"target": "output_jacobian", "positions": "all"}


def length_fit_section(config: dict) -> dict:
    """The length study's fit block: the config's ``bias_fit`` keys, the literal reading's target and
    positions, then ``length.fit``'s sizes (``param`` is set per fit)."""
    return {**(config.get("bias_fit") or {}), **LITERAL_FIT, **(config["length"].get("fit") or {})}
