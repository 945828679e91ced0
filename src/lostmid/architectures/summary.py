"""Summary tables of the comparison table (means over seeds), as DataFrames or Markdown."""

from __future__ import annotations

import pandas as pd

from lostmid.architectures.theory import THEORIES
from lostmid.errors import ConfigError

GROUP = ["family", "encoding", "variant"]


def select(
    comparison: pd.DataFrame, target: str | None = None, power: int | None = None
) -> tuple[pd.DataFrame, str, int]:
    """The rows of one target and power (default: those of the first row)."""
    target = comparison.target.iloc[0] if target is None else target
    power = int(comparison.power.iloc[0]) if power is None else power
    rows = comparison.query("target == @target and power == @power")
    if rows.empty:
        raise ConfigError(f"the comparison table has no rows with target {target!r} and power {power}")
    return rows, target, power


def fit_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per model kind (rows of one target and power): Spearman's rho and W1/(n-1) of each theory, mean over
    depths, lengths, seeds and steps, side by side."""
    means = comparison.groupby(GROUP + ["theory"], sort=True)[["spearman", "w1"]].mean().unstack("theory")
    columns = [(metric, name) for name in THEORIES for metric in ("spearman", "w1")]
    out = means[columns]
    out.columns = [f"{'rho' if metric == 'spearman' else 'W1'} {name}" for metric, name in columns]
    return out.reset_index()


def endpoint_table(comparison: pd.DataFrame, n: int | None = None) -> pd.DataFrame:
    """Per model kind and depth at length ``n`` (default: the largest; rows of one target and power):
    alpha, the measured first and last mass against (1 - alpha)^H, and the middle depth of the
    measurement and of the Cesaro theory (means over seeds and steps)."""
    n = int(comparison.n.max()) if n is None else n
    rows = comparison.query("theory == 'cesaro' and n == @n")
    columns = [
        "alpha",
        "measured_first",
        "measured_last",
        "recency_bound",
        "measured_middle_depth",
        "theory_middle_depth",
    ]
    return rows.groupby(GROUP + ["depth", "n"], sort=True)[columns].mean().reset_index()


def to_markdown(df: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub Markdown table (no extra dependency): floats to ``digits`` significant digits."""

    def cell(value):
        return f"{value:.{digits}g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def interval_table(comparison: pd.DataFrame, theory: str = "rollout_attention") -> pd.DataFrame:
    """A pretrained comparison table (``lostmid.architectures.pretrained``, rows of one target and power): per
    model, weights and n, ``theory``'s rho and W1/(n-1), the measured endpoint masses, middle depth and decay
    exponent p, each as "estimate [lo, hi]"."""
    rows = comparison.query("theory == @theory").sort_values(["variant", "step", "n"])

    def cell(row, metric):
        return f"{row[metric]:.3g} [{row[metric + '_lo']:.3g}, {row[metric + '_hi']:.3g}]"

    metrics = {
        "rho": "spearman",
        "W1": "w1",
        "first": "measured_first",
        "last": "measured_last",
        "middle depth": "measured_middle_depth",
        "p": "measured_p",
        "theory p": "theory_p",
        "alpha": "alpha",
    }
    return pd.DataFrame(
        [
            {
                "model": row.variant,
                "weights": "pretrained" if row.step < 0 else f"random init (seed {row.seed})",
                "n": row.n,
                "sequences": row.sequences,
                **{name: cell(row, m) for name, m in metrics.items()},
            }
            for _, row in rows.iterrows()
        ]
    )


def markdown(comparison: pd.DataFrame, target=None, power=None, n=None) -> str:
    """Both tables with a line saying what they average; for a pretrained comparison (intervals), ``interval_table``
    of each theory."""
    rows, target, power = select(comparison, target, power)
    if "spearman_lo" in rows.columns:
        return (
            "\n\n".join(
                f"Target {target}, power {power}, theory {name}: estimate [bootstrap interval over sequences, "
                "architectures.text.level] "
                f"(rho, W1/(n-1) against the theory; first, last, middle depth, p of the measured profile):\n\n"
                + to_markdown(interval_table(rows, name))
                for name in THEORIES
            )
            + "\n"
        )
    n = int(rows.n.max()) if n is None else n
    return (
        "\n\n".join(
            [
                f"Target {target}, power {power}. Spearman's rho and W1/(n-1) of each theory against the "
                "measured profile "
                "(mean over depths, lengths, seeds and steps):",
                to_markdown(fit_table(rows)),
                f"Endpoint masses at n = {n} (recency_bound = (1 - alpha)^H; middle depth = mean mass of the "
                "middle third / mean endpoint mass):",
                to_markdown(endpoint_table(rows, n)),
            ]
        )
        + "\n"
    )
