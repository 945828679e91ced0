"""Figures of the channel stage: channel energies over training, and the condition-test table."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from lostmid.analysis.conditions import REGIONS, TESTS
from lostmid.plots.common import nearest_delta, seeds_text
from lostmid.plots.style import PALETTE, save

CHANNEL_LABELS = {"res": "residual $J_{res}$", "cone": "causal cone $J_{cone}$", "loc": "local $J_{loc}$"}
RUN_GROUP = ["variant", "L", "depth"]


def channel_energies(channels: pd.DataFrame, cross_terms: pd.DataFrame, path, delta: float) -> None:
    """Stacked channel energies J_res, J_cone, J_loc per region (columns) over training steps,
    one row of panels per (variant, L, depth), means over seeds, at the delta closest to ``delta``.

    The cross term Xi(B) is a hatched bar (below zero when negative) and the black line is
    m_B = sum J + Xi, the regional mean density.
    """
    delta = nearest_delta(channels, delta)
    J = channels[np.isclose(channels["delta"], delta)]
    seeds = J.groupby(RUN_GROUP).seed.nunique()
    J = J.groupby(RUN_GROUP + ["step", "region", "channel"], as_index=False)["J"].mean()
    xi = cross_terms[np.isclose(cross_terms["delta"], delta)]
    xi = xi.groupby(RUN_GROUP + ["seed", "step", "region"], as_index=False)["xi"].sum()  # Xi = sum over pairs
    xi = xi.groupby(RUN_GROUP + ["step", "region"], as_index=False)["xi"].mean()
    groups = J[RUN_GROUP].drop_duplicates().sort_values(RUN_GROUP).itertuples(index=False)
    groups = list(groups)
    colors = dict(zip(CHANNEL_LABELS, PALETTE[:3]))
    fig, axes = plt.subplots(len(groups), 3, figsize=(10, 2.6 * len(groups)), squeeze=False, sharey="row")
    for row, group in enumerate(groups):
        selector = dict(zip(RUN_GROUP, group))
        for col, region in enumerate(REGIONS):
            ax = axes[row, col]
            part = J.loc[(J[RUN_GROUP] == pd.Series(selector)).all(axis=1) & (J["region"] == region)]
            wide = (
                part.pivot(index="step", columns="channel", values="J")
                .reindex(columns=list(CHANNEL_LABELS))
                .fillna(0.0)
            )
            steps = wide.index.to_numpy()
            x = np.arange(len(steps))
            bottom = np.zeros(len(steps))
            for channel, label in CHANNEL_LABELS.items():
                ax.bar(x, wide[channel], bottom=bottom, color=colors[channel], label=label, width=0.7)
                bottom += wide[channel].to_numpy()
            cross = xi.loc[(xi[RUN_GROUP] == pd.Series(selector)).all(axis=1) & (xi["region"] == region)].set_index(
                "step"
            )["xi"]
            cross = cross.reindex(steps).fillna(0.0).to_numpy()
            # Positive cross terms stack on top; negative ones hang below zero.
            ax.bar(
                x,
                cross,
                bottom=np.where(cross > 0, bottom, 0.0),
                color="none",
                edgecolor="grey",
                hatch="///",
                width=0.7,
                label=r"cross terms $\Xi$",
            )
            ax.plot(x, bottom + cross, "k.-", label=r"$\bar m_B = \sum J + \Xi$")
            ax.axhline(0, color="black", lw=0.6)
            ax.set_xticks(x, [str(s) for s in steps], rotation=45 if len(steps) > 6 else 0)
            n = seeds_text(seeds[tuple(group)])
            title = f"{selector['variant']} L={selector['L']} M={selector['depth']}: {region} ({n})"
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("training step" if row == len(groups) - 1 else "")
            if col == 0:
                ax.set_ylabel("normalized energy")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.suptitle(f"channel energies per region (delta = {delta:g}, mean over seeds; no interval)")
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", ncol=5, bbox_to_anchor=(0.5, 0.0), frameon=False)
    save(fig, path)


def condition_summary(conditions: pd.DataFrame) -> pd.DataFrame:
    """Per test and delta: rows, how often the test holds, its conclusion holds, it is conservative
    (a sufficient test failing while its conclusion holds; for an equivalence: disagreeing), and
    soundness violations (must be 0)."""
    frame = conditions.assign(conservative=~conditions["holds"] & conditions["conclusion_holds"])
    if "violation" not in frame:  # written before the column, by a stage that refused any violation
        frame = frame.assign(violation=False)
    summary = frame.groupby(["test", "delta"], as_index=False).agg(
        n=("holds", "size"),
        holds=("holds", "sum"),
        conclusion=("conclusion_holds", "sum"),
        conservative=("conservative", "sum"),
        violations=("violation", "sum"),
    )
    summary["test"] = pd.Categorical(
        summary["test"], categories=[t for t in TESTS if t in set(summary["test"])], ordered=True
    )
    return summary.sort_values(["test", "delta"]).reset_index(drop=True)


def conditions_table(conditions: pd.DataFrame, path) -> None:
    """A table figure over every run and checkpoint: for each test and delta, the share of rows
    where the test holds, where its conclusion holds, where it is conservative (fails while the
    conclusion holds; share of the rows whose conclusion holds) and the violations (must be 0)."""
    summary = condition_summary(conditions)
    columns = ["holds", "conclusion", "conservative", "violations"]
    labels = [f"{t} (δ={d:g})" for t, d in zip(summary["test"], summary["delta"])]
    denominators = {
        "holds": summary["n"],
        "conclusion": summary["n"],
        "conservative": summary["conclusion"],
        "violations": summary["n"],
    }
    shares = pd.DataFrame({c: summary[c] / denominators[c].where(denominators[c] > 0) for c in columns})
    shares.index = labels
    notes = np.array(
        [[f"{int(summary[c][i])}/{int(denominators[c][i])}" for c in columns] for i in range(len(summary))],
        dtype=object,
    )
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(summary) + 1.6))
    sns.heatmap(
        shares, annot=notes, fmt="", cmap="Blues", vmin=0, vmax=1, cbar_kws={"label": "share"}, ax=ax, linewidths=0.5
    )
    ax.set_xticklabels(
        ["test holds", "conclusion holds", "conservative\n(fails, conclusion holds)", "soundness\nviolations"],
        rotation=0,
    )
    ax.set_ylabel("")
    ax.set_title(
        f"condition tests over {conditions.groupby(['variant', 'L', 'depth', 'seed', 'step']).ngroups} checkpoints"
        " (exact_*: equivalences, the rest sufficient)",
        fontsize=9,
    )
    save(fig, path)
