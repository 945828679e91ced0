"""The second study's reading (study/plan2.yaml, issue 52) of its run record (runs/<name>/: the manifest, the
overlay as run and the tables failure, influence and bias_summary, as ``lostmid study-record`` writes them).

Every primary is computed as the plan words it: its estimator by its dotted path (``ESTIMATORS``), at the step
it names, the fit of B the unit of a fix arm (seeds nested in fits), two one-sided tests for an absence, the
three influence fits with "no effect" only where all agree; Holm over the ten. A fix arm is decided when at
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
from dataclasses import dataclass, field

import pandas as pd

from lostmid.errors import InputError
from lostmid.evidence.fit_checks import fit_reasons
from lostmid.stats import study2
from lostmid.study import estimators as est
from lostmid.study import reading
from lostmid.study.reading import bounded, numbers
from lostmid.study.record import Record, read_record

VARIANT_PREFIX = "study2_"
RESAMPLES = 2000  # plan2's (a) estimator_words: a cluster bootstrap of 2000 resamples
GATE = (16, 24)  # plan2 gate.rule: an arm is decided when at least 16 of its 24 fits pass
TABLES = ("failure", "influence", "bias_summary")
SHOWN_ABSENT = "shown absent"  # plan2 outcomes.absent
NOT_SHOWN_ABSENT = "not shown absent"  # plan2 outcomes.not_shown_absent
GATED = "undecided: the arm failed its gate"
SOURCE = "source"  # a size label: the source's own number
DEFAULT_SIZE_LABEL = "our margin"  # the size label of a plan that labels none (study/plan.yaml)


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


# --------------------------------------------------------------------------- the gate


@dataclass(frozen=True)
class Gate:
    """A fix arm's gate: its fits, those that passed, how many it needs, and why each other one failed."""

    arm: str
    fits: list[str]
    passed: list[str]
    required: int
    reasons: dict = field(default_factory=dict)

    @property
    def decided(self) -> bool:
        return len(self.passed) >= self.required

    def words(self) -> str:
        said = f"{len(self.passed)} of {len(self.fits)} fits of {self.arm} pass the gate (at least {self.required})"
        failed = sorted({why for why in self.reasons.values() if why})
        return said + (f"; the others: {'; '.join(failed)}" if failed else "")


def gate(record: Record, arm: str) -> Gate:
    """The plan's gate of the fix ``arm``: at least 16 of 24 (the same share of a shrunk run's fits) pass."""
    fits = arm_variants(record.overlay, arm)
    reasons = fit_reasons(record.bias_summary, fits)
    required = math.ceil(len(fits) * GATE[0] / GATE[1])
    return Gate(arm, fits, [f for f in fits if reasons[f] is None], required, reasons)


# --------------------------------------------------------------------------- each primary's effect


def step_of(primary: dict, plan: dict) -> int:
    """The primary's step: its checkpoint, or the plan's horizon for an area over training ("0-1500 (area)")."""
    checkpoint = primary["checkpoint"]
    return int(checkpoint) if isinstance(checkpoint, int) else int(plan["checkpoints"]["horizon"])


def step_words(primary: dict, step: int) -> str:
    """How a sentence names its step."""
    return f"At step {step}" if isinstance(primary["checkpoint"], int) else f"Over steps 0-{step}"


def nested(per_seed: pd.Series, failure: pd.DataFrame, fits: list[str]) -> pd.Series:
    """Per-seed values indexed by (fit, seed): each seed under the fit whose variant trained it."""
    owner = failure[failure.variant.isin(fits)].drop_duplicates("seed").set_index("seed").variant
    index = pd.MultiIndex.from_arrays([owner.loc[per_seed.index].to_numpy(), per_seed.index], names=["fit", "seed"])
    return pd.Series(per_seed.to_numpy(), index=index)


@dataclass(frozen=True)
class Computed:
    """A primary's effect before Holm: the effect, the p that enters Holm, the gate (a fix arm's) and, for the
    influence primary, its three fits."""

    effect: object
    p: float
    gate: Gate | None = None
    fits: dict | None = None


