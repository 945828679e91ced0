"""The estimators of the evidence stage: the small closed set of named recipes that turn a claim's per-unit
effects (one value per seed, held-out initialization or bootstrap draw of windows) into its interval.

Every claim declares one by name (``lostmid.evidence.inputs.Claim.estimator``), next to its checkpoints and its
rule. A reading returns ``Effects``, never an interval; ``made_by`` applies the declared recipe at the run's level,
and keeps the per-unit sample from which ``decisions.decide`` takes the family-wise interval again. The gates that
read a check's verdict (the fit's checks, the position shift's) make its estimate the same way.
``docs/evidence.md`` lists the claims with their estimators (``lostmid.pages.evidence.declarations``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from lostmid.evidence import decisions as dec
from lostmid.evidence.inputs import Claim, Effects, Estimate, Inputs, Setting
from lostmid.evidence.settings import EvidenceSettings
from lostmid.stats import statistics as st


class Estimator(NamedTuple):
    """A named recipe: the interval function over the per-unit values (``function(*values, level)``), and what it
    does in words."""

    function: Callable[..., st.Interval]
    words: str


ESTIMATORS: dict[str, Estimator] = {
    "t": Estimator(st.t_interval, "mean of the per-unit effects, Student t interval"),
    "paired_t": Estimator(st.paired_t, "mean of the paired per-unit differences (a - b), Student t interval"),
    "welch": Estimator(st.welch_difference, "difference of two independent means, Welch t interval"),
    "log_mean": Estimator(st.log_mean_interval, "geometric mean, Student t interval of the logs mapped back"),
    "window_bootstrap_auc": Estimator(
        st.auc_minus_half, "AUC - 0.5, percentile interval over bootstrap draws of windows"
    ),
    "spearman_across_arms": Estimator(
        st.flatness_predicts_preference, "Spearman rho across arms of per-arm means, percentile bootstrap over seeds"
    ),
    "deterministic": Estimator(st.deterministic, "a deterministic value: zero-width interval, no units"),
}


def estimate(name: str, effects: Effects, level: float) -> Estimate:
    """The estimate the recipe ``name`` makes of ``effects`` at ``level``: its interval, whose method is the
    effects' words and then the recipe's, the per-unit sample, and the effects' note and terms."""
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; expected one of {list(ESTIMATORS)}")
    sample = st.Sample(tuple(effects.values), ESTIMATORS[name].function)
    interval = sample.at(level)
    method = interval.method if effects.unit == "seed" else interval.method.replace("seed", effects.unit)
    if effects.method:
        method = f"{effects.method}; {method}"
    return Estimate(interval._replace(method=method), effects.note, sample, effects.terms)


def made_by(claim: Claim, inputs: Inputs, ev: EvidenceSettings, setting: Setting) -> Estimate:
    """The estimate of ``claim`` in ``setting``: its reading's effects, estimated by its declared estimator, made
    once per (claim, setting, rules) on these tables (``Inputs.made``). A reading may instead return an
    ``Estimate`` that could not be made (NaN, no sample: it says why)."""
    key = (claim.name, setting, ev)
    if key not in inputs.made:
        found = claim.compute(inputs, ev, setting)
        if isinstance(found, Effects):
            found = estimate(claim.estimator, found, ev.level)
        elif found.sample is not None or not math.isnan(found.interval.estimate):
            raise TypeError(
                f"claim {claim.name}: a reading returns its Effects; the declared estimator makes the estimate"
            )
        inputs.made[key] = found
    return inputs.made[key]


def failed_check(check: Claim, inputs: Inputs, ev: EvidenceSettings, setting: Setting) -> str | None:
    """Why the declared ``check`` does not pass in ``setting``, for a gate that reads it (the fit's checks, the
    position shift's): its verdict by its own rule and its interval, made by ``made_by``; None where supported."""
    found = made_by(check, inputs, ev, setting)
    verdict = dec.verdict_by(check.rule, found.interval, ev, found.terms)
    return None if verdict == dec.SUPPORTED else f"{verdict}: {dec.interval_words(found.interval)}"
