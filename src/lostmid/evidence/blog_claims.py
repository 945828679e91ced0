"""The blog's claims (a)-(e): the mid-training position effect, the first token's influence at
initialization, the fitted bias, and the bias-corrected model's speed and position preference."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from lostmid.evidence import decisions as dec
from lostmid.evidence import statistics as st
from lostmid.evidence.inputs import (EvidenceError, Inputs, NotRun, Result, Setting, last_common_step, pair_settings, rows_of,
                                     runs_of)
from lostmid.evidence.settings import EvidenceSettings
from lostmid.tables.summaries import accuracy_per_checkpoint


def mid_training_step(failure: pd.DataFrame, variant: str, L: int, depth: int, level: float) -> tuple[int | None, float]:
    """The "mid-training" checkpoint of ``variant`` at (L, depth), by the rule fixed in the config.

    The first checkpoint after step 0, among those every seed has, at which the mean over seeds
    of the evaluation accuracy (balanced set, all flag positions pooled) is at least ``level``
    (``evidence.mid_accuracy``). Returns (step or None when no checkpoint reaches it, the best
    mean accuracy seen).
    """
    part = rows_of(accuracy_per_checkpoint(failure), "failure", variant, L, depth)
    seeds = part.seed.nunique()
    per_step = part.groupby("step").agg(mean=("accuracy", "mean"), seeds=("seed", "nunique"))
    per_step = per_step[(per_step.index > 0) & (per_step.seeds == seeds)]
    if per_step.empty:
        raise NotRun(f"{variant} at L {L}, depth {depth} has no checkpoint after step 0 common to all seeds")
    reached = per_step.index[per_step["mean"] >= level]
    return (int(reached[0]) if len(reached) else None), float(per_step["mean"].max())


def slopes_at(failure: pd.DataFrame, variant: str, L: int, depth: int, step: int) -> pd.Series:
    return st.per_seed_slopes(rows_of(failure, "failure", variant, L, depth, step)).set_index("seed")["slope"]


def _slope_rule(ev: EvidenceSettings, kind: str, quantity: str) -> dec.DecisionRule:
    return dec.DecisionRule(kind, ev.slope_margin, ev.level, quantity)


def slope_at_mid_training(inputs: Inputs, ev: EvidenceSettings, s: Setting, rule) -> Result:
    """Per-seed logistic slopes of failure on p at the variant's own mid-training checkpoint,
    and their Student t interval over seeds (a "not run" result when it never gets there)."""
    step, best = mid_training_step(inputs.failure, s.variant, s.L, s.depth, ev.mid_accuracy)
    if step is None:
        return Result(_not_reached(s.variant, best, ev), rule)
    slopes = slopes_at(inputs.failure, s.variant, s.L, s.depth, step)
    interval = st.t_interval(slopes.to_numpy(), ev.level)
    return Result(interval._replace(method=f"per-seed binomial logistic slope (Haldane +0.5) at step {step}; {interval.method}"), rule,
                  f"mid-training = first checkpoint with mean accuracy >= {ev.mid_accuracy:g} (best {best:.3f})")


def _not_reached(variant: str, best: float, ev: EvidenceSettings) -> st.Interval:
    return st.Interval(math.nan, math.nan, math.nan, 0,
                       f"not run: mid-training undefined, {variant}'s mean evaluation accuracy never reached "
                       f"{ev.mid_accuracy:g} (best {best:.3f})")


# =========================================================================== blog (a): failure rises with position


def baseline_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = []
    for name in inputs.of_kind("none"):
        for L, depth in runs_of(inputs.failure, name):
            step, best = mid_training_step(inputs.failure, name, L, depth, ev.mid_accuracy)
            checkpoint = f"step {step} (mid-training)" if step is not None else "mid-training not reached"
            found.append(Setting(name, L, depth, inputs.residual(name), checkpoint))
    if not found:
        raise NotRun("no variant without a remedy in the failure table")
    return found


def failure_rises_with_position(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Blog (a): mid-training, failure rises with the flag position (baseline).

    Per seed: slope b of the binomial GLM logit(failure) = a + b p at the mid-training
    checkpoint (``mid_training_step``). Over seeds: Student t interval. Rule: greater than
    zero, margin ``slope_margin`` (contradicted when the interval excludes every slope as
    large as the margin).
    """
    rule = _slope_rule(ev, "greater_than_zero", "the slope of logit(failure) on p at mid-training")
    return slope_at_mid_training(inputs, ev, s, rule)


