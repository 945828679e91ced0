"""docs/findings.md from the study's run record (``runs/study``, ``lostmid.study.record``) and its plan
(study/plan.yaml): each primary's estimate, its Holm level and interval, its outcome and its answer in one
sentence; a figure per question; the exploratory secondaries; the plan's commit beside the run's.

A primary is called primary only when the plan read here is the one the run began under (``plan_status``);
an endpoint whose data are not in the record yet reads "not yet run"; a fix arm whose fits did not flatten the
model it trains reads "the fix could not be built for this network". Neither has a p-value: both count in
Holm's k with p = 1.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lostmid.errors import InputError
from lostmid.study import estimators as est
from lostmid.study import reading
from lostmid.study.effects import MeanEffect
from lostmid.study.plan import arm_variants

NOT_YET_RUN = "not yet run"
NOT_BUILT = "the fix could not be built for this network"
MIN_PASSING_FITS = 2  # the plan's gate: an arm is decided when at least 2 of its fits pass


@dataclass(frozen=True)
class Missing:
    """An endpoint without an estimate: ``kind`` is NOT_YET_RUN, NOT_BUILT or "not evaluable"; ``why`` says more."""

    kind: str
    why: str


@dataclass(frozen=True)
class Row:
    """One endpoint as the page shows it."""

    id: str
    question: str
    effect: object  # an effect of lostmid.study.effects, or Missing
    level: float  # Holm's error level (1 - confidence of the interval)
    low: float
    high: float
    outcome: str
    sentence: str
    note: str = ""


# --------------------------------------------------------------------------- the gate


def gate(record, plan: dict, arm: str) -> tuple[list[str], str]:
    """The variants of a fix arm whose fit passed (the fit checks of lostmid.evidence.fit_checks on the model it
    trains), and a note; NOT_BUILT is raised as Missing when fewer than MIN_PASSING_FITS passed."""
    from lostmid.config import settings_from_section
    from lostmid.evidence.fit_checks import fit_not_evaluable
    from lostmid.evidence.inputs import Inputs
    from lostmid.evidence.settings import EvidenceSettings

    variants = arm_variants(plan, arm)
    if record.bias_summary is None:
        raise _Unavailable(Missing(NOT_YET_RUN, f"no bias_fit_summary of the arm {arm}"))
    summary = record.bias_summary[record.bias_summary.variant.isin(variants)]
    if summary.empty:
        raise _Unavailable(Missing(NOT_YET_RUN, f"no fit of the arm {arm} in the record"))
    inputs = Inputs(variants={v: {} for v in summary.variant.unique()}, model={}, bias_summary=summary)
    ev = settings_from_section(EvidenceSettings, {}, "evidence")
    L, depth = int(summary.L.iloc[0]), int(summary.depth.iloc[0])
    reasons = {v: fit_not_evaluable(inputs, ev, v, L, depth) for v in variants}
    passed = [v for v, why in reasons.items() if why is None]
    failed = "; ".join(f"{v}: {why}" for v, why in reasons.items() if why)
    note = f"{len(passed)} of {len(variants)} fits of {arm} flatten the model it trains" + (
        f" ({failed})" if failed else ""
    )
    if len(passed) < MIN_PASSING_FITS:
        raise _Unavailable(Missing(NOT_BUILT, note))
    return passed, note


class _Unavailable(Exception):
    def __init__(self, missing: Missing):
        super().__init__(missing.why)
        self.missing = missing


# --------------------------------------------------------------------------- each primary's effect


def _needs(table, what: str) -> pd.DataFrame:
    if table is None:
        raise _Unavailable(Missing(NOT_YET_RUN, f"the record has no {what} table"))
    return table


def _seeds_of(record, variants) -> list[int]:
    return sorted(set(record.failure[record.failure.variant.isin(variants)].seed))


def _fix_pair(record, plan: dict, fix_arm: str, base_arm: str) -> tuple[list[str], list[str], str]:
    passed, note = gate(record, plan, fix_arm)
    return passed, arm_variants(plan, base_arm), note


def enough_windows(primary: dict, effect):
    """The effect, or Missing (not yet run) when it rests on fewer windows than the plan's ``n_min``."""
    needed = int(str(primary["n_min"]).split()[0])
    if effect.n < needed:
        raise _Unavailable(Missing(NOT_YET_RUN, f"{effect.n} windows so far, the plan asks for at least {needed}"))
    return effect


