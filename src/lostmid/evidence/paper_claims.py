"""The paper's claims: the structural baseline, the density flow, the soundness of the sufficient
conditions, Algorithms 1-3 on trained runs, and the algebraic simulations (Table 1, probes)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lostmid.analysis.conditions import violations as soundness_violations
from lostmid.evidence import decisions as dec
from lostmid.evidence import statistics as st
from lostmid.evidence.inputs import (
    EvidenceError,
    Inputs,
    NotRun,
    Result,
    Setting,
    deterministic,
    last_common_step,
    rows_of,
)
from lostmid.evidence.settings import EvidenceSettings
from lostmid.tables.summaries import accuracy_per_checkpoint


def single_setting(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
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
    rule = dec.DecisionRule(
        "at_most", ev.structural_tolerance, ev.level, "the largest relative deviation from the closed form"
    )
    return Result(deterministic(worst, groups.ngroups, "max over residual, L, depth and layer profiles"), rule)


def flow_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    table = inputs.density_flow
    return [
        Setting(str(v), int(L), int(d), inputs.residual(str(v)), "every checkpoint")
        for (v, L, d), _ in table.groupby(["variant", "L", "depth"], sort=True)
    ]


def density_flow_matches_finite_difference(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (density flow, eq. 69): the predicted d_s m matches one finite gradient step.

    Per seed: the median relative error over positions and checkpoints (at the smallest step
    eta in the table). Over seeds: geometric mean with a t interval on the log scale. Rule: at
    most ``flow_tolerance``.
    """
    part = rows_of(inputs.density_flow, "density-flow", s.variant, s.L, s.depth)
    part = part[part.eta == part.eta.min()]
    per_seed = part.groupby("seed").rel_error.median()
    if (per_seed <= 0).any():
        raise EvidenceError("a density-flow relative error is not positive")
    interval = st.log_mean_interval(per_seed.to_numpy(), ev.level)
    rule = dec.DecisionRule(
        "at_most", ev.flow_tolerance, ev.level, "the median relative error of the predicted density flow"
    )
    return Result(
        interval._replace(
            method=f"per-seed median over positions and checkpoints (eta {part.eta.min():g}); {interval.method}"
        ),
        rule,
    )


