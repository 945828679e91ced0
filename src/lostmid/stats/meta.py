"""Inverse-variance meta-analysis of estimates made on disjoint sets of units: the fixed-effect mean, Cochran's Q
and DerSimonian and Laird's between-set variance (``lostmid.evidence.pooled`` pools a claim's runs with them)."""

from __future__ import annotations

import numpy as np


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
