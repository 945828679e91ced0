"""Seaborn figures of the influence stage.

Densities have mean 1 and span orders of magnitude, so every profile is drawn on a log scale
with the flat profile m = 1 as a dashed line: lines are geometric means over seeds and bands their 95%
intervals on the log scale (lostmid.plots.common.LOG_BAND); signed quantities get mean ± 1.96 standard errors.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from lostmid.plots.common import ARM_KEYS, LOG_BAND, SEED_INTERVAL, nearest_delta, seeds_of, seeds_text, with_arm
from lostmid.plots.style import arm_palette, save

P_LABEL = "relative position p = (i - 1/2) / L"


def _log_density(grid) -> None:
    for ax in np.ravel(grid.axes):
        ax.set_yscale("log")
        ax.axhline(1.0, color="0.4", lw=0.8, ls="--")


def _positive(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """Exact zeros (positions the adjoint has not reached yet) cannot sit on a log axis."""
    return table.assign(**{column: table[column].where(table[column] > 0)})


def profiles_over_training(influence: pd.DataFrame, path) -> None:
    """Input-influence density m_i against p at every checkpoint (colour = step), a panel per arm (variant,
    L, depth)."""
    data = with_arm(_positive(influence[influence.layer == 0], "density"))
    _arm_panels(data, "step", "viridis", path, "influence density m_i (mean 1)", "{col_name} ({seeds})")


def _arm_panels(data: pd.DataFrame, hue: str, palette: str, path, ylabel: str, title: str) -> None:
    """Density against p, a line per ``hue`` value, one panel per arm (log axis, geometric means)."""
    arms = list(dict.fromkeys(data.sort_values(ARM_KEYS).arm))
    seeds = seeds_of(data)
    grid = sns.relplot(
        data=data,
        x="p",
        y="density",
        hue=hue,
        col="arm",
        col_order=arms,
        col_wrap=min(3, len(arms)),
        kind="line",
        palette=palette,
        height=2.5,
        aspect=1.3,
        marker="o",
        markersize=3,  # late layers can be a single point (the terminal adjoint at L)
        **LOG_BAND,
    )
    _log_density(grid)
    for arm, ax in grid.axes_dict.items():
        ax.set_title(title.format(col_name=arm, seeds=seeds_text(seeds[arm]), step=data[data.arm == arm].step.max()))
    grid.set_axis_labels(P_LABEL, ylabel)
    save(grid, path)


def metrics_over_training(metrics: pd.DataFrame, path, delta: float) -> None:
    """Delta, LIM (at region scale ``delta``), E_inf and raw Z against the training step, a line per variant
    (style = L). Z is positive and drawn on a log axis (geometric mean, interval on the log scale)."""
    shown = nearest_delta(metrics, delta)
    data = metrics[np.isclose(metrics.delta, shown)]
    fig, axes = plt.subplots(2, 2, figsize=(8.5, 5.6), layout="constrained")
    palette = arm_palette(data.variant.unique())
    for ax, name in zip(axes.flat, ["Delta", "LIM", "E_inf", "Z"]):
        band = LOG_BAND if name == "Z" else {"errorbar": SEED_INTERVAL}
        sns.lineplot(
            data=data,
            x="step",
            y=name,
            hue="variant",
            style="L",
            palette=palette,
            markers=True,
            ax=ax,
            legend=name == "Z",
            **band,
        )
        if name == "Z":
            ax.set_yscale("log")
            sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1), frameon=False)
        else:
            ax.axhline(0.0, color="0.4", lw=0.8, ls="--")
        title = f"{name} (delta = {shown:g})" if name in ("Delta", "LIM") else name
        ax.set(title=title, xlabel="training step", ylabel="")
    save(fig, path)


def depth_profiles(influence: pd.DataFrame, path) -> None:
    """Per-step densities m^(k) (colour = residual-state index k) at each arm's own last checkpoint, a panel
    per arm (variant, L, depth).

    With readout 'last' the terminal adjoint lives at position L only; the profile widens as
    the adjoint flows back through the steps towards the input (k = 0).
    """
    arms = influence.groupby(ARM_KEYS).step.transform("max")
    data = with_arm(_positive(influence[influence.step == arms], "density"))
    _arm_panels(data, "layer", "crest", path, "density m^(k)_i of P_k", "{col_name}, step {step} ({seeds})")


def init_sweep(sweep: pd.DataFrame, path) -> None:
    """Influence density at initialization for depths 1..M, without and with the residual path."""
    data = sweep.assign(path=np.where(sweep.residual, "with residual", "without residual"))
    grid = sns.relplot(
        data=data,
        x="p",
        y="density",
        hue="depth",
        col="path",
        col_order=["without residual", "with residual"],
        kind="line",
        **LOG_BAND,
        palette="flare",
        legend="full",
        height=3.0,
        aspect=1.3,
        facet_kws={"sharey": False},
    )
    _log_density(grid)
    grid.set_titles("{col_name}")
    grid.set_axis_labels(P_LABEL, "influence density at step 0")
    save(grid, path)


def structural_baseline(table: pd.DataFrame, path) -> None:
    """Measured density (markers) over the closed form m_j ~ ((N^M)_{L,j})^2 (lines), input layer."""
    data = table[table.layer == 0]
    lengths = sorted(data.L.unique())
    fig, axes = plt.subplots(len(lengths), 2, figsize=(9, 2.6 * len(lengths)), squeeze=False, sharex=True)
    depths = sorted(data.depth.unique())
    colors = dict(zip(depths, sns.color_palette("flare", len(depths))))
    for row, L in enumerate(lengths):
        for col, residual in enumerate([False, True]):
            ax = axes[row, col]
            part = data[(data.L == L) & (data.residual == residual)]
            for depth, curve in part.groupby("depth"):
                ax.plot(curve.p, curve.closed_form, color=colors[depth], lw=1.2, label=f"M = {depth}")
                ax.plot(curve.p, curve.measured, "o", color=colors[depth], ms=3, mfc="none")
            ax.set_yscale("log")
            ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
            ax.set_title(f"L = {L}, {'N = I + hC (residual)' if residual else 'N = C (no residual)'}")
            ax.set_ylabel("density m_j")
    axes[-1, 0].set_xlabel(P_LABEL)
    axes[-1, 1].set_xlabel(P_LABEL)
    axes[0, 1].legend(title="lines: closed form\nmarkers: measured", fontsize=7, title_fontsize=7)
    fig.tight_layout()
    save(fig, path)


def density_flow(flow: pd.DataFrame, path) -> None:
    """Predicted d_s m (eq. 69) against the finite difference of one gradient step (the smallest
    eta), every checkpoint; and the relative error by step for every eta."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    smallest = flow[flow.eta == flow.eta.min()]
    sns.scatterplot(
        data=smallest, x="predicted", y="finite_difference", hue="step", style="L", palette="viridis", s=12, ax=axes[0]
    )
    low, high = (
        np.nanmin(smallest[["predicted", "finite_difference"]].values),
        np.nanmax(smallest[["predicted", "finite_difference"]].values),
    )
    axes[0].plot([low, high], [low, high], color="0.4", lw=0.8, ls="--")
    axes[0].set_xlabel("predicted d_s m_i (forward-over-reverse)")
    axes[0].set_ylabel(f"(m(theta - eta g) - m) / eta, eta = {smallest.eta.iloc[0]:g}")
    errors = flow.drop_duplicates(["variant", "L", "depth", "seed", "step", "eta"]).assign(
        eta=lambda t: t.eta.map("{:g}".format)
    )
    sns.lineplot(
        data=errors,
        x="step",
        y="rel_error",
        hue="eta",
        style="variant",
        markers=True,
        ax=axes[1],
        **LOG_BAND,
    )
    axes[1].set_yscale("log")
    axes[1].set_xlabel("training step")
    axes[1].set_ylabel("relative error of the prediction")
    fig.tight_layout()
    save(fig, path)
