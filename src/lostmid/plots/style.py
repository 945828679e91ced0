"""The house style of every figure, declared once: drawn at the width it is printed (one column, 3.3 in,
or two, 6.8 in), its text at least 7 pt at that size; one colour, line style and marker per arm (the
same in every figure; colour-blind safe and told apart in greyscale by the line and the marker); one
``save`` that writes each figure as PNG (the report's) and PDF (a paper's) and refuses a figure larger
than a page allows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import seaborn as sns

from lostmid import io

# Printed widths (inches) and the largest figure a page takes.
ONE_COLUMN = 3.3
TWO_COLUMNS = 6.8
MAX_WIDTH, MAX_HEIGHT = 7.0, 9.0
MIN_FONT = 7.0  # points, at the printed size
FONT = 8.0  # titles and axis labels; ticks and legends MIN_FONT

sns.set_theme(style="whitegrid", context="paper", palette="colorblind")
plt.rcParams.update(
    {
        "font.size": FONT,
        "axes.titlesize": FONT,
        "axes.labelsize": FONT,
        "figure.titlesize": FONT,
        "figure.labelsize": FONT,
        "xtick.labelsize": MIN_FONT,
        "ytick.labelsize": MIN_FONT,
        "legend.fontsize": MIN_FONT,
        "legend.title_fontsize": MIN_FONT,
        "lines.linewidth": 1.2,
        "lines.markersize": 4,
        "savefig.bbox": "tight",
        "savefig.pad_inches": 0.03,
    }
)

PALETTE = sns.color_palette("colorblind")
DPI = 200
VECTOR = ".pdf"


@dataclass(frozen=True)
class ArmStyle:
    """How one arm is drawn: its colour, its line's dashes (an on-off sequence in points; () solid) and marker."""

    color: tuple
    dashes: tuple
    marker: str

    def line(self) -> dict:
        """Keyword arguments of ``Axes.plot``."""
        return {"color": self.color, "dashes": self.dashes or (None, None), "marker": self.marker}


SOLID, DASHED, DOTTED, DASH_DOT, LONG_DASH, DASH_DOT_DOT = (
    (),
    (4, 2),
    (1, 1.5),
    (4, 1.5, 1, 1.5),
    (7, 2),
    (5, 1.5, 1, 1.5, 1, 1.5),
)

# Every arm of the config, each its own colour, line and marker. An ablation (balance_b03) is its family's
# colour lightened with its own line; any other name gets, in the order a figure meets it, the first
# colour and line no named arm of that figure uses.
ARM_STYLES = {
    "baseline": ArmStyle(PALETTE[0], SOLID, "o"),
    "debiased": ArmStyle(PALETTE[1], DASHED, "s"),
    "debiased_literal": ArmStyle(PALETTE[2], DOTTED, "^"),
    "baseline_short": ArmStyle(PALETTE[9], DASH_DOT, "v"),
    "debiased_short": ArmStyle(PALETTE[3], LONG_DASH, "D"),
    "baseline_nores": ArmStyle(PALETTE[4], DASH_DOT_DOT, "P"),
    "debiased_nores": ArmStyle(PALETTE[8], (2, 2), "X"),
    "balance": ArmStyle(PALETTE[6], (6, 1.5, 1.5, 1.5), "*"),
    "reweight": ArmStyle(PALETTE[5], (3, 1), "h"),
    "observability": ArmStyle((0.13, 0.13, 0.13), (1, 3), "p"),
}
SPARE_COLORS = [PALETTE[i] for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)] + [(0.13, 0.13, 0.13)]
SPARE_DASHES = [SOLID, DASHED, DOTTED, DASH_DOT, LONG_DASH, DASH_DOT_DOT, (2, 2), (3, 1), (1, 3)]
SPARE_MARKERS = ["o", "s", "^", "v", "D", "P", "X", "h", "*", "p"]
ABLATION_MARKERS = ["<", ">", "d", "8"]
REFERENCE = "0.35"  # chance, no-needle, m = 1, zero: a grey dashed line


def _lighten(color, amount: float):
    """``color`` mixed with white by ``amount`` (0: itself, 1: white)."""
    rgb = mcolors.to_rgb(color)
    return tuple(c + (1 - c) * amount for c in rgb)


def _named(variant: str) -> ArmStyle | None:
    if variant in ARM_STYLES:
        return ARM_STYLES[variant]
    family = next((f for f in sorted(ARM_STYLES, key=len, reverse=True) if variant.startswith(f + "_")), None)
    if family is None:
        return None
    k = sum(map(ord, variant))  # a stable choice among the family's ablations
    base = ARM_STYLES[family]
    return ArmStyle(_lighten(base.color, 0.35), SPARE_DASHES[k % len(SPARE_DASHES)], ABLATION_MARKERS[k % 4])


