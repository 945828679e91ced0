"""Figures of the training stage: failure by flag position and the training curves.

Panels are laid out by the arms the run has (a variant at its L and depth), never by the product of
every variant and every L: a variant that exists at one L only has one panel, not a row of empty ones.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from lostmid.plots.common import ARM_KEYS, LOG_BAND, RATE_BAND, RATE_LIMITS, seeds_of, seeds_text, with_arm
from lostmid.plots.style import arm_palette, save

P_FLAG = "flag position p = f / L"
CHANCE = 0.5  # the answer is one bit
LEARNS = 0.75  # halfway from chance to perfect: a variant whose mean accuracy never reaches it has not learned


def failure_by_position(failure: pd.DataFrame, path) -> None:
    """Failure rate against flag position, one line per checkpoint, one panel per arm (variant, L, depth);
    mean over seeds with a 95% interval (mean +- 1.96 standard errors, clipped to [0, 1]).

    The blog's plot: a half-trained model fails more often as the FLAG moves right.
    """
    data = with_arm(failure)
    seeds = seeds_of(data)
    arms = list(dict.fromkeys(data.sort_values(ARM_KEYS).arm))
    grid = sns.relplot(
        data=data,
        x="p",
        y="failure_rate",
        hue="step",
        col="arm",
        col_order=arms,
        col_wrap=min(3, len(arms)),
        kind="line",
        err_kws={"alpha": 0.08},  # one band per checkpoint: keep them faint so the lines read
        palette="viridis",
        height=2.4,
        aspect=1.3,
        **RATE_BAND,
    )
    for arm, ax in grid.axes_dict.items():
        ax.set_title(f"{arm} ({seeds_text(seeds[arm])})")
    grid.set_axis_labels(P_FLAG, "failure rate")
    grid.set(ylim=RATE_LIMITS)
    save(grid, path)


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
            label += f": never learns (accuracy never reaches {LEARNS:g}; best {best:.2f}, chance {CHANCE:g})"
        labels[variant] = label
    return labels


def training_curves(train: pd.DataFrame, path, window: int = 25, points: int = 200) -> None:
    """Loss (log axis, geometric mean over seeds, 95% interval on the log scale) and batch accuracy (mean,
    95% interval clipped to [0, 1], chance dashed) against the step, as rolling means over ``window``
    steps; one column per L and depth, each on its own steps; a line per variant, in its colour, the
    legend naming its seeds and whether it never learns."""
    smooth = smoothed(train, window, points)
    labels = variant_labels(smooth)
    smooth = smooth.assign(setting=[f"L = {L}, depth {d}" for L, d in zip(smooth.L, smooth.depth)])
    settings = list(dict.fromkeys(smooth.sort_values(["L", "depth"]).setting))
    palette = arm_palette(labels)
    fig, axes = plt.subplots(
        2, len(settings), figsize=(3.4 * len(settings) + 0.6, 5.0), squeeze=False, layout="constrained"
    )
    for col, setting in enumerate(settings):
        part = smooth[smooth.setting == setting]
        for row, (metric, band) in enumerate((("loss", LOG_BAND), ("accuracy", RATE_BAND))):
            ax = axes[row, col]
            sns.lineplot(data=part, x="step", y=metric, hue="variant", palette=palette, ax=ax, legend=False, **band)
            ax.set_xlim(0, part.step.max())
            ax.set_xlabel("training step")
            if metric == "loss":
                ax.set(yscale="log", ylabel="loss (cross-entropy, nats)", title=setting)
            else:
                ax.set(ylim=RATE_LIMITS, ylabel="batch accuracy")
                ax.axhline(CHANCE, color="0.4", lw=0.8, ls="--")
    handles = [Line2D([], [], color=palette[v], lw=2, label=label) for v, label in labels.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=1 if len(settings) < 2 else 2, frameon=False)
    save(fig, path)
