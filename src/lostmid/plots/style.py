"""The house style of every figure, declared once: seaborn's paper context, the colour-blind-safe
palette, one colour per arm (the same in every figure) and one ``save`` that writes each figure as
PNG (the report's) and PDF (a paper's)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import seaborn as sns

from lostmid import io

sns.set_theme(style="whitegrid", context="paper", palette="colorblind")
plt.rcParams.update({"savefig.bbox": "tight", "savefig.pad_inches": 0.05, "axes.titlesize": 9, "axes.labelsize": 9})

PALETTE = sns.color_palette("colorblind")
PAGE_WIDTH = 6.5  # inches: a figure this wide is read at a page's width without scaling its text down
DPI = 150
VECTOR = ".pdf"

# The arms' families and their colours. A variant belongs to the family its name starts with (longest
# prefix first): balance_b03 is a balance arm, debiased_short a debiased one. An ablation (a name longer
# than its family's) is its family's colour, lightened; a name of no family is grey.
FAMILIES = {
    "baseline_nores": PALETTE[9],
    "debiased_nores": PALETTE[8],
    "debiased_literal": PALETTE[3],
    "baseline": PALETTE[0],
    "debiased": PALETTE[1],
    "balance": PALETTE[2],
    "reweight": PALETTE[4],
    "observability": PALETTE[5],
}
OTHER = PALETTE[7]
# The schedules of a family share its colour: the short schedule is the same arm on the remedies' steps.
SAME_ARM = ("_short",)


def _lighten(color, amount: float):
    """``color`` mixed with white by ``amount`` (0: itself, 1: white)."""
    rgb = mcolors.to_rgb(color)
    return tuple(c + (1 - c) * amount for c in rgb)


def arm_color(variant: str):
    """The colour of an arm (a variant name) in every figure."""
    for family, color in FAMILIES.items():
        if variant == family or any(variant == family + suffix for suffix in SAME_ARM):
            return color
        if variant.startswith(family + "_"):
            # Ablations of one family are told apart by a stable shade of its colour.
            shade = 0.3 + 0.25 * (sum(map(ord, variant)) % 3) / 2
            return _lighten(color, shade)
    return OTHER


def arm_palette(variants) -> dict:
    """``{variant: colour}`` for seaborn's ``palette=`` argument."""
    return {v: arm_color(v) for v in variants}


def vector_path(path) -> Path:
    """The vector file written beside a figure's PNG."""
    return Path(path).with_suffix(VECTOR)


def save(grid, path) -> None:
    """Write a figure (or a seaborn grid's figure) atomically as PNG at ``path`` and as PDF beside it,
    and close it."""
    fig = grid.figure if hasattr(grid, "figure") else grid
    for target in (Path(path), vector_path(path)):
        io.save_figure(fig, target, dpi=DPI)
    plt.close(fig)
