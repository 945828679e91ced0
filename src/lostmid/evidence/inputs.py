"""What every claim of the evidence stage shares: the tables it reads (``Inputs``), the setting a
row describes, a claim's result and its registry entry, and the pairing of remedy variants with
their references (see ``lostmid.evidence.claims`` for the rules on missing inputs and pairing)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, make_dataclass

import pandas as pd

from lostmid.errors import LostmidError
from lostmid.evidence import decisions as dec
from lostmid.evidence.settings import EvidenceSettings
from lostmid.evidence.tables import TABLES
from lostmid.stats import statistics as st

# What a row is (Claim.kind): a claim of a source (the blog's or the paper's), which the headline and
# the tallies count, or a check of the instrument (a closed form, the flow error, the probes, an
# intervention's own check such as the bias fit's), which is reported in a section of its own.
CLAIM = "claim"
CHECK = "check"
KINDS = (CLAIM, CHECK)

# Where a claim's rows read the run (Claim.checkpoints): the declared checkpoint rules, each in words. A row's own
# setting names the step the rule found (``Setting.checkpoint``: "step 500 (mid-training)").
CHECKPOINTS = {
    "mid-training": "the first checkpoint where the arm's mean accuracy reaches evidence.mid_accuracy (each its own)",
    "matched accuracy": "each seed where its accuracy crosses evidence.mid_accuracy, interpolated between checkpoints",
    "last common checkpoint": "the last step that both arms have",
    "over training": "steps 0 to the last common checkpoint (the mean failure rate over training)",
    "every checkpoint": "each checkpoint of the run",
    "every training step": "the measured training steps (time and memory)",
    "initialization": "untrained networks: init sweeps, the held-out initializations of a bias fit, a fitted B",
    "pretrained model": "a pretrained language model (the retrieval stage)",
    "none": "no network: closed forms and algebraic simulations",
}

# A row's status (the column ``status``): decided by its rule, or without a verdict of its own because the
# claim was not evaluated on the run (a table or variant is absent), it was measured but cannot be decided
# (the intervention did not do what it is for, the reference never learns), or it has fewer replicates
# than the run's plan (a pilot). The method of a row without a verdict begins with the status in words.
DECIDED = "decided"
NOT_RUN = "not_run"
NOT_EVALUABLE = "not_evaluable"
PILOT = "pilot"
STATUSES = (DECIDED, NOT_RUN, NOT_EVALUABLE, PILOT)
STATUS_WORDS = {NOT_RUN: "not run", NOT_EVALUABLE: "not evaluable", PILOT: "pilot"}

COLUMNS = """claim kind family source setting variant L depth residual checkpoint statistic unit estimate ci_low ci_high
n_seeds method status verdict rule rule_kind margin note reading family_size adjusted_level adjusted_low adjusted_high
adjusted_verdict verdict_as_first_written deviations""".split()


class EvidenceError(LostmidError):
    """A table given to the evidence stage is malformed or inconsistent with the config."""


class NotRun(Exception):
    """A claim cannot be evaluated on this run (a table or variant is absent); the message says why."""

    status = NOT_RUN

    @classmethod
    def unless(cls, found: list, why: str) -> list:
        """``found`` (a claim's settings), or this exception saying ``why`` where there are none."""
        if not found:
            raise cls(why)
        return found


class NotEvaluable(NotRun):
    """A claim cannot be decided on this run although its inputs are there (its row says why)."""

    status = NOT_EVALUABLE


@dataclass
class _Config:
    """The config's variant definitions, which every claim reads beside its tables."""

    variants: dict  # name -> the variant's overrides (model, train, remedy), as in the config
    model: dict  # the config's model block (defaults of every variant)
    retrieval_settings: dict | None = None  # the config's retrieval block (its bootstrap draws and seed)
    # The estimates made so far on these tables, by (claim, setting, evidence settings): a check that many gates
    # read (the fit's checks) is estimated once per rules, not once per gated row (estimators.made_by).
    made: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.variants, dict) or not self.variants:
            raise EvidenceError("--variants must map at least one variant name to its overrides")
        self.variants = {name: (block or {}) for name, block in self.variants.items()}
        for name in TABLES:
            table = getattr(self, name)
            if table is None:
                continue
            missing = sorted(set(TABLES[name].columns) - set(table.columns))
            if missing:
                raise EvidenceError(f"the {name} table lacks the columns {missing}")
            if table.empty:
                raise EvidenceError(f"the {name} table is empty")
            if "variant" in table.columns:
                unknown = sorted(set(table["variant"].astype(str)) - set(self.variants))
                if unknown:
                    raise EvidenceError(f"the {name} table has variants {unknown} that --variants does not define")

    # ----------------------------------------------------------------- variants

    def remedy(self, name: str) -> str:
        """The variant's remedy kind; "control" for a bias variant whose B is a control built from another's
        (remedy.control: lostmid.evidence.mechanism_claims), which is no reading of the blog's fix."""
        block = self.variants[name].get("remedy") or {}
        return "control" if "control" in block else block.get("kind", "none")

    def residual(self, name: str) -> bool:
        return bool({**self.model, **(self.variants[name].get("model") or {})}.get("residual", True))

    def trains_elsewhere(self, name: str) -> bool:
        """Whether a bias variant's B is fitted on a model other than the one it trains in: its fit block's
        ``fit_model`` names another variant with other model overrides (the blog's literal reading), or one these
        variants do not define."""
        fit_model = ((self.variants[name].get("remedy") or {}).get("fit") or {}).get("fit_model", name)
        if fit_model not in self.variants:
            return True
        return (self.variants[fit_model].get("model") or {}) != (self.variants[name].get("model") or {})

    def overrides(self, name: str, ignore: tuple[str, ...] = ("seed_batch",)) -> tuple[dict, dict]:
        """The variant's model and train overrides, the train keys ``ignore`` left out (seed_batch changes float
        rounding only, not what is trained)."""
        block = self.variants[name]
        return block.get("model") or {}, {k: v for k, v in (block.get("train") or {}).items() if k not in ignore}

    def reference(self, name: str) -> str | None:
        """The variant without a remedy and with the same model and train overrides (see the module doc)."""
        same = [other for other in self.of_kind("none") if self.overrides(other) == self.overrides(name)]
        if not same:
            return None
        return "baseline" if "baseline" in same else same[0]

    def of_kind(self, kind: str) -> list[str]:
        return sorted(name for name in self.variants if self.remedy(name) == kind)


