"""Figures of the algebraic simulations. (Their table, the paper's Table 1, is the report's summary page
``algebraic``, lostmid.catalogue.PAGES: a table, not a figure.)"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lostmid.plots.style import REFERENCE, arm_styles, figure, save

DENSITIES = {
    "influence_density": "influence density m_i (mean 1)",
    "trace_density": "observability trace tr G_i / mean",
}


def table_figure(table: pd.DataFrame, profiles: pd.DataFrame, path) -> None:
    """Influence and trace densities by position for each method (the baseline and Algorithms 1 to 3 of the
    paper's Table 1), each method in its own colour, line and marker, on log axes (1: flat, dashed)."""
    methods = list(dict.fromkeys(profiles.method))
    styles = arm_styles(methods)
    fig, axes = figure(2, 2.7, ncols=2)
    for ax, (column, label) in zip(axes, DENSITIES.items()):
        for k, method in enumerate(methods):
            line = profiles[profiles.method == method].sort_values("p")
            every = max(len(methods), len(line) // 10)  # room for each method's own shift
            # markers staggered between methods: where two curves coincide (alg2 on the baseline) both show
            markevery = (k * every // len(methods), every)
            ax.plot(line.p, line[column], label=method, markevery=markevery, **styles[method].line())
        ax.set_yscale("log")
        ax.axhline(1.0, color=REFERENCE, lw=0.8, ls="--")
        ax.set(xlabel="relative position p = (i - 1/2) / L", ylabel=label)
    axes[0].legend(frameon=False)
    fig.suptitle("Algebraic controlled model (paper Table 1; the table: summary page 'algebraic')")
    save(fig, path)


def probe_figure(probes: pd.DataFrame, path) -> None:
    """Relative bias and relative std of the probe-estimated penalty against N_probe, log-log."""
    fig, ax = figure(1, 3.6)
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
    ax.set_ylabel("relative bias, std (fraction of the exact penalty)")
    reps = int(probes["repetitions"].iloc[0]) if "repetitions" in probes else None
    ax.set_title(f"exact penalty {probes['exact'].iloc[0]:.4g}" + (f", {reps} repetitions" if reps else ""))
    fig.legend(loc="outside lower center", ncol=2, frameon=False)
    save(fig, path)
