"""The evidence pages' Markdown: the evidence table row by row with its methods and rules (``markdown``), the
results page's verdict summary and the README's headline (one line per claim family), several runs' tables side
by side, the pooled runs, and docs/evidence.md's two declared blocks (the claims and the deviations).
``lostmid results-page`` and ``lostmid evidence`` write them; the rows themselves are lostmid.evidence's."""

from __future__ import annotations

import pandas as pd

from lostmid.evidence import decisions as dec
from lostmid.evidence import deviations
from lostmid.evidence.estimators import ESTIMATORS
from lostmid.evidence.inputs import CHECKPOINTS
from lostmid.evidence.report import cell, estimate_words, no_verdict, verdict_counts, verdict_words


def row_line(row) -> str:
    """One row in words: source, claim, setting, estimate [interval], seeds, verdict."""
    seeds = f", {int(row.n_seeds)} seed{'s' if row.n_seeds > 1 else ''}" if row.n_seeds else ""
    why = f" ({no_verdict(row)})" if no_verdict(row) else ""
    return f"{row.source} `{row.claim}` — {row.setting}: {estimate_words(row)}{seeds} → **{row.verdict}**{why}"


def moved_rows(table: pd.DataFrame) -> list:
    """The rows whose verdict differs under the rules as first written (deviations on the record)."""
    return [
        row
        for row in table.itertuples()
        if row.verdict_as_first_written and row.verdict_as_first_written != verdict_words(row)
    ]