def density_flow_error_falls_with_step(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (density flow): the finite-difference error falls with the step eta (first order).

    Per seed: slope of log(median relative error) on log(eta) over the etas in the table.
    Student t over seeds. Rule: greater than zero (error falls as eta falls), margin 0.5 (half
    an order per order of eta; a first-order difference has slope 1).
    """
    part = rows_of(inputs.density_flow, "density-flow", s.variant, s.L, s.depth)
    etas = sorted(part.eta.unique())
    rule = dec.DecisionRule("greater_than_zero", 0.5, ev.level, "the slope of log relative error on log eta")
    if len(etas) < 2:
        return Result(
            st.Interval(
                math.nan,
                math.nan,
                math.nan,
                0,
                f"not run: the density-flow table has one step eta ({etas[0]:g}); the claim needs two or more "
                "(tests/test_density_flow.py checks the trend on a tiny model)",
            ),
            rule,
        )
    slopes = []
    for _, g in part.groupby("seed"):
        med = g.groupby("eta").rel_error.median()
        slopes.append(float(np.polyfit(np.log(med.index.to_numpy()), np.log(med.to_numpy()), 1)[0]))
    interval = st.t_interval(slopes, ev.level)
    return Result(
        interval._replace(method=f"per-seed least-squares slope over {len(etas)} etas; {interval.method}"), rule
    )


def sufficient_conditions_sound(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (sufficient conditions): no condition holds while its conclusion fails.

    Count of soundness violations over rows (run, checkpoint, delta, test), by the channels stage's own
    definition and float tolerance (``lostmid.analysis.conditions.violations`` with the table's
    ``tolerance`` column): a sufficient test holding with its conclusion failing, or an equivalence
    disagreeing with its conclusion beyond the tolerance. Deterministic; rule: at most 0 violations.
    """
    t = inputs.conditions
    if "tolerance" in t:
        violations = len(soundness_violations(t.astype({"holds": bool, "conclusion_holds": bool}), t["tolerance"]))
        how = "by the channels stage's definition and tolerance"
    else:  # written before the tolerance column, by a stage that raised on any violation and then wrote nothing
        violations, how = (
            0,
            "none by construction: the table predates the tolerance column, and its stage wrote no table with one",
        )
    rule = dec.DecisionRule(
        "at_most", 0.0, ev.level, "the number of rows where a sufficient condition holds and its conclusion fails"
    )
    interval = deterministic(
        violations, len(t), f"count over rows of {t.seed.nunique()} seeds, {t.variant.nunique()} variants, {how}"
    )
    return Result(interval, rule, f"{int(t.holds.astype(bool).sum())} of {len(t)} rows have a condition holding")


def conditions_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    return [Setting(checkpoint="every checkpoint")]


# =========================================================================== paper: Algorithms 1-3 in training


def log_metric(
    inputs: Inputs, ev: EvidenceSettings, variant: str, s: Setting, step: int, column: str = "E_inf"
) -> pd.Series:
    """Per seed: the log of a metrics-table column (E_inf, Z) of ``variant`` at (L, depth) of ``s``, ``step`` and
    ``evidence.delta``.
    """
    m = inputs.metrics
    part = m[
        (m.variant == variant) & (m.L == s.L) & (m.depth == s.depth) & (m.step == step) & np.isclose(m.delta, ev.delta)
    ]
    if part.empty:
        raise NotRun(f"the metrics table has no rows for {variant} at delta {ev.delta:g} (evidence.delta), step {step}")
    if (part[column] <= 0).any() or not np.isfinite(part[column]).all():
        raise EvidenceError(f"{column} of {variant} at step {step} is not positive and finite")
    return np.log(part.set_index("seed")[column])


def _einf_ratio(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> tuple[st.Interval, int]:
    step = last_common_step(inputs.metrics, s)
    interval = st.paired_difference(
        log_metric(inputs, ev, s.variant, s, step),
        log_metric(inputs, ev, s.reference, s, step),
        st.t_interval,
        level=ev.level,
    )
    return interval._replace(
        method=f"per-seed log(E_inf remedy / E_inf baseline) at step {step}, delta {ev.delta:g}; {interval.method}"
    ), step


def balance_lowers_e_inf(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (Algorithm 1): balancing lowers E_inf against the baseline, paired by seed, at the
    last checkpoint both have. Rule: the log ratio is less than zero, margin ``log_ratio_margin``."""
    interval, _ = _einf_ratio(inputs, ev, s)
    return Result(
        interval,
        dec.DecisionRule("less_than_zero", ev.log_ratio_margin, ev.level, "log(E_inf Alg. 1 / E_inf baseline)"),
    )


def balance_keeps_accuracy(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (Algorithm 1): ... at comparable task accuracy: the paired difference of the evaluation
    accuracy at the last common checkpoint is equivalent to zero within ``accuracy_margin``."""
    acc = accuracy_per_checkpoint(inputs.failure)
    step = last_common_step(acc, s)
    per = {
        v: rows_of(acc, "failure", v, s.L, s.depth, step).set_index("seed").accuracy for v in (s.variant, s.reference)
    }
    interval = st.paired_difference(per[s.variant], per[s.reference], st.t_interval, level=ev.level)
    rule = dec.DecisionRule(
        "equivalent_to_zero", ev.accuracy_margin, ev.level, "the accuracy difference (Alg. 1 - baseline)"
    )
    return Result(interval._replace(method=f"per-seed evaluation accuracy at step {step}; {interval.method}"), rule)


def reweight_changes_profile_little(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper (Algorithm 2): reweighting changes the influence profile little: log(E_inf ratio)
    paired by seed, equivalent to zero within ``log_ratio_margin``."""
    interval, _ = _einf_ratio(inputs, ev, s)
    return Result(
        interval,
        dec.DecisionRule("equivalent_to_zero", ev.log_ratio_margin, ev.level, "log(E_inf Alg. 2 / E_inf baseline)"),
    )


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
    return Result(
        deterministic(value, 3, "min of two regional differences"),
        dec.DecisionRule("greater_than_zero", ev.algebraic_tolerance, ev.level, "min(left - right, right - middle)"),
    )


def algebraic_balance_e_inf_near_zero(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: Algorithm 1 reaches E_inf close to 0: at most ``einf_zero``."""
    return Result(
        deterministic(_row(inputs, "alg1").E_inf, 1, "E_inf of Alg. 1"),
        dec.DecisionRule("at_most", ev.einf_zero, ev.level, "E_inf of Alg. 1"),
    )


def algebraic_balance_z_grows(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: ... while Z grows: log(Z_alg1 / Z_baseline) greater than zero."""
    value = math.log(_row(inputs, "alg1").Z / _row(inputs, "baseline").Z)
    return Result(
        deterministic(value, 2, "log ratio of two totals"),
        dec.DecisionRule("greater_than_zero", ev.z_growth_margin, ev.level, "log(Z Alg. 1 / Z baseline)"),
    )


def algebraic_reweight_moves_little(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: Algorithm 2 moves the profile little: log(E_inf_alg2 / E_inf_baseline)
    within +- ``log_ratio_margin``."""
    value = math.log(_row(inputs, "alg2").E_inf / _row(inputs, "baseline").E_inf)
    return Result(
        deterministic(value, 2, "log ratio"),
        dec.DecisionRule("equivalent_to_zero", ev.log_ratio_margin, ev.level, "log(E_inf Alg. 2 / E_inf baseline)"),
    )


def observability_lowers_trace_imbalance(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: Algorithm 3 balances its trace surrogate: its trace imbalance is at most
    ``imbalance_ratio`` of the baseline's."""
    value = _row(inputs, "alg3").obs_imbalance / _row(inputs, "baseline").obs_imbalance
    return Result(
        deterministic(value, 2, "ratio of trace imbalances"),
        dec.DecisionRule("at_most", ev.imbalance_ratio, ev.level, "trace imbalance of Alg. 3 / baseline's"),
    )


def algebraic_observability_right_below_middle(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper Table 1: ... yet pushes the right region below the middle: LIM of Alg. 3 less than zero."""
    return Result(
        deterministic(_row(inputs, "alg3").LIM, 1, "LIM of Alg. 3"),
        dec.DecisionRule("less_than_zero", ev.algebraic_tolerance, ev.level, "LIM of Alg. 3"),
    )


def _probe_ratio(inputs: Inputs, column: str) -> tuple[float, str]:
    t = inputs.algebraic_probes.sort_values("n_probe")
    first, last = t.iloc[0], t.iloc[-1]
    value = abs(last[column]) / abs(first[column])
    return value, f"|{column}| at {int(last.n_probe)} probes / at {int(first.n_probe)} probe(s)"


def probe_bias_falls(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper section 4 (probes): the relative bias of the probe estimate falls with the probe count."""
    value, what = _probe_ratio(inputs, "rel_bias")
    return Result(deterministic(value, 2, what), dec.DecisionRule("at_most", ev.probe_ratio, ev.level, what))


def probe_spread_falls(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Result:
    """Paper section 4 (probes): the relative spread of the probe estimate falls with the probe count."""
    value, what = _probe_ratio(inputs, "rel_std")
    return Result(deterministic(value, 2, what), dec.DecisionRule("at_most", ev.probe_ratio, ev.level, what))