def arm_styles(variants) -> dict[str, ArmStyle]:
    """``{arm: ArmStyle}`` for the arms a figure draws (any hashable names, in order): a config arm in its own
    style; the others in the colours and lines the figure's named arms leave free, in the order given."""
    variants = list(dict.fromkeys(variants))
    styles = {v: _named(str(v)) for v in variants}
    # What the named arms leave free; where they take it all, lighter colours and further lines and markers.
    colors = [c for c in SPARE_COLORS if c not in {s.color for s in styles.values() if s}] or [
        _lighten(c, 0.55) for c in SPARE_COLORS
    ]
    dashes = [d for d in SPARE_DASHES if d not in {s.dashes for s in styles.values() if s}] or [
        (8, 2, 2, 2),
        (2, 4),
        (8, 4),
    ]
    markers = [m for m in SPARE_MARKERS if m not in {s.marker for s in styles.values() if s}] or ["H", "+", "1", "2"]
    free = 0
    for v in variants:
        if styles[v] is None:
            styles[v] = ArmStyle(colors[free % len(colors)], dashes[free % len(dashes)], markers[free % len(markers)])
            free += 1
    return styles


def ordered_styles(n: int) -> list[ArmStyle]:
    """``n`` styles for an ordered quantity (depth, step, n): a sequential palette, each with its own line and
    marker, so that neighbours differ in greyscale too."""
    colors = sns.color_palette("viridis", n) if n > 1 else [PALETTE[0]]
    return [
        ArmStyle(tuple(c), SPARE_DASHES[i % len(SPARE_DASHES)], SPARE_MARKERS[i % len(SPARE_MARKERS)])
        for i, c in enumerate(colors)
    ]


def legend_columns(labels, wanted: int, width: float = TWO_COLUMNS) -> int:
    """At most ``wanted`` legend columns, as many as fit ``width`` inches with the longest label at MIN_FONT."""
    longest = max((len(str(label)) for label in labels), default=1)
    per_column = (longest + 5) * MIN_FONT * 0.55 / 72  # inches: the label, its handle and the gap
    return max(1, min(wanted, int(width / per_column)))


def figure(columns: int = 2, height: float = 2.6, **kwargs):
    """``plt.subplots`` at a printed width (1: one column, 2: two) and ``height`` inches, constrained layout."""
    if height > MAX_HEIGHT:
        raise ValueError(f"a figure {height:.2g} in tall does not fit a page ({MAX_HEIGHT:g} in)")
    width = ONE_COLUMN if columns == 1 else TWO_COLUMNS
    return plt.subplots(figsize=(width, height), layout="constrained", **kwargs)


def message(path, text: str) -> None:
    """A one-column figure that says, in words, why there is nothing to draw (never an empty panel)."""
    fig, ax = figure(1, 0.8)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    save(fig, path)


def viewer_html(png) -> str:
    """A page that shows a PNG at the viewer's width, from its top (Snakemake's report centres a bare image in a
    screen-high box, so the top of one taller than the screen cannot be scrolled to; a page in its frame
    scrolls). The image travels inside the page (base64)."""
    import base64

    data = base64.b64encode(Path(png).read_bytes()).decode()
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body style='margin:0'>"
        f"<img src='data:image/png;base64,{data}' alt='{Path(png).stem}' style='width:100%;max-width:1400px'>"
        "</body></html>\n"
    )


def write_viewer(png, path) -> None:
    """``viewer_html`` of ``png``, written atomically at ``path``."""
    io.write_text(viewer_html(png), path)


def vector_path(path) -> Path:
    """The vector file written beside a figure's PNG."""
    return Path(path).with_suffix(VECTOR)


def printed_size(fig) -> tuple[float, float]:
    """(width, height) in inches of the figure as saved (its tight bounding box)."""
    fig.draw_without_rendering()  # lays the figure out (constrained layout) as saving it does
    box = fig.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"])
    return box.width, box.height


def save(grid, path) -> None:
    """Write a figure (or a seaborn grid's figure) atomically as PNG at ``path`` and as PDF beside it, and close
    it; a figure larger than MAX_WIDTH x MAX_HEIGHT is a ValueError naming its size."""
    fig = grid.figure if hasattr(grid, "figure") else grid
    width, height = printed_size(fig)
    if width > MAX_WIDTH + 0.05 or height > MAX_HEIGHT + 0.05:
        plt.close(fig)
        raise ValueError(
            f"{Path(path).name}: {width:.1f} x {height:.1f} in, larger than a page ({MAX_WIDTH:g} x {MAX_HEIGHT:g})"
        )
    for target in (Path(path), vector_path(path)):
        io.save_figure(fig, target, dpi=DPI)
    plt.close(fig)
