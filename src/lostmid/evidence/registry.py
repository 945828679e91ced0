"""The registry of the evidence stage: every claim of the blog post and of the paper that the
workflow can test, as one ``Claim`` row each, in the order of the evidence table.

A ``Claim`` names its source, the statistic (what is estimated, in which unit), the tables it
reads, the settings it is evaluated in, the function named after it (in ``blog_claims``,
``paper_claims``, ``fit_checks``, ``validation_claims``, ...) that returns, for one setting, the
``Estimate`` (an interval, its per-unit sample, a note), and the decision rule fixed in advance
(``decisions.Rule``: its kind, the evidence setting of its margin, its quantity in words).
``lostmid.evidence.claims`` evaluates them and ``decisions.decide`` reads the verdicts off. The
families declared beside their statistics (retrieval, length, influence predicts failure, the
controls for the fix) export their rows as ``CLAIMS``, joined here in the table's order.
"""

from __future__ import annotations

from lostmid.evidence import (
    blog_claims,
    fit_checks,
    influence_failure,
    length_claims,
    mechanism_claims,
    retrieval_claims,
    robustness,
    validation_rows,
)
from lostmid.evidence import decisions as dec
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
)
from lostmid.evidence.inputs import (
    BLOG,
    CHECK,
    CLAIM,
    FAILURE_RATE,
    LOG_RATIO,
    ORDERS,
    SLOPE,
    Claim,
    pair_settings,
)
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
from lostmid.evidence.robustness import (
    debiased_has_less_position_preference_interpolated,
    debiased_has_less_position_preference_model_free,
    failure_rises_with_position_model_free,
    interpolated_preference_settings,
)

