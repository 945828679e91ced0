"""What the claims about trained runs read off the failure table, shared by the claim families, the plots
and the scripts: the mid-training checkpoint (the rule fixed in the config), per-seed logistic slopes, the
late-minus-early failure, the mean failure over training, and why a row is not evaluable when a variant
never reaches mid-training or a reference never learns."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd

from lostmid.evidence.inputs import (
    NOT_EVALUABLE,
    Effects,
    Estimate,
    Inputs,
    NotRun,
    Setting,
    last_common_step,
    no_estimate,
    rows_of,
)
from lostmid.evidence.settings import EvidenceSettings
from lostmid.stats import statistics as st
from lostmid.tables.summaries import accuracy_per_checkpoint


def mid_training_step(
    failure: pd.DataFrame, variant: str, L: int, depth: int, level: float
) -> tuple[int | None, float]:
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


def mean_accuracy_at(failure: pd.DataFrame, variant: str, L: int, depth: int, step: int) -> float:
    return float(rows_of(accuracy_per_checkpoint(failure), "failure", variant, L, depth, step).accuracy.mean())


def not_reached(variant: str, best: float, ev: EvidenceSettings) -> Estimate:
    """The estimate of a claim read at mid-training when ``variant`` never gets there: not evaluable."""
    return no_estimate(
        NOT_EVALUABLE,
        f"mid-training undefined, {variant}'s mean evaluation accuracy never reached {ev.mid_accuracy:g} "
        f"(best {best:.3f})",
    )


def never_learns(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> str | None:
    step, best = mid_training_step(inputs.failure, s.reference, s.L, s.depth, ev.mid_accuracy)
    if step is not None:
        return None
    return (
        f"the reference {s.reference} never reaches the mid-training accuracy {ev.mid_accuracy:g} "
        f"(best {best:.3f}): a comparison with a model that does not learn says nothing about the fix"
    )


def mean_failure_over_training(accuracy: pd.DataFrame, horizon: int) -> pd.Series:
    """Claim (d)'s per-seed statistic: the area under the failure curve of ``accuracy_per_checkpoint`` rows (one
    run per seed), steps 0 to ``horizon``, over the span (``statistics.area_under_failure``)."""
    part = accuracy[accuracy.step <= horizon]
    areas = {
        int(seed): st.area_under_failure(g.step.to_numpy(), g.failure.to_numpy(), horizon)
        for seed, g in part.sort_values("step").groupby("seed")
    }
    return pd.Series(areas, dtype=np.float64)


def training_speed_per_seed(failure: pd.DataFrame, s: Setting) -> tuple[pd.Series, pd.Series, int]:
    """Claim (d)'s per-seed effect: the mean failure over training (area under the failure curve
    over the span) of the variant and of its reference, from step 0 to the last checkpoint both
    have; returns (variant's, reference's, that step)."""
    acc = accuracy_per_checkpoint(failure)
    horizon = last_common_step(acc, s)
    variant, reference = (
        mean_failure_over_training(rows_of(acc, "failure", v, s.L, s.depth), horizon) for v in (s.variant, s.reference)
    )
    return variant, reference, horizon


def paired(a: pd.Series, b: pd.Series) -> pd.Series:
    """a - b per seed, over the seeds both have (sorted)."""
    shared = a.index.intersection(b.index).sort_values()
    return (a.loc[shared] - b.loc[shared]).astype(np.float64)


def pooled_failure_rate(part: pd.DataFrame) -> pd.Series:
    """Per seed: the failure rate of the failure rows ``part`` pooled over their flags."""
    pooled = part.groupby("seed")[["failures", "n"]].sum()
    return (pooled.failures / pooled.n).astype(np.float64)


def late_failure_per_seed(
    failure: pd.DataFrame, variant: str, L: int, depth: int, step: int, late: bool = True
) -> pd.Series:
    """Per seed: the failure rate at ``step`` pooled over the flags in the later half of the context (p > 1/2), or
    with ``late`` false over the others (p <= 1/2)."""
    part = rows_of(failure, "failure", variant, L, depth, step)
    return pooled_failure_rate(part[(part.p > 0.5) == late])


def late_minus_early(part: pd.DataFrame) -> pd.Series:
    """The model-free position preference (claim (e)'s per-seed statistic): per seed, the failure rate of the
    failure rows ``part`` (one checkpoint of one run per seed) pooled over the late flags (p > 1/2) minus that
    pooled over the early flags (p < 1/2); a flag at p = 1/2 counts in neither.

    It needs no model of how failure depends on p, so it stays finite where a per-seed logistic slope
    separates (a seed that fails no early flag and some late ones). Positive: late flags fail more.
    """
    late, early = pooled_failure_rate(part[part.p > 0.5]), pooled_failure_rate(part[part.p < 0.5])
    return (late - early).dropna()


def late_minus_early_failure_per_seed(failure: pd.DataFrame, variant: str, L: int, depth: int, step: int) -> pd.Series:
    """``late_minus_early`` of ``variant`` at (L, depth) at ``step``."""
    return late_minus_early(rows_of(failure, "failure", variant, L, depth, step))


def accuracy_at_last_common_checkpoint(inputs: Inputs, ev: EvidenceSettings, s: Setting) -> Effects:
    """Per seed, the evaluation accuracy of the setting's variant and of its reference at the last checkpoint
    both have (paired by seed: the checks that a remedy or an arm still learns the task)."""
    accuracy = accuracy_per_checkpoint(inputs.failure)
    step = last_common_step(accuracy, s)
    per_seed = tuple(
        rows_of(accuracy, "failure", v, s.L, s.depth, step).set_index("seed").accuracy for v in (s.variant, s.reference)
    )
    note = f"accuracy at step {step}: {s.variant} {per_seed[0].mean():.3f}, {s.reference} {per_seed[1].mean():.3f}"
    return Effects(per_seed, f"per-seed evaluation accuracy at step {step}", note, {"step": step})


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


def matched_pair(inputs: Inputs, ev: EvidenceSettings, s: Setting, statistic) -> list[tuple[pd.Series, str]]:
    """``at_matched_accuracy`` at ``evidence.mid_accuracy`` of the setting's variant and of its reference, with the
    per-seed ``statistic(arm, step)``: per arm, the values and their words; NotRun where no seed reaches that
    accuracy in both arms."""
    arms = [
        at_matched_accuracy(inputs.failure, v, s.L, s.depth, ev.mid_accuracy, partial(statistic, v))
        for v in (s.variant, s.reference)
    ]
    if arms[0][0].index.intersection(arms[1][0].index).empty:
        raise NotRun(f"no seed reaches the accuracy {ev.mid_accuracy:g} in both {s.variant} and {s.reference}")
    return arms
