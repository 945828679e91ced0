"""Statistics of every stage: per-seed effects, intervals over seeds and over bootstrap draws.

Seeds are the unit of replication. Each training seed is evaluated on its own draw of the
balanced evaluation set (``lostmid.core.task.balanced_eval_set`` with
``lostmid.core.task.eval_seed_for_run``), so the spread of per-seed effects contains both the
training noise and the evaluation set's sampling error, and an interval over seeds covers
both. The recipe for every claim:

1. an effect per seed (``logistic_slope`` / ``per_seed_slopes``, ``restricted_times``,
   ``area_under_failure``, a rate, a density, ...);
2. an interval over seeds (``t_interval``; ``bootstrap_interval`` as the alternative;
   ``paired_difference`` when two variants share a seed; ``rate_interval_over_seeds`` for
   rates, which stays inside [0, 1]; ``log_mean_interval`` for quantities spanning orders
   of magnitude);
3. a verdict read off the interval with a rule fixed in advance (``lostmid.evidence.decisions``).

The per-run Wilson band of a failure rate (one seed, one position) is
``lostmid.core.task.wilson_interval``; it is not repeated here, since that module draws data with
torch and this one stays torch-free (numpy, scipy, statsmodels, pandas).
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import integrate, stats
from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

from lostmid.stats import bootstrap
from lostmid.tables.summaries import t_half_width

# Haldane-Anscombe correction: added to the failure and to the success count of every row
# of every logistic fit (see logistic_slope).
HALDANE = 0.5

# scipy.stats.bootstrap takes its generator as ``rng`` from scipy 1.15 on, as
# ``random_state`` before (pyproject allows scipy >= 1.11); a Generator means the same in both.
_BOOTSTRAP_RNG = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"


class Interval(NamedTuple):
    """A point estimate with its interval over seeds; ``n`` is the number of seeds used."""

    estimate: float
    low: float
    high: float
    n: int
    method: str


class Sample(NamedTuple):
    """Per-unit values (per seed, per held-out init, bootstrap draws) and the estimator that summarizes them:
    ``at(level)`` is ``estimator(*values, level)``, the interval at any level from the same values, so the
    family-wise correction takes it again at its own level without recomputing a statistic."""

    values: tuple
    estimator: Callable[..., Interval]

    def at(self, level: float) -> Interval:
        return self.estimator(*self.values, level)


class SlopeFit(NamedTuple):
    """Slope b of logit(failure) = a + b * p and its standard error (from the GLM's Fisher information)."""

    slope: float
    se: float


# --------------------------------------------------------------------------- per-seed effects


def logistic_slope(failures, n, p) -> SlopeFit:
    """Position effect of one seed: the slope b of the binomial GLM logit(failure) = a + b * p.

    Estimator: maximum likelihood of a binomial GLM (logit link, statsmodels) on the counts
    (failures + 0.5, n - failures + 0.5) at the relative flag positions p; the standard error
    is the GLM's (inverse Fisher information). b > 0: failures rise towards the end of the
    context; b is the log odds ratio of failure between p = 0 and p = 1.

    Why the counts are corrected: a well-trained model has 0 failures at many positions;
    when no failure occurs before some position and only failures after it (or zero
    failures everywhere but one end), the maximum likelihood slope is infinite
    (quasi-complete separation) and the fit stops wherever the optimizer gives up. The
    Haldane-Anscombe correction (+0.5 to both counts) keeps every fit finite. It is added in
    every fit, not only in the ones that need it, so that the estimator is one continuous
    function of the counts: a seed with a single failure somewhere and a seed with none are
    estimated the same way. Its cost is a shrinkage of b towards 0 of order 1/n (the rates
    move towards 1/2 by at most 1/(2(n + 1))), negligible at the 32+ sequences per position
    of the workflow; the tests check that a planted slope is recovered.

    Degenerate cases, by definition rather than by the optimizer's rounding:
    - identical failure rates at every p (all 0, all n, or any common rate, compared exactly
      as fractions failures/n) give slope exactly 0.0; a constant predictor on the balanced
      evaluation set lands here, so it has no position effect down to the last bit. With
      unequal n the corrected rates would differ slightly; the rule still says 0.0. The
      standard error is the one of the corrected fit.
    - fewer than two distinct p: ValueError (a slope is not identified).
    """
    failures = np.asarray(failures, dtype=np.float64).ravel()
    n = np.asarray(n, dtype=np.float64).ravel()
    p = np.asarray(p, dtype=np.float64).ravel()
    if not (failures.shape == n.shape == p.shape):
        raise ValueError(f"failures, n and p differ in length: {failures.shape}, {n.shape}, {p.shape}")
    if not (np.isfinite(failures).all() and np.isfinite(n).all() and np.isfinite(p).all()):
        raise ValueError("failures, n and p must be finite")
    if (n <= 0).any() or (failures < 0).any() or (failures > n).any():
        raise ValueError("need n > 0 and 0 <= failures <= n at every position")
    if np.unique(p).size < 2:
        raise ValueError("a slope needs at least two distinct positions p")
    counts = np.column_stack([failures + HALDANE, n - failures + HALDANE])
    design = np.column_stack([np.ones_like(p), p])
    with warnings.catch_warnings():
        # With +0.5 in every cell no separation is possible; statsmodels' "perfect separation
        # or prediction" warning then only flags an exact fit (identical rates, or two
        # positions: as many rows as parameters), whose estimate is fine.
        warnings.simplefilter("ignore", PerfectSeparationWarning)
        fit = sm.GLM(counts, design, family=sm.families.Binomial()).fit()
    if not fit.converged:
        raise RuntimeError("the binomial GLM did not converge")
    # failures_i / n_i == failures_0 / n_0 for every i, exactly (integer-valued products).
    identical = bool(np.all(failures * n[0] == failures[0] * n))
    slope = 0.0 if identical else float(fit.params[1])
    return SlopeFit(slope, float(fit.bse[1]))


def per_seed_slopes(table: pd.DataFrame, keys: Iterable[str] = (), seed: str = "seed") -> pd.DataFrame:
    """One ``logistic_slope`` per seed (and per combination of the grouping ``keys``).

    ``table`` is a failure table with one row per (keys, seed, flag position) and at least
    the columns seed, p, n, failures (flag_pos and the rest are ignored). Returns the keys,
    the seed, slope, se, positions (rows fitted) and sequences (sum of n), sorted by keys
    and seed. Rows of the same p are fitted as they are (a binomial GLM pools them exactly).
    """
    keys = list(keys)
    missing = sorted({seed, "p", "n", "failures", *keys} - set(table.columns))
    if missing:
        raise ValueError(f"the failure table lacks the columns {missing}")
    rows = []
    for group, part in table.groupby(keys + [seed], sort=True):
        fit = logistic_slope(part["failures"].to_numpy(), part["n"].to_numpy(), part["p"].to_numpy())
        rows.append(
            {
                **dict(zip(keys + [seed], group)),
                "slope": fit.slope,
                "se": fit.se,
                "positions": len(part),
                "sequences": int(part["n"].sum()),
            }
        )
    return pd.DataFrame(rows, columns=keys + [seed, "slope", "se", "positions", "sequences"])


def time_to_threshold(steps, values, threshold: float) -> float:
    """First training step at which ``values`` (e.g. a failure rate) is at or below ``threshold``.

    Returns ``math.inf`` when the run never gets there: the time is censored, not missing,
    and ``restricted_times`` turns it into the horizon. Steps must be strictly increasing.
    """
    steps = np.asarray(steps, dtype=np.float64).ravel()
    values = np.asarray(values, dtype=np.float64).ravel()
    _check_steps(steps, values)
    reached = np.flatnonzero(values <= threshold)
    return float(steps[reached[0]]) if reached.size else math.inf


def restricted_times(times, horizon: float) -> np.ndarray:
    """Per-seed times to a threshold, censored at ``horizon``: min(T_i, horizon).

    T_i is the first step reaching the threshold, ``inf`` for a seed that never does (as
    ``time_to_threshold`` returns). The horizon is the last checkpoint, common to all seeds;
    a seed that never reaches the threshold counts as the horizon (a lower bound of its true
    time), never as missing: averaging only the seeds that happened to get there would make
    slow variants look fast. NaN is refused, since it does not say whether a seed was censored.
    """
    times = np.asarray(times, dtype=np.float64).ravel()
    if np.isnan(times).any():
        raise ValueError("times must not be NaN; mark a seed that never reaches the threshold with inf")
    if not (math.isfinite(horizon) and horizon > 0) or (times < 0).any():
        raise ValueError("need a finite horizon > 0 and times >= 0")
    return np.minimum(times, horizon)


def restricted_mean_time(times, horizon: float, level: float = 0.95) -> Interval:
    """Restricted mean time to threshold over seeds: mean of min(T_i, horizon), Student t interval.

    Estimator: the restricted mean survival time up to the horizon (the area under the
    per-seed "not yet reached" curve), which needs no model of the censored seeds and is
    honest about them: they contribute the horizon. Interval: Student t over seeds of the
    restricted times (``t_interval``), cut to [0, horizon]. If every seed is censored the estimate is the horizon
    and the interval has zero width: all the data say is "not before the horizon". For two
    variants sharing seeds, pass ``restricted_times`` of each to ``paired_difference``.
    """
    times = np.asarray(times, dtype=np.float64).ravel()
    restricted = restricted_times(times, horizon)
    censored = int((times >= horizon).sum())
    result = t_interval(restricted, level)
    # The restricted mean lies in [0, horizon]; a t interval of few seeds can reach past
    # either end, and cutting it there loses no coverage.
    result = result._replace(low=min(max(result.low, 0.0), horizon), high=min(max(result.high, 0.0), horizon))
    return result._replace(
        method=f"restricted mean time to threshold (censored at horizon {horizon:g}: "
        f"{censored} of {result.n} seeds); {result.method}"
    )


def area_under_failure(steps, failure, horizon: float | None = None) -> float:
    """Area under one seed's failure curve over training, divided by the span: the mean failure rate.

    Estimator: trapezoid rule over the checkpoints from the first step to ``horizon``
    (default: the last checkpoint; a horizon between checkpoints is interpolated linearly),
    divided by (horizon - first step), i.e. by the horizon when the first checkpoint is step
    0. A constant failure c gives exactly c. Unlike a time to threshold it needs no threshold
    and no censoring, and it rewards learning early; use one horizon for all seeds, and
    ``paired_difference`` for two variants sharing seeds. A horizon past the last
    checkpoint is refused (the curve is not extrapolated).
    """
    steps = np.asarray(steps, dtype=np.float64).ravel()
    failure = np.asarray(failure, dtype=np.float64).ravel()
    _check_steps(steps, failure)
    if steps.size < 2:
        raise ValueError("an area needs at least two checkpoints")
    horizon = float(steps[-1]) if horizon is None else float(horizon)
    if not steps[0] < horizon <= steps[-1]:
        raise ValueError(f"horizon {horizon} outside ({steps[0]}, {steps[-1]}]")
    inside = steps < horizon
    x = np.append(steps[inside], horizon)
    y = np.append(failure[inside], np.interp(horizon, steps, failure))
    if np.all(y == y[0]):
        return float(y[0])
    return float(integrate.trapezoid(y, x) / (horizon - steps[0]))


def _check_steps(steps: np.ndarray, values: np.ndarray) -> None:
    if steps.shape != values.shape or steps.size == 0:
        raise ValueError("steps and values must be non-empty and of the same length")
    if not (np.isfinite(steps).all() and np.isfinite(values).all()):
        raise ValueError("steps and values must be finite")
    if (np.diff(steps) <= 0).any():
        raise ValueError("steps must be strictly increasing")


# --------------------------------------------------------------------------- intervals over seeds


def as_values(values) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("no values (no seeds)")
    if not np.isfinite(values).all():
        raise ValueError("values must be finite; a seed's NaN or inf would be dropped silently elsewhere")
    return values


def _seeds(n: int) -> str:
    return f"{n} seed" if n == 1 else f"{n} seeds"


def _constant(values: np.ndarray) -> bool:
    return bool(np.all(values == values[0]))


def _without_spread(values: np.ndarray, method: str) -> Interval | None:
    """The interval when no spread can be estimated: identical values give the value itself with
    zero width, a single seed NaN bounds; None when the values do have a spread."""
    n = values.size
    if _constant(values):
        v = float(values[0])
        return Interval(v, v if n > 1 else math.nan, v if n > 1 else math.nan, n, method)
    if n < 2:
        return Interval(float(values[0]), math.nan, math.nan, n, method)
    return None


def t_interval(values, level: float = 0.95) -> Interval:
    """Mean over seeds with its Student t interval: mean +- t_{1-a/2, n-1} * sd / sqrt(n).

    Why t: seeds are few (3 to 20) and per-seed effects such as logistic slopes are averages
    of many sequences, close to normal; the t quantile carries the uncertainty of the sample
    sd, which a normal or a bootstrap interval ignores at such n. n = 1 gives NaN bounds
    (no spread is estimable); identical values give the value itself, zero width.
    """
    values = as_values(values)
    n = values.size
    method = f"Student t {level:.0%} interval over {_seeds(n)}"
    degenerate = _without_spread(values, method)
    if degenerate:
        return degenerate
    mean = float(values.mean())
    half = t_half_width(float(values.std(ddof=1)), n, level)
    return Interval(mean, mean - half, mean + half, n, method)


def bootstrap_interval(
    values, level: float = 0.95, method: str = "BCa", n_resamples: int = 9999, seed: int = 0
) -> Interval:
    """Mean over seeds with a bootstrap interval over seeds (scipy.stats.bootstrap, seeded).

    The alternative to ``t_interval`` when per-seed values are skewed (e.g. times or ratios):
    seeds are resampled with replacement, and the interval is the BCa (bias-corrected and
    accelerated, default) or percentile interval of the resampled means. It is too narrow for
    very few seeds (it ignores the uncertainty of the spread), so prefer ``t_interval`` below
    about 10 seeds. The generator is seeded, so the same values give the same interval.
    n = 1 gives NaN bounds; identical values give zero width (the bootstrap distribution is a
    single point; BCa is undefined there).
    """
    values = as_values(values)
    n = values.size
    label = f"{method} bootstrap {level:.0%} interval over {_seeds(n)} ({n_resamples} resamples, seed {seed})"
    degenerate = _without_spread(values, label)
    if degenerate:
        return degenerate
    result = stats.bootstrap(
        (values,),
        np.mean,
        confidence_level=level,
        method=method,
        n_resamples=n_resamples,
        vectorized=True,
        **{_BOOTSTRAP_RNG: np.random.default_rng(seed)},
    )
    ci = result.confidence_interval
    return Interval(float(values.mean()), float(ci.low), float(ci.high), n, label)


def paired_difference(a, b, interval: Callable[..., Interval] = t_interval, **options) -> Interval:
    """Mean difference a - b over the seeds both variants share, with ``interval`` (t by default) of the differences.

    ``a`` and ``b`` map seed -> per-seed value (a pandas Series indexed by seed, or a dict).
    Pairing by seed removes what two variants trained from the same seed have in common
    (initialization, data order, evaluation draw), so the interval is that of the per-seed
    differences, not a two-sample comparison. Seeds present in only one variant are left
    out (inner join) and ``n`` says how many pairs remain; a seed listed twice is an error.
    """
    a = pd.Series(a, dtype=np.float64)
    b = pd.Series(b, dtype=np.float64)
    for name, series in (("a", a), ("b", b)):
        if not series.index.is_unique:
            raise ValueError(f"{name} lists a seed more than once")
    shared = a.index.intersection(b.index).sort_values()
    result = interval((a.loc[shared] - b.loc[shared]).to_numpy(), **options)
    return result._replace(method=f"paired by seed (a - b); {result.method}")


def paired_t(a, b, level: float = 0.95) -> Interval:
    """``paired_difference`` with the Student t interval: the estimator of most paired claims."""
    return paired_difference(a, b, t_interval, level=level)


def rate_interval_over_seeds(rates, level: float = 0.95, n_resamples: int = 9999, seed: int = 0) -> Interval:
    """Mean of per-seed rates with a percentile bootstrap interval over seeds; always inside [0, 1].

    Estimator: the mean of the seeds' rates (each a proportion of one seed's evaluation
    set). Interval: percentile bootstrap over seeds, i.e. quantiles of means of resampled
    rates; a mean of numbers in [0, 1] lies in [0, 1], so the band does too, by construction
    (a t interval would leave [0, 1] for rates near 0 or 1, where late checkpoints sit). The
    bounds are checked anyway. All rates equal (e.g. all 0) gives that rate with zero width;
    one seed gives NaN bounds. Percentile bootstrap is narrow for few seeds (it is close to
    mean +- z * sd / sqrt(n) with the ddof=0 sd), so report n next to it.
    """
    rates = as_values(rates)
    if (rates < 0).any() or (rates > 1).any():
        raise ValueError("rates must lie in [0, 1]")
    result = bootstrap_interval(rates, level, method="percentile", n_resamples=n_resamples, seed=seed)
    for bound in (result.low, result.high):
        if not math.isnan(bound) and not 0.0 <= bound <= 1.0:
            raise RuntimeError(f"a bootstrap bound of rates left [0, 1]: {bound}")
    return result


def log_mean_interval(values, level: float = 0.95) -> Interval:
    """Geometric mean over seeds, exp(mean log x), with the Student t interval of log x mapped back by exp.

    For positive quantities that span orders of magnitude (densities, ratios, influence
    magnitudes): their spread is multiplicative, so the mean and the interval are taken on
    the log scale, where per-seed values are close to normal, and the interval is a factor
    around the geometric mean (always positive). Values must be positive.
    """
    values = as_values(values)
    if (values <= 0).any():
        raise ValueError("log_mean_interval needs positive values")
    result = t_interval(np.log(values), level)
    return Interval(
        math.exp(result.estimate),
        math.exp(result.low),
        math.exp(result.high),
        result.n,
        f"geometric mean; {result.method} on the log scale, mapped back by exp",
    )


# --------------------------------------------------------------------------- the other recipes of the evidence stage


def deterministic(value: float, units: int, what: str, level: float = 0.95) -> Interval:
    """A deterministic value (a closed form, an algebraic simulation, one fitted B) as a zero-width interval: no
    units to vary over, so ``level`` changes nothing."""
    value = float(value)
    return Interval(value, value, value, 0, f"deterministic ({what}; {units} values); no seeds, zero-width interval")


def welch_difference(a, b, level: float) -> Interval:
    """Mean of ``a`` minus mean of ``b`` (independent samples) with the Welch t interval."""
    a, b = as_values(a), as_values(b)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)) if se > 0 else math.inf
    half = stats.t.ppf(0.5 + level / 2, df) * se
    diff = float(a.mean() - b.mean())
    return Interval(
        diff, diff - half, diff + half, a.size + b.size, f"Welch t {level:.0%} interval ({a.size} and {b.size} seeds)"
    )


