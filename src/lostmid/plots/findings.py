"""The findings' figure: one forest plot of the study's primaries, each against the source's size.

``finding_figure(rows, path)`` is what docs/findings.md embeds. A row is a primary endpoint, a mapping (or a
DataFrame row) with the keys

    name         the endpoint, as the page names it
    estimate     the primary estimate (NaN or None: not yet run)
    low, high    its interval (NaN: none)
    source_size  the size the source's words imply, signed, on the estimate's axis (a decrease the source
                 predicts is negative)
    unit         the estimate's unit (the page's table prints it; the figure's axis is the source's size)
    outcome      the answer's words, as its sentence opens (lostmid.study.reading.answer); for a primary
                 without an estimate, why (``not yet run``)

Endpoints of different units share one axis by being read as the study reads them: each interval divided by
the source's size, so that 0 is no effect and 1 the source's size for every row, in the source's direction.
The colour and marker of a row are those of its answer's words (``ANSWER_STYLES``, keyed by the very words the
sentence prints: a word the table lacks is an error, never a grey default); the raw estimate, interval and
unit are printed under the row's name.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping

import pandas as pd
from matplotlib.lines import Line2D

from lostmid.plots.style import PALETTE, REFERENCE, figure, save
from lostmid.stats.outcomes import AT_LEAST, INCONCLUSIVE, NO_EFFECT, SMALLER
from lostmid.study.reading import ANSWERS, IN_DIRECTION, OTHER_SIDE

# The answers' words (the sentences' openings) and how their rows are drawn: colour-blind safe, and a marker
# each, so that the rows read in greyscale too. A word "... (on the other side of 0)" is drawn as OTHER_SIDE.
ANSWER_STYLES = {
    ANSWERS[AT_LEAST]: (PALETTE[2], "o"),
    ANSWERS[SMALLER]: (PALETTE[0], "s"),
    IN_DIRECTION: (PALETTE[9], "D"),
    ANSWERS[NO_EFFECT]: (PALETTE[3], "v"),
    OTHER_SIDE.strip(" ()"): (PALETTE[4], "X"),
    ANSWERS[INCONCLUSIVE]: ((0.45, 0.45, 0.45), "^"),
}
NOT_RUN = "0.6"
KEYS = ("name", "estimate", "low", "high", "source_size", "unit", "outcome")
ROW_HEIGHT = 0.36  # inches per primary: two lines of 7 pt and a gap


def answer_style(words: str) -> tuple:
    """(colour, marker, legend words) of an answer's words; words that are no answer are a ValueError."""
    if words.endswith(OTHER_SIDE):
        words = OTHER_SIDE.strip(" ()")
    if words not in ANSWER_STYLES:
        raise ValueError(f"finding_figure: {words!r} is not an answer's words (lostmid.study.reading.answer)")
    return (*ANSWER_STYLES[words], words)


def _number(value) -> float:
    return math.nan if value is None else float(value)


def _rows(rows) -> list[dict]:
    """The endpoints as dicts with every key; a row that lacks one is a ValueError naming it."""
    records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
    if not records:
        raise ValueError("finding_figure: no endpoints to draw")
    out = []
    for record in records:
        if not isinstance(record, Mapping):
            raise ValueError(f"finding_figure: an endpoint must be a mapping, not {type(record).__name__}")
        missing = [key for key in KEYS if key not in record]
        if missing:
            raise ValueError(f"finding_figure: endpoint {record.get('name', '?')!r} lacks {missing}")
        row = dict(record)
        for key in ("estimate", "low", "high", "source_size"):
            row[key] = _number(row[key])
        if not row["source_size"] or not math.isfinite(row["source_size"]):
            raise ValueError(f"finding_figure: endpoint {row['name']!r} has no source's size to be read against")
        out.append(row)
    return out


def relative(row: dict) -> tuple[float, float, float]:
    """(estimate, low, high) of a row as fractions of the source's size, in the source's direction."""
    size = row["source_size"]
    values = sorted((row["low"] / size, row["high"] / size))
    return row["estimate"] / size, *values