def split_kinds(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the sources' claims, the checks of the instrument); a table written before the kind column: all claims."""
    if "kind" not in table:
        return table, table.iloc[:0]
    return table[table.kind == "claim"], table[table.kind == "check"]


def verdict_summary(table: pd.DataFrame) -> str:
    """Markdown: each claim of the blog in the blog's own setting (the L and depth of the first setting
    the claim lists), one line per row there (so every reading of the fix at that shape), then the
    paper's claims counted by verdict, then the claims counted (checks of the instrument apart), then
    every contradicted or not-evaluable row not listed above (a summary leaves none out), then the rows
    whose verdict under the rules as first written differs (deviations on the record)."""
    claims, checks = split_kinds(table)
    blog = claims[claims.source.str.startswith("blog")]
    paper = claims[~claims.index.isin(blog.index)]
    lines, listed = [], set()
    for _, rows in blog.groupby("claim", sort=False):
        shape = rows[["L", "depth"]].astype("float64").fillna(-1)
        own = rows[(shape == shape.iloc[0]).all(axis=1)]
        others = len(rows) - len(own)
        more = f" (and {others} other setting{'s' if others > 1 else ''})" if others else ""
        listed |= set(own.index)
        for i, row in enumerate(own.itertuples(index=False)):
            lines.append(f"- {row_line(row)}" + (more if i == len(own) - 1 else ""))
    if not paper.empty:
        lines.append(f"- the paper's {paper.claim.nunique()} claims, {len(paper)} rows: {verdict_counts(paper)}")
    lines.append(f"- every claim row: {verdict_counts(claims)} of {len(claims)}")
    if not checks.empty:
        lines.append(
            f"- the checks of the instrument (not counted above): {checks.claim.nunique()} checks, {len(checks)} "
            f"rows: {verdict_counts(checks)}"
        )
    unlisted = table[~table.index.isin(listed)]
    flagged = [
        row for row in unlisted.itertuples() if row.verdict == "contradicted" or no_verdict(row) == "not evaluable"
    ]
    if flagged:
        lines.append("- every contradicted or not-evaluable row not listed above, in the table below")
    if "verdict_as_first_written" in table:
        moved = moved_rows(table)
        if moved:
            lines.append("- rows whose verdict differs under the rules as first written (deviations on the record):")
            lines += [
                f"  - `{row.claim}` — {row.setting}: **{row.verdict}**, as first written "
                f"{row.verdict_as_first_written} ({row.deviations})"
                for row in moved
            ]
    return "\n".join(lines) + "\n" + (flagged_table(flagged) if flagged else "")


def flagged_table(rows) -> str:
    """The contradicted and not-evaluable rows as a Markdown table: kind, source, claim, setting, estimate, seeds,
    verdict and why it has none of its own."""
    lines = [
        "",
        "| kind | source | claim | setting | estimate [interval] | seeds | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        kind = row.kind if hasattr(row, "kind") else "claim"
        cells = [kind, row.source, f"`{row.claim}`", row.setting, estimate_words(row), row.n_seeds or "–"]
        lines.append("| " + " | ".join(map(cell, cells)) + f" | {verdict_words(row)} |")
    return "\n".join(lines) + "\n"


def family_label(row) -> str:
    """How the headline names a row's claim family (``Claim.family``); a claim outside a family goes with its
    source: the blog's or the paper's."""
    if row.family:
        return row.family
    return "blog, outside its family" if str(row.source).startswith("blog") else "paper"


def headline(table: pd.DataFrame) -> str:
    """Markdown for the README, one line per claim family (the sources' claims only, in the table's order):
    its rows counted by verdict, each contradicted row named, the not-evaluable rows and the rows whose verdict
    differs under the rules as first written counted (the results page's summary names them); then one line
    for the checks of the instrument, and one naming the families with no row run (their stage was not run)."""
    claims, checks = split_kinds(table)
    if "family" not in claims:
        claims = claims.assign(family="")
    labels = [family_label(row) for row in claims.fillna({"family": ""}).itertuples()]
    lines, not_run = [], []
    for name, rows in claims.groupby(pd.Series(labels, index=claims.index), sort=False):
        if all(no_verdict(row) == "not run" for row in rows.itertuples()):
            not_run.append(name)
            continue
        contradicted = rows[rows.verdict == "contradicted"].itertuples()
        named = "; ".join(f"`{row.claim}` ({row.setting.split(', checkpoint')[0]})" for row in contradicted)
        unevaluable = sum(no_verdict(row) == "not evaluable" for row in rows.itertuples())
        moved = len(moved_rows(rows)) if "verdict_as_first_written" in rows else 0
        differ = f"verdict{'s differ' if moved > 1 else ' differs'} under the rules as first written"
        lines.append(
            f"- {name}: {len(rows)} row{'s' if len(rows) > 1 else ''}, {verdict_counts(rows)}"
            + (f"; contradicted: {named}" if named else "")
            + (f"; {unevaluable} not evaluable" if unevaluable else "")
            + (f"; {moved} {differ}" if moved else "")
        )
    if not checks.empty:
        lines.append(f"- checks of the instrument (not counted above): {len(checks)} rows, {verdict_counts(checks)}")
    if not_run:
        lines.append(f"- not run on this run's tables: {', '.join(not_run)}")
    return "\n".join(lines) + "\n"


def side_by_side(runs: dict[str, pd.DataFrame]) -> str:
    """Markdown: the rows of several runs' evidence tables beside one another, one line per row of the
    first run (matched by claim, variant, L, depth and order within them), each run's cell "estimate
    [interval], n seeds, verdict"; a row another run lacks reads "–". ``runs`` maps a label (e.g.
    "confirmatory") to its table."""
    keys = ["claim", "variant", "L", "depth"]

    def keyed(table: pd.DataFrame) -> pd.DataFrame:
        frame = table.assign(**{k: table[k].astype(str) for k in keys})
        return frame.assign(nth=frame.groupby(keys).cumcount()).set_index([*keys, "nth"])

    tables = {label: keyed(table) for label, table in runs.items()}
    first = next(iter(tables.values()))
    labels = list(tables)
    lines = [
        "| claim | kind | setting | " + " | ".join(labels) + " |",
        "|---|---|---|" + "---|" * len(labels),
    ]
    for key, row in first.iterrows():
        cells = []
        for label in labels:
            other = tables[label]
            if key not in other.index:
                cells.append("–")
                continue
            r = other.loc[key]
            seeds = f", {int(r.n_seeds)} seeds" if r.n_seeds else ""
            cells.append(f"{estimate_words(r)}{seeds} → **{verdict_words(r)}**")
        kind = row.get("kind", "claim")
        lines.append(f"| {key[0]} | {kind} | {str(row.setting).replace('|', '/')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def declarations(claims) -> str:
    """The declarations of ``claims`` (``lostmid.evidence.registry.CLAIMS``) as a Markdown table (docs/evidence.md,
    "The claims"): one line per claim, its fields as declared, then what each estimator and checkpoint means."""

    def rule(r: dec.Rule) -> str:
        margin = f"`{r.margin}`" if isinstance(r.margin, str) else f"{r.margin:g}"
        return f"{r.kind}, {margin}" + (f" × {r.factor:g}" if r.factor != 1.0 else "")

    lines = [
        "| claim | kind | family | source | unit | reads | checkpoints | estimator | rule (kind, margin) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in claims:
        cells = (f"`{c.name}`", c.kind, c.family or "–", c.source, c.unit, ", ".join(c.needs) or "–")
        cells += ("; ".join(c.checkpoints), f"`{c.estimator}`", rule(c.rule))
        lines.append("| " + " | ".join(map(cell, cells)) + " |")
    used = {c.estimator for c in claims}
    estimators = [f"- `{name}`: {e.words}." for name, e in ESTIMATORS.items() if name in used]
    checkpoints = [f"- {name}: {words}." for name, words in CHECKPOINTS.items()]
    text = "\n".join(lines) + "\n\nEstimators (`lostmid.evidence.estimators`):\n\n" + "\n".join(estimators)
    return text + "\n\nCheckpoints:\n\n" + "\n".join(checkpoints) + "\n"


def rule_ids(table: pd.DataFrame) -> dict[str, str]:
    """Each distinct decision rule of ``table`` in words, keyed by its id (R1, R2, ... in order of first use)."""
    return {rule: f"R{i}" for i, rule in enumerate(dict.fromkeys(table.rule), 1)}


def markdown(table: pd.DataFrame, ids: dict[str, str] | None = None) -> str:
    """The evidence table as Markdown: one line per row, then each row's method, then the decision rules,
    each printed once and cited by its id in the table's ``rule`` column.

    The family-wise column is the verdict of the rows in a family (with the adjusted interval in the
    methods below), "–" for the rows outside one; a table written before the correction existed has none.
    ``ids``: the rules' ids of a larger table that this one is part of (``rule_ids``), so that two parts printed
    on one page cite one legend's ids; each part's legend lists the rules it uses."""
    used = set(table.rule)
    ids = {rule: rule_id for rule, rule_id in (ids or rule_ids(table)).items() if rule in used}
    lines = [
        "| # | claim | source | setting | statistic (unit) | estimate [interval] | seeds | rule | verdict "
        "| family-wise | as first written |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    methods = []
    for i, row in enumerate(table.itertuples(index=False), 1):
        family = getattr(row, "family_size", 0) or 0
        adjusted = f"**{row.adjusted_verdict}**" if family else "–"
        statistic = f"{cell(row.statistic)} ({row.unit})"
        first = getattr(row, "verdict_as_first_written", "") or "–"
        name = row.claim + (" (check)" if getattr(row, "kind", "claim") == "check" else "")
        lines.append(
            f"| {i} | {name} | {cell(row.source)} | {cell(row.setting)} | {statistic} | {estimate_words(row)} | "
            f"{row.n_seeds or '–'} | {ids[row.rule]} | **{verdict_words(row)}** | {adjusted} | {first} |"
        )
        correction = (
            f" Family-wise (Bonferroni over the {family} rows of its family): {row.adjusted_level:.2%} "
            f"interval [{row.adjusted_low:.3g}, {row.adjusted_high:.3g}], {row.adjusted_verdict}."
            if family
            else ""
        )
        deviation = f" As first written ({row.deviations}): {first}." if first != "–" else ""
        methods.append(f"{i}. {row.method}.{correction}{deviation}" + (f" Note: {row.note}." if row.note else ""))
    legend = [f"- **{rule_id}**: {rule}" for rule, rule_id in ids.items()]
    text = "\n".join(lines) + "\n\nMethods, by row:\n\n" + "\n".join(methods)
    return text + "\n\nDecision rules (the table's `rule` column):\n\n" + "\n".join(legend) + "\n"


def pooled_markdown(runs: pd.DataFrame, pooled: pd.DataFrame) -> str:
    """Each run's row, then the pooled row of its claim, as Markdown."""
    lines = [
        "| claim | setting | checkpoint | seed set | run | seeds | estimate [interval] |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs.itertuples():
        lines.append(
            f"| {r.claim} | {r.setting} | {r.checkpoint} | {r.seed_set} | {r.run} | {r.n_seeds} | "
            f"{r.estimate:.3g} [{r.ci_low:.3g}, {r.ci_high:.3g}] ({r.level:.0%}) |"
        )
    lines += [
        "",
        "| claim | seed sets (runs) | seeds | fixed effect [95%] | random effects (DL) [95%] | Q (df, p) | I² | τ² "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pooled.itertuples():
        lines.append(
            f"| {p.claim} | {p.seed_sets} | {p.n_seeds} | {p.fixed:.3g} [{p.fixed_low:.3g}, {p.fixed_high:.3g}] | "
            f"{p.random:.3g} [{p.random_low:.3g}, {p.random_high:.3g}] | {p.Q:.3g} ({p.df}, {p.p_Q:.2g}) | "
            f"{p.I2:.0%} | {p.tau2:.3g} | **{p.verdict}** ({p.rule}) |"
        )
    return "\n".join(lines) + "\n"


def deviations_markdown() -> str:
    """The registry as a Markdown table (docs/evidence.md)."""
    lines = ["| deviation | date | now | first written | why | seen before the change |", "|---|---|---|---|---|---|"]
    for d in deviations.DEVIATIONS:
        lines.append(f"| `{d.name}` | {d.date} | {d.what} | {d.first_written} | {d.why} | {d.seen} |")
    return "\n".join(lines) + "\n"
