"""The estimators of the evidence stage: the small closed set of named recipes that turn a claim's per-unit
effects (one value per seed, held-out initialization or bootstrap draw of windows) into its interval.

Every claim declares one by name (``lostmid.evidence.inputs.Claim.estimator``), next to its checkpoint and its
rule, and the evidence table refuses a row whose reading used another (``check_estimator``): the declaration is
what the code does. ``docs/evidence.md`` lists the claims with their estimators (``declarations``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from lostmid.evidence import statistics as st
from lostmid.evidence.influence_failure import flatness_predicts_preference
from lostmid.evidence.length_trained import welch_difference
from lostmid.evidence.retrieval_claims import auc_minus_half


class Estimator(NamedTuple):
    """A named recipe: the interval function over the per-unit values (None: a deterministic value, no units),
    and what it does in words."""

    function: Callable[..., st.Interval] | None
    words: str


ESTIMATORS: dict[str, Estimator] = {
    "t": Estimator(st.t_interval, "mean of the per-unit effects, Student t interval"),
    "paired_t": Estimator(st.paired_t, "mean of the paired per-unit differences (a - b), Student t interval"),
    "welch": Estimator(welch_difference, "difference of two independent means, Welch t interval"),
    "log_mean": Estimator(st.log_mean_interval, "geometric mean, Student t interval of the logs mapped back"),
    "window_bootstrap_auc": Estimator(auc_minus_half, "AUC - 0.5, percentile interval over bootstrap draws of windows"),
    "spearman_across_arms": Estimator(
        flatness_predicts_preference, "Spearman rho across arms of per-arm means, percentile bootstrap over seeds"
    ),
    "deterministic": Estimator(None, "a deterministic value (or range): zero-width interval, no units"),
}


def estimator_of(estimate) -> str:
    """The name of the estimator an ``Estimate`` was made with ("deterministic" when it has no per-unit sample)."""
    used = None if estimate.sample is None else estimate.sample.estimator
    for name, recipe in ESTIMATORS.items():
        if recipe.function is used:
            return name
    return getattr(used, "__name__", repr(used))


def check_estimator(claim, estimate) -> None:
    """A computed estimate must come from the estimator its claim declares (an estimate that could not be made,
    NaN and without a sample, has none to check)."""
    if estimate.sample is None and math.isnan(estimate.interval.estimate):
        return
    used = estimator_of(estimate)
    if used != claim.estimator:
        raise RuntimeError(
            f"claim {claim.name} declares the estimator {claim.estimator!r} but its reading used {used!r}"
        )
