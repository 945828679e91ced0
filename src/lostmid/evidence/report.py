"""The evidence table in words for the documentation: the headline verdicts (one line per claim
family, its rows counted by verdict and its contradicted rows named) and the counts of verdicts.
``lostmid results-page`` writes them into docs/results.md; the README quotes them."""

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


def family(source: str) -> str:
    """The claim family a row's source belongs to in the headline: a letter of the blog's list
    (``blog (c): the fit ...`` -> ``blog (c)``), the paper's validation protocol (section 4.5), or
    the paper's other claims (the mechanism, Algorithms 1-3 and section 4's simulations)."""
    if source.startswith("blog"):
        return source[: source.index(")") + 1] if ")" in source else source
    if "4.5" in source or "validation" in source:
        return "the paper's validation (section 4.5)"
    return "the paper's other claims"


def short_setting(setting: str) -> str:
    """A row's setting up to its checkpoint: the variant(s), L, depth and residual path."""
    return setting.split(", checkpoint")[0]


def headline(table: pd.DataFrame) -> str:
    """Markdown, one line per claim family (``family``, in the table's order): its rows counted by
    verdict and each contradicted row named; then the whole table counted."""
    lines = []
    for name, rows in table.groupby(table.source.map(family), sort=False):
        contradicted = rows[rows.verdict == "contradicted"]
        named = "; ".join(f"`{row.claim}` ({short_setting(row.setting)})" for row in contradicted.itertuples())
        lines.append(
            f"- {name}: {len(rows)} row{'s' if len(rows) > 1 else ''}, {verdict_counts(rows)}"
            + (f"; contradicted: {named}" if named else "")
        )
    lines.append(f"- every row: {verdict_counts(table)} of {len(table)}")
    return "\n".join(lines) + "\n"
