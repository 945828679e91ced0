"""Seaborn figures of the remedies stage.

Lines are means over seeds with 95% intervals (mean ± 1.96 standard errors, lostmid.plots.common.SEED_INTERVAL;
failure rates clipped to [0, 1]); densities on a log axis are geometric means with intervals on the log scale.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from lostmid.plots.common import RATE_LIMITS, SEED_INTERVAL, arm_order, curve, draw_curve, panels, setting_label
from lostmid.plots.influence import P_LABEL
from lostmid.plots.style import REFERENCE, arm_styles, figure, message, save
from lostmid.plots.training import P_FLAG, arm_legend


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


def _order(variants, baseline):
    rest = sorted(v for v in variants if v != baseline)
    return ([baseline] if baseline in variants else []) + rest


def _by_remedy(data: pd.DataFrame, y: str, band: str, baseline: str, ylabel: str, path, log: bool = False) -> None:
    """``y`` against p, a line per variant (the baseline first, each in its style) with its 95% band over seeds,
    a panel per setting (L, depth) and checkpoint that has rows: no empty panel."""
    keys = sorted(set(data[["L", "depth", "step"]].itertuples(index=False, name=None)))
    variants = [v for v, _, _ in arm_order(data)]
    styles = arm_styles(_order(list(dict.fromkeys(variants)), baseline))
    fig, axes = panels(len(keys), ncols=min(len(keys), 3), panel_height=1.9, sharey=not log)
    for ax, (L, depth, step) in zip(axes, keys):
        part = data[(data.L == L) & (data.depth == depth) & (data.step == step)]
        for variant in styles:
            if (part.variant == variant).any():
                draw_curve(ax, curve(part[part.variant == variant], "p", y, band), "p", styles[variant])
        ax.set(title=f"{setting_label(L, depth)}, step {step}", xlabel=P_FLAG if y == "failure_rate" else P_LABEL)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
            ax.axhline(1.0, color=REFERENCE, lw=0.8, ls="--")
        else:
            ax.set_ylim(RATE_LIMITS)
            ax.label_outer()
    arm_legend(fig, styles, {v: v for v in styles}, ncol=min(len(styles), 4))
    save(fig, path)


def _remedy_arms(remedies: pd.DataFrame, table: pd.DataFrame, baseline: str, steps) -> pd.DataFrame:
    """The rows of ``table`` of the remedies' arms and the baseline, at the checkpoints compared."""
    shown = table[table.step.isin(matched_steps(remedies.step.unique(), steps))]
    return shown[shown.variant.isin({*remedies.variant, baseline})]


def failure_by_remedy(remedies: pd.DataFrame, failure: pd.DataFrame, path, baseline: str, steps=None) -> None:
    """Failure rate by flag position, baseline against each remedy at the same checkpoints
    (``steps``, else the middle and last of the remedies table's)."""
    _by_remedy(_remedy_arms(remedies, failure, baseline, steps), "failure_rate", "rate", baseline, "failure rate", path)


def influence_by_remedy(remedies: pd.DataFrame, influence, path, baseline: str, steps=None) -> None:
    """Input-adjoint density m(p) (layer 0) per remedy at the same checkpoints (as failure_by_remedy); log scale,
    geometric means over seeds."""
    if influence is None or influence.empty:
        message(path, "no influence profiles (results/influence) were given")
        return
    data = _remedy_arms(remedies, influence, baseline, steps)
    if "layer" in data:
        data = data[data.layer == data.layer.min()]
    data = data.assign(density=data.density.where(data.density > 0))
    _by_remedy(data, "density", "log", baseline, "density m (input adjoint)", path, log=True)


ABLATION_METRICS = {
    "final_accuracy": "final accuracy",
    "steps_to_99": "steps to 99%",
    "LIM": "LIM",
    "E_inf": "E_inf",
}
# The remedies' own parameters; the grid's L and depth are not among them (they move together across the
# grid's settings, so a panel of each would show one confounded contrast twice).
ABLATION_PARAMETERS = ("strength", "target", "probes", "monitored")


def ablations(table: pd.DataFrame, path) -> None:
    """Final-checkpoint metrics against each remedy's parameters: a row per (remedy, parameter) that varies, a
    column per metric; means over seeds with 95% intervals."""
    final = table[table.step == table.groupby(["variant", "L", "depth", "seed"]).step.transform("max")]
    rows = []
    for parameter in ABLATION_PARAMETERS:
        for kind, group in final.groupby("remedy"):
            values = group[parameter].dropna()
            if values.nunique() >= 2:
                rows.append((f"{kind}: {parameter}", group.loc[values.index].assign(level=values.astype(str))))
    if not rows:
        message(path, "no remedy parameter varies across the variants")
        return
    fig, axes = figure(2, min(1.35 * len(rows) + 0.5, 8.8), nrows=len(rows), ncols=len(ABLATION_METRICS), squeeze=False)
    for (name, part), row in zip(rows, axes):
        for ax, (metric, label) in zip(row, ABLATION_METRICS.items()):
            sns.pointplot(data=part, x="level", y=metric, errorbar=SEED_INTERVAL, ax=ax, color="C0", markersize=4)
            ax.set(xlabel=name, ylabel=label)
            ax.tick_params(axis="x", rotation=30)
    save(fig, path)


