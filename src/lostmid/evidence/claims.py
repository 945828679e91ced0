"""The evaluation of the evidence stage's claims: one row of the evidence table per (claim, setting).

Every claim the workflow can test is a row of ``claims.yaml`` (``lostmid.evidence.registry.CLAIMS``): the settings
it is evaluated in, its reading (the per-unit ``Effects`` of one setting), its estimator (which makes the
``Estimate``) and its decision rule fixed in advance (its margin an evidence setting). ``evidence_table``
evaluates them all, one row per (claim, setting), each verdict read off by ``decisions.decide``.

Missing inputs. A claim whose table was not given, or whose variants are not in the run, gets one row whose
``method`` starts with "not run:" and says what is missing (NaN estimate, inconclusive), so the table always
lists every claim. A claim measured but not decidable (its bias fit did not do what it is for, the reference
never learns, a variant never reaches mid-training) says "not evaluable:" and why, keeps its estimate where
there is one, and gets no verdict. A table that is given but malformed is an error (``EvidenceError``).

Family-wise correction. The rows of one family (``Claim.family``) decided by an interval over seeds are decided
again on Bonferroni intervals (``family_wise``), into the adjusted_* columns; ``verdict`` stays the row's own.

Pairing of variants. The *reference* of a remedy variant is the variant without a remedy whose ``model`` and
``train`` overrides are identical apart from ``train.seed_batch`` (float rounding only); if several qualify the
one named ``baseline`` wins, else the first by name (``Inputs.reference``). A setting whose reference is missing
gets its own "not run" row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import SimpleNamespace

import pandas as pd

from lostmid.evidence import decisions as dec
from lostmid.evidence.deviations import DEVIATIONS, first_written
from lostmid.evidence.estimators import made_by
from lostmid.evidence.inputs import (
    CHECK,
    CLAIM,
    COLUMNS,
    DECIDED,
    NOT_EVALUABLE,
    NOT_RUN,
    PILOT,
    STATUS_WORDS,
    Claim,
    Estimate,
    EvidenceError,
    Inputs,
    NotRun,
    Setting,
    no_estimate,
)
from lostmid.evidence.readings import mid_training_step
from lostmid.evidence.registry import CLAIMS, CLAIMS_BY_NAME
from lostmid.evidence.report import verdict_words
from lostmid.evidence.settings import EvidenceSettings


@dataclass
class Evaluation:
    """One row of the table with what made it: the claim, its setting, its estimate (None: not run) and
    its status (``lostmid.evidence.inputs.STATUSES``)."""

    claim: Claim
    setting: Setting
    estimate: Estimate | None
    status: str
    row: dict


def status_of(claim: Claim, setting: Setting, estimate: Estimate, ev: EvidenceSettings) -> tuple[str, str]:
    """The row's status and method: not evaluable when its setting or its computation says so (the method
    says why, then what was measured), a pilot when its interval is over fewer replicates than the run's
    plan (``evidence.min_windows`` for the retrieval stage's windows, then ``evidence.min_seeds``; four-seed
    verdicts do not repeat across machines, docs/validation.md; a deterministic value, no seeds, is never a
    pilot), else as computed."""
    status, method, n = estimate.status, estimate.interval.method, estimate.interval.n
    if status != DECIDED:
        words = f"{STATUS_WORDS[status]}: {method}"
    elif claim.replicates == "windows" and 0 < n < ev.min_windows:
        plan = f"the stage's plan of {ev.min_windows} (evidence.min_windows)"
        status, words = PILOT, f"pilot: {n} windows, fewer than {plan}; {method}"
    elif 0 < n < ev.min_seeds:
        plan = f"the run's plan of {ev.min_seeds} (evidence.min_seeds)"
        status, words = PILOT, f"pilot: {n} seeds, fewer than {plan}; {method}"
    else:
        words = method
    if setting.not_evaluable:  # the reason first, then what was measured
        measured = method if status == NOT_EVALUABLE else words
        return NOT_EVALUABLE, f"{STATUS_WORDS[NOT_EVALUABLE]}: {setting.not_evaluable}; {measured}"
    return status, words


CLAIM_COLUMNS = ("kind", "source", "statistic", "unit", "log_axis")
SETTING_COLUMNS = ("variant", "L", "depth", "residual", "checkpoint", "reading")
ADJUSTED_COLUMNS = ("adjusted_level", "adjusted_low", "adjusted_high", "adjusted_verdict")


def _row_of(claim: Claim, setting: Setting, estimate: Estimate, ev: EvidenceSettings) -> tuple[str, dict]:
    """The status and row of one estimate: its interval decided by the claim's rule (``decisions.decide``);
    a row without a verdict keeps its computed estimate and interval. Outside a family (until evidence_table says
    otherwise) the row's own interval decides; the columns of the rules as first written are filled by
    evidence_table (as_first_written) for the rows a deviation touches."""
    status, method = status_of(claim, setting, estimate, ev)
    i, decision = estimate.interval, dec.decide(claim.rule, estimate, ev, status)
    return status, {
        "claim": claim.name,
        "family": claim.family or "",
        "setting": setting.words(),
        **{key: getattr(claim, key) for key in CLAIM_COLUMNS},
        **{key: getattr(setting, key) for key in SETTING_COLUMNS},
        **{"estimate": i.estimate, "ci_low": i.low, "ci_high": i.high, "n_seeds": i.n, "method": method},
        **{"verdict": decision.verdict, "rule": decision.words, "rule_kind": decision.rule.kind},
        **{"margin": decision.rule.margin, "note": estimate.note, "status": status, "family_size": 0},
        **{key: getattr(decision, key) for key in ADJUSTED_COLUMNS},
        **{"verdict_as_first_written": "", "deviations": ""},
    }


def _not_run(claim: Claim, setting: Setting, why: NotRun | str, ev: EvidenceSettings) -> Evaluation:
    """The row of a claim not evaluated in ``setting`` (``why``: a NotRun, or the reason it was not run):
    NaN estimate, no verdict, and no rule (kind "none")."""
    status = why.status if isinstance(why, NotRun) else NOT_RUN
    _, row = _row_of(claim, setting, no_estimate(status, str(why)), ev)
    row.update(rule=dec.NO_VERDICT_WORDS[NOT_RUN], rule_kind="none", margin=math.nan)
    return Evaluation(claim, setting, None, status, row)


def _evaluation(claim: Claim, inputs: Inputs, ev: EvidenceSettings, setting: Setting) -> Evaluation:
    """The row of ``claim`` in one ``setting``: its reading, estimated by its declared estimator, and decided."""
    if setting.missing:
        return _not_run(claim, setting, setting.missing, ev)
    try:
        estimate = made_by(claim, inputs, ev, setting)
    except NotRun as why:
        return _not_run(claim, setting, why, ev)
    return Evaluation(claim, setting, estimate, *_row_of(claim, setting, estimate, ev))


def _evaluations(claim: Claim, inputs: Inputs, ev: EvidenceSettings, made: list | None = None) -> list[Evaluation]:
    """The rows of ``claim`` under the evidence settings ``ev``: one per setting it is evaluated in, or the one "not
    run" row saying why there are none. With ``made`` (its rows under other rules), an estimate already made is
    decided again: the settings are derived again (a gate may fall otherwise: cheap), and a reading is made only
    for a setting that exists under ``ev`` alone."""
    missing = [name for name in claim.needs if getattr(inputs, name) is None]
    if missing:
        return [_not_run(claim, Setting(), f"table {', '.join(missing)} not given", ev)]
    try:
        settings = claim.settings(inputs, ev)
    except NotRun as why:
        return [_not_run(claim, Setting(), why, ev)]
    by_setting = {replace(e.setting, not_evaluable=None): e for e in made or ()}
    found = []
    for setting in settings:
        e = by_setting.get(replace(setting, not_evaluable=None))
        if e is None:
            found.append(_evaluation(claim, inputs, ev, setting))
        elif e.estimate is None:  # not run in this setting, whatever the rules
            found.append(e)
        else:
            found.append(Evaluation(claim, setting, e.estimate, *_row_of(claim, setting, e.estimate, ev)))
    return found


def evaluate_claim(claim: Claim, inputs: Inputs, ev: EvidenceSettings) -> list[dict]:
    """The rows of one claim: one per setting, or one "not run" row saying what is missing (each
    row decided by its own interval: the family-wise correction, and the note of a row read beside another
    claim's, are ``evidence_table``'s)."""
    return [e.row for e in _evaluations(claim, inputs, ev)]


def in_family(e: Evaluation) -> bool:
    """A row counts in its claim's family when it has a verdict read off an interval over seeds
    (two or more seeds, finite bounds): not-run and not-evaluable rows make no claim, and a
    deterministic value has no sampling error to correct."""
    row = e.row
    return (
        e.claim.family is not None
        and e.estimate is not None
        and e.status == DECIDED
        and row["n_seeds"] >= 2
        and math.isfinite(row["ci_low"])
        and math.isfinite(row["ci_high"])
    )


def family_wise(evaluations: list[Evaluation], ev: EvidenceSettings) -> None:
    """Bonferroni: each of the k rows of a family is decided again, by the same rule, on its interval
    at level 1 - (1 - level) / k (``decisions.decide``, from the estimate's per-unit sample); if every
    such interval covers its true value, which happens with probability at least ``level``, no row of
    the family is wrongly supported or wrongly contradicted. Fills the adjusted_* columns in place."""
    families: dict[str, list[Evaluation]] = {}
    for e in evaluations:
        if in_family(e):
            families.setdefault(e.claim.family, []).append(e)
    for members in families.values():
        for e in members:
            decision = dec.decide(e.claim.rule, e.estimate, ev, e.status, family_size=len(members))
            e.row.update(family_size=len(members), **{key: getattr(decision, key) for key in ADJUSTED_COLUMNS})


def as_first_written(evaluations: list[Evaluation], inputs: Inputs, ev: EvidenceSettings) -> None:
    """Deviations on the record (``lostmid.evidence.deviations``): every row decided again with every rule as
    first written, from the estimates already made (``_evaluations`` given them); only a claim whose reading itself
    reads a restored setting (``Deviation.rereads``) is read again. A row whose claim a deviation names, or
    whose verdict (or "not evaluable") the first rules change, gets that verdict in ``verdict_as_first_written``
    and the deviations in ``deviations``. Other rows leave both empty. In place."""
    first, reread = first_written(ev), {name for d in DEVIATIONS for name in d.rereads}
    made: dict[Claim, list[Evaluation]] = {}
    for e in evaluations:
        made.setdefault(e.claim, []).append(e)
    earlier = {
        (e.row["claim"], e.row["setting"]): e.row
        for claim, own in made.items()
        for e in _evaluations(claim, inputs, first, None if claim.name in reread else own)
    }
    for e in evaluations:
        old = earlier.get((e.row["claim"], e.row["setting"]))
        own = [d.name for d in DEVIATIONS if e.claim.name in d.claims]
        then = verdict_words(SimpleNamespace(**old)) if old is not None else "not evaluated under the first rules"
        if own or then != verdict_words(SimpleNamespace(**e.row)):
            e.row.update(
                verdict_as_first_written=then, deviations=", ".join(own) or "a check or gate it depends on changed"
            )


def read_beside(evaluations: list[Evaluation], ev: EvidenceSettings) -> None:
    """The note of a row whose claim is read beside another (``Claim.beside``: a model-free statistic beside
    the logistic slope): the other row's estimate and verdict in the same setting, this row's verdict, and
    whether the two differ. In place; from the rows made, nothing computed again."""
    made = {(e.claim.name, e.row["setting"]): e for e in evaluations}
    for e in evaluations:
        if e.claim.beside is None or e.estimate is None or e.estimate.status != DECIDED:
            continue
        name, words = e.claim.beside
        other = made.get((name, e.row["setting"]))
        if other is None or other.estimate is None or other.estimate.status != DECIDED:
            e.row["note"] = f"{words} has no verdict to compare"
            continue
        i = other.estimate.interval
        first, second = dec.verdict_by(other.claim.rule, i, ev), dec.verdict_by(e.claim.rule, e.estimate.interval, ev)
        agree = "the two verdicts agree" if first == second else "THE TWO VERDICTS DIFFER"
        e.row["note"] = f"{words} reads {dec.interval_words(i)}, {first}; this one {second}: {agree}"


def evidence_table(inputs: Inputs, ev: EvidenceSettings, claims: list[Claim] | None = None) -> pd.DataFrame:
    """The evidence table: one row per (claim, setting), in the order of ``CLAIMS``, with the
    family-wise correction of the blog's rows and the verdicts under the rules as first written."""
    evaluations = [e for claim in (CLAIMS if claims is None else claims) for e in _evaluations(claim, inputs, ev)]
    read_beside(evaluations, ev)
    family_wise(evaluations, ev)
    as_first_written(evaluations, inputs, ev)
    table = pd.DataFrame([e.row for e in evaluations], columns=COLUMNS + ["log_axis"])
    bad = (set(table.verdict) | set(table.adjusted_verdict)) - set(dec.VERDICTS)
    if bad:
        raise RuntimeError(f"unexpected verdicts {bad}")
    return table.astype(
        {"L": "Int64", "depth": "Int64", "n_seeds": "int64", "residual": "boolean", "family_size": "int64"}
    )


__all__ = [
    "CHECK",
    "CLAIM",
    "CLAIMS",
    "CLAIMS_BY_NAME",
    "COLUMNS",
    "Claim",
    "EvidenceError",
    "Inputs",
    "NotRun",
    "Estimate",
    "Setting",
    "evaluate_claim",
    "evidence_table",
    "mid_training_step",
]
