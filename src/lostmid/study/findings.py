"""The first study's primaries and secondaries read from its run record (``runs/study``, ``lostmid.study.record``)
and its plan (study/plan.yaml): each primary's effect by the reading its estimator registers, its gate, and the
exploratory secondaries (``secondaries.yaml``); ``lostmid.pages.findings`` writes them into docs/findings.md.

An endpoint whose data are not in the record yet reads "not yet run"; a fix arm whose fits did not flatten the model
it trains reads "the fix could not be built for this network". Neither has a p-value: both count in Holm's k with
p = 1. Its readings are registered in the one reading of a plan (``lostmid.study.reading.READINGS``) under the
estimators' dotted paths the plan names."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pandas as pd
import yaml

from lostmid.errors import InputError
from lostmid.evidence.fit_checks import fit_flatness, fit_reasons
from lostmid.study import estimators as est
from lostmid.study import reading
from lostmid.study.plan import arm_variants
from lostmid.study.reading import NOT_BUILT, NOT_YET_RUN, READINGS, SOURCE, Gate, Missing, Read, number, step_of, text

MIN_PASSING_FITS = 2  # the plan's gate: an arm is decided when at least 2 of its fits pass
ESTIMATORS = "lostmid.study.estimators."  # the dotted path of the plan's estimators


# --------------------------------------------------------------------------- the gate


def gate(record, plan: dict, arm: str) -> tuple[list[str], str]:
    """The variants of a fix arm whose fit passed (the fit checks of lostmid.evidence.fit_checks on the model it
    trains), and a note; NOT_BUILT is raised as Missing when fewer than MIN_PASSING_FITS passed."""

    variants = arm_variants(plan, arm)
    if record.bias_summary is None:
        raise Missing(NOT_YET_RUN, f"no bias_fit_summary of the arm {arm}")
    if not record.bias_summary.variant.isin(variants).any():
        raise Missing(NOT_YET_RUN, f"no fit of the arm {arm} in the record")
    found = Gate.of(arm, fit_reasons(record.bias_summary, variants), MIN_PASSING_FITS)
    note = f"{len(found.passed)} of {len(variants)} fits of {arm} flatten the model it trains"
    if failed := [fit for fit, why in found.reasons.items() if why]:
        flat = fit_flatness(record.bias_summary, failed)
        best = min(flat, key=lambda fit: flat[fit].estimate)
        note += (
            f" (the flattest that fails, `{best}`: log(E_inf with B / at B = 0) {number(flat[best].estimate)} "
            f"[{number(flat[best].low)}, {number(flat[best].high)}])"
        )
    if not found.decided:
        raise Missing(NOT_BUILT, note)
    return found.passed, note


# --------------------------------------------------------------------------- each primary's effect


def _needs(table, what: str) -> pd.DataFrame:
    if table is None:
        raise Missing(NOT_YET_RUN, f"the record has no {what} table")
    return table


def _fix_pair(record, plan: dict, row: dict, first: int = 0) -> tuple[list[str], list[str], str]:
    """The row's fix arm (its arms from ``first``: the fix, then its baseline) as the fits that passed the gate,
    the baseline's variants and the gate's note; every fit of the fix arm where the row is read ``ungated``
    (``over_every_fit``)."""
    fix_arm, base_arm = row["arms"][first : first + 2]
    passed, note = (arm_variants(plan, fix_arm), "") if row.get("ungated") else gate(record, plan, fix_arm)
    return passed, arm_variants(plan, base_arm), note


def enough_windows(row: dict, effect):
    """The effect, or Missing (not yet run) when it rests on fewer windows than the row's ``n_min`` (if it has one)."""
    needed = int(str(row.get("n_min", 0)).split()[0])
    if effect.n < needed:
        raise Missing(NOT_YET_RUN, f"{effect.n} windows so far, the plan asks for at least {needed}")
    return effect


# Each endpoint's reading of the record, by the name of the estimator a row of the plan (or of secondaries.yaml)
# names: fn(record, plan, row, step) -> (effect, note), on the arms the row names, at its step.


def _failure(record) -> pd.DataFrame:
    return _needs(record.failure, "failure")


def _windows(estimator, record, plan, row, step):
    """The reading of a retrieval estimator ``estimator(examples[, n])`` at the row's length ``n`` (if it names one),
    over enough windows (``enough_windows``)."""
    examples = _needs(record.retrieval, "retrieval examples")
    effect = estimator(examples, **({"n": row["n"]} if "n" in row else {}))
    return enough_windows(row, effect), ""


def _fix_effect(estimator, record, plan, row, step):
    """The reading of a paired fix-minus-baseline estimator ``estimator(failure, fix, base, step)``; the gate's note."""
    failure = _failure(record)
    fix, base, note = _fix_pair(record, plan, row)
    return estimator(failure, fix, base, step), note


def _interaction(per_seed, record, plan, row, step):
    """The Welch interaction of ``per_seed(failure, fix, base, step)`` (fix - baseline per seed) without the residual
    path minus with it (the row's arms: the no-residual pair, then the residual pair)."""
    failure = _failure(record)
    pairs = [_fix_pair(record, plan, row, i) for i in (0, 2)]
    effect = est.speed_interaction(*(per_seed(failure, fix, base, step) for fix, base, _ in pairs))
    return effect, "; ".join(note for _, _, note in pairs)


