"""How many seeds a decision needs: precision planning of a Student t interval over seeds from pilot data."""

from __future__ import annotations

import math
from typing import NamedTuple

from scipy import stats

from lostmid.stats.statistics import as_values
from lostmid.tables.summaries import t_half_width


def seeds_for_half_width(sd: float, half_width: float, level: float = 0.95) -> int:
    """Smallest n >= 2 with t_{1-a/2, n-1} * sd / sqrt(n) <= half_width (precision planning).

    ``sd`` is the between-seed standard deviation of the per-seed effect (from a pilot). The
    search starts at the normal-theory n = ceil((z * sd / half_width)^2), which no smaller n
    can beat (t > z), and walks up; the half-width decreases in n, so the first n that fits
    is the smallest. With the plug-in sd the realized half-width (which uses the new sample's
    sd) is below the target only about half the time; ``pilot_seed_plan`` gives a
    conservative n as well.
    """
    target = half_width
    if not (target > 0 and math.isfinite(target)) or not (sd >= 0 and math.isfinite(sd)):
        raise ValueError("need half_width > 0 and a finite sd >= 0")
    z = stats.norm.ppf(0.5 + level / 2)
    n = max(2, math.ceil((z * sd / target) ** 2))
    while t_half_width(sd, n, level) > target:
        n += 1
    return n


class SeedPlan(NamedTuple):
    """Seeds needed for a target half-width, from a pilot: with the pilot sd and with its upper confidence bound."""

    pilot_seeds: int
    sd: float
    sd_upper: float
    n_seeds: int
    n_seeds_conservative: int


def pilot_seed_plan(
    pilot_values, target_half_width: float, level: float = 0.95, sd_confidence: float = 0.8
) -> SeedPlan:
    """Power (precision) estimate on pilot data: how many seeds make the interval's half-width <= target.

    Estimator: the pilot's between-seed sd s of the per-seed effect (ddof=1, k pilot
    seeds) plugged into ``seeds_for_half_width``; and, because s from a handful of seeds is
    itself uncertain, also the upper ``sd_confidence`` one-sided confidence bound
    s * sqrt((k - 1) / chi2_{1 - sd_confidence, k - 1}) (chi-square interval of a normal
    variance) plugged in the same way: with that n the target holds for the true sd with
    probability ``sd_confidence``. Report both; plan with the conservative one.
    """
    values = as_values(pilot_values)
    k = values.size
    if k < 2:
        raise ValueError("a pilot needs at least 2 seeds to estimate the spread")
    sd = float(values.std(ddof=1))
    sd_upper = sd * math.sqrt((k - 1) / stats.chi2.ppf(1 - sd_confidence, k - 1))
    return SeedPlan(
        k,
        sd,
        sd_upper,
        seeds_for_half_width(sd, target_half_width, level),
        seeds_for_half_width(sd_upper, target_half_width, level),
    )
