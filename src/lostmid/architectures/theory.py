"""Rollout theories of the influence profile and the metrics that compare two profiles.

Layer matrices. Layer t (t = 1 input side .. H output side) mixes positions by

    M_t = (1 - lambda_t) I + lambda_t A_t         (n x n, row-stochastic)

and the theory's profile is the last row of the product, output side on the left,

    r = e_n^T M_H M_{H-1} ... M_1                 (computed as H row-vector products, O(H n^2)),

normalized to sum 1 (it already does, every M_t being row-stochastic). Three theories:

    cesaro             A_t = C and lambda_t = alpha = mean_t lambda_t:  r = e_n^T N^H,
                       N = (1 - alpha) I + alpha C, C_ij = 1/i for j <= i (Chowdhury)
    rollout_uniform    A_t = C with the measured lambda_t
    rollout_attention  the measured lambda_t and the measured head- and sequence-mean attention A_t
                       (Herasimchyk et al.; attention averaged before the product, not per sequence)

For constant lambda and A_t = C the three coincide. The last-token mass of the Cesaro profile is
exactly ((1 - alpha) + alpha/n)^H (N is lower triangular), which tends to (1 - alpha)^H.

Comparison metrics of a measured profile m and a theory profile q (both sum 1, positions 1..n):

    spearman       Spearman's rho of the n pairs (m_j, q_j) (rank correlation)
    w1             Wasserstein-1 distance between the two distributions over positions 1..n,
                   sum_k |M_k - Q_k| with M, Q the cumulative sums, divided by n - 1 (in [0, 1])
    first, last    the masses m_1 and m_n
    middle_depth   mean mass of the middle third (positions floor(n/3)+1 .. ceil(2n/3)) divided by
                   the mean of the two endpoint masses; < 1: a dip in the middle
"""

from __future__ import annotations

import numpy as np
from scipy import stats as scipy_stats

THEORIES = ("cesaro", "rollout_uniform", "rollout_attention")


def mass(profile) -> np.ndarray:
    """``profile`` / its sum, in float64: a distribution over positions (the measured and the theory
    profiles, and the inputs of every comparison metric)."""
    profile = np.asarray(profile, dtype=np.float64)
    return profile / profile.sum()


def rollout(lambdas, attention=None, n: int | None = None) -> np.ndarray:
    """Last row of M_H ... M_1 with M_t = (1 - lambda_t) I + lambda_t A_t; shape (n,).

    ``attention`` (H, n, n) the A_t (input side first); None: A_t = C for every t (then ``n`` is needed).
    """
    lambdas = np.asarray(lambdas, dtype=np.float64)
    n = attention.shape[-1] if attention is not None else n
    row = np.zeros(n)
    row[-1] = 1.0
    for t in reversed(range(len(lambdas))):  # the output side first: r <- r M_t
        if attention is None:
            mixed = np.cumsum((row / np.arange(1, n + 1))[::-1])[::-1]  # (r C)_j = sum_{i >= j} r_i / i
        else:
            mixed = row @ attention[t]
        row = (1 - lambdas[t]) * row + lambdas[t] * mixed
    return row


def cesaro(alpha: float, depth: int, n: int) -> np.ndarray:
    """Last row of N^H, N = (1 - alpha) I + alpha C; shape (n,)."""
    return rollout(np.full(depth, float(alpha)), n=n)


def theory_profiles(lambdas, attention) -> dict[str, np.ndarray]:
    """The three theory profiles from the measured lambda_t (H,) and A_t (H, n, n)."""
    lambdas = np.asarray(lambdas, dtype=np.float64)
    n = attention.shape[-1]
    profiles = {
        "cesaro": cesaro(lambdas.mean(), len(lambdas), n),
        "rollout_uniform": rollout(lambdas, n=n),
        "rollout_attention": rollout(lambdas, attention),
    }
    return {name: mass(p) for name, p in profiles.items()}


def spearman(a, b) -> float:
    """Spearman's rho: the Pearson correlation of the average ranks (nan if either is constant)."""
    ra, rb = scipy_stats.rankdata(a), scipy_stats.rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denominator = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / denominator) if denominator > 0 else float("nan")


def w1(p, q) -> float:
    """Wasserstein-1 distance over positions 1..n between distributions p and q, divided by n - 1."""
    p, q = mass(p), mass(q)
    return float(np.abs(np.cumsum(p) - np.cumsum(q))[:-1].sum() / (len(p) - 1))


def middle(n: int) -> slice:
    """0-based slice of the middle third: positions floor(n/3)+1 .. ceil(2n/3) (1-based)."""
    return slice(n // 3, -(-2 * n // 3))


def shape_metrics(profile) -> dict[str, float]:
    """first and last mass and middle_depth of a profile normalized to sum 1."""
    p = mass(profile)
    ends = (p[0] + p[-1]) / 2
    return {"first": float(p[0]), "last": float(p[-1]), "middle_depth": float(p[middle(len(p))].mean() / ends)}


def compare(measured, theories: dict, lambdas) -> list[dict]:
    """One row per theory: spearman, w1, the endpoint masses and middle depth of measurement and theory,
    alpha = mean lambda_t and the Cesaro recency mass (1 - alpha)^H."""
    lambdas = np.asarray(lambdas, dtype=np.float64)
    alpha, depth = float(lambdas.mean()), len(lambdas)
    m = shape_metrics(measured)
    rows = []
    for name, profile in theories.items():
        t = shape_metrics(profile)
        rows.append(
            {
                "theory": name,
                "spearman": spearman(measured, profile),
                "w1": w1(measured, profile),
                "alpha": alpha,
                "recency_bound": (1 - alpha) ** depth,
                "measured_first": m["first"],
                "measured_last": m["last"],
                "measured_middle_depth": m["middle_depth"],
                "theory_first": t["first"],
                "theory_last": t["last"],
                "theory_middle_depth": t["middle_depth"],
            }
        )
    return rows
