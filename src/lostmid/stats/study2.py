"""The second study's estimators (issue 52; study/plan2.yaml names them by dotted path).

- ``firth_logistic`` / ``firth_slope`` / ``per_seed_firth_slopes``: a per-seed logistic slope of failure on
  position that stays finite under separation (Firth's Jeffreys-prior penalty), replacing the +0.5 correction;
- ``fit_cluster_effect`` and ``fit_mixed_effect``: a fix arm's per-seed effects with the fitted B as a random
  draw: seeds nested in fits, the fit the unit (the mean of per-fit means, t over fits) or a random intercept
  per fit (statsmodels MixedLM) as its sensitivity analysis;
- ``equivalence``: two one-sided tests against a stated margin (an absence claimed only when shown);
- ``influence_fits`` and ``agreed_outcome``: influence beyond position under the fixed estimator and its
  declared sensitivity analyses; "no effect" only where every one of them reads it.

Every effect is one of ``lostmid.stats.effects`` (an interval at any level, a two-sided p against 0).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats
from statsmodels.tools.sm_exceptions import ConvergenceWarning

from lostmid.errors import InputError
from lostmid.stats.effects import BootstrapEffect, MeanEffect, WaldEffect
from lostmid.stats.outcomes import INCONCLUSIVE, NO_EFFECT, outcome


@dataclass(frozen=True)
class FirthFit:
    coef: np.ndarray  # (columns,)
    se: np.ndarray  # from the inverse Fisher information at the penalized estimate
    iterations: int


def _firth_newton(penalized, newton_step, start: np.ndarray, max_iter: int, tol: float):
    """The maximum of a penalized log-likelihood by Newton steps, each halved until the penalized likelihood does
    not fall: ``penalized(beta) -> (value, state)``, ``newton_step(state) -> step`` (the inverse information times
    the modified score at that state). Returns (beta, state, iterations)."""
    beta = start
    value, state = penalized(beta)
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        step = newton_step(state)
        for _ in range(50):  # halve the step until the penalized likelihood does not fall
            new_value, new_state = penalized(beta + step)
            if new_value >= value - 1e-12:
                break
            step = step / 2
        beta, value, state = beta + step, new_value, new_state
        if np.max(np.abs(step)) < tol:
            break
    return beta, state, iterations


def _counts(successes, n) -> tuple[np.ndarray, np.ndarray]:
    y, n = np.asarray(successes, np.float64).ravel(), np.asarray(n, np.float64).ravel()
    if n.shape != y.shape:
        raise InputError(f"firth_logistic: counts {y.shape} and totals {n.shape} do not match")
    if np.any(n <= 0) or np.any(y < 0) or np.any(y > n):
        raise InputError("firth_logistic: every total must be positive and every count within 0..total")
    return y, n


def firth_logistic(successes, n, design, max_iter: int = 100, tol: float = 1e-10) -> FirthFit:
    """Firth's penalized logistic regression of binomial counts (``successes`` of ``n`` per row of ``design``):
    the maximum of l(beta) + 1/2 log det I(beta) (a Jeffreys prior), by Newton steps on the modified score
    U*(beta) = X' (y - n pi + h (1/2 - pi)), h the diagonal of the weighted hat matrix (``_firth_newton``).
    Finite under complete or quasi-complete separation, where the maximum likelihood estimate is not; with one
    binary covariate its slope is the log odds ratio of the counts each +1/2 (the Haldane-Anscombe correction,
    which this penalty derives rather than adds)."""
    X = np.asarray(design, np.float64)
    if X.ndim != 2 or X.shape[0] != np.size(successes) or np.shape(n) != np.shape(successes):
        raise InputError(
            f"firth_logistic: counts {np.shape(successes)}, totals {np.shape(n)} and design {X.shape} do not match"
        )
    y, n = _counts(successes, n)

    def penalized(beta):
        eta = X @ beta
        pi = 1 / (1 + np.exp(-eta))
        info = X.T @ (X * (n * pi * (1 - pi))[:, None])
        sign, logdet = np.linalg.slogdet(info)
        loglik = float(np.sum(y * eta - n * np.logaddexp(0, eta)))
        return (loglik + 0.5 * logdet if sign > 0 else -np.inf), (pi, info)

    def newton_step(state):
        pi, info = state
        inverse = np.linalg.inv(info)
        h = n * pi * (1 - pi) * np.sum((X @ inverse) * X, axis=1)  # the hat diagonal by one matrix product
        return inverse @ (X.T @ (y - n * pi + h * (0.5 - pi)))

    beta, (_, info), iterations = _firth_newton(penalized, newton_step, np.zeros(X.shape[1]), max_iter, tol)
    return FirthFit(beta, np.sqrt(np.diag(np.linalg.inv(info))), iterations)


def firth_common_slope(successes, n, p, group, max_iter: int = 100, tol: float = 1e-10) -> FirthFit:
    """``firth_logistic`` of logit(pi) = a_group + b p (one intercept per ``group`` label 0..G-1, one shared slope
    b), the same Newton steps solved through the information's arrow form: with D_g = sum w (the intercepts'
    diagonal), c_g = sum w p and S = sum w p^2 - sum c_g^2 / D_g (the Schur complement), log det I = sum log D_g +
    log S, the hat diagonal is w (1 / D_g + (p - c_g / D_g)^2 / S) and the step is solved by blocks, in O(rows)
    where the dense design costs O(rows x G^2). Returns (a_0..a_G-1, b) and their standard errors."""
    y, n = _counts(successes, n)
    p, group = np.asarray(p, np.float64).ravel(), np.asarray(group).ravel()
    groups = int(group.max()) + 1

    def penalized(beta):
        eta = beta[group] + beta[-1] * p
        pi = 1 / (1 + np.exp(-eta))
        w = n * pi * (1 - pi)
        D, c = np.bincount(group, w, groups), np.bincount(group, w * p, groups)
        S = float(np.sum(w * p * p) - np.sum(c * c / D)) if np.all(D > 0) else -1.0
        loglik = float(np.sum(y * eta - n * np.logaddexp(0, eta)))
        value = loglik + 0.5 * (np.sum(np.log(D)) + np.log(S)) if S > 0 else -np.inf
        return value, (pi, w, D, c / D, S)

    def newton_step(state):
        pi, w, D, u, S = state
        h = w * (1 / D[group] + (p - u[group]) ** 2 / S)
        r = y - n * pi + h * (0.5 - pi)
        score = np.bincount(group, r, groups)
        slope = (np.sum(r * p) - np.sum(u * score)) / S
        return np.append(score / D - u * slope, slope)

    beta, (_, _, D, u, S), iterations = _firth_newton(penalized, newton_step, np.zeros(groups + 1), max_iter, tol)
    return FirthFit(beta, np.sqrt(np.append(1 / D + u * u / S, 1 / S)), iterations)


def firth_slope(failures, n, p) -> float:
    """One seed's position effect: the slope b of logit(failure) = a + b p by ``firth_logistic``; 0.0 when every
    position has the same failure rate (compared exactly as fractions), as the +0.5 estimator defines it."""
    failures, n, p = (np.asarray(v, np.float64).ravel() for v in (failures, n, p))
    if np.unique(p).size < 2:
        raise InputError("firth_slope: a slope needs at least two distinct positions")
    if np.all(failures * n[0] == failures[0] * n):
        return 0.0
    return float(firth_logistic(failures, n, np.column_stack([np.ones_like(p), p])).coef[1])


def per_seed_firth_slopes(rows: pd.DataFrame) -> pd.Series:
    """Per seed (rows: seed, p, failures, n at one step of one arm): ``firth_slope``, indexed by seed."""
    return pd.Series(
        {int(seed): firth_slope(g.failures, g.n, g.p) for seed, g in rows.groupby("seed")}, dtype=np.float64
    )


def _common_slope(failures, n, p, seed) -> float:
    """``common_slope`` on arrays (``seed`` labels, any integers)."""
    labels = np.unique(seed, return_inverse=True)[1]
    total_failures, total = np.bincount(labels, failures), np.bincount(labels, n)
    informative = ((total_failures > 0) & (total_failures < total))[labels]
    if not informative.any():
        return float("nan")
    kept = np.unique(labels[informative], return_inverse=True)[1]
    return float(firth_common_slope(failures[informative], n[informative], p[informative], kept).coef[-1])


def common_slope(rows: pd.DataFrame) -> float:
    """The position slope shared by the seeds (rows: seed, p, failures, n at one step of one arm): Firth's logistic
    logit(failure) = a_seed + b p with one intercept per seed (``firth_common_slope``), b; nan when no seed has both
    failures and successes. A seed that never fails (or always fails) carries no information about b (its own
    intercept would absorb it) and is left out, where a mean of per-seed slopes counts it as a 0 and a seed with one
    late failure as a large slope."""
    return _common_slope(*(rows[c].to_numpy(np.float64) for c in ("failures", "n", "p")), rows.seed.to_numpy())


def common_slope_effect(rows: pd.DataFrame, resamples: int = 2000, seed: int = 0) -> BootstrapEffect:
    """``common_slope`` with a cluster bootstrap over seeds (whole seeds drawn with replacement, each draw a
    seed of its own; percentile interval; a draw without an informative seed is left out). n counts every seed."""
    seeds = [g[["failures", "n", "p"]].to_numpy(np.float64) for _, g in rows.groupby("seed")]
    rng = np.random.default_rng(seed)
    replicates = np.empty(resamples)
    for r in range(resamples):
        drawn = [seeds[k] for k in rng.choice(len(seeds), size=len(seeds), replace=True)]
        failures, n, p = np.concatenate(drawn).T
        replicates[r] = _common_slope(failures, n, p, np.repeat(np.arange(len(drawn)), [len(d) for d in drawn]))
    return BootstrapEffect(
        common_slope(rows),
        replicates[np.isfinite(replicates)],
        len(seeds),
        "Firth logistic of failure on p with one intercept per seed; cluster bootstrap over seeds, percentile",
    )


def _nested(values: pd.Series) -> pd.Series:
    """The per-seed effects indexed by (fit, seed); InputError unless at least 2 fits."""
    if values.index.nlevels != 2:
        raise InputError("a fix arm's per-seed effects must be indexed by (fit, seed): seeds nested in fits")
    if values.index.get_level_values(0).nunique() < 2:
        raise InputError("a fix arm's effect needs at least 2 independent fits of B")
    return values.astype(np.float64)


def fit_cluster_effect(values: pd.Series, what: str, units: str = "seeds") -> MeanEffect:
    """The fit as the unit: the mean over fits of each fit's mean per-unit effect, Student t over fits
    (``values`` indexed by (fit, unit); ``units`` names them: seeds, or the fix run's windows). The draw of B is one
    of the effect's sources of variance, so the interval covers a new fit's arm, not only new units under these
    fits."""
    means = _nested(values).groupby(level=0).mean()
    method = f"{what}; mean of per-fit means, Student t over {means.size} fits ({units} nested in fits)"
    return MeanEffect(means, method)


def fit_mixed_effect(values: pd.Series, what: str) -> WaldEffect:
    """The sensitivity analysis of ``fit_cluster_effect``: a linear mixed model value = mu + u_fit + e (a random
    intercept per fit, REML, statsmodels MixedLM), its mu with the model's standard error, Wald; n counts fits."""
    values = _nested(values)
    groups = values.index.get_level_values(0).to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        fit = sm.MixedLM(values.to_numpy(), np.ones((values.size, 1)), groups=groups).fit(reml=True)
    return WaldEffect(
        float(fit.fe_params[0]),
        float(fit.bse_fe[0]),
        int(np.unique(groups).size),
        f"{what}; linear mixed model, random intercept per fit (REML), Wald",
    )


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided tests of |effect| < margin: p the larger of the two one-sided p-values; the (1 - 2 alpha)
    interval [low, high] lies inside (-margin, margin) exactly when p < alpha."""

    estimate: float
    low: float
    high: float
    margin: float
    p: float
    alpha: float

    @property
    def equivalent(self) -> bool:
        return self.p < self.alpha


def equivalence(effect: MeanEffect, margin: float, alpha: float = 0.05) -> Equivalence:
    """TOST on a mean of per-unit effects (Student t over its units) against the margin +-``margin``."""
    if not margin > 0:
        raise InputError(f"equivalence: the margin must be positive, got {margin}")
    x = effect.units.to_numpy(np.float64)
    if x.size < 2:
        raise InputError("equivalence: needs at least 2 units")
    se, df = float(x.std(ddof=1) / np.sqrt(x.size)), x.size - 1
    mean = float(x.mean())
    if se == 0:
        p = 0.0 if abs(mean) < margin else 1.0
    else:
        p = float(max(stats.t.sf((mean + margin) / se, df), stats.t.cdf((mean - margin) / se, df)))
    low, high = effect.interval(1 - 2 * alpha)
    return Equivalence(mean, low, high, margin, p, alpha)


# The influence-beyond-position fits: the fixed estimator first, then its declared sensitivity analyses.
INFLUENCE_FITS = ("gee_exchangeable", "gee_independence", "seed_fixed_effects")


def influence_fits(rows: pd.DataFrame, names=INFLUENCE_FITS) -> dict[str, WaldEffect]:
    """Influence beyond position (rows: ``lostmid.study.estimators.influence_and_failure``): the coefficient of
    the standardized log influence (population sd over all rows) in logit(failure) = a + beta x + c p, fitted
    three ways, each with seeds as clusters and robust (sandwich) errors, Wald:
    ``gee_exchangeable`` (the fixed estimator: binomial GEE, exchangeable working correlation),
    ``gee_independence`` (the same, independence), ``seed_fixed_effects`` (a binomial GLM with one intercept per
    seed, cluster-robust errors by seed: only within-seed variation of influence counts). ``names``: those fitted."""
    log_influence = np.log(rows.influence.to_numpy(np.float64))
    x = (log_influence - log_influence.mean()) / log_influence.std()
    p = rows.p.to_numpy(np.float64)
    n = rows.n.to_numpy(np.float64)
    rate = rows.failures.to_numpy(np.float64) / n
    seeds = rows.seed.to_numpy()
    shared = np.column_stack([np.ones(len(rows)), x, p])
    words = "binomial {}, failure on standardized log influence + linear position, seeds as clusters, robust errors"
    effects = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name, structure in (("gee_exchangeable", "Exchangeable"), ("gee_independence", "Independence")):
            if name not in names:
                continue
            fit = sm.GEE(
                rate,
                shared,
                groups=seeds,
                family=sm.families.Binomial(),
                cov_struct=getattr(sm.cov_struct, structure)(),
                weights=n,
            ).fit()
            effects[name] = WaldEffect(
                float(fit.params[1]),
                float(fit.bse[1]),
                int(np.unique(seeds).size),
                words.format(f"GEE, {structure.lower()}"),
            )
        if "seed_fixed_effects" not in names:
            return effects
        dummies = pd.get_dummies(pd.Series(seeds), drop_first=False).to_numpy(np.float64)
        design = np.column_stack([x, p, dummies])
        counts = np.column_stack([rows.failures, rows.n - rows.failures]).astype(np.float64)
        fit = sm.GLM(counts, design, family=sm.families.Binomial()).fit(
            cov_type="cluster", cov_kwds={"groups": pd.factorize(seeds)[0]}
        )
        effects["seed_fixed_effects"] = WaldEffect(
            float(fit.params[0]), float(fit.bse[0]), int(np.unique(seeds).size), words.format("GLM, seed intercepts")
        )
    return effects


def agreed_outcome(effects: dict[str, WaldEffect], level: float, direction: str, size: float) -> str:
    """The outcome of the fixed estimator (the first of ``effects``), except that "no effect of that size" stands
    only where every fit reads it at ``level``; otherwise that reading is "inconclusive"."""
    readings = {name: outcome(*effect.interval(level), direction, size) for name, effect in effects.items()}
    first = readings[next(iter(effects))]
    if first == NO_EFFECT and any(r != NO_EFFECT for r in readings.values()):
        return INCONCLUSIVE
    return first
