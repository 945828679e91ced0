"""The outcomes of an interval read against 0 and a size: the plans' four (study/plan.yaml, ``outcomes``: at least
the size, smaller, no effect of that size, inconclusive) in a claim's direction, and the fix plan's two-sided one (an
effect, or none of that size). Below the studies, so that an estimator of ``stats`` may read its own outcome; every
reader imports them from here."""

from __future__ import annotations

import math

AT_LEAST = "at least the source's size"
SMALLER = "an effect smaller than the source's"
NO_EFFECT = "no effect of that size"
INCONCLUSIVE = "inconclusive"
OUTCOMES = (AT_LEAST, SMALLER, NO_EFFECT, INCONCLUSIVE)


def oriented(low: float, high: float, direction: str) -> tuple[float, float]:
    """The interval in the claim's direction: as it is for an increase, negated and swapped for a decrease."""
    if direction not in ("increase", "decrease"):
        raise ValueError(f"direction must be increase or decrease, got {direction!r}")
    return (low, high) if direction == "increase" else (-high, -low)


def outcome(low: float, high: float, direction: str, size: float) -> str:
    """The four-outcome reading of the interval [low, high] against 0 and the source's size (> 0, in the claim's
    direction): the bound nearer 0 beyond the size; 0 and the size both excluded (an effect, smaller); the size
    excluded and 0 not (or the interval on the other side of 0); otherwise inconclusive. NaN bounds: inconclusive."""
    if not size > 0:
        raise ValueError(f"the source's size must be positive, got {size}")
    if math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    lo, hi = oriented(low, high, direction)
    if lo >= size:
        return AT_LEAST
    if hi < size:
        return SMALLER if lo > 0 else NO_EFFECT
    return INCONCLUSIVE


def two_sided_outcome(low: float, high: float, size: float) -> str:
    """The reading of [low, high] for a claim with no direction (study/fix_plan.yaml, outcomes.two_sided): an
    effect, its sign named, where the interval excludes 0; no effect of that size where it lies inside (-size,
    size); otherwise inconclusive. NaN bounds: inconclusive."""
    if math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    if low > 0 or high < 0:
        return f"an effect ({'positive' if low > 0 else 'negative'})"
    return NO_EFFECT if -size < low and high < size else INCONCLUSIVE
