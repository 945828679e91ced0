"""What figures of the training runs share: the interval over seeds and the region scale shown.
The house style (theme, colours, ``save``) is lostmid.plots.style."""

from __future__ import annotations

import numpy as np
import pandas as pd

# Intervals over seeds: mean +- 1.96 standard errors. Seaborn's default bootstrap costs a
# minute per figure on long training logs and means little with three seeds.
SEED_INTERVAL = ("se", 1.96)


def nearest_delta(table: pd.DataFrame, preferred: float) -> float:
    """The region scale (``delta`` column) closest to ``preferred`` among those in the table."""
    deltas = np.sort(table["delta"].unique())
    return float(deltas[np.argmin(np.abs(deltas - preferred))])