def effect_of(primary: dict, record, plan: dict) -> tuple[object, str]:
    """(the primary's effect, a note) by the estimator the plan names, on the arms and step it names."""
    name = primary["estimator"].rsplit(".", 1)[-1]
    arms, step = primary["arms"], primary["checkpoint"]
    horizon = plan["checkpoints"]["horizon"]
    try:
        if name == "position_slope":
            failure = _needs(record.failure, "failure")
            return est.position_slope(failure, arm_variants(plan, arms[0]), step), ""
        if name in ("speed_difference", "preference_difference"):
            failure = _needs(record.failure, "failure")
            fix, base, note = _fix_pair(record, plan, arms[0], arms[1])
            if name == "speed_difference":
                return est.speed_difference(failure, fix, base, horizon), note
            return est.preference_difference(failure, fix, base, step), note
        if name == "speed_interaction":
            failure = _needs(record.failure, "failure")
            without_fix, without_base, note_without = _fix_pair(record, plan, arms[0], arms[1])
            with_fix, with_base, note_with = _fix_pair(record, plan, arms[2], arms[3])
            effect = est.speed_interaction(
                est.speed_differences(failure, without_fix, without_base, horizon),
                est.speed_differences(failure, with_fix, with_base, horizon),
            )
            return effect, f"{note_without}; {note_with}"
        if name == "influence_beyond_position":
            failure, influence = _needs(record.failure, "failure"), _needs(record.influence, "influence")
            variants = arm_variants(plan, arms[0])
            reliability = est.split_half_reliability(failure, influence, variants, step)
            note = (
                f"per-seed Spearman rho of influence with failure: mean {reliability['mean_rho']:.3g}; split-half "
                f"r {reliability['split_half_r']:.3g}, Spearman-Brown reliability {reliability['reliability']:.3g} "
                f"(its ceiling), {reliability['seeds']} seeds"
            )
            return est.influence_beyond_position(failure, influence, variants, step), note
        if name == "share_beyond_position":
            return enough_windows(
                primary, est.share_beyond_position(_needs(record.retrieval, "retrieval examples"))
            ), ""
        if name == "middle_minus_ends":
            return enough_windows(primary, est.middle_minus_ends(_needs(record.retrieval, "retrieval examples"))), ""
    except _Unavailable as missing:
        return missing.missing, ""
    except InputError as err:
        return Missing(NOT_YET_RUN, str(err)), ""
    raise InputError(f"plan primary {primary['id']}: no estimator {primary['estimator']}")


# --------------------------------------------------------------------------- the reading


ANSWERS = {
    reading.AT_LEAST: "Yes, at least as large as the source says",
    reading.SMALLER: "Yes, but smaller than the source says",
    reading.NO_EFFECT: "No effect of the source's size",
    reading.INCONCLUSIVE: "Not decided by this run",
}


def text(value) -> str:
    """A plan's folded string on one line."""
    return " ".join(str(value).split())


def number(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.3g}"


def sentence(primary: dict, effect, low: float, high: float, outcome: str, level: float) -> str:
    """The answer in one sentence: the outcome's words, the estimate, its interval and what it rests on."""
    if isinstance(effect, Missing):
        return f"No answer: {effect.kind}."
    oriented_low, oriented_high = reading.oriented(low, high, primary["direction"])
    words = ANSWERS[outcome]
    if oriented_high < 0:
        words += " (on the other side of 0)"
    elif outcome == reading.INCONCLUSIVE and oriented_low > 0:
        words = "An effect in the source's direction, its size against the source's not decided by this run"
    return (
        f"{words}: {number(effect.estimate)} [{number(low)}, {number(high)}] "
        f"{primary['scale']} ({1 - level:.4g} interval over {effect.n} units: {primary['unit']}; "
        f"the source's size {primary['size']:.3g})."
    )


