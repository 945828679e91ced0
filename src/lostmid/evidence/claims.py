"""The claims of the evidence stage: one function per claim, one row of the evidence table per setting.

Every claim of the blog post and of the paper that the workflow can test is a ``Claim`` in
``CLAIMS``: its source, the statistic (what is estimated, in which unit), the tables it reads,
the settings it is evaluated in (``settings``: e.g. every baseline variant, L and depth of the
run) and the function named after it that returns, for one setting, an ``Interval`` and the
``DecisionRule`` fixed in advance (``lostmid.evidence.settings.EvidenceSettings``).
``evidence_table`` evaluates them all and returns one row per (claim, setting), built with
``lostmid.evidence.statistics.claim_row``.

Trained claims follow the recipe of ``lostmid.evidence.statistics``: an effect per seed, then a
Student t interval over seeds (paired by seed when two variants share seeds); deterministic
claims (structural baseline, algebraic simulations) get a zero-width "interval" and a rule with
a tolerance.

Missing inputs. A claim whose table was not given, or whose variants are not in the run (no
bias-corrected variant, no Algorithm 1, ...), is not dropped: it gets one explicit row whose
``method`` starts with "not run:" and says what is missing, with NaN estimate and verdict
inconclusive, so the table always lists every claim. A table that is given but malformed
(missing columns, an unknown variant, a non-positive E_inf) is an error (``EvidenceError``).

Pairing of variants. The table knows variants only through the config's ``variants`` block
(name -> overrides): the *reference* of a remedy variant is the variant without a remedy whose
``model`` and ``train`` overrides are identical apart from ``train.seed_batch``, which changes
float rounding only (so a no-residual debiased variant is compared with the no-residual
baseline); if several qualify the one named ``baseline`` wins, else the first by name. A
setting whose reference is missing gets its own "not run" row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lostmid.errors import LostmidError
from lostmid.evidence import statistics as st
from lostmid.evidence.settings import EvidenceSettings

BLOG = "blog"
PAPER = "paper"

COLUMNS = ["claim", "source", "setting", "variant", "L", "depth", "residual", "checkpoint", "statistic", "unit",
           "estimate", "ci_low", "ci_high", "n_seeds", "method", "verdict", "rule", "rule_kind", "margin", "note"]

TABLES = ("failure", "metrics", "density_flow", "conditions", "structural", "init_sweep", "bias_matrix",
          "algebraic_table", "algebraic_probes")

REQUIRED_COLUMNS = {
    "failure": ["variant", "L", "depth", "seed", "step", "p", "n", "failures"],
    "metrics": ["variant", "L", "depth", "seed", "step", "delta", "E_inf"],
    "density_flow": ["variant", "L", "depth", "seed", "step", "eta", "rel_error"],
    "conditions": ["variant", "L", "depth", "seed", "step", "delta", "test", "holds", "conclusion_holds"],
    "structural": ["residual", "L", "depth", "layer", "position", "measured", "closed_form"],
    "init_sweep": ["residual", "depth", "seed", "position", "density", "output_jacobian"],
    "bias_matrix": ["L", "depth", "query", "key", "bias"],
    "algebraic_table": ["method", "left", "middle", "right", "LIM", "E_inf", "Z", "obs_imbalance"],
    "algebraic_probes": ["n_probe", "rel_bias", "rel_std"],
}


class EvidenceError(LostmidError):
    """A table given to the evidence stage is malformed or inconsistent with the config."""


class NotRun(Exception):
    """A claim cannot be evaluated on this run (a table or variant is absent); the message says why."""


@dataclass
class Inputs:
    """The loaded tables (None: not given) and the config's variant definitions."""

    variants: dict  # name -> the variant's overrides (model, train, remedy), as in the config
    model: dict  # the config's model block (defaults of every variant)
    failure: pd.DataFrame | None = None
    metrics: pd.DataFrame | None = None
    density_flow: pd.DataFrame | None = None
    conditions: pd.DataFrame | None = None
    structural: pd.DataFrame | None = None
    init_sweep: pd.DataFrame | None = None
    bias_matrix: pd.DataFrame | None = None
    algebraic_table: pd.DataFrame | None = None
    algebraic_probes: pd.DataFrame | None = None

    def __post_init__(self):
        if not isinstance(self.variants, dict) or not self.variants:
            raise EvidenceError("--variants must map at least one variant name to its overrides")
        self.variants = {name: (block or {}) for name, block in self.variants.items()}
        for name in TABLES:
            table = getattr(self, name)
            if table is None:
                continue
            missing = sorted(set(REQUIRED_COLUMNS[name]) - set(table.columns))
            if missing:
                raise EvidenceError(f"the {name} table lacks the columns {missing}")
            if table.empty:
                raise EvidenceError(f"the {name} table is empty")
            if "variant" in table.columns:
                unknown = sorted(set(table["variant"].astype(str)) - set(self.variants))
                if unknown:
                    raise EvidenceError(f"the {name} table has variants {unknown} that --variants does not define")

    # ----------------------------------------------------------------- variants

    def remedy(self, name: str) -> str:
        return (self.variants[name].get("remedy") or {}).get("kind", "none")

    def residual(self, name: str) -> bool:
        return bool({**self.model, **(self.variants[name].get("model") or {})}.get("residual", True))

    def reference(self, name: str) -> str | None:
        """The variant without a remedy and with the same model and train overrides (see the module doc)."""
        def train(b: dict) -> dict:  # seed_batch changes float rounding only, not what is trained
            return {k: v for k, v in (b.get("train") or {}).items() if k != "seed_batch"}

        block = self.variants[name]
        same = sorted(other for other, b in self.variants.items() if (b.get("remedy") or {}).get("kind", "none") == "none"
                      and (b.get("model") or {}) == (block.get("model") or {}) and train(b) == train(block))
        if not same:
            return None
        return "baseline" if "baseline" in same else same[0]

    def of_kind(self, kind: str) -> list[str]:
        return sorted(name for name in self.variants if self.remedy(name) == kind)


