"""The probe study of Algorithm 3: bias and spread of the probe-estimated squared trace penalty
against the number of Gaussian probes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from lostmid.algebraic.linear_model import DTYPE, gramians, traces_of
from lostmid.algebraic.remedies import squared_trace_penalty
from lostmid.algebraic.settings import AlgebraicSettings

PROBE_COLUMNS = ["n_probe", "rel_bias", "rel_std", "exact"]


def probe_traces(gram: torch.Tensor, probes: torch.Tensor) -> torch.Tensor:
    """Hutchinson trace estimates with common probes: t_i = (1/N) sum_r xi_r^T G_i xi_r.

    ``probes`` is (reps, N, d), shared by every token (common probes); returns (reps, L).
    """
    return torch.einsum("rnd,lde,rne->rl", probes, gram, probes) / probes.shape[-2]


def probe_study(s: AlgebraicSettings) -> pd.DataFrame:
    """Relative bias and standard deviation of the probe-estimated squared trace penalty.

    The baseline (u = 0) Gramians are exact; each repetition draws N Gaussian probes common to
    all tokens. Probes are nested across N (the first N of one batch of max(N)), common random
    numbers that make the curves over N smoother without changing any single estimator's law.
    ``rel_bias_theory`` is the exact bias: Var of a one-probe estimate of t_i - mean t, summed,
    over N: E[Omega_hat] - Omega = (2 / (N L)) sum_i tr((G_i - mean G)^2).
    """
    with torch.no_grad():
        gram = gramians(s, torch.zeros(s.length, dtype=DTYPE))
        exact = float(squared_trace_penalty(traces_of(gram)))
        centered = gram - gram.mean(0, keepdim=True)
        one_probe_bias = float(2 * (centered @ centered).diagonal(dim1=-2, dim2=-1).sum() / s.length)
        gen = torch.Generator().manual_seed(s.seed)
        probes = torch.randn(s.repetitions, max(s.probe_counts), s.features, generator=gen, dtype=DTYPE)
        rows = []
        for n in sorted(s.probe_counts):
            est = squared_trace_penalty(probe_traces(gram, probes[:, :n]))
            rows.append(
                {
                    "n_probe": n,
                    "rel_bias": float(est.mean() / exact - 1),
                    "rel_std": float(est.std() / exact),
                    "exact": exact,
                    "rel_bias_theory": one_probe_bias / n / exact,
                    "rel_se_bias": float(est.std() / exact / math.sqrt(s.repetitions)),
                    "repetitions": s.repetitions,
                }
            )
    return pd.DataFrame(rows)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (y must be positive)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.any(y <= 0):
        raise ValueError("log-log slope needs positive values")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])
