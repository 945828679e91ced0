"""The second study's estimators (lostmid.stats.study2): Firth's slope, the fit as a random draw, equivalence,
and influence beyond position with its sensitivity analyses."""

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from lostmid.errors import InputError
from lostmid.stats import study2
from lostmid.stats.effects import MeanEffect
from lostmid.study.reading import INCONCLUSIVE, NO_EFFECT


def test_firth_on_one_binary_covariate_is_the_log_odds_ratio_of_the_counts_each_plus_a_half():
    # The penalty derives the Haldane-Anscombe correction here: a check against a closed form.
    k, n = np.array([3.0, 40.0]), np.array([50.0, 60.0])
    slope = study2.firth_logistic(k, n, np.column_stack([np.ones(2), [0.0, 1.0]])).coef[1]
    expected = np.log((40.5 / 20.5) / (3.5 / 47.5))
    assert slope == pytest.approx(expected, rel=1e-8)


def test_firth_stays_finite_under_complete_separation_where_maximum_likelihood_does_not():
    p = np.linspace(0.125, 1.0, 15)
    failures = np.where(p > 0.5, 512.0, 0.0)  # no failure before the middle, every one after: separation
    slope = study2.firth_slope(failures, np.full(15, 512.0), p)
    assert np.isfinite(slope) and slope > 10


def test_firth_is_close_to_maximum_likelihood_when_the_counts_are_large_and_not_separated():
    p = np.linspace(0.125, 1.0, 15)
    n = np.full(15, 4000.0)
    failures = np.round(n / (1 + np.exp(-(-2.0 + 1.5 * p))))
    design = np.column_stack([np.ones(15), p])
    mle = sm.GLM(np.column_stack([failures, n - failures]), design, family=sm.families.Binomial()).fit()
    firth = study2.firth_logistic(failures, n, design)
    assert firth.coef == pytest.approx(mle.params, abs=2e-3)
    assert firth.se == pytest.approx(mle.bse, rel=1e-2)


def test_the_common_slope_solver_is_firth_with_one_intercept_per_seed_solved_by_blocks():
    # firth_common_slope solves the dense fit's Newton steps through the information's arrow form: the same fit,
    # checked against firth_logistic on the dense design, one seed separated (it fails only at the last position).
    rng = np.random.default_rng(5)
    p = np.tile(np.linspace(0.125, 1.0, 8), 5)
    seed = np.repeat(np.arange(5), 8)
    n = np.full(40, 64.0)
    failures = rng.binomial(64, 1 / (1 + np.exp(-(rng.normal(-2, 1, 5)[seed] + 1.5 * p)))).astype(float)
    failures[seed == 3] = np.where(p[seed == 3] == 1.0, 64.0, 0.0)
    dense = study2.firth_logistic(failures, n, np.column_stack([np.eye(5)[seed], p]))
    blocks = study2.firth_common_slope(failures, n, p, seed)
    assert blocks.coef == pytest.approx(dense.coef, abs=1e-9)
    assert blocks.se == pytest.approx(dense.se, rel=1e-9)
    assert blocks.iterations == dense.iterations


def test_firth_slope_is_zero_for_equal_rates_and_refuses_bad_counts():
    assert study2.firth_slope([5, 10], [50, 100], [0.2, 0.8]) == 0.0
    with pytest.raises(InputError, match="within 0..total"):
        study2.firth_logistic([6.0, 1.0], [5.0, 5.0], np.ones((2, 1)))


def test_per_seed_slopes_fit_each_seed_alone():
    rows = pd.DataFrame({"seed": [1, 1, 2, 2], "p": [0.0, 1.0] * 2, "failures": [3, 40, 0, 0], "n": [50, 60, 50, 60]})
    slopes = study2.per_seed_firth_slopes(rows)
    assert list(slopes.index) == [1, 2] and slopes[2] == 0.0
    assert slopes[1] == pytest.approx(np.log((40.5 / 20.5) / (3.5 / 47.5)), rel=1e-8)


def nested(block_means, per_fit=12, sd=0.05, seed=0):
    rng = np.random.default_rng(seed)
    index = pd.MultiIndex.from_tuples(
        [(f, s) for f in range(len(block_means)) for s in range(per_fit)], names=["fit", "seed"]
    )
    return pd.Series(np.repeat(block_means, per_fit) + rng.normal(0, sd, len(index)), index=index)