def _influence(record, plan, row, step):
    failure, influence = _failure(record), _needs(record.influence, "influence")
    variants = arm_variants(plan, row["arms"][0])
    note = ""
    if "reported_beside" in row:  # the primary: its split-half reliability beside it
        reliability = est.split_half_reliability(failure, influence, variants, step)
        note = (
            f"per-seed Spearman rho of influence with failure: mean {reliability['mean_rho']:.3g}; split-half "
            f"r {reliability['split_half_r']:.3g}, Spearman-Brown reliability {reliability['reliability']:.3g} "
            f"(its ceiling), {reliability['seeds']} seeds"
        )
    return est.influence_beyond_position(failure, influence, variants, step, row.get("position", "linear")), note


def _growth(record, plan, row, step):
    if row["profiles"] == "fit":
        part = _needs(record.length_fit, "length fit profiles")
        return est.imbalance_growth(
            part[(part.residual == row["residual"]) & (part.bias == "distance")], "heldout_init"
        ), ""
    part = _needs(record.length_init, "length init profiles")
    return est.imbalance_growth(part[part.residual == row["residual"]], "seed"), ""


def _preference_change(failure, fix, base, step):
    return est.preference_difference(failure, fix, base, step).units


ENDPOINTS = {
    "position_slope": lambda record, plan, row, step: (
        est.position_slope(_failure(record), arm_variants(plan, row["arms"][0]), step),
        "",
    ),
    "speed_difference": partial(_fix_effect, est.speed_difference),
    "preference_difference": partial(_fix_effect, est.preference_difference),
    "slope_difference": partial(_fix_effect, est.slope_difference),
    "speed_interaction": partial(_interaction, est.speed_differences),
    "preference_interaction": partial(_interaction, _preference_change),
    "influence_beyond_position": _influence,
    "share_beyond_position": partial(_windows, est.share_beyond_position),
    "middle_minus_ends": partial(_windows, est.middle_minus_ends),
    "end_minus_start": partial(_windows, est.end_minus_start),
    "imbalance_growth": _growth,
}


def effect_of(row: dict, record, plan: dict) -> tuple[object, str]:
    """(the endpoint's effect, a note) by the estimator the row names (``ENDPOINTS``), on the arms and step it
    names (``reading.step_of``); Missing where the record cannot give it."""
    name = row["estimator"].rsplit(".", 1)[-1]
    if name not in ENDPOINTS:
        raise InputError(f"plan primary {row['id']}: no estimator {row['estimator']}")
    try:
        return ENDPOINTS[name](record, plan, row, step_of(row, plan))
    except Missing as missing:
        return missing, ""
    except InputError as err:
        return Missing(NOT_YET_RUN, str(err)), ""


def over_every_fit(row: dict, record, plan: dict, missing):
    """The effect of a row whose fix arm failed its gate (``missing``: NOT_BUILT), read on every fit of its trained
    arms (exploratory); None for a row missing for another reason."""
    if not isinstance(missing, Missing) or missing.kind != NOT_BUILT:
        return None
    effect, _ = effect_of({**row, "ungated": True}, record, plan)
    return None if isinstance(effect, Missing) else effect


def read_endpoint(record, plan: dict, primary: dict) -> Read:
    """A primary of study/plan.yaml read by ``effect_of``: its effect (or Missing, p = 1) and its note."""
    effect, note = effect_of(primary, record, plan)
    p = 1.0 if isinstance(effect, Missing) else effect.p_value
    return Read(primary, effect, p, note=note, step=step_of(primary, plan))


READINGS.update({ESTIMATORS + name: read_endpoint for name in ENDPOINTS})


def rows(plan: dict, record, primary_status: bool) -> list[Read]:
    """Every primary, read (``reading.read_primaries``), each size named as the source's."""
    return reading.read_primaries(plan, record, primary_status, label=SOURCE)


SECONDARIES = Path(__file__).with_name("secondaries.yaml")


def secondary_rows(plan: dict, record, path: Path = SECONDARIES, every_fit: bool = False) -> list[dict]:
    """The exploratory secondaries (``secondaries.yaml``), each at the plan's level (95%, no multiplicity correction,
    no outcome); a row whose data are not in the record reads "not yet run". ``every_fit``: a row whose fix arm
    failed its gate is read on every fit of its trained arms (``over_every_fit``), its note saying so."""
    found = []
    for row in yaml.safe_load(path.read_text())["secondaries"]:
        effect, _ = effect_of(row, record, plan)
        every = over_every_fit(row, record, plan, effect) if every_fit else None
        if every is not None:
            why, effect = effect.why, every
        if isinstance(effect, Missing):
            estimate = low = high = math.nan
            n, note = 0, f"{NOT_YET_RUN}: {effect.why}"
        else:
            (low, high), estimate, n, note = effect.interval(plan["level"]), effect.estimate, effect.n, effect.method
        if every is not None:
            note = f"the arm failed its gate ({why}); over every fit of its trained arm: {note}"
        what = text(row["what"]).format(step=step_of(row, plan))
        found.append(
            {"id": row["id"], "what": what, "estimate": estimate, "low": low, "high": high, "n": n, "note": note}
        )
    return found
