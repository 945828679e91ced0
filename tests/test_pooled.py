"""Pooled evidence (lostmid.evidence.pooled): runs that repeat a seed set count once; fixed and random
effects over disjoint seed sets with their heterogeneity, from the declared runs file (docs/data/pooled_runs.csv,
typed from pages: no page keeps the pooled rows)."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lostmid.config import settings_from_section
from lostmid.evidence import pooled
from lostmid.evidence.settings import EvidenceSettings

from conftest import REPO

EV = settings_from_section(EvidenceSettings, {}, "evidence")
RUNS = REPO / "docs" / "data" / "pooled_runs.csv"


def runs_of(lines):
    columns = ["seed_set", "run", "n_seeds", "estimate", "ci_low", "ci_high"]
    frame = pd.DataFrame(lines, columns=columns)
    return frame.assign(claim="c", setting="s", level=0.95, rule="less_than_zero:log_ratio_margin")


def test_repeats_of_a_seed_set_count_once_as_their_mean_with_their_mean_standard_error():
    t = stats.t.ppf(0.975, 15)
    runs = runs_of(
        [
            ("0-15", "a", 16, -0.2, -0.2 - t * 0.3, -0.2 + t * 0.3),
            ("0-15", "b", 16, -0.6, -0.6 - t * 0.5, -0.6 + t * 0.5),
        ]
    )
    (line,) = pooled.per_seed_set(runs).itertuples()
    assert line.runs == 2 and line.estimate == pytest.approx(-0.4) and line.se == pytest.approx(0.4)


def test_the_fixed_effect_is_inverse_variance_and_identical_sets_have_no_heterogeneity():
    t15, t47 = stats.t.ppf(0.975, 15), stats.t.ppf(0.975, 47)
    runs = runs_of(
        [
            ("0-15", "a", 16, -1.0, -1.0 - t15 * 0.4, -1.0 + t15 * 0.4),
            ("200-247", "b", 48, -1.0, -1.0 - t47 * 0.2, -1.0 + t47 * 0.2),
        ]
    )
    (row,) = pooled.pooled_rows(runs, EV).itertuples()
    se = 1 / np.sqrt(1 / 0.4**2 + 1 / 0.2**2)
    assert row.fixed == pytest.approx(-1.0) and row.fixed_high - row.fixed == pytest.approx(1.959964 * se, rel=1e-5)
    assert row.Q == pytest.approx(0.0) and row.I2 == 0 and row.tau2 == 0 and row.random == pytest.approx(-1.0)
    assert row.verdict == "supported" and row.n_seeds == 64


def test_a_claim_on_one_seed_set_gets_no_pooled_row():
    t = stats.t.ppf(0.975, 15)
    runs = runs_of([("0-15", "a", 16, -1.0, -1.0 - t, -1.0 + t), ("0-15", "b", 16, -0.5, -0.5 - t, -0.5 + t)])
    assert pooled.pooled_rows(runs, EV).empty


def test_algorithm_1s_matched_accuracy_row_is_pooled_over_its_three_seed_sets():
    runs = pooled.read_runs(RUNS)
    rows = pooled.pooled_rows(runs, EV).set_index("claim")
    row = rows.loc["balance_lowers_e_inf_at_matched_accuracy"]
    assert row.seed_sets.startswith("0-15 (3 runs); 200-247 (1 run); 300-336 (2 runs)") and row.df == 2
    blog = rows.loc["debiased_has_less_position_preference_model_free"]  # the blog's (e): two runs of 500-519 once
    assert blog.seed_sets == "0-23 (1 run); 400-423 (1 run); 500-519 (2 runs)" and blog.n_seeds == 68


def test_the_random_effects_agree_with_statsmodels_where_its_tau2_is_not_negative():
    from statsmodels.stats.meta_analysis import combine_effects

    estimates, variances = np.array([-0.4, -0.965, -0.999]), np.array([0.1, 0.03, 0.07])
    reference = combine_effects(estimates, variances, method_re="dl")
    tau2 = pooled.dersimonian_laird_tau2(estimates, variances)
    assert tau2 == pytest.approx(reference.tau2) and pooled.cochran_q(estimates, variances) == pytest.approx(
        reference.q
    )
    assert pooled.inverse_variance(estimates, variances + tau2)[0] == pytest.approx(
        reference.summary_frame().loc["random effect"].eff
    )
