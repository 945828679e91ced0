"""The second study's failure-by-position curves (study/plan2.yaml, secondary failure_by_position_curves; the
blog's own figure): each arm's failure rate by flag position at each named step, with a 95% band over the arm's
units: its seeds for a baseline, its fits of B for a fix arm (each fit's seeds averaged first, seeds nested in
fits). A panel per step and residual setting; each arm in the house style (lostmid.plots.style)."""

from __future__ import annotations

import pandas as pd

from lostmid.plots.common import RATE_LIMITS, curve, draw_curve, label_bottoms, panels
from lostmid.plots.style import arm_styles, message, save
from lostmid.plots.training import P_FLAG


def unit_rates(rows: pd.DataFrame, per_fit: bool) -> pd.DataFrame:
    """(p, failure_rate) per unit of an arm at one step: per seed, or per fit (the mean over its seeds)."""
    rates = rows.assign(failure_rate=rows.failures / rows.n)
    if per_fit:
        rates = rates.groupby(["variant", "p"], as_index=False).failure_rate.mean()
    return rates


def failure_curves(failure: pd.DataFrame, arms: dict, steps, path) -> None:
    """Draw ``arms`` (the plan's ``run.arms`` with their ``variants``; an arm with ``fits`` is a fix arm, its band
    over fits) at each of ``steps``, a panel per step (rows) and residual setting (columns), and save at ``path``."""
    drawn = {
        (step, bool(arm.get("residual", True)), name): failure[
            failure.variant.isin(arm["variants"]) & (failure.step == step)
        ]
        for step in steps
        for name, arm in arms.items()
    }
    drawn = {key: rows for key, rows in drawn.items() if not rows.empty}
    if not drawn:
        message(path, f"no failure rows at steps {list(steps)}")
        return
    settings = list(dict.fromkeys((step, residual) for step, residual, _ in drawn))
    styles = arm_styles(arms)
    fig, axes = panels(len(settings), ncols=2, panel_height=2.2, sharey=True)
    for ax, (step, residual) in zip(axes, settings):
        for (at, res, name), rows in drawn.items():
            if (at, res) != (step, residual):
                continue
            per_fit = "fits" in arms[name]
            units = rows.variant.nunique() if per_fit else rows.seed.nunique()
            label = f"{name} ({units} {'fits' if per_fit else 'seeds'})"
            draw_curve(ax, curve(unit_rates(rows, per_fit), "p", "failure_rate", "rate"), "p", styles[name], label)
        ax.set(ylim=RATE_LIMITS, ylabel="failure rate")
        ax.set_title(f"{'with' if residual else 'without'} the residual path, step {step}")
        ax.legend(frameon=False, loc="upper left")
    label_bottoms(axes, 2, P_FLAG)
    save(fig, path)