def rows(plan: dict, record, primary_status: bool) -> list[Row]:
    """Every primary, read: Holm's levels over all of them (p = 1 where there is no estimate), each interval at
    its level, its outcome (none for a missing one) and its sentence."""
    computed = [(p, *effect_of(p, record, plan)) for p in plan["primaries"]]
    p_values = [1.0 if isinstance(e, Missing) else e.p_value for _, e, _ in computed]
    levels = reading.holm_levels(p_values, plan["alpha"])
    found = []
    for (primary, effect, note), level in zip(computed, levels):
        if isinstance(effect, Missing):
            low = high = float("nan")
            outcome = effect.kind if effect.kind != "not evaluable" else reading.INCONCLUSIVE
        else:
            low, high = effect.interval(1 - level)
            outcome = reading.outcome(low, high, primary["direction"], primary["size"])
        if not primary_status and not isinstance(effect, Missing):
            outcome = f"exploratory: {outcome}"
        found.append(
            Row(
                primary["id"],
                text(primary["question"]),
                effect,
                level,
                low,
                high,
                outcome,
                sentence(primary, effect, low, high, outcome.removeprefix("exploratory: "), level),
                note,
            )
        )
    return found


def secondary_rows(plan: dict, record) -> list[dict]:
    """The exploratory secondaries, each at the plan's level (95%, no multiplicity correction, no outcome); a row
    whose data are not in the record reads "not yet run"."""
    step, horizon = plan["checkpoints"]["fixed_mid_step"], plan["checkpoints"]["horizon"]

    def failure():
        return _needs(record.failure, "failure")

    def influence():
        return _needs(record.influence, "influence")

    def retrieval():
        return _needs(record.retrieval, "retrieval examples")

    def fixed(fix, base):
        return _fix_pair(record, plan, fix, base)[0]

    def preference_change(fix, base):
        return est.paired(
            est.late_minus_early(failure(), fixed(fix, base), step),
            est.late_minus_early(failure(), arm_variants(plan, base), step),
        )

    def slope_change(fix, base):
        return MeanEffect(
            est.paired(
                est.position_slope(failure(), fixed(fix, base), step).units,
                est.position_slope(failure(), arm_variants(plan, base), step).units,
            ),
            f"paired by seed (fix - baseline) of the per-seed slope at step {step}; Student t",
        )

    def length_profiles(residual: bool, fixed_b: bool):
        if fixed_b:
            part = _needs(record.length_fit, "length fit profiles")
            return part[(part.residual == residual) & (part.bias == "distance")], "heldout_init"
        part = _needs(record.length_init, "length init profiles")
        return part[part.residual == residual], "seed"

    rows = {
        "e_residual_by_fix_interaction": (
            f"(e) at step {step}: (fix - baseline) without minus with the residual path; Welch t",
            lambda: est.speed_interaction(
                preference_change("fix_nores", "base_nores"), preference_change("fix_res", "base_res")
            ),
        ),
        "influence_beyond_position_noresidual": (
            f"influence beyond a linear position trend at step {step}, the no-residual baseline",
            lambda: est.influence_beyond_position(failure(), influence(), arm_variants(plan, "base_nores"), step),
        ),
        "influence_beyond_position_factor": (
            f"influence beyond position as a factor at step {step}, the residual baseline",
            lambda: est.influence_beyond_position(
                failure(), influence(), arm_variants(plan, "base_res"), step, "factor"
            ),
        ),
        **{
            f"a_position_slope_at_{horizon}_{arm}": (
                f"(a) at step {horizon}, {arm}",
                lambda arm=arm: est.position_slope(failure(), arm_variants(plan, arm), horizon),
            )
            for arm in ("base_res", "base_nores")
        },
        **{
            f"e_slope_difference_{fix}": (
                f"(e) as the paired difference of slopes at step {step}, {fix}",
                lambda fix=fix, base=base: slope_change(fix, base),
            )
            for fix, base in (("fix_res", "base_res"), ("fix_nores", "base_nores"))
        },
        "smollm2_last_minus_first_4096": (
            "success at q = 1 minus q = 0, n = 4096",
            lambda: est.last_minus_first(retrieval(), 4096),
        ),
        "smollm2_middle_minus_ends_1024": (
            "middle minus ends, n = 1024",
            lambda: est.middle_minus_ends(retrieval(), 1024),
        ),
        "smollm2_last_minus_first_1024": (
            "success at q = 1 minus q = 0, n = 1024",
            lambda: est.last_minus_first(retrieval(), 1024),
        ),
        **{
            f"thermodynamic_limit_{'residual' if residual else 'noresidual'}_{'fix' if fixed_b else 'nofix'}": (
                f"growth of log10 first/last (output Jacobian) per doubling of L at init, "
                f"{'with' if residual else 'without'} the residual path, "
                f"{'with the literal B fitted at each L' if fixed_b else 'B = 0'}",
                lambda residual=residual, fixed_b=fixed_b: est.imbalance_growth(*length_profiles(residual, fixed_b)),
            )
            for residual in (True, False)
            for fixed_b in (False, True)
        },
    }
    found = []
    for id_, (what, compute) in rows.items():
        try:
            effect = compute()
        except (_Unavailable, InputError) as why:
            found.append(
                {
                    "id": id_,
                    "what": what,
                    "estimate": math.nan,
                    "low": math.nan,
                    "high": math.nan,
                    "n": 0,
                    "note": f"{NOT_YET_RUN}: {why}",
                }
            )
            continue
        low, high = effect.interval(plan["level"])
        found.append(
            {
                "id": id_,
                "what": what,
                "estimate": effect.estimate,
                "low": low,
                "high": high,
                "n": effect.n,
                "note": effect.method,
            }
        )
    return found


