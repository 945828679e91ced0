"""A row of the evidence table in words: its estimate with its interval, its verdict with why it has none
of its own, a Markdown cell; the pages that print the table are lostmid.pages.evidence."""

from __future__ import annotations

import math

import pandas as pd

from lostmid.evidence.inputs import DECIDED, STATUS_WORDS


def cell(text) -> str:
    """``text`` as one cell of a Markdown table (its pipes escaped)."""
    return str(text).replace("|", "\\|")


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


def no_verdict(row) -> str:
    """Why the row has no verdict of its own, in words as its method begins ("" for a decided row): a claim not
    evaluated on the run, one measured but not decidable, one with fewer replicates than the run's plan
    (evidence.min_seeds, evidence.min_windows)."""
    return STATUS_WORDS.get(row.status, "")


def with_status(table: pd.DataFrame) -> pd.DataFrame:
    """An evidence table with its ``status`` column; one written before the column existed gets it from the
    words its method began with then (the one place those words are read back: old tables only)."""
    if "status" in table:
        return table
    words = {prefix: status for status, prefix in STATUS_WORDS.items()}
    method = table["method"].astype(str)
    status = pd.Series(DECIDED, index=table.index)
    for prefix, value in words.items():
        status[method.str.match(prefix)] = value
    return table.assign(status=status)


def verdict_words(row) -> str:
    """The verdict, with "(not evaluable)" or "(not run)" when the row has none of its own."""
    return row.verdict + (f" ({no_verdict(row)})" if no_verdict(row) else "")
