"""Summary tables of the comparison table (means over seeds), as DataFrames or Markdown."""

from __future__ import annotations

import pandas as pd

GROUP = ["family", "encoding", "variant"]


def fit_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per model kind, target, power and theory: mean Spearman rho and mean W1/(n-1) over depths, lengths
    and seeds, and the worst (lowest) rho."""
    keys = GROUP + ["target", "power", "theory"]
    out = comparison.groupby(keys, sort=True).agg(rho_mean=("spearman", "mean"), rho_min=("spearman", "min"), w1_mean=("w1", "mean"), rows=("w1", "size"))
    return out.reset_index()


def endpoint_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per model kind, depth and length (one theory row: cesaro; first target and power): alpha, the measured
    first and last mass, the Cesaro theory's last mass and (1 - alpha)^H, and the measured middle depth."""
    target, power = comparison[["target", "power"]].iloc[0]
    rows = comparison.query("theory == 'cesaro' and target == @target and power == @power")
    columns = ["alpha", "measured_first", "measured_last", "theory_last", "recency_bound", "measured_middle_depth", "theory_middle_depth"]
    return rows.groupby(GROUP + ["depth", "n"], sort=True)[columns].mean().reset_index()


def to_markdown(df: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub Markdown table (no extra dependency): floats rounded to ``digits`` significant places."""
    def cell(value):
        if isinstance(value, float):
            return f"{value:.{digits}g}"
        return str(value)

    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)
