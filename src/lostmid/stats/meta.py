"""Inverse-variance meta-analysis of estimates made on disjoint sets of units: the fixed-effect mean, Cochran's Q,
DerSimonian and Laird's between-set variance, and the two pooled intervals (``lostmid.evidence.pooled`` pools a
claim's runs with them)."""

from __future__ import annotations

import numpy as np
from scipy import stats


def inverse_variance(estimates: np.ndarray, variances: np.ndarray) -> tuple[float, float]:
    """The inverse-variance weighted mean and its standard error."""
    weights = 1 / variances
    return float(np.sum(weights * estimates) / weights.sum()), float(np.sqrt(1 / weights.sum()))


def cochran_q(estimates: np.ndarray, variances: np.ndarray) -> float:
    """Cochran's Q: the weighted squared deviations from the fixed-effect estimate (chi^2 with k - 1 df
    under homogeneity)."""
    fixed, _ = inverse_variance(estimates, variances)
    return float(np.sum((estimates - fixed) ** 2 / variances))


def dersimonian_laird_tau2(estimates: np.ndarray, variances: np.ndarray) -> float:
    """The between-set variance by DerSimonian and Laird's method of moments, truncated at 0."""
    weights = 1 / variances
    excess = cochran_q(estimates, variances) - (len(estimates) - 1)
    return max(0.0, excess / (weights.sum() - np.sum(weights**2) / weights.sum()))


def meta_analysis(estimates: np.ndarray, variances: np.ndarray) -> dict:
    """The fixed-effect and the random-effects (DerSimonian-Laird) estimates with their normal 95% intervals, and
    the heterogeneity: Cochran's Q with its degrees of freedom and p-value, Higgins and Thompson's I^2, tau^2."""
    z = stats.norm.ppf(0.975)
    fixed, fixed_se = inverse_variance(estimates, variances)
    q, df = cochran_q(estimates, variances), len(estimates) - 1
    tau2 = dersimonian_laird_tau2(estimates, variances)
    random, random_se = inverse_variance(estimates, variances + tau2)
    return {
        **{"fixed": fixed, "fixed_low": fixed - z * fixed_se, "fixed_high": fixed + z * fixed_se},
        **{"random": random, "random_low": random - z * random_se, "random_high": random + z * random_se},
        **{"Q": q, "df": df, "p_Q": float(stats.chi2.sf(q, df)), "I2": max(0.0, (q - df) / q) if q > df else 0.0},
        "tau2": tau2,
    }
