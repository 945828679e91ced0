"""Figures of the training stage: failure by flag position and the training curves.

Panels are laid out by the arms the run has (a variant at its L and depth), never by the product of
every variant and every L, and ordered by setting (L, depth), the baseline first within one.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D

from lostmid.plots.common import (
    RATE_LIMITS,
    arm_order,
    curve,
    draw_curve,
    label_bottoms,
    panels,
    seeds_text,
    setting_label,
)
from lostmid.plots.style import REFERENCE, arm_styles, figure, legend_columns, ordered_styles, save

P_FLAG = "flag position p = f / L"
CHANCE = 0.5  # the answer is one bit
LEARNS = 0.75  # halfway from chance to perfect: a variant whose mean accuracy never reaches it has not learned


def failure_by_position(failure: pd.DataFrame, path) -> None:
    """Failure rate against flag position, one line per checkpoint (each its colour, line and marker), one panel
    per arm (variant, L, depth); mean over seeds with a 95% interval (mean +- 1.96 standard errors, clipped to
    [0, 1]).

    The blog's plot: a half-trained model fails more often as the FLAG moves right.
    """
    arms = arm_order(failure)
    steps = sorted(failure.step.unique())
    styles = dict(zip(steps, ordered_styles(len(steps))))
    fig, axes = panels(len(arms), ncols=3, panel_height=1.75, sharey=True)
    for ax, (variant, L, depth) in zip(axes, arms):
        part = failure[(failure.variant == variant) & (failure.L == L) & (failure.depth == depth)]
        for step, at_step in part.groupby("step"):
            draw_curve(ax, curve(at_step, "p", "failure_rate", "rate"), "p", styles[step], band_alpha=0.08)
        ax.set(ylim=RATE_LIMITS, ylabel="failure rate" if ax.get_subplotspec().is_first_col() else "")
        ax.set_title(f"{variant} ({seeds_text(part.seed.nunique())})\n{setting_label(L, depth)}")
        ax.tick_params(labelleft=ax.get_subplotspec().is_first_col())
    label_bottoms(axes, 3, P_FLAG)
    handles = [Line2D([], [], label=f"{step}", **styles[step].line()) for step in steps]
    fig.legend(
        handles=handles, title="training step", loc="outside lower center", ncol=min(len(steps), 8), frameon=False
    )
    save(fig, path)


def smoothed(train: pd.DataFrame, window: int = 25, points: int = 200) -> pd.DataFrame:
    """Loss and batch accuracy as rolling means over ``window`` steps, kept at about ``points`` steps per run."""
    train = train.sort_values(["variant", "L", "depth", "seed", "step"])
    runs = train.groupby(["variant", "L", "depth", "seed"], sort=False)
    smooth = train.assign(
        loss=runs["loss"].transform(lambda s: s.rolling(window, min_periods=1).mean()),
        accuracy=runs["accuracy"].transform(lambda s: s.rolling(window, min_periods=1).mean()),
    )
    stride = max(1, int(train["step"].max()) // points)
    return smooth[smooth["step"] % stride == 0]


def variant_labels(smooth: pd.DataFrame) -> dict:
    """``{variant: legend label}``: its seeds, and for a variant whose mean batch accuracy over seeds (smoothed)
    never reaches LEARNS at any step, L and depth, that it never learns, with the best it reached."""
    labels = {}
    for variant, part in smooth.groupby("variant"):
        best = part.groupby(["L", "depth", "step"]).accuracy.mean().max()
        label = f"{variant} ({seeds_text(part.seed.nunique())})"
        if best < LEARNS:
            label += f": never learns (best accuracy {best:.2f}; chance {CHANCE:g})"
        labels[variant] = label
    return labels


def loss_and_accuracy(smooth: pd.DataFrame, settings: list[tuple[int, int, list[str]]], styles: dict):
    """Loss (log axis; geometric mean over seeds, 95% interval on the log scale) above batch accuracy (mean, 95%
    interval clipped to [0, 1], chance dashed) against the step; one column per (L, depth, its variants), each on
    its own steps: the figure."""
    fig, axes = figure(2, 4.2, nrows=2, ncols=len(settings), squeeze=False, sharex="col")
    for col, (L, depth, variants) in enumerate(settings):
        part = smooth[(smooth.L == L) & (smooth.depth == depth)]
        for row, (metric, band) in enumerate((("loss", "log"), ("accuracy", "rate"))):
            ax = axes[row, col]
            for variant in variants:
                line = curve(part[part.variant == variant], "step", metric, band)
                draw_curve(ax, line, "step", styles[variant])
            ax.set_xlim(0, part.step.max())
            if metric == "loss":
                ax.set(yscale="log", ylabel="loss (nats)" if col == 0 else "", title=setting_label(L, depth))
            else:
                ax.set(ylim=RATE_LIMITS, ylabel="batch accuracy" if col == 0 else "", xlabel="training step")
                ax.axhline(CHANCE, color=REFERENCE, lw=0.8, ls="--")
    return fig


def arm_legend(fig, styles: dict, labels: dict, ncol: int = 2) -> None:
    """A legend under the panels: each arm in its colour, line and marker, with its ``labels``."""
    handles = [Line2D([], [], label=labels[arm], **styles[arm].line()) for arm in styles]
    ncol = legend_columns([labels[arm] for arm in styles], ncol, fig.get_figwidth())
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)


def training_curves(train: pd.DataFrame, path, window: int = 25, points: int = 200) -> None:
    """Loss and batch accuracy against the step as rolling means over ``window`` steps (``loss_and_accuracy``);
    one column per L and depth, a line per variant in its style, the legend naming its seeds and whether it
    never learns."""
    smooth = smoothed(train, window, points)
    labels = variant_labels(smooth)
    settings = {}
    for variant, L, depth in arm_order(smooth):
        settings.setdefault((L, depth), []).append(variant)
    styles = arm_styles([v for vs in settings.values() for v in vs])
    fig = loss_and_accuracy(smooth, [(L, d, vs) for (L, d), vs in settings.items()], styles)
    arm_legend(fig, styles, labels)
    save(fig, path)
