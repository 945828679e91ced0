"""Statistics of influence profiles as L grows (docs/length.md), torch-free: the evidence stage and the
figures read them from the length study's profile tables (``lostmid.analysis.length``).

For a profile v_1..v_L (one unit: an initialization seed or a held-out initialization), with the
null each has as L grows:

    log10_first_last   log10 v_1 / v_L                        fixed shape in p = (i - 1/2)/L: constant
    log2_E_inf         log2 E_inf of the density v / mean v    fixed shape: constant; all of it on the last
                                                               position (a spike): E_inf = L - 1, slope ~1
    log2_L_last_share  log2 (L v_L / sum v)                    fixed shape: constant; a spike: log2 L, slope 1

"Grows with L" is then the per-unit least-squares slope of a statistic on log2 L: its change per
doubling of L, whose null for a profile of fixed shape is 0 for all three, and for a spike on the
last position is 0 (log10 first/last is then infinite, not a number) for the first and ~1 for the others.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lostmid.core.density import density, imbalance
from lostmid.tables.summaries import t_half_width

STATISTICS = ("log10_first_last", "log2_E_inf", "log2_L_last_share")


def profile_statistics(values: np.ndarray) -> dict[str, float]:
    """The three statistics of one profile (positions in order)."""
    values = np.asarray(values, dtype=np.float64)
    L = values.size
    return {
        "log10_first_last": float(np.log10(values[0] / values[-1])),
        "log2_E_inf": float(np.log2(imbalance(density(values)))),
        "log2_L_last_share": float(np.log2(L * values[-1] / values.sum())),
    }


def statistics_table(profiles: pd.DataFrame, keys: list[str], column: str) -> pd.DataFrame:
    """One row per group of ``keys`` (which include L and the unit): the statistics of ``column``'s
    profile over the group's positions, in position order."""
    rows = []
    for group, part in profiles.sort_values("position").groupby(keys, sort=True):
        rows.append({**dict(zip(keys, group)), **profile_statistics(part[column].to_numpy())})
    return pd.DataFrame(rows, columns=[*keys, *STATISTICS])


def slope_per_doubling(L, values) -> float:
    """Least-squares slope of ``values`` on log2 L: the change per doubling of L."""
    return float(np.polyfit(np.log2(np.asarray(L, dtype=np.float64)), np.asarray(values, dtype=np.float64), 1)[0])


def slopes_per_unit(stats: pd.DataFrame, unit: str, statistic: str) -> pd.Series:
    """Per unit (seed or held-out initialization): the slope of ``statistic`` on log2 L over the lengths it has."""
    return stats.groupby(unit).apply(lambda g: slope_per_doubling(g.L, g[statistic]), include_groups=False)


def _interval(values: pd.Series, level: float = 0.95) -> str:
    n = values.size
    half = t_half_width(float(values.std(ddof=1)), n, level) if n > 1 else np.nan
    return f"{values.mean():.3g} [{values.mean() - half:.3g}, {values.mean() + half:.3g}]"


def init_summary(init: pd.DataFrame) -> pd.DataFrame:
    """Per residual path, measure and L: each statistic's mean over init seeds with its 95% t interval."""
    rows = []
    for column in ("output_jacobian", "density"):
        stats = statistics_table(init, ["residual", "seed", "L"], column)
        for (residual, L), part in stats.groupby(["residual", "L"]):
            rows.append(
                {
                    "residual": bool(residual),
                    "measure": column,
                    "L": int(L),
                    "seeds": len(part),
                    **{name: _interval(part[name]) for name in STATISTICS},
                }
            )
    return pd.DataFrame(rows)


def fit_summary(fits: pd.DataFrame, profiles: pd.DataFrame) -> pd.DataFrame:
    """Per fit: its cost, its held-out check, and log10 first/last and E_inf of the held-out profiles
    with B = 0 and with it, in the fit network and inserted into the residual model."""
    stats = statistics_table(profiles, ["residual", "bias", "heldout_init", "L"], "output_jacobian")
    rows = []
    for fit in fits.itertuples():
        row = {
            "L": fit.L,
            "B": fit.param,
            "seconds": round(fit.seconds, 1),
            "iterations": fit.iterations,
            "held-out change of E_inf [95%]": f"{fit.change:.3g} [{fit.change_low:.3g}, {fit.change_high:.3g}]",
            "accepted": bool(fit.accepted),
        }
        for residual, where in ((False, "fit network"), (True, "residual model")):
            for bias in ("none", fit.param):
                part = stats[(stats.residual == residual) & (stats.bias == bias) & (stats.L == fit.L)]
                label = f"{where}, B {'= 0' if bias == 'none' else 'fitted'}"
                row[f"{label}: E_inf"] = _interval(2.0**part.log2_E_inf)
                row[f"{label}: log10 first/last"] = _interval(part.log10_first_last)
        rows.append(row)
    return pd.DataFrame(rows)
