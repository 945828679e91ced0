"""Figures of the sequence-length study (docs/length.md): the imbalance against L at initialization
(no fix, the B fitted at each L, the carried B), and the trained position effects (a) and (e) against L.
Bands and bars are 95% intervals over seeds (init seeds, held-out initializations, trained seeds)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from lostmid.config import settings_from_section
from lostmid.evidence.length_trained import arm
from lostmid.evidence.readings import late_minus_early_failure_per_seed, mid_training_step, slopes_at
from lostmid.evidence.settings import EvidenceSettings
from lostmid.plots.common import SEED_INTERVAL
from lostmid.plots.style import save
from lostmid.tables.length import statistics_table

PANELS = {"log10_first_last": "log10 first / last", "log2_E_inf": "log2 E_inf"}


def _lines(ax, data: pd.DataFrame, statistic: str) -> None:
    sns.lineplot(data=data, x="L", y=statistic, hue="profile", marker="o", errorbar=SEED_INTERVAL, ax=ax)
    ax.set_xscale("log", base=2)
    ax.axhline(0.0, color="0.4", lw=0.8, ls="--")


def imbalance_by_length(length_init: pd.DataFrame, length_fit: pd.DataFrame, path) -> None:
    """Top: at init, no fix, the blog's measure and the density, with and without the residual path
    (bands over init seeds). Bottom: the output-Jacobian profile on the fit's held-out initializations
    with B = 0, the B fitted at each L (full, distance) and the carried B, in the fit network and inserted
    into the residual model (bands over held-out initializations)."""
    init = []
    for column, name in (("output_jacobian", "output Jacobian"), ("density", "density")):
        stats = statistics_table(length_init, ["residual", "seed", "L"], column)
        init.append(stats.assign(profile=[f"{name}, {'residual' if r else 'no residual'}" for r in stats.residual]))
    init = pd.concat(init, ignore_index=True)
    fit = statistics_table(length_fit, ["residual", "bias", "heldout_init", "L"], "output_jacobian")
    fit["profile"] = [f"B {b}, {'inserted (residual)' if r else 'fit network'}" for b, r in zip(fit.bias, fit.residual)]
    fig, axes = plt.subplots(2, len(PANELS), figsize=(11, 7.5), squeeze=False)
    for column, (statistic, label) in enumerate(PANELS.items()):
        for row, (data, title) in enumerate(((init, "at init, no fix"), (fit, "held-out inits, fitted B"))):
            ax = axes[row, column]
            _lines(ax, data, statistic)
            ax.set_title(f"{label}: {title}")
            ax.set_ylabel(label)
            ax.legend(fontsize=6)
    save(fig, path)


def position_effect_by_length(failure: pd.DataFrame, length_init: pd.DataFrame, path) -> None:
    """(a) the per-seed logistic slope of failure on p and the model-free late-minus-early failure, each
    arm at its own mid-training (the evidence stage's rule), against L; the gap between the arms is (e)."""
    ev = settings_from_section(EvidenceSettings, None, "evidence")  # the schema's mid-training level
    rows = []
    for (variant, L, depth), _ in failure.groupby(["variant", "L", "depth"]):
        step, _best = mid_training_step(failure, variant, L, depth, ev.mid_accuracy)
        if step is None:
            continue
        for name, per_seed in (("slope of logit failure on p", slopes_at), ("late - early failure", None)):
            values = (
                per_seed(failure, variant, L, depth, step)
                if per_seed
                else late_minus_early_failure_per_seed(failure, variant, L, depth, step)
            )
            rows += [{"arm": arm(variant), "L": L, "statistic": name, "value": v} for v in values.to_numpy()]
    data = pd.DataFrame(rows, columns=["arm", "L", "statistic", "value"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), squeeze=False)
    for ax, (name, part) in zip(axes[0], data.groupby("statistic", sort=False)):
        sns.pointplot(data=part, x="L", y="value", hue="arm", dodge=0.2, errorbar=SEED_INTERVAL, ax=ax)
        ax.axhline(0.0, color="0.4", lw=0.8, ls="--")
        ax.set_title(f"{name}, at each arm's mid-training")
        ax.set_ylabel(name)
    if data.empty:
        axes[0, 0].text(0.5, 0.5, "no arm reached mid-training", ha="center", transform=axes[0, 0].transAxes)
    save(fig, path)
