"""Figures of the architectures stage: measured profiles against the three rollout theories.

Profiles are drawn as densities n * mass (1 = flat) against the relative position (j - 1/2)/n on
a log scale, so the primacy tail, the middle and the last-token spike are all visible.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from lostmid.core.density import relative_position
from lostmid.plots.style import MAX_HEIGHT, PALETTE, REFERENCE, ArmStyle, figure, save

ORDER = ["measured", "cesaro", "rollout_uniform", "rollout_attention"]
# Where two theories coincide their lines lie on each other: each its own marker and dashes still show both.
STYLE = {
    "measured": ArmStyle((0.13, 0.13, 0.13), (), "o"),
    "cesaro": ArmStyle(PALETTE[0], (4, 2), "s"),
    "rollout_uniform": ArmStyle(PALETTE[1], (1, 1.5), "^"),
    "rollout_attention": ArmStyle(PALETTE[2], (4, 1.5, 1, 1.5), "x"),
}
X_LABEL = "relative position (j - 1/2) / n"
Y_LABEL = "density n * mass"


def staggered(name: str, points: int) -> tuple[int, int]:
    """Where a profile's markers go: about 8 per line, each profile's shifted along it, so that the theories
    whose curves coincide (at random init they often do) each still show their marker."""
    every = max(len(ORDER), points // 8)  # room for each profile's own shift
    return ORDER.index(name) * every // len(ORDER), every


def _first_target(profiles: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    target, power = profiles[["target", "power"]].iloc[0]
    return profiles.query("target == @target and power == @power"), f"target {target}, power {power}"


def _density(profiles: pd.DataFrame) -> pd.DataFrame:
    out = profiles.assign(p=relative_position(profiles.position, profiles.n), density=profiles.mass * profiles.n)
    return out.assign(density=out.density.where(out.density > 0))


def _panels(rows: list, cols: list):
    """A small multiple at two columns' width: a panel per (row, column) value, on one page."""
    height = min(1.7, (MAX_HEIGHT - 1.2) / len(rows))
    return figure(2, height * len(rows) + 1.0, nrows=len(rows), ncols=len(cols), squeeze=False, sharex=True)


def _finish(fig, axes, rows: list, cols: list, row_name: str, col_name: str, title: str) -> None:
    for i, row in enumerate(rows):
        for j, col in enumerate(cols):
            ax = axes[i, j]
            ax.set_yscale("log")
            ax.axhline(1.0, color=REFERENCE, lw=0.7, ls="--")
            if i == 0:
                ax.set_title(f"{col_name}{col}")
            ax.set_ylabel(f"{row_name}{row}\n{Y_LABEL}" if j == 0 else "")
            ax.set_xlabel(X_LABEL if i == len(rows) - 1 else "")
    handles = [Line2D([], [], label=name, **STYLE[name].line()) for name in ORDER]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, frameon=False)
    fig.suptitle(title)


def _draw(data: pd.DataFrame, row: str, col: str, title: str, path, row_name: str = "", col_name: str = "") -> None:
    """Every profile against its rollout theories (each its colour, dashes and marker), a panel per row and col."""
    rows, cols = sorted(data[row].unique()), sorted(data[col].unique())
    fig, axes = _panels(rows, cols)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            panel = data[(data[row] == r) & (data[col] == c)]
            for name in ORDER:
                line = panel[panel.profile == name].sort_values("p")
                if not line.empty:
                    marks = staggered(name, len(line))
                    axes[i, j].plot(line.p, line.density, ms=3, markevery=marks, **STYLE[name].line())
    _finish(fig, axes, rows, cols, row_name, col_name, title)
    save(fig, path)


def sweep_profiles(profiles: pd.DataFrame, path) -> None:
    """Random-init models at the largest n: rows family/encoding, columns depth; mean over seeds."""
    profiles, what = _first_target(profiles.query("variant == 'init'"))
    n = profiles.n.max()
    data = _density(profiles.query("n == @n")).assign(model=lambda d: d.family + " / " + d.encoding)
    data = data.groupby(["model", "depth", "profile", "p"], as_index=False).density.mean()
    _draw(data, "model", "depth", f"random init, n = {n}, {what}", path, col_name="depth ")


def flag_profiles(profiles: pd.DataFrame, path) -> None:
    """Flag-recall checkpoints: rows step, columns L (depth in the title); mean over seeds."""
    profiles, what = _first_target(profiles)
    data = _density(profiles).assign(run=lambda d: d.variant + " L=" + d.n.astype(str) + " M=" + d.depth.astype(str))
    data = data.groupby(["run", "step", "profile", "p"], as_index=False).density.mean()
    _draw(data, "step", "run", f"flag-recall checkpoints, {what}", path, row_name="step ")


def pretrained_profiles(profiles: pd.DataFrame, path) -> None:
    """Pretrained models and their random-init twins on real text: rows n, columns model and weights
    (pretrained | random-init twin); every profile with its bootstrap interval over sequences (band)."""
    profiles, what = _first_target(profiles)
    data = _density(profiles).assign(
        lo=lambda d: d.lo * d.n,
        hi=lambda d: d.hi * d.n,
        weights=lambda d: d.variant + np.where(d.step < 0, " pretrained", " twin (seed " + d.seed.astype(str) + ")"),
    )
    lengths, columns = sorted(data.n.unique()), sorted(data.weights.unique())
    fig, axes = _panels(lengths, columns)
    for (i, n), (j, column) in [((i, n), (j, c)) for i, n in enumerate(lengths) for j, c in enumerate(columns)]:
        ax = axes[i, j]
        panel = data[(data.n == n) & (data.weights == column)]
        for name in ORDER:
            line = panel[panel.profile == name].sort_values("position")
            if line.empty:
                continue
            ax.plot(line.p, line.density, ms=3, markevery=staggered(name, len(line)), **STYLE[name].line())
            ax.fill_between(line.p, line.lo.where(line.lo > 0), line.hi, color=STYLE[name].color, alpha=0.2, lw=0)
        ax.set_xscale("log")
        sequences = int(panel.sequences.iloc[0]) if not panel.empty else 0
        ax.text(0.02, 0.04, f"{sequences} sequences", transform=ax.transAxes, fontsize=7)
    title = f"pretrained models on real text and their random-init twins, {what}; bands: bootstrap over sequences"
    _finish(fig, axes, lengths, columns, "n = ", "", title)
    save(fig, path)
