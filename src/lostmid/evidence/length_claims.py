"""The claims of the sequence-length study (docs/length.md): the blog's "thermodynamic limit".

The blog: without the fix, "every token talks to every other token, and thus bad things happen ...
when we try to take the thermodynamic limit of long sequences"; the fix gives "a system that now
has a sensible thermodynamic limit" ("screening"); B "can be computed once and for all explicitly
for a given architecture". Read here as:

- at initialization, the baseline's imbalance grows with L: the per-seed slope of log10 first/last
  (the blog's output-Jacobian measure, and the squared loss-gradient density) on log2 L, whose null
  for a profile of fixed shape is 0 (``lostmid.tables.length``); E_inf and the last position's share
  are reported beside it with their own nulls;
- with the B fitted at each L, that slope is at most the margin (the "sensible limit"), in the fit
  network and with B inserted into the residual model; only where every fit passed its held-out check;
- the distance-form B fitted at a short L, carried to longer L, is within a factor of the B fitted
  there ("once and for all"), and at least lowers the imbalance where no fit was run;
- trained, the baseline's position effect (a) and the fix's effect (e) grow with L (the difference
  between the longest and the shortest L, Welch), and (e)'s model-free reading at every L.

Trained arms at several L are variants named ``<arm>_L<n>`` beside ``<arm>`` (config/length.yaml): the arm is the
name without that suffix.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd

from lostmid.evidence.fit_checks import fit_not_evaluable
from lostmid.evidence.inputs import Effects, Inputs, NotEvaluable, NotRun, Setting, runs_of
from lostmid.evidence.readings import late_minus_early_failure_per_seed, mid_training_step, paired, slopes_at
from lostmid.evidence.settings import EvidenceSettings
from lostmid.tables.length import slopes_per_unit, statistics_table

MEASURES = {"output_jacobian": "E||d logits_L/d x_j|| (the blog's measure)", "density": "the loss-gradient density"}


# =========================================================================== at initialization


def init_length_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    table = inputs.length_init
    lengths = sorted(table.L.unique())
    words = f"initialization, L {lengths[0]}-{lengths[-1]} ({len(lengths)} lengths)"
    return [
        Setting(residual=bool(residual), depth=int(depth), checkpoint=words)
        for residual, depth in sorted({(bool(r), int(d)) for r, d in zip(table.residual, table.depth)})
    ]


def _by_length(stats: pd.DataFrame, statistic: str) -> str:
    means = stats.groupby("L")[statistic].mean()
    return ", ".join(f"L {L}: {value:.3g}" for L, value in means.items())


def _slope_estimate(stats: pd.DataFrame, unit: str, statistic: str, ev, what: str) -> Effects:
    slopes = slopes_per_unit(stats, unit, statistic)
    if not np.isfinite(slopes).all():
        raise NotEvaluable(f"{statistic} is not finite at some L (a zero profile value)")
    method = f"per {what}, least-squares slope on log2 L over {stats.L.nunique()} lengths"
    return Effects((slopes.to_numpy(),), method, f"mean {statistic} by L: {_by_length(stats, statistic)}")


def _init_rows(inputs: Inputs, s: Setting, column: str) -> pd.DataFrame:
    stats = statistics_table(inputs.length_init, ["residual", "depth", "seed", "L"], column)
    return stats[(stats.residual == s.residual) & (stats.depth == s.depth)]


def init_growth(column: str, statistic: str, inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """At initialization, the per-seed slope on log2 L of a ``statistic`` of the ``column`` profile
    (``lostmid.tables.length``). The blog's thermodynamic limit: log10 first/last of the output-Jacobian norm
    (its own measure) or of the squared loss-gradient density grows with L; null for a profile of fixed shape:
    slope 0 (a claim of growth has a size: a fixed shape on the discrete grid p = (i - 1/2)/L already drifts by
    ~0.04 at L 8-64). Beside the decision: log2 E_inf, and log2 (L x the last position's share), whose null is 0
    for a fixed shape and ~1 for a spike on the last position (E_inf = L - 1)."""
    return _slope_estimate(_init_rows(inputs, s, column), "seed", statistic, ev, "init seed")


# =========================================================================== the fitted B at every L


def fit_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    table, fits = inputs.length_fit, inputs.length_fits
    found = []
    for param in ("full", "distance"):
        lengths = sorted(fits.L[fits.param == param].unique())
        if len(lengths) < 2:
            continue
        rejected = sorted(int(L) for L in fits.L[(fits.param == param) & ~fits.accepted.astype(bool)].unique())
        why = (
            f"the {param}-form fit did not flatten the held-out profile at L {rejected} (its check)"
            if rejected
            else None
        )
        for residual in sorted(table.residual.astype(bool).unique()):
            where = "in the fit network (no residual path)" if not residual else "inserted into the residual model"
            words = f"initialization, {param}-form B fitted at each L {lengths[0]}-{lengths[-1]}, {where}"
            depth = int(table.depth.iloc[0])
            found.append(Setting(None, None, depth, bool(residual), words, reading=param, not_evaluable=why))
    return NotRun.unless(found, "the length study fitted B at fewer than 2 lengths")


def fit_statistics(inputs: Inputs, s: Setting, bias: str) -> pd.DataFrame:
    table = inputs.length_fit
    part = table[(table.residual.astype(bool) == s.residual) & (table.bias == bias)]
    return statistics_table(part, ["heldout_init", "L"], "output_jacobian")


def fitted_bias_keeps_first_last_bounded(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """The fix's "sensible thermodynamic limit": with the B fitted at each L, log10 first/last of the
    output-Jacobian profile on the fit's held-out initializations grows by at most the margin per
    doubling (the baseline claim's margin). The B = 0 slope of the same initializations is in the note."""
    fitted = fit_statistics(inputs, s, s.reading)
    result = _slope_estimate(fitted, "heldout_init", "log10_first_last", ev, "held-out initialization")
    plain = fit_statistics(inputs, s, "none")
    plain = plain[plain.L.isin(fitted.L.unique())]
    before = slopes_per_unit(plain, "heldout_init", "log10_first_last")
    e_inf = fitted.groupby("L").log2_E_inf.mean().rpow(2)
    note = (
        f"{result.note}; B = 0 on the same initializations: slope {before.mean():.3g}, by L: "
        f"{_by_length(plain, 'log10_first_last')}; E_inf with B by L: "
        + ", ".join(f"L {L}: {v:.3g}" for L, v in e_inf.items())
    )
    return replace(result, note=note)


def carried_settings(local_only: bool, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """Every longer L the B was carried to (``local_only``: those where a distance-form B was fitted too)."""
    table = inputs.length_fit
    carried = table[table.bias == "carried"]
    if carried.empty:
        raise NotRun("the length study carried no B to a longer L")
    source = int(carried.fitted_at.iloc[0])
    lengths = set(carried.L) & set(table.L[table.bias == "distance"]) if local_only else set(carried.L)
    words, depth = f"initialization, distance-form B fitted at L {source}", int(table.depth.iloc[0])
    return [
        Setting(None, int(L), depth, bool(residual), words, reading="distance")
        for L in sorted(lengths)
        for residual in sorted(carried.residual.astype(bool).unique())
    ]


def _log_e_inf(inputs: Inputs, s: Setting, bias: str) -> pd.Series:
    stats = fit_statistics(inputs, s, bias)
    part = stats[stats.L == s.L]
    if part.empty:
        raise NotRun(f"no {bias} B at L {s.L}")
    return (part.set_index("heldout_init").log2_E_inf * math.log(2)).astype(np.float64)


def carried_against(other: str, inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """log(E_inf with the carried B / E_inf with ``other``), paired by held-out initialization. "Once and for all"
    (``other`` distance: the B fitted at this L): at a longer L, the distance-form B fitted at the short L is within
    a factor exp(``log_ratio_margin``) of the one fitted there; and it still does what it is for (``other`` none:
    B = 0): it lowers the imbalance."""
    carried, reference = _log_e_inf(inputs, s, "carried"), _log_e_inf(inputs, s, other)
    shown = "fitted here" if other == "distance" else "B = 0"
    note = f"E_inf: carried {np.exp(carried).mean():.3g}, {shown} {np.exp(reference).mean():.3g}"
    return Effects((carried, reference), "per held-out initialization", note)


# =========================================================================== trained


def arm(variant: str) -> str:
    """The arm of a variant: its name without an ``_L<n>`` suffix (config/length.yaml)."""
    return re.sub(r"_L\d+$", "", variant)


def trained_growth_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    if inputs.failure is None:
        raise NotRun("no failure table")
    found = []
    by_arm: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for variant in inputs.of_kind("none"):
        for L, depth in runs_of(inputs.failure, variant):
            by_arm.setdefault((arm(variant), depth), []).append((L, variant))
    for (_arm, depth), runs in sorted(by_arm.items()):
        if len({L for L, _ in runs}) >= 2:
            (short_L, short), (long_L, long) = min(runs), max(runs)
            words = f"L {long_L} against L {short_L}, each at its own mid-training"
            found.append(Setting(long, long_L, depth, inputs.residual(long), words, short))
    return NotRun.unless(found, "no baseline arm trained at two or more lengths")


def _at_mid(inputs: Inputs, ev: EvidenceSettings, variant: str, L: int, depth: int, per_seed=slopes_at) -> pd.Series:
    """``per_seed(failure, variant, L, depth, step)`` at the variant's own mid-training (not evaluable: never)."""
    step, best = mid_training_step(inputs.failure, variant, L, depth, ev.mid_accuracy)
    if step is None:
        raise NotEvaluable(f"{variant} at L {L} never reached mid-training (best {best:.3f})")
    return per_seed(inputs.failure, variant, L, depth, step)


def _short_L(s: Setting) -> int:
    return int(re.search(r"against L (\d+)", s.checkpoint).group(1))


def _bias_arm(inputs: Inputs, baseline: str, L: int, depth: int) -> str:
    """The one bias variant paired with ``baseline`` at (L, depth): (e)'s arm of the growth claims."""
    candidates = (v for v in inputs.of_kind("bias") if inputs.reference(v) == baseline)
    fixed = sorted(v for v in candidates if (L, depth) in runs_of(inputs.failure, v))
    if not fixed:
        raise NotRun(f"no bias variant paired with {baseline} at L {L}")
    if len(fixed) > 1:
        raise NotEvaluable(f"{len(fixed)} bias variants pair with {baseline} at L {L} ({', '.join(fixed)})")
    return fixed[0]


def _fix_effect(inputs: Inputs, ev: EvidenceSettings, variant: str, baseline: str, L: int, depth: int, per_seed):
    """(e)'s per-seed paired effect (the bias arm ``variant`` minus its ``baseline``), each at its own
    mid-training, with ``per_seed(failure, variant, L, depth, step)``. Not evaluable when the arm's fit did
    not do what it is for (``fit_not_evaluable``; ``evidence.length_gate: none``, the rule as first
    written, skips this)."""
    if ev.length_gate == "fit_checks":
        why = fit_not_evaluable(inputs, ev, variant, L, depth, trained=True)
        if why:
            raise NotEvaluable(f"{variant} at L {L}: {why}")
    return paired(*(_at_mid(inputs, ev, v, L, depth, per_seed) for v in (variant, baseline)))


def grows_with_length(effect: str, inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Trained, the longest L against the shortest (Welch; seeds are independent runs at each L): the baseline's
    position effect (``effect`` "(a) slope": the logistic slope of failure on p at mid-training) is larger, or the
    interaction, (e)'s effect (``effect`` "(e) effect": debiased - baseline slope, each at its own mid-training) is
    more negative (the fix matters more as L grows)."""

    def at(baseline: str, L: int) -> pd.Series:
        if effect == "(a) slope":
            return _at_mid(inputs, ev, baseline, L, s.depth)
        return _fix_effect(inputs, ev, _bias_arm(inputs, baseline, L, s.depth), baseline, L, s.depth, slopes_at)

    short_L = _short_L(s)
    long, short = at(s.variant, s.L), at(s.reference, short_L)
    return Effects((long, short), note=f"{effect}: {long.mean():.3g} at L {s.L}, {short.mean():.3g} at L {short_L}")


def model_free_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = [
        Setting(v, L, depth, inputs.residual(v), "each at its own mid-training", inputs.reference(v))
        for v in inputs.of_kind("bias")
        if inputs.reference(v) is not None
        for L, depth in runs_of(inputs.failure, v)
    ]
    return NotRun.unless(found, "no bias variant with a reference in the failure table")


def fix_lowers_model_free_preference(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """(e), model-free, at every L: the paired difference (debiased - baseline) of the late-minus-early
    failure rate, each at its own mid-training."""
    effect = _fix_effect(inputs, ev, s.variant, s.reference, s.L, s.depth, late_minus_early_failure_per_seed)
    return Effects((effect.to_numpy(),), "paired by seed")
