"""The evidence table in words for the documentation: the headline verdicts (one line per row of
each claim of the blog in the blog's own setting: the L and depth of its first setting) and the
counts of verdicts. ``lostmid results-page`` writes them into docs/results.md; the README quotes them."""

from __future__ import annotations

import math

import pandas as pd


def estimate_words(row) -> str:
    """``estimate [ci_low, ci_high]`` to three significant digits, ``–`` when not computed."""
    if math.isnan(row.estimate):
        return "–"
    if math.isnan(row.ci_low):
        return f"{row.estimate:.3g}"
    return f"{row.estimate:.3g} [{row.ci_low:.3g}, {row.ci_high:.3g}]"


def verdict_counts(table: pd.DataFrame) -> str:
    counts = table.verdict.value_counts()
    return ", ".join(f"{counts[verdict]} {verdict}" for verdict in sorted(counts.index))


def headline(table: pd.DataFrame) -> str:
    """Markdown: each claim of the blog in the blog's own setting (the L and depth of the first setting
    the claim lists), one line per row there (so every reading of the fix at that shape), then the
    paper's claims counted by verdict, then the whole table counted."""
    blog = table[table.source.str.startswith("blog")]
    paper = table[~table.index.isin(blog.index)]
    lines = []
    for claim, rows in blog.groupby("claim", sort=False):
        shape = rows[["L", "depth"]].astype("float64").fillna(-1)
        own = rows[(shape == shape.iloc[0]).all(axis=1)]
        others = len(rows) - len(own)
        more = f" (and {others} other setting{'s' if others > 1 else ''})" if others else ""
        for i, row in enumerate(own.itertuples(index=False)):
            seeds = f", {int(row.n_seeds)} seed{'s' if row.n_seeds > 1 else ''}" if row.n_seeds else ""
            why = " (not evaluable)" if str(getattr(row, "method", "")).startswith("not evaluable") else ""
            lines.append(
                f"- {row.source} `{claim}` — {row.setting}: {estimate_words(row)}{seeds} → **{row.verdict}**{why}"
                + (more if i == len(own) - 1 else "")
            )
    if not paper.empty:
        lines.append(f"- the paper's {paper.claim.nunique()} claims, {len(paper)} rows: {verdict_counts(paper)}")
    lines.append(f"- every row: {verdict_counts(table)} of {len(table)}")
    return "\n".join(lines) + "\n"