@dataclass(frozen=True)
class Setting:
    """Where a claim is evaluated: variant, L, depth, residual path, checkpoint (in words)."""

    variant: str | None = None
    L: int | None = None
    depth: int | None = None
    residual: bool | None = None
    checkpoint: str | None = None
    reference: str | None = None  # the variant compared against, for paired claims
    missing: str | None = None  # why this setting cannot be evaluated (its row says "not run: ...")

    def words(self) -> str:
        parts = []
        if self.variant is not None:
            parts.append(f"{self.variant} vs {self.reference}" if self.reference else self.variant)
        for key in ("L", "depth", "residual", "checkpoint"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key} {str(value).lower() if isinstance(value, bool) else value}")
        return ", ".join(parts) if parts else "-"


@dataclass(frozen=True)
class Result:
    interval: st.Interval
    rule: st.DecisionRule
    note: str = ""

    def rule_words(self) -> str:
        """The rule in words; for a deterministic claim (no seeds) "the interval over seeds" is the value itself."""
        words = self.rule.words
        if self.interval.n == 0 and not math.isnan(self.interval.estimate):
            ci = f"the {self.rule.level:.0%} interval over seeds"
            zero_width = self.interval.low == self.interval.high
            words = words.replace(ci, "the value (deterministic)" if zero_width else "the range over queries")
        return words


@dataclass(frozen=True)
class Claim:
    name: str
    source: str  # blog (a)-(e) / paper section
    statistic: str  # what is estimated
    unit: str  # its unit; the forest plot puts claims of one unit in one panel
    needs: tuple[str, ...]  # tables read
    settings: Callable[[Inputs, EvidenceSettings], list[Setting]]
    compute: Callable[[Inputs, EvidenceSettings, Setting], Result]
    log_axis: bool = False  # the forest plot shows this unit on a log axis


def _deterministic(value: float, units: int, what: str) -> st.Interval:
    value = float(value)
    return st.Interval(value, value, value, 0, f"deterministic ({what}; {units} values); no seeds, zero-width interval")


# =========================================================================== trained runs: helpers


def _accuracy_per_seed(failure: pd.DataFrame) -> pd.DataFrame:
    """Evaluation accuracy per (variant, L, depth, seed, step): 1 - failures / n over all flag positions."""
    grouped = failure.groupby(["variant", "L", "depth", "seed", "step"], as_index=False)[["failures", "n"]].sum()
    return grouped.assign(accuracy=1 - grouped.failures / grouped.n, failure=grouped.failures / grouped.n)


def _runs(table: pd.DataFrame, variant: str) -> list[tuple[int, int]]:
    part = table[table.variant == variant]
    return sorted({(int(L), int(depth)) for L, depth in zip(part.L, part.depth)})


