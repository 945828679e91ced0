"""The evidence table as the report shows it: a table, not a plot (one row per claim and setting, with its
estimate, interval, seeds and verdict, grouped by family), written as one HTML page. The study's primaries are
drawn as a forest plot by lostmid.plots.findings."""

from __future__ import annotations

import html

import pandas as pd

from lostmid import io

COLUMNS = {
    "claim": "claim",
    "setting": "setting",
    "statistic": "statistic (unit)",
    "estimate": "estimate [interval]",
    "n_seeds": "seeds",
    "verdict": "verdict",
    "adjusted_verdict": "family-wise",
}
STYLE = (
    "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;font-size:13px}"
    "th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f0f0f0}"
    "td.supported{background:#e3f2e3}td.contradicted{background:#f8e0dc}td.inconclusive{color:#555}"
)


def table_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The report's columns of an evidence table (``COLUMNS``), in words, in its order."""
    from lostmid.evidence.report import estimate_words, verdict_words, with_status

    table = with_status(table)

    def column(name, default) -> pd.Series:  # a table written before the column existed: its default
        return table[name] if name in table else pd.Series(default, index=table.index)

    return pd.DataFrame(
        {
            "family": column("family", "").fillna("").replace("", "(none)"),
            "claim": [c + (" (check)" if k == "check" else "") for c, k in zip(table.claim, column("kind", "claim"))],
            "setting": table.setting,
            "statistic": [f"{s} ({u})" for s, u in zip(table.statistic, table.unit)],
            "estimate": [estimate_words(row) for row in table.itertuples(index=False)],
            "n_seeds": [str(int(n)) if n else "–" for n in table.n_seeds.fillna(0)],
            "verdict": [verdict_words(row) for row in table.itertuples(index=False)],
            "adjusted_verdict": [
                verdict if size else "–"
                for verdict, size in zip(column("adjusted_verdict", ""), column("family_size", 0).fillna(0))
            ],
        }
    )


def page_html(table: pd.DataFrame, title: str = "The evidence table") -> str:
    """The evidence table as one HTML page: a section per claim family, a row per claim and setting, each verdict
    cell shaded by its verdict."""
    rows = table_rows(table)
    counts = table.verdict.value_counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in sorted(counts.index))
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style></head><body>",
        f"<h3>{title}</h3><p>{len(table)} rows: {summary}. Source: results/evidence/evidence.parquet "
        "(<code>lostmid evidence --table results/evidence/evidence.parquet --markdown</code>: the decision rules and "
        "methods).</p>",
    ]
    for family, part in rows.groupby("family", sort=False):
        parts.append(f"<h4>{html.escape(family)}</h4><table><tr>")
        parts.append("".join(f"<th>{html.escape(name)}</th>" for name in COLUMNS.values()) + "</tr>")
        for row in part.itertuples(index=False):
            cells = []
            for column in COLUMNS:
                value = str(getattr(row, column))
                shade = f" class='{value.split()[0]}'" if column == "verdict" else ""
                cells.append(f"<td{shade}>{html.escape(value)}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</table>")
    return "".join(parts) + "</body></html>\n"


def write_page(table: pd.DataFrame, path) -> None:
    """``page_html`` of the evidence table, written atomically at ``path``."""
    io.write_text(page_html(table), path)
