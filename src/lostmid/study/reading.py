"""The plan's reading of a primary (study/plan.yaml, ``outcomes`` and ``multiplicity``): Holm's levels across
the primaries, the four outcomes read off an interval against 0 and the source's size (and the fix plan's two-sided
one: an effect, or none of that size), and the words and numbers of an answer as the findings pages print them."""

from __future__ import annotations

import math

AT_LEAST = "at least the source's size"
SMALLER = "an effect smaller than the source's"
NO_EFFECT = "no effect of that size"
INCONCLUSIVE = "inconclusive"
OUTCOMES = (AT_LEAST, SMALLER, NO_EFFECT, INCONCLUSIVE)
EXPLORATORY = "exploratory"  # every outcome and answer of a run the plan check does not call primary


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


# The answer's words: how a sentence of docs/findings.md opens for each outcome, and how its row of the findings'
# forest plot is coloured (lostmid.plots.findings keys its colours by these very words).
ANSWERS = {
    AT_LEAST: "Yes, at least as large as the source says",
    SMALLER: "Yes, but smaller than the source says",
    NO_EFFECT: "No effect of the source's size",
    INCONCLUSIVE: "Not decided by this run",
}
OTHER_SIDE = " (on the other side of 0)"
IN_DIRECTION = "An effect in the source's direction, its size against the source's not decided by this run"


def answer(outcome: str, low: float, high: float, direction: str) -> str:
    """The words of an answer, as its sentence opens and its figure colours it: the outcome's ANSWERS, on the
    other side of 0 where the interval is, an effect of undecided size where an inconclusive interval excludes 0
    in the source's direction."""
    oriented_low, oriented_high = oriented(low, high, direction)
    words = ANSWERS[outcome]
    if oriented_high < 0:
        return words + OTHER_SIDE
    if outcome == INCONCLUSIVE and oriented_low > 0:
        return IN_DIRECTION
    return words


def exploratory(outcome: str, sentence: str) -> tuple[str, str]:
    """An outcome and its sentence as read from a run the plan check does not call primary."""
    return f"{EXPLORATORY}: {outcome}", f"{EXPLORATORY.capitalize()}, not primary: {sentence}"


def holm_levels(p_values, alpha: float = 0.05) -> list[float]:
    """Each primary's error level by Holm's step-down: sorted ascending, rank r (1-based) of k is compared with
    alpha / (k - r + 1); every primary up to and including the first not rejected gets the level of its own rank,
    every later one that first non-rejected one's. Ties keep the order given. Its interval is read at 1 - level."""
    p = [float(x) for x in p_values]
    if any(math.isnan(x) or not 0 <= x <= 1 for x in p):
        raise ValueError(f"p-values must lie in [0, 1], got {p}")
    k = len(p)
    levels = [0.0] * k
    stopped = None
    for rank, index in enumerate(sorted(range(k), key=lambda i: p[i]), start=1):
        level = alpha / (k - rank + 1) if stopped is None else stopped
        levels[index] = level
        if stopped is None and p[index] > level:
            stopped = level
    return levels


def number(x: float, spec: str = ".3g") -> str:
    """A number as the pages print it: three significant digits (or the format ``spec``, e.g. "+.2f": signed, two
    decimals), "nan" where there is none."""
    return "nan" if math.isnan(x) else f"{x:{spec}}"


def bounded(estimate: float, low: float, high: float, spec: str = ".3g") -> str:
    """ "estimate [low, high]", each a ``number`` in the format ``spec``."""
    return f"{number(estimate, spec)} [{number(low, spec)}, {number(high, spec)}]"


def text(value) -> str:
    """A plan's folded string on one line."""
    return " ".join(str(value).split())


def numbers(effect, low: float, high: float, primary: dict, confidence: float, units: str | None = None) -> str:
    """ "estimate [low, high] scale (confidence interval over n units: unit" (the caller closes the bracket)."""
    return (
        f"{bounded(effect.estimate, low, high)} {primary['scale']} ({confidence:.4g} interval "
        f"over {effect.n} units: {units or text(primary['unit'])}"
    )