def _fix_fits(record: Record, primary: dict) -> tuple[list[str], Gate]:
    """The fits a fix-arm primary uses: those that passed when the arm is decided, else all (exploratory)."""
    found = gate(record, primary["arms"][0])
    return (found.passed if found.decided else found.fits), found


def _slope(record: Record, plan: dict, primary: dict, step: int, resamples: int) -> Computed:
    variants = arm_variants(record.overlay, primary["arms"][0])
    rows = est.arm_rows(record.failure, variants, step=step)[["seed", "p", "failures", "n"]]
    effect = study2.common_slope_effect(rows, resamples)
    return Computed(effect, effect.p_value)


def _fix_pair(record: Record, plan: dict, primary: dict, step: int, resamples: int) -> Computed:
    """A paired fix-minus-baseline primary, the fit the unit: (d) by its speed, (e) by late minus early."""
    fits, found = _fix_fits(record, primary)
    base = arm_variants(record.overlay, primary["arms"][1])
    if isinstance(primary["checkpoint"], int):
        per_seed = est.paired(
            est.late_minus_early(record.failure, fits, step), est.late_minus_early(record.failure, base, step)
        )
        what = f"per seed, late minus early failure at step {step}, fix minus baseline on the same seed"
    else:
        per_seed = est.speed_differences(record.failure, fits, base, step)
        what = f"per seed, mean failure over steps 0-{step}, fix minus baseline on the same seed"
    effect = study2.fit_cluster_effect(nested(per_seed, record.failure, fits), what)
    return Computed(effect, effect.p_value if found.decided else 1.0, found)


def _absence(record: Record, plan: dict, primary: dict, step: int, resamples: int) -> Computed:
    fits, found = _fix_fits(record, primary)
    per_seed = est.late_minus_early(record.failure, fits, step)
    what = f"per seed of the fix arm, late minus early failure at step {step}"
    effect = study2.fit_cluster_effect(nested(per_seed, record.failure, fits), what)
    p = study2.equivalence(effect, primary["size"]).p
    return Computed(effect, p if found.decided else 1.0, found)


def _influence(record: Record, plan: dict, primary: dict, step: int, resamples: int) -> Computed:
    variants = arm_variants(record.overlay, primary["arms"][0])
    fits = study2.influence_fits(est.influence_and_failure(record.failure, record.influence, variants, step))
    fixed = fits[study2.INFLUENCE_FITS[0]]
    return Computed(fixed, fixed.p_value, fits=fits)


# Each primary's reading by the estimator's dotted path the plan names.
ESTIMATORS = {
    "lostmid.stats.study2.common_slope_effect": _slope,
    "lostmid.stats.study2.fit_cluster_effect": _fix_pair,
    "lostmid.stats.study2.equivalence": _absence,
    "lostmid.stats.study2.influence_fits": _influence,
}


def computed(primary: dict, record: Record, plan: dict, resamples: int = RESAMPLES) -> Computed:
    """The primary's effect by the estimator it names (``resamples``: its bootstrap's, where it has one); an
    estimator the reading does not know is one line."""
    if primary["estimator"] not in ESTIMATORS:
        raise InputError(f"plan primary {primary['id']}: no reading of the estimator {primary['estimator']}")
    return ESTIMATORS[primary["estimator"]](record, plan, primary, step_of(primary, plan), resamples)


# --------------------------------------------------------------------------- the reading


@dataclass(frozen=True)
class Reading:
    """One primary as the page shows it: its level (Holm), interval, outcome and sentence."""

    id: str
    primary: dict
    computed: Computed
    step: int
    level: float
    low: float
    high: float
    outcome: str
    sentence: str

    @property
    def decided(self) -> bool:
        return self.computed.gate is None or self.computed.gate.decided


def size_label(primary: dict, plan: dict) -> str:
    """The primary's size label: its own (plan2: ``size_label``), else the page's default, our margin (study 1's
    plan labels none, and none of its sizes is a number in a source's words)."""
    return primary.get("size_label", plan.get("size_label", DEFAULT_SIZE_LABEL))