def mid_training_step(failure: pd.DataFrame, variant: str, L: int, depth: int, level: float) -> tuple[int | None, float]:
    """The "mid-training" checkpoint of ``variant`` at (L, depth), by the rule fixed in the config.

    The first checkpoint after step 0, among those every seed has, at which the mean over seeds
    of the evaluation accuracy (balanced set, all flag positions pooled) is at least ``level``
    (``evidence.mid_accuracy``). Returns (step or None when no checkpoint reaches it, the best
    mean accuracy seen).
    """
    acc = _accuracy_per_seed(failure)
    part = acc[(acc.variant == variant) & (acc.L == L) & (acc.depth == depth)]
    if part.empty:
        raise NotRun(f"no failure rows for {variant} at L {L}, depth {depth}")
    seeds = part.seed.nunique()
    per_step = part.groupby("step").agg(mean=("accuracy", "mean"), seeds=("seed", "nunique"))
    per_step = per_step[(per_step.index > 0) & (per_step.seeds == seeds)]
    if per_step.empty:
        raise NotRun(f"{variant} at L {L}, depth {depth} has no checkpoint after step 0 common to all seeds")
    reached = per_step.index[per_step["mean"] >= level]
    return (int(reached[0]) if len(reached) else None), float(per_step["mean"].max())


def _slopes_at(failure: pd.DataFrame, variant: str, L: int, depth: int, step: int) -> pd.Series:
    part = failure[(failure.variant == variant) & (failure.L == L) & (failure.depth == depth) & (failure.step == step)]
    if part.empty:
        raise NotRun(f"{variant} at L {L}, depth {depth} has no failure rows at step {step}")
    return st.per_seed_slopes(part).set_index("seed")["slope"]


def _slope_rule(ev: EvidenceSettings, kind: str, quantity: str) -> st.DecisionRule:
    return st.DecisionRule(kind, ev.slope_margin, ev.level, quantity)


def _not_reached(variant: str, best: float, ev: EvidenceSettings) -> st.Interval:
    return st.Interval(math.nan, math.nan, math.nan, 0,
                       f"not run: mid-training undefined, {variant}'s mean evaluation accuracy never reached "
                       f"{ev.mid_accuracy:g} (best {best:.3f})")


# =========================================================================== blog (a): failure rises with position


def _baseline_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = []
    for name in inputs.of_kind("none"):
        for L, depth in _runs(inputs.failure, name):
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
    step, best = mid_training_step(inputs.failure, s.variant, s.L, s.depth, ev.mid_accuracy)
    if step is None:
        return Result(_not_reached(s.variant, best, ev), rule)
    slopes = _slopes_at(inputs.failure, s.variant, s.L, s.depth, step)
    interval = st.t_interval(slopes.to_numpy(), ev.level)
    return Result(interval._replace(method=f"per-seed binomial logistic slope (Haldane +0.5); {interval.method}"), rule,
                  f"mid-training = first checkpoint with mean accuracy >= {ev.mid_accuracy:g} (best {best:.3f})")


# =========================================================================== blog (b): influence at init grows with depth


