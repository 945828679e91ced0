"""Figure of the retrieval stage: accuracy by needle position q (bands: bootstrap intervals over windows)
beside the needle's influence share by q at the same n (docs/retrieval.md)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from lostmid.plots.style import save

INFLUENCE = {"influence_task": "task-conditioned", "influence_free": "task-free"}


def accuracy_title(at_n: pd.DataFrame) -> str:
    """The accuracy panel's title at one n: n, its share of the model's window and the windows behind each
    model (the count differs between lengths, so each row names its own)."""
    n, share = at_n.n.iloc[0], at_n.share.iloc[0]
    counts = at_n.groupby("weights").windows.max()
    windows = f"{counts['pretrained']} windows" + (f", twin {counts['twin']}" if "twin" in counts else "")
    return f"n = {n} ({share:.3g} of the model's window; {windows}): accuracy"


def accuracy_and_influence(accuracy: pd.DataFrame, path) -> None:
    """Rows n; left: accuracy by q per task (pretrained solid, twin dashed); right: both influence shares by q
    per task (task-conditioned solid, task-free dotted, log scale), left out at an n without gradients."""
    import matplotlib.pyplot as plt

    lengths, tasks = sorted(accuracy.n.unique()), sorted(accuracy.task.unique())
    palette = dict(zip(tasks, sns.color_palette(n_colors=len(tasks))))
    fig, axes = plt.subplots(len(lengths), 2, figsize=(9, 2.6 * len(lengths)), squeeze=False)
    for row, n in zip(axes, lengths):
        at_n = accuracy.query("n == @n")
        for task in tasks:
            for weights, dashes in (("pretrained", (None, None)), ("twin", (4, 2))):
                line = at_n.query("task == @task and weights == @weights").sort_values("q")
                if line.empty:
                    continue
                label = task if weights == "pretrained" else None
                row[0].plot(line.q, line.accuracy, color=palette[task], dashes=dashes, lw=1.2, marker=".", label=label)
                row[0].fill_between(line.q, line.accuracy_lo, line.accuracy_hi, color=palette[task], alpha=0.15, lw=0)
            line = at_n.query("task == @task and weights == 'pretrained'").sort_values("q")
            for column, dashes in zip(INFLUENCE, ((None, None), (1, 1))):
                if line[column].notna().any():
                    row[1].plot(line.q, line[column], color=palette[task], dashes=dashes, lw=1.2, marker=".")
                    lo, hi = line[f"{column}_lo"], line[f"{column}_hi"]
                    row[1].fill_between(line.q, lo.where(lo > 0), hi, color=palette[task], alpha=0.15, lw=0)
        gradients = at_n[list(INFLUENCE)].notna().any().any()
        row[0].set_title(accuracy_title(at_n) + ("" if gradients else " (no gradients at this n)"), fontsize=8)
        row[0].set_ylim(-0.03, 1.03)
        row[0].set_ylabel("accuracy")
        row[0].set_xlabel("needle position q")
        if gradients:
            row[1].set_title(
                f"n = {n}: needle's influence share (solid task-conditioned, dotted task-free)", fontsize=8
            )
            row[1].set_yscale("log")
            row[1].set_ylabel("influence share")
            row[1].set_xlabel("needle position q")
        else:  # no facet without data
            row[1].remove()
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.suptitle(
        "retrieval by needle position (twin: dashed) and the needle's influence; bands: 95% bootstrap over windows",
        y=1.01,
        fontsize=9,
    )
    save(fig, path)
