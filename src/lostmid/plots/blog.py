"""The blog's figures, as the blog draws them: the baseline against the fix (the fitted attention bias B),
failure by flag position at the blog's step and training curves; and the influence of input position j on
the last output at initialization, for depths 1..M, on a log scale.

An arm is a variant at one L and depth. The fix's arms are the variants whose remedy is the bias; each is
drawn beside its reference (lostmid.evidence.inputs: the variant without a remedy, with the same model and
training), one panel per reference, L and depth.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from lostmid.plots.common import LOG_BAND, RATE_BAND, RATE_LIMITS, seeds_text
from lostmid.plots.style import arm_palette, save
from lostmid.plots.training import CHANCE, P_FLAG, smoothed, variant_labels

FIX = "bias"


def comparisons(table: pd.DataFrame, variants: dict) -> list[tuple[int, int, list[str]]]:
    """``[(L, depth, [reference, fix, ...])]``: each reference with the fix arms it pairs with, where the
    table has both at that L and depth."""
    from lostmid.evidence.inputs import Inputs

    pairing = Inputs(variants=variants, model={})
    present = set(table[["variant", "L", "depth"]].itertuples(index=False, name=None))
    groups: dict[tuple, list[str]] = {}
    for variant, L, depth in sorted(present):
        if variant in variants and pairing.remedy(variant) == FIX:
            reference = pairing.reference(variant)
            if (reference, L, depth) in present:
                groups.setdefault((reference, L, depth), [reference]).append(variant)
    return [(L, depth, arms) for (_, L, depth), arms in sorted(groups.items(), key=lambda kv: kv[0][1:] + kv[0][:1])]


def _panels(n: int, height: float = 2.8):
    return plt.subplots(1, n, figsize=(3.6 * n + 0.4, height), squeeze=False, layout="constrained")


def _no_comparison(path, what: str) -> None:
    """A figure saying that the run has no baseline-fix pair (an honest text, not an empty panel)."""
    fig, ax = plt.subplots(figsize=(5, 1.2))
    ax.text(0.5, 0.5, f"no {what}: the run has no fix arm (remedy bias) beside its reference", ha="center")
    ax.set_axis_off()
    save(fig, path)


def _legend(fig, data: pd.DataFrame, arms: list[str], labels: dict | None = None) -> None:
    """A legend under the panels: each arm in its colour with its seeds (or its ``labels``)."""
    palette = arm_palette(arms)
    seeds = data.groupby("variant").seed.nunique()
    labels = labels or {arm: f"{arm} ({seeds_text(seeds.get(arm, 0))})" for arm in arms}
    handles = [Line2D([], [], color=palette[arm], lw=2, label=labels[arm]) for arm in arms]
    ncol = 1 if max(len(label) for label in labels.values()) > 40 else min(len(arms), 3)  # long labels: one column
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)


def failure_baseline_fix(failure: pd.DataFrame, path, variants: dict) -> None:
    """Failure rate by flag position, the baseline against the fix, at the blog's step (the last checkpoint
    the arms share: the end of their training); mean over seeds with a 95% interval (mean +- 1.96 standard
    errors, clipped to [0, 1]); one panel per L and depth."""
    groups = comparisons(failure, variants)
    if not groups:
        _no_comparison(path, "failure comparison")
        return
    fig, axes = _panels(len(groups))
    arms_drawn = []
    for ax, (L, depth, arms) in zip(axes[0], groups):
        part = failure[(failure.L == L) & (failure.depth == depth) & failure.variant.isin(arms)]
        step = min(part.groupby("variant").step.max())
        part = part[part.step == step]
        sns.lineplot(
            data=part,
            x="p",
            y="failure_rate",
            hue="variant",
            hue_order=arms,
            palette=arm_palette(arms),
            marker="o",
            ms=4,
            ax=ax,
            legend=False,
            **RATE_BAND,
        )
        ax.set(ylim=RATE_LIMITS, xlabel=P_FLAG, ylabel="failure rate", title=f"L = {L}, depth {depth}, step {step}")
        arms_drawn += [a for a in arms if a not in arms_drawn]
    _legend(fig, failure, arms_drawn)
    save(fig, path)


def training_baseline_fix(train: pd.DataFrame, path, variants: dict, window: int = 25) -> None:
    """Training loss (log axis; geometric mean over seeds, 95% interval on the log scale) and batch accuracy
    (mean, 95% interval clipped to [0, 1]; chance dashed), rolling means over ``window`` steps: the
    baseline against the fix, one column per L and depth."""
    groups = comparisons(train, variants)
    if not groups:
        _no_comparison(path, "training comparison")
        return
    smooth = smoothed(train, window)
    fig, axes = plt.subplots(
        2, len(groups), figsize=(3.6 * len(groups) + 0.4, 5.0), squeeze=False, layout="constrained"
    )
    arms_drawn = []
    for col, (L, depth, arms) in enumerate(groups):
        part = smooth[(smooth.L == L) & (smooth.depth == depth) & smooth.variant.isin(arms)]
        for row, (metric, band) in enumerate((("loss", LOG_BAND), ("accuracy", RATE_BAND))):
            ax = axes[row, col]
            sns.lineplot(
                data=part,
                x="step",
                y=metric,
                hue="variant",
                hue_order=arms,
                palette=arm_palette(arms),
                ax=ax,
                legend=False,
                **band,
            )
            ax.set(xlim=(0, part.step.max()), xlabel="training step")
            if metric == "loss":
                ax.set(yscale="log", ylabel="loss (cross-entropy, nats)", title=f"L = {L}, depth {depth}")
            else:
                ax.set(ylim=RATE_LIMITS, ylabel="batch accuracy")
                ax.axhline(CHANCE, color="0.4", lw=0.8, ls="--")
        arms_drawn += [a for a in arms if a not in arms_drawn]
    _legend(fig, train, arms_drawn, variant_labels(smooth))  # names an arm that never learns
    save(fig, path)


def jacobian_at_init(sweep: pd.DataFrame, path) -> None:
    """||d output_L / d x_j|| at initialization against the input position j, a line per depth (1..M), on a
    log axis; without and with the residual path (the blog's network has none). Geometric mean over
    seeds with its 95% interval on the log scale."""
    cases = [(False, "without residual (the blog's network)"), (True, "with residual")]
    cases = [(residual, title) for residual, title in cases if (sweep.residual == residual).any()]
    fig, axes = _panels(len(cases), height=3.2)
    depths = sorted(sweep.depth.unique())
    palette = dict(zip(depths, sns.color_palette("flare", len(depths))))
    for ax, (residual, title) in zip(axes[0], cases):
        part = sweep[sweep.residual == residual]
        sns.lineplot(
            data=part, x="position", y="output_jacobian", hue="depth", palette=palette, ax=ax, legend=False, **LOG_BAND
        )
        L = int(part.position.max())
        ax.set(
            yscale="log",
            xlim=(1, L),
            xlabel=f"input position j (L = {L})",
            ylabel="||d output_L / d x_j|| at init",
            title=f"{title}, {seeds_text(part.seed.nunique())}",
        )
    handles = [Line2D([], [], color=palette[d], lw=2, label=f"{d}") for d in depths]
    fig.legend(handles=handles, title="depth M", loc="outside right center", frameon=False)
    save(fig, path)
