"""The claims of the evidence stage: one function per claim, one row of the evidence table per setting.

Every claim of the blog post and of the paper that the workflow can test is a ``Claim`` in
``CLAIMS``: its source, the statistic (what is estimated, in which unit), the tables it reads,
the settings it is evaluated in (``settings``: e.g. every baseline variant, L and depth of the
run) and the function named after it that returns, for one setting, an ``Interval`` and the
``DecisionRule`` fixed in advance (``lostmid.evidence.settings.EvidenceSettings``).
``evidence_table`` evaluates them all and returns one row per (claim, setting), built with
``lostmid.evidence.decisions.claim_row``.

Trained claims follow the recipe of ``lostmid.evidence.statistics``: an effect per seed, then a
Student t interval over seeds (paired by seed when two variants share seeds); deterministic
claims (structural baseline, algebraic simulations) get a zero-width "interval" and a rule with
a tolerance.

Missing inputs. A claim whose table was not given, or whose variants are not in the run (no
bias-corrected variant, no Algorithm 1, ...), is not dropped: it gets one explicit row whose
``method`` starts with "not run:" and says what is missing, with NaN estimate and verdict
inconclusive, so the table always lists every claim. A claim that was measured but cannot be
decided (the reading's bias fit did not do what it is for, the reference never learns, a variant
never reaches mid-training) says "not evaluable:" and why, keeps its estimate where there is one,
and gets no verdict (inconclusive). A table that is given but malformed (missing columns, an
unknown variant, a non-positive E_inf) is an error (``EvidenceError``).

Family-wise correction. The rows of the claims of one family (``Claim.family``: the blog's) that
are decided by an interval over seeds are decided again on Bonferroni intervals
(``family_wise``), into the adjusted_* columns; ``verdict`` stays the row's own.

Pairing of variants. The table knows variants only through the config's ``variants`` block
(name -> overrides): the *reference* of a remedy variant is the variant without a remedy whose
``model`` and ``train`` overrides are identical apart from ``train.seed_batch``, which changes
float rounding only (so a no-residual debiased variant is compared with the no-residual
baseline); if several qualify the one named ``baseline`` wins, else the first by name. A
setting whose reference is missing gets its own "not run" row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from lostmid.evidence import decisions as dec
from lostmid.evidence import statistics as st
from lostmid.evidence import validation_claims as vc
from lostmid.evidence.blog_claims import (
    baseline_settings,
    bias_settings,
    debiased_has_less_position_preference,
    debiased_preference_settings,
    debiased_speed_settings,
    debiased_trains_faster,
    failure_rises_with_position,
    first_token_density_grows_with_depth,
    first_token_jacobian_grows_with_depth,
    fitted_bias_weights_recent_keys,
    init_settings,
    mid_training_step,
)
from lostmid.evidence.fit_checks import bias_fit_flattens_profile, bias_fit_keeps_context_share, reading_settings
from lostmid.evidence.inputs import BLOG, COLUMNS, Claim, EvidenceError, Inputs, NotRun, Result, Setting, pair_settings
from lostmid.evidence.paper_claims import (
    algebraic_balance_e_inf_near_zero,
    algebraic_balance_z_grows,
    algebraic_baseline_left_right_middle,
    algebraic_observability_right_below_middle,
    algebraic_reweight_moves_little,
    balance_keeps_accuracy,
    balance_lowers_e_inf,
    conditions_settings,
    density_flow_error_falls_with_step,
    density_flow_matches_finite_difference,
    flow_settings,
    observability_lowers_trace_imbalance,
    probe_bias_falls,
    probe_spread_falls,
    reweight_changes_profile_little,
    single_setting,
    structural_baseline_matches_closed_form,
    sufficient_conditions_sound,
)
from lostmid.evidence.report import estimate_words
from lostmid.evidence.settings import EvidenceSettings

# =========================================================================== the registry

SLOPE = "log odds per unit p"
ORDERS = "orders of magnitude (log10)"
LOG_RATIO = "natural log of a ratio"

CLAIMS: list[Claim] = [
    Claim(
        "failure_rises_with_position",
        "blog (a)",
        "per-seed logistic slope of failure on p = f/L at mid-training",
        SLOPE,
        ("failure",),
        baseline_settings,
        failure_rises_with_position,
        family=BLOG,
    ),
    Claim(
        "first_token_jacobian_grows_with_depth",
        "blog (b)",
        "growth from depth 1 of log10 E||d logits_L/d x_1|| / E||d logits_L/d x_L|| (the blog's measure), no "
        "residual path",
        ORDERS,
        ("init_sweep",),
        init_settings,
        first_token_jacobian_grows_with_depth,
        family=BLOG,
    ),
    Claim(
        "first_token_density_grows_with_depth",
        "blog (b)",
        "growth from depth 1 of log10 m_1 / m_L (squared loss-gradient density), no residual path",
        ORDERS,
        ("init_sweep",),
        init_settings,
        first_token_density_grows_with_depth,
        family=BLOG,
    ),
    Claim(
        "bias_fit_flattens_profile",
        "blog (c): the fit (check of the intervention)",
        "log(E_inf fitted B / E_inf B = 0) of the fitted profile per held-out initialization",
        LOG_RATIO,
        (),
        reading_settings,
        bias_fit_flattens_profile,
    ),
    Claim(
        "bias_fit_keeps_context_share",
        "blog (c): the fit (check of the intervention)",
        "log(context share fitted B / B = 0) per held-out initialization",
        LOG_RATIO,
        (),
        reading_settings,
        bias_fit_keeps_context_share,
    ),
    Claim(
        "fitted_bias_weights_recent_keys",
        "blog (c)",
        "fall of the least-squares line of the mean bias by lag over lags >= 1, nearest key to farthest "
        "(diagonal apart)",
        "attention logit",
        ("bias_matrix",),
        bias_settings,
        fitted_bias_weights_recent_keys,
        family=BLOG,
    ),
    Claim(
        "debiased_trains_faster",
        "blog (d), with (e)'s second half",
        "paired difference of the mean failure rate over training (area under the failure curve)",
        "failure rate",
        ("failure",),
        debiased_speed_settings,
        debiased_trains_faster,
        family=BLOG,
    ),
    Claim(
        "debiased_has_less_position_preference",
        "blog (e)",
        "paired difference of the per-seed logistic slope of failure on p, each arm at its own mid-training",
        SLOPE,
        ("failure",),
        debiased_preference_settings,
        debiased_has_less_position_preference,
        family=BLOG,
    ),
    Claim(
        "structural_baseline_matches_closed_form",
        "paper: structural baseline (closed form m_j ~ ((N^M)_{L,j})^2)",
        "largest relative deviation of the measured density from the closed form",
        "relative error",
        ("structural",),
        single_setting,
        structural_baseline_matches_closed_form,
        log_axis=True,
    ),
    Claim(
        "density_flow_matches_finite_difference",
        "paper: density flow (eq. 69)",
        "median relative error of the predicted density flow against one gradient step",
        "relative error",
        ("density_flow",),
        flow_settings,
        density_flow_matches_finite_difference,
        log_axis=True,
    ),
    Claim(
        "density_flow_error_falls_with_step",
        "paper: density flow (eq. 69)",
        "slope of log relative error on log eta",
        "log-log slope",
        ("density_flow",),
        flow_settings,
        density_flow_error_falls_with_step,
    ),
    Claim(
        "sufficient_conditions_sound",
        "paper: sufficient conditions (soundness)",
        "rows where a sufficient condition holds and its conclusion fails",
        "count",
        ("conditions",),
        conditions_settings,
        sufficient_conditions_sound,
    ),
    Claim(
        "balance_lowers_e_inf",
        "paper: Algorithm 1",
        "paired log(E_inf Alg. 1 / E_inf baseline) at the last checkpoint",
        LOG_RATIO,
        ("metrics",),
        pair_settings("balance", "metrics", "last common checkpoint"),
        balance_lowers_e_inf,
    ),
    Claim(
        "balance_keeps_accuracy",
        "paper: Algorithm 1",
        "paired accuracy difference (Alg. 1 - baseline) at the last checkpoint",
        "accuracy",
        ("failure",),
        pair_settings("balance", "failure", "last common checkpoint"),
        balance_keeps_accuracy,
    ),
    Claim(
        "reweight_changes_profile_little",
        "paper: Algorithm 2",
        "paired log(E_inf Alg. 2 / E_inf baseline) at the last checkpoint",
        LOG_RATIO,
        ("metrics",),
        pair_settings("reweight", "metrics", "last common checkpoint"),
        reweight_changes_profile_little,
    ),
    Claim(
        "observability_lowers_trace_imbalance",
        "paper: Algorithm 3 (section 4, Table 1)",
        "trace imbalance of Alg. 3 / the baseline's",
        "ratio",
        ("algebraic_table",),
        single_setting,
        observability_lowers_trace_imbalance,
        log_axis=True,
    ),
    Claim(
        "algebraic_baseline_left_right_middle",
        "paper: section 4, Table 1",
        "min(left - right, right - middle) of the baseline",
        "density",
        ("algebraic_table",),
        single_setting,
        algebraic_baseline_left_right_middle,
    ),
    Claim(
        "algebraic_balance_e_inf_near_zero",
        "paper: section 4, Table 1",
        "E_inf of Algorithm 1",
        "E_inf",
        ("algebraic_table",),
        single_setting,
        algebraic_balance_e_inf_near_zero,
        log_axis=True,
    ),
    Claim(
        "algebraic_balance_z_grows",
        "paper: section 4, Table 1",
        "log(Z Alg. 1 / Z baseline)",
        LOG_RATIO,
        ("algebraic_table",),
        single_setting,
        algebraic_balance_z_grows,
    ),
    Claim(
        "algebraic_reweight_moves_little",
        "paper: section 4, Table 1",
        "log(E_inf Alg. 2 / E_inf baseline)",
        LOG_RATIO,
        ("algebraic_table",),
        single_setting,
        algebraic_reweight_moves_little,
    ),
    Claim(
        "algebraic_observability_right_below_middle",
        "paper: section 4, Table 1",
        "LIM of Algorithm 3",
        "LIM",
        ("algebraic_table",),
        single_setting,
        algebraic_observability_right_below_middle,
    ),
    Claim(
        "probe_bias_falls",
        "paper: section 4, probes",
        "|relative bias| at the most probes / at the fewest",
        "ratio",
        ("algebraic_probes",),
        single_setting,
        probe_bias_falls,
        log_axis=True,
    ),
    Claim(
        "probe_spread_falls",
        "paper: section 4, probes",
        "relative spread at the most probes / at the fewest",
        "ratio",
        ("algebraic_probes",),
        single_setting,
        probe_spread_falls,
        log_axis=True,
    ),
    # The paper's validation protocol (section 4.5) on trained runs: lostmid.evidence.validation_claims,
    # docs/validation.md.
    Claim(
        "balance_lowers_e_inf_at_matched_accuracy",
        "paper: Algorithm 1 (validation, section 4.5)",
        "paired log(E_inf Alg. 1 / E_inf baseline), each arm at its own mid-training checkpoint",
        LOG_RATIO,
        ("failure", "metrics"),
        vc.uniform_arm_settings("balance", "metrics", (vc.MATCHED,)),
        vc.t_result(vc.balance_e_inf_effect),
    ),
    Claim(
        "reweight_changes_profile_little_at_matched_accuracy",
        "paper: Algorithm 2 (validation, section 4.5)",
        "paired log(E_inf Alg. 2 / E_inf baseline), each arm at its own mid-training checkpoint",
        LOG_RATIO,
        ("failure", "metrics"),
        vc.uniform_arm_settings("reweight", "metrics", (vc.MATCHED,)),
        vc.t_result(vc.reweight_e_inf_effect),
    ),
    Claim(
        "balance_lowers_jacobian_imbalance",
        "paper: Algorithm 1 (validation; loss-free reading)",
        "paired log ratio of the output-Jacobian density's imbalance (Alg. 1 / baseline)",
        LOG_RATIO,
        ("failure", "observability"),
        vc.uniform_arm_settings("balance", "observability", (vc.MATCHED, vc.LAST)),
        vc.t_result(vc.balance_jacobian_effect),
    ),
    Claim(
        "observability_lowers_trace_imbalance_on_transformer",
        "paper: Algorithm 3 (validation, section 4.5)",
        "paired log(E_obs Alg. 3 / E_obs baseline) of the exact trace density",
        LOG_RATIO,
        ("failure", "observability", "metrics"),
        vc.uniform_arm_settings("observability", "observability", (vc.MATCHED, vc.LAST)),
        vc.t_result(vc.observability_trace_effect),
    ),
    Claim(
        "flag_shift_raises_untrained_failure",
        "paper: position shift (section 4.5; check of the intervention)",
        "paired difference (shifted law - uniform law) of the failure rate on the under-trained half of the flags",
        "failure rate",
        ("failure",),
        vc.shift_settings(remedies=False),
        vc.t_result(vc.shift_effect),
    ),
    Claim(
        "remedy_recalls_untrained_positions",
        "paper: position shift (section 4.5)",
        "paired difference (remedy - baseline, same shifted law) of the failure rate on the under-trained half",
        "failure rate",
        ("failure",),
        vc.shift_settings(remedies=True),
        vc.t_result(vc.shift_effect),
    ),
    Claim(
        "remedy_time_overhead",
        "paper: overhead (sections 3.8, 4.5)",
        "geometric mean over seeds of the time per step ratio",
        "ratio",
        ("train",),
        vc.overhead_settings,
        vc.t_result(vc.time_effect, log_scale=True),
        log_axis=True,
    ),
    Claim(
        "remedy_memory_overhead",
        "paper: overhead (sections 3.8, 4.5)",
        "geometric mean over seeds of the peak memory ratio",
        "ratio",
        ("train",),
        vc.overhead_settings,
        vc.t_result(vc.memory_effect, log_scale=True),
        log_axis=True,
    ),
    Claim(
        "penalty_strength_lowers_its_target",
        "paper: ablation over strength (section 4.5)",
        "per-seed slope of the log target imbalance on strength / the largest strength (baseline = 0)",
        LOG_RATIO,
        ("failure", "metrics"),
        vc.ladder_settings,
        vc.t_result(vc.strength_effect),
    ),
]

CLAIMS_BY_NAME = {claim.name: claim for claim in CLAIMS}


NO_VERDICT = ("not run", "not evaluable")  # how the method of a row without a verdict begins
NOT_RUN_RULE = "No verdict: the claim was not evaluated on this run (the method says what is missing)."
NOT_EVALUABLE_RULE = "No verdict: the claim is not evaluable on this run (the method says why)."


@dataclass
class Evaluation:
    """One row of the table with what made it: the claim, its setting and result (None: not run)."""

    claim: Claim
    setting: Setting
    result: Result | None
    row: dict


def _no_verdict(method: str) -> bool:
    return method.startswith(NO_VERDICT)


def _not_run_row(claim: Claim, reason: str, setting: Setting | None = None) -> dict:
    interval = st.Interval(math.nan, math.nan, math.nan, 0, reason if _no_verdict(reason) else f"not run: {reason}")
    row = _row_of(
        claim, setting or Setting(), Result(interval, dec.DecisionRule("at_most", 0.0, quantity=claim.statistic))
    )
    return {**row, "rule": NOT_RUN_RULE, "rule_kind": "none", "margin": math.nan}


def _row_of(claim: Claim, setting: Setting, result: Result) -> dict:
    """The row of one result. A setting marked not evaluable keeps its computed estimate and interval
    but gets no verdict; so does a result whose method says it was not run or is not evaluable."""
    interval = result.interval
    if setting.not_evaluable:
        measured = interval.method.removeprefix("not evaluable: ")
        interval = interval._replace(method=f"not evaluable: {setting.not_evaluable}; {measured}")
    row = {**dec.claim_row(interval, result.rule), "rule": result.rule_words()}
    if _no_verdict(interval.method):
        why = NOT_RUN_RULE if interval.method.startswith("not run") else NOT_EVALUABLE_RULE
        row.update(verdict=dec.INCONCLUSIVE, rule=f"{why} The rule that would apply: {row['rule']}")
    return {
        "claim": claim.name,
        "source": claim.source,
        "setting": setting.words(),
        "variant": setting.variant,
        "L": setting.L,
        "depth": setting.depth,
        "residual": setting.residual,
        "checkpoint": setting.checkpoint,
        "statistic": claim.statistic,
        "unit": claim.unit,
        **row,
        "rule_kind": result.rule.kind,
        "margin": result.rule.margin,
        "note": result.note,
        "log_axis": claim.log_axis,
        "reading": setting.reading,
        # Outside a family (until evidence_table says otherwise) the row's own interval decides.
        "family_size": 0,
        "adjusted_level": result.rule.level,
        "adjusted_low": interval.low,
        "adjusted_high": interval.high,
        "adjusted_verdict": row["verdict"],
    }


def _evaluations(claim: Claim, inputs: Inputs, ev: EvidenceSettings) -> list[Evaluation]:
    missing = [name for name in claim.needs if getattr(inputs, name) is None]
    if missing:
        reason = f"not run: table {', '.join(missing)} not given"
        return [Evaluation(claim, Setting(), None, _not_run_row(claim, reason))]
    try:
        settings = claim.settings(inputs, ev)
    except NotRun as why:
        return [Evaluation(claim, Setting(), None, _not_run_row(claim, str(why)))]
    found = []
    for setting in settings:
        if setting.missing:
            found.append(Evaluation(claim, setting, None, _not_run_row(claim, setting.missing, setting)))
            continue
        try:
            result = claim.compute(inputs, ev, setting)
        except NotRun as why:
            found.append(Evaluation(claim, setting, None, _not_run_row(claim, str(why), setting)))
            continue
        found.append(Evaluation(claim, setting, result, _row_of(claim, setting, result)))
    return found


def evaluate_claim(claim: Claim, inputs: Inputs, ev: EvidenceSettings) -> list[dict]:
    """The rows of one claim: one per setting, or one "not run" row saying what is missing (each
    row decided by its own interval: the family-wise correction is ``evidence_table``'s)."""
    return [e.row for e in _evaluations(claim, inputs, ev)]


def in_family(e: Evaluation) -> bool:
    """A row counts in its claim's family when it has a verdict read off an interval over seeds
    (two or more seeds, finite bounds): not-run and not-evaluable rows make no claim, and a
    deterministic value has no sampling error to correct."""
    row = e.row
    return (
        e.claim.family is not None
        and e.result is not None
        and not _no_verdict(row["method"])
        and row["n_seeds"] >= 2
        and math.isfinite(row["ci_low"])
        and math.isfinite(row["ci_high"])
    )


def family_wise(evaluations: list[Evaluation], inputs: Inputs, ev: EvidenceSettings) -> None:
    """Bonferroni: each of the k rows of a family is decided again, by the same rule, on its interval
    at level 1 - (1 - level) / k (recomputed from the per-seed effects); if every such interval
    covers its true value, which happens with probability at least ``level``, no row of the family
    is wrongly supported or wrongly contradicted. Fills the adjusted_* columns in place."""
    families: dict[str, list[Evaluation]] = {}
    for e in evaluations:
        if in_family(e):
            families.setdefault(e.claim.family, []).append(e)
    for members in families.values():
        k = len(members)
        adjusted = replace(ev, level=1 - (1 - ev.level) / k)
        for e in members:
            result = e.claim.compute(inputs, adjusted, e.setting)
            low, high = result.interval.low, result.interval.high
            e.row.update(
                family_size=k,
                adjusted_level=adjusted.level,
                adjusted_low=low,
                adjusted_high=high,
                adjusted_verdict=dec.verdict(low, high, result.rule),
            )


def evidence_table(inputs: Inputs, ev: EvidenceSettings, claims: list[Claim] | None = None) -> pd.DataFrame:
    """The evidence table: one row per (claim, setting), in the order of ``CLAIMS``, with the
    family-wise correction of the blog's rows."""
    evaluations = [e for claim in (CLAIMS if claims is None else claims) for e in _evaluations(claim, inputs, ev)]
    family_wise(evaluations, inputs, ev)
    table = pd.DataFrame([e.row for e in evaluations], columns=COLUMNS + ["log_axis"])
    bad = (set(table.verdict) | set(table.adjusted_verdict)) - set(dec.VERDICTS)
    if bad:
        raise RuntimeError(f"unexpected verdicts {bad}")
    return table.astype(
        {"L": "Int64", "depth": "Int64", "n_seeds": "int64", "residual": "boolean", "family_size": "int64"}
    )


def markdown(table: pd.DataFrame) -> str:
    """The evidence table as Markdown for the README: one line per row, then the decision rules.

    The last column is the family-wise verdict of the rows in a family (with the adjusted interval
    in the rules below), "–" for the rows outside one; a table written before the correction
    existed has none."""
    lines = [
        "| # | claim | source | setting | statistic (unit) | estimate [interval] | seeds | verdict | family-wise |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rules = []

    def cell(text) -> str:
        return str(text).replace("|", "\\|")

    for i, row in enumerate(table.itertuples(index=False), 1):
        family = getattr(row, "family_size", 0) or 0
        adjusted = f"**{row.adjusted_verdict}**" if family else "–"
        statistic = f"{cell(row.statistic)} ({row.unit})"
        lines.append(
            f"| {i} | {row.claim} | {cell(row.source)} | {cell(row.setting)} | {statistic} | {estimate_words(row)} | "
            f"{row.n_seeds or '–'} | **{row.verdict}** | {adjusted} |"
        )
        correction = (
            f" Family-wise (Bonferroni over the {family} rows of its family): {row.adjusted_level:.2%} "
            f"interval [{row.adjusted_low:.3g}, {row.adjusted_high:.3g}], {row.adjusted_verdict}."
            if family
            else ""
        )
        rules.append(f"{i}. {row.method}. {row.rule}{correction}" + (f" Note: {row.note}." if row.note else ""))
    return "\n".join(lines) + "\n\nMethods and decision rules, by row:\n\n" + "\n".join(rules) + "\n"


__all__ = [
    "CLAIMS",
    "CLAIMS_BY_NAME",
    "COLUMNS",
    "Claim",
    "EvidenceError",
    "Inputs",
    "NotRun",
    "Result",
    "Setting",
    "evaluate_claim",
    "evidence_table",
    "markdown",
    "mid_training_step",
]
