"""Issue 55's fix run's record read into the answers of its plan (study/fix_plan.yaml; docs/positional_bias.md,
"The fix run's page"). The record is read whole (``read_fix_record``): the run's manifest and overlay, the plan
check (lostmid.study.record.plan_status: the plan's SHA-256 and commit against every invocation), the fits with
their windows, the zero-bias check, the none arm's held-out windows from its own record, the fix arms' windows
under their stamps and the gates' readings. Windows are the unit of replication throughout.

    gate_ratios(gate, n, arm, column)   per gate window: log(the reading with the arm / without)
    gate_reading(plan, record, arm, n)  whether a fix did what it is for (the plan's gates)
    non_inferiority_p(units, margin)    one-sided Student t p of mean >= -margin
    one_sided_outcome, two_sided_outcome, non_inferiority_outcome   the plan's outcome rules, in its words
    primary_rows(plan, record)          every primary: paired difference, Holm over the plan's k, its outcome
    contrast_table(record, level)       each fix against none and blog against fitm, per q and over q
    position_table(record, ...)         per arm, n and q: success and log p(answer) with bootstrap bands
    gate_table(record, level)           each arm's profile flatness and content-free distance against none
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from lostmid import manifest as run_manifest
from lostmid.architectures import intervals
from lostmid.architectures import retrieval_estimators as re
from lostmid.architectures.fix_plan import ARMS, none_path, read_fix_plan, record, window_path
from lostmid.errors import InputError
from lostmid.stats import bootstrap
from lostmid.stats.effects import MeanEffect
from lostmid.study import reading

ARM_ORDER = ("none", *ARMS)
CONTRASTS = (("blog", "none"), ("fitm", "none"), ("blog", "fitm"))
OUTCOMES = {"success": "success", "logprob": "log p(answer)"}
FITS = ("blog.json", "fitm.json", "fitm_strength.json", "none_check.json")

INCONCLUSIVE = reading.INCONCLUSIVE
ONE_SIDED_WORDS = {  # study/plan.yaml's four outcomes against OUR margin
    reading.AT_LEAST: "at least our margin",
    reading.SMALLER: "an effect smaller than our margin",
    reading.NO_EFFECT: "no effect of our margin's size",
    reading.INCONCLUSIVE: INCONCLUSIVE,
}
OTHER_WAY = " (the other way)"
AN_EFFECT = "an effect"
NO_EFFECT = ONE_SIDED_WORDS[reading.NO_EFFECT]
NOT_LOWERED = "not lowered"
LOWERED = "lowered"
LOWERED_WITHIN = "lowered, by less than our margin"
LOWERED_BEYOND = "lowered, beyond our margin"
NO_DECISION = "no decision"


@dataclass
class FixRecord:
    """The fix run's record as read back: the plan, the run's manifest, every arm's held-out examples (column
    ``arm``), the fits' records (``FITS``, by name without .json), the gates' readings and the none arm's
    retrieval settings (fractions, resamples, seed)."""

    path: Path
    plan: dict
    manifest: dict
    status: str
    examples: pd.DataFrame
    fits: dict
    gate: pd.DataFrame
    settings: object

    def at(self, arm: str, n: int) -> pd.DataFrame:
        return self.examples[(self.examples.arm == arm) & (self.examples.n == n)]


def read_json(path: Path) -> dict:
    if not path.is_file():
        raise InputError(f"{path}: missing: the record is incomplete")
    return json.loads(path.read_text())


def held_out_examples(plan: dict, settings) -> pd.DataFrame:
    """Every arm's examples of the plan's held-out windows that are recorded (none: its record's, under its config
    hash; a fix arm: under its stamp, its bias file's SHA-256 the one its fit recorded)."""
    from lostmid.architectures import fix_jobs, retrieval_summary

    found = []
    for n, count in plan["run"]["windows_by_n"].items():
        none = [p for p in (none_path(plan, n, k) for k in range(count)) if p.exists()]
        if none:
            rows = retrieval_summary.read_windows(none, settings.record_hash())
            found.append(rows.assign(arm="none"))
        for arm in ARMS:
            paths = [p for p in (window_path(plan, arm, n, k) for k in range(count)) if p.exists()]
            if not paths:
                continue
            bias_file, strength = fix_jobs.arm_bias(plan, arm, n)
            fitted = read_json(bias_file.with_suffix(".json"))["bias_sha256"]
            if fix_jobs.sha256(bias_file) != fitted:
                raise InputError(f"{bias_file}: its SHA-256 is not the {fitted[:12]} its fit recorded")
            stamp = fix_jobs.window_hash(settings, arm, bias_file, strength)
            found.append(retrieval_summary.read_windows(paths, stamp).assign(arm=arm))
    if not found:
        raise InputError(f"{record(plan)}: no held-out window of any arm is recorded")
    return pd.concat(found, ignore_index=True)


def read_gate(plan: dict) -> pd.DataFrame:
    paths = sorted((record(plan) / "gate").glob("*.parquet"))
    columns = ["arm", "n", "draw", "flatness", "content_free_distance", "window"]
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if paths else pd.DataFrame(columns=columns)


def read_fix_record(path, repo=".") -> FixRecord:
    """The fix run's record folder ``path`` checked whole: its manifest, its overlay as run (lostmid.records), the
    plan its overlay names (under ``repo``) passing the plan check and naming this folder as its record, the fits'
    records, the zero-bias check passed, the windows under their stamps; one line naming the problem otherwise."""
    from lostmid import records
    from lostmid.architectures.fix_jobs import retrieval_settings
    from lostmid.study.record import plan_status

    path, repo = Path(path), Path(repo)
    if not path.is_dir():
        raise InputError(f"{path}: no such fix run record folder")
    manifest = run_manifest.read(path / run_manifest.FILE)
    records.check_overlay(path / records.OVERLAY, manifest)
    named = (yaml.safe_load((path / records.OVERLAY).read_text()) or {}).get("plan")
    if not named:
        raise InputError(f"{path / records.OVERLAY}: names no plan (its key plan)")
    plan = read_fix_plan(repo / named)
    if record(plan).resolve() != path.resolve():
        raise InputError(f"{path}: the plan {named} names another record folder ({record(plan)})")
    primary, why = plan_status(repo, repo / named, manifest)
    if not primary:
        raise InputError(f"{path}: the plan check failed ({why}): no page from this record")
    fits = {name.removesuffix(".json"): read_json(path / "fits" / name) for name in FITS}
    if not fits["none_check"].get("same"):
        raise InputError(f"{path / 'fits' / 'none_check.json'}: a zero bias did not give the none record's answers")
    settings = retrieval_settings(plan)
    examples = held_out_examples(plan, settings)
    return FixRecord(path, plan, manifest, why, examples, fits, read_gate(plan), settings)


# --------------------------------------------------------------------------- the gates


@dataclass(frozen=True)
class Gate:
    """A gate's reading: ``passed`` None where it was not read; ``mean`` and ``upper`` the mean log ratio and the
    upper bound of its Student t interval over ``windows`` gate windows; ``why`` in words."""

    arm: str
    n: int
    passed: bool | None
    mean: float
    upper: float
    windows: int
    why: str


def gate_ratios(gate: pd.DataFrame, n: int, arm: str, column: str) -> pd.Series:
    """Per gate window at n (index: draw): log(``column`` under ``arm`` / under none)."""
    wide = gate[gate.n == n].pivot(index="draw", columns="arm", values=column)
    if arm not in wide or "none" not in wide:
        return pd.Series(dtype=float)
    return np.log(wide[arm].astype(float) / wide["none"].astype(float)).dropna()


def gate_reading(plan: dict, fix: FixRecord, arm: str, n: int) -> Gate:
    """The plan's gate of ``arm`` at n: blog, the task-free profile's flatness at n (failed outright where the fit
    kept B = 0); fitm, the content-free attention's distance from uniform at the calibration's n, which stands for
    every n. Passed when the upper bound of the Student t interval (the gates' level) over the gate windows of the
    mean log ratio lies below log(ratio); not read while a gate window is missing."""
    gates = plan["run"]["gates"]
    if arm == "blog" and not fix.fits["blog"].get("fitted", True):
        return Gate(arm, n, False, math.nan, math.nan, 0, "the fit kept B = 0: no step beat none")
    calibrated = int(plan["arms"]["fitm"]["calibration"]["n"])
    column, at = ("flatness", n) if arm == "blog" else ("content_free_distance", calibrated)
    what = "task-free profile's flatness" if arm == "blog" else "content-free attention's distance from uniform"
    expected = int(gates["windows_by_n"][at])
    ratios = gate_ratios(fix.gate, at, arm, column)
    if len(ratios) < expected:
        return Gate(arm, at, None, math.nan, math.nan, len(ratios), f"{len(ratios)} of its {expected} gate windows")
    effect = re.t_effect(ratios, gates["level"])
    passed = bool(effect.high < math.log(gates["ratio"]))
    words = (
        f"the {what} with the fix over without, {math.exp(effect.estimate):.3g} (upper bound "
        f"{math.exp(effect.high):.3g}, {gates['level']:.0%} t over {len(ratios)} windows at n = {at}; passes "
        f"below {gates['ratio']:g}, our margin)"
    )
    return Gate(arm, at, passed, effect.estimate, effect.high, len(ratios), words)


# --------------------------------------------------------------------------- the outcomes


def non_inferiority_p(units: pd.Series, margin: float) -> float:
    """The one-sided Student t p of H0: mean <= -margin (the per-window differences plus the margin against 0)."""
    x = units.to_numpy(np.float64) + margin
    if x.size < 2:
        return 1.0
    if np.all(x == x[0]):
        return 0.0 if x[0] > 0 else 1.0
    return float(stats.ttest_1samp(x, 0.0, alternative="greater").pvalue)


def one_sided_outcome(low: float, high: float, margin: float) -> str:
    """A fix against none (direction increase): study/plan.yaml's four outcomes against our margin; a decided
    interval below 0 named "the other way"."""
    found = ONE_SIDED_WORDS[reading.outcome(low, high, "increase", margin)]
    return found + OTHER_WAY if found != INCONCLUSIVE and high < 0 else found


def two_sided_outcome(low: float, high: float, margin: float) -> str:
    """One fix against the other (no direction): an effect (its sign) where the interval excludes 0, no effect of
    our margin's size where it lies inside (-margin, margin), else inconclusive."""
    if math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    if low > 0 or high < 0:
        return f"{AN_EFFECT} ({'positive' if low > 0 else 'negative'})"
    return NO_EFFECT if -margin < low and high < margin else INCONCLUSIVE


def non_inferiority_outcome(low: float, high: float, margin: float) -> str:
    """Accuracy not lowered (direction not_lowered): lowered where the upper bound lies below 0 (beyond our margin
    where below -margin; by less than it where the lower bound lies above -margin), not lowered where the lower
    bound lies above -margin, else inconclusive."""
    if math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    if high < -margin:
        return LOWERED_BEYOND
    if high < 0:
        return LOWERED_WITHIN if low > -margin else LOWERED
    return NOT_LOWERED if low > -margin else INCONCLUSIVE


RULES = {"increase": one_sided_outcome, "none": two_sided_outcome, "not_lowered": non_inferiority_outcome}


# --------------------------------------------------------------------------- the primaries


@dataclass(frozen=True)
class Primary:
    """A primary as read: its effect (None where it makes no decision, ``why`` saying why), its Holm level, its
    interval at 1 - level, its outcome."""

    id: str
    n: int
    margin: float
    effect: MeanEffect | None
    p: float
    level: float
    low: float
    high: float
    outcome: str
    why: str


def primary_units(fix: FixRecord, primary: dict) -> pd.Series:
    """Per held-out window: the plan's paired difference (arms[0] minus arms[1]) of its outcome over its q."""
    first, second = primary["arms"]
    n = int(primary["n"])
    return re.paired_difference(fix.at(first, n), fix.at(second, n), primary["positions"], primary["outcome"])


def stopped_by(plan: dict, fix: FixRecord, primary: dict, units: pd.Series) -> str:
    """Why a primary makes no decision ("" when it does): the plan's held-out windows not all paired (no interim
    look), or a gate of one of its fix arms failed or not read."""
    n, expected = int(primary["n"]), int(plan["run"]["windows_by_n"][int(primary["n"])])
    if len(units) < expected:
        return f"{len(units)} of the plan's {expected} held-out windows paired in its arms (no interim look)"
    for arm in (a for a in primary["arms"] if a in ARMS):
        gate = gate_reading(plan, fix, arm, n)
        if gate.passed is None:
            return f"the {arm} gate was not read ({gate.why})"
        if not gate.passed:
            return f"the fix did not do what it is for: the {arm} gate failed ({gate.why})"
    return ""


def primary_p(effect: MeanEffect, primary: dict) -> float:
    """A fix against none or one fix against the other: two-sided t against 0; not lowered: one-sided against -m."""
    if primary["direction"] == "not_lowered":
        return non_inferiority_p(effect.units, primary["margin"]["size"])
    return effect.p_value


def primary_rows(plan: dict, fix: FixRecord) -> list[Primary]:
    """Every primary of the plan: Holm's levels over all k of them (p = 1 where one makes no decision: it keeps
    its place in k), each interval at 1 - its level, its outcome by its direction's rule."""
    found = []
    for name, primary in plan["primaries"].items():
        units = primary_units(fix, primary)
        why = stopped_by(plan, fix, primary, units)
        effect = None if why else MeanEffect(units, f"{primary['estimator_words']}; Student t over windows")
        found.append((name, primary, effect, why))
    p_values = [1.0 if effect is None else primary_p(effect, primary) for _, primary, effect, _ in found]
    levels = reading.holm_levels(p_values, plan["alpha"])
    rows = []
    for (name, primary, effect, why), p, level in zip(found, p_values, levels):
        margin = float(primary["margin"]["size"])
        low, high = (math.nan, math.nan) if effect is None else effect.interval(1 - level)
        outcome = NO_DECISION if effect is None else RULES[primary["direction"]](low, high, margin)
        p = math.nan if effect is None else p
        rows.append(Primary(name, int(primary["n"]), margin, effect, p, level, low, high, outcome, why))
    return rows


def primary_table(rows: list[Primary]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(id=r.id, n=r.n, estimate=math.nan if r.effect is None else r.effect.estimate, low=r.low, high=r.high)
            | dict(level=r.level, p=r.p, windows=0 if r.effect is None else r.effect.n, margin=r.margin)
            | dict(outcome=r.outcome, why=r.why)
            for r in rows
        ]
    )


