"""Statistics of the evidence stage: seeds are the unit of replication.

Every effect is estimated per seed, summarized by an interval over seeds, and judged by a
decision rule fixed in advance. These tests simulate seed sets with known effects (a few
hundred sets at most, so the file runs in seconds).
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as scipy_stats

from lostmid.core import task
from lostmid.evidence import decisions as D
from lostmid.stats import planning
from lostmid.stats import statistics as S
from lostmid.tables.summaries import seed_half_width, t_half_width

from conftest import REPO

L = 16
P = np.arange(2, L + 1) / L  # relative flag positions of a context of length 16


def simulate_failures(
    rng, seeds: int, slope: float, per_position: int = 32, intercept: float = -1.0, intercept_sd: float = 0.7
) -> np.ndarray:
    """Failure counts (seeds x positions) from logit(failure) = a_s + slope * p, a_s ~ N(intercept, intercept_sd).

    The seed's own intercept is the between-seed variation of a real workflow (some seeds
    train better than others), on top of the binomial noise of the evaluation set.
    """
    a = rng.normal(intercept, intercept_sd, size=(seeds, 1))
    rate = 1 / (1 + np.exp(-(a + slope * P)))
    return rng.binomial(per_position, rate)


def as_table(failures: np.ndarray, per_position: int, **keys) -> pd.DataFrame:
    seeds, positions = failures.shape
    return pd.DataFrame(
        {
            **keys,
            "seed": np.repeat(np.arange(seeds), positions),
            "flag_pos": np.tile(np.arange(2, L + 1), seeds),
            "p": np.tile(P, seeds),
            "n": per_position,
            "failures": failures.ravel(),
        }
    )


# --------------------------------------------------------------------------- the position effect per seed


def test_a_planted_slope_is_found_by_per_seed_slopes_and_a_t_interval_over_seeds():
    rng = np.random.default_rng(1)
    table = as_table(simulate_failures(rng, seeds=20, slope=2.0, per_position=64, intercept=-2.0), 64)
    slopes = S.per_seed_slopes(table)
    assert list(slopes["seed"]) == list(range(20)) and (slopes["positions"] == L - 1).all()
    interval = S.t_interval(slopes["slope"])
    assert interval.n == 20
    assert interval.low < 2.0 < interval.high
    assert interval.low > 0
    assert D.verdict(interval.low, interval.high, D.Rule("greater_than_zero", 0.5)) == D.SUPPORTED


def test_a_null_slopes_95_percent_t_interval_covers_zero_at_about_the_nominal_rate():
    # 400 simulated seed sets of 5 seeds each; no position effect, but every seed has its own
    # intercept. Coverage of 0 should be 0.95 within binomial noise (sd 0.011 at 400 sets).
    rng = np.random.default_rng(2)
    sets, seeds = 400, 5
    failures = simulate_failures(rng, seeds=sets * seeds, slope=0.0)
    n = np.full(L - 1, 32)
    slopes = np.array([S.logistic_slope(row, n, P).slope for row in failures]).reshape(sets, seeds)
    covered = [(lambda i: i.low < 0 < i.high)(S.t_interval(row)) for row in slopes]
    assert 0.92 <= np.mean(covered) <= 0.98


def test_a_constant_predictor_on_the_balanced_set_has_slope_exactly_zero():
    # Always answering 0 fails on the half of each position whose target is 1: the same
    # count at every position, hence no position effect, exactly, for every seed.
    slopes = []
    for seed in range(5):
        tokens, targets, flags = task.balanced_eval_set(L, per_position=8, seed=task.eval_seed_for_run(0, seed))
        wrong = (torch.zeros_like(targets) != targets).long()
        failures = torch.zeros(L + 1, dtype=torch.long).index_add_(0, flags, wrong)[2:].numpy()
        assert (failures == 4).all()
        slopes.append(S.logistic_slope(failures, np.full(L - 1, 8), P).slope)
    assert slopes == [0.0] * 5
    interval = S.t_interval(slopes)
    assert (interval.low, interval.high) == (0.0, 0.0)
    assert D.verdict(interval.low, interval.high, D.Rule("equivalent_to_zero", 0.5)) == D.SUPPORTED
    assert D.verdict(interval.low, interval.high, D.Rule("greater_than_zero", 0.5)) == D.CONTRADICTED


def test_on_the_stratified_set_a_constant_predictor_shows_a_spurious_slope():
    # Why the balanced set: with random targets the constant predictor's failures wobble by position.
    tokens, targets, flags = task.stratified_eval_set(L, per_position=8, seed=0)
    wrong = (targets != 0).long()
    failures = torch.zeros(L + 1, dtype=torch.long).index_add_(0, flags, wrong)[2:].numpy()
    assert S.logistic_slope(failures, np.full(L - 1, 8), P).slope != 0.0


@pytest.mark.parametrize(
    "failures, n", [([0, 0, 0], [10, 10, 10]), ([10, 10, 10], [10, 10, 10]), ([2, 4, 6], [10, 20, 30])]
)
def test_identical_failure_rates_give_slope_exactly_zero(failures, n):
    fit = S.logistic_slope(failures, n, [0.2, 0.5, 0.9])
    assert fit.slope == 0.0 and fit.se > 0


def test_separated_data_give_a_finite_slope_of_the_right_sign():
    # No failure early, all failures late: the plain maximum likelihood slope is infinite;
    # the +0.5 correction in every fit keeps it finite.
    fit = S.logistic_slope([0, 0, 10, 10], [10] * 4, [0.25, 0.5, 0.75, 1.0])
    assert 0 < fit.slope < 100 and math.isfinite(fit.se)
    assert S.logistic_slope([10, 10, 0, 0], [10] * 4, [0.25, 0.5, 0.75, 1.0]).slope == pytest.approx(-fit.slope)


def test_with_many_sequences_the_corrected_slope_is_close_to_the_true_one():
    rate = 1 / (1 + np.exp(-(-1 + 1.5 * P)))
    n = np.full(L - 1, 10**6)
    assert S.logistic_slope(np.round(rate * n), n, P).slope == pytest.approx(1.5, abs=1e-3)


def test_a_slope_needs_two_positions_and_valid_counts():
    with pytest.raises(ValueError, match="two distinct positions"):
        S.logistic_slope([1, 2], [10, 10], [0.5, 0.5])
    with pytest.raises(ValueError, match="0 <= failures <= n"):
        S.logistic_slope([11, 2], [10, 10], [0.2, 0.5])


def test_per_seed_slopes_keep_the_grouping_keys_and_match_one_fit_per_seed():
    rng = np.random.default_rng(3)
    table = pd.concat(
        [as_table(simulate_failures(rng, 3, slope), 32, variant=name) for name, slope in (("a", 0.0), ("b", 1.0))]
    )
    slopes = S.per_seed_slopes(table, keys=["variant"])
    assert list(slopes.columns[:2]) == ["variant", "seed"] and len(slopes) == 6
    part = table[(table.variant == "b") & (table.seed == 2)]
    expected = S.logistic_slope(part.failures, part.n, part.p)
    row = slopes[(slopes.variant == "b") & (slopes.seed == 2)].iloc[0]
    assert (row.slope, row.se, row.sequences) == (expected.slope, expected.se, 32 * (L - 1))
    with pytest.raises(ValueError, match="lacks the columns"):
        S.per_seed_slopes(table.drop(columns="n"))


# --------------------------------------------------------------------------- the balanced evaluation set


def test_balanced_eval_set_has_half_of_each_target_at_every_flag_position():
    tokens, targets, flags = task.balanced_eval_set(L=9, per_position=6, seed=4)
    assert tokens.shape == (8 * 6, 9)
    assert torch.equal(flags, torch.arange(2, 10).repeat_interleave(6))  # ordered by position
    rows = torch.arange(len(flags))
    assert ((tokens == task.FLAG).sum(1) == 1).all() and (tokens[rows, flags - 1] == task.FLAG).all()
    assert torch.equal(targets, tokens[rows, flags - 2])
    for f in range(2, 10):
        assert targets[flags == f].sum() == 3  # 3 of 6 with target 1
    others = tokens[tokens != task.FLAG]
    assert set(others.tolist()) == {0, 1}


def test_balanced_eval_set_is_deterministic_per_seed_and_differs_between_seeds():
    a = task.balanced_eval_set(12, 4, seed=5)
    b = task.balanced_eval_set(12, 4, seed=5)
    c = task.balanced_eval_set(12, 4, seed=6)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    assert torch.equal(a[1], c[1]) and torch.equal(a[2], c[2])  # the design is fixed, the draw is not


def test_balanced_eval_set_needs_an_even_count_per_position():
    with pytest.raises(ValueError, match="even"):
        task.balanced_eval_set(8, 3, seed=0)


def test_each_training_seed_gets_its_own_evaluation_seed():
    seeds = [task.eval_seed_for_run(7, run) for run in range(2000)]
    assert len(set(seeds)) == 2000
    assert seeds == [task.eval_seed_for_run(7, run) for run in range(2000)]
    assert all(0 <= s < 2**63 and s != run for run, s in enumerate(seeds))
    assert task.eval_seed_for_run(8, 0) != seeds[0]


def test_the_statistics_module_does_not_need_torch():
    code = "import sys, lostmid.stats.statistics; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=REPO)


# --------------------------------------------------------------------------- intervals over seeds


def test_t_interval_is_the_student_t_interval_of_the_mean():
    values = np.array([0.3, 1.1, 0.7, 2.0, 1.4])
    interval = S.t_interval(values)
    low, high = scipy_stats.t.interval(0.95, 4, loc=values.mean(), scale=scipy_stats.sem(values))
    assert (interval.estimate, interval.n) == (values.mean(), 5)
    assert interval.low == pytest.approx(low, rel=1e-12) and interval.high == pytest.approx(high, rel=1e-12)
    one = S.t_interval([0.4])
    assert one.estimate == 0.4 and math.isnan(one.low) and math.isnan(one.high)
    with pytest.raises(ValueError, match="finite"):
        S.t_interval([0.1, float("nan")])


def test_bootstrap_interval_is_seeded_and_close_to_t_for_many_normal_seeds():
    values = np.random.default_rng(4).normal(1.0, 1.0, 200)
    boot = S.bootstrap_interval(values, n_resamples=2000)
    assert boot == S.bootstrap_interval(values, n_resamples=2000)
    t = S.t_interval(values)
    assert boot.low == pytest.approx(t.low, abs=0.05) and boot.high == pytest.approx(t.high, abs=0.05)
    assert "BCa" in boot.method
    same = S.bootstrap_interval([2.0, 2.0, 2.0])
    assert (same.estimate, same.low, same.high) == (2.0, 2.0, 2.0)


def test_paired_difference_is_the_t_interval_of_the_per_seed_differences():
    a = pd.Series({0: 1.0, 1: 2.5, 2: 1.7, 3: 3.1, 9: 8.0})  # seed 9 has no partner
    b = pd.Series({3: 2.0, 2: 1.1, 1: 2.0, 0: 0.2, 5: -1.0})  # seed 5 has no partner
    paired = S.paired_difference(a, b)
    expected = S.t_interval([1.0 - 0.2, 2.5 - 2.0, 1.7 - 1.1, 3.1 - 2.0])
    assert paired[:4] == expected[:4] and paired.n == 4 and "paired by seed" in paired.method
    # Pairing removes the seed effect: much narrower than ignoring it.
    seed_effect = np.random.default_rng(5).normal(0, 5, 10)
    x, y = pd.Series(seed_effect + 1.0), pd.Series(seed_effect + np.linspace(-0.1, 0.1, 10))
    assert S.paired_difference(x, y).high - S.paired_difference(x, y).low < 0.5
    assert S.t_interval(x).high - S.t_interval(x).low > 2
    with pytest.raises(ValueError, match="more than once"):
        S.paired_difference(pd.Series([1.0, 2.0], index=[0, 0]), b)


@pytest.mark.parametrize(
    "rates",
    [
        [0.0, 0.0, 0.0, 0.0, 1 / 64],
        [1.0, 1.0, 63 / 64],
        [0.0, 1.0],
        [0.0] * 4,
        [1.0] * 3,
        [0.02, 0.0, 0.05, 0.01, 0.0, 0.03],
    ],
)
def test_the_bootstrap_rate_band_stays_inside_0_1(rates):
    interval = S.rate_interval_over_seeds(rates, n_resamples=2000)
    assert 0.0 <= interval.low <= interval.estimate <= interval.high <= 1.0
    assert interval.estimate == pytest.approx(np.mean(rates))


def test_rates_outside_0_1_are_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        S.rate_interval_over_seeds([0.5, 1.2])


def test_log_mean_interval_is_the_geometric_mean_with_a_t_interval_on_logs():
    interval = S.log_mean_interval([1e-3, 1e-2, 1e-1])
    assert interval.estimate == pytest.approx(1e-2)
    # symmetric on the log scale: low * high = estimate**2, and always positive
    assert interval.low * interval.high == pytest.approx(interval.estimate**2)
    assert 0 < interval.low < 1e-3 and interval.high > 1e-1
    with pytest.raises(ValueError, match="positive"):
        S.log_mean_interval([1.0, 0.0])


# --------------------------------------------------------------------------- time to threshold, censored


def test_a_seed_that_never_reaches_the_threshold_counts_as_the_horizon():
    steps = np.array([0, 100, 200, 300, 400])
    fast = S.time_to_threshold(steps, [0.5, 0.2, 0.01, 0.0, 0.0], threshold=0.05)
    slow = S.time_to_threshold(steps, [0.5, 0.4, 0.3, 0.2, 0.1], threshold=0.05)
    assert (fast, slow) == (200.0, math.inf)
    interval = S.restricted_mean_time([fast, slow, 300.0], horizon=400)
    assert interval.estimate == pytest.approx((200 + 400 + 300) / 3)  # not (200 + 300) / 2
    assert interval.n == 3 and "1 of 3 seeds" in interval.method
    assert 0 <= interval.low <= interval.high <= 400


def test_an_all_censored_set_gives_the_horizon_with_zero_width():
    interval = S.restricted_mean_time([math.inf] * 4, horizon=5000)
    assert (interval.estimate, interval.low, interval.high, interval.n) == (5000.0, 5000.0, 5000.0, 4)


def test_restricted_times_are_paired_by_seed_and_nan_is_refused():
    a = pd.Series(S.restricted_times([100, math.inf, 300], 400), index=[0, 1, 2])
    b = pd.Series(S.restricted_times([200, 350, math.inf], 400), index=[0, 1, 2])
    assert S.paired_difference(a, b).estimate == pytest.approx((-100 + 50 - 100) / 3)
    with pytest.raises(ValueError, match="NaN"):
        S.restricted_times([100, math.nan], 400)


def test_area_under_failure_is_the_mean_failure_over_the_horizon():
    steps = [0, 100, 200, 400]
    assert S.area_under_failure(steps, [0.3, 0.3, 0.3, 0.3]) == 0.3
    assert S.area_under_failure([0, 400], [1.0, 0.0]) == pytest.approx(0.5)
    # a horizon between checkpoints is interpolated: the line 1 -> 0 over 0..400, up to 200
    assert S.area_under_failure([0, 400], [1.0, 0.0], horizon=200) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="outside"):
        S.area_under_failure(steps, [0.3] * 4, horizon=500)


# --------------------------------------------------------------------------- verdicts


CASES = {
    ("greater_than_zero", 0.5): [
        ((0.1, 0.9), D.SUPPORTED),
        ((0.1, 0.3), D.SUPPORTED),
        ((0.0, 0.9), D.INCONCLUSIVE),
        ((-0.2, 0.4), D.CONTRADICTED),
        ((-0.2, 0.5), D.INCONCLUSIVE),
        ((-1.0, -0.5), D.CONTRADICTED),
        ((0.0, 0.0), D.CONTRADICTED),
    ],
    ("less_than_zero", 0.5): [
        ((-0.9, -0.1), D.SUPPORTED),
        ((-0.9, 0.0), D.INCONCLUSIVE),
        ((-0.4, 0.2), D.CONTRADICTED),
        ((-0.5, 0.2), D.INCONCLUSIVE),
        ((0.5, 1.0), D.CONTRADICTED),
        ((0.0, 0.0), D.CONTRADICTED),
    ],
    ("equivalent_to_zero", 0.5): [
        ((-0.4, 0.4), D.SUPPORTED),
        ((0.0, 0.0), D.SUPPORTED),
        ((-0.5, 0.4), D.INCONCLUSIVE),
        ((0.1, 0.7), D.INCONCLUSIVE),
        ((0.6, 0.9), D.CONTRADICTED),
        ((0.5, 0.9), D.INCONCLUSIVE),
        ((-0.9, -0.6), D.CONTRADICTED),
        ((-0.9, -0.5), D.INCONCLUSIVE),
        ((-0.9, 0.9), D.INCONCLUSIVE),
    ],
    ("at_most", 1e-6): [
        ((0.0, 1e-6), D.SUPPORTED),
        ((0.0, 2e-6), D.INCONCLUSIVE),
        ((1e-6, 3e-6), D.INCONCLUSIVE),
        ((2e-6, 3e-6), D.CONTRADICTED),
    ],
    ("at_least", 0.9): [
        ((0.9, 1.0), D.SUPPORTED),
        ((0.8, 0.95), D.INCONCLUSIVE),
        ((0.5, 0.89), D.CONTRADICTED),
        ((0.5, 0.9), D.INCONCLUSIVE),
    ],
}


@pytest.mark.parametrize(
    "kind, margin, bounds, expected", [(k, m, b, e) for (k, m), cases in CASES.items() for b, e in cases]
)
def test_each_rule_on_hand_made_intervals_including_the_boundaries(kind, margin, bounds, expected):
    assert D.verdict(*bounds, D.Rule(kind, margin)) == expected


def test_missing_bounds_are_inconclusive_and_bounds_out_of_order_an_error():
    rule = D.Rule("greater_than_zero", 0.5)
    assert D.verdict(math.nan, math.nan, rule) == D.INCONCLUSIVE
    with pytest.raises(ValueError, match="out of order"):
        D.verdict(0.5, 0.1, rule)


def test_rounding_level_perturbations_far_from_thresholds_never_change_a_verdict():
    rng = np.random.default_rng(6)
    rules = [D.Rule(kind, margin) for kind, margin in CASES]
    changed = checked = 0
    for low, width in zip(rng.uniform(-1, 1, 3000), rng.exponential(0.3, 3000)):
        high = low + width
        for rule in rules:
            thresholds = [0.0, rule.margin, -rule.margin]
            if min(abs(bound - t) for bound in (low, high) for t in thresholds) < 1e-9:
                continue  # only bounds clearly away from a threshold are promised a stable verdict
            nudged = low + rng.uniform(-1e-12, 1e-12), high + rng.uniform(-1e-12, 1e-12)
            checked += 1
            changed += D.verdict(low, high, rule) != D.verdict(*sorted(nudged), rule)
    assert checked > 10000 and changed == 0


def test_rules_need_a_margin_fixed_in_advance_and_say_it_in_words():
    rule = D.Rule("equivalent_to_zero", 0.25, quantity="the logistic slope of failure on p", level=0.95)
    assert "0.25" in rule.words and "the logistic slope of failure on p" in rule.words and "95%" in rule.words
    for kind in D.RULE_KINDS:
        assert "inconclusive" in D.Rule(kind, 0.1, level=0.95).words
    with pytest.raises(ValueError, match="margin > 0"):
        D.Rule("greater_than_zero", 0.0)
    with pytest.raises(ValueError, match="unknown rule kind"):
        D.Rule("positive", 0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.margin = 1.0  # frozen: a rule cannot be moved after the fact


def test_decide_builds_the_declared_rule_from_the_settings_and_takes_the_family_level_from_the_sample():
    from types import SimpleNamespace

    from lostmid.evidence.inputs import Estimate

    ev = SimpleNamespace(level=0.95, slope_margin=0.5)
    rule = D.Rule("greater_than_zero", "slope_margin", "the slope at step {step}")
    values = np.array([0.1, 0.9, 0.5, 1.4, 0.3, 1.1])
    sample = S.Sample((values,), S.t_interval)
    estimate = Estimate(sample.at(0.95), sample=sample, terms={"step": 100})
    decision = D.decide(rule, estimate, ev)
    assert decision.rule == D.Rule("greater_than_zero", 0.5, "the slope at step 100", level=0.95)
    assert (decision.verdict, decision.words) == (D.SUPPORTED, decision.rule.words)
    assert (decision.adjusted_low, decision.adjusted_verdict) == (estimate.interval.low, D.SUPPORTED)
    family = D.decide(rule, estimate, ev, family_size=3)
    wider = S.t_interval(values, 1 - 0.05 / 3)
    assert (family.adjusted_level, family.adjusted_low, family.adjusted_high) == (
        wider.n and 1 - 0.05 / 3,
        wider.low,
        wider.high,
    )
    assert family.verdict == D.SUPPORTED and family.adjusted_verdict == D.INCONCLUSIVE
    pilot = D.decide(rule, estimate, ev, status="pilot")
    assert pilot.verdict == D.INCONCLUSIVE and pilot.words.startswith("No verdict: a pilot")
    assert D.Rule("at_most", "slope_margin", factor=-1).margin_in(ev) == -0.5


# --------------------------------------------------------------------------- how many seeds


@pytest.mark.parametrize("level", [0.95, 0.9])
def test_seeds_for_half_width_agrees_with_a_brute_force_search(level):
    for sd in (0.05, 0.3, 1.0, 2.7):
        for target in (0.1, 0.25, 0.5, 1.0):
            brute = next(n for n in range(2, 10**5) if t_half_width(sd, n, level) <= target)
            assert planning.seeds_for_half_width(sd, target, level) == brute
    assert planning.seeds_for_half_width(0.0, 0.1) == 2


def test_half_width_is_that_of_the_t_interval_and_of_the_summary_tables():
    values = np.random.default_rng(7).normal(0, 2, 12)
    interval = S.t_interval(values)
    assert t_half_width(values.std(ddof=1), 12) == pytest.approx((interval.high - interval.low) / 2)
    assert seed_half_width(values) == t_half_width(values.std(ddof=1), 12)  # the remedies table's and the summaries'
    assert math.isnan(seed_half_width(values[:1]))


def test_a_pilot_plan_gives_a_plug_in_and_a_conservative_number_of_seeds():
    pilot = [0.8, 1.3, 0.4, 1.1, 0.9]
    plan = planning.pilot_seed_plan(pilot, target_half_width=0.2)
    sd = np.std(pilot, ddof=1)
    assert plan.pilot_seeds == 5 and plan.sd == pytest.approx(sd) and plan.sd_upper > sd
    assert plan.n_seeds == planning.seeds_for_half_width(sd, 0.2)
    assert plan.n_seeds_conservative >= plan.n_seeds
    assert t_half_width(plan.sd_upper, plan.n_seeds_conservative) <= 0.2
