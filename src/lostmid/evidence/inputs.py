"""What every claim of the evidence stage shares: the tables it reads (``Inputs``), the setting a
row describes, a claim's result and its registry entry, and the pairing of remedy variants with
their references (see ``lostmid.evidence.claims`` for the rules on missing inputs and pairing)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from lostmid.errors import LostmidError
from lostmid.evidence import decisions as dec
from lostmid.evidence import statistics as st
from lostmid.evidence.settings import EvidenceSettings

BLOG = "blog"
PAPER = "paper"

COLUMNS = ["claim", "source", "setting", "variant", "L", "depth", "residual", "checkpoint", "statistic", "unit",
           "estimate", "ci_low", "ci_high", "n_seeds", "method", "verdict", "rule", "rule_kind", "margin", "note"]

TABLES = ("failure", "metrics", "density_flow", "conditions", "structural", "init_sweep", "bias_matrix",
          "algebraic_table", "algebraic_probes", "observability", "train")

REQUIRED_COLUMNS = {
    "failure": ["variant", "L", "depth", "seed", "step", "p", "n", "failures"],
    "metrics": ["variant", "L", "depth", "seed", "step", "delta", "E_inf"],
    "density_flow": ["variant", "L", "depth", "seed", "step", "eta", "rel_error"],
    "conditions": ["variant", "L", "depth", "seed", "step", "delta", "test", "holds", "conclusion_holds"],
    "structural": ["residual", "L", "depth", "layer", "position", "measured", "closed_form"],
    "init_sweep": ["residual", "depth", "seed", "position", "density", "output_jacobian"],
    "bias_matrix": ["L", "depth", "query", "key", "bias"],
    "algebraic_table": ["method", "left", "middle", "right", "LIM", "E_inf", "Z", "obs_imbalance"],
    "algebraic_probes": ["n_probe", "rel_bias", "rel_std"],
    "observability": ["variant", "L", "depth", "seed", "step", "position", "trace", "trace_density", "jacobian_density"],
    "train": ["variant", "L", "depth", "seed", "step", "seconds_per_step", "peak_mem_mb"],
}


class EvidenceError(LostmidError):
    """A table given to the evidence stage is malformed or inconsistent with the config."""


class NotRun(Exception):
    """A claim cannot be evaluated on this run (a table or variant is absent); the message says why."""


@dataclass
class Inputs:
    """The loaded tables (None: not given) and the config's variant definitions."""

    variants: dict  # name -> the variant's overrides (model, train, remedy), as in the config
    model: dict  # the config's model block (defaults of every variant)
    failure: pd.DataFrame | None = None
    metrics: pd.DataFrame | None = None
    density_flow: pd.DataFrame | None = None
    conditions: pd.DataFrame | None = None
    structural: pd.DataFrame | None = None
    init_sweep: pd.DataFrame | None = None
    bias_matrix: pd.DataFrame | None = None
    algebraic_table: pd.DataFrame | None = None
    algebraic_probes: pd.DataFrame | None = None
    observability: pd.DataFrame | None = None  # loss-free profiles of trained checkpoints (influence.trace_variants)
    train: pd.DataFrame | None = None  # the training logs (per-step time and peak memory: the overhead claims)

    def __post_init__(self):
        if not isinstance(self.variants, dict) or not self.variants:
            raise EvidenceError("--variants must map at least one variant name to its overrides")
        self.variants = {name: (block or {}) for name, block in self.variants.items()}
        for name in TABLES:
            table = getattr(self, name)
            if table is None:
                continue
            missing = sorted(set(REQUIRED_COLUMNS[name]) - set(table.columns))
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
        return (self.variants[name].get("remedy") or {}).get("kind", "none")

    def residual(self, name: str) -> bool:
        return bool({**self.model, **(self.variants[name].get("model") or {})}.get("residual", True))

    def reference(self, name: str) -> str | None:
        """The variant without a remedy and with the same model and train overrides (see the module doc)."""
        def train(b: dict) -> dict:  # seed_batch changes float rounding only, not what is trained
            return {k: v for k, v in (b.get("train") or {}).items() if k != "seed_batch"}

        block = self.variants[name]
        same = [other for other in self.of_kind("none") if (self.variants[other].get("model") or {}) == (block.get("model") or {})
                and train(self.variants[other]) == train(block)]
        if not same:
            return None
        return "baseline" if "baseline" in same else same[0]

    def of_kind(self, kind: str) -> list[str]:
        return sorted(name for name in self.variants if self.remedy(name) == kind)


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
class Result:
    interval: st.Interval
    rule: dec.DecisionRule
    note: str = ""

    def rule_words(self) -> str:
        """The rule in words; for a deterministic claim (no seeds) "the interval over seeds" is the value itself."""
        words = self.rule.words
        if self.interval.n == 0 and not math.isnan(self.interval.estimate):
            ci = f"the {self.rule.level:.0%} interval over seeds"
            zero_width = self.interval.low == self.interval.high
            words = words.replace(ci, "the value (deterministic)" if zero_width else "the range over queries")
        return words


@dataclass(frozen=True)
class Claim:
    name: str
    source: str  # blog (a)-(e) / paper section
    statistic: str  # what is estimated
    unit: str  # its unit; the forest plot puts claims of one unit in one panel
    needs: tuple[str, ...]  # tables read
    settings: Callable[[Inputs, EvidenceSettings], list[Setting]]
    compute: Callable[[Inputs, EvidenceSettings, Setting], Result]
    log_axis: bool = False  # the forest plot shows this unit on a log axis


def deterministic(value: float, units: int, what: str) -> st.Interval:
    value = float(value)
    return st.Interval(value, value, value, 0, f"deterministic ({what}; {units} values); no seeds, zero-width interval")


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
        raise NotRun(f"{variant} at L {L}, depth {depth} has no {what} rows" + (f" at step {step}" if step is not None else ""))
    return part


def last_common_step(table: pd.DataFrame, s: "Setting") -> int:
    """The last step at which both the setting's variant and its reference have rows of ``table``."""
    steps = [set(table[(table.variant == v) & (table.L == s.L) & (table.depth == s.depth)].step) for v in (s.variant, s.reference)]
    return max(steps[0] & steps[1])


def pair_settings(kind: str, table: str, checkpoint: str):
    def settings(inputs: Inputs, ev: EvidenceSettings) -> list[Setting]:
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
        if not found:
            raise NotRun(f"no variant with remedy {kind} in the {table} table")
        return found

    return settings
