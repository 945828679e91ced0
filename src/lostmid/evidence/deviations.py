"""Deviations on the record: every decision rule of the evidence stage changed after data were seen.

``DEVIATIONS`` is the one registry (docs/evidence.md, "Deviations on the record", renders it): when,
what changed, why, the rule as first written, what had been seen, and the settings that restore the
first rule. ``lostmid.evidence.claims.evidence_table`` decides every row a second time with all of them
restored (``first_written``), from the estimates already made (a claim whose reading reads a restored setting,
``Deviation.rereads``, is read again), and puts that verdict in the column ``verdict_as_first_written`` of
every row whose claim a deviation names or whose verdict the first rules change (a fit check feeding
the gate of (c)-(e), for instance); ``deviations`` names the deviations a row is subject to. A new
change of a rule after data were seen is a new entry here, never an edit of an old one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lostmid.evidence.settings import EvidenceSettings


@dataclass(frozen=True)
class Deviation:
    name: str
    date: str  # when the rule was changed (commit date)
    what: str  # the rule as it is now
    why: str
    first_written: str  # the rule as first written
    seen: str  # the data seen before the change
    restore: dict  # evidence settings that restore the rule as first written
    claims: tuple[str, ...]  # the claims whose rule changed (rows gated by them follow on their own)
    # The claims whose reading itself reads a restored setting (not only their rule or gate): the one reading
    # made again under the first rules; every other row is decided again from its estimate.
    rereads: tuple[str, ...] = ()


DEVIATIONS: list[Deviation] = [
    Deviation(
        "context_share_reference",
        "2026-12-01",
        "the bias fit's context-share check compares with min(share at B = 0, (L-1)/L)",
        "the literal fit's network gives its last position almost no voice at B = 0 (share 1.000); a "
        "whole-profile fit gives it its 1/L, so the share falls to (L-1)/L with no position silenced",
        "compared with the share at B = 0",
        "the literal reading's fit summary (share 1.000 -> 0.905 on 8 held-out inits)",
        {"share_reference": "unbiased"},
        ("bias_fit_keeps_context_share",),
        rereads=("bias_fit_keeps_context_share",),
    ),
    Deviation(
        "slope_margin_from_words",
        "2026-12-03",
        "slope_margin log 2: a doubling of the odds of failure from first to last position",
        "the smallest effect of the blog's 'gets worse and worse' (a) and 'does not have the previous preference' (e)",
        "slope_margin 0.5",
        "the default run's evidence table of 2026-12-03",
        {"slope_margin": 0.5},
        ("failure_rises_with_position", "debiased_has_less_position_preference"),
    ),
    Deviation(
        "speed_margin_from_words",
        "2026-12-03",
        "speed_margin 0.05: a third of the baseline's mean failure over training (1.5 times as fast)",
        "the smallest effect of the blog's 'trains much faster' (d)",
        "speed_margin 0.02",
        "the default run's evidence table of 2026-12-03: (d) +0.009 [-0.040, 0.058], baseline mean failure 0.151",
        {"speed_margin": 0.02},
        ("debiased_trains_faster",),
    ),
    Deviation(
        "init_growth_margin_from_words",
        "2026-12-03",
        "init_growth_margin 5 orders, density_growth_margin 10 orders",
        "the smallest effect of the blog's '~10^6 after 4 layers' (b), to within an order of magnitude",
        "init_growth_margin 1 order for both measures",
        "the default run's init sweep (10^5.4 at depth 4 in the blog's measure)",
        {"init_growth_margin": 1.0, "density_growth_margin": 1.0},
        ("first_token_jacobian_grows_with_depth", "first_token_density_grows_with_depth"),
    ),
    Deviation(
        "imbalance_ratio_from_words",
        "2026-12-03",
        "imbalance_ratio 0.25",
        "the paper's 'Algorithm 3 strongly reduces its scalar trace target': at least a factor 4",
        "imbalance_ratio 0.5",
        "the algebraic table (ratio 0.0086)",
        {"imbalance_ratio": 0.5},
        ("observability_lowers_trace_imbalance",),
    ),
    Deviation(
        "z_growth_margin_from_words",
        "2026-12-03",
        "z_growth_margin log 2",
        "the paper's 'Algorithm 1 more than doubles Z'",
        "the margin algebraic_tolerance (0.001)",
        "the algebraic table",
        {"z_growth_margin": 0.001},
        ("algebraic_balance_z_grows",),
    ),
    Deviation(
        "retrieval_min_windows",
        "2026-12-03",
        "a retrieval row whose bootstrap is over fewer than evidence.min_windows (5) windows is a pilot: no verdict",
        "a percentile bootstrap over 2 windows has at most 3 distinct resamples and no 95% coverage",
        "every retrieval row decided on its bootstrap interval, whatever its number of windows",
        "the retrieval run's rows (n = 1024: 2 windows with gradients, verdicts decided on them)",
        {"min_windows": 0},
        ("task_influence_predicts_retrieval", "free_influence_predicts_retrieval"),
    ),
    Deviation(
        "mechanism_fit_gate",
        "2026-12-04",
        "a fitted arm of the controls run is not evaluable when its fit failed its guard or a fit check",
        "a verdict on an arm whose fit did not flatten its own held-out profile (debiased_own_jacobian: "
        "-0.153, contradicted) is a verdict on a failed intervention, not on the fix",
        "a fitted arm gated on its fit's guard only",
        "the mechanism run's rows, in which debiased_own_jacobian's speed and accuracy rows were decided",
        {"mechanism_gate": "guard"},
        (
            "arm_trains_faster",
            "arm_has_less_position_preference",
            "arm_has_less_late_minus_early_failure",
            "arm_speed_as_literal",
            "arm_slope_as_literal",
            "arm_preference_as_literal",
            "arm_keeps_accuracy",
        ),
    ),
    Deviation(
        "length_fit_gate",
        "2026-12-04",
        "a row of the length study on the fix's effect is not evaluable when its bias arm's fit failed its guard "
        "or a fit check",
        "a verdict on the effect of a fit that did not do what it is for is a verdict on a failed intervention; "
        "the blog's own (e) rows were gated so, these were not",
        "no gate on the fit (only on reaching mid-training)",
        "the length run's rows and the default run's (every decided row's fit passed both checks: no verdict moves)",
        {"length_gate": "none"},
        ("length_fix_lowers_late_minus_early", "length_fix_effect_grows"),
        rereads=("length_fix_lowers_late_minus_early", "length_fix_effect_grows"),
    ),
]


def first_written(ev: EvidenceSettings) -> EvidenceSettings:
    """The evidence settings with every deviation undone: the rules as first written."""
    restored = {key: value for d in DEVIATIONS for key, value in d.restore.items()}
    return replace(ev, **restored)


def rereads() -> set[str]:
    """The claims whose reading is made again under the rules as first written."""
    return {name for d in DEVIATIONS for name in d.rereads}


def deviations_of(claim: str) -> list[str]:
    return [d.name for d in DEVIATIONS if claim in d.claims]


def markdown() -> str:
    """The registry as a Markdown table (docs/evidence.md)."""
    lines = ["| deviation | date | now | first written | why | seen before the change |", "|---|---|---|---|---|---|"]
    for d in DEVIATIONS:
        lines.append(f"| `{d.name}` | {d.date} | {d.what} | {d.first_written} | {d.why} | {d.seen} |")
    return "\n".join(lines) + "\n"
