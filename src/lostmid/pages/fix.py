"""The fix run's page (``lostmid fix-page --record runs/fix``; docs/positional_bias.md, "The fix run's page"): its
tables, its figure and its README.md from the record alone (lostmid.study.fix_reading), checked whole
before anything is written, and written over a committed page only from its own record (lostmid.records).

The page answers the plan's question in one sentence per n, every margin labelled ours, each fix's overall
accuracy said plainly, then the F fits (their windows, t_i, whether B is not 0, each one's gate readings), the
primaries at their Holm levels, the gates, the exploratory contrasts per q, the profiles and the cost per token each
arm adds (docs/performance.md's measured table, quoted: the record holds no
timings of its own).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from lostmid import io
from lostmid import manifest as run_manifest
from lostmid.architectures.summary import to_markdown
from lostmid.study import fix_reading as fr
from lostmid.study.reading import Read, bounded

PAGE = "README.md"
FIGURE = "fix_by_position.png"
COST_MARKERS = ("<!-- bench_positional_bias: begin -->", "<!-- bench_positional_bias: end -->")
QUESTION = (
    "Does the blog's recipe improve {model}'s retrieval at its worst positions, and how does it compare with "
    "Found-in-the-Middle's calibration?"
)


SIGNED = "+.3f"  # a difference as the page's tables print it: signed, three decimals


def interval(row: Read, digits: int = 2) -> str:
    """The estimate, its interval at its Holm level and the fits and windows behind it."""
    return (
        f"{bounded(row.effect.estimate, row.low, row.high, f'+.{digits}f')} "
        f"({1 - row.level:.4g} Holm interval over {row.effect.n} fits, {row.windows} windows)"
    )


def worst_clause(row: Read, positions) -> str:
    where = ", ".join(f"q = {q:g}" for q in positions)
    if not row.decided:
        return f"the blog's bias makes no decision at its worst position ({where}): {row.why}"
    return (
        f"the blog's bias changes the answer's log-probability at its worst position ({where}) by "
        f"{interval(row)} nats against none: {row.outcome} (our margin {fr.margin(row):g} nats)"
    )


def compare_clause(row: Read, strengths: str) -> str:
    if not row.decided:
        return f"against Found-in-the-Middle's calibration ({strengths}) no decision: {row.why}"
    return (
        f"against Found-in-the-Middle's calibration ({strengths}) blog minus fitm is {interval(row)} nats: "
        f"{row.outcome} (our margin ±{fr.margin(row):g})"
    )


def overall_clause(row: Read) -> str:
    if not row.decided:
        return f"whether it lowers accuracy overall, no decision: {row.why}"
    plainly = "it LOWERS accuracy overall" if row.outcome.startswith(fr.LOWERED) else "overall accuracy"
    return f"{plainly}: {interval(row, 3)} in success rate, {row.outcome} (our margin -{fr.margin(row):g})"


def answer(rows: list[Read], n: int, strengths: str) -> str:
    """The question's answer at n in one sentence: the blog against none at the worst position, the blog against
    the calibration there, and whether the blog lowers overall accuracy (the plan's primaries at n)."""
    by = {r.primary["direction"]: r for r in rows if r.primary["n"] == n}  # one primary per direction at n
    whys = {r.why for r in by.values()}
    if len(whys) == 1 and "" not in whys:  # one reason stops all three: said once
        return f"At n = {n}, no decision on any of the three questions: {whys.pop()}."
    worst = by["increase"]
    clauses = [worst_clause(worst, worst.primary["positions"]), compare_clause(by["none"], strengths)]
    return f"At n = {n}, {clauses[0]}; {clauses[1]}; {overall_clause(by['not_lowered'])}."


def plainly(contrasts: pd.DataFrame, arm: str, n: int, level: float) -> str:
    """Whether ``arm`` lowers accuracy overall at n by its exploratory contrast against none (over every q)."""
    row = contrasts.query("n == @n and contrast == @arm + ' - none' and outcome == 'success' and positions == 'all'")
    if row.empty or math.isnan(row.high.iloc[0]):
        return f"{arm} at n = {n}: too few windows for an interval."
    row = row.iloc[0]
    said = "LOWERS accuracy overall" if row.high < 0 else "does not lower accuracy overall detectably"
    return (
        f"{arm} at n = {n} {said}: {bounded(row.estimate, row.low, row.high, SIGNED)} in success "
        f"rate against none ({level:.0%} bootstrap interval over {row.fits} fits, then {row.windows} windows within "
        "them; exploratory)."
    )


def worst_line(positions: pd.DataFrame) -> str:
    """Exploratory: where the held-out none arm's mean log p(answer) is lowest at each n (the plan fixed q = 1 on
    other windows; the pydoc pilot's worst was q = 0)."""
    none = positions[positions.arm == "none"]
    worst = none.loc[none.groupby("n").logprob.idxmin()]
    return "; ".join(f"q = {row.q:g} at n = {row.n} ({row.logprob:.2f} nats)" for row in worst.itertuples())


def cost_block(repo: Path) -> str:
    """docs/performance.md's measured table of the cost per token of each arm, quoted with its source."""
    path = repo / "docs" / "performance.md"
    text = path.read_text() if path.is_file() else ""
    begin, end = COST_MARKERS
    if begin not in text or end not in text:
        return "Not measured: docs/performance.md holds no `bench_positional_bias` table.\n"
    table = text.split(begin, 1)[1].split(end, 1)[0].strip()
    return (
        "Measured by `python benchmarks/bench_positional_bias.py` (one SmolLM2 window's forward pass at n = 1024, "
        "one thread), quoted from docs/performance.md; not this run's timings (the record holds none). The fitm "
        "arm's cost is the calibration's form, whatever its strength:\n\n" + table + "\n"
    )


def windows_line(fix: fr.FixRecord) -> str:
    """The held-out windows recorded per n and arm, of the plan's; where the gate-first order's gate failed, "stopped
    by the gate" at its floor."""
    counts = fix.examples.groupby(["n", "arm"]).window.nunique()
    planned = fix.plan["run"]["windows_by_n"]

    def stopped(n):
        floor = fr.held_out_count(fix.plan, n, False)
        return f" ({fr.STOPPED_BY_GATE} at {floor})" if fr.gate_stop(fix.plan, fix, n) else ""

    return "; ".join(
        f"n = {n}: "
        + ", ".join(f"{arm} {counts.get((n, arm), 0)}" for arm in fr.ARM_ORDER)
        + f" of {planned[n]}"
        + stopped(n)
        for n in planned
    )


def strengths_words(fix: fr.FixRecord) -> str:
    """The calibrations' strengths in a few words: t_i per fit, each chosen on its own window at the fits' n."""
    strengths = [float(f["strength"]) for f in fix.fits["fitm"]]
    counts = ", ".join(f"t = {t:g} in {strengths.count(t)}" for t in sorted(set(strengths)))
    return f"{len(strengths)} calibrations, {counts}"


def fits_markdown(fix: fr.FixRecord, table: pd.DataFrame) -> str:
    """The F fits: each one's window, the blog fit's flatness on it against none's, whether B is not 0, the
    calibration's strength t_i, and each gate's reading of that fit (its mean ratio over its gate windows)."""
    plan = fix.plan
    n = plan["arms"]["blog"]["fit"]["n"]
    words = (
        f"Each fix arm is {len(table)} fits, fit i on one reserved window (the draw's k at n = {n}, "
        "its corpus window beside): the blog's bias fitted there, the calibration measured on it shuffled and its "
        "strength t_i chosen on it; held-out window k is evaluated under fit k mod "
        f"{len(table)} in both fix arms (`fits/blog_<i>.json`, `fits/fitm_<i>.json`, `tables/fits.parquet`). A gate "
        "column is that fit's geometric mean ratio over its gate windows (passes on its own below "
        f"{plan['run']['gates']['ratio']:g}):\n\n"
    )
    gates = [c for c in table if "_gate_" in c]
    cells = table.assign(
        flatness=[f"{loss:.4g} (none {none:.4g})" for loss, none in table[["loss", "none"]].to_numpy()],
        fitted=["yes" if f else "no (B = 0)" for f in table.fitted],
        strength=[f"{t:g}" for t in table.strength],
        **{c: [f"{v:.3g}" for v in table[c]] for c in gates},
    )
    return words + to_markdown(cells[["fit", "draw", "corpus_window", "flatness", "fitted", "strength", *gates]])


def primaries_markdown(rows: list[Read]) -> str:
    table = fr.primary_table(rows).assign(
        question=[r.question for r in rows],
        interval=[bounded(r.effect.estimate, r.low, r.high, SIGNED) if r.decided else "–" for r in rows],
        level=[f"{1 - r.level:.4g}" for r in rows],
        p=["–" if math.isnan(r.p) else f"{r.p:.3g}" for r in rows],
        outcome=[r.outcome + (f": {r.why}" if r.why else "") for r in rows],
    )
    return to_markdown(table[["id", "question", "fits", "windows", "interval", "level", "p", "margin", "outcome"]])


def gates_markdown(plan: dict, fix: fr.FixRecord) -> str:
    lines = []
    for arm, lengths in (("blog", plan["run"]["windows_by_n"]), ("fitm", [plan["arms"]["fitm"]["calibration"]["n"]])):
        for n in lengths:
            gate = fr.gate_reading(plan, fix, arm, int(n))
            state = {True: "passed", False: "FAILED", None: "not read"}[gate.passed]
            lines.append(f"- {arm} at n = {gate.n}: {state}: {gate.why}.")
    return "\n".join(lines)


def contrasts_markdown(contrasts: pd.DataFrame) -> str:
    cells = contrasts.assign(
        cell=[
            "–" if math.isnan(h) else bounded(e, lo, h, SIGNED)
            for e, lo, h in contrasts[["estimate", "low", "high"]].values
        ]
    )
    wide = cells.pivot_table(
        index=["n", "contrast", "outcome", "fits", "windows"],
        columns="positions",
        values="cell",
        aggfunc="first",
        sort=False,
    )
    return to_markdown(wide.reset_index())


def gate_readings_markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return "No gate readings in the record."
    bounds = table[["log_ratio", "low", "high"]].to_numpy()
    cells = table.assign(ratio=[f"{math.exp(e):.3g} [{math.exp(lo):.3g}, {math.exp(h):.3g}]" for e, lo, h in bounds])
    return to_markdown(cells[["n", "arm", "reading", "fits", "windows", "ratio"]])


def page(fix: fr.FixRecord, rows, tables: dict, repo: Path, model: str) -> str:
    """The record's page: its run, the answer per n, the plain overall lines, the primaries, the gates, the
    figure, the exploratory contrasts and gate readings, the cost."""
    plan, level = fix.plan, fix.plan["level"]
    strengths = strengths_words(fix)
    lengths = sorted(plan["run"]["windows_by_n"])
    answers = "\n".join(f"- {answer(rows, n, strengths)}" for n in lengths)
    plain = "\n".join(f"- {plainly(tables['contrasts'], arm, n, level)}" for n in lengths for arm in fr.ARMS)
    return io.wrap_prose(
        f"# Fix run `{fix.path.name}`\n\n"
        f"Generated by `lostmid fix-page --record {fix.path}` from this folder, the plan it names and the none arm's "
        f'record (docs/positional_bias.md, "The fix run\'s page").\n\n'
        + run_manifest.stamp(fix.manifest)
        + f"\n\nPlan: `{plan['path']}` ({fix.status}). Held-out windows recorded: {windows_line(fix)}.\n\n"
        + f"## {QUESTION.format(model=model)}\n\n{answers}\n\nEvery margin is ours (the plan: no source gives a "
        "size that transfers to this model, corpus and position). Does either fix lower accuracy overall?\n\n"
        + plain
        + "\n\nThe held-out none arm's own worst position (lowest mean log p(answer); exploratory: the plan fixed its "
        f"positions on other windows): {worst_line(tables['positions'])}."
        + "\n\n## The fits\n\n"
        + fits_markdown(fix, tables["fits"])
        + "\n\n## The primaries\n\nThe plan's six, Holm across them; each the mean over the fits of the fit means "
        "of the per-window paired difference, its Student t interval over the fits at its Holm level "
        "(`retrieval_estimators.fit_cluster_difference`: the fitted bias a random draw, windows nested in fits), its "
        "outcome by the plan's rule for its direction; a primary stopped by its gate or short of its windows makes "
        "no decision and keeps its place in k (`tables/primaries.parquet`):\n\n"
        + primaries_markdown(rows)
        + "\n\n## The gates: did each fix do what it is for?\n\n"
        + gates_markdown(plan, fix)
        + f"\n\n## Retrieval by needle position\n\n![accuracy and log p(answer) by q, a line per arm]({FIGURE})\n\n"
        f"Lines: the mean over windows (tasks pooled per window); bands: {level:.0%} percentile bootstrap, two-level: "
        "the fits resampled, then the windows within each drawn fit (`tables/positions.parquet`).\n\n"
        f"## Each fix against none, per q (exploratory)\n\nMean paired difference over windows [{level:.0%} percentile "
        "bootstrap interval over fits, then windows within fits], no multiplicity correction, no outcome "
        "(`tables/contrasts.parquet`):\n\n"
        + contrasts_markdown(tables["contrasts"])
        + "\n\n## The influence profile each arm produces (exploratory)\n\nOn the gate windows (held out): each fix's "
        "reading over none's, the geometric mean over the fits of the fit means with its t interval over the fits at "
        "the gates' level (`tables/gates.parquet`); "
        "flatness below 1 is a flatter task-free profile, a content-free distance below 1 a more uniform "
        "content-free attention:\n\n"
        + gate_readings_markdown(tables["gates"])
        + "\n\n## The cost per token each arm adds\n\n"
        + cost_block(repo)
    )


def write_fix_page(record, repo=".", force: bool = False) -> Path:
    """The fix record's tables, figure and page, written into the record folder after the whole record is read
    and every table made; a committed page of another record is replaced only with ``force``."""
    from lostmid import records
    from lostmid.architectures.models import display_name
    from lostmid.plots.fix import fix_by_position

    fix = fr.read_fix_record(record, repo)
    out = fix.path / PAGE
    records.refuse_other(out, run_manifest.identity(fix.manifest), force)
    rows = fr.primary_rows(fix.plan, fix)
    settings, level = fix.settings, fix.plan["level"]
    tables = {
        "primaries": fr.primary_table(rows),
        "contrasts": fr.contrast_table(fix, settings.resamples, settings.seed, level),
        "positions": fr.position_table(fix, settings.resamples, settings.seed, level),
        "gates": fr.gate_table(fix.plan, fix),
        "fits": fr.fit_table(fix),
    }
    text = page(fix, rows, tables, Path(repo), display_name(fix.examples.model.iloc[0]))
    for name, table in tables.items():
        io.write_parquet(table, fix.path / "tables" / f"{name}.parquet")
    fix_by_position(tables["positions"], fix.path / FIGURE, level)
    io.write_text(text, out)
    return out