# =========================================================================== blog (b): influence at init grows with depth


def init_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    sweep = inputs.init_sweep
    depths = sorted(sweep[~sweep.residual.astype(bool)].depth.unique())
    if ev.init_depth not in depths or 1 not in depths:
        raise NotRun(f"the init sweep without the residual path has depths {depths}; the claim needs 1 and "
                     f"evidence.init_depth = {ev.init_depth}")
    return [Setting(residual=False, depth=ev.init_depth, checkpoint="initialization",
                    L=int(sweep.position.max()))]


def _first_over_last(sweep: pd.DataFrame, column: str, depth: int) -> pd.Series:
    """Per init seed: log10 of column(position 1) / column(position L), no residual path, at ``depth``."""
    part = sweep[(~sweep.residual.astype(bool)) & (sweep.depth == depth)]
    L = part.position.max()
    first = part[part.position == 1].set_index("seed")[column]
    last = part[part.position == L].set_index("seed")[column]
    ratio = first / last
    if not (np.isfinite(ratio).all() and (ratio > 0).all()):
        raise EvidenceError(f"the init sweep's {column} at depth {depth} is not positive and finite at positions 1 and L")
    return np.log10(ratio)


def _growth(inputs: Inputs, ev: EvidenceSettings, column: str, power: int, what: str) -> Result:
    sweep = inputs.init_sweep
    deep = _first_over_last(sweep, column, ev.init_depth)
    shallow = _first_over_last(sweep, column, 1)
    interval = st.paired_difference(deep, shallow, st.t_interval, level=ev.level)
    rule = dec.DecisionRule("greater_than_zero", ev.init_growth_margin, ev.level,
                           f"the orders of magnitude (log10) by which the first token's {what} over the last's grows "
                           f"from depth 1 to depth {ev.init_depth}")
    at_depth = float(deep.mean())
    blog = ev.blog_init_orders * (2 if power == 2 else 1)
    note = (f"first/last at depth {ev.init_depth}: 10^{at_depth:.1f} (geometric mean over {deep.size} init seeds; "
            f"depth 1: 10^{float(shallow.mean()):.1f}); blog: ~10^{ev.blog_init_orders:g} after 4 layers in its power-1 "
            f"measure" + (f" (~10^{blog:g} squared)" if power == 2 else "")
            + f"; here L = {int(sweep.position.max())}, d = {inputs.model.get('d_model', '?')}")
    return Result(interval._replace(method=f"per init seed, log10 ratio at depth {ev.init_depth} minus at depth 1; "
                                           f"{interval.method}"), rule, note)