def test_the_fit_as_the_unit_widens_the_interval_when_fits_differ():
    # The referee's case: four fits whose block means differ (-0.092, -0.230, -0.086, -0.066).
    values = nested([-0.092, -0.230, -0.086, -0.066])
    by_fit = study2.fit_cluster_effect(values, "late - early")
    by_seed = MeanEffect(values.reset_index(drop=True), "seeds as independent")
    assert by_fit.n == 4 and by_fit.estimate == pytest.approx(values.mean())
    low, high = by_fit.interval(0.95)
    seed_low, seed_high = by_seed.interval(0.95)
    assert high - low > 3 * (seed_high - seed_low)
    mixed = study2.fit_mixed_effect(values, "late - early")
    assert mixed.n == 4 and mixed.estimate == pytest.approx(values.mean(), abs=1e-6)
    assert mixed.se > 2 * values.std(ddof=1) / np.sqrt(values.size)


def test_the_fit_as_the_unit_needs_seeds_nested_in_two_or_more_fits():
    with pytest.raises(InputError, match=r"indexed by \(fit, seed\)"):
        study2.fit_cluster_effect(pd.Series([1.0, 2.0]), "x")
    with pytest.raises(InputError, match="at least 2 independent fits"):
        study2.fit_cluster_effect(nested([0.1]), "x")


def test_equivalence_holds_only_when_the_90_interval_lies_inside_the_margin():
    small = MeanEffect(pd.Series(np.random.default_rng(1).normal(0.005, 0.01, 40)), "x")
    shown = study2.equivalence(small, margin=0.02)
    assert shown.equivalent and -0.02 < shown.low and shown.high < 0.02
    assert shown.low == pytest.approx(small.interval(0.90)[0])
    not_shown = study2.equivalence(small, margin=0.005)
    assert not not_shown.equivalent and not_shown.high > 0.005
    with pytest.raises(InputError, match="margin must be positive"):
        study2.equivalence(small, margin=0.0)


def influence_rows(beta, seeds=12, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(seeds):
        shift = rng.normal(0, 0.5)
        for f in range(2, 17):
            p = f / 16
            log_influence = -2 * p + shift + rng.normal(0, 0.4)
            eta = -2.5 + 1.0 * p + beta * log_influence
            rows.append((s, f, p, rng.binomial(512, 1 / (1 + np.exp(-eta))), 512, np.exp(log_influence)))
    return pd.DataFrame(rows, columns=["seed", "flag_pos", "p", "failures", "n", "influence"])


def test_the_influence_fits_recover_a_planted_effect_and_agree_on_none():
    planted = study2.influence_fits(influence_rows(beta=-0.8))
    assert list(planted) == list(study2.INFLUENCE_FITS)
    sd = np.log(influence_rows(beta=-0.8).influence).std()
    for effect in planted.values():
        assert effect.estimate == pytest.approx(-0.8 * sd, abs=0.1) and effect.n == 12
    none = study2.influence_fits(influence_rows(beta=0.0, seeds=48))
    assert study2.agreed_outcome(none, 0.95, "decrease", 0.187) == NO_EFFECT


def test_no_effect_stands_only_where_every_fit_reads_it():
    from lostmid.stats.effects import WaldEffect

    fits = {
        "gee_exchangeable": WaldEffect(-0.045, 0.03, 48, "x"),
        "gee_independence": WaldEffect(0.150, 0.05, 48, "x"),
        "seed_fixed_effects": WaldEffect(-0.044, 0.10, 48, "x"),  # its interval reaches -0.187
    }
    assert study2.agreed_outcome({"gee_exchangeable": fits["gee_exchangeable"]}, 0.95, "decrease", 0.187) == NO_EFFECT
    assert study2.agreed_outcome(fits, 0.95, "decrease", 0.187) == INCONCLUSIVE


def test_the_common_slope_leaves_out_seeds_without_failures_and_recovers_a_shared_slope():
    rng = np.random.default_rng(3)
    p = np.linspace(0.125, 1.0, 15)
    rows = [
        pd.DataFrame({"seed": s, "p": p, "n": 512, "failures": rng.binomial(512, 1 / (1 + np.exp(-(a + 2.0 * p))))})
        for s, a in enumerate([-4.0, -3.0, -3.5, -2.5])
    ]
    silent = pd.DataFrame({"seed": 9, "p": p, "n": 512, "failures": 0})
    with_silent = pd.concat([*rows, silent], ignore_index=True)
    assert study2.common_slope(with_silent) == study2.common_slope(pd.concat(rows, ignore_index=True))
    effect = study2.common_slope_effect(with_silent, resamples=30, seed=1)
    assert effect.n == 5 and effect.estimate == pytest.approx(2.0, abs=0.3)
    low, high = effect.interval(0.9)
    assert low < effect.estimate < high
    assert np.isnan(study2.common_slope(silent))
