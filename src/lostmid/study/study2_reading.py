"""The second study's reading (study/plan2.yaml, issue 52) of its run record (runs/<name>/: the manifest, the
overlay as run and the tables failure, influence and bias_summary, as ``lostmid study-record`` writes them).

Every primary is computed as the plan words it: its estimator by its dotted path (``ESTIMATORS``), at the step
it names, the fit of B the unit of a fix arm (seeds nested in fits), two one-sided tests for an absence, the
three influence fits with "no effect" only where all agree; Holm over the ten (``lostmid.study.reading``, where
its readings are registered under the estimators' dotted paths). A fix arm is decided when at
least ``GATE`` (16 of 24) of its fits pass the fit checks on the model it trains (``gate``); its primaries then
use the fits that passed. A gated arm's primaries count with p = 1 and their numbers, over all its fits, are
reported as exploratory (95%, no outcome). Where the plan check (``plan_status``) fails, every outcome and
sentence says exploratory.

The plan names each arm; the run's variants are the arm's name prefixed ``study2_`` (``VARIANT_PREFIX``;
config/study2.yaml), one variant per fit of a fix arm (``study2_fix_res_1`` .. ``_24``), read from the record's
overlay. A shrunk run (fewer fits) is gated at the same share: at least ceil(16/24 of its fits).
"""

from __future__ import annotations

import math
import re
from functools import partial

import pandas as pd

from lostmid.errors import InputError
from lostmid.evidence.fit_checks import fit_reasons
from lostmid.stats import study2
from lostmid.study import estimators as est
from lostmid.study import reading
from lostmid.study.reading import NOT_SHOWN_ABSENT, READINGS, SHOWN_ABSENT, Gate, Read, step_of
from lostmid.study.record import Record, read_record

VARIANT_PREFIX = "study2_"
RESAMPLES = 2000  # plan2's (a) estimator_words: a cluster bootstrap of 2000 resamples
GATE = (16, 24)  # plan2 gate.rule: an arm is decided when at least 16 of its 24 fits pass
TABLES = ("failure", "influence", "bias_summary")
SLOPE = "lostmid.stats.study2.common_slope_effect"


def read_record2(run) -> Record:
    """The record folder ``run`` checked whole (``lostmid.study.record.read_record``) with the tables ``TABLES``."""
    return read_record(run, TABLES)


def arm_variants(overlay: dict, arm: str) -> list[str]:
    """The run's variants of the plan's ``arm``: ``study2_<arm>``, or ``study2_<arm>_<k>`` one per fit (by k)."""
    names = dict.fromkeys(v for entry in overlay.get("grid", []) for v in entry["variants"])
    pattern = re.compile(rf"{re.escape(VARIANT_PREFIX + arm)}(?:_(\d+))?")
    found = [(m.group(1), v) for v in names if (m := pattern.fullmatch(v))]
    if not found:
        raise InputError(f"the run's overlay has no variant of the plan's arm {arm} ({VARIANT_PREFIX}{arm}[_k])")
    return [v for _, v in sorted(found, key=lambda kv: int(kv[0] or 0))]


def with_variants(plan: dict, overlay: dict) -> dict:
    """The plan with each arm's ``variants`` read from the overlay (``arm_variants``), as study/plan.yaml lists
    them: what ``lostmid study-record`` and the figures read."""
    arms = {name: {**arm, "variants": arm_variants(overlay, name)} for name, arm in plan["run"]["arms"].items()}
    return {**plan, "run": {**plan["run"], "arms": arms}}


def gate(record: Record, arm: str) -> Gate:
    """The plan's gate of the fix ``arm``: at least 16 of 24 (the same share of a shrunk run's fits) pass."""
    fits = arm_variants(record.overlay, arm)
    return Gate.of(arm, fit_reasons(record.bias_summary, fits), math.ceil(len(fits) * GATE[0] / GATE[1]))


# --------------------------------------------------------------------------- each primary's effect


def nested(per_seed: pd.Series, failure: pd.DataFrame, fits: list[str]) -> pd.Series:
    """Per-seed values indexed by (fit, seed): each seed under the fit whose variant trained it."""
    owner = failure[failure.variant.isin(fits)].drop_duplicates("seed").set_index("seed").variant
    index = pd.MultiIndex.from_arrays([owner.loc[per_seed.index].to_numpy(), per_seed.index], names=["fit", "seed"])
    return pd.Series(per_seed.to_numpy(), index=index)