# ``Inputs(variants=..., model=..., failure=..., ...)``: one field per table of lostmid.evidence.tables.
Inputs = make_dataclass(
    "Inputs", [(name, "pd.DataFrame | None", field(default=None)) for name in TABLES], bases=(_Config,)
)
Inputs.__module__ = __name__
Inputs.__doc__ = "The loaded tables (None: not given) and the config's variant definitions."


@dataclass(frozen=True)
class Setting:
    """Where a claim is evaluated: variant, L, depth, residual path, checkpoint (in words)."""

    variant: str | None = None
    L: int | None = None
    depth: int | None = None
    residual: bool | None = None
    checkpoint: str | None = None
    reference: str | None = None  # the variant compared against, for paired claims
    missing: str | None = None  # why this setting cannot be evaluated (its row says "not run: ...")
    reading: str | None = None  # the reading of the blog's fix (a bias variant) the row is about
    # Why the result, although computed, gets no verdict (its row says "not evaluable: ..."): the
    # intervention did not do what it is for, or the reference never learns.
    not_evaluable: str | None = None

    def words(self) -> str:
        parts = []
        if self.variant is not None:
            parts.append(f"{self.variant} vs {self.reference}" if self.reference else self.variant)
        for key in ("L", "depth", "residual", "checkpoint"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key} {str(value).lower() if isinstance(value, bool) else value}")
        return ", ".join(parts) if parts else "-"


@dataclass(frozen=True)
class Estimate:
    """What a claim's compute function returns for one setting: the estimate with its interval, never a
    verdict (``lostmid.evidence.decisions.decide`` reads that off with the claim's declared rule).

    ``sample``: the per-unit values and their estimator, from which the interval is taken at another
    level (the family-wise correction); None for a deterministic value. ``terms``: the words the rule's
    quantity takes from the data (a checkpoint, a flag law). ``status``: NOT_EVALUABLE (or NOT_RUN) when
    the computation itself found the claim cannot be decided; the interval's method then says why.
    """

    interval: st.Interval
    note: str = ""
    sample: st.Sample | None = None
    terms: dict | None = field(default_factory=dict)
    status: str = DECIDED


