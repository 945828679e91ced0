"""Figures of the retrieval stage (docs/retrieval.md): accuracy by needle position q in Liu et al.'s Figure 1
form (the headline), and accuracy beside the needle's influence share by q at each n. Bands: the record's
bootstrap intervals over windows."""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D

from lostmid.architectures.models import display_name
from lostmid.plots.style import REFERENCE, ArmStyle, figure, ordered_styles, save

INFLUENCE = {"influence_task": "task-conditioned", "influence_free": "task-free"}
Q_LABEL = "needle position q (0: first token of the context, 1: last)"
ACCURACY_LIMITS = (-0.03, 1.03)


def accuracy_title(at_n: pd.DataFrame) -> str:
    """An n's title: n, its share of the model's window and the windows behind each model (the count differs
    between lengths, so each names its own)."""
    n, share = at_n.n.iloc[0], at_n.share.iloc[0]
    counts = at_n.groupby("weights").windows.max()
    windows = f"{counts['pretrained']} windows" + (f", twin {counts['twin']}" if "twin" in counts else "")
    return f"n = {n} ({share:.3g} of the window; {windows})"


def _line(ax, line: pd.DataFrame, y: str, style: ArmStyle, label=None) -> None:
    """``y`` by q in ``style`` with its band (a share's band only above 0: it sits on a log axis)."""
    low = line[f"{y}_lo"]
    ax.plot(line.q, line[y], label=label, **style.line())
    ax.fill_between(line.q, low if y == "accuracy" else low.where(low > 0), line[f"{y}_hi"], color=style.color,
                    alpha=0.15, lw=0)  # fmt: skip


def accuracy_by_position(accuracy: pd.DataFrame, path) -> None:
    """Liu et al.'s Figure 1: accuracy against the needle's position, a panel per task, a line per n (each its
    colour, line and marker) of the pretrained model with its 95% band over windows; the random-init twin (the
    model without its knowledge: what the context alone gives) as the grey reference, where it was run."""
    tasks, lengths = sorted(accuracy.task.unique()), sorted(accuracy.n.unique())
    styles = dict(zip(lengths, ordered_styles(len(lengths))))
    twin = ArmStyle(REFERENCE, (4, 2), "")
    fig, axes = figure(2, 2.6, ncols=len(tasks), squeeze=False, sharey=True)
    for ax, task in zip(axes[0], tasks):
        for n in lengths:
            at = accuracy.query("task == @task and n == @n")
            line = at[at.weights == "pretrained"].sort_values("q")
            if not line.empty:
                _line(ax, line, "accuracy", styles[n])
            control = at[at.weights == "twin"].sort_values("q")
            if not control.empty:
                ax.plot(control.q, control.accuracy, **twin.line())
        ax.set(title=f"task {task}", xlabel=Q_LABEL, ylim=ACCURACY_LIMITS)
        ax.set_ylabel("accuracy (answer top-1)" if task == tasks[0] else "")
    model = display_name(accuracy.model.iloc[0])
    handles = [Line2D([], [], label=accuracy_title(accuracy[accuracy.n == n]), **styles[n].line()) for n in lengths]
    if (accuracy.weights == "twin").any():
        handles.append(Line2D([], [], label="random-init twin (reference)", **twin.line()))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False, title=f"{model}, pretrained")
    save(fig, path)


def accuracy_and_influence(accuracy: pd.DataFrame, path) -> None:
    """Rows n; left: accuracy by q per task (pretrained solid, twin dashed); right: both influence shares by q
    per task (task-conditioned solid, task-free dotted, log scale), left out at an n without gradients."""
    lengths, tasks = sorted(accuracy.n.unique()), sorted(accuracy.task.unique())
    styles = dict(zip(tasks, ordered_styles(len(tasks))))
    fig, axes = figure(2, 2.1 * len(lengths) + 0.6, nrows=len(lengths), ncols=2, squeeze=False)
    for row, n in zip(axes, lengths):
        at_n = accuracy.query("n == @n")
        for task in tasks:
            style = styles[task]
            for weights, dashes in (("pretrained", ()), ("twin", (4, 2))):
                line = at_n[(at_n.task == task) & (at_n.weights == weights)].sort_values("q")
                if not line.empty:
                    _line(row[0], line, "accuracy", ArmStyle(style.color, dashes, style.marker))
            line = at_n.query("task == @task and weights == 'pretrained'").sort_values("q")
            for column, dashes in zip(INFLUENCE, ((), (1, 1))):
                if line[column].notna().any():
                    _line(row[1], line, column, ArmStyle(style.color, dashes, style.marker))
        gradients = at_n[list(INFLUENCE)].notna().any().any()
        row[0].set_title(accuracy_title(at_n) + ("" if gradients else "; no gradients at this n"))
        row[0].set(ylim=ACCURACY_LIMITS, ylabel="accuracy", xlabel="needle position q")
        if gradients:
            row[1].set_title(f"n = {n}: the needle's influence share")
            row[1].set(yscale="log", ylabel="influence share (fraction)", xlabel="needle position q")
        else:  # no facet without data
            row[1].remove()
    handles = [Line2D([], [], color=styles[t].color, marker=styles[t].marker, label=f"task {t}") for t in tasks]
    handles += [
        Line2D([], [], color="0.2", label="pretrained; task-conditioned share"),
        Line2D([], [], color="0.2", dashes=(4, 2), label="random-init twin"),
        Line2D([], [], color="0.2", dashes=(1, 1), label="task-free share"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False,
               title="bands: 95% bootstrap over windows")  # fmt: skip
    save(fig, path)
