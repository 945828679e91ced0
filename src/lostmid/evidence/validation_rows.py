"""The rows of the paper's validation protocol (section 4.5) in the evidence table (docs/validation.md): Algorithms
1-3 beside their baselines where the measure carries signal, the position shift, the overhead and the strength
ladder, each with its rule (``lostmid.evidence.validation_claims`` and ``overhead_claims`` compute them)."""

from __future__ import annotations

from lostmid.evidence import decisions as dec
from lostmid.evidence.inputs import CHECK, CLAIM, FAILURE_RATE, LOG_RATIO, PAPER_VALIDATION, Claim
from lostmid.evidence.overhead_claims import memory_effect, overhead_settings, time_effect
from lostmid.evidence.validation_claims import (
    INTERPOLATED,
    LAST,
    MATCHED,
    balance_e_inf_effect,
    balance_jacobian_effect,
    ladder_settings,
    observability_trace_effect,
    reweight_e_inf_effect,
    shift_effect,
    shift_settings,
    strength_effect,
    t_result,
    uniform_arm_settings,
)

# The check that the position shift bites: its own row, and the gate of the remedies' shift rows.
SHIFT_CHECK = Claim(
    "flag_shift_raises_untrained_failure",
    "paper: position shift (section 4.5; check of the intervention)",
    "paired difference (shifted law - uniform law) of the failure rate on the under-trained half of the flags",
    FAILURE_RATE,
    ("failure",),
    shift_settings(),
    t_result(shift_effect),
    kind=CHECK,
    rule=dec.Rule(
        "greater_than_zero",
        "recall_margin",
        "the failure rate on the flags the {law} law under-trains ({half}), {law} law - uniform law",
    ),
    estimator="t",
    checkpoints=("last common checkpoint", "mid-training"),
)

CLAIMS = [
    Claim(
        "balance_lowers_e_inf_at_matched_accuracy",
        "paper: Algorithm 1 (validation, section 4.5)",
        "paired log(E_inf Alg. 1 / E_inf baseline), each arm at its own mid-training checkpoint",
        LOG_RATIO,
        ("failure", "metrics"),
        uniform_arm_settings("balance", "metrics", (MATCHED, INTERPOLATED)),
        t_result(balance_e_inf_effect),
        family=PAPER_VALIDATION,
        kind=CLAIM,
        rule=dec.Rule("less_than_zero", "log_ratio_margin", "log(E_inf Alg. 1 / E_inf baseline)"),
        estimator="t",
        checkpoints=("mid-training", "matched accuracy"),
    ),
    Claim(
        "reweight_changes_profile_little_at_matched_accuracy",
        "paper: Algorithm 2 (validation, section 4.5)",
        "paired log(E_inf Alg. 2 / E_inf baseline), each arm at its own mid-training checkpoint",
        LOG_RATIO,
        ("failure", "metrics"),
        uniform_arm_settings("reweight", "metrics", (MATCHED,)),
        t_result(reweight_e_inf_effect),
        family=PAPER_VALIDATION,
        kind=CLAIM,
        rule=dec.Rule("equivalent_to_zero", "log_ratio_margin", "log(E_inf Alg. 2 / E_inf baseline)"),
        estimator="t",
        checkpoints=("mid-training",),
    ),
    Claim(
        "balance_lowers_jacobian_imbalance",
        "paper: Algorithm 1 (validation; loss-free reading)",
        "paired log ratio of the output-Jacobian density's imbalance (Alg. 1 / baseline)",
        LOG_RATIO,
        ("failure", "observability"),
        uniform_arm_settings("balance", "observability", (MATCHED, LAST)),
        t_result(balance_jacobian_effect),
        family=PAPER_VALIDATION,
        kind=CLAIM,
        rule=dec.Rule("less_than_zero", "log_ratio_margin", "log(output-Jacobian imbalance Alg. 1 / baseline's)"),
        estimator="t",
        checkpoints=("mid-training", "last common checkpoint"),
    ),
    Claim(
        "observability_lowers_trace_imbalance_on_transformer",
        "paper: Algorithm 3 (validation, section 4.5)",
        "paired log(E_obs Alg. 3 / E_obs baseline) of the exact trace density",
        LOG_RATIO,
        ("failure", "observability", "metrics"),
        uniform_arm_settings("observability", "observability", (MATCHED, LAST)),
        t_result(observability_trace_effect),
        family=PAPER_VALIDATION,
        kind=CLAIM,
        rule=dec.Rule("less_than_zero", "log_ratio_margin", "log(E_obs Alg. 3 / E_obs baseline)"),
        estimator="t",
        checkpoints=("mid-training", "last common checkpoint"),
    ),
    SHIFT_CHECK,
    Claim(
        "remedy_recalls_untrained_positions",
        "paper: position shift (section 4.5)",
        "paired difference (remedy - baseline, same shifted law) of the failure rate on the under-trained half",
        FAILURE_RATE,
        ("failure",),
        shift_settings(gated_by=SHIFT_CHECK),
        t_result(shift_effect),
        family=PAPER_VALIDATION,
        kind=CLAIM,
        rule=dec.Rule(
            "less_than_zero",
            "recall_margin",
            "the failure rate on the flags the {law} law under-trains ({half}), remedy - baseline",
        ),
        estimator="t",
        checkpoints=("last common checkpoint", "mid-training"),
    ),
    *(
        Claim(
            f"remedy_{name}_overhead",
            "paper: overhead (sections 3.8, 4.5)",
            f"geometric mean over seeds of the {words} ratio",
            "ratio",
            ("train",),
            overhead_settings,
            t_result(effect, log_scale=True),
            log_axis=True,
            family=PAPER_VALIDATION,
            kind=CLAIM,
            rule=dec.Rule("at_most", "overhead_ratio", "the remedy's {what} / its baseline's"),
            estimator="log_mean",
            checkpoints=("every training step",),
        )
        for name, words, effect in (("time", "time per step", time_effect), ("memory", "peak memory", memory_effect))
    ),
    Claim(
        "penalty_strength_lowers_its_target",
        "paper: ablation over strength (section 4.5)",
        "per-seed slope of the log target imbalance on strength / the largest strength (baseline = 0)",
        LOG_RATIO,
        ("failure", "metrics"),
        ladder_settings,
        t_result(strength_effect),
        family=PAPER_VALIDATION,
        kind=CLAIM,
        rule=dec.Rule(
            "less_than_zero",
            "log_ratio_margin",
            "the fitted change of log {target} from no penalty to {key} = {top:g}",
        ),
        estimator="t",
        checkpoints=("mid-training",),
    ),
]
