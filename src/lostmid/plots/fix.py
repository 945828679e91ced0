"""The fix run's figure (docs/positional_bias.md, "The fix run's page") in the form of Hsieh et al.'s: retrieval
by needle position, a line per arm (none, the blog's bias, Found-in-the-Middle's calibration) with its band from a
two-level bootstrap (the fits of the bias resampled, then the windows within each drawn fit), a column per n;
accuracy above, the answer's log-probability below."""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D

from lostmid.plots.retrieval import ACCURACY_LIMITS, Q_LABEL
from lostmid.plots.style import arm_styles, figure, save

ARM_LABELS = {
    "none": "none (the model as loaded)",
    "blog": "blog: the fitted bias",
    "fitm": "fitm: Found-in-the-Middle's calibration",
}
ROWS = {"success": "accuracy (answer top-1)", "logprob": "log p(answer) (nats)"}


def fix_by_position(positions: pd.DataFrame, path, level: float = 0.95) -> None:
    """``positions`` (lostmid.study.fix_reading.position_table: per arm, n and q the means and their two-level
    bootstrap intervals at ``level``, fits then windows) as accuracy and log p(answer) by q, a line and band per arm,
    a column per n."""
    lengths = sorted(positions.n.unique())
    arms = [arm for arm in ARM_LABELS if arm in set(positions.arm)]
    styles = arm_styles(arms)
    fig, axes = figure(2, 4.6, nrows=len(ROWS), ncols=len(lengths), squeeze=False, sharex=True)
    for column, n in enumerate(lengths):
        at_n = positions[positions.n == n]
        for row, (outcome, label) in enumerate(ROWS.items()):
            ax = axes[row][column]
            for arm in arms:
                line = at_n[at_n.arm == arm].sort_values("q")
                ax.plot(line.q, line[outcome], **styles[arm].line())
                ax.fill_between(line.q, line[f"{outcome}_lo"], line[f"{outcome}_hi"], color=styles[arm].color,
                                alpha=0.15, lw=0)  # fmt: skip
            windows = ", ".join(f"{a} {at_n[at_n.arm == a].windows.max()}" for a in arms)
            ax.set_title(f"n = {n} (windows: {windows})" if row == 0 else f"n = {n}")
            ax.set(ylabel=label if column == 0 else "", xlabel=Q_LABEL if row == len(ROWS) - 1 else "")
            if outcome == "success":
                ax.set_ylim(*ACCURACY_LIMITS)
    handles = [Line2D([], [], label=ARM_LABELS[arm], **styles[arm].line()) for arm in arms]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(arms), frameon=False,
               title=f"bands: {level:.0%} percentile bootstrap over fits, then windows within fits")  # fmt: skip
    save(fig, path)