def overhead(table: pd.DataFrame, path, baseline: str) -> None:
    """Wall-clock per step and peak memory relative to the baseline (same L, depth, seed): a bar per variant,
    mean over seeds with its 95% interval, 1 dashed."""
    per_run = table.drop_duplicates(["variant", "L", "depth", "seed"])
    columns = [c for c in ("time_ratio", "peak_mem_ratio", "max_rss_ratio") if per_run[c].notna().any()]
    long = per_run.melt(id_vars=["variant", "L", "seed"], value_vars=columns, var_name="ratio").dropna(subset=["value"])
    if long.empty:
        message(path, f"no overhead ratios: is the baseline variant {baseline!r} in the grid?")
        return
    labels = {"time_ratio": "time per step", "peak_mem_ratio": "peak GPU memory", "max_rss_ratio": "peak host memory"}
    order = _order(long.variant.unique(), baseline)
    colors = arm_styles(order)
    fig, axes = figure(2, 2.6, ncols=len(columns), squeeze=False)
    for ax, column in zip(axes[0], columns):
        part = long[long.ratio == column]
        sns.barplot(data=part, x="variant", y="value", order=order, errorbar=SEED_INTERVAL, ax=ax,
                    hue="variant", palette={v: s.color for v, s in colors.items()}, legend=False)  # fmt: skip
        ax.axhline(1.0, color=REFERENCE, lw=0.8, ls="--")
        ax.tick_params(axis="x", rotation=45)
        ax.set(xlabel="", ylabel=f"{labels[column]} / {baseline}'s (ratio)")
    save(fig, path)


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
    """Each reading's fitted B (query i down, key j across; its own colour bar, centred on 0), three abreast,
    numbered; under them, each number's reading in words (``reading_line``)."""
    fits = list(matrices.groupby(FIT_KEYS))
    means = summaries.groupby(FIT_KEYS + ["target", "positions", "fit_model", "param"], as_index=False).mean(
        numeric_only=True
    )
    lines = []
    for number, ((variant, L, depth), _) in enumerate(fits, 1):
        fit = means[(means.variant == variant) & (means.L == L) & (means.depth == depth)]
        lines.append(
            f"({number}) {variant}, {setting_label(L, depth)}: "
            + (reading_line(fit.iloc[0]) if len(fit) else "(no summary)")
        )
    # wrapped to the figure's width at 7 pt (about 100 characters), never cut
    text = "\n".join(wrapped for line in "\n".join(lines).splitlines() for wrapped in textwrap.wrap(line, 100))
    ncols = 3  # a heat map a third of the width, however many fits
    nrows = -(-len(fits) // ncols)
    text_height = 0.13 * text.count("\n") + 0.3
    fig = plt.figure(figsize=(6.8, 2.3 * nrows + text_height), layout="constrained")
    grid = fig.add_gridspec(nrows + 1, ncols, height_ratios=[2.3] * nrows + [text_height])
    for k, ((variant, L, _), part) in enumerate(fits):
        draw_bias(fig.add_subplot(grid[k // ncols, k % ncols]), part, L, f"({k + 1}) B of {variant}")
    words = fig.add_subplot(grid[nrows, :])
    words.axis("off")
    words.text(0.0, 1.0, text, va="top", ha="left", fontsize=7, transform=words.transAxes)
    save(fig, path)


def log_if_wide(ax, values, decades: float = 1.0) -> None:
    """A log y axis where the positive ``values`` span more than ``decades`` orders of magnitude; else linear
    (a log axis on a range of a few percent only hides its ticks)."""
    values = np.asarray(pd.Series(values, dtype=float).dropna())
    values = values[values > 0]
    if values.size and np.log10(values.max() / values.min()) > decades:
        ax.set_yscale("log")


STAGES = {"before": ((0.45, 0.45, 0.45), (4, 2), "o"), "after": ("C0", (), "s")}


def bias_profiles(profiles: pd.DataFrame, iterations: pd.DataFrame, path) -> None:
    """Density at init before (grey, dashed) and after (blue, solid) the fitted bias (held-out inits), and E_inf
    per iteration of the fit, a column per fit (at most three abreast; a log axis only where the values span
    more than a decade)."""
    fits = sorted(profiles.groupby(FIT_KEYS).groups)
    ncols = min(len(fits), 3)
    fig, axes = figure(1 if ncols == 1 else 2, 3.8, nrows=2, ncols=ncols, squeeze=False)
    if len(fits) > ncols:
        fits = fits[:ncols]
        fig.suptitle(f"the first {ncols} fits of {len(profiles.groupby(FIT_KEYS))}")
    for col, fit in enumerate(fits):
        selected = dict(zip(FIT_KEYS, fit))
        part = profiles.loc[(profiles[FIT_KEYS] == pd.Series(selected)).all(axis=1)]
        y = "density_fit" if part["density_fit"].notna().sum() < len(part) else "density"
        top, bottom = axes[0, col], axes[1, col]
        for stage, (color, dashes, marker) in STAGES.items():
            line = part[part.stage == stage].sort_values("p")
            top.plot(line.p, line[y], color=color, dashes=dashes or (None, None), marker=marker, ms=3, label=stage)
        top.axhline(1.0, color=REFERENCE, lw=0.8, ls="--")
        log_if_wide(top, part[y])
        top.set(title="{variant}\n".format(**selected) + setting_label(selected["L"], selected["depth"]),
                xlabel="relative position p", ylabel="density m at init" if col == 0 else "")  # fmt: skip
        its = iterations.loc[(iterations[FIT_KEYS] == pd.Series(selected)).all(axis=1)]
        bottom.plot(its["iteration"], its["E_inf_fit"], marker=".", color="C0")
        log_if_wide(bottom, its["E_inf_fit"])
        bottom.set(xlabel="iteration of the fit", ylabel="E_inf (fitted positions)" if col == 0 else "")
    axes[0, 0].legend(frameon=False)
    save(fig, path)


def mechanism_controls(
    matrices: pd.DataFrame, failure: pd.DataFrame, path, variants: dict, mid_accuracy: float
) -> None:
    """Each arm's B (query i down, key j across) beside its failure rate by flag position at its own
    mid-training checkpoint (the evidence stage's rule: the first checkpoint where its mean accuracy over
    seeds reaches ``mid_accuracy``), mean over seeds with a 95% band, beside its reference's (the evidence
    stage's pairing of ``variants``: the variant without a remedy and with the same model and training) at
    its own mid-training, each in its style; one row per arm (variant, L, depth)."""
    from lostmid.evidence.inputs import Inputs
    from lostmid.evidence.readings import mid_training_step

    pairing = Inputs(variants=variants, model={})

    arms = [key for key, _ in matrices.groupby(FIT_KEYS) if key[0] in set(failure.variant)]
    if not arms:
        message(path, "no bias variant with failure rows")
        return
    fig, axes = figure(2, min(2.3 * len(arms) + 0.2, 8.8), nrows=len(arms), ncols=2, squeeze=False,
                       gridspec_kw={"width_ratios": [1, 1.3]})  # fmt: skip

    def at_mid(variant, L, depth):
        part = failure[(failure.variant == variant) & (failure.L == L) & (failure.depth == depth)]
        if part.empty:
            return None, part
        step, _ = mid_training_step(failure, variant, L, depth, mid_accuracy)
        return step, part[part.step == step] if step is not None else part.iloc[0:0]

    for (heat, panel), (variant, L, depth) in zip(axes, arms):
        part = matrices[(matrices.variant == variant) & (matrices.L == L) & (matrices.depth == depth)]
        draw_bias(heat, part, L, f"B of {variant}")
        names = [pairing.reference(variant), variant]
        styles = arm_styles(names)
        for name in names:
            step, data = at_mid(name, L, depth)
            label = f"{name}: " + (f"step {step}" if step is not None else f"never reaches {mid_accuracy:g}")
            if not data.empty:
                draw_curve(panel, curve(data, "p", "failure_rate", "rate"), "p", styles[name], label=label)
            else:
                panel.plot([], [], label=label, **styles[name].line())
        panel.set(title=f"failure at mid-training, {setting_label(L, depth)}", xlabel=P_FLAG, ylabel="failure rate",
                  ylim=RATE_LIMITS)  # fmt: skip
        panel.legend(loc="upper left", frameon=False)
        if not panel.collections and not any(len(line.get_xdata()) for line in panel.lines):
            # Neither arm reaches mid-training: say so instead of an empty panel.
            panel.text(0.5, 0.5, f"no mid-training checkpoint:\nneither arm reaches accuracy {mid_accuracy:g}",
                       transform=panel.transAxes, ha="center", va="center", color="0.3")  # fmt: skip
            panel.set(xticks=[], yticks=[])
    save(fig, path)
