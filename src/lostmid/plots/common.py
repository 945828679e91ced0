"""What every figure shares: one seaborn theme, the interval over seeds, the region scale shown
and one atomic ``save``."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from lostmid import io

sns.set_theme(style="whitegrid", context="paper")

# Intervals over seeds: mean +- 1.96 standard errors. Seaborn's default bootstrap costs a
# minute per figure on long training logs and means little with three seeds.
SEED_INTERVAL = ("se", 1.96)


def nearest_delta(table: pd.DataFrame, preferred: float) -> float:
    """The region scale (``delta`` column) closest to ``preferred`` among those in the table."""
    deltas = np.sort(table["delta"].unique())
    return float(deltas[np.argmin(np.abs(deltas - preferred))])


def save(grid, path) -> None:
    """Write a figure (or a seaborn grid's figure) atomically as PNG and close it."""
    fig = grid.figure if hasattr(grid, "figure") else grid
    io.save_figure(fig, path, dpi=110, bbox_inches="tight")
    plt.close(fig)