def auc_minus_half(draws, windows: int, method: str, level: float) -> Interval:
    """The percentile interval over window draws (``bootstrap.quiet_percentile_interval``) of the AUC, minus 0.5."""
    estimate, lo, hi = bootstrap.quiet_percentile_interval(draws, level)
    return Interval(estimate - 0.5, lo - 0.5, hi - 0.5, windows, method)


def rank_correlation(x, y) -> float:
    """Spearman's rho of two profiles over the same positions (average ranks for ties); 0.0 by
    definition when either is constant: there is no ranking to predict, or none to predict with."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if np.all(x == x[0]) or np.all(y == y[0]):
        return 0.0
    return float(stats.spearmanr(x, y).statistic)


def flatness_predicts_preference(
    flatness: Mapping[str, pd.Series],
    preference: Mapping[str, pd.Series],
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Across arms, does an arm's flatness predict its position preference? Spearman's rho across the
    arms of the mean (over seeds) flatness (e.g. log E_inf: larger is less flat) against the mean
    preference (late minus early failure: larger prefers early flags more); the claim is rho > 0.

    Interval: percentile bootstrap over seeds (seeded, so the same values give the same interval).
    Arms whose series share one seed set are resampled jointly (the same seeds for every arm, keeping
    their pairing); otherwise each arm's seeds are resampled on their own. A flatness given as a
    constant per arm (a held-out E_inf of its fitted B) simply does not vary under resampling.
    Needs at least three arms.
    """
    arms = list(flatness)
    if set(arms) != set(preference) or len(arms) < 3:
        raise ValueError(f"need the same three or more arms in flatness and preference, got {arms}, {list(preference)}")
    pairs = {}
    for arm in arms:
        joined = pd.concat([flatness[arm].rename("flatness"), preference[arm].rename("preference")], axis=1)
        joined = joined.dropna()
        if len(joined) < 2 or not np.isfinite(joined.to_numpy()).all():
            raise ValueError(f"arm {arm} needs two or more seeds with finite flatness and preference")
        pairs[arm] = joined.sort_index()
    estimate = rank_correlation([pairs[a].flatness.mean() for a in arms], [pairs[a].preference.mean() for a in arms])
    rng = np.random.default_rng(seed)
    shared = len({tuple(p.index) for p in pairs.values()}) == 1
    n = len(next(iter(pairs.values())))
    draws = np.empty(n_resamples)
    for b in range(n_resamples):
        common = rng.integers(0, n, n) if shared else None
        means = []
        for arm in arms:
            values = pairs[arm].to_numpy()
            rows = common if shared else rng.integers(0, len(values), len(values))
            means.append(values[rows].mean(0))
        means = np.array(means)
        draws[b] = rank_correlation(means[:, 0], means[:, 1])
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    pairing = "seeds resampled jointly across arms" if shared else "each arm's seeds resampled on its own"
    return Interval(
        estimate,
        float(low),
        float(high),
        min(len(p) for p in pairs.values()),
        f"Spearman rho across {len(arms)} arms of the mean flatness against the mean preference; percentile "
        f"bootstrap {level:.0%} interval over seeds ({n_resamples} resamples, {pairing})",
    )
