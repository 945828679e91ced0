"""Figures of the training stage: failure by flag position and the training curves."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from lostmid.plots.common import SEED_INTERVAL
from lostmid.plots.style import save


def failure_by_position(failure: pd.DataFrame, path) -> None:
    """Failure rate against flag position, one line per checkpoint (mean, 95% interval over seeds).

    The blog's plot: a half-trained model fails more often as the FLAG moves right.
    """
    grid = sns.relplot(
        data=failure,
        x="p",
        y="failure_rate",
        hue="step",
        row="variant",
        col="L",
        kind="line",
        errorbar=SEED_INTERVAL,
        err_kws={"alpha": 0.08},  # one band per checkpoint: keep them faint so the lines read
        palette="viridis",
        height=2.6,
        aspect=1.4,
        facet_kws={"margin_titles": True},
    )
    grid.set_axis_labels("flag position p = f / L", "failure rate")
    grid.set(ylim=(-0.02, 1.02))
    save(grid, path)


def training_curves(train: pd.DataFrame, path, window: int = 25, points: int = 200) -> None:
    """Loss and batch accuracy over steps (rolling mean over ``window`` steps, drawn at about
    ``points`` steps per run; 95% interval over seeds)."""
    train = train.sort_values(["variant", "L", "depth", "seed", "step"])
    runs = train.groupby(["variant", "L", "depth", "seed"], sort=False)
    smooth = train.assign(
        loss=runs["loss"].transform(lambda s: s.rolling(window, min_periods=1).mean()),
        accuracy=runs["accuracy"].transform(lambda s: s.rolling(window, min_periods=1).mean()),
    )
    stride = max(1, int(train["step"].max()) // points)
    smooth = smooth[smooth["step"] % stride == 0]
    long = smooth.melt(
        id_vars=["variant", "L", "depth", "seed", "step"], value_vars=["loss", "accuracy"], var_name="metric"
    )
    grid = sns.relplot(
        data=long,
        x="step",
        y="value",
        hue="variant",
        style="depth" if long["depth"].nunique() > 1 else None,
        row="metric",
        col="L",
        kind="line",
        errorbar=SEED_INTERVAL,
        height=2.6,
        aspect=1.4,
        facet_kws={"sharey": "row", "margin_titles": True},
    )
    grid.set_axis_labels("training step", "")
    save(grid, path)
