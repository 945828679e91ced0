"""A primary's estimate from its replication units, in the form the Holm reading needs: an interval at any
confidence level and a two-sided p-value against 0, both from the same per-unit effects.

- ``MeanEffect``: the mean of per-unit effects (one per seed or window), Student t;
- ``WelchEffect``: the difference of two independent means, Welch's t;
- ``WaldEffect``: a model coefficient with its (robust) standard error, normal;
- ``BootstrapEffect``: a point estimate with its cluster-bootstrap replicates, percentile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from lostmid.tables.summaries import t_half_width


@dataclass(frozen=True)
class MeanEffect:
    """The mean of per-unit effects (a Series indexed by unit) with its Student t interval."""

    units: pd.Series
    method: str

    @property
    def estimate(self) -> float:
        return float(self.units.mean())

    @property
    def n(self) -> int:
        return int(self.units.size)

    def interval(self, level: float) -> tuple[float, float]:
        x = self.units.to_numpy(np.float64)
        if x.size < 2:
            return float("nan"), float("nan")
        half = t_half_width(float(x.std(ddof=1)), x.size, level)
        return float(x.mean() - half), float(x.mean() + half)

    @property
    def p_value(self) -> float:
        x = self.units.to_numpy(np.float64)
        if x.size < 2:
            return 1.0
        if np.all(x == x[0]):
            return 1.0 if x[0] == 0 else 0.0
        return float(stats.ttest_1samp(x, 0.0).pvalue)


@dataclass(frozen=True)
class WelchEffect:
    """mean(a) - mean(b) of two independent sets of per-unit effects, Welch's t (unequal variances)."""

    a: pd.Series
    b: pd.Series
    method: str

    @property
    def estimate(self) -> float:
        return float(self.a.mean() - self.b.mean())

    @property
    def n(self) -> int:
        return int(self.a.size + self.b.size)

    def _se_df(self) -> tuple[float, float]:
        va, vb = self.a.var(ddof=1) / self.a.size, self.b.var(ddof=1) / self.b.size
        df = (va + vb) ** 2 / (va**2 / (self.a.size - 1) + vb**2 / (self.b.size - 1))
        return float(np.sqrt(va + vb)), float(df)

    def interval(self, level: float) -> tuple[float, float]:
        if min(self.a.size, self.b.size) < 2:
            return float("nan"), float("nan")
        se, df = self._se_df()
        half = stats.t.ppf(0.5 + level / 2, df) * se
        return self.estimate - half, self.estimate + half

    @property
    def p_value(self) -> float:
        if min(self.a.size, self.b.size) < 2:
            return 1.0
        return float(stats.ttest_ind(self.a, self.b, equal_var=False).pvalue)


@dataclass(frozen=True)
class WaldEffect:
    """A coefficient with its standard error (robust, over ``n`` clusters), normal interval and p-value."""

    estimate: float
    se: float
    n: int
    method: str

    def interval(self, level: float) -> tuple[float, float]:
        half = stats.norm.ppf(0.5 + level / 2) * self.se
        return self.estimate - half, self.estimate + half

    @property
    def p_value(self) -> float:
        return float(2 * stats.norm.sf(abs(self.estimate / self.se))) if self.se > 0 else 1.0


@dataclass(frozen=True)
class BootstrapEffect:
    """A point estimate with its bootstrap replicates (resampling whole units): percentile interval, and the
    two-sided p-value 2 min(share of replicates <= 0, share >= 0), each share counted as (k + 1) / (B + 1)."""

    estimate: float
    replicates: np.ndarray
    n: int
    method: str

    def interval(self, level: float) -> tuple[float, float]:
        low, high = np.quantile(self.replicates, [0.5 - level / 2, 0.5 + level / 2])
        return float(low), float(high)

    @property
    def p_value(self) -> float:
        b = self.replicates.size
        below, above = ((np.sum(side) + 1) / (b + 1) for side in (self.replicates <= 0, self.replicates >= 0))
        return float(min(1.0, 2 * min(below, above)))
