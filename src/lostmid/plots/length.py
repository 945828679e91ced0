"""Figures of the sequence-length study (docs/length.md): the imbalance against L at initialization
(no fix, the B fitted at each L, the carried B), and the trained position effects (a) and (e) against L.
Bands and bars are 95% intervals over seeds (init seeds, held-out initializations, trained seeds)."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from lostmid.config import settings_from_section
from lostmid.evidence.length_claims import arm
from lostmid.evidence.readings import late_minus_early_failure_per_seed, mid_training_step, slopes_at
from lostmid.evidence.settings import EvidenceSettings
from lostmid.plots.common import SEED_INTERVAL
from lostmid.plots.style import REFERENCE, arm_styles, figure, message, save
from lostmid.tables.length import statistics_table

PANELS = {"log10_first_last": "log10 first / last", "log2_E_inf": "log2 E_inf"}


def _lines(ax, data: pd.DataFrame, statistic: str) -> None:
    """A line per profile (each its colour, line and marker) against L, mean with its 95% interval."""
    profiles = list(dict.fromkeys(data.profile))
    styles = arm_styles(profiles)
    sns.lineplot(data=data, x="L", y=statistic, hue="profile", style="profile", hue_order=profiles,
                 palette={k: s.color for k, s in styles.items()}, dashes={k: s.dashes or "" for k, s in styles.items()},
                 markers={k: s.marker for k, s in styles.items()}, errorbar=SEED_INTERVAL, ax=ax)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.axhline(0.0, color=REFERENCE, lw=0.8, ls="--")


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
    fig, axes = figure(2, 6.4, nrows=2, ncols=len(PANELS), squeeze=False)
    for column, (statistic, label) in enumerate(PANELS.items()):
        for row, (data, title) in enumerate(((init, "at init, no fix"), (fit, "held-out inits, fitted B"))):
            ax = axes[row, column]
            _lines(ax, data, statistic)
            ax.set_title(title)
            ax.set(ylabel=label, xlabel="sequence length L (log2 axis)")
            if column == 0:
                sns.move_legend(ax, "upper left", bbox_to_anchor=(0, -0.28), frameon=False, title="", ncol=2)
            else:
                ax.get_legend().remove()
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
    if data.empty:
        message(path, "no arm reached mid-training: no position effect to draw")
        return
    fig, axes = figure(2, 2.8, ncols=2, squeeze=False)
    for ax, (name, part) in zip(axes[0], data.groupby("statistic", sort=False)):
        arms = list(dict.fromkeys(part.arm))
        styles = arm_styles(arms)
        sns.pointplot(data=part, x="L", y="value", hue="arm", hue_order=arms, dodge=0.2, errorbar=SEED_INTERVAL,
                      palette={a: s.color for a, s in styles.items()}, markers=[styles[a].marker for a in arms],
                      linestyles=[styles[a].dashes and "--" or "-" for a in arms], markersize=4, ax=ax)  # fmt: skip
        ax.axhline(0.0, color=REFERENCE, lw=0.8, ls="--")
        ax.set_title("at each arm's mid-training")
        ax.set(ylabel=name, xlabel="sequence length L")
        handles, labels = ax.get_legend_handles_labels()
        ax.get_legend().remove()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, frameon=False)  # one legend, off the data
    save(fig, path)
