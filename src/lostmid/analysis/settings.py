"""Settings of the analysis blocks: ``influence`` (with its ``init_sweep`` and ``structural``
sub-blocks), ``channels`` and ``bias_fit``. Each is built by ``lostmid.config.settings_from_block``
(defaults and value checks: the config schema; cross-key rules: the class's ``check``), and the
module is free of torch, so that the workflow builds them all when it parses the config."""

from __future__ import annotations

from dataclasses import dataclass

from lostmid.errors import ConfigError


@dataclass(frozen=True)
class InfluenceSettings:
    """The per-run keys of the config's ``influence`` block (evaluation and density flow)."""

    batch_per_position: int  # evaluation sequences at every flag position 2..L
    seed: int  # seed of the evaluation batch; distinct from evaluation.seed
    deltas: tuple[float, ...]  # region scales of the metrics table
    flow_step: float | tuple[float, ...]  # eta(s) of the density-flow finite difference
    flow_batch_per_position: int  # the density-flow batch (forward-over-reverse in float64 costs ~10 backward passes)
    trace_batch_per_position: int  # the batch of the loss-free profiles (exact traces: L d tangents per sequence)
    chunk: int  # sequences per forward/backward pass (memory bound only; results do not depend on it)


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
            raise ConfigError(f"config key influence.structural.d_model={self.d_model} is not divisible by "
                              f"influence.structural.heads={self.heads}")


@dataclass(frozen=True)
class ChannelSettings:
    """The channel decomposition and condition tests (``channels``)."""

    batch_per_position: int  # sequences per flag position of the stratified analysis set
    seed: int  # seed of that set and of the power-iteration start vectors
    deltas: tuple[float, ...]  # region scales
    power_iterations: int  # JVP/VJP pairs per operator norm (0: skip residual persistence)
    batch_size: int  # sequences per forward/backward pass
    float64: bool  # analyse in double precision (tolerance 1e-9 instead of 1e-4)


@dataclass(frozen=True)
class FitSettings:
    """The attention-bias fit (``bias_fit``; docs/theory.md §6, the fit itself is lostmid.analysis.bias_fit)."""

    inits: int  # random initializations averaged in the objective
    batch: int  # sequences per initialization (one fixed batch each)
    max_iter: int  # Adam iterations at most
    lr: float  # Adam step on the logit bias
    tol: float  # stop when the best objective improved by less than tol (relative) ...
    patience: int  # ... over the last `patience` iterations
    positions: str  # context: positions 1..L-1; all: the whole profile
    param: str  # distance: B_ij = c(i - j) (L numbers); full: every entry free
    seed: int  # fit seeds: seed + j (weights), seed + 1000 + j (batches); check: + 500

    def seeds(self) -> list[int]:
        """Every seed the fit uses: check these are not training seeds."""
        return [self.seed + offset + j for offset in (0, 500, 1000, 1500) for j in range(self.inits)]


def check_disjoint_from_training(settings: FitSettings, training_seeds) -> None:
    """The fit must draw its initializations and batches from seeds no training run uses."""
    clash = sorted(set(settings.seeds()) & set(training_seeds))
    if clash:
        raise ConfigError(f"config key bias_fit.seed={settings.seed}: the fit would use training seeds {clash[:5]}; choose a seed far from them")