def _init_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
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
    rule = st.DecisionRule("greater_than_zero", ev.init_growth_margin, ev.level,
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


def _bias_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
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
    rule = st.DecisionRule("greater_than_zero", ev.algebraic_tolerance, ev.level,
                           "the mean bias on a query's recent keys minus its early keys (range over queries)")
    return Result(interval, rule)


# =========================================================================== blog (d), (e): the bias-corrected model


def _pair_settings(kind: str, table: str, checkpoint: str):
    def settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
        found = []
        data = getattr(inputs, table)
        for name in inputs.of_kind(kind):
            reference = inputs.reference(name)
            for L, depth in _runs(data, name):
                missing = None
                if reference is None:
                    missing = f"variant {name} has no variant without a remedy and the same model and train overrides"
                elif (L, depth) not in _runs(data, reference):
                    missing = f"{reference} (the reference of {name}) has no {table} rows at L {L}, depth {depth}"
                found.append(Setting(name, L, depth, inputs.residual(name), checkpoint, reference, missing))
        if not found:
            raise NotRun(f"no variant with remedy {kind} in the {table} table")
        return found

    return settings


def _aufc(failure: pd.DataFrame, variant: str, L: int, depth: int, horizon: int) -> pd.Series:
    acc = _accuracy_per_seed(failure)
    part = acc[(acc.variant == variant) & (acc.L == L) & (acc.depth == depth) & (acc.step <= horizon)]
    areas = {int(seed): st.area_under_failure(g.step.to_numpy(), g.failure.to_numpy(), horizon)
             for seed, g in part.sort_values("step").groupby("seed")}
    return pd.Series(areas, dtype=np.float64)


def debiased_trains_faster(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Blog (d): the bias-corrected model trains faster than its baseline.

    Per seed: the area under the failure curve (evaluation failure pooled over positions,
    trapezoid over the checkpoints from step 0 to the last checkpoint both variants have,
    divided by the span: the mean failure over training). Paired by seed (debiased -
    baseline), Student t. Rule: less than zero, margin ``speed_margin``.
    """
    acc = _accuracy_per_seed(inputs.failure)
    steps = [set(acc[(acc.variant == v) & (acc.L == s.L) & (acc.depth == s.depth)].step) for v in (s.variant, s.reference)]
    horizon = max(steps[0] & steps[1])
    debiased = _aufc(inputs.failure, s.variant, s.L, s.depth, horizon)
    baseline = _aufc(inputs.failure, s.reference, s.L, s.depth, horizon)
    interval = st.paired_difference(debiased, baseline, st.t_interval, level=ev.level)
    rule = st.DecisionRule("less_than_zero", ev.speed_margin, ev.level,
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
    step, best = mid_training_step(inputs.failure, s.variant, s.L, s.depth, ev.mid_accuracy)
    if step is None:
        return Result(_not_reached(s.variant, best, ev), rule)
    slopes = _slopes_at(inputs.failure, s.variant, s.L, s.depth, step)
    interval = st.t_interval(slopes.to_numpy(), ev.level)
    return Result(interval._replace(method=f"per-seed binomial logistic slope at step {step}; {interval.method}"), rule,
                  f"mid-training = first checkpoint with mean accuracy >= {ev.mid_accuracy:g} (best {best:.3f})")


def _debiased_mid_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = []
    for s in _pair_settings("bias", "failure", "")(inputs, ev):
        step, _ = mid_training_step(inputs.failure, s.variant, s.L, s.depth, ev.mid_accuracy)
        checkpoint = f"step {step} (its own mid-training)" if step is not None else "mid-training not reached"
        found.append(Setting(s.variant, s.L, s.depth, s.residual, checkpoint))  # judged on its own: no reference needed
    return found


# =========================================================================== paper: structural baseline, density flow, conditions


def _single(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    return [Setting()]


def structural_baseline_matches_closed_form(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (structural baseline): the measured density of uniform attention with identity maps
    equals the closed form m_j ~ ((N^M)_{L,j})^2. Statistic: the largest |measured - closed form|
    divided by the largest closed-form density of its (residual, L, depth, layer) profile."""
    table = inputs.structural
    worst = 0.0
    groups = table.groupby(["residual", "L", "depth", "layer"])
    for _, part in groups:
        scale = part.closed_form.abs().max()
        worst = max(worst, float((part.measured - part.closed_form).abs().max() / scale))
    rule = st.DecisionRule("at_most", ev.structural_tolerance, ev.level, "the largest relative deviation from the closed form")
    return Result(_deterministic(worst, groups.ngroups, "max over residual, L, depth and layer profiles"), rule)


def _flow_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    table = inputs.density_flow
    return [Setting(str(v), int(L), int(d), inputs.residual(str(v)), "every checkpoint")
            for (v, L, d), _ in table.groupby(["variant", "L", "depth"], sort=True)]


def density_flow_matches_finite_difference(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (density flow, eq. 69): the predicted d_s m matches one finite gradient step.

    Per seed: the median relative error over positions and checkpoints (at the smallest step
    eta in the table). Over seeds: geometric mean with a t interval on the log scale. Rule: at
    most ``flow_tolerance``.
    """
    t = inputs.density_flow
    part = t[(t.variant == s.variant) & (t.L == s.L) & (t.depth == s.depth)]
    part = part[part.eta == part.eta.min()]
    per_seed = part.groupby("seed").rel_error.median()
    if (per_seed <= 0).any():
        raise EvidenceError("a density-flow relative error is not positive")
    interval = st.log_mean_interval(per_seed.to_numpy(), ev.level)
    rule = st.DecisionRule("at_most", ev.flow_tolerance, ev.level, "the median relative error of the predicted density flow")
    return Result(interval._replace(method=f"per-seed median over positions and checkpoints (eta {part.eta.min():g}); "
                                           f"{interval.method}"), rule)


def density_flow_error_falls_with_step(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (density flow): the finite-difference error falls with the step eta (first order).

    Per seed: slope of log(median relative error) on log(eta) over the etas in the table.
    Student t over seeds. Rule: greater than zero (error falls as eta falls), margin 0.5 (half
    an order per order of eta; a first-order difference has slope 1).
    """
    t = inputs.density_flow
    part = t[(t.variant == s.variant) & (t.L == s.L) & (t.depth == s.depth)]
    etas = sorted(part.eta.unique())
    rule = st.DecisionRule("greater_than_zero", 0.5, ev.level, "the slope of log relative error on log eta")
    if len(etas) < 2:
        return Result(st.Interval(math.nan, math.nan, math.nan, 0,
                                  f"not run: the density-flow table has one step eta ({etas[0]:g}); the claim needs two or more "
                                  "(tests/test_density_flow.py checks the trend on a tiny model)"), rule)
    slopes = []
    for _, g in part.groupby("seed"):
        med = g.groupby("eta").rel_error.median()
        slopes.append(float(np.polyfit(np.log(med.index.to_numpy()), np.log(med.to_numpy()), 1)[0]))
    interval = st.t_interval(slopes, ev.level)
    return Result(interval._replace(method=f"per-seed least-squares slope over {len(etas)} etas; {interval.method}"), rule)


def sufficient_conditions_sound(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (sufficient conditions): no condition holds while its conclusion fails.

    Count of rows (run, checkpoint, delta, test) with holds and not conclusion_holds.
    Deterministic; rule: at most 0 violations.
    """
    t = inputs.conditions
    violations = int((t.holds.astype(bool) & ~t.conclusion_holds.astype(bool)).sum())
    rule = st.DecisionRule("at_most", 0.0, ev.level, "the number of rows where a sufficient condition holds and its conclusion fails")
    interval = _deterministic(violations, len(t), f"count over rows of {t.seed.nunique()} seeds, {t.variant.nunique()} variants")
    return Result(interval, rule, f"{int(t.holds.astype(bool).sum())} of {len(t)} rows have a condition holding")


def _conditions_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    return [Setting(checkpoint="every checkpoint")]


# =========================================================================== paper: Algorithms 1-3 in training


def _last_common_step(inputs: Inputs, table: pd.DataFrame, s: Setting) -> int:
    steps = [set(table[(table.variant == v) & (table.L == s.L) & (table.depth == s.depth)].step) for v in (s.variant, s.reference)]
    return max(steps[0] & steps[1])


def _log_einf(inputs: Inputs, ev: EvidenceSettings, variant: str, s: Setting, step: int) -> pd.Series:
    m = inputs.metrics
    part = m[(m.variant == variant) & (m.L == s.L) & (m.depth == s.depth) & (m.step == step) & np.isclose(m.delta, ev.delta)]
    if part.empty:
        raise NotRun(f"the metrics table has no rows for {variant} at delta {ev.delta:g} (evidence.delta), step {step}")
    if (part.E_inf <= 0).any() or not np.isfinite(part.E_inf).all():
        raise EvidenceError(f"E_inf of {variant} at step {step} is not positive and finite")
    return np.log(part.set_index("seed").E_inf)


def _einf_ratio(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> tuple[st.Interval, int]:
    step = _last_common_step(inputs, inputs.metrics, s)
    interval = st.paired_difference(_log_einf(inputs, ev, s.variant, s, step), _log_einf(inputs, ev, s.reference, s, step),
                                    st.t_interval, level=ev.level)
    return interval._replace(method=f"per-seed log(E_inf remedy / E_inf baseline) at step {step}, delta {ev.delta:g}; "
                                    f"{interval.method}"), step


def balance_lowers_e_inf(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (Algorithm 1): balancing lowers E_inf against the baseline, paired by seed, at the
    last checkpoint both have. Rule: the log ratio is less than zero, margin ``log_ratio_margin``."""
    interval, _ = _einf_ratio(inputs, ev, s)
    return Result(interval, st.DecisionRule("less_than_zero", ev.log_ratio_margin, ev.level, "log(E_inf Alg. 1 / E_inf baseline)"))


def balance_keeps_accuracy(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (Algorithm 1): ... at comparable task accuracy: the paired difference of the evaluation
    accuracy at the last common checkpoint is equivalent to zero within ``accuracy_margin``."""
    acc = _accuracy_per_seed(inputs.failure)
    step = _last_common_step(inputs, acc, s)
    per = {v: acc[(acc.variant == v) & (acc.L == s.L) & (acc.depth == s.depth) & (acc.step == step)].set_index("seed").accuracy
           for v in (s.variant, s.reference)}
    interval = st.paired_difference(per[s.variant], per[s.reference], st.t_interval, level=ev.level)
    rule = st.DecisionRule("equivalent_to_zero", ev.accuracy_margin, ev.level, "the accuracy difference (Alg. 1 - baseline)")
    return Result(interval._replace(method=f"per-seed evaluation accuracy at step {step}; {interval.method}"), rule)


def reweight_changes_profile_little(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (Algorithm 2): reweighting changes the influence profile little: log(E_inf ratio)
    paired by seed, equivalent to zero within ``log_ratio_margin``."""
    interval, _ = _einf_ratio(inputs, ev, s)
    return Result(interval, st.DecisionRule("equivalent_to_zero", ev.log_ratio_margin, ev.level, "log(E_inf Alg. 2 / E_inf baseline)"))


# =========================================================================== paper section 4: the algebraic simulations


def _row(inputs: Inputs, method: str) -> pd.Series:
    t = inputs.algebraic_table
    rows = t[t.method == method]
    if len(rows) != 1:
        raise EvidenceError(f"the algebraic table has {len(rows)} rows for method {method!r}, expected 1")
    return rows.iloc[0]


def algebraic_baseline_left_right_middle(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: the baseline's regional densities order left > right > middle.
    Statistic: min(left - right, right - middle); rule: greater than zero."""
    b = _row(inputs, "baseline")
    value = min(b.left - b.right, b.right - b.middle)
    return Result(_deterministic(value, 3, "min of two regional differences"),
                  st.DecisionRule("greater_than_zero", ev.algebraic_tolerance, ev.level, "min(left - right, right - middle)"))


def algebraic_balance_e_inf_near_zero(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: Algorithm 1 reaches E_inf close to 0: at most ``einf_zero``."""
    return Result(_deterministic(_row(inputs, "alg1").E_inf, 1, "E_inf of Alg. 1"),
                  st.DecisionRule("at_most", ev.einf_zero, ev.level, "E_inf of Alg. 1"))


def algebraic_balance_z_grows(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: ... while Z grows: log(Z_alg1 / Z_baseline) greater than zero."""
    value = math.log(_row(inputs, "alg1").Z / _row(inputs, "baseline").Z)
    return Result(_deterministic(value, 2, "log ratio of two totals"),
                  st.DecisionRule("greater_than_zero", ev.algebraic_tolerance, ev.level, "log(Z Alg. 1 / Z baseline)"))


def algebraic_reweight_moves_little(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: Algorithm 2 moves the profile little: log(E_inf_alg2 / E_inf_baseline)
    within +- ``log_ratio_margin``."""
    value = math.log(_row(inputs, "alg2").E_inf / _row(inputs, "baseline").E_inf)
    return Result(_deterministic(value, 2, "log ratio"),
                  st.DecisionRule("equivalent_to_zero", ev.log_ratio_margin, ev.level, "log(E_inf Alg. 2 / E_inf baseline)"))


def observability_lowers_trace_imbalance(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: Algorithm 3 balances its trace surrogate: its trace imbalance is at most
    ``imbalance_ratio`` of the baseline's."""
    value = _row(inputs, "alg3").obs_imbalance / _row(inputs, "baseline").obs_imbalance
    return Result(_deterministic(value, 2, "ratio of trace imbalances"),
                  st.DecisionRule("at_most", ev.imbalance_ratio, ev.level, "trace imbalance of Alg. 3 / baseline's"))


def algebraic_observability_right_below_middle(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: ... yet pushes the right region below the middle: LIM of Alg. 3 less than zero."""
    return Result(_deterministic(_row(inputs, "alg3").LIM, 1, "LIM of Alg. 3"),
                  st.DecisionRule("less_than_zero", ev.algebraic_tolerance, ev.level, "LIM of Alg. 3"))


def _probe_ratio(inputs: Inputs, column: str) -> tuple[float, str]:
    t = inputs.algebraic_probes.sort_values("n_probe")
    first, last = t.iloc[0], t.iloc[-1]
    value = abs(last[column]) / abs(first[column])
    return value, f"|{column}| at {int(last.n_probe)} probes / at {int(first.n_probe)} probe(s)"


def probe_bias_falls(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper section 4 (probes): the relative bias of the probe estimate falls with the probe count."""
    value, what = _probe_ratio(inputs, "rel_bias")
    return Result(_deterministic(value, 2, what), st.DecisionRule("at_most", ev.probe_ratio, ev.level, what))


def probe_spread_falls(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper section 4 (probes): the relative spread of the probe estimate falls with the probe count."""
    value, what = _probe_ratio(inputs, "rel_std")
    return Result(_deterministic(value, 2, what), st.DecisionRule("at_most", ev.probe_ratio, ev.level, what))


# =========================================================================== the registry

SLOPE = "log odds per unit p"
ORDERS = "orders of magnitude (log10)"
LOG_RATIO = "natural log of a ratio"

CLAIMS: list[Claim] = [
    Claim("failure_rises_with_position", "blog (a)", "per-seed logistic slope of failure on p = f/L at mid-training",
          SLOPE, ("failure",), _baseline_settings, failure_rises_with_position),
    Claim("first_token_jacobian_grows_with_depth", "blog (b)",
          "growth from depth 1 of log10 E||d logits_L/d x_1|| / E||d logits_L/d x_L|| (the blog's measure), no residual path",
          ORDERS, ("init_sweep",), _init_settings, first_token_jacobian_grows_with_depth),
    Claim("first_token_density_grows_with_depth", "blog (b)",
          "growth from depth 1 of log10 m_1 / m_L (squared loss-gradient density), no residual path",
          ORDERS, ("init_sweep",), _init_settings, first_token_density_grows_with_depth),
    Claim("fitted_bias_weights_recent_keys", "blog (c)", "mean over queries of B(recent half of keys) - B(early half)",
          "attention logit", ("bias_matrix",), _bias_settings, fitted_bias_weights_recent_keys),
    Claim("debiased_trains_faster", "blog (d)", "paired difference of the mean failure rate over training (area under the failure curve)",
          "failure rate", ("failure",), _pair_settings("bias", "failure", "steps 0 to the last common checkpoint"), debiased_trains_faster),
    Claim("debiased_has_no_position_preference", "blog (e)", "per-seed logistic slope of failure on p at its own mid-training",
          SLOPE, ("failure",), _debiased_mid_settings, debiased_has_no_position_preference),
    Claim("structural_baseline_matches_closed_form", "paper: structural baseline (closed form m_j ~ ((N^M)_{L,j})^2)",
          "largest relative deviation of the measured density from the closed form", "relative error",
          ("structural",), _single, structural_baseline_matches_closed_form, log_axis=True),
    Claim("density_flow_matches_finite_difference", "paper: density flow (eq. 69)",
          "median relative error of the predicted density flow against one gradient step", "relative error",
          ("density_flow",), _flow_settings, density_flow_matches_finite_difference, log_axis=True),
    Claim("density_flow_error_falls_with_step", "paper: density flow (eq. 69)", "slope of log relative error on log eta",
          "log-log slope", ("density_flow",), _flow_settings, density_flow_error_falls_with_step),
    Claim("sufficient_conditions_sound", "paper: sufficient conditions (soundness)",
          "rows where a sufficient condition holds and its conclusion fails", "count",
          ("conditions",), _conditions_settings, sufficient_conditions_sound),
    Claim("balance_lowers_e_inf", "paper: Algorithm 1", "paired log(E_inf Alg. 1 / E_inf baseline) at the last checkpoint",
          LOG_RATIO, ("metrics",), _pair_settings("balance", "metrics", "last common checkpoint"), balance_lowers_e_inf),
    Claim("balance_keeps_accuracy", "paper: Algorithm 1", "paired accuracy difference (Alg. 1 - baseline) at the last checkpoint",
          "accuracy", ("failure",), _pair_settings("balance", "failure", "last common checkpoint"), balance_keeps_accuracy),
    Claim("reweight_changes_profile_little", "paper: Algorithm 2", "paired log(E_inf Alg. 2 / E_inf baseline) at the last checkpoint",
          LOG_RATIO, ("metrics",), _pair_settings("reweight", "metrics", "last common checkpoint"), reweight_changes_profile_little),
    Claim("observability_lowers_trace_imbalance", "paper: Algorithm 3 (section 4, Table 1)",
          "trace imbalance of Alg. 3 / the baseline's", "ratio", ("algebraic_table",), _single, observability_lowers_trace_imbalance,
          log_axis=True),
    Claim("algebraic_baseline_left_right_middle", "paper: section 4, Table 1", "min(left - right, right - middle) of the baseline",
          "density", ("algebraic_table",), _single, algebraic_baseline_left_right_middle),
    Claim("algebraic_balance_e_inf_near_zero", "paper: section 4, Table 1", "E_inf of Algorithm 1", "E_inf",
          ("algebraic_table",), _single, algebraic_balance_e_inf_near_zero, log_axis=True),
    Claim("algebraic_balance_z_grows", "paper: section 4, Table 1", "log(Z Alg. 1 / Z baseline)", LOG_RATIO,
          ("algebraic_table",), _single, algebraic_balance_z_grows),
    Claim("algebraic_reweight_moves_little", "paper: section 4, Table 1", "log(E_inf Alg. 2 / E_inf baseline)", LOG_RATIO,
          ("algebraic_table",), _single, algebraic_reweight_moves_little),
    Claim("algebraic_observability_right_below_middle", "paper: section 4, Table 1", "LIM of Algorithm 3", "LIM",
          ("algebraic_table",), _single, algebraic_observability_right_below_middle),
    Claim("probe_bias_falls", "paper: section 4, probes", "|relative bias| at the most probes / at the fewest", "ratio",
          ("algebraic_probes",), _single, probe_bias_falls, log_axis=True),
    Claim("probe_spread_falls", "paper: section 4, probes", "relative spread at the most probes / at the fewest", "ratio",
          ("algebraic_probes",), _single, probe_spread_falls, log_axis=True),
]

CLAIMS_BY_NAME = {claim.name: claim for claim in CLAIMS}


NOT_RUN_RULE = "No verdict: the claim was not evaluated on this run (the method says what is missing)."


def _not_run_row(claim: Claim, reason: str, setting: Setting | None = None) -> dict:
    interval = st.Interval(math.nan, math.nan, math.nan, 0, reason if reason.startswith("not run") else f"not run: {reason}")
    row = _row_of(claim, setting or Setting(), Result(interval, st.DecisionRule("at_most", 0.0, quantity=claim.statistic)))
    return {**row, "rule": NOT_RUN_RULE, "rule_kind": "none", "margin": math.nan}


def _row_of(claim: Claim, setting: Setting, result: Result) -> dict:
    row = {**st.claim_row(result.interval, result.rule), "rule": result.rule_words()}
    return {"claim": claim.name, "source": claim.source, "setting": setting.words(), "variant": setting.variant,
            "L": setting.L, "depth": setting.depth, "residual": setting.residual, "checkpoint": setting.checkpoint,
            "statistic": claim.statistic, "unit": claim.unit, **row, "rule_kind": result.rule.kind,
            "margin": result.rule.margin, "note": result.note, "log_axis": claim.log_axis}


def evaluate_claim(claim: Claim, inputs: Inputs, ev: EvidenceSettings) -> list[dict]:
    """The rows of one claim: one per setting, or one "not run" row saying what is missing."""
    missing = [name for name in claim.needs if getattr(inputs, name) is None]
    if missing:
        return [_not_run_row(claim, f"not run: table {', '.join(missing)} not given")]
    try:
        settings = claim.settings(inputs, ev)
    except NotRun as why:
        return [_not_run_row(claim, str(why))]
    rows = []
    for setting in settings:
        if setting.missing:
            rows.append(_not_run_row(claim, setting.missing, setting))
            continue
        try:
            rows.append(_row_of(claim, setting, claim.compute(inputs, ev, setting)))
        except NotRun as why:
            rows.append(_not_run_row(claim, str(why), setting))
    return rows


def evidence_table(inputs: Inputs, ev: EvidenceSettings, claims: list[Claim] | None = None) -> pd.DataFrame:
    """The evidence table: one row per (claim, setting), in the order of ``CLAIMS``."""
    rows = [row for claim in (CLAIMS if claims is None else claims) for row in evaluate_claim(claim, inputs, ev)]
    table = pd.DataFrame(rows, columns=COLUMNS + ["log_axis"])
    bad = set(table.verdict) - set(st.VERDICTS)
    if bad:
        raise RuntimeError(f"unexpected verdicts {bad}")
    return table.astype({"L": "Int64", "depth": "Int64", "n_seeds": "int64", "residual": "boolean"})


def markdown(table: pd.DataFrame) -> str:
    """The evidence table as Markdown for the README: one line per row, then the decision rules."""
    lines = ["| # | claim | source | setting | statistic (unit) | estimate [interval] | seeds | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    rules = []
    def cell(text) -> str:
        return str(text).replace("|", "\\|")

    for i, row in enumerate(table.itertuples(index=False), 1):
        if math.isnan(row.estimate):
            value = "–"
        elif math.isnan(row.ci_low):
            value = f"{row.estimate:.3g}"
        else:
            value = f"{row.estimate:.3g} [{row.ci_low:.3g}, {row.ci_high:.3g}]"
        lines.append(f"| {i} | {row.claim} | {cell(row.source)} | {cell(row.setting)} | {cell(row.statistic)} ({row.unit}) | {value} | "
                     f"{row.n_seeds or '–'} | **{row.verdict}** |")
        rules.append(f"{i}. {row.method}. {row.rule}" + (f" Note: {row.note}." if row.note else ""))
    return "\n".join(lines) + "\n\nMethods and decision rules, by row:\n\n" + "\n".join(rules) + "\n"


__all__ = ["CLAIMS", "CLAIMS_BY_NAME", "COLUMNS", "Claim", "EvidenceError", "Inputs", "NotRun", "Result", "Setting",
           "TABLES", "evaluate_claim", "evidence_table", "markdown", "mid_training_step", "recent_minus_early_bias"]