@dataclass(frozen=True)
class Effects:
    """What a claim's reading returns for one setting: its per-unit effects, never an interval. ``values``: the
    arguments of the claim's declared estimator (lostmid.evidence.estimators.ESTIMATORS) before the level: one
    array of per-unit values, two paired or independent arms, bootstrap draws with their windows, a deterministic
    value with its count and words. ``method``: what the effects are, in words (the estimator's words follow);
    ``unit``: the replication unit's name where it is not a seed (a held-out initialization of a fit); ``note``
    and ``terms`` as in ``Estimate``."""

    values: tuple
    method: str = ""
    note: str = ""
    terms: dict = field(default_factory=dict)
    unit: str = "seed"


def no_estimate(status: str, why: str, n: int = 0) -> Estimate:
    """An estimate that could not be made (NaN), with its status and the reason as its method."""
    return Estimate(st.Interval(math.nan, math.nan, math.nan, n, why), terms=None, status=status)


@dataclass(frozen=True)
class Claim:
    """A row of claims.yaml (its header says what each field is), its settings and reading resolved to functions
    (a reading returns the per-unit ``Effects``, or an ``Estimate`` that could not be made) and its rule to a
    ``decisions.Rule``. ``kind`` (CLAIM or CHECK) has no default, so that every new claim says which it is."""

    name: str
    source: str
    statistic: str
    unit: str
    needs: tuple[str, ...]
    settings: Callable[[Inputs, EvidenceSettings], list[Setting]]
    compute: Callable[[Inputs, EvidenceSettings, Setting], Effects]
    log_axis: bool = False
    family: str | None = None
    kind: str = field(kw_only=True)
    rule: dec.Rule = field(kw_only=True)
    replicates: str = field(default="seeds", kw_only=True)  # or "windows": the pilot threshold's unit
    estimator: str = field(kw_only=True)
    checkpoints: tuple[str, ...] = field(kw_only=True)
    beside: tuple[str, str] | None = field(default=None, kw_only=True)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.name}: kind {self.kind!r} is not one of {KINDS}")
        unknown = [c for c in self.checkpoints if c not in CHECKPOINTS] if self.checkpoints else ["(none)"]
        if unknown:
            raise ValueError(f"claim {self.name}: checkpoints {unknown} are not among {list(CHECKPOINTS)}")


# =========================================================================== trained runs: helpers


def runs_of(table: pd.DataFrame, variant: str) -> list[tuple[int, int]]:
    part = table[table.variant == variant]
    return sorted({(int(L), int(depth)) for L, depth in zip(part.L, part.depth)})


def rows_of(table: pd.DataFrame, what: str, variant: str, L: int, depth: int, step: int | None = None) -> pd.DataFrame:
    """The rows of ``variant`` at (L, depth) (and ``step``) of the ``what`` table; NotRun when there are none."""
    mask = (table.variant == variant) & (table.L == L) & (table.depth == depth)
    if step is not None:
        mask &= table.step == step
    part = table[mask]
    if part.empty:
        raise NotRun(
            f"{variant} at L {L}, depth {depth} has no {what} rows" + (f" at step {step}" if step is not None else "")
        )
    return part


def last_common_step(table: pd.DataFrame, s: Setting) -> int:
    """The last step at which both the setting's variant and its reference have rows of ``table``."""
    steps = [
        set(table[(table.variant == v) & (table.L == s.L) & (table.depth == s.depth)].step)
        for v in (s.variant, s.reference)
    ]
    return max(steps[0] & steps[1])


def pair_settings(kind: str, table: str, checkpoint: str, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """Every variant of remedy ``kind`` at every (L, depth) of ``table``, paired with its reference (``reference``)."""
    found = []
    data = getattr(inputs, table)
    for name in inputs.of_kind(kind):
        reference = inputs.reference(name)
        for L, depth in runs_of(data, name):
            missing = None
            if reference is None:
                missing = f"variant {name} has no variant without a remedy and the same model and train overrides"
            elif (L, depth) not in runs_of(data, reference):
                missing = f"{reference} (the reference of {name}) has no {table} rows at L {L}, depth {depth}"
            found.append(Setting(name, L, depth, inputs.residual(name), checkpoint, reference, missing))
    return NotRun.unless(found, f"no variant with remedy {kind} in the {table} table")


def every_kind(settings, kinds, inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
    """The settings ``settings(kind, inputs, ev)`` of every remedy kind of ``kinds`` that has some; NotRun (every
    reason) when none has."""
    found, reasons = [], []
    for kind in kinds:
        try:
            found += settings(kind, inputs, ev)
        except NotRun as why:
            reasons.append(str(why))
    return NotRun.unless(found, "; ".join(reasons))
