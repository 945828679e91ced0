"""Summary tables across runs, for the report and the README: what a reader checks first.

Each function takes tidy result tables and returns a small DataFrame; ``to_html`` renders one
as a standalone page that the Snakemake report shows inline.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

# Flag-position bins of the failure summary: early, middle and late thirds of the sequence.
THIRDS = {"early": (0.0, 1 / 3), "middle": (1 / 3, 2 / 3), "late": (2 / 3, 1.0 + 1e-9)}


def t_half_width(sd: float, n: int, level: float = 0.95) -> float:
    """Half-width of the Student t interval of a mean over n seeds: t_{1-a/2, n-1} * sd / sqrt(n).

    The one t half-width of the package: these summaries and the remedies table use it, and so do
    the evidence stage's ``t_interval`` and its seed planning (``lostmid.stats.statistics``).
    """
    from scipy import stats

    if n < 2:
        raise ValueError("a t interval needs n >= 2")
    if sd < 0:
        raise ValueError("sd must be >= 0")
    return float(stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n))


def seed_half_width(x: np.ndarray) -> float:
    """``t_half_width`` (95%) of the values ``x`` over seeds; NaN for fewer than two values."""
    return t_half_width(float(x.std(ddof=1)), x.size) if x.size >= 2 else float("nan")


def accuracy_per_checkpoint(failure: pd.DataFrame) -> pd.DataFrame:
    """Evaluation accuracy per (variant, L, depth, seed, step), all flag positions pooled:
    failures and n summed, ``failure`` = failures / n and ``accuracy`` = 1 - failures / n."""
    pooled = failure.groupby(["variant", "L", "depth", "seed", "step"], as_index=False)[["failures", "n"]].sum()
    return pooled.assign(accuracy=1 - pooled.failures / pooled.n, failure=pooled.failures / pooled.n)


def _mean_and_interval(values: pd.Series) -> str:
    """'mean ± half-width' of a 95% t-interval over seeds ('mean' alone for one seed)."""
    x = values.dropna().to_numpy(dtype=float)
    if x.size == 0:
        return "–"
    if x.size == 1:
        return f"{x[0]:.3g}"
    return f"{x.mean():.3g} ± {seed_half_width(x):.2g}"


def failure_by_third(failure: pd.DataFrame) -> pd.DataFrame:
    """Failure rate in the early, middle and late third of flag positions, per variant, L,
    depth and checkpoint: mean over seeds with a 95% interval."""
    p = failure["p"]
    parts = {name: failure[(p > low) & (p <= high)] for name, (low, high) in THIRDS.items()}
    keys = ["variant", "L", "depth", "step"]
    per_seed = {name: part.groupby(keys + ["seed"])["failure_rate"].mean() for name, part in parts.items()}
    table = pd.DataFrame(per_seed).reset_index()
    return table.groupby(keys).agg({name: _mean_and_interval for name in THIRDS}).reset_index()


def regional_metrics_over_seeds(metrics: pd.DataFrame, delta: float) -> pd.DataFrame:
    """Delta, LIM, E_inf and Z of the influence density at each checkpoint (one delta), per
    variant, L and depth: mean over seeds with a 95% interval."""
    chosen = metrics[np.isclose(metrics["delta"], delta)]
    keys = ["variant", "L", "depth", "step"]
    return chosen.groupby(keys).agg({q: _mean_and_interval for q in ("Delta", "LIM", "E_inf", "Z")}).reset_index()


def condition_rates(conditions: pd.DataFrame) -> pd.DataFrame:
    """Per condition test: rows, how often it holds, how often its conclusion holds, how often
    it is conservative (fails while the conclusion holds) and soundness violations."""
    if "violation" not in conditions:  # written before the column, by a stage that refused any violation
        conditions = conditions.assign(violation=False)
    grouped = conditions.groupby("test")
    return pd.DataFrame(
        {
            "rows": grouped.size(),
            "holds": grouped["holds"].mean(),
            "conclusion_holds": grouped["conclusion_holds"].mean(),
            "conservative": grouped.apply(lambda g: (~g["holds"] & g["conclusion_holds"]).mean(), include_groups=False),
            "violations": grouped["violation"].sum().astype(int),
        }
    ).reset_index()


def to_html(table: pd.DataFrame, title: str, note: str) -> str:
    """A standalone, readable HTML page of one table."""
    style = (
        "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;font-size:13px}"
        "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f0f0f0}"
    )
    body = table.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0)
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style></head>"
        f"<body><h3>{title}</h3><p>{note}</p>{body}</body></html>"
    )
