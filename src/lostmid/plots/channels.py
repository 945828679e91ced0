"""Figures of the channel stage: channel energies over training. (The condition tests are a table: the
report's summary page ``conditions``, lostmid.catalogue.PAGES.)"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lostmid.analysis.conditions import REGIONS
from lostmid.plots.common import nearest_delta, seeds_text
from lostmid.plots.style import MAX_HEIGHT, PALETTE, figure, save

CHANNEL_LABELS = {"res": "residual $J_{res}$", "cone": "causal cone $J_{cone}$", "loc": "local $J_{loc}$"}
CHANNEL_HATCHES = {"res": "", "cone": "....", "loc": "xxx"}  # told apart in greyscale too
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
    row_height = min(1.5, (MAX_HEIGHT - 1.4) / len(groups))  # a small multiple: one row per arm, on one page
    fig, axes = figure(2, row_height * len(groups) + 1.2, nrows=len(groups), ncols=3, squeeze=False, sharey="row")
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
                ax.bar(x, wide[channel], bottom=bottom, color=colors[channel], hatch=CHANNEL_HATCHES[channel],
                       edgecolor="white", lw=0.3, label=label, width=0.7)  # fmt: skip
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
            ax.set_xticks(x, [str(s) for s in steps], rotation=90 if len(steps) > 4 else 0)
            if row == 0:
                ax.set_title(region)
            if row < len(groups) - 1:
                ax.tick_params(labelbottom=False)
            else:
                ax.set_xlabel("training step")
            if col == 0:
                n = seeds_text(seeds[tuple(group)])
                ax.set_ylabel(f"{selector['variant']}\nL={selector['L']}, M={selector['depth']}\n({n})")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.suptitle(f"normalized channel energy per region (delta = {delta:g}; mean over seeds, no interval)")
    fig.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False)
    save(fig, path)
