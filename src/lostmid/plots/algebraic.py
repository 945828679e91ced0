"""Figures of the algebraic simulations."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from lostmid.plots.style import save

SHOWN = [
    "left",
    "middle",
    "right",
    "Delta",
    "SC",
    "LIM",
    "E_inf",
    "Z",
    "trace_left",
    "trace_middle",
    "trace_right",
    "obs_imbalance",
]


def table_figure(table: pd.DataFrame, profiles: pd.DataFrame, path) -> None:
    """Influence and trace densities by position for each method, above the rendered table."""
    fig = plt.figure(figsize=(11, 7.2))
    grid = fig.add_gridspec(2, 2, height_ratios=[1.5, 1])
    long = profiles.melt(id_vars=["method", "p"], value_vars=["influence_density", "trace_density"], var_name="density")
    for k, name in enumerate(["influence_density", "trace_density"]):
        ax = fig.add_subplot(grid[0, k])
        sns.lineplot(data=long[long.density == name], x="p", y="value", hue="method", marker="o", markersize=3, ax=ax)
        ax.set_yscale("log")
        ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
        ax.set_xlabel("relative position p = (i - 1/2) / L")
        ax.set_ylabel("normalized density (mean 1)")
        ax.set_title("influence density m_i" if k == 0 else "observability trace density tr G_i / mean")
    ax = fig.add_subplot(grid[1, :])
    ax.axis("off")
    cols = [c for c in SHOWN if c in table.columns]
    cells = [[f"{v:.4f}" for v in table.loc[i, cols]] for i in table.index]
    labels = [c.replace("_", "\n", 1) if c.startswith(("trace_", "obs_")) else c for c in cols]
    tab = ax.table(cellText=cells, rowLabels=list(table["method"]), colLabels=labels, loc="center")
    tab.auto_set_font_size(False)
    tab.set_fontsize(8)
    tab.scale(1, 1.6)
    for (r, _c), cell in tab.get_celld().items():
        if r == 0:
            cell.set_height(cell.get_height() * 1.6)
    fig.suptitle("Algebraic controlled model: remedies (paper Table 1); delta = 0.2")
    save(fig, path)


def probe_figure(probes: pd.DataFrame, path) -> None:
    """Relative bias and relative std of the probe-estimated penalty against N_probe, log-log."""
    fig, ax = plt.subplots(figsize=(6, 4.2))
    n = probes["n_probe"].to_numpy(float)
    bias, half = probes["rel_bias"].to_numpy(float), 2 * probes["rel_se_bias"].to_numpy(float)
    # The bias is signed: an interval reaching 0 or below cannot sit on the log axis. Its lower whisker
    # stops at the axis floor, where a "v" says that it goes on to 0 or below.
    positive = np.concatenate([bias[bias > 0], (bias - half)[bias - half > 0], probes["rel_std"].to_numpy(float)])
    floor = positive.min() / 3
    low = np.maximum(bias - half, floor)
    ax.errorbar(n, bias, yerr=[bias - low, half], marker="o", capsize=3, label="relative bias (±2 SE)")
    below = bias - half <= 0
    if below.any():
        ax.plot(n[below], np.full(below.sum(), floor), "v", color="C0", label="interval reaches 0 or below")
    ax.plot(n, probes["rel_bias_theory"], ls=":", color="C0", label="exact bias (theory)")
    ax.plot(n, probes["rel_std"], marker="s", label="relative std (one batch)")
    ax.plot(n, probes["rel_bias_theory"].iloc[0] / n, color="0.5", lw=0.8, ls="--", label="∝ 1/N")
    ax.plot(n, probes["rel_std"].iloc[0] / np.sqrt(n), color="0.5", lw=0.8, ls="-.", label="∝ 1/√N")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor * 0.8)
    ax.set_xlabel("N_probe (common Gaussian probes)")
    ax.set_ylabel("relative to the exact penalty")
    reps = int(probes["repetitions"].iloc[0]) if "repetitions" in probes else None
    ax.set_title(
        f"Probe study: exact penalty {probes['exact'].iloc[0]:.4g}" + (f", {reps} repetitions" if reps else "")
    )
    ax.legend(fontsize=7)
    save(fig, path)
