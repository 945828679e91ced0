"""The paper's claims: the structural baseline, the density flow, the soundness of the sufficient
conditions, Algorithms 1-3 on trained runs, and the algebraic simulations (Table 1, probes)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lostmid.analysis.conditions import violations as soundness_violations
from lostmid.evidence.inputs import (
    NOT_RUN,
    Effects,
    Estimate,
    EvidenceError,
    Inputs,
    NotRun,
    Setting,
    last_common_step,
    no_estimate,
    rows_of,
)
from lostmid.evidence.settings import EvidenceSettings


def one_setting(checkpoint: str | None, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """The one setting of a claim on a table that is not per run (a closed form, a simulation, a count over rows)."""
    return [Setting(checkpoint=checkpoint)]


def structural_baseline_matches_closed_form(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Paper (structural baseline): the measured density of uniform attention with identity maps
    equals the closed form m_j ~ ((N^M)_{L,j})^2. Statistic: the largest |measured - closed form|
    divided by the largest closed-form density of its (residual, L, depth, layer) profile."""
    table = inputs.structural
    worst = 0.0
    groups = table.groupby(["residual", "L", "depth", "layer"])
    for _, part in groups:
        scale = part.closed_form.abs().max()
        worst = max(worst, float((part.measured - part.closed_form).abs().max() / scale))
    return Effects((worst, groups.ngroups, "max over residual, L, depth and layer profiles"))


def flow_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    table = inputs.density_flow
    return [
        Setting(str(v), int(L), int(d), inputs.residual(str(v)), "every checkpoint")
        for (v, L, d), _ in table.groupby(["variant", "L", "depth"], sort=True)
    ]


def density_flow_matches_finite_difference(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Paper (density flow, eq. 69): the predicted d_s m matches one finite gradient step. Per seed: the median
    relative error over positions and checkpoints, at the smallest step eta in the table."""
    part = rows_of(inputs.density_flow, "density-flow", s.variant, s.L, s.depth)
    part = part[part.eta == part.eta.min()]
    per_seed = part.groupby("seed").rel_error.median()
    if (per_seed <= 0).any():
        raise EvidenceError("a density-flow relative error is not positive")
    return Effects((per_seed.to_numpy(),), f"per-seed median over positions and checkpoints (eta {part.eta.min():g})")


def density_flow_error_falls_with_step(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects | Estimate:
    """Paper (density flow): the finite-difference error falls with the step eta (first order: slope 1). Per
    seed: the slope of log(median relative error) on log(eta) over the etas in the table."""
    part = rows_of(inputs.density_flow, "density-flow", s.variant, s.L, s.depth)
    etas = sorted(part.eta.unique())
    if len(etas) < 2:
        return no_estimate(
            NOT_RUN,
            f"the density-flow table has one step eta ({etas[0]:g}); the claim needs two or more "
            "(tests/test_density_flow.py checks the trend on a tiny model)",
        )
    slopes = []
    for _, g in part.groupby("seed"):
        med = g.groupby("eta").rel_error.median()
        slopes.append(float(np.polyfit(np.log(med.index.to_numpy()), np.log(med.to_numpy()), 1)[0]))
    return Effects((slopes,), f"per-seed least-squares slope over {len(etas)} etas")


def sufficient_conditions_sound(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Paper (sufficient conditions): no condition holds while its conclusion fails. The count of soundness
    violations over rows (run, checkpoint, delta, test), by the channels stage's own definition and float
    tolerance (``lostmid.analysis.conditions.violations`` with the table's ``tolerance`` column)."""
    t = inputs.conditions
    if "tolerance" in t:
        violations = len(soundness_violations(t.astype({"holds": bool, "conclusion_holds": bool}), t["tolerance"]))
        how = "by the channels stage's definition and tolerance"
    else:  # written before the tolerance column, by a stage that raised on any violation and then wrote nothing
        violations, how = (
            0,
            "none by construction: the table predates the tolerance column, and its stage wrote no table with one",
        )
    return Effects(
        (violations, len(t), f"count over rows of {t.seed.nunique()} seeds, {t.variant.nunique()} variants, {how}"),
        note=f"{int(t.holds.astype(bool).sum())} of {len(t)} rows have a condition holding",
    )


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


def e_inf_ratio(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Paper (Algorithms 1 and 2): log(E_inf remedy / E_inf baseline), paired by seed, at the last checkpoint both
    have (balancing lowers it; reweighting changes it little)."""
    step = last_common_step(inputs.metrics, s)
    return Effects(
        (log_metric(inputs, ev, s.variant, s, step), log_metric(inputs, ev, s.reference, s, step)),
        f"per-seed log(E_inf remedy / E_inf baseline) at step {step}, delta {ev.delta:g}",
    )


# =========================================================================== paper section 4: the algebraic simulations


def _row(inputs: Inputs, method: str) -> pd.Series:
    t = inputs.algebraic_table
    rows = t[t.method == method]
    if len(rows) != 1:
        raise EvidenceError(f"the algebraic table has {len(rows)} rows for method {method!r}, expected 1")
    return rows.iloc[0]


def algebraic_baseline_left_right_middle(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Paper Table 1: the baseline's regional densities order left > right > middle.
    Statistic: min(left - right, right - middle); rule: greater than zero."""
    b = _row(inputs, "baseline")
    value = min(b.left - b.right, b.right - b.middle)
    return Effects((value, 3, "min of two regional differences"))


def algebraic_value(method: str, column: str, words: str, inputs: Inputs, ev: EvidenceSettings, s: Setting):
    """Paper Table 1: one value, ``column`` of the row of ``method`` (E_inf of Algorithm 1 close to 0, LIM of
    Algorithm 3 below 0)."""
    return Effects((_row(inputs, method)[column], 1, words))


def algebraic_ratio(method: str, column: str, log: bool, words: str, inputs: Inputs, ev: EvidenceSettings, s: Setting):
    """Paper Table 1: ``column`` of ``method`` over the baseline's, or its log with ``log`` (Algorithm 1's Z grows,
    Algorithm 2 moves E_inf little, Algorithm 3 lowers its trace imbalance)."""
    ratio = _row(inputs, method)[column] / _row(inputs, "baseline")[column]
    return Effects((math.log(ratio) if log else ratio, 2, words))


def probe_ratio_falls(column: str, inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Paper section 4 (probes): the relative bias (``rel_bias``) or spread (``rel_std``) of the probe estimate
    falls with the probe count: its value at the largest count over that at the smallest."""
    t = inputs.algebraic_probes.sort_values("n_probe")
    first, last = t.iloc[0], t.iloc[-1]
    what = f"|{column}| at {int(last.n_probe)} probes / at {int(first.n_probe)} probe(s)"
    return Effects((abs(last[column]) / abs(first[column]), 2, what), terms={"what": what})
