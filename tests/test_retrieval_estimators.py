"""The retrieval primaries (lostmid.architectures.retrieval_estimators) on planted examples: each estimator
recovers an effect planted in the data, and its interval covers 0 where none is planted; the influence
estimate holds position fixed, so a share that only tracks position (recency) is no effect."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lostmid.architectures import retrieval_estimators as re
from lostmid.architectures.retrieval import FRACTIONS


def planted(windows=24, dip=0.0, slope=0.0, recency=0.0, seed=0) -> pd.DataFrame:
    """Examples of two tasks at the 9 fractions: success has log odds 1 - dip (in the middle fractions)
    + slope * z, z the standardized log share; the log share is noise + recency * q (the share grows
    toward the query, as the task-free share does) plus a per-window level."""
    rng = np.random.default_rng(seed)
    rows = []
    for window in range(windows):
        level = rng.normal(0, 0.3)
        for task in re.TASKS:
            for q in FRACTIONS:
                log_share = -3 + level + recency * q + rng.normal(0, 0.5)
                middle = 0.2 <= q <= 0.8
                logit = 0.5 - dip * middle + slope * (log_share + 3) / 0.5 + recency * (q - 0.5)
                success = rng.uniform() < 1 / (1 + np.exp(-logit))
                rows.append(
                    dict(
                        model="m",
                        weights="pretrained",
                        n=64,
                        task=task,
                        q=q,
                        window=window,
                        success=success,
                        logprob=-1.0 - dip * middle,
                        influence_free=np.exp(log_share),
                    )
                )
    return pd.DataFrame(rows)


def test_the_contrasts_are_one_value_per_window_and_find_a_planted_middle_deficit():
    flat, dipped = planted(), planted(dip=2.5, seed=1)
    per_window = re.middle_minus_ends(dipped)
    assert len(per_window) == 24 and per_window.index.tolist() == list(range(24))
    window = dipped[dipped.window == 3]
    middle = window[window.q.between(0.2, 0.8)].success.mean() - window[window.q.isin([0.0, 1.0])].success.mean()
    assert per_window[3] == pytest.approx(middle)
    found = re.t_effect(per_window, 0.95)
    assert found.high < 0 and found.n == 24 and "windows" in found.method
    none = re.t_effect(re.middle_minus_ends(flat), 0.95)
    assert none.low < 0 < none.high
    assert re.t_effect(re.middle_minus_ends(dipped, "logprob"), 0.95).estimate == pytest.approx(-2.5)
    last = re.last_minus_first(dipped)  # the dip is in the middle only: last and first are alike
    assert re.t_effect(last, 0.95).low < 0 < re.t_effect(last, 0.95).high


def test_a_paired_difference_matches_the_two_arms_window_by_window_at_the_declared_positions():
    none = planted(dip=2.5, seed=1)
    fixed = none.assign(logprob=none.logprob + 0.75 * np.isclose(none.q, 1.0))  # a fix that helps at q = 1 only
    at_end = re.paired_difference(fixed, none, (1.0,), "logprob")
    assert at_end.index.tolist() == list(range(24)) and at_end.to_numpy() == pytest.approx(0.75)
    assert re.paired_difference(fixed, none, FRACTIONS, "logprob").to_numpy() == pytest.approx(0.75 / 9)
    fewer = fixed[fixed.window < 10]  # windows missing in either arm are left out, never paired with another
    assert re.paired_difference(fewer, none, (1.0,), "logprob").index.tolist() == list(range(10))


def test_influence_beyond_position_recovers_a_planted_slope_and_not_a_share_that_only_tracks_position():
    examples = planted(windows=30, slope=0.5, recency=2.0, seed=0)
    per_sd = 0.5 / 0.5 * np.log(examples.influence_free).std()  # the planted log odds per SD of log share
    effect = re.influence_beyond_position(examples, 100, 0)
    interval, check = re.bootstrap_effect(effect, 0.95, "GEE", 30)
    assert interval.low > 0 and interval.estimate == pytest.approx(per_sd, abs=0.3) and check == ""
    position_only = planted(slope=0.0, recency=2.0, seed=3)
    none = re.influence_beyond_position(position_only, 100, 0)
    interval, check = re.bootstrap_effect(none, 0.95, "GEE", 24)
    assert interval.low < 0 < interval.high and check == ""
    unadjusted, _ = re.bootstrap_effect(re.unadjusted_auc(position_only, 200, 0), 0.95, "AUC", 24)
    stratified, _ = re.bootstrap_effect(re.stratified_auc(position_only, 200, 0), 0.95, "AUC", 24)
    assert unadjusted.low > 0  # the share tracks position, which drives success: a spurious AUC
    assert stratified.low < 0 < stratified.high  # within q it is gone


def test_a_degenerate_interval_is_named():
    draws = np.r_[0.2, np.full(100, 0.2), np.linspace(0.1, 0.3, 100)]
    low, high = np.percentile(draws[1:], [2.5, 97.5])
    assert re.degenerate(np.r_[0.2, np.full(50, 0.2)], 0.2, 0.2, 0.95) == "zero width"
    assert "pinned" in re.degenerate(np.r_[0.25, np.full(10, 0.1), np.linspace(0.1, 0.3, 90)], 0.1, 0.29, 0.95)
    assert re.degenerate(draws, low, high, 0.95) == ""
    assert "draws failed" in re.degenerate(np.r_[0.2, np.full(10, np.nan), np.linspace(0.1, 0.3, 90)], 0.1, 0.3, 0.95)


def test_the_primaries_table_has_every_estimator_with_an_interval():
    examples = planted(windows=12, dip=2.0, slope=1.0, seed=4)
    table = re.primaries(examples, 100, 0, 0.95)
    assert list(table.estimator.unique()) == [
        "middle_minus_ends",
        "last_minus_first",
        "influence_beyond_position",
        "stratified_auc",
        "unadjusted_auc",
    ]
    assert (table.n == 64).all() and (table.low <= table.estimate).all() and (table.estimate <= table.high).all()


def test_the_share_is_standardized_by_its_population_sd_as_the_plan_fixes_it():
    # study/plan.yaml, smollm2_influence_beyond_position: "standardized (population sd over all examples)".
    share = np.array([0.01, 0.02, 0.05, 0.1, 0.3])
    z = re.standardized_log_share(share)
    assert z.mean() == pytest.approx(0.0, abs=1e-12)
    assert z.std(ddof=0) == pytest.approx(1.0, abs=1e-12)
    assert z.std(ddof=1) > 1.0
