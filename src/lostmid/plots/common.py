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


# Honest bands. A rate lives in [0, 1], so its interval is clipped there; a positive quantity drawn on
# a log axis is averaged on the log scale (the geometric mean) and its interval computed there, so the
# band is symmetric on the axis it is drawn on and never reaches zero. 95% intervals over seeds.
Z95 = 1.96


def rate_interval(values) -> tuple[float, float]:
    """Mean +- 1.96 standard errors over seeds of a rate, clipped to [0, 1]."""
    values = pd.Series(values, dtype=float).dropna()
    half = Z95 * values.sem()
    return max(values.mean() - half, 0.0), min(values.mean() + half, 1.0)


def _logs(values) -> pd.Series:
    values = pd.Series(values, dtype=float)
    return np.log(values[values > 0])


def geometric_mean(values) -> float:
    """exp(mean(log v)) over the positive values (a zero cannot sit on a log axis)."""
    return float(np.exp(_logs(values).mean()))


def log_interval(values) -> tuple[float, float]:
    """The 95% interval of the geometric mean: exp(mean(log v) +- 1.96 standard errors of log v)."""
    logs = _logs(values)
    half = Z95 * logs.sem()
    return float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


RATE_LIMITS = (-0.02, 1.02)  # a rate's axis: [0, 1] with room for a line at 0 or 1


# Arms: a variant at one L and depth, the unit panels are laid out by.
ARM_KEYS = ["variant", "L", "depth"]


def seeds_text(n: int) -> str:
    return f"{n} seed" + ("" if n == 1 else "s")


def setting_label(L: int, depth: int) -> str:
    return f"L = {L}, depth {depth}"


def arm_order(table: pd.DataFrame) -> list[tuple]:
    """The arms (variant, L, depth) of a table, by setting (L, depth) and within one in the house style's order
    of the config's arms (baseline first), then by name: never alphabetically across settings."""
    from lostmid.plots.style import ARM_STYLES

    rank = {name: i for i, name in enumerate(ARM_STYLES)}
    arms = set(table[ARM_KEYS].itertuples(index=False, name=None))
    return sorted(arms, key=lambda a: (a[1], a[2], rank.get(a[0], len(rank)), a[0]))


def panels(n: int, ncols: int = 3, panel_height: float = 1.7, columns: int = 2, **kwargs):
    """A figure of ``n`` panels, ``ncols`` abreast, at a printed width (``columns``: 1 or 2), the panels not
    needed removed: (fig, [axes])."""
    from lostmid.plots.style import figure

    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig, axes = figure(columns, panel_height * nrows + 0.5, nrows=nrows, ncols=ncols, squeeze=False, **kwargs)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n]


def label_bottoms(axes: list, ncols: int, xlabel: str) -> None:
    """The x label and tick labels on every panel with no panel under it (the last row, and the row above it
    where the last row is short); none on the others (their panels share the x axis)."""
    for k, ax in enumerate(axes):
        bottom = k + ncols >= len(axes)
        ax.tick_params(labelbottom=bottom)
        ax.set_xlabel(xlabel if bottom else "")


def _signed_interval(values) -> tuple[float, float]:
    values = pd.Series(values, dtype=float).dropna()
    half = Z95 * values.sem()
    return values.mean() - half, values.mean() + half


# How a line and its band are made from the values over seeds at one x: a rate (mean, interval clipped to
# [0, 1]), a positive quantity on a log axis (geometric mean, interval on the log scale), a signed one.
BANDS = {
    "rate": (np.mean, rate_interval),
    "log": (geometric_mean, log_interval),
    "signed": (np.mean, _signed_interval),
}


def curve(table: pd.DataFrame, x: str, y: str, band: str) -> pd.DataFrame:
    """Per ``x`` (sorted): the line (``mean``) and its 95% interval (``low``, ``high``; NaN from one seed) of ``y``
    over the rows at that x, as ``BANDS[band]`` makes them."""
    centre, interval = BANDS[band]
    rows = []
    for value, part in table.groupby(x, sort=True):
        values = part[y].dropna()
        if band == "log":
            values = values[values > 0]
        if values.empty:
            continue
        low, high = interval(values) if len(values) > 1 else (np.nan, np.nan)
        rows.append((value, float(centre(values)), low, high))
    return pd.DataFrame(rows, columns=[x, "mean", "low", "high"])


def draw_curve(ax, line: pd.DataFrame, x: str, style, label=None, markers: int = 8, band_alpha: float = 0.18):
    """A curve of ``curve`` on ``ax`` in an ArmStyle: the line with about ``markers`` markers, its band."""
    every = max(1, len(line) // markers)
    ax.plot(line[x], line["mean"], label=label, markevery=every, **style.line())
    if line["low"].notna().any():
        ax.fill_between(line[x], line["low"], line["high"], color=style.color, alpha=band_alpha, lw=0)
