"""One findings page for both studies (issue 52): docs/findings.md from the first study's record and plan
(runs/study, study/plan.yaml: ``lostmid.study.findings``) and the second's (runs/<name>, study/plan2.yaml:
``lostmid.study.study2_reading``), written only when ``lostmid findings`` is given the second record
(``--study2-run``); without it the page is the first study's alone.

Each question once: a question the second study answers again (``REVISES``) shows the answer that now stands,
the second study's, with the first study's beside it and why it was asked again (plan2's ``answers``). Every
size is labelled: plan2 labels each (``size_label``); study/plan.yaml labels none, and none of its sizes is a
number in a source's words, so the page reads each as ``reading.DEFAULT_SIZE_LABEL`` and says so once. Every (a)
sentence names its step; the failure-by-position curves of each study-2 arm, with bands, follow the answers.
"""

from __future__ import annotations

from pathlib import Path

from lostmid.errors import InputError
from lostmid.pages import findings as page1
from lostmid.study import findings
from lostmid.study import study2_reading as s2
from lostmid.study import study2_secondaries as s2x
from lostmid.study.reading import (
    DEFAULT_SIZE_LABEL,
    EXPLORATORY,
    Missing,
    Read,
    exploratory,
    labelled,
    number,
    numbers,
    sentence,
    sentence_opening,
    size_label,
    text,
)

SIZES_LINE = (
    "Every size below is our margin, not a source's number: study/plan2.yaml labels each size (size_label); "
    "study/plan.yaml labels none, and none of its sizes is a number in a source's words, so each reads as "
    f"{DEFAULT_SIZE_LABEL}."
)
CURVE_STEPS = (500, 1500)  # plan2 secondary failure_by_position_curves: the two named steps

# The second study's primaries that answer a first-study question again: plan2 id -> study/plan.yaml id.
REVISES = {
    "a_position_residual_1500": "a_position_effect_residual",
    "a_position_residual_500": "a_position_effect_residual",
    "a_position_noresidual_1500": "a_position_effect_noresidual",
    "d_speed_noresidual": "d_speed_noresidual",
    "e_difference_noresidual": "e_late_minus_early_noresidual",
    "e_absence_noresidual": "e_late_minus_early_noresidual",
    "d_speed_residual": "d_speed_residual",
    "e_difference_residual": "e_late_minus_early_residual",
    "e_absence_residual": "e_late_minus_early_residual",
    "influence_beyond_position_residual": "influence_beyond_position_residual",
}


def ungated(row: Read, plan: dict, record) -> str:
    """A gated first-study primary's sentence: undecided, and its trained arms' numbers over every fit,
    exploratory at the plan's level (never "not yet run" for a trained arm); another missing row keeps its own."""
    primary = row.primary
    effect = findings.over_every_fit(primary, record, plan, row.effect)
    if effect is None:
        return row.sentence
    low, high = effect.interval(plan["level"])
    return (
        f"{sentence_opening(row)}Undecided: the arm failed its gate ({row.effect.why}); exploratory, over every fit "
        f"of its trained arm: {numbers(effect, low, high, primary, plan['level'])})."
    )


def study1_sentence(row: Read, plan: dict, record) -> str:
    """A first-study row's sentence with its size labelled (``DEFAULT_SIZE_LABEL`` where its plan has none)."""
    if isinstance(row.effect, Missing):
        return ungated(row, plan, record)
    said = sentence(row, plan, size_label(row.primary, plan))
    return said if not row.outcome.startswith(EXPLORATORY) else exploratory(row.outcome, said)[1]


def questions(plan1: dict, record1, rows1: list, rows2: list, secondaries2: list = ()) -> list[dict]:
    """Each question once, in the first plan's order then the second's new ones: its words, the second study's
    readings of it and the first study's row (with its relabelled sentence), where each has one; and study 2's
    exploratory rows of a first-study primary it reads again only as a secondary of the same id (``again``)."""
    found = [
        {
            "question": row.question,
            "study2": [],
            "study1": row,
            "said1": study1_sentence(row, plan1, record1),
            "again": [r for r in secondaries2 if r["id"] == row.id],
        }
        for row in rows1
    ]
    index = {row.id: k for k, row in enumerate(rows1)}
    for row in rows2:
        old = REVISES.get(row.id)
        if old in index:
            found[index[old]]["study2"].append(row)
        else:
            found.append({"question": row.question, "study2": [row], "study1": None, "again": []})
    return found


def again_words(rows: list[dict]) -> str:
    """Study 2's exploratory rows of a first-study question, in one sentence (95% intervals, no Holm)."""
    each = "; ".join(
        f"{r['what']}: {number(r['estimate'])} [{number(r['low'])}, {number(r['high'])}] over {r['n']} units"
        for r in rows
    )
    return f"Study 2, exploratory (95% interval, no Holm; `{rows[0]['id']}`): {each}."


