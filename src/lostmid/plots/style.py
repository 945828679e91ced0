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

# The arms' families and their colours, distinct among the arms that share a figure (the blog's setting:
# the baseline, the two fits, the residual-free pair; the remedies: the short baseline and fix and
# Algorithms 1-3). A variant belongs to the first family (in this order) its name starts with; the
# short schedule is the same arm (debiased_short is debiased's colour), an ablation (balance_b03) its
# family's colour lightened; a name of no family is grey.
FAMILIES = {
    "baseline_nores": PALETTE[9],
    "debiased_nores": PALETTE[8],
    "debiased_literal": PALETTE[2],
    "baseline": PALETTE[0],
    "debiased": PALETTE[1],
    "balance": PALETTE[4],
    "reweight": PALETTE[5],
    "observability": (0.13, 0.13, 0.13),
}
OTHER = PALETTE[7]
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
    and close it. The PDF carries no creation date, so that the same figure is the same file."""
    fig = grid.figure if hasattr(grid, "figure") else grid
    io.save_figure(fig, Path(path), dpi=DPI)
    io.save_figure(fig, vector_path(path), dpi=DPI, metadata={"CreationDate": None})
    plt.close(fig)
