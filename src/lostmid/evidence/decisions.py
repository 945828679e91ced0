"""Verdicts of the evidence stage.

A claim's verdict is read off its 95% interval over seeds (``lostmid.stats.statistics``) with a
``Rule`` fixed in advance: the kind of claim and its margin or threshold, rendered in
words in the evidence table. How many seeds a decision needs: ``lostmid.stats.planning``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from lostmid.stats.statistics import Interval

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE)


# --------------------------------------------------------------------------- verdicts


RULE_KINDS = ("greater_than_zero", "less_than_zero", "equivalent_to_zero", "at_most", "at_least")


# Each kind of rule in words: {q} the quantity, {ci} the interval, {m} the margin.
RULE_WORDS = {
    "greater_than_zero": "Claim: {q} is positive. Supported if the lower bound of {ci} is above 0; contradicted if "
    "its upper bound is below the margin {m} fixed in advance (no effect as large as {m}, which includes an effect of "
    "the other sign); otherwise inconclusive.",
    "less_than_zero": "Claim: {q} is negative. Supported if the upper bound of {ci} is below 0; contradicted if its "
    "lower bound is above -{m}, the margin fixed in advance (no effect as large as -{m}, which includes an effect of "
    "the other sign); otherwise inconclusive.",
    "equivalent_to_zero": "Claim: {q} is negligible, within +-{m} (margin fixed in advance). Supported if {ci} lies "
    "inside (-{m}, {m}); contradicted if it lies entirely beyond the margin (lower bound above {m} or upper bound "
    "below -{m}); otherwise inconclusive.",
    "at_most": "Claim: {q} is at most {m}. Supported if the upper bound of {ci} is at most {m}; contradicted if its "
    "lower bound is above {m}; otherwise inconclusive.",
    "at_least": "Claim: {q} is at least {m}. Supported if the lower bound of {ci} is at least {m}; contradicted if "
    "its upper bound is below {m}; otherwise inconclusive.",
}


def verdict(low: float, high: float, rule: Rule) -> str:
    """supported, contradicted or inconclusive: the interval [low, high] against a rule fixed in advance, each kind
    as ``RULE_WORDS`` says it. A sign claim (greater or less than zero) is supported by an interval inside (0, m):
    the claim is about the sign, the margin only decides when it is refuted. equivalent_to_zero, "no effect that
    matters", is two one-sided tests at 2.5% each (conservative against the usual 5% TOST on the 90% interval);
    it lets "no position effect" be decided instead of staying inconclusive for ever. A NaN bound (fewer than 2
    seeds) is inconclusive.

    Float rounding: the verdict is a step function of (low, high) that changes only where a bound crosses 0, +-m
    or t; runs that differ only in rounding disagree only if a bound lies within rounding of a threshold. No tie
    band is added: it would only move that cliff to the band's edges. The exact cases that do land on a threshold
    are made exact at the source instead (a constant predictor's slope is 0.0 by definition in
    ``logistic_slope``; identical per-seed values give zero-width intervals equal to the value), and each
    comparison below is strict or not on purpose so that they get the intended verdict (an all-zero slope
    interval is not "positive").
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


def interval_words(i: Interval) -> str:
    """``estimate [low, high]`` to three significant digits: an interval in a row's note or reason."""
    return f"{i.estimate:.3g} [{i.low:.3g}, {i.high:.3g}]"


# --------------------------------------------------------------------------- rules as declared with a claim