# The words of an answer or an outcome (lostmid.study.reading) for a size that is not the source's: each phrase
# in turn, replaced.
MARGIN_WORDS = (
    ("as large as the source says", "as large as {label}"),
    ("smaller than the source says", "smaller than {label}"),
    ("of the source's size", "as large as {label}"),
    ("the source's size", "{label}"),
    ("smaller than the source's", "smaller than {label}"),
    ("the source's direction", "the claim's direction"),
    ("against the source's", "against {label}"),
)


def labelled(words: str, label: str) -> str:
    """Words of ``lostmid.study.reading`` with the source's size named by its label where it is not the source's."""
    if label != SOURCE:
        for phrase, replacement in MARGIN_WORDS:
            words = words.replace(phrase, replacement.format(label=label))
    return words


def answer_words(outcome: str, low: float, high: float, direction: str, label: str) -> str:
    """``reading.answer``'s words, ``labelled``."""
    return labelled(reading.answer(outcome, low, high, direction), label)


def sentence(primary: dict, plan: dict, found: Computed, step: int, level: float, low, high, outcome: str) -> str:
    """The answer in one sentence, its step named, its size labelled."""
    label, size = size_label(primary, plan), primary["size"]
    opening = step_words(primary, step)
    units = None
    if found.gate is not None:
        units = f"fits of B, {len(found.gate.passed if found.gate.decided else found.gate.fits)} fits x their seeds"
    if found.gate is not None and not found.gate.decided:
        return (
            f"{opening}: undecided, the arm failed its gate ({found.gate.words()}); exploratory, over all its fits: "
            f"{numbers(found.effect, low, high, primary, plan['level'], units)})."
        )
    said = numbers(found.effect, low, high, primary, 1 - (2 * level if outcome in ABSENCE else level), units)
    if outcome in ABSENCE:
        past = [f"{sign}{size:.3g}" for sign, out in (("-", low <= -size), ("+", high >= size)) if out]
        side = f"; it reaches past {' and '.join(past)}" if past else ""
        return f"{opening}: {outcome} at {label} +-{size:.3g}: {said}{side})."
    words = answer_words(outcome, low, high, primary["direction"], label)
    tail = ""
    if found.fits is not None:
        tail = "; " + ", ".join(
            f"{name} {bounded(e.estimate, *e.interval(1 - level))}" for name, e in found.fits.items()
        )
        tail += "; no effect stands only where all three read it"
    return f"{opening}: {words}: {said}; {label} {size:.3g}{tail})."


ABSENCE = (SHOWN_ABSENT, NOT_SHOWN_ABSENT)


def read_primary(primary: dict, plan: dict, found: Computed, level: float) -> tuple[float, float, str]:
    """(low, high, outcome) of a primary at its Holm ``level``; a gated one's numbers at the plan's level."""
    if found.gate is not None and not found.gate.decided:
        return (*found.effect.interval(plan["level"]), GATED)
    if primary.get("reading") == "equivalence":
        tost = study2.equivalence(found.effect, primary["size"], level)
        return tost.low, tost.high, SHOWN_ABSENT if tost.equivalent else NOT_SHOWN_ABSENT
    low, high = found.effect.interval(1 - level)
    if found.fits is not None:
        return low, high, study2.agreed_outcome(found.fits, 1 - level, primary["direction"], primary["size"])
    return low, high, reading.outcome(low, high, primary["direction"], primary["size"])


def read_plan2(plan: dict, record: Record, primary_status: bool, resamples: int = RESAMPLES) -> list[Reading]:
    """Every primary of ``plan``, read from ``record``: Holm's levels over all of them (p = 1 for a gated arm),
    each interval at its level, its outcome and its sentence; exploratory words everywhere unless primary.
    ``resamples``: the (a) primaries' bootstrap resamples (the plan's 2000; fewer only in a test)."""
    found = [(p, computed(p, record, plan, resamples)) for p in plan["primaries"]]
    levels = reading.holm_levels([c.p for _, c in found], plan["alpha"])
    out = []
    for (primary, c), level in zip(found, levels):
        step = step_of(primary, plan)
        low, high, outcome = read_primary(primary, plan, c, level)
        said = sentence(primary, plan, c, step, level, low, high, outcome)
        if not primary_status:
            outcome, said = reading.exploratory(outcome, said)
        out.append(Reading(primary["id"], primary, c, step, level, low, high, outcome, said))
    return out
