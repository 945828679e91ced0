"""Controls for the blog's fix in the evidence table: every arm against its baseline and against the literal
reading, paired by seed, in its own family; planted effects give the verdicts they should."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from test_evidence import CHANCE, EV, MODEL, failure_table, summary_table

from lostmid.evidence import claims

FIT = {"remedy": {"kind": "bias", "fit": {"target": "output_jacobian"}}}
VARIANTS = {
    "baseline": {},
    "literal": FIT,
    "ramp": {"remedy": {"kind": "bias", "control": {"of": "literal", "rule": "lag_ramp"}}},
    "shuffled": {"remedy": {"kind": "bias", "control": {"of": "literal", "rule": "row_shuffle", "seed": 1}}},
}
SEEDS = range(8)
STEEP, FLAT = (-3.5, 3.0), (-1.5, 0.0)  # mid-training curves: late flags fail more, or every flag alike
BLOG_E = claims.CLAIMS_BY_NAME["debiased_has_less_position_preference"]
MECHANISM_CLAIMS = [c for c in claims.CLAIMS if c.name.startswith("arm_")]  # the controls' rows


def summary(name: str, inserted_before: float = 6.0, inserted_after: float = 6.0, **fit) -> pd.DataFrame:
    """A bias_fit_summary of one arm (test_evidence.summary_table) with its imbalance in the trained model."""
    return summary_table(name, **fit).assign(
        inserted_imbalance_before=inserted_before, inserted_imbalance_after=inserted_after
    )


SUMMARY = pd.concat([summary(name) for name in ("literal", "ramp", "shuffled")])


def rows(failure, bias_summary=SUMMARY) -> pd.DataFrame:
    inputs = claims.Inputs(variants=VARIANTS, model=MODEL, failure=failure, bias_summary=bias_summary)
    return claims.evidence_table(inputs, EV, [BLOG_E, *MECHANISM_CLAIMS]).set_index(["claim", "variant"])


@pytest.fixture(scope="module")
def failure():
    """Chance at step 0, the mid-training curve at step 100, learned at 200: the literal reading and the ramp
    remove the preference, the shuffle keeps the baseline's."""
    curves = {"baseline": STEEP, "literal": FLAT, "ramp": FLAT, "shuffled": STEEP}
    return pd.concat(
        [
            failure_table(name, {0: CHANCE, 100: curve, 200: (-5.0, 0.0)}, SEEDS, rng=np.random.default_rng(i), n=2048)
            for i, (name, curve) in enumerate(curves.items())
        ]
    )


@pytest.fixture(scope="module")
def planted(failure):
    return rows(failure)


def test_an_arm_that_removes_the_preference_is_supported_and_one_that_keeps_it_contradicted(planted):
    for claim in ("arm_has_less_late_minus_early_failure", "arm_has_less_position_preference"):
        assert planted.loc[(claim, "ramp"), "verdict"] == "supported"
        assert planted.loc[(claim, "literal"), "verdict"] == "supported"
        assert planted.loc[(claim, "shuffled"), "verdict"] == "contradicted"
    assert "paired by seed" in planted.loc[("arm_has_less_late_minus_early_failure", "ramp"), "method"]


def test_against_the_literal_reading_an_equal_arm_is_equivalent_and_the_other_differs(planted):
    assert planted.loc[("arm_preference_as_literal", "ramp"), "verdict"] == "supported"
    assert planted.loc[("arm_preference_as_literal", "shuffled"), "verdict"] == "contradicted"
    assert planted.loc[("arm_preference_as_literal", "shuffled"), "setting"].startswith("shuffled vs literal")
    assert ("arm_preference_as_literal", "literal") not in planted.index  # no row of the literal against itself


def test_the_rows_form_their_own_family_and_controls_are_no_reading_of_the_blogs_fix(planted):
    mechanism = planted[planted.source.str.startswith("controls for the fix") & (planted.family_size > 0)]
    k = len(mechanism)
    assert k >= 9 and (mechanism.family_size == k).all()  # the mechanism family alone
    blog = planted.loc["debiased_has_less_position_preference"]
    assert set(blog.index) == {"literal"} and (blog.family_size == 1).all()  # no control among the blog's readings
    assert all(c.family == "mechanism" for c in MECHANISM_CLAIMS if c.family)