@dataclass(frozen=True)
class Rule:
    """A claim's decision rule, fixed before the data are seen: as its declaration states it
    (``lostmid.evidence.inputs.Claim.rule``) and, fixed by the evidence settings (``build``), as a verdict reads it.

    ``kind``: one of RULE_KINDS. ``margin``: for greater_than_zero, less_than_zero and equivalent_to_zero the
    smallest effect size that matters (> 0); for at_most and at_least the threshold itself (e.g. a relative error
    of 1e-6); as declared, the name of the evidence setting (the config's ``evidence`` block) that holds it, or a
    number fixed here. ``factor`` multiplies it (-1: a fall of at least the margin; 2: the margin of a squared
    measure). ``quantity``: the effect in words; as declared, ``{name}`` takes an evidence setting or one of the
    words the estimate carries about its data (``terms``: a checkpoint, a flag law). ``level``: the level of the
    interval the rule is applied to (for the words); as declared, the evidence setting holding it.
    """

    kind: str
    margin: str | float
    quantity: str = "the effect"
    factor: float = 1.0
    level: str | float = "level"

    def __post_init__(self):
        if self.kind not in RULE_KINDS:
            raise ValueError(f"unknown rule kind {self.kind!r}; expected one of {RULE_KINDS}")
        if isinstance(self.margin, str):
            return  # an evidence setting's name: checked when the rule is fixed (``build``)
        if not math.isfinite(self.margin):
            raise ValueError("the margin must be finite")
        if self.kind in RULE_KINDS[:3] and self.factor * self.margin <= 0:
            raise ValueError(f"{self.kind} needs a margin > 0")

    @property
    def words(self) -> str:
        """The rule in plain English, for the evidence table (a rule fixed by ``build``)."""
        ci, q, m = f"the {self.level:.0%} interval over seeds", self.quantity, f"{self.margin:g}"
        return RULE_WORDS[self.kind].format(ci=ci, q=q, m=m)

    def margin_in(self, ev) -> float:
        value = getattr(ev, self.margin) if isinstance(self.margin, str) else self.margin
        return value if self.factor == 1.0 else self.factor * value

    def build(self, ev, terms: Mapping | None = None) -> Rule:
        """The rule fixed by the evidence settings ``ev`` and the words of the estimate's data (``terms``;
        None: there is no estimate, and a quantity that needs such words keeps its placeholders)."""
        try:
            words = self.quantity.format_map({**vars(ev), **(terms or {})})
        except (KeyError, ValueError):
            if terms is not None:
                raise
            words = self.quantity  # no estimate, no words from its data: the row says why it has no verdict
        return Rule(self.kind, self.margin_in(ev), words, level=getattr(ev, self.level))


def stored_rule(kind: str, margin: float) -> Rule:
    """The rule an evidence row was decided by, read back from its ``rule_kind`` and ``margin`` columns (a row
    without a verdict has kind "none": a ValueError, as for any kind outside RULE_KINDS)."""
    return Rule(kind, float(margin), level=0.95)


def verdict_by(rule: Rule, interval: Interval, ev, terms: Mapping | None = None) -> str:
    """The verdict of ``rule`` (as declared) on ``interval``, under the evidence settings ``ev``."""
    return verdict(interval.low, interval.high, rule.build(ev, terms))


class Decision(NamedTuple):
    """What ``decide`` reads off one estimate: the rule, the verdict, the rule in words, and the interval
    and verdict at the family-wise level (the row's own ones outside a family)."""

    rule: Rule
    verdict: str
    words: str
    adjusted_level: float
    adjusted_low: float
    adjusted_high: float
    adjusted_verdict: str


# Why a row without a verdict has none, by its status (lostmid.evidence.inputs.STATUSES).
NO_VERDICT_WORDS = {
    "not_run": "No verdict: the claim was not evaluated on this run (the method says what is missing).",
    "not_evaluable": "No verdict: the claim is not evaluable on this run (the method says why).",
    "pilot": (
        "No verdict: a pilot, with fewer replicates (seeds; windows in the retrieval stage) than the run's plan "
        "(evidence.min_seeds, evidence.min_windows)."
    ),
}


def rule_words(rule: Rule, interval: Interval) -> str:
    """The rule in words; for a deterministic claim (no seeds) "the interval over seeds" is the value itself."""
    words = rule.words
    if interval.n == 0 and not math.isnan(interval.estimate):
        ci = f"the {rule.level:.0%} interval over seeds"
        zero_width = interval.low == interval.high
        words = words.replace(ci, "the value (deterministic)" if zero_width else "the range over queries")
    return words


def decide(rule: Rule, estimate, ev, status: str = "decided", family_size: int = 0) -> Decision:
    """The one place a verdict is made: the declared ``rule`` fixed by the evidence settings ``ev`` and
    applied to ``estimate`` (``lostmid.evidence.inputs.Estimate``: its interval, the words its quantity
    takes, and its per-unit sample). A row whose ``status`` is not "decided" (not run, not evaluable, a
    pilot) gets no verdict (inconclusive) and its rule says why. In a family of ``family_size`` rows the
    interval is taken again at the Bonferroni level 1 - (1 - level) / k from the estimate's sample (its
    per-unit effects and estimator: nothing is recomputed) and decided by the same rule. The rules as first
    written are ``decide`` under ``lostmid.evidence.deviations.first_written(ev)``."""
    fixed = rule.build(ev, estimate.terms)
    interval = estimate.interval
    words = rule_words(fixed, interval)
    found = verdict(interval.low, interval.high, fixed)
    if status != "decided":
        found, words = INCONCLUSIVE, f"{NO_VERDICT_WORDS[status]} The rule that would apply: {words}"
    if not family_size:
        return Decision(fixed, found, words, fixed.level, interval.low, interval.high, found)
    level = 1 - (1 - fixed.level) / family_size
    adjusted = estimate.sample.at(level)
    return Decision(
        fixed, found, words, level, adjusted.low, adjusted.high, verdict(adjusted.low, adjusted.high, fixed)
    )