def first_token_jacobian_grows_with_depth(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Blog (b), in the blog's own measure: without the residual path, at initialization, the first
    token's E||d logits_L / d x_1|| (power 1) over the last token's grows with depth."""
    return _growth(inputs, ev, "output_jacobian", 1, "output-Jacobian norm E||d logits_L/d x_j||")


def first_token_density_grows_with_depth(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Blog (b), in our measure: the same with the squared loss-gradient density m_j."""
    return _growth(inputs, ev, "density", 2, "influence density m_j (squared loss gradient)")


# =========================================================================== blog (c): the fitted bias weights later tokens


def bias_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    keys = [k for k in inputs.bias_matrix.columns if k not in ("query", "key", "bias")]
    found = []
    for group, _ in inputs.bias_matrix.groupby(keys, sort=True):
        values = dict(zip(keys, group if isinstance(group, tuple) else (group,)))
        variant = values.get("variant")
        residual = values.get("residual", inputs.residual(variant) if variant in inputs.variants else None)
        found.append(Setting(variant, int(values["L"]), int(values["depth"]),
                             None if residual is None else bool(residual), "initialization (fitted B)"))
    return found


def recent_minus_early_bias(matrix: pd.DataFrame) -> pd.Series:
    """Per query i >= 2: mean B_ij over its most recent floor(i/2) keys minus over its earliest floor(i/2) keys."""
    rows = {}
    for query, part in matrix.groupby("query"):
        if query < 2:
            continue
        part = part.sort_values("key")
        half = int(query) // 2
        rows[int(query)] = float(part.bias.iloc[-half:].mean() - part.bias.iloc[:half].mean())
    return pd.Series(rows, dtype=np.float64)


def fitted_bias_weights_recent_keys(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Blog (c): the fitted bias B weights later tokens more than earlier ones, for every query.

    Deterministic (one fitted B): per query i, mean B over the recent half of its keys minus
    over the early half; the estimate is the mean over queries, the "interval" the range over
    queries, so "supported" means every query prefers its recent keys.
    """
    matrix = inputs.bias_matrix[(inputs.bias_matrix.L == s.L) & (inputs.bias_matrix.depth == s.depth)]
    if s.variant is not None and "variant" in matrix:
        matrix = matrix[matrix.variant == s.variant]
    if s.residual is not None and "residual" in matrix:
        matrix = matrix[matrix.residual.astype(bool) == s.residual]
    diff = recent_minus_early_bias(matrix)
    if diff.empty:
        raise NotRun(f"the bias matrix at L {s.L}, depth {s.depth} has no query with two keys")
    interval = st.Interval(float(diff.mean()), float(diff.min()), float(diff.max()), 0,
                           f"deterministic (one fitted B); mean over {diff.size} queries, range over queries as the interval")
    rule = dec.DecisionRule("greater_than_zero", ev.algebraic_tolerance, ev.level,
                           "the mean bias on a query's recent keys minus its early keys (range over queries)")
    return Result(interval, rule)


# =========================================================================== blog (d), (e): the bias-corrected model


def area_under_failure_per_seed(accuracy: pd.DataFrame, variant: str, L: int, depth: int, horizon: int) -> pd.Series:
    """Per seed: the area under the failure curve of ``accuracy_per_checkpoint`` rows, steps 0 to ``horizon``, over the span."""
    part = rows_of(accuracy, "failure", variant, L, depth)
    part = part[part.step <= horizon]
    areas = {int(seed): st.area_under_failure(g.step.to_numpy(), g.failure.to_numpy(), horizon)
             for seed, g in part.sort_values("step").groupby("seed")}
    return pd.Series(areas, dtype=np.float64)


def training_speed_per_seed(failure: pd.DataFrame, s: Setting) -> tuple[pd.Series, pd.Series, int]:
    """Claim (d)'s per-seed effect: the mean failure over training (area under the failure curve
    over the span) of the variant and of its reference, from step 0 to the last checkpoint both
    have; returns (variant's, reference's, that step)."""
    acc = accuracy_per_checkpoint(failure)
    horizon = last_common_step(acc, s)
    return (area_under_failure_per_seed(acc, s.variant, s.L, s.depth, horizon),
            area_under_failure_per_seed(acc, s.reference, s.L, s.depth, horizon), horizon)


def debiased_trains_faster(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Blog (d): the bias-corrected model trains faster than its baseline.

    Per seed: the area under the failure curve (evaluation failure pooled over positions,
    trapezoid over the checkpoints from step 0 to the last checkpoint both variants have,
    divided by the span: the mean failure over training). Paired by seed (debiased -
    baseline), Student t. Rule: less than zero, margin ``speed_margin``.
    """
    debiased, baseline, horizon = training_speed_per_seed(inputs.failure, s)
    interval = st.paired_difference(debiased, baseline, st.t_interval, level=ev.level)
    rule = dec.DecisionRule("less_than_zero", ev.speed_margin, ev.level,
                           "the difference (debiased - baseline) of the mean failure rate over training")
    return Result(interval._replace(method=f"per-seed area under the failure curve, steps 0-{horizon}, divided by the span; "
                                           f"{interval.method}"), rule,
                  f"mean failure over training: debiased {debiased.mean():.3f}, baseline {baseline.mean():.3f}")


def debiased_has_no_position_preference(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Blog (e): the bias-corrected model has no preference for earlier (or later) tokens.

    Per seed: the logistic slope of failure on p at the bias-corrected variant's *own*
    mid-training checkpoint (the rule of claim (a) applied to it: the first checkpoint where its
    mean accuracy reaches ``mid_accuracy``). Its own, not the baseline's: a variant that learns
    more slowly sits near chance at the baseline's mid-training step, and a model at chance is
    flat for the wrong reason. Student t over seeds. Rule: equivalent to zero within +-
    ``slope_margin``.
    """
    rule = _slope_rule(ev, "equivalent_to_zero", "the slope of logit(failure) on p at the variant's own mid-training checkpoint")
    return slope_at_mid_training(inputs, ev, s, rule)


def debiased_mid_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = []
    for s in pair_settings("bias", "failure", "")(inputs, ev):
        step, _ = mid_training_step(inputs.failure, s.variant, s.L, s.depth, ev.mid_accuracy)
        checkpoint = f"step {step} (its own mid-training)" if step is not None else "mid-training not reached"
        found.append(replace(s, checkpoint=checkpoint, reference=None, missing=None))  # judged on its own: no reference needed
    return found


def late_failure_per_seed(failure: pd.DataFrame, variant: str, L: int, depth: int, step: int) -> pd.Series:
    """Per seed: the failure rate at ``step`` pooled over the flags in the later half of the context (p > 1/2)."""
    part = rows_of(failure, "failure", variant, L, depth, step)
    pooled = part[part.p > 0.5].groupby("seed")[["failures", "n"]].sum()
    return (pooled.failures / pooled.n).astype(np.float64)


def debiased_late_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = []
    for s in pair_settings("bias", "failure", "")(inputs, ev):
        checkpoint = "the reference's mid-training"
        if s.missing is None:
            step, _ = mid_training_step(inputs.failure, s.reference, s.L, s.depth, ev.mid_accuracy)
            checkpoint = f"step {step} ({s.reference}'s mid-training)" if step is not None else f"{s.reference}'s mid-training not reached"
        found.append(replace(s, checkpoint=checkpoint))
    return found


def debiased_recalls_late_flags(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Blog (e), its second half: the bias-corrected model achieves "perfect recall all the way along
    the sequence even when the naive one was still confused".

    At the baseline's mid-training checkpoint (claim (a)'s, where the naive model is still
    confused and fails most on late flags), per seed: the failure rate on the flags in the later
    half of the context (p > 1/2), paired by seed (debiased - baseline), Student t. Rule: less
    than zero, margin ``recall_margin``. Unlike the slope of the first half, a model that has
    not learned cannot pass: at chance it fails half of these flags.
    """
    rule = dec.DecisionRule("less_than_zero", ev.recall_margin, ev.level,
                           "the difference (debiased - baseline) of the failure rate on flags in the later half of the "
                           "context, at the baseline's mid-training checkpoint")
    step, best = mid_training_step(inputs.failure, s.reference, s.L, s.depth, ev.mid_accuracy)
    if step is None:
        return Result(_not_reached(s.reference, best, ev), rule)
    debiased, baseline = (late_failure_per_seed(inputs.failure, v, s.L, s.depth, step) for v in (s.variant, s.reference))
    interval = st.paired_difference(debiased, baseline, st.t_interval, level=ev.level)
    return Result(interval._replace(method=f"per-seed failure rate on flags with p > 1/2 at step {step}; {interval.method}"), rule,
                  f"failure on late flags at step {step}: debiased {debiased.mean():.3f}, baseline {baseline.mean():.3f}")


# =========================================================================== paper: structural baseline, density flow, conditions
