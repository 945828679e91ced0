"""The forest plot that opens the report: every claim's estimate, interval and verdict."""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from lostmid.plots.style import PALETTE, save

COLORS = {"supported": PALETTE[2], "contradicted": PALETTE[3], "inconclusive": PALETTE[7]}
FLOOR = 1e-18  # where a zero sits on a log axis


def _thresholds(kind: str, margin: float) -> list[float]:
    """The decision thresholds of a rule, drawn as ticks on the row: 0 and the margin(s)."""
    if kind == "greater_than_zero":
        return [0.0, margin]
    if kind == "less_than_zero":
        return [0.0, -margin]
    if kind == "equivalent_to_zero":
        return [-margin, 0.0, margin]
    return [margin]


def _label(row) -> str:
    """The claim and its whole setting, wrapped (never cut)."""
    return f"{row.claim}\n" + "\n".join(textwrap.wrap(row.setting, 60))


def _not_run_lines(not_run: pd.DataFrame) -> list[str]:
    """Each row not drawn: its claim, variant and why, wrapped (never cut)."""
    lines = []
    for row in not_run.itertuples(index=False):
        variant = f" [{row.variant}]" if isinstance(row.variant, str) else ""
        text = f"{row.claim}{variant}: {row.method.removeprefix('not run: ')}"
        lines += textwrap.wrap(text, 140, subsequent_indent="    ")
    return lines


def forest(table: pd.DataFrame, path) -> None:
    """One row per claim and setting: estimate (dot; a diamond for deterministic claims, whose interval
    has zero width) and interval (line), coloured by verdict; the rule's thresholds as black ticks on
    the row (0 dashed grey). Claims of one unit share a panel; relative errors and ratios are on a log
    axis. Rows that were not run (no estimate) are listed by name under the panels, not drawn; a row
    that is not evaluable but has an estimate is drawn in grey (no verdict)."""
    done = table[table.estimate.notna()]
    not_run = table[table.estimate.isna()]
    not_run_lines = _not_run_lines(not_run)
    units = list(dict.fromkeys(done["unit"]))
    sizes = [int((done.unit == u).sum()) for u in units]
    height = 0.9 + 0.55 * sum(sizes) + 0.6 * len(units) + (0.9 + 0.13 * len(not_run_lines) if len(not_run) else 0)
    n_axes = max(len(units), 1) + (1 if len(not_run) else 0)
    ratios = [s + 0.9 for s in sizes] if units else [1]
    if len(not_run):
        ratios.append(0.6 + 0.24 * len(not_run_lines))
    fig, axes = plt.subplots(n_axes, 1, figsize=(10, height), gridspec_kw={"height_ratios": ratios}, squeeze=False)
    for ax, unit in zip(axes[:, 0], units):
        part = done[done.unit == unit].reset_index(drop=True)
        log_axis = bool(part.log_axis.iloc[0]) if "log_axis" in part else False
        y = np.arange(len(part))[::-1]
        for yi, row in zip(y, part.itertuples(index=False)):
            color = COLORS[row.verdict]
            est, low, high = row.estimate, row.ci_low, row.ci_high
            if log_axis:
                est, low, high = (max(v, FLOOR) if not math.isnan(v) else v for v in (est, low, high))
            if not math.isnan(low):
                ax.plot([low, high], [yi, yi], color=color, lw=2.2, solid_capstyle="butt")
            marker = "D" if row.n_seeds == 0 else "o"
            ax.plot([est], [yi], marker=marker, color=color, ms=6, mec="black", mew=0.5)
            for t in _thresholds(row.rule_kind, row.margin):
                if log_axis and t <= 0:
                    continue
                ax.plot([t, t], [yi - 0.32, yi + 0.32], color="black", lw=1.1)
        if not log_axis:
            ax.axvline(0.0, color="0.5", lw=0.8, ls="--")
        else:
            ax.set_xscale("log")
        ax.set_yticks(y, [_label(row) for row in part.itertuples(index=False)], fontsize=7)
        ax.set_ylim(-0.7, len(part) - 0.3)
        ax.set_title(unit, fontsize=8, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    if not units:
        axes[0, 0].axis("off")
    if len(not_run):
        ax = axes[-1, 0]
        ax.axis("off")
        ax.text(
            -0.3,
            1,
            "Not run or not evaluable (no verdict):\n" + "\n".join(not_run_lines),
            va="top",
            ha="left",
            fontsize=7,
            color=COLORS["inconclusive"],
            transform=ax.transAxes,
        )
    handles = [plt.Line2D([], [], color=c, marker="o", lw=2, label=v) for v, c in COLORS.items()]
    handles.append(plt.Line2D([], [], color="black", marker="|", ls="", ms=10, label="decision threshold"))
    fig.legend(handles=handles, loc="upper center", ncol=4, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    save(fig, path)