# --------------------------------------------------------------------------- the secondaries


def contrast_table(fix: FixRecord, level: float) -> pd.DataFrame:
    """Exploratory: per n, contrast (``CONTRASTS``), outcome and q (and over every q: ``positions`` "all"), the
    mean paired difference over windows with its Student t interval at ``level`` (none with fewer than 2)."""
    fractions = list(fix.settings.fractions)
    found = []
    for n in sorted(fix.examples.n.unique()):
        for first, second in CONTRASTS:
            for column in OUTCOMES:
                for positions in [[q] for q in fractions] + [fractions]:
                    units = re.paired_difference(fix.at(first, n), fix.at(second, n), positions, column)
                    effect = re.t_effect(units, level) if len(units) >= 2 else None
                    found.append(
                        dict(n=int(n), contrast=f"{first} - {second}", outcome=column, windows=len(units))
                        | dict(positions=f"q = {positions[0]:g}" if len(positions) == 1 else "all")
                        | dict(
                            estimate=units.mean() if len(units) else math.nan,
                            low=effect.low if effect else math.nan,
                            high=effect.high if effect else math.nan,
                        )
                    )
    return pd.DataFrame(found)


def position_table(fix: FixRecord, resamples: int, seed: int, level: float) -> pd.DataFrame:
    """Per arm, n and q: the mean over windows of success and of log p(answer) (tasks pooled per window), each with
    its percentile bootstrap interval over windows (``intervals.draws``, draw 0 the estimate)."""
    found = []
    for (arm, n), part in fix.examples.groupby(["arm", "n"], sort=True):
        for q in fix.settings.fractions:
            row = dict(arm=arm, n=int(n), q=float(q))
            for column in OUTCOMES:
                per_window = re.window_mean(part, [q], column).to_numpy(float)
                weights = intervals.draws(len(per_window), resamples, seed + int(n))
                estimate, low, high = bootstrap.percentile_interval(intervals.means(weights, per_window), level)
                row |= {"windows": len(per_window), column: estimate, f"{column}_lo": low, f"{column}_hi": high}
            found.append(row)
    return pd.DataFrame(found)


def gate_table(plan: dict, fix: FixRecord) -> pd.DataFrame:
    """Exploratory beside the gates: per n, fix arm and reading (flatness; at the calibration's n the content-free
    distance), the mean log ratio to none over the gate windows with its Student t interval at the gates' level."""
    found = []
    for n in sorted(fix.gate.n.unique()):
        for arm in ARMS:
            for column in ("flatness", "content_free_distance"):
                ratios = gate_ratios(fix.gate, n, arm, column)
                if len(ratios) < 2:
                    continue
                effect = re.t_effect(ratios, plan["run"]["gates"]["level"])
                found.append(
                    dict(n=int(n), arm=arm, reading=column, windows=len(ratios), log_ratio=effect.estimate)
                    | dict(low=effect.low, high=effect.high)
                )
    return pd.DataFrame(found, columns=["n", "arm", "reading", "windows", "log_ratio", "low", "high"])