def read_slope(record: Record, plan: dict, primary: dict, resamples: int = RESAMPLES) -> Read:
    step = step_of(primary, plan)
    variants = arm_variants(record.overlay, primary["arms"][0])
    rows = est.arm_rows(record.failure, variants, step=step)[["seed", "p", "failures", "n"]]
    effect = study2.common_slope_effect(rows, resamples)
    return Read(primary, effect, effect.p_value, step=step)


def fix_arm_units(record: Record, plan: dict, primary: dict) -> tuple[pd.Series, str, Gate, int]:
    """A fix-arm primary's per-seed values indexed by (fit, seed) over the fits its gate lets it read (``Gate.used``),
    what they are in words, the gate and the step: (d) by its speed and (e) by late minus early, fix minus baseline
    on the same seed; an absence by the fix arm's own late minus early."""
    step, found = step_of(primary, plan), gate(record, primary["arms"][0])
    fits, failure = found.used, record.failure
    if primary.get("reading") == "equivalence":
        per_seed = est.late_minus_early(failure, fits, step)
        what = f"per seed of the fix arm, late minus early failure at step {step}"
    elif isinstance(primary["checkpoint"], int):
        base = arm_variants(record.overlay, primary["arms"][1])
        per_seed = est.paired(est.late_minus_early(failure, fits, step), est.late_minus_early(failure, base, step))
        what = f"per seed, late minus early failure at step {step}, fix minus baseline on the same seed"
    else:
        per_seed = est.speed_differences(failure, fits, arm_variants(record.overlay, primary["arms"][1]), step)
        what = f"per seed, mean failure over steps 0-{step}, fix minus baseline on the same seed"
    return nested(per_seed, failure, fits), what, found, step


def _fix_arm(record: Record, plan: dict, primary: dict) -> Read:
    """A fix-arm primary (``fix_arm_units``), the fit the unit (seeds nested in fits), p by two one-sided tests for
    an absence. Over the fits that passed the arm's gate, all of them (exploratory, p = 1) where it failed."""
    units, what, found, step = fix_arm_units(record, plan, primary)
    effect = study2.fit_cluster_effect(units, what)
    p = study2.equivalence(effect, primary["size"]).p if primary.get("reading") == "equivalence" else effect.p_value
    return Read(primary, effect, p if found.decided else 1.0, found, step=step)


def read_influence(record: Record, plan: dict, primary: dict) -> Read:
    step = step_of(primary, plan)
    variants = arm_variants(record.overlay, primary["arms"][0])
    fits = study2.influence_fits(est.influence_and_failure(record.failure, record.influence, variants, step))
    fixed = fits[study2.INFLUENCE_FITS[0]]
    return Read(primary, fixed, fixed.p_value, fits=fits, step=step)


# Each primary's reading by the estimator's dotted path the plan names.
READINGS.update(
    {
        SLOPE: read_slope,
        "lostmid.stats.study2.fit_cluster_effect": _fix_arm,
        "lostmid.stats.study2.equivalence": _fix_arm,
        "lostmid.stats.study2.influence_fits": read_influence,
    }
)


# --------------------------------------------------------------------------- the reading


def read_primary(read: Read, plan: dict, level: float) -> tuple[float, float, str]:
    """(low, high, outcome) of a primary at its Holm ``level`` (``reading.interval_outcome``): an equivalence
    primary's by two one-sided tests, the influence primary's where its three fits agree."""
    if not read.decided or (read.primary.get("reading") != "equivalence" and read.fits is None):
        return reading.interval_outcome(read, plan, level)
    if read.primary.get("reading") == "equivalence":
        tost = study2.equivalence(read.effect, read.primary["size"], level)
        return tost.low, tost.high, SHOWN_ABSENT if tost.equivalent else NOT_SHOWN_ABSENT
    low, high = read.effect.interval(1 - level)
    return low, high, study2.agreed_outcome(read.fits, 1 - level, read.primary["direction"], read.primary["size"])


def read_plan2(plan: dict, record: Record, primary_status: bool, resamples: int = RESAMPLES) -> list[Read]:
    """Every primary of ``plan``, read from ``record`` (``reading.read_primaries``): p = 1 for a gated arm, each
    size by its label, exploratory words everywhere unless primary. ``resamples``: the (a) primaries' bootstrap
    resamples (the plan's 2000; fewer only in a test)."""
    readers = {**READINGS, SLOPE: partial(read_slope, resamples=resamples)}
    return reading.read_primaries(plan, record, primary_status, readers, read_primary)
