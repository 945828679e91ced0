"""Percentile intervals of bootstrap draws: draw 0 is the estimate itself (every unit once), draws 1..B resample
the units (sequences, windows) with replacement (the retrieval and architecture stages draw them)."""

from __future__ import annotations

import warnings

import numpy as np


def percentile_interval(values: np.ndarray, level: float = 0.95) -> tuple:
    """(estimate, lo, hi) of bootstrap draws: draw 0 (the estimate itself) and the percentile interval of draws
    1..B (along the first axis), NaN-aware."""
    tail = (1 - level) / 2 * 100
    lo, hi = np.nanpercentile(values[1:], [tail, 100 - tail], axis=0)
    return values[0], lo, hi


def quiet_percentile_interval(values: np.ndarray, level: float) -> tuple:
    """``percentile_interval``, quietly NaN where every draw is NaN (a draw without both outcomes has no AUC)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "All-NaN slice", RuntimeWarning)
        return percentile_interval(values, level)
