"""Seaborn figures of the influence stage.

Densities have mean 1 and span orders of magnitude, so every profile is drawn on a log scale
with the flat profile m = 1 as a dashed line: lines are geometric means over seeds and bands their 95%
intervals on the log scale (lostmid.plots.common.curve); signed quantities get mean ± 1.96 standard errors.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from lostmid.plots.common import (
    arm_order,
    curve,
    draw_curve,
    label_bottoms,
    nearest_delta,
    panels,
    seeds_text,
    setting_label,
)
from lostmid.plots.style import REFERENCE, arm_styles, figure, ordered_styles, save

P_LABEL = "relative position p = (i - 1/2) / L"


def _positive(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """Exact zeros (positions the adjoint has not reached yet) cannot sit on a log axis."""
    return table.assign(**{column: table[column].where(table[column] > 0)})


def profiles_over_training(influence: pd.DataFrame, path) -> None:
    """Input-influence density m_i against p at every checkpoint (a line each), a panel per arm (variant, L,
    depth), each panel on its own log axis."""
    data = _positive(influence[influence.layer == 0], "density")
    _arm_panels(data, "step", "training step", path, "influence density m_i (mean 1)")


def _arm_panels(data: pd.DataFrame, hue: str, hue_title: str, path, ylabel: str, at_last: bool = False) -> None:
    """Density against p, a line per ``hue`` value (geometric mean over seeds, 95% band on the log scale), one
    panel per arm, each on its own log axis (an arm whose densities span more orders of magnitude does not
    squash the others'), the flat profile m = 1 dashed."""
    arms = arm_order(data)
    values = sorted(data[hue].unique())
    styles = dict(zip(values, ordered_styles(len(values))))
    fig, axes = panels(len(arms), ncols=3, panel_height=1.75, sharex=True)
    for ax, (variant, L, depth) in zip(axes, arms):
        part = data[(data.variant == variant) & (data.L == L) & (data.depth == depth)]
        for value, line in part.groupby(hue):
            draw_curve(ax, curve(line, "p", "density", "log"), "p", styles[value], band_alpha=0.1)
        ax.set_yscale("log")
        ax.axhline(1.0, color=REFERENCE, lw=0.8, ls="--")
        step = f", step {part.step.max()}" if at_last else ""
        ax.set_title(f"{variant} ({seeds_text(part.seed.nunique())})\n{setting_label(L, depth)}{step}")
    label_bottoms(axes, 3, P_LABEL)
    fig.supylabel(ylabel)  # one label for the panels' own axes
    handles = [Line2D([], [], label=f"{v}", **styles[v].line()) for v in values]
    fig.legend(handles=handles, title=hue_title, loc="outside lower center", ncol=min(len(values), 8), frameon=False)
    save(fig, path)


def scaled_to_lines(ax, lines: list[pd.DataFrame], pad: float = 0.25) -> None:
    """The y axis scaled to the lines drawn (their range padded by ``pad`` of it), not to their bands: a band of
    a few seeds may run off the axis, its line is never cut."""
    values = pd.concat([line["mean"] for line in lines]).dropna()
    if values.empty:
        return
    low, high = values.min(), values.max()
    margin = pad * (high - low) or 0.1 * max(abs(high), 1e-12)
    ax.set_ylim(low - margin, high + margin)


METRICS = {  # docs/theory.md §4
    "Delta": "Delta = min(m_L, m_R) - m_M",
    "LIM": "LIM = 1 - m_M / min(m_L, m_R)",
    "E_inf": "E_inf = mean (m_i - 1)^2",
    "Z": "Z = sum_i E||P_0(i)||^2",
}


def _arm_names(table: pd.DataFrame) -> pd.Series:
    """Each row's arm as the legend names it: its variant, with its L where the variant runs at several."""
    several = table.groupby("variant").L.nunique().gt(1)
    return pd.Series([f"{v}, L = {L}" if several[v] else v for v, L in zip(table.variant, table.L)], index=table.index)


def metrics_over_training(metrics: pd.DataFrame, path, delta: float) -> None:
    """Delta, LIM (at region scale ``delta``), E_inf and Z against the training step, a line per arm in its
    style; means over seeds with 95% bands (Z: geometric mean on a log axis). Each axis is scaled to its
    lines (bands of few seeds may run off it)."""
    shown = nearest_delta(metrics, delta)
    data = metrics[np.isclose(metrics.delta, shown)]
    data = data.assign(arm=_arm_names(data))
    order = pd.DataFrame(arm_order(data), columns=["variant", "L", "depth"])
    styles = arm_styles(list(dict.fromkeys(_arm_names(order))))
    fig, axes = figure(2, 4.4, nrows=2, ncols=2, sharex=True)
    for ax, (name, label) in zip(axes.flat, METRICS.items()):
        band = "log" if name == "Z" else "signed"
        lines = []
        for arm, style in styles.items():
            line = curve(data[data.arm == arm], "step", name, band)
            draw_curve(ax, line, "step", style, label=arm)
            lines.append(line)
        if name == "Z":
            ax.set_yscale("log")
        else:
            ax.axhline(0.0, color=REFERENCE, lw=0.8, ls="--")
            scaled_to_lines(ax, lines + [pd.DataFrame({"mean": [0.0]})])
        ax.set_ylabel(label)
        ax.set_xlabel("training step" if name in ("E_inf", "Z") else "")
    fig.suptitle(f"region scale delta = {shown:g}; mean over seeds, 95% band")
    handles = [Line2D([], [], label=arm, **style.line()) for arm, style in styles.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), frameon=False)
    save(fig, path)


