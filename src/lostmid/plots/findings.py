"""One figure per finding: each primary endpoint of a question as a compact panel of its own.

``finding_figure(rows, path)`` is what docs/findings.md embeds, one figure per question. A row is an
endpoint, a mapping (or a DataFrame row) with the keys

    name         the endpoint, as the page names it
    estimate     the primary estimate (NaN or None: not yet run)
    low, high    its interval (NaN: none)
    source_size  the size the source's words imply, signed, on the estimate's axis (a decrease the source
                 predicts is negative; NaN: the source gives none)
    unit         the estimate's unit, the panel's x label
    outcome      the reading, one of OUTCOMES (any other text is drawn in grey)

Each panel shows the interval (a bar), the estimate (a dot), zero (dashed) and the source's size (a
black triangle, labelled), and names its outcome (top right, in its colour); panels are stacked, one
per endpoint, at a page's width.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping

import matplotlib.pyplot as plt
import pandas as pd

from lostmid.plots.style import PAGE_WIDTH, PALETTE, save

# The four outcomes of the plan's reading (lostmid.study.reading, issue 45), and an endpoint not yet run.
OUTCOMES = {
    "at least the source's size": PALETTE[2],
    "an effect smaller than the source's": PALETTE[0],
    "no effect of that size": PALETTE[3],
    "inconclusive": PALETTE[7],
    "not yet run": "0.6",
}
KEYS = ("name", "estimate", "low", "high", "source_size", "unit", "outcome")
PANEL_HEIGHT = 1.15  # inches per endpoint


def _number(value) -> float:
    return math.nan if value is None else float(value)


def _rows(rows) -> list[dict]:
    """The endpoints as dicts with every key; a row that lacks one is a ValueError naming it."""
    records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
    if not records:
        raise ValueError("finding_figure: no endpoints to draw")
    out = []
    for record in records:
        if not isinstance(record, Mapping):
            raise ValueError(f"finding_figure: an endpoint must be a mapping, not {type(record).__name__}")
        missing = [key for key in KEYS if key not in record]
        if missing:
            raise ValueError(f"finding_figure: endpoint {record.get('name', '?')!r} lacks {missing}")
        row = dict(record)
        for key in ("estimate", "low", "high", "source_size"):
            row[key] = _number(row[key])
        out.append(row)
    return out


def _limits(values: Iterable[float]) -> tuple[float, float]:
    """An x range holding zero and every finite value, padded by a tenth of its width."""
    finite = [v for v in values if math.isfinite(v)] + [0.0]
    low, high = min(finite), max(finite)
    pad = 0.1 * (high - low) if high > low else 1.0
    return low - pad, high + pad


def _panel(ax, row: dict) -> None:
    color = OUTCOMES.get(row["outcome"], OUTCOMES["inconclusive"])
    low, high, estimate, size = row["low"], row["high"], row["estimate"], row["source_size"]
    ax.axvline(0.0, color="0.4", lw=0.8, ls="--", zorder=1)
    if math.isfinite(low) and math.isfinite(high):
        ax.plot([low, high], [0, 0], color=color, lw=4, solid_capstyle="butt", zorder=2, label="interval")
    if math.isfinite(estimate):
        ax.plot([estimate], [0], "o", color=color, mec="black", mew=0.6, ms=7, zorder=3, label="estimate")
    else:
        ax.text(0.5, 0.5, "not yet run", transform=ax.transAxes, ha="center", va="center", color="0.4")
    x_min, x_max = _limits((low, high, estimate, size))
    if math.isfinite(size):
        ax.plot([size], [-0.55], "^", color="black", ms=7, zorder=3, label="source's size")
        right = size < (x_min + x_max) / 2  # the label on the side with room
        ax.annotate(
            "source",
            (size, -0.55),
            xytext=(5 if right else -5, -1),
            textcoords="offset points",
            ha="left" if right else "right",
            va="center",
            fontsize=7,
        )
    ax.set_xlim(x_min, x_max)
    ax.set_ylim(-0.8, 0.6)
    ax.set_yticks([])
    ax.grid(False, axis="y")
    ax.set_xlabel(row["unit"])
    ax.set_title("\n".join(textwrap.wrap(row["name"], 100)), loc="left")
    ax.text(
        0.995,
        0.96,
        row["outcome"],
        transform=ax.transAxes,
        ha="right",
        va="top",
        color=color if row["outcome"] in OUTCOMES else "0.3",
        fontweight="bold",
        fontsize=8,
    )


def finding_figure(rows, path, title: str | None = None) -> None:
    """Draw one question's primary endpoints (``rows``: mappings or a DataFrame with the module's KEYS),
    one panel per endpoint, and save it as PNG at ``path`` and as PDF beside it. ``title``: the
    question, above the panels."""
    endpoints = _rows(rows)
    title_lines = textwrap.wrap(title, 90) if title else []  # wrapped, never cut
    height = PANEL_HEIGHT * len(endpoints) + 0.2 * len(title_lines) + (0.15 if title_lines else 0.0)
    fig, axes = plt.subplots(len(endpoints), 1, figsize=(PAGE_WIDTH, height), squeeze=False, layout="constrained")
    for ax, row in zip(axes[:, 0], endpoints):
        _panel(ax, row)
    if title_lines:
        fig.suptitle("\n".join(title_lines), x=0.01, ha="left", fontsize=10)
    save(fig, path)