def answer_lines(asked: list[dict], revised: bool = True) -> list[str]:
    """Each question and its answer, one bullet each: the answer that now stands first, and where ``revised`` the
    first study's answer that the second revised (the page has it; the README quotes the standing answers only)."""
    lines = []
    for q in asked:
        said = " ".join(row.sentence for row in q["study2"])
        if q["study1"] is not None and q["study2"]:
            said += f" (Study 1, revised: {q['said1']})" if revised else ""
        elif q["study1"] is not None:
            said = q["said1"] + (f" ({again_words(q['again'])})" if q["again"] else "")
        lines.append(f"- **{q['question']}** {said}")
    return lines


def table2(rows2: list) -> list[str]:
    out = [
        "| endpoint | step | estimate | interval | level | p | units | outcome |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows2:
        out.append(
            f"| `{row.id}` | {row.step} | {number(row.effect.estimate)} | [{number(row.low)}, {number(row.high)}] "
            f"| {row.level:.3g} | {row.p:.3g} | {row.effect.n} | {labelled(row.outcome, size_label(row.primary, {}))} |"
        )
    return out


def precision_table(rows2: list) -> list[str]:
    """Each study-2 primary's precision against its plan's power (``power``: the half-width simulated before the
    run, at its level, over its planned units): the half-width the run reached at that level, same estimator."""
    out = [
        "| endpoint | planned units | units read | level | planned half-width | reached half-width |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows2:
        power = row.primary["power"]
        if isinstance(row.effect, Missing):
            continue
        low, high = row.effect.interval(power["level"])
        out.append(
            f"| `{row.id}` | {power['units']} | {row.effect.n} | {power['level']:.3g} | "
            f"{number(power['half_width'])} | {number((high - low) / 2)} |"
        )
    return out


def resolved(primary: dict, key: str, plan: dict) -> str:
    """The primary's ``key`` in words, where the plan says "as <another primary>" that primary's."""
    words = text(primary[key])
    by_id = {p["id"]: p for p in plan["primaries"]}
    named = words.removeprefix("as ")
    return text(by_id[named][key]) if named in by_id and named != primary["id"] else words


def section(q: dict, plan2: dict) -> list[str]:
    """One question's section: the second study's answers with their estimators and gates, then the first's."""
    out = ["", f"## {q['question']}", ""]
    for row in q["study2"]:
        primary = row.primary
        out += [f"{row.sentence} (`{row.id}`, study 2, {text(primary['source'])})", ""]
        out.append(f"Estimator: {row.effect.method}. Size: {resolved(primary, 'size_why', plan2)}.")
        if row.gate is not None:
            out += ["", f"Gate: {row.gate.words()}."]
        if q["study1"] is not None:
            out += ["", f"Asked again because: {text(primary['answers'])}."]
        out.append("")
    if q["study1"] is not None:
        row = q["study1"]
        heading = "Study 1 answered" if q["study2"] else "Answer"
        out += [f"{heading}: {q['said1']} (`{row.id}`, study 1, {text(row.primary['source'])})"]
        if row.note:
            out += ["", row.note + "."]
        if q["again"]:
            out += ["", again_words(q["again"])]
    return out


def cost_line(run) -> str:
    """The run's cost from its record's ``tables/job_cost.parquet`` (``lostmid study-record``): the jobs, their
    CPU hours by stage (each job's own log line) and the largest peak memory of a job."""
    from lostmid import records
    from lostmid.tables.run_cost import cost_by_stage

    path = Path(run) / "tables" / "job_cost.parquet"
    if not path.exists():
        return "- Cost: the record holds no job costs."
    jobs = records.read_table(path, ("job",), ("cpu_s", "peak_mb", "wall_s"))
    stages = cost_by_stage(jobs).set_index("stage")
    each = ", ".join(f"{stage} {row.cpu_s / 3600:.2f}" for stage, row in stages.drop("all").iterrows())
    total = stages.loc["all"]
    return (
        f"- Cost: {int(jobs.cpu_s.notna().sum())} jobs, {total.cpu_s / 3600:.2f} CPU hours ({each}), at most "
        f"{total.peak_mb:.0f} MB a job; each job's CPU seconds from its own log line ({Path(run).as_posix()}"
        "/tables/job_cost.parquet)."
    )


def residual_arm(q: dict) -> bool:
    """Whether a question is answered on the residual fix arm (where the page says what B can do to that network)."""
    return any(row.primary["arms"][0] == s2x.RESIDUAL_FIX for row in q["study2"])


def markdown(plan1, record1, rows1, status1, plan2, record2, rows2, status2, figures: dict, run2, added) -> str:
    """The page; ``added``: (the flatness section's lines, study 2's secondary rows), ``study2_secondaries``."""
    flatness, secondaries2 = added
    asked = questions(plan1, record1, rows1, rows2, secondaries2)
    out = [
        "# Findings",
        "",
        "<!-- Generated by `lostmid findings --study2-run` from both studies' run records and plans; do not edit. -->",
        "",
    ]
    for name, status in (("study 1", status1), ("study 2", status2)):
        if not status[0]:
            out += [
                f"**EXPLORATORY ({name}): the plan check failed ({status[1]}); its answers are not pre-registered.**",
                "",
            ]
    out += [
        "The project's questions, each answered once: by the second pre-registered study (study/plan2.yaml, issue 52)",
        "where it asks a question again, with the first study's answer (study/plan.yaml) beside it and why it was",
        "asked again; by the first study where the second does not ask it. Ten primaries in each study, Holm within",
        "each; each interval is at its primary's Holm level (an equivalence primary's at 1 - 2 alpha_i).",
        "",
        SIZES_LINE,
        "",
        "**Study 2.**",
        "",
        page1.provenance(record2, status2),
        *(["", cost_line(run2)] if run2 is not None else []),
        "",
        "**Study 1.**",
        "",
        page1.provenance(record1, status1),
        "",
        "**The answers.**",
        "",
        *answer_lines(asked),
        "",
        "Study 2's primaries:",
        "",
        *table2(rows2),
        "",
        "Their precision against the plan's power (simulated before the run; each half-width at the level the plan",
        "gave it, by the same estimator):",
        "",
        *precision_table(rows2),
        "",
        f"![failure by flag position of each study-2 arm, with 95% bands over its units]({figures['curves']})",
    ]
    for q in asked:
        if residual_arm(q):
            out, flatness = out + flatness, []  # once, before the first question on the residual arm
        out += section(q, plan2)
    out += flatness  # where no question is on the residual arm: after them
    out += [
        "",
        "---",
        "",
        "**Exploratory rows of study 2** (study/plan2.yaml, secondaries). 95% intervals, no multiplicity correction,",
        f"no outcome; a row the record cannot give says why ({s2x.NOT_IN_RECORD}).",
        "",
        *page1.secondaries_table(secondaries2),
        "",
        "**Exploratory rows of study 1.** 95% intervals, no multiplicity correction, no outcome.",
        "",
        *page1.secondaries_table(findings.secondary_rows(plan1, record1, every_fit=True)),
    ]
    return "\n".join(out) + "\n"


def write_combined(
    plan1_path,
    run1,
    plan2_path,
    run2,
    out,
    figures_dir,
    repo,
    readme=None,
    force=False,
    resamples: int = s2.RESAMPLES,
    pilot=None,
) -> list:
    """The page for both studies (``out``), its curves and the README's answers block, from both records and
    plans and the residual pilot's record (``pilot``, ``repo``'s ``study2_secondaries.PILOT`` unless given); every
    text is made before anything is written. A committed page written from neither record is
    refused unless ``force``; a study-2 record whose manifest names no study-2 plan is one line."""
    from lostmid import io, records
    from lostmid.manifest import identity
    from lostmid.plots.study2 import failure_curves
    from lostmid.study.plan import read_plan
    from lostmid.study.record import plan_status, read_record

    plan1, record1 = read_plan(plan1_path), read_record(run1)
    plan2, record2 = read_plan(plan2_path), s2.read_record2(run2)
    named = Path(plan2_path).resolve().relative_to(Path(repo).resolve()).as_posix()
    if not any(r["path"] == named for item in record2.manifest["invocations"] for r in item.get("records", [])):
        raise InputError(f"{run2}: its manifest records no plan {named}: not a run of the second study")
    status1 = plan_status(repo, plan1_path, record1.manifest)
    status2 = plan_status(repo, plan2_path, record2.manifest)
    lines = [identity(record1.manifest), identity(record2.manifest)]
    if not force and not any(records.same_record(out, line) for line in lines):
        records.refuse_other(out, lines[1], force)
    rows1 = findings.rows(plan1, record1, status1[0])
    rows2 = s2.read_plan2(plan2, record2, status2[0], resamples)
    flatness = s2x.flatness_section(record2, s2x.read_pilot(pilot or Path(repo) / s2x.PILOT))
    added = (flatness, s2x.secondary_rows(plan2, record2, run2, resamples))
    curves = Path(figures_dir) / "findings_study2_failure.png"
    figures = {"curves": page1.relative(curves, out)}
    page = io.wrap_prose(markdown(plan1, record1, rows1, status1, plan2, record2, rows2, status2, figures, run2, added))
    if readme is not None:
        standing = answer_lines(questions(plan1, record1, rows1, rows2, added[1]), revised=False)
        readme_text = page1.readme_with(readme, out, standing)
    arms = s2.with_variants(plan2, record2.overlay)["run"]["arms"]
    failure_curves(record2.failure, arms, CURVE_STEPS, curves)
    io.write_text(page, out)
    if readme is not None:
        io.write_text(readme_text, readme)
    return rows2
