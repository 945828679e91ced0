"""The findings page's figure per question (docs/findings.md): the per-unit effects where there are units,
the estimate with its Holm-level interval, 0 and the source's size."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from lostmid.plots.style import PAGE_WIDTH, save
from lostmid.study.effects import MeanEffect, WelchEffect


def finding(row, primary: dict, path) -> None:
    """One question: the units' effects (dots; two groups for a difference of independent means), the estimate
    (black) with its interval at the primary's Holm level, 0 (dashed) and the source's size (red)."""
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 2.2))
    effect = row.effect
    groups = []
    if isinstance(effect, MeanEffect):
        groups = [("units", effect.units.to_numpy(np.float64))]
    elif isinstance(effect, WelchEffect):
        groups = [("without residual", effect.a.to_numpy(np.float64)), ("with residual", effect.b.to_numpy(np.float64))]
    rng = np.random.default_rng(0)
    for y, (label, values) in enumerate(groups, start=1):
        ax.scatter(
            values, y + rng.uniform(-0.15, 0.15, values.size), s=10, alpha=0.6, label=f"{label} (n = {values.size})"
        )
    if not math.isnan(row.low):
        ax.plot([row.low, row.high], [0, 0], color="black", lw=2.5)
    ax.plot([effect.estimate], [0], "o", color="black", ms=7)
    ax.axvline(0.0, color="0.5", ls="--", lw=0.8)
    size = primary["size"] * (1 if primary["direction"] == "increase" else -1)
    ax.axvline(size, color="tab:red", lw=1.0, label=f"the source's size {size:.3g}")
    ax.set_yticks([0, *range(1, len(groups) + 1)], [f"estimate, {1 - row.level:.4g} interval", *[g for g, _ in groups]])
    ax.set_xlabel(primary["scale"])
    ax.set_title(primary["id"], fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="best")
    save(fig, path)
