"""Figures of the architectures stage: measured profiles against the three rollout theories.

Profiles are drawn as densities n * mass (1 = flat) against the relative position (j - 1/2)/n on
a log scale, so the primacy tail, the middle and the last-token spike are all visible.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns

from lostmid.core.density import relative_position
from lostmid.plots.style import save

ORDER = ["measured", "cesaro", "rollout_uniform", "rollout_attention"]
STYLE = {"measured": "", "cesaro": (4, 2), "rollout_uniform": (1, 1), "rollout_attention": (3, 1, 1, 1)}


def _first_target(profiles: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    target, power = profiles[["target", "power"]].iloc[0]
    return profiles.query("target == @target and power == @power"), f"target {target}, power {power}"


def _density(profiles: pd.DataFrame) -> pd.DataFrame:
    out = profiles.assign(p=relative_position(profiles.position, profiles.n), density=profiles.mass * profiles.n)
    return out.assign(density=out.density.where(out.density > 0))


def _finish(grid, title: str) -> None:
    for ax in np.ravel(grid.axes):
        ax.set_yscale("log")
        ax.axhline(1.0, color="0.5", lw=0.7, ls="--")
    grid.set_axis_labels("relative position (j - 1/2) / n", "density n * mass")
    grid.figure.suptitle(title, y=1.01)


def _draw(data: pd.DataFrame, row: str, col: str, title: str, path, **style) -> None:
    """Every profile against its rollout theories (hue and dashes by profile), a panel per row and col."""
    grid = sns.relplot(
        data=data,
        x="p",
        y="density",
        hue="profile",
        style="profile",
        hue_order=ORDER,
        style_order=ORDER,
        dashes=STYLE,
        row=row,
        col=col,
        kind="line",
        aspect=1.3,
        facet_kws={"margin_titles": True},
        **style,
    )
    _finish(grid, title)
    save(grid, path)


def sweep_profiles(profiles: pd.DataFrame, path) -> None:
    """Random-init models at the largest n: rows family/encoding, columns depth; mean over seeds."""
    profiles, what = _first_target(profiles.query("variant == 'init'"))
    n = profiles.n.max()
    data = _density(profiles.query("n == @n")).assign(model=lambda d: d.family + " / " + d.encoding)
    data = data.groupby(["model", "depth", "profile", "p"], as_index=False).density.mean()
    _draw(data, "model", "depth", f"random init, n = {n}, {what}", path, height=1.9)


def flag_profiles(profiles: pd.DataFrame, path) -> None:
    """Flag-recall checkpoints: rows step, columns L (depth in the title); mean over seeds."""
    profiles, what = _first_target(profiles)
    data = _density(profiles).assign(run=lambda d: d.variant + " L=" + d.n.astype(str) + " M=" + d.depth.astype(str))
    data = data.groupby(["run", "step", "profile", "p"], as_index=False).density.mean()
    _draw(data, "step", "run", f"flag-recall checkpoints, {what}", path, marker="o", height=2.0)


def pretrained_profiles(profiles: pd.DataFrame, path) -> None:
    """Pretrained models and their random-init twins on real text: rows n, columns model and weights
    (pretrained | random-init twin); every profile with its bootstrap interval over sequences (band)."""
    import matplotlib.pyplot as plt

    profiles, what = _first_target(profiles)
    data = _density(profiles).assign(
        lo=lambda d: d.lo * d.n,
        hi=lambda d: d.hi * d.n,
        weights=lambda d: d.variant + np.where(d.step < 0, " pretrained", " twin (seed " + d.seed.astype(str) + ")"),
    )
    lengths, columns = sorted(data.n.unique()), sorted(data.weights.unique())
    size = (3.4 * len(columns), 2.4 * len(lengths))
    fig, axes = plt.subplots(len(lengths), len(columns), figsize=size, squeeze=False, sharey=True)
    palette = dict(zip(ORDER, sns.color_palette(n_colors=len(ORDER))))
    for (n, column), ax in zip([(n, c) for n in lengths for c in columns], axes.ravel()):
        panel = data.query("n == @n and weights == @column")
        for name in ORDER:
            line = panel.query("profile == @name").sort_values("position")
            if line.empty:
                continue
            ax.plot(line.p, line.density, color=palette[name], dashes=STYLE[name] or (None, None), lw=1, label=name)
            ax.fill_between(line.p, line.lo.where(line.lo > 0), line.hi, color=palette[name], alpha=0.2, lw=0)
        sequences = int(panel.sequences.iloc[0]) if not panel.empty else 0
        ax.set_title(f"{column}, n = {n} ({sequences} sequences)", fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.0, color="0.5", lw=0.7, ls="--")
        ax.set_xlabel("relative position (j - 1/2) / n")
        ax.set_ylabel("density n * mass")
    axes.ravel()[0].legend(fontsize=7)
    fig.tight_layout()
    title = f"pretrained models on real text against their random-init twins, {what}"
    fig.suptitle(f"{title}; bands: bootstrap intervals over sequences", y=1.01)
    save(fig, path)