def _label(row: dict) -> str:
    """The endpoint's name (its level, in brackets, moved to the second line) over its estimate and interval in
    its own units, or over why it has none."""
    name, _, level = row["name"].partition(" (")
    if not math.isfinite(row["estimate"]):
        return name + "\n" + "\n".join(textwrap.wrap(row["outcome"], 44))
    numbers = f"{row['estimate']:.3g} [{row['low']:.3g}, {row['high']:.3g}]" + (f" ({level}" if level else "")
    return f"{name}\n{numbers}"


def finding_figure(rows, path) -> None:
    """Draw every primary (``rows``: mappings or a DataFrame with the module's KEYS) as one forest plot at two
    columns' width, each interval as a fraction of the source's size (0: none; 1: the source's size, a black
    line), coloured by its answer's words, and save it as PNG at ``path`` and PDF beside it."""
    endpoints = _rows(rows)
    fig, ax = figure(2, ROW_HEIGHT * len(endpoints) + 1.0)
    ys = range(len(endpoints) - 1, -1, -1)
    shown = {}
    values = [0.0, 1.0]
    for y, row in zip(ys, endpoints):
        if not math.isfinite(row["estimate"]):
            continue  # nothing to draw: its label says why
        color, marker, words = answer_style(row["outcome"])
        estimate, low, high = relative(row)
        if math.isfinite(low) and math.isfinite(high):
            ax.plot([low, high], [y, y], color=color, lw=2.5, solid_capstyle="butt")
            values += [low, high]
        ax.plot([estimate], [y], marker=marker, color=color, mec="black", mew=0.5, ms=6, ls="", label=words)
        values.append(estimate)
        shown[words] = (color, marker)
    ax.axvline(0.0, color=REFERENCE, lw=0.8, ls="--")
    ax.axvline(1.0, color="black", lw=1.0)
    span = max(values) - min(values)
    ax.set_xlim(min(values) - 0.06 * span, max(values) + 0.06 * span)
    ax.set_yticks(list(ys), [_label(row) for row in endpoints])
    ax.set_ylim(-0.6, len(endpoints) - 0.4)
    ax.grid(False, axis="y")
    ax.set_xlabel("estimate / the source's size (0: no effect; 1: the source's size, in its direction)")
    handles = [Line2D([], [], color=c, marker=m, mec="black", mew=0.5, ls="", label=w) for w, (c, m) in shown.items()]
    handles.append(Line2D([], [], color="black", lw=1.0, label="the source's size"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False)
    save(fig, path)


def arm_failure(failure: pd.DataFrame, arms: dict, step: int, path) -> None:
    """The blog's figure for the study's flag-task arms: failure rate by flag position at ``step`` (the plan's
    fixed mid-training step), each arm (``arms``: the plan's ``run.arms``, each with its ``variants`` and
    ``residual``) pooled over its variants' seeds, mean with a 95% band clipped to [0, 1], each in its own colour,
    line and marker; a panel per residual setting. An arm without rows at ``step`` is left out of the legend."""
    from lostmid.plots.common import RATE_LIMITS, curve, draw_curve, panels, seeds_text
    from lostmid.plots.style import arm_styles
    from lostmid.plots.training import P_FLAG

    at = failure[failure.step == step]
    if "failure_rate" not in at:  # a record's table may carry the counts only
        at = at.assign(failure_rate=at.failures / at.n)
    drawn = {name: at[at.variant.isin(arm["variants"])] for name, arm in arms.items()}
    drawn = {name: rows for name, rows in drawn.items() if not rows.empty}
    settings = list(dict.fromkeys(bool(arms[name].get("residual", True)) for name in drawn))
    if not drawn:
        from lostmid.plots.style import message

        message(path, f"no failure rows at step {step}")
        return
    styles = arm_styles(drawn)
    fig, axes = panels(len(settings), ncols=2, panel_height=2.3, sharey=True)
    for ax, residual in zip(axes, settings):
        for name, rows in drawn.items():
            if bool(arms[name].get("residual", True)) == residual:
                label = f"{name} ({seeds_text(rows.groupby(['variant', 'seed']).ngroups)})"  # runs pooled
                draw_curve(ax, curve(rows, "p", "failure_rate", "rate"), "p", styles[name], label=label)
        ax.set(ylim=RATE_LIMITS, xlabel=P_FLAG, ylabel="failure rate", title=f"{'with' if residual else 'without'}"
               f" the residual path, step {step}")  # fmt: skip
        ax.legend(frameon=False, loc="upper left")
    save(fig, path)