# --------------------------------------------------------------------------- the page


EXPLORATORY_PAGES = ("../runs/default/results.md", "validation.md", "length.md", "retrieval.md")


def provenance(record, status: tuple[bool, str]) -> str:
    """Where the page came from: the plan's commit beside the run's, whether the endpoints are primary, and the
    run's manifest stamp."""
    from lostmid.manifest import stamp
    from lostmid.study.record import plan_line

    primary, why = status
    lines = [plan_line(record.manifest), f"- Endpoints: {'primary' if primary else 'EXPLORATORY'} ({why})."]
    if record.manifest is not None:
        lines += ["", stamp(record.manifest)]
    return "\n".join(lines)


def answers(found: list[Row]) -> list[str]:
    """Each question and its answer in one sentence, one line each (the README quotes them)."""
    return [f"- **{row.question}** {row.sentence}" for row in found]


README_START = "<!-- findings: lostmid findings --readme README.md -->"
README_END = "<!-- /findings -->"


def markdown(plan: dict, record, found: list[Row], secondaries: list[dict], status, figures: dict) -> str:
    by_id = {p["id"]: p for p in plan["primaries"]}
    out = [
        "# Findings",
        "",
        "<!-- Generated by `lostmid findings` from the study's run record (runs/study) and its plan; do not edit. -->",
        "",
        "The project's questions, answered once by a run planned before it began (docs/study.md). Ten primary",
        "endpoints, Holm across them; each interval is at its primary's Holm level. One section per question",
        "follows; the exploratory rows close the page.",
        "",
        provenance(record, status),
        "",
        "**The answers.**",
        "",
    ]
    out += answers(found)
    out += [
        "",
        "| endpoint | estimate | interval | level | p | units | outcome |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in found:
        effect = row.effect
        if isinstance(effect, Missing):
            out.append(f"| `{row.id}` | – | – | {row.level:.3g} | – | – | {row.outcome} |")
        else:
            out.append(
                f"| `{row.id}` | {number(effect.estimate)} | [{number(row.low)}, {number(row.high)}] | "
                f"{row.level:.3g} | {effect.p_value:.3g} | {effect.n} | {row.outcome} |"
            )
    for row in found:
        primary = by_id[row.id]
        out += ["", f"## {row.question}", "", f"{row.sentence} (`{row.id}`, {text(primary['source'])})", ""]
        out.append(f"The source's words: “{text(primary['words'])}”.")
        if isinstance(row.effect, Missing):
            out += ["", f"{row.effect.kind}: {row.effect.why}"]
        else:
            out += ["", f"Estimator: {row.effect.method}."]
        if row.note:
            out += ["", row.note + "."]
        if row.id in figures:
            out += ["", f"![{row.id}]({figures[row.id]})"]
    out += [
        "",
        "---",
        "",
        "**Exploratory rows.**",
        "",
        "Every row below, and every row of the other pages, is exploratory: 95% intervals, no multiplicity",
        "correction, no outcome. The other pages:",
        ", ".join(f"[{p}]({p})" for p in EXPLORATORY_PAGES) + ".",
        "",
        "| row | what | estimate | 95% interval | units | note |",
        "|---|---|---|---|---|---|",
    ]
    for row in secondaries:
        out.append(
            f"| `{row['id']}` | {row['what']} | {number(row['estimate'])} | "
            f"[{number(row['low'])}, {number(row['high'])}] | {row['n']} | {row['note']} |"
        )
    return "\n".join(out) + "\n"


def figure_row(row: Row, primary: dict) -> dict:
    """A row of ``lostmid.plots.findings.finding_figure``: the endpoint, its estimate and Holm-level interval, the
    source's size signed on the estimate's axis, its unit and outcome."""
    sign = 1 if primary["direction"] == "increase" else -1
    return {
        "name": f"{row.id} ({1 - row.level:.4g} interval)",
        "estimate": row.effect.estimate,
        "low": row.low,
        "high": row.high,
        "source_size": sign * primary["size"],
        "unit": primary["scale"],
        "outcome": row.outcome,
    }


def write_findings(plan_path, run, out, figures_dir, repo, readme=None) -> list[Row]:
    """docs/findings.md (``out``) and its figures from the record ``run`` and the plan, and the answers into
    ``readme`` between its findings markers (where given); returns the rows."""
    from lostmid import io
    from lostmid.plots.findings import finding_figure
    from lostmid.study.plan import read_plan
    from lostmid.study.record import plan_status, read_record

    plan = read_plan(plan_path)
    record = read_record(run)
    status = plan_status(repo, plan_path, record.manifest)
    found = rows(plan, record, status[0])
    figures = {}
    by_id = {p["id"]: p for p in plan["primaries"]}
    for row in found:
        if not isinstance(row.effect, Missing):
            path = Path(figures_dir) / f"findings_{row.id}.png"
            finding_figure([figure_row(row, by_id[row.id])], path, title=row.question)
            figures[row.id] = Path(os.path.relpath(path, Path(out).parent)).as_posix()
    page = markdown(plan, record, found, secondary_rows(plan, record), status, figures)
    io.write_text(io.wrap_prose(page), out)
    if readme is not None:
        block = f"From [{Path(out).name}]({Path(os.path.relpath(out, Path(readme).parent)).as_posix()}):\n\n"
        block += io.wrap_prose("\n".join(answers(found))) + "\n"
        io.write_text(
            io.between_markers(Path(readme).read_text(), README_START, README_END, block, str(readme)), readme
        )
    return found