def depth_profiles(influence: pd.DataFrame, path) -> None:
    """Per-step densities m^(k) (a line per residual-state index k) at each arm's own last checkpoint, a panel
    per arm (variant, L, depth).

    With readout 'last' the terminal adjoint lives at position L only; the profile widens as
    the adjoint flows back through the steps towards the input (k = 0).
    """
    last = influence.groupby(["variant", "L", "depth"]).step.transform("max")
    data = _positive(influence[influence.step == last], "density")
    _arm_panels(data, "layer", "residual state k", path, "density m^(k)_i of P_k", at_last=True)


def _by_depth(ax, part: pd.DataFrame, y: str, styles: dict) -> None:
    for depth, line in part.groupby("depth"):
        draw_curve(ax, curve(line, "p", y, "log"), "p", styles[depth])


def _depth_legend(fig, styles: dict, title: str = "depth M") -> None:
    handles = [Line2D([], [], label=f"{d}", **s.line()) for d, s in styles.items()]
    fig.legend(handles=handles, title=title, loc="outside lower center", ncol=len(handles), frameon=False)


def init_sweep(sweep: pd.DataFrame, path) -> None:
    """Influence density at initialization for depths 1..M (a line each), without and with the residual path,
    each panel on its own log axis."""
    depths = sorted(sweep.depth.unique())
    styles = dict(zip(depths, ordered_styles(len(depths))))
    cases = [(r, t) for r, t in ((False, "without residual"), (True, "with residual")) if (sweep.residual == r).any()]
    fig, axes = panels(len(cases), ncols=2, panel_height=2.2)
    for ax, (residual, title) in zip(axes, cases):
        _by_depth(ax, _positive(sweep[sweep.residual == residual], "density"), "density", styles)
        ax.set(yscale="log", title=title, xlabel=P_LABEL, ylabel="influence density at step 0")
        ax.axhline(1.0, color=REFERENCE, lw=0.8, ls="--")
    _depth_legend(fig, styles)
    save(fig, path)


def structural_baseline(table: pd.DataFrame, path) -> None:
    """Measured density (markers, no line) over the closed form m_j ~ ((N^M)_{L,j})^2 (lines), input layer: a row
    per L, without and with the residual path, a line style per depth."""
    data = table[table.layer == 0]
    lengths = sorted(data.L.unique())
    depths = sorted(data.depth.unique())
    styles = dict(zip(depths, ordered_styles(len(depths))))
    fig, axes = figure(2, min(1.9 * len(lengths) + 0.7, 8.5), nrows=len(lengths), ncols=2, squeeze=False, sharex=True)
    for row, L in enumerate(lengths):
        for col, residual in enumerate([False, True]):
            ax = axes[row, col]
            part = data[(data.L == L) & (data.residual == residual)]
            for depth, line in part.groupby("depth"):
                style = styles[depth]
                ax.plot(line.p, line.closed_form, color=style.color, dashes=style.dashes or (None, None), lw=1.0)
                ax.plot(line.p, line.measured, ls="", marker=style.marker, color=style.color, ms=3.5, mfc="none")
            ax.set_yscale("log")
            ax.axhline(1.0, color=REFERENCE, lw=0.8, ls="--")
            ax.set_title(f"L = {L}, {'N = I + hC (residual)' if residual else 'N = C (no residual)'}")
            ax.set_ylabel("density m_j")
    for ax in axes[-1]:
        ax.set_xlabel(P_LABEL)
    _depth_legend(fig, styles, "depth M (lines: closed form; markers: measured)")
    save(fig, path)


def density_flow(flow: pd.DataFrame, path) -> None:
    """Predicted d_s m (eq. 69) against the finite difference of one gradient step (the smallest eta), every
    checkpoint, the axes holding the central 90% of the points with half its width of room (how many lie
    outside is said); and the relative
    error by step for every eta (a line each; geometric mean over runs, 95% band on the log scale)."""
    fig, axes = figure(2, 2.7, ncols=2)
    smallest = flow[flow.eta == flow.eta.min()]
    pairs = smallest[["predicted", "finite_difference"]].dropna()
    values = pairs.to_numpy()
    low, high = np.quantile(values, [0.05, 0.95])  # the bulk of the points; the axes hold it with room
    margin = 0.5 * (high - low) or 1.0
    low, high = max(low - margin, values.min()), min(high + margin, values.max())
    inside = pairs[(pairs >= low).all(axis=1) & (pairs <= high).all(axis=1)]
    axes[0].plot(inside.predicted, inside.finite_difference, ls="", marker="o", ms=2.5, alpha=0.5, color="C0")
    axes[0].plot([low, high], [low, high], color=REFERENCE, lw=0.8, ls="--")
    axes[0].set(xlim=(low, high), ylim=(low, high))
    axes[0].set_xlabel("predicted d_s m_i (forward-over-reverse)")
    axes[0].set_ylabel(f"(m(theta - eta g) - m) / eta\n(eta = {smallest.eta.iloc[0]:g})")
    axes[0].set_title(f"{len(inside)} of {len(pairs)} points; {len(pairs) - len(inside)} outside the axes")
    runs = flow.drop_duplicates(["variant", "L", "depth", "seed", "step", "eta"])
    etas = sorted(runs.eta.unique())
    styles = dict(zip(etas, ordered_styles(len(etas))))
    for eta in etas:
        draw_curve(
            axes[1], curve(runs[runs.eta == eta], "step", "rel_error", "log"), "step", styles[eta], label=f"{eta:g}"
        )
    axes[1].set(yscale="log", xlabel="training step", ylabel="relative error of the prediction")
    axes[1].legend(title="eta", frameon=False)
    save(fig, path)
