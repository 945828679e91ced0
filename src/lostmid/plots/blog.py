"""The blog's figures, as the blog draws them: the baseline against the fix (the fitted attention bias B),
failure by flag position at the blog's step and training curves; and the influence of input position j on
the last output at initialization, for depths 1..M, on a log scale.

An arm is a variant at one L and depth. The fix's arms are the variants whose remedy is the bias; each is
drawn beside its reference (lostmid.evidence.inputs: the variant without a remedy, with the same model and
training), one panel per reference, L and depth.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D

from lostmid.plots.common import RATE_LIMITS, curve, draw_curve, panels, seeds_text, setting_label
from lostmid.plots.style import arm_styles, message, ordered_styles, save
from lostmid.plots.training import P_FLAG, arm_legend, loss_and_accuracy, smoothed, variant_labels

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


def _no_comparison(path, what: str) -> None:
    """A figure saying that the run has no baseline-fix pair (an honest text, not an empty panel)."""
    message(path, f"no {what}: the run has no fix arm (remedy bias)\nbeside its reference")


def _labels(data: pd.DataFrame, arms) -> dict:
    seeds = data.groupby("variant").seed.nunique()
    return {arm: f"{arm} ({seeds_text(seeds.get(arm, 0))})" for arm in arms}


def failure_baseline_fix(failure: pd.DataFrame, path, variants: dict) -> None:
    """Failure rate by flag position, the baseline against the fix, at the blog's step (the last checkpoint
    the arms share: the end of their training); mean over seeds with a 95% interval (mean +- 1.96 standard
    errors, clipped to [0, 1]); one panel per L and depth, each arm in its colour, line and marker."""
    groups = comparisons(failure, variants)
    if not groups:
        _no_comparison(path, "failure comparison")
        return
    styles = arm_styles([arm for _, _, arms in groups for arm in arms])
    fig, axes = panels(len(groups), ncols=2, panel_height=2.3, sharey=True)
    for ax, (L, depth, arms) in zip(axes, groups):
        part = failure[(failure.L == L) & (failure.depth == depth) & failure.variant.isin(arms)]
        step = min(part.groupby("variant").step.max())
        for arm in arms:
            at = part[(part.variant == arm) & (part.step == step)]
            draw_curve(ax, curve(at, "p", "failure_rate", "rate"), "p", styles[arm])
        ax.set(ylim=RATE_LIMITS, xlabel=P_FLAG, ylabel="failure rate", title=f"{setting_label(L, depth)}, step {step}")
        ax.label_outer()
    arm_legend(fig, styles, _labels(failure, styles))
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
    styles = arm_styles([arm for _, _, arms in groups for arm in arms])
    fig = loss_and_accuracy(smooth, groups, styles)
    labels = variant_labels(smooth[smooth.variant.isin(list(styles))])  # names an arm that never learns
    arm_legend(fig, styles, labels)
    save(fig, path)


def jacobian_at_init(sweep: pd.DataFrame, path) -> None:
    """||d output_L / d x_j|| at initialization against the input position j, a line per depth (1..M), on a
    log axis; without and with the residual path (the blog's network has none), each panel on its own axis.
    Geometric mean over seeds with its 95% interval on the log scale."""
    cases = [(False, "without residual (the blog's)"), (True, "with residual")]
    cases = [(residual, title) for residual, title in cases if (sweep.residual == residual).any()]
    fig, axes = panels(len(cases), ncols=2, panel_height=2.3)
    depths = sorted(sweep.depth.unique())
    styles = dict(zip(depths, ordered_styles(len(depths))))
    for ax, (residual, title) in zip(axes, cases):
        part = sweep[sweep.residual == residual]
        for depth in depths:
            draw_curve(
                ax, curve(part[part.depth == depth], "position", "output_jacobian", "log"), "position", styles[depth]
            )
        L = int(part.position.max())
        ax.set(
            yscale="log",
            xlim=(1, L),
            xlabel=f"input position j (L = {L})",
            ylabel="||d output_L / d x_j|| at init",
            title=f"{title}, {seeds_text(part.seed.nunique())}",
        )
    handles = [Line2D([], [], label=f"{d}", **styles[d].line()) for d in depths]
    fig.legend(handles=handles, title="depth M", loc="outside lower center", ncol=len(depths), frameon=False)
    save(fig, path)
