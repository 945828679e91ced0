"""Seaborn figures of the remedies stage.

Lines are means over seeds with 95% intervals (mean ± 1.96 standard errors, lostmid.plots.common.SEED_INTERVAL;
failure rates clipped to [0, 1]); densities on a log axis are geometric means with intervals on the log scale.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from lostmid.plots.common import LOG_BAND, RATE_BAND, RATE_LIMITS, SEED_INTERVAL
from lostmid.plots.style import arm_color, arm_palette, save


def draw_bias(ax, matrix: pd.DataFrame, L: int, title: str) -> None:
    """One B (the long table of a bias matrix: query, key, bias) as a heat map centred on 0, on ``ax``."""
    B = np.full((L, L), np.nan)
    B[matrix["query"] - 1, matrix["key"] - 1] = matrix["bias"]
    limit = np.nanmax(np.abs(B)) or 1.0
    sns.heatmap(
        B,
        ax=ax,
        cmap="RdBu_r",
        center=0,
        vmin=-limit,
        vmax=limit,
        square=True,
        xticklabels=False,
        yticklabels=False,
        cbar_kws={"shrink": 0.7, "label": "bias B_ij (attention logit)"},
    )
    ticks = sorted({1, *range(4, L + 1, 4), L})  # positions 1 .. L, a tick every 4
    ax.set_xticks([t - 0.5 for t in ticks], ticks)
    ax.set_yticks([t - 0.5 for t in ticks], ticks, rotation=0)
    ax.grid(False)
    ax.set(title=title, xlabel="key j", ylabel="query i")


def matched_steps(steps, requested=None) -> list[int]:
    """The checkpoints every figure compares: ``requested`` if given, else the middle and last."""
    steps = sorted(int(s) for s in steps)
    if requested:
        missing = sorted(set(requested) - set(steps))
        if missing:
            from lostmid.errors import ConfigError

            raise ConfigError(
                f"config key remedies.plot_steps: no checkpoint at step(s) {missing}; checkpoints are {steps}"
            )
        return sorted(requested)
    return sorted({steps[len(steps) // 2], steps[-1]})


def _empty(path, message: str) -> None:
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.text(0.5, 0.5, message, ha="center", va="center")
    ax.set_axis_off()
    save(fig, path)


def _order(variants, baseline):
    rest = sorted(v for v in variants if v != baseline)
    return ([baseline] if baseline in variants else []) + rest


def _by_remedy(data: pd.DataFrame, y: str, baseline: str, band: dict, **facets):
    """``y`` against p, a line per variant (the baseline first) with its seed interval, a panel per
    checkpoint (rows) and L (columns)."""
    return sns.relplot(
        data=data,
        x="p",
        y=y,
        hue="variant",
        hue_order=_order(data.variant.unique(), baseline),
        row="step",
        col="L",
        kind="line",
        palette=arm_palette(data.variant.unique()),
        height=2.4,
        aspect=1.5,
        facet_kws={"margin_titles": True, **facets},
        **band,
    )


def failure_by_remedy(remedies: pd.DataFrame, failure: pd.DataFrame, path, baseline: str, steps=None) -> None:
    """Failure rate by flag position, baseline against each remedy at the same checkpoints
    (``steps``, else the middle and last of the remedies table's)."""
    data = failure[failure.step.isin(matched_steps(remedies.step.unique(), steps))]
    grid = _by_remedy(data, "failure_rate", baseline, RATE_BAND)
    grid.set(ylim=RATE_LIMITS)
    grid.set_axis_labels("flag position p = f / L", "failure rate")
    save(grid, path)


def influence_by_remedy(remedies: pd.DataFrame, influence, path, baseline: str, steps=None) -> None:
    """Input-adjoint density m(p) (layer 0) per remedy at the same checkpoints (as failure_by_remedy); log scale."""
    if influence is None or influence.empty:
        _empty(path, "no influence profiles (results/influence) were given")
        return
    data = influence[influence.step.isin(matched_steps(remedies.step.unique(), steps))]
    if "layer" in data:
        data = data[data.layer == data.layer.min()]
    grid = _by_remedy(data, "density", baseline, LOG_BAND)
    grid.set(yscale="log")
    grid.set_axis_labels("position p", "density m (input adjoint)")
    save(grid, path)


ABLATION_METRICS = ("final_accuracy", "steps_to_99", "LIM", "E_inf")


def ablations(table: pd.DataFrame, path) -> None:
    """Final-checkpoint metrics against each remedy's parameters, one panel per (metric, parameter).

    Parameters: strength (beta, eta, lam), target density, probe count R, monitored set,
    and the grid's L and depth. Points are means over seeds with 95% intervals.
    """
    final = table[table.step == table.groupby(["variant", "L", "depth", "seed"]).step.transform("max")]
    frames = []
    for parameter in ("strength", "target", "probes", "monitored", "L", "depth"):
        for kind, group in final.groupby("remedy"):
            values = group[parameter].dropna()
            if values.nunique() < 2:
                continue
            part = group.loc[values.index].melt(
                id_vars=["seed", parameter], value_vars=list(ABLATION_METRICS), var_name="metric"
            )
            frames.append(
                part.assign(parameter=f"{kind}: {parameter}", level=part[parameter].astype(str)).drop(columns=parameter)
            )
    if not frames:
        _empty(path, "no remedy parameter varies across the variants")
        return
    long = pd.concat(frames, ignore_index=True).dropna(subset=["value"])
    grid = sns.catplot(
        data=long,
        x="level",
        y="value",
        row="metric",
        col="parameter",
        kind="point",
        errorbar=SEED_INTERVAL,
        height=2.0,
        aspect=1.2,
        sharex=False,
        sharey="row",
        margin_titles=True,
    )
    grid.set_axis_labels("", "")
    save(grid, path)


def overhead(table: pd.DataFrame, path, baseline: str) -> None:
    """Wall-clock per step and peak memory relative to the baseline (same L, depth, seed)."""
    per_run = table.drop_duplicates(["variant", "L", "depth", "seed"])
    columns = [c for c in ("time_ratio", "peak_mem_ratio", "max_rss_ratio") if per_run[c].notna().any()]
    long = per_run.melt(id_vars=["variant", "L", "seed"], value_vars=columns, var_name="ratio").dropna(subset=["value"])
    long = long.assign(L=long.L.map("L = {}".format))  # a category: one colour-blind-safe colour per L
    if long.empty:
        _empty(path, f"no overhead ratios: is the baseline variant {baseline!r} in the grid?")
        return
    grid = sns.catplot(
        data=long,
        x="variant",
        y="value",
        hue="L",
        col="ratio",
        kind="bar",
        errorbar=SEED_INTERVAL,
        order=_order(long.variant.unique(), baseline),
        height=2.8,
        aspect=1.4,
        sharey=False,
    )
    for ax in grid.axes.flat:
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
        ax.tick_params(axis="x", rotation=45)
    grid.set_axis_labels("", f"ratio to {baseline}")
    save(grid, path)


FIT_KEYS = ["variant", "L", "depth"]  # one fitted bias per bias variant, L and depth


# The words of a bias fit's reading (lostmid.analysis.bias_fit; docs/remedies.md, "Readings of the bias correction").
READING_WORDS = {
    "target": {
        "loss": "flattens the loss-gradient energy E||P_0(j)||^2",
        "output_jacobian": "flattens the output Jacobian E||d output_L / d x_j||",
    },
    "positions": {"all": "over all positions", "context": "over positions 1..L-1 (their share held)"},
    "param": {"full": "every entry of B free", "distance": "B_ij = c(i - j)"},
}


def reading_line(fit: pd.Series) -> str:
    """One line describing a fit's reading and what it did, from a row of results/bias_fit_summary."""
    where = "its own model" if fit.fit_model == fit.variant else f"{fit.fit_model}"
    target, positions = (READING_WORDS[key][fit[key]] for key in ("target", "positions"))
    if fit.param in READING_WORDS["param"]:
        how = f"{target} {positions}, {READING_WORDS['param'][fit.param]}, fitted on {where} at init"
    else:  # a control, built by a rule from a fitted B (lostmid.analysis.bias_controls)
        how = f"{fit.param} of a B fitted to {target.removeprefix('flattens ')} {positions}"
    return (
        f"{how}\n"
        f"held-out imbalance {fit.imbalance_before:.3g} -> {fit.imbalance_after:.3g}, "
        f"context share {fit.context_share_before:.3g} -> {fit.context_share_after:.3g}\n"
        f"c0 {fit.c0:+.2f}, lag slope {fit.lag_slope:+.3f}; self-attention at init "
        f"{fit.self_attention_init_b0:.2f} (B = 0) -> {fit.self_attention_init:.2f}"
        + ("" if fit.accepted else "\nNOT accepted by the held-out guard")
    )


def bias_heatmap(matrices: pd.DataFrame, summaries: pd.DataFrame, path) -> None:
    """Each reading's fitted B (query i down, key j across) beside a line that describes the reading:
    one row per fit (variant, L, depth)."""
    fits = matrices.groupby(FIT_KEYS)
    means = summaries.groupby(FIT_KEYS + ["target", "positions", "fit_model", "param"], as_index=False).mean(
        numeric_only=True
    )
    fig, axes = plt.subplots(
        len(fits), 2, figsize=(10.5, 3.4 * len(fits)), squeeze=False, gridspec_kw={"width_ratios": [1, 1.6]}
    )
    for (ax, text), ((variant, L, depth), part) in zip(axes, fits):
        draw_bias(ax, part, L, f"B of {variant}, L={L}, depth {depth}")
        fit = means[(means.variant == variant) & (means.L == L) & (means.depth == depth)]
        text.axis("off")
        text.text(
            0.0, 0.5, reading_line(fit.iloc[0]) if len(fit) else "(no summary)", va="center", fontsize=8.5, wrap=True
        )
    fig.tight_layout()
    save(fig, path)


def bias_profiles(profiles: pd.DataFrame, iterations: pd.DataFrame, path) -> None:
    """Density at init before and after the fitted bias (held-out inits), and E_inf per iteration."""
    fits = sorted(profiles.groupby(FIT_KEYS).groups)
    fig, axes = plt.subplots(2, len(fits), figsize=(3.8 * len(fits), 5.2), squeeze=False)
    for col, fit in enumerate(fits):
        selected = dict(zip(FIT_KEYS, fit))
        part = profiles.loc[(profiles[FIT_KEYS] == pd.Series(selected)).all(axis=1)]
        y = "density_fit" if part["density_fit"].notna().sum() < len(part) else "density"
        sns.lineplot(
            data=part, x="p", y=y, hue="stage", hue_order=["before", "after"], ax=axes[0, col], marker="o", ms=3
        )
        axes[0, col].axhline(1.0, color="0.3", lw=0.8, ls="--")
        axes[0, col].set(
            title="{variant}, L={L}, depth {depth}".format(**selected), xlabel="position p", ylabel="density m at init"
        )
        its = iterations.loc[(iterations[FIT_KEYS] == pd.Series(selected)).all(axis=1)]
        axes[1, col].plot(its["iteration"], its["E_inf_fit"], marker=".")
        axes[1, col].set(yscale="log", xlabel="iteration", ylabel="E_inf (fitted positions)")
    fig.tight_layout()
    save(fig, path)


def mechanism_controls(
    matrices: pd.DataFrame, failure: pd.DataFrame, path, variants: dict, mid_accuracy: float
) -> None:
    """Each arm's B (query i down, key j across) beside its failure rate by flag position at its own
    mid-training checkpoint (the evidence stage's rule: the first checkpoint where its mean accuracy over
    seeds reaches ``mid_accuracy``), mean over seeds with a 95% band, its reference's curve (the evidence
    stage's pairing of ``variants``: the variant without a remedy and with the same model and training) at
    its own mid-training drawn in grey beside it; one row per arm (variant, L, depth)."""
    from lostmid.evidence.inputs import Inputs
    from lostmid.evidence.readings import mid_training_step

    pairing = Inputs(variants=variants, model={})

    arms = [key for key, _ in matrices.groupby(FIT_KEYS) if key[0] in set(failure.variant)]
    if not arms:
        _empty(path, "no bias variant with failure rows")
        return
    fig, axes = plt.subplots(
        len(arms), 2, figsize=(9.5, 3.0 * len(arms)), squeeze=False, gridspec_kw={"width_ratios": [1, 1.5]}
    )

    def at_mid(variant, L, depth):
        part = failure[(failure.variant == variant) & (failure.L == L) & (failure.depth == depth)]
        if part.empty:
            return None, part
        step, _ = mid_training_step(failure, variant, L, depth, mid_accuracy)
        return step, part[part.step == step] if step is not None else part.iloc[0:0]

    for (heat, curve), (variant, L, depth) in zip(axes, arms):
        part = matrices[(matrices.variant == variant) & (matrices.L == L) & (matrices.depth == depth)]
        draw_bias(heat, part, L, f"B of {variant}")
        for name in (pairing.reference(variant), variant):
            color = arm_color(name)
            step, data = at_mid(name, L, depth)
            label = f"{name}: " + (f"step {step}" if step is not None else f"never reaches {mid_accuracy:g}")
            if not data.empty:
                sns.lineplot(data=data, x="p", y="failure_rate", color=color, ax=curve, label=label, **RATE_BAND)
            else:
                curve.plot([], [], color=color, label=label)
        curve.set(
            title=f"failure at mid-training, L={L}, depth {depth}",
            xlabel="flag position p = f/L",
            ylabel="failure rate",
            ylim=RATE_LIMITS,
        )
        curve.legend(fontsize=7, loc="upper left")
        if not curve.collections and not any(len(line.get_xdata()) for line in curve.lines):
            # Neither arm reaches mid-training: say so instead of an empty panel.
            curve.text(0.5, 0.5, f"no mid-training checkpoint:\nneither arm reaches accuracy {mid_accuracy:g}",
                       transform=curve.transAxes, ha="center", va="center", color="0.3")  # fmt: skip
            curve.set(xticks=[], yticks=[])
    fig.tight_layout()
    save(fig, path)