# Every claim of the blog and the paper, with its statistic, decision rule and margin.
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
        kind=CLAIM,
        rule=blog_claims.POSITION_EFFECT_RULE,
        estimator="t",
        checkpoints=("mid-training",),
    ),
    # (a) and (e) again with a model-free statistic (estimator robustness): outside the family,
    # since they re-estimate the same claims; the note says where the two verdicts differ.
    Claim(
        "failure_rises_with_position_model_free",
        "blog (a), model-free",
        "per-seed failure rate on late flags (p > 1/2) minus early flags (p < 1/2) at mid-training",
        FAILURE_RATE,
        ("failure",),
        baseline_settings,
        failure_rises_with_position_model_free,
        kind=CLAIM,
        rule=robustness.MODEL_FREE_POSITION_RULE,
        estimator="t",
        checkpoints=("mid-training",),
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
        kind=CLAIM,
        rule=dec.Rule(
            "greater_than_zero",
            "init_growth_margin",
            "the orders of magnitude (log10) by which the first token's output-Jacobian norm E||d logits_L/d x_j|| "
            "over the last's grows from depth 1 to depth {init_depth}",
        ),
        estimator="paired_t",
        checkpoints=("initialization",),
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
        kind=CLAIM,
        rule=dec.Rule(
            "greater_than_zero",
            "density_growth_margin",
            "the orders of magnitude (log10) by which the first token's influence density m_j (squared loss "
            "gradient) over the last's grows from depth 1 to depth {init_depth}",
        ),
        estimator="paired_t",
        checkpoints=("initialization",),
    ),
    # The checks of the blog's fit (lostmid.evidence.fit_checks), which gate (c)-(e).
    *fit_checks.CLAIMS,
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
        kind=CLAIM,
        rule=dec.Rule(
            "at_least",
            "recency_margin",
            "the fall of the fitted bias from the nearest key to the farthest (least-squares line of the mean bias "
            "by lag over lags >= 1, the diagonal left out)",
        ),
        estimator="deterministic",
        checkpoints=("initialization",),
    ),
    Claim(
        "debiased_trains_faster",
        "blog (d), with (e)'s second half",
        "paired difference of the mean failure rate over training (area under the failure curve)",
        FAILURE_RATE,
        ("failure",),
        debiased_speed_settings,
        debiased_trains_faster,
        family=BLOG,
        kind=CLAIM,
        rule=blog_claims.SPEED_RULE,
        estimator="paired_t",
        checkpoints=("over training",),
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
        kind=CLAIM,
        rule=blog_claims.PREFERENCE_RULE,
        estimator="paired_t",
        checkpoints=("mid-training",),
    ),
    Claim(
        "debiased_has_less_position_preference_model_free",
        "blog (e), model-free",
        "paired difference of the late minus early failure rate, each arm at its own mid-training",
        FAILURE_RATE,
        ("failure",),
        debiased_preference_settings,
        debiased_has_less_position_preference_model_free,
        kind=CLAIM,
        rule=robustness.MODEL_FREE_PREFERENCE_RULE,
        estimator="paired_t",
        checkpoints=("mid-training",),
    ),
    Claim(
        "debiased_has_less_position_preference_interpolated",
        "blog (e), matched accuracy by interpolation",
        "paired difference of the per-seed logistic slope, interpolated to where each seed's accuracy crosses "
        "the mid-training level",
        SLOPE,
        ("failure",),
        interpolated_preference_settings,
        debiased_has_less_position_preference_interpolated,
        kind=CLAIM,
        rule=dec.Rule(
            "less_than_zero",
            "slope_margin",
            "the difference (debiased - baseline) of the slope at matched accuracy",
        ),
        estimator="paired_t",
        checkpoints=("matched accuracy",),
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
        kind=CHECK,
        rule=dec.Rule("at_most", "structural_tolerance", "the largest relative deviation from the closed form"),
        estimator="deterministic",
        checkpoints=("none",),
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
        kind=CHECK,
        rule=dec.Rule("at_most", "flow_tolerance", "the median relative error of the predicted density flow"),
        estimator="log_mean",
        checkpoints=("every checkpoint",),
    ),
    Claim(
        "density_flow_error_falls_with_step",
        "paper: density flow (eq. 69)",
        "slope of log relative error on log eta",
        "log-log slope",
        ("density_flow",),
        flow_settings,
        density_flow_error_falls_with_step,
        kind=CHECK,
        rule=dec.Rule("greater_than_zero", 0.5, "the slope of log relative error on log eta"),
        estimator="t",
        checkpoints=("every checkpoint",),
    ),
    Claim(
        "sufficient_conditions_sound",
        "paper: sufficient conditions (soundness)",
        "rows where a sufficient condition holds and its conclusion fails",
        "count",
        ("conditions",),
        conditions_settings,
        sufficient_conditions_sound,
        kind=CLAIM,
        rule=dec.Rule("at_most", 0.0, "the number of rows where a sufficient condition holds and its conclusion fails"),
        estimator="deterministic",
        checkpoints=("every checkpoint",),
    ),
    Claim(
        "balance_lowers_e_inf",
        "paper: Algorithm 1",
        "paired log(E_inf Alg. 1 / E_inf baseline) at the last checkpoint",
        LOG_RATIO,
        ("metrics",),
        pair_settings("balance", "metrics", "last common checkpoint"),
        balance_lowers_e_inf,
        kind=CLAIM,
        rule=dec.Rule("less_than_zero", "log_ratio_margin", "log(E_inf Alg. 1 / E_inf baseline)"),
        estimator="paired_t",
        checkpoints=("last common checkpoint",),
    ),
    Claim(
        "balance_keeps_accuracy",
        "paper: Algorithm 1",
        "paired accuracy difference (Alg. 1 - baseline) at the last checkpoint",
        "accuracy",
        ("failure",),
        pair_settings("balance", "failure", "last common checkpoint"),
        balance_keeps_accuracy,
        kind=CLAIM,
        rule=dec.Rule("equivalent_to_zero", "accuracy_margin", "the accuracy difference (Alg. 1 - baseline)"),
        estimator="paired_t",
        checkpoints=("last common checkpoint",),
    ),
    Claim(
        "reweight_changes_profile_little",
        "paper: Algorithm 2",
        "paired log(E_inf Alg. 2 / E_inf baseline) at the last checkpoint",
        LOG_RATIO,
        ("metrics",),
        pair_settings("reweight", "metrics", "last common checkpoint"),
        reweight_changes_profile_little,
        kind=CLAIM,
        rule=dec.Rule("equivalent_to_zero", "log_ratio_margin", "log(E_inf Alg. 2 / E_inf baseline)"),
        estimator="paired_t",
        checkpoints=("last common checkpoint",),
    ),
    Claim(
        "reweight_keeps_accuracy",
        "paper: Algorithm 2 (section 4.5 asks for retrieval accuracy; check: the remedy still learns the task)",
        "paired difference (Alg. 2 - baseline) of evaluation accuracy at the last common checkpoint",
        "accuracy",
        ("failure",),
        pair_settings("reweight", "failure", "last common checkpoint"),
        mechanism_claims.arm_keeps_accuracy,
        kind=CHECK,
        rule=dec.Rule("equivalent_to_zero", "accuracy_margin", "the accuracy difference (Alg. 2 - baseline)"),
        estimator="paired_t",
        checkpoints=("last common checkpoint",),
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
        kind=CHECK,
        rule=dec.Rule("at_most", "imbalance_ratio", "trace imbalance of Alg. 3 / baseline's"),
        estimator="deterministic",
        checkpoints=("none",),
    ),
    Claim(
        "algebraic_baseline_left_right_middle",
        "paper: section 4, Table 1",
        "min(left - right, right - middle) of the baseline",
        "density",
        ("algebraic_table",),
        single_setting,
        algebraic_baseline_left_right_middle,
        kind=CLAIM,
        rule=dec.Rule("greater_than_zero", "algebraic_tolerance", "min(left - right, right - middle)"),
        estimator="deterministic",
        checkpoints=("none",),
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
        kind=CHECK,
        rule=dec.Rule("at_most", "einf_zero", "E_inf of Alg. 1"),
        estimator="deterministic",
        checkpoints=("none",),
    ),
    Claim(
        "algebraic_balance_z_grows",
        "paper: section 4, Table 1",
        "log(Z Alg. 1 / Z baseline)",
        LOG_RATIO,
        ("algebraic_table",),
        single_setting,
        algebraic_balance_z_grows,
        kind=CLAIM,
        rule=dec.Rule("greater_than_zero", "z_growth_margin", "log(Z Alg. 1 / Z baseline)"),
        estimator="deterministic",
        checkpoints=("none",),
    ),
    Claim(
        "algebraic_reweight_moves_little",
        "paper: section 4, Table 1",
        "log(E_inf Alg. 2 / E_inf baseline)",
        LOG_RATIO,
        ("algebraic_table",),
        single_setting,
        algebraic_reweight_moves_little,
        kind=CLAIM,
        rule=dec.Rule("equivalent_to_zero", "log_ratio_margin", "log(E_inf Alg. 2 / E_inf baseline)"),
        estimator="deterministic",
        checkpoints=("none",),
    ),
    Claim(
        "algebraic_observability_right_below_middle",
        "paper: section 4, Table 1",
        "LIM of Algorithm 3",
        "LIM",
        ("algebraic_table",),
        single_setting,
        algebraic_observability_right_below_middle,
        kind=CLAIM,
        rule=dec.Rule("less_than_zero", "algebraic_tolerance", "LIM of Alg. 3"),
        estimator="deterministic",
        checkpoints=("none",),
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
        kind=CHECK,
        rule=dec.Rule("at_most", "probe_ratio", "{what}"),
        estimator="deterministic",
        checkpoints=("none",),
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
        kind=CHECK,
        rule=dec.Rule("at_most", "probe_ratio", "{what}"),
        estimator="deterministic",
        checkpoints=("none",),
    ),
    # The paper's validation protocol (section 4.5) on trained runs (docs/validation.md).
    *validation_rows.CLAIMS,
    # The families declared beside their statistics, each module's CLAIMS in the table's order:
    # the retrieval stage (docs/retrieval.md, family "retrieval"); the sequence-length study (docs/length.md);
    # influence predicts failure (the blog's middle link, its own family, and the across-arms claim outside it);
    # the controls for the fix (docs/remedies.md, their own family).
    *retrieval_claims.CLAIMS,
    *length_claims.CLAIMS,
    *influence_failure.CLAIMS,
    *mechanism_claims.CLAIMS,
]

