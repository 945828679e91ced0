"""Verdicts of the evidence stage, and how many seeds a decision needs.

A claim's verdict is read off its 95% interval over seeds (``lostmid.evidence.statistics``) with a
``DecisionRule`` fixed in advance: the kind of claim and its margin or threshold, rendered in
words in the evidence table. ``seeds_for_half_width`` and ``pilot_seed_plan`` plan the number
of seeds from pilot data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from scipy import stats

from lostmid.evidence.statistics import Interval, as_values
from lostmid.tables.summaries import t_half_width

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE)


# --------------------------------------------------------------------------- verdicts


RULE_KINDS = ("greater_than_zero", "less_than_zero", "equivalent_to_zero", "at_most", "at_least")


@dataclass(frozen=True)
class DecisionRule:
    """How a verdict is read off an interval, fixed before the data are seen.

    ``kind`` is one of RULE_KINDS. ``margin``: for greater_than_zero, less_than_zero and
    equivalent_to_zero the smallest effect size that matters (> 0); for at_most and
    at_least the threshold itself (e.g. a relative error of 1e-6). ``level`` is the level
    of the interval the rule is applied to (for the words); ``quantity`` names the effect.
    """

    kind: str
    margin: float
    level: float = 0.95
    quantity: str = "the effect"

    def __post_init__(self):
        if self.kind not in RULE_KINDS:
            raise ValueError(f"unknown rule kind {self.kind!r}; expected one of {RULE_KINDS}")
        if not math.isfinite(self.margin):
            raise ValueError("the margin must be finite")
        if self.kind in RULE_KINDS[:3] and self.margin <= 0:
            raise ValueError(f"{self.kind} needs a margin > 0")

    @property
    def words(self) -> str:
        """The rule in plain English, for the evidence table."""
        ci, q, m = f"the {self.level:.0%} interval over seeds", self.quantity, f"{self.margin:g}"
        if self.kind == "greater_than_zero":
            return (
                f"Claim: {q} is positive. Supported if the lower bound of {ci} is above 0; contradicted if "
                f"its upper bound is below the margin {m} fixed in advance (no effect as large as {m}, "
                f"which includes an effect of the other sign); otherwise inconclusive."
            )
        if self.kind == "less_than_zero":
            return (
                f"Claim: {q} is negative. Supported if the upper bound of {ci} is below 0; contradicted if "
                f"its lower bound is above -{m}, the margin fixed in advance (no effect as large as -{m}, "
                f"which includes an effect of the other sign); otherwise inconclusive."
            )
        if self.kind == "equivalent_to_zero":
            return (
                f"Claim: {q} is negligible, within +-{m} (margin fixed in advance). Supported if {ci} lies "
                f"inside (-{m}, {m}); contradicted if it lies entirely beyond the margin (lower bound above "
                f"{m} or upper bound below -{m}); otherwise inconclusive."
            )
        if self.kind == "at_most":
            return (
                f"Claim: {q} is at most {m}. Supported if the upper bound of {ci} is at most {m}; "
                f"contradicted if its lower bound is above {m}; otherwise inconclusive."
            )
        return (
            f"Claim: {q} is at least {m}. Supported if the lower bound of {ci} is at least {m}; "
            f"contradicted if its upper bound is below {m}; otherwise inconclusive."
        )


def verdict(low: float, high: float, rule: DecisionRule) -> str:
    """supported, contradicted or inconclusive: the interval [low, high] against a rule fixed in advance.

    greater_than_zero (margin m): supported if low > 0; else contradicted if high < m (the
      interval rules out every effect as large as m, including all of the other sign); else
      inconclusive. An interval inside (0, m) is supported: the claim is about the sign,
      the margin only decides when the claim is refuted.
    less_than_zero (margin m): the mirror image; supported if high < 0; else contradicted if
      low > -m; else inconclusive.
    equivalent_to_zero (margin m), the claim "no effect that matters": supported if
      -m < low and high < m (an equivalence test: two one-sided tests, each at 2.5%, since
      the 95% interval is used; conservative compared with the 90% interval of the usual
      5% TOST); contradicted if low > m or high < -m (the interval excludes zero and lies
      entirely beyond the margin: an effect at least as large as m, of either sign); else
      inconclusive. This is what lets "no position effect" be decided instead of staying
      inconclusive for ever.
    at_most (threshold t): supported if high <= t; contradicted if low > t; else inconclusive.
    at_least (threshold t): supported if low >= t; contradicted if high < t; else inconclusive.
    A NaN bound (fewer than 2 seeds) is inconclusive.

    Float rounding: the verdict is a step function of (low, high) that changes only where a
    bound crosses 0, +-m or t. Two runs that differ only in rounding move the bounds by
    ~1e-15 relative, so they disagree only if a bound lies within rounding of a threshold.
    No tie band is added: a tolerance would not remove that cliff, only move it to the
    band's edges, and a bound landing within 1e-12 of a margin fixed in advance is a
    probability-zero event for continuous estimates. The exact cases that do land on a
    threshold are made exact at the source instead (a constant predictor's slope is 0.0 by
    definition in ``logistic_slope``; identical per-seed values give zero-width intervals
    equal to the value), and each comparison above is strict or not on purpose so that
    such exact cases get the intended verdict (an all-zero slope interval is not "positive").
    """
    if math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    if low > high:
        raise ValueError(f"interval bounds out of order: {low} > {high}")
    m = rule.margin
    if rule.kind == "greater_than_zero":
        return SUPPORTED if low > 0 else CONTRADICTED if high < m else INCONCLUSIVE
    if rule.kind == "less_than_zero":
        return SUPPORTED if high < 0 else CONTRADICTED if low > -m else INCONCLUSIVE
    if rule.kind == "equivalent_to_zero":
        if -m < low and high < m:
            return SUPPORTED
        return CONTRADICTED if (low > m or high < -m) else INCONCLUSIVE
    if rule.kind == "at_most":
        return SUPPORTED if high <= m else CONTRADICTED if low > m else INCONCLUSIVE
    return SUPPORTED if low >= m else CONTRADICTED if high < m else INCONCLUSIVE


def claim_row(interval: Interval, rule: DecisionRule) -> dict:
    """One row of the evidence table: estimate, ci_low, ci_high, n_seeds, method, verdict, rule (in words)."""
    return {
        "estimate": interval.estimate,
        "ci_low": interval.low,
        "ci_high": interval.high,
        "n_seeds": interval.n,
        "method": interval.method,
        "verdict": verdict(interval.low, interval.high, rule),
        "rule": rule.words,
    }


# --------------------------------------------------------------------------- planning the number of seeds


def seeds_for_half_width(sd: float, half_width: float, level: float = 0.95) -> int:
    """Smallest n >= 2 with t_{1-a/2, n-1} * sd / sqrt(n) <= half_width (precision planning).

    ``sd`` is the between-seed standard deviation of the per-seed effect (from a pilot). The
    search starts at the normal-theory n = ceil((z * sd / half_width)^2), which no smaller n
    can beat (t > z), and walks up; the half-width decreases in n, so the first n that fits
    is the smallest. With the plug-in sd the realized half-width (which uses the new sample's
    sd) is below the target only about half the time; ``pilot_seed_plan`` gives a
    conservative n as well.
    """
    target = half_width
    if not (target > 0 and math.isfinite(target)) or not (sd >= 0 and math.isfinite(sd)):
        raise ValueError("need half_width > 0 and a finite sd >= 0")
    z = stats.norm.ppf(0.5 + level / 2)
    n = max(2, math.ceil((z * sd / target) ** 2))
    while t_half_width(sd, n, level) > target:
        n += 1
    return n


class SeedPlan(NamedTuple):
    """Seeds needed for a target half-width, from a pilot: with the pilot sd and with its upper confidence bound."""

    pilot_seeds: int
    sd: float
    sd_upper: float
    n_seeds: int
    n_seeds_conservative: int


def pilot_seed_plan(
    pilot_values, target_half_width: float, level: float = 0.95, sd_confidence: float = 0.8
) -> SeedPlan:
    """Power (precision) estimate on pilot data: how many seeds make the interval's half-width <= target.

    Estimator: the pilot's between-seed sd s of the per-seed effect (ddof=1, k pilot
    seeds) plugged into ``seeds_for_half_width``; and, because s from a handful of seeds is
    itself uncertain, also the upper ``sd_confidence`` one-sided confidence bound
    s * sqrt((k - 1) / chi2_{1 - sd_confidence, k - 1}) (chi-square interval of a normal
    variance) plugged in the same way: with that n the target holds for the true sd with
    probability ``sd_confidence``. Report both; plan with the conservative one.
    """
    values = as_values(pilot_values)
    k = values.size
    if k < 2:
        raise ValueError("a pilot needs at least 2 seeds to estimate the spread")
    sd = float(values.std(ddof=1))
    sd_upper = sd * math.sqrt((k - 1) / stats.chi2.ppf(1 - sd_confidence, k - 1))
    return SeedPlan(
        k,
        sd,
        sd_upper,
        seeds_for_half_width(sd, target_half_width, level),
        seeds_for_half_width(sd_upper, target_half_width, level),
    )