def test_a_control_is_not_gated_on_flattening_and_a_fit_is_gated_on_what_it_is_for(failure):
    nothing_flat = pd.concat(
        [summary("literal", after=3.9), summary("ramp", 6.0, 6.6, after=4.1), summary("shuffled", after=4.1)]
    )
    table = rows(failure, nothing_flat)
    assert table.loc[("arm_has_less_late_minus_early_failure", "ramp"), "verdict"] == "supported"
    # the literal fit did not flatten its own held-out profile: no verdict on it, nor on an arm against it;
    # under the rule as first written (its guard only) it was decided, and the row says so
    literal = table.loc[("arm_has_less_late_minus_early_failure", "literal")]
    assert literal.method.startswith("not evaluable") and "bias_fit_flattens_profile is" in literal.method
    assert literal.verdict_as_first_written == "supported" and "mechanism_fit_gate" in literal.deviations
    assert table.loc[("arm_preference_as_literal", "ramp"), "method"].startswith("not evaluable")
    # the flatness is a measured property instead: here the ramp makes the trained model less flat
    assert table.loc[("arm_flattens_trained_model_at_init", "ramp"), "verdict"] == "contradicted"
    guard_failed = pd.concat([summary("literal", accepted=False), summary("ramp"), summary("shuffled")])
    table = rows(failure, guard_failed)
    assert table.loc[("arm_has_less_late_minus_early_failure", "literal"), "method"].startswith("not evaluable")
    assert table.loc[("arm_preference_as_literal", "ramp"), "method"].startswith("not evaluable")
    assert table.loc[("arm_has_less_late_minus_early_failure", "ramp"), "verdict"] == "supported"


def test_the_trained_models_flatness_reads_the_inserted_imbalance(failure):
    table = rows(failure, pd.concat([summary("literal"), summary("ramp", 6.0, 2.0), summary("shuffled")]))
    row = table.loc[("arm_flattens_trained_model_at_init", "ramp")]
    assert row.estimate == pytest.approx(np.log(2.0 / 6.0)) and row.verdict == "supported"
    assert "trained model 6 -> 2" in row.note


def test_an_arm_that_keeps_the_task_is_equivalent_at_the_last_checkpoint(planted):
    row = planted.loc[("arm_keeps_accuracy", "ramp")]
    assert row.verdict == "supported" and row.checkpoint == "last common checkpoint" and "step 200" in row.method


def test_the_figure_draws_each_arms_b_beside_its_failure_and_its_own_references(failure, tmp_path, monkeypatch):
    from lostmid.analysis.bias_fit import bias_long
    from lostmid.catalogue import FIGURES
    from lostmid.plots import remedies

    nores = {"model": {"residual": False}}
    variants = {**VARIANTS, "baseline_nores": nores, "literal_nores": {**nores, **FIT}}
    renamed = {"variant": {"baseline": "baseline_nores", "literal": "literal_nores"}}
    curves = failure[failure.variant.isin(["baseline", "literal"])].replace(renamed)
    arms = ("literal", "ramp", "literal_nores")
    matrices = pd.concat([bias_long(torch.eye(16)).assign(variant=name, L=16, depth=2) for name in arms])
    drawn = []
    monkeypatch.setattr(remedies, "save", lambda fig, path: drawn.append(fig))
    remedies.mechanism_controls(
        matrices,
        pd.concat([failure, curves]),
        tmp_path / "m.png",
        variants,
        EV.mid_accuracy,
    )
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in drawn[0].axes if ax.get_legend()]
    assert [[label.split(":")[0] for label in legend] for legend in legends] == [
        ["baseline", "literal"],
        ["baseline_nores", "literal_nores"],  # each arm's own reference
        ["baseline", "ramp"],
    ]
    assert FIGURES["mechanism_controls"].tables == ("bias_matrix", "failure")


def test_the_model_free_row_at_every_length_reads_its_own_arm_where_two_fits_share_a_baseline(failure):
    """Two bias arms of one baseline (the literal fit, which removes the preference, and a second fit, which
    keeps it): each arm's (e) row at every L is its own, not the first arm's twice."""
    variants = {"baseline": {}, "literal": FIT, "fit2": FIT}
    second = failure[failure.variant == "shuffled"].assign(variant="fit2")  # the baseline's steep curve
    inputs = claims.Inputs(
        variants=variants,
        model=MODEL,
        failure=pd.concat([failure[failure.variant.isin(["baseline", "literal"])], second]),
        bias_summary=pd.concat([summary("literal"), summary("fit2")]),
    )
    claim = claims.CLAIMS_BY_NAME["length_fix_lowers_late_minus_early"]
    table = claims.evidence_table(inputs, EV, [claim]).set_index("variant")
    assert table.loc["literal", "verdict"] == "supported" and table.loc["fit2", "verdict"] == "contradicted"


def test_the_model_free_row_at_every_length_gives_no_verdict_on_a_fit_that_did_not_flatten(failure):
    """The literal arm removes the preference, but its fit left its held-out profile as imbalanced as at
    B = 0: no verdict on the fix (as the blog's own (e) rows); the rule as first written decided it."""
    inputs = claims.Inputs(
        variants={"baseline": {}, "literal": FIT},
        model=MODEL,
        failure=failure[failure.variant.isin(["baseline", "literal"])],
        bias_summary=summary("literal", after=3.9),
    )
    claim = claims.CLAIMS_BY_NAME["length_fix_lowers_late_minus_early"]
    row = claims.evidence_table(inputs, EV, [claim]).set_index("variant").loc["literal"]
    assert row.method.startswith("not evaluable") and "bias_fit_flattens_profile is" in row.method
    assert row.verdict_as_first_written == "supported" and "length_fit_gate" in row.deviations