CLAIMS_BY_NAME = {claim.name: claim for claim in CLAIMS}


def markdown() -> str:
    """The declarations as a Markdown table (docs/evidence.md, "The claims"): one line per claim, its fields as
    declared, then what each estimator and each checkpoint means."""
    from lostmid.evidence.estimators import ESTIMATORS
    from lostmid.evidence.inputs import CHECKPOINTS

    def rule(r: dec.Rule) -> str:
        margin = f"`{r.margin}`" if isinstance(r.margin, str) else f"{r.margin:g}"
        return f"{r.kind}, {margin}" + (f" × {r.factor:g}" if r.factor != 1.0 else "")

    lines = [
        "| claim | kind | family | source | unit | reads | checkpoints | estimator | rule (kind, margin) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in CLAIMS:
        cells = (
            f"`{c.name}`",
            c.kind,
            c.family or "–",
            c.source,
            c.unit,
            ", ".join(c.needs) or "–",
            "; ".join(c.checkpoints),
            f"`{c.estimator}`",
            rule(c.rule),
        )
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |")
    used = {c.estimator for c in CLAIMS}
    estimators = [f"- `{name}`: {e.words}." for name, e in ESTIMATORS.items() if name in used]
    checkpoints = [f"- {name}: {words}." for name, words in CHECKPOINTS.items()]
    return (
        "\n".join(
            [
                *lines,
                "",
                "Estimators (`lostmid.evidence.estimators`):",
                "",
                *estimators,
                "",
                "Checkpoints:",
                "",
                *checkpoints,
            ]
        )
        + "\n"
    )
