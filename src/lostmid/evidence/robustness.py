"""The blog's (a) and (e) read two more ways, so that a verdict does not rest on one estimator or on the
checkpoint grid: with the model-free statistic (late minus early failure per seed), and with the arms
compared at one accuracy by interpolating between checkpoints (``at_matched_accuracy``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from lostmid.evidence.blog_claims import (
    debiased_preference_settings,
)
from lostmid.evidence.inputs import Effects, Estimate, Inputs, NotRun, Setting, rows_of
from lostmid.evidence.readings import (
    late_minus_early_failure_per_seed,
    mean_accuracy_at,
    mid_training_step,
    not_reached,
    slopes_at,
)
from lostmid.evidence.settings import EvidenceSettings
from lostmid.tables.summaries import accuracy_per_checkpoint

# ============================================= blog (a) and (e) with the model-free statistic (estimator robustness)


def failure_rises_with_position_model_free(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects | Estimate:
    """Blog (a) with the model-free statistic: per seed, the failure rate on late flags minus that on
    early flags (``late_minus_early_failure_per_seed``) at the mid-training checkpoint; Student t over
    seeds. Rule: greater than zero, margin ``preference_margin``. Read beside the logistic-slope row
    (``Claim.beside``): the note gives its verdict and says whether the two differ."""
    step, best = mid_training_step(inputs.failure, s.variant, s.L, s.depth, ev.mid_accuracy)
    if step is None:
        return not_reached(s.variant, best, ev)
    values = late_minus_early_failure_per_seed(inputs.failure, s.variant, s.L, s.depth, step)
    return Effects(
        (values.to_numpy(),), f"per-seed failure rate on late flags (p > 1/2) minus early (p < 1/2) at step {step}"
    )


def debiased_has_less_position_preference_model_free(
    inputs: Inputs, ev: EvidenceSettings, s: Setting
) -> Effects | Estimate:
    """Blog (e) with the model-free statistic: the paired difference (debiased - baseline) of the
    late minus early failure rate, each arm at its own mid-training checkpoint; Student t. Rule: less
    than zero, margin ``preference_margin``. Read beside the logistic-slope row (``Claim.beside``)."""
    values = []
    for variant in (s.variant, s.reference):
        step, best = mid_training_step(inputs.failure, variant, s.L, s.depth, ev.mid_accuracy)
        if step is None:
            return not_reached(variant, best, ev)
        values.append(late_minus_early_failure_per_seed(inputs.failure, variant, s.L, s.depth, step))
    return Effects(
        tuple(values), "per-seed late (p > 1/2) minus early (p < 1/2) failure rate, each arm at its own mid-training"
    )


# ========================================== matched accuracy by interpolation between checkpoints


def at_matched_accuracy(
    failure: pd.DataFrame, variant: str, L: int, depth: int, level: float, value_at: Callable[[int], pd.Series]
) -> tuple[pd.Series, str]:
    """Per seed, a statistic at the point where the seed's own evaluation accuracy first reaches
    ``level``: between the last checkpoint below it (t0, accuracy a0) and the first at or above it (t1,
    a1), the statistic is interpolated linearly with weight w = (level - a0) / (a1 - a0), so that by
    linear interpolation every seed of every arm is compared at the same accuracy. ``value_at(step)`` is
    the per-seed statistic at a checkpoint. Seeds that never reach ``level`` are left out, and the
    words say how many, with the arm's mean crossing step."""
    accuracy = rows_of(accuracy_per_checkpoint(failure), "failure", variant, L, depth).pivot(
        index="seed", columns="step", values="accuracy"
    )
    steps = sorted(accuracy.columns)
    cached: dict[int, pd.Series] = {}

    def value(step: int, seed: int) -> float:
        if step not in cached:
            cached[step] = value_at(step)
        return float(cached[step].loc[seed])

    found, crossings = {}, []
    for seed, row in accuracy.iterrows():
        after = [i for i, t in enumerate(steps) if t > 0 and row[t] >= level]
        if not after:
            continue
        i = after[0]
        t0, t1 = steps[i - 1], steps[i]
        w = min(1.0, max(0.0, (level - row[t0]) / (row[t1] - row[t0]))) if row[t1] > row[t0] else 1.0
        found[seed] = (1 - w) * value(t0, seed) + w * value(t1, seed)
        crossings.append(t0 + w * (t1 - t0))
    if not found:
        raise NotRun(f"no seed of {variant} reaches the accuracy {level:g}")
    left_out = len(accuracy) - len(found)
    words = f"{variant} crosses accuracy {level:g} at step {np.mean(crossings):.0f} on average" + (
        f" ({left_out} seed{'s' if left_out > 1 else ''} never do, left out)" if left_out else ""
    )
    return pd.Series(found, dtype=np.float64).sort_index(), words


def interpolated_preference_settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """(e)'s settings, each read at matched accuracy by interpolation rather than at a checkpoint."""
    return [
        s
        if s.missing
        else replace(s, checkpoint=f"matched accuracy {ev.mid_accuracy:g}, interpolated between checkpoints")
        for s in debiased_preference_settings(inputs, ev)
    ]


def debiased_has_less_position_preference_interpolated(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Blog (e) at matched accuracy by interpolation (``at_matched_accuracy``): per seed, each arm's
    logistic slope where its own accuracy crosses ``mid_accuracy``; paired difference (debiased -
    baseline), Student t. Rule: less than zero, margin ``slope_margin``. The note gives the accuracy gap
    the checkpoint reading (debiased_has_less_position_preference) leaves, which this one removes."""
    per_arm, words, gaps = [], [], []
    for variant in (s.variant, s.reference):
        values, crossing = at_matched_accuracy(
            inputs.failure,
            variant,
            s.L,
            s.depth,
            ev.mid_accuracy,
            lambda step, v=variant: slopes_at(inputs.failure, v, s.L, s.depth, step),
        )
        per_arm.append(values)
        words.append(crossing)
        step, _ = mid_training_step(inputs.failure, variant, s.L, s.depth, ev.mid_accuracy)
        gaps.append(mean_accuracy_at(inputs.failure, variant, s.L, s.depth, step) if step is not None else math.nan)
    if per_arm[0].index.intersection(per_arm[1].index).empty:
        raise NotRun(f"no seed reaches the accuracy {ev.mid_accuracy:g} in both {s.variant} and {s.reference}")
    method = f"per-seed logistic slope interpolated to the seed's accuracy {ev.mid_accuracy:g}"
    note = (
        "; ".join(words) + f"; the checkpoint reading compares mean accuracies {gaps[0]:.3f} and {gaps[1]:.3f} "
        f"(gap {gaps[0] - gaps[1]:+.3f}); interpolated, the gap is 0 by construction"
    )
    return Effects(tuple(per_arm), method, note)
