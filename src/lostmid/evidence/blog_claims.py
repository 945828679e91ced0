"""The blog's claims (a)-(e): the mid-training position effect, the first token's influence at
initialization, the fit's checks and the fitted bias, and the bias-corrected model's speed and
position preference, one row per reading of the fix (bias variant); (a) and (e) read two more ways."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pandas as pd

from lostmid.evidence.decisions import interval_words
from lostmid.evidence.fit_checks import fit_not_evaluable, fit_rows, gate
from lostmid.evidence.inputs import Effects, Estimate, EvidenceError, Inputs, NotRun, Setting, pair_settings, runs_of
from lostmid.evidence.readings import (
    late_failure_per_seed,
    late_minus_early_failure_per_seed,
    matched_pair,
    mean_accuracy_at,
    mid_training_step,
    never_learns,
    not_reached,
    slopes_at,
    training_speed_per_seed,
)
from lostmid.evidence.settings import EvidenceSettings
from lostmid.stats import statistics as st

# The per-seed statistics read at a mid-training checkpoint, by the names claims.yaml gives them: the function,
# its words, and its name in a row's note.
AT_MID_TRAINING = {
    "slope": (slopes_at, "per-seed binomial logistic slope (Haldane +0.5)", "slopes at matched accuracy"),
    "late_minus_early": (
        late_minus_early_failure_per_seed,
        "per-seed failure rate on late flags (p > 1/2) minus early (p < 1/2)",
        "late minus early failure",
    ),
}


def at_mid_training(statistic: str, inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects | Estimate:
    """Blog (a) and (e), each by the logistic slope of failure on p (the binomial GLM logit(failure) = a + b p) or
    by the model-free late minus early failure rate (``AT_MID_TRAINING``), and the controls' arms: the per-seed
    ``statistic`` of the setting's variant at its own mid-training checkpoint (``mid_training_step``), and where the
    setting has a reference, of each arm at its *own* mid-training checkpoint, paired by seed (variant - reference:
    (e)'s "does not have the previous preference" at matched accuracy). An arm that never reaches that level has no
    mid-training checkpoint: the row is not evaluable (at an earlier step a model near chance is flat for the wrong
    reason)."""
    function, words, label = AT_MID_TRAINING[statistic]
    arms = []
    for v in (s.variant, s.reference) if s.reference else (s.variant,):
        step, best = mid_training_step(inputs.failure, v, s.L, s.depth, ev.mid_accuracy)
        if step is None:
            return not_reached(v, best, ev)
        arms.append((v, function(inputs.failure, v, s.L, s.depth, step), step, best))
    if len(arms) == 1:
        ((_, values, step, best),) = arms
        note = f"mid-training = first checkpoint with mean accuracy >= {ev.mid_accuracy:g} (best {best:.3f})"
        return Effects((values.to_numpy(),), f"{words} at step {step}", note)
    each = ", ".join(
        f"{v} {y.mean():.3g} at step {t} (mean accuracy {mean_accuracy_at(inputs.failure, v, s.L, s.depth, t):.3f})"
        for v, y, t, _ in arms
    )
    return Effects(tuple(y for _, y, _, _ in arms), f"{words}, each arm at its own mid-training", f"{label}: {each}")


# =========================================================================== blog (a): failure rises with position


def baseline_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = []
    for name in inputs.of_kind("none"):
        for L, depth in runs_of(inputs.failure, name):
            step, best = mid_training_step(inputs.failure, name, L, depth, ev.mid_accuracy)
            checkpoint = f"step {step} (mid-training)" if step is not None else "mid-training not reached"
            found.append(Setting(name, L, depth, inputs.residual(name), checkpoint))
    return NotRun.unless(found, "no variant without a remedy in the failure table")


# ======================================================================= blog (b): influence at init grows with depth


def init_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    sweep = inputs.init_sweep
    depths = sorted(sweep[~sweep.residual.astype(bool)].depth.unique())
    if ev.init_depth not in depths or 1 not in depths:
        raise NotRun(
            f"the init sweep without the residual path has depths {depths}; the claim needs 1 and "
            f"evidence.init_depth = {ev.init_depth}"
        )
    return [Setting(residual=False, depth=ev.init_depth, checkpoint="initialization", L=int(sweep.position.max()))]


def _first_over_last(sweep: pd.DataFrame, column: str, depth: int) -> pd.Series:
    """Per init seed: log10 of column(position 1) / column(position L), no residual path, at ``depth``."""
    part = sweep[(~sweep.residual.astype(bool)) & (sweep.depth == depth)]
    L = part.position.max()
    first = part[part.position == 1].set_index("seed")[column]
    last = part[part.position == L].set_index("seed")[column]
    ratio = first / last
    if not (np.isfinite(ratio).all() and (ratio > 0).all()):
        raise EvidenceError(
            f"the init sweep's {column} at depth {depth} is not positive and finite at positions 1 and L"
        )
    return np.log10(ratio)


def first_token_grows_with_depth(column: str, power: int, inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Blog (b): without the residual path, at initialization, the first token's ``column`` over the last token's
    grows with depth: the output-Jacobian norm E||d logits_L / d x_j|| (power 1, the blog's own measure), or the
    squared loss-gradient density m_j (power 2, ours)."""
    sweep = inputs.init_sweep
    deep = _first_over_last(sweep, column, ev.init_depth)
    shallow = _first_over_last(sweep, column, 1)
    at_depth = float(deep.mean())
    blog = ev.blog_init_orders * (2 if power == 2 else 1)
    note = (
        f"first/last at depth {ev.init_depth}: 10^{at_depth:.1f} (geometric mean over {deep.size} init seeds; "
        f"depth 1: 10^{float(shallow.mean()):.1f}); blog: ~10^{ev.blog_init_orders:g} after 4 layers in its power-1 "
        f"measure"
        + (f" (~10^{blog:g} squared)" if power == 2 else "")
        + f"; here L = {int(sweep.position.max())}, d = {inputs.model.get('d_model', '?')}"
    )
    return Effects((deep, shallow), f"per init seed, log10 ratio at depth {ev.init_depth} minus at depth 1", note)


# ===================================================================== blog (c): the fitted bias weights later tokens


def bias_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    keys = [k for k in inputs.bias_matrix.columns if k not in ("query", "key", "bias")]
    found = []
    for group, _ in inputs.bias_matrix.groupby(keys, sort=True):
        values = dict(zip(keys, group if isinstance(group, tuple) else (group,)))
        variant = values.get("variant")
        if variant in inputs.variants and inputs.remedy(variant) == "control":
            continue  # a control's B is built, not fitted: lostmid.evidence.mechanism_claims
        residual = values.get("residual", inputs.residual(variant) if variant in inputs.variants else None)
        L, depth, residual = int(values["L"]), int(values["depth"]), None if residual is None else bool(residual)
        why = fit_not_evaluable(inputs, ev, variant, L, depth)
        found.append(
            Setting(variant, L, depth, residual, "initialization (fitted B)", reading=variant, not_evaluable=why)
        )
    return found


class BiasShape(NamedTuple):
    """The fitted B by lag k = query - key: c(k), the mean bias of the keys k positions back."""

    by_lag: pd.Series  # c(k), k = 0..L-1
    slope: float  # least-squares slope of c(k) over k >= 1 (negative: recent keys weighted more)
    fall: float  # -slope * (L - 2): the fitted line's fall from the nearest key (k = 1) to the farthest (k = L-1)
    c0: float  # mean diagonal bias minus the mean bias over lags >= 1 (queries 2..L)


def bias_shape(matrix: pd.DataFrame) -> BiasShape:
    """c(k) of a fitted B in long format (1-based query, key), its recency slope over lags >= 1 with
    the diagonal left out, and the diagonal's excess c(0) reported apart."""
    lag = matrix["query"] - matrix["key"]
    by_lag = matrix.bias.groupby(lag).mean().astype(np.float64)
    later = by_lag[by_lag.index >= 1]
    if later.size < 2:
        raise NotRun(f"the bias matrix has {later.size} lag(s) >= 1; a slope needs two (L >= 3)")
    lags = later.index.to_numpy(np.float64)
    slope = float(np.polyfit(lags, later.to_numpy(), 1)[0])
    c0 = float(matrix.bias[(lag == 0) & (matrix["query"] >= 2)].mean() - matrix.bias[lag >= 1].mean())
    return BiasShape(by_lag, slope, -slope * float(lags.max() - lags.min()), c0)


def fitted_bias_weights_recent_keys(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Blog (c): the fitted bias "weights later tokens much more".

    Deterministic (one fitted B): c(k), the mean bias of the keys k positions back, and the
    least-squares line of c(k) over the lags k >= 1; the statistic is that line's fall from the
    nearest key (k = 1) to the farthest (k = L - 1), in logits. The diagonal (k = 0, a query's
    attention to itself) is left out: a self-attention spike is not a preference among the other
    tokens; c(0) is reported apart in the note, with the attention a query pays itself at
    initialization (from bias_fit_summary).
    """
    matrix = inputs.bias_matrix[(inputs.bias_matrix.L == s.L) & (inputs.bias_matrix.depth == s.depth)]
    if s.variant is not None and "variant" in matrix:
        matrix = matrix[matrix.variant == s.variant]
    if s.residual is not None and "residual" in matrix:
        matrix = matrix[matrix.residual.astype(bool) == s.residual]
    shape = bias_shape(matrix)
    far = int(shape.by_lag.index.max())
    near = ", ".join(f"{v:.3g}" for v in shape.by_lag.loc[1:3])
    note = (
        f"lag slope {shape.slope:.3g} logit per lag; c(1..3) = {near}, c({far}) = {shape.by_lag.loc[far]:.3g}; "
        f"c(0) apart: the diagonal exceeds the lags >= 1 by {shape.c0:.3g}"
    )
    if s.variant is not None and inputs.bias_summary is not None:
        try:
            first = fit_rows(inputs, s).iloc[0]
            note += (
                f"; attention a query pays itself at init {first.self_attention_init:.3g} with B, "
                f"{first.self_attention_init_b0:.3g} at B = 0"
            )
        except NotRun:
            pass
    words = "one fitted B; least-squares line of c(k) over the lags k >= 1"
    return Effects((shape.fall, int(shape.by_lag.size) - 1, words), note=note)


# =========================================================================== blog (d), (e): the bias-corrected model


def debiased_speed_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    found = []
    for s in pair_settings("bias", "failure", "steps 0 to the last common checkpoint", inputs, ev):
        why = (
            None
            if s.missing
            else gate(fit_not_evaluable(inputs, ev, s.variant, s.L, s.depth, trained=True), never_learns(inputs, ev, s))
        )
        found.append(replace(s, reading=s.variant, not_evaluable=why))
    return found


def debiased_trains_faster(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Blog (d), with (e)'s second half: the bias-corrected model trains faster than its baseline,
    and recalls the late flags "even when the naive one was still confused"; the controls' arms against their
    baseline or the literal reading alike (the setting's variant against its reference).

    Per seed: the area under the failure curve (evaluation failure pooled over positions,
    trapezoid over the checkpoints from step 0 to the last checkpoint both variants have,
    divided by the span: the mean failure over training), paired by seed (debiased - baseline).

    (e)'s second half, the paired failure rate on late flags (p > 1/2) at the baseline's
    mid-training checkpoint, measures the same thing at one checkpoint (a variant still at chance
    there fails half of them: slowness), so it is reported in this row's note, not as a finding
    of its own.
    """
    debiased, baseline, horizon = training_speed_per_seed(inputs.failure, s)
    note = f"mean failure over training: {s.variant} {debiased.mean():.3f}, {s.reference} {baseline.mean():.3f}"
    step, _ = mid_training_step(inputs.failure, s.reference, s.L, s.depth, ev.mid_accuracy)
    if step is not None:
        late = [late_failure_per_seed(inputs.failure, v, s.L, s.depth, step) for v in (s.variant, s.reference)]
        diff = st.paired_difference(*late, st.t_interval, level=ev.level)
        note += (
            f"; (e)'s second half, the same slowness at one checkpoint: failure on late flags (p > 1/2) at "
            f"step {step} ({s.reference}'s mid-training), {s.variant} - {s.reference} {interval_words(diff)} over "
            f"{diff.n} seeds ({s.variant} {late[0].mean():.3f}, {s.reference} {late[1].mean():.3f})"
        )
    method = f"per-seed area under the failure curve, steps 0-{horizon}, divided by the span"
    return Effects((debiased, baseline), method, note)


def debiased_preference_settings(interpolated: bool, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """(e)'s settings: every bias variant against its reference, each at its own mid-training, or (``interpolated``)
    at matched accuracy by interpolation rather than at a checkpoint."""
    found = []
    for s in pair_settings("bias", "failure", "", inputs, ev):
        checkpoint, why = "each at its own mid-training", None
        if s.missing is None and interpolated:
            checkpoint = f"matched accuracy {ev.mid_accuracy:g}, interpolated between checkpoints"
            why = fit_not_evaluable(inputs, ev, s.variant, s.L, s.depth, trained=True)
        elif s.missing is None:
            arms = (s.variant, s.reference)
            steps = [mid_training_step(inputs.failure, v, s.L, s.depth, ev.mid_accuracy)[0] for v in arms]
            unreached = " and ".join(v for v, t in zip(arms, steps) if t is None)
            checkpoint = (
                f"step {steps[0]} vs step {steps[1]} (each at its own mid-training)"
                if not unreached
                else f"mid-training not reached by {unreached}"
            )
            why = fit_not_evaluable(inputs, ev, s.variant, s.L, s.depth, trained=True)
        found.append(replace(s, checkpoint=checkpoint, reading=s.variant, not_evaluable=why))
    return found


# ============================================= (e) at matched accuracy by interpolation (estimator robustness)
# The arms compared at one accuracy by interpolating between checkpoints (``readings.at_matched_accuracy``), so that
# a verdict does not rest on the checkpoint grid (the model-free statistic, ``at_mid_training``, is the other way).


def debiased_has_less_position_preference_interpolated(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Blog (e) at matched accuracy by interpolation (``at_matched_accuracy``): per seed, each arm's logistic
    slope where its own accuracy crosses ``mid_accuracy``, paired (debiased - baseline). The note gives the
    accuracy gap the checkpoint reading (debiased_has_less_position_preference) leaves, which this one removes."""
    arms = matched_pair(inputs, ev, s, lambda v, step: slopes_at(inputs.failure, v, s.L, s.depth, step))
    gaps = []
    for variant in (s.variant, s.reference):
        step, _ = mid_training_step(inputs.failure, variant, s.L, s.depth, ev.mid_accuracy)
        gaps.append(mean_accuracy_at(inputs.failure, variant, s.L, s.depth, step) if step is not None else math.nan)
    method = f"per-seed logistic slope interpolated to the seed's accuracy {ev.mid_accuracy:g}"
    note = (
        "; ".join(words for _, words in arms)
        + f"; the checkpoint reading compares mean accuracies {gaps[0]:.3f} and {gaps[1]:.3f} "
        f"(gap {gaps[0] - gaps[1]:+.3f}); interpolated, the gap is 0 by construction"
    )
    return Effects(tuple(values for values, _ in arms), method, note)
