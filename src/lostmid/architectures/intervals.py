"""Bootstrap intervals over sequences and the power-law decay of sensitivity from the last token.

Sequences are the unit of resampling: a draw takes S of the S measured sequences with replacement
(``draws``), and every quantity (a profile, a comparison metric, lambda_t, the decay exponent) is
recomputed from that draw's sequence means. Draw 0 is the estimate itself (all sequences once); the
interval is the percentile interval of draws 1..B at ``level`` (default 95 %, B = 1000, seeded).
With few sequences (the CPU config: 2 at n = 4096) the percentile interval is narrow by construction
and says little; the cluster config's 1,000 sequences make it a real interval.

Decay. With g(r) the profile's mass at distance r = n - j from the last token, the exponent p of
g(r) ~ (r + 1)^(-p) is minus the least-squares slope of log g(r) against log(r + 1) over
r = 1 .. floor(n/2) (``decay_exponent``): the last token itself (r = 0, its own spike) and the first half
of the sequence (the primacy end) are left out. The range was fixed before any profile was measured.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as scipy_stats

from lostmid.architectures import theory

LEVEL = 0.95


def draws(sequences: int, resamples: int, seed: int) -> np.ndarray:
    """(1 + B, S) weights: row 0 all 1/S (the estimate), rows 1..B the bootstrap draws' counts / S."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(sequences, np.full(sequences, 1 / sequences), size=resamples)
    return np.vstack([np.ones(sequences), counts]) / sequences


def nested_draws(groups: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(1 + B, S) weights of S units nested in groups (``groups``: each unit's group): row 0 all 1/S (the
    estimate), each later row a two-level bootstrap draw: G of the G groups with replacement, then within each
    drawn group as many of its units as it has, with replacement; a unit's count over the draw's total (the fix
    run's fits, then windows within fits)."""
    distinct, code = np.unique(np.asarray(groups), return_inverse=True)
    members = [np.flatnonzero(code == g) for g in range(len(distinct))]
    rng = np.random.default_rng(seed)
    counts = np.zeros((resamples + 1, len(code)))
    counts[0] = 1.0
    for row in counts[1:]:
        for group in rng.integers(len(distinct), size=len(distinct)):
            np.add.at(row, rng.choice(members[group], size=len(members[group])), 1.0)
    return counts / counts.sum(1, keepdims=True)


def means(weights: np.ndarray, per_sequence: np.ndarray) -> np.ndarray:
    """Per draw, the weighted mean over sequences of ``per_sequence`` (S, ...): (1 + B, ...)."""
    return np.tensordot(weights, per_sequence, axes=1)


def profiles(weights: np.ndarray, per_sequence: np.ndarray) -> np.ndarray:
    """Per draw, the sequence mean of ``per_sequence`` (S, n) normalized to sum 1: (1 + B, n)."""
    mean = means(weights, per_sequence)
    return mean / mean.sum(1, keepdims=True)


def spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Spearman's rho of (D, n) arrays (``theory.spearman`` per row)."""
    ra, rb = scipy_stats.rankdata(a, axis=1), scipy_stats.rankdata(b, axis=1)
    ra, rb = ra - ra.mean(1, keepdims=True), rb - rb.mean(1, keepdims=True)
    denominator = np.sqrt((ra * ra).sum(1) * (rb * rb).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (ra * rb).sum(1) / denominator, np.nan)


def w1_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise ``theory.w1`` of (D, n) distributions."""
    return np.abs(np.cumsum(p, 1) - np.cumsum(q, 1))[:, :-1].sum(1) / (p.shape[1] - 1)


def shape_rows(p: np.ndarray) -> dict:
    """Row-wise ``theory.shape_metrics``: first, last and middle_depth of (D, n) distributions."""
    ends = (p[:, 0] + p[:, -1]) / 2
    return {"first": p[:, 0], "last": p[:, -1], "middle_depth": p[:, theory.middle(p.shape[1])].mean(1) / ends}


def decay_exponent(p: np.ndarray) -> np.ndarray:
    """Row-wise p of g(r) ~ (r + 1)^(-p), g(r) = mass at position n - r, least squares in log-log over
    r = 1 .. floor(n/2); nan for a row with a non-positive mass in that range. (D, n) -> (D,)."""
    n = p.shape[1]
    r = np.arange(1, n // 2 + 1)
    g = p[:, n - 1 - r]  # position n - r, 0-based n - 1 - r
    x = np.log(r + 1.0)
    x = x - x.mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(g > 0, np.log(np.where(g > 0, g, 1.0)), np.nan)
    slope = ((y - y.mean(1, keepdims=True)) * x).sum(1) / (x * x).sum()
    return -slope
