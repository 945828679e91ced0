"""Issue 55's fix run's record read into the answers of its plan (study/fix_plan.yaml; docs/positional_bias.md,
"The fix run's page"). The record is read whole (``read_fix_record``): the run's manifest and overlay, the plan
check (lostmid.study.record.plan_status: the plan's SHA-256 and commit against every invocation), the fits with
their windows, the zero-bias check, the none arm's held-out windows from its own record, the fix arms' windows
under their stamps and the gates' readings. The fits of the bias are the unit of replication (the plan's F fits,
each a random draw; windows nested in them: window k under fit k mod F): the primaries' intervals are Student t
over the fit means, the exploratory ones a bootstrap over fits, then windows within fits.

    gate_ratios(gate, n, arm, column)   per gate window: log(the reading with the arm / without), with its fit
    gate_of(plan, gate, arm, n)         whether a fix did what it is for (the plan's gates, over the fit means)
    gate_reading(plan, record, arm, n)  the same on a record; gate_first_passed(plan): the gate-first order's gate
    non_inferiority_p(units, margin)    one-sided Student t p of mean >= -margin
    one_sided_outcome, non_inferiority_outcome   the plan's outcome rules, in its words (two-sided: stats.outcomes')
    primary_rows(plan, record)          every primary: fit-cluster difference, Holm over the plan's k, its outcome
                                        (lostmid.study.reading.read_primaries, its reading registered there)
    contrast_table(record, ...)         each fix against none and blog against fitm, per q and over q
    position_table(record, ...)         per arm, n and q: success and log p(answer) with two-level bootstrap bands
    gate_table(record, level)           each arm's profile flatness and content-free distance against none
    fit_table(record)                   per fit: its window, loss, B not 0, t_i, its gate readings
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from lostmid.architectures import intervals
from lostmid.architectures import retrieval_estimators as re
from lostmid.architectures.fix_plan import (
    ARMS,
    bias_path,
    fit_count,
    fit_of,
    gate_first,
    gate_windows,
    held_out_count,
    none_path,
    read_fix_plan,
    record,
    window_path,
)
from lostmid.errors import InputError
from lostmid.stats import bootstrap, outcomes
from lostmid.stats.effects import MeanEffect
from lostmid.study import reading
from lostmid.study.reading import DEFAULT_SIZE_LABEL, READINGS, Missing, Read, labelled

ARM_ORDER = ("none", *ARMS)
CONTRASTS = (("blog", "none"), ("fitm", "none"), ("blog", "fitm"))
OUTCOMES = {"success": "success", "logprob": "log p(answer)"}

# study/plan.yaml's four outcomes against OUR margin, in the fix plan's words (outcomes.one_sided, two_sided)
ONE_SIDED_WORDS = {outcome: labelled(outcome, DEFAULT_SIZE_LABEL) for outcome in outcomes.OUTCOMES}
OTHER_WAY = " (the other way)"
NOT_LOWERED = "not lowered"
LOWERED = "lowered"
LOWERED_WITHIN = "lowered, by less than our margin"
LOWERED_BEYOND = "lowered, beyond our margin"
NO_DECISION = "no decision"
STOPPED_BY_GATE = "stopped by the gate"
NON_INFERIORITY_WORDS = {  # the claim "lowered" read against our margin: study/plan.yaml's outcomes, in its words
    outcomes.AT_LEAST: LOWERED_BEYOND,
    outcomes.SMALLER: LOWERED_WITHIN,
    outcomes.NO_EFFECT: NOT_LOWERED,
}


@dataclass
class FixRecord:
    """The fix run's record as read back: the plan, the run's manifest, every arm's held-out examples (columns
    ``arm`` and ``fit``), the fits' records (``fits``: per fix arm the list of its F fits' records, and
    ``none_check``), the gates' readings and the none arm's retrieval settings (fractions, resamples, seed)."""

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


def read_fits(plan: dict) -> dict:
    """{arm: [fit i's record, i = 0 .. F - 1]} of both fix arms, each bias file's SHA-256 the one its record holds,
    and ``none_check``; one line naming a missing or changed file."""
    from lostmid.architectures import fix_jobs

    found = {"none_check": read_json(record(plan) / "fits" / "none_check.json")}
    for arm in ARMS:
        found[arm] = []
        for fit in range(fit_count(plan)):
            path = bias_path(plan, arm, fit)
            said = read_json(path.with_suffix(".json"))
            if not path.is_file() or fix_jobs.sha256(path) != said["bias_sha256"]:
                raise InputError(
                    f"{path}: missing, or its SHA-256 is not the {said['bias_sha256'][:12]} its fit recorded"
                )
            found[arm].append(said)
    return found


def held_out_examples(plan: dict, settings) -> pd.DataFrame:
    """Every arm's examples of the plan's held-out windows that are recorded, each with its window's fit (column
    ``fit``: k mod F; none: its record's, under its config hash; a fix arm: window k under the stamp of its fit's
    bias file and strength)."""
    from lostmid.architectures import fix_jobs, retrieval_summary

    found = []
    for n, count in plan["run"]["windows_by_n"].items():
        none = [p for p in (none_path(plan, n, k) for k in range(count)) if p.exists()]
        if none:
            found.append(retrieval_summary.read_windows(none, settings.record_hash()).assign(arm="none"))
        for arm in ARMS:
            for fit in range(fit_count(plan)):
                draws = [k for k in range(fit, count, fit_count(plan))]
                paths = [p for p in (window_path(plan, arm, n, k) for k in draws) if p.exists()]
                if paths:
                    stamp = fix_jobs.window_hash(settings, arm, *fix_jobs.arm_bias(plan, arm, fit))
                    found.append(retrieval_summary.read_windows(paths, stamp).assign(arm=arm))
    if not found:
        raise InputError(f"{record(plan)}: no held-out window of any arm is recorded")
    examples = pd.concat(found, ignore_index=True)
    return examples.assign(fit=[fit_of(plan, k) for k in examples.draw])


def read_gate(plan: dict) -> pd.DataFrame:
    paths = sorted((record(plan) / "gate").glob("*.parquet"))
    columns = ["arm", "n", "draw", "flatness", "content_free_distance", "window"]
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if paths else pd.DataFrame(columns=columns)


def read_fix_record(path, repo=".") -> FixRecord:
    """The fix run's record folder ``path`` checked whole: its manifest, its overlay as run (record.read_record), the
    plan its overlay names (under ``repo``) passing the plan check and naming this folder as its record, the fits'
    records, the zero-bias check passed, the windows under their stamps; one line naming the problem otherwise."""
    from lostmid import records
    from lostmid.architectures.fix_jobs import retrieval_settings
    from lostmid.study.record import plan_status, read_record

    path, repo = Path(path), Path(repo)
    run = read_record(path, names=())
    named = (run.overlay or {}).get("plan")
    if not named:
        raise InputError(f"{path / records.OVERLAY}: names no plan (its key plan)")
    plan = read_fix_plan(repo / named)
    if record(plan).resolve() != path.resolve():
        raise InputError(f"{path}: the plan {named} names another record folder ({record(plan)})")
    primary, why = plan_status(repo, repo / named, run.manifest)
    if not primary:
        raise InputError(f"{path}: the plan check failed ({why}): no page from this record")
    fits = read_fits(plan)
    if not fits["none_check"].get("same"):
        raise InputError(f"{path / 'fits' / 'none_check.json'}: a zero bias did not give the none record's answers")
    settings = retrieval_settings(plan)
    examples = held_out_examples(plan, settings)
    return FixRecord(path, plan, run.manifest, why, examples, fits, read_gate(plan), settings)


# --------------------------------------------------------------------------- the gates


@dataclass(frozen=True)
class GateReading:
    """A fix plan's gate, read: not a count of fits that pass (the studies' ``reading.Gate``) but a bound over the
    fit means of a measured ratio. ``passed`` None where it was not read; ``mean`` and ``upper`` the mean over the
    fits of their mean log ratio and the upper bound of its Student t interval over the ``fits`` fit means;
    ``passing`` the fits whose own mean lies below the margin; ``per_fit`` the fit means (index: fit); ``why``."""

    arm: str
    n: int
    passed: bool | None
    mean: float
    upper: float
    fits: int
    passing: int
    per_fit: pd.Series
    why: str


def gate_ratios(gate: pd.DataFrame, n: int, arm: str, column: str) -> pd.Series:
    """Per gate window at n (index: draw): log(``column`` under ``arm`` / under none)."""
    wide = gate[gate.n == n].pivot(index="draw", columns="arm", values=column)
    if arm not in wide or "none" not in wide:
        return pd.Series(dtype=float)
    return np.log(wide[arm].astype(float) / wide["none"].astype(float)).dropna()


def fit_means(plan: dict, per_window: pd.Series) -> pd.Series:
    """Per fit (index): the mean of the per-window values (index: the draw k, its fit k mod F)."""
    return per_window.groupby([fit_of(plan, k) for k in per_window.index]).mean().rename_axis("fit")


def gate_reading(plan: dict, fix: FixRecord, arm: str, n: int) -> GateReading:
    """The plan's gate of ``arm`` at n on the record's gate readings (``gate_of``), the blog fits that kept B = 0
    named."""
    zero = sum(not f.get("fitted", True) for f in fix.fits["blog"]) if arm == "blog" else 0
    return gate_of(plan, fix.gate, arm, n, zero)


def gate_first_passed(plan: dict) -> bool:
    """Whether the gate of the plan's gate-first order (``fix_plan.gate_first``) passed on the gate readings in its
    record (``gate_of``, the page's reading): the workflow asks it, once the gate has run, before it lists the
    held-out windows beyond the floor; True where the plan has no such order; one line where the gate is not read
    (its windows missing from the record: the run would otherwise stop at the floor unasked)."""
    first = gate_first(plan)
    if first is None:
        return True
    gate = gate_of(plan, read_gate(plan), first[1], first[0])
    if gate.passed is None:
        raise InputError(f"{record(plan) / 'gate'}: the {first[1]} gate at n = {first[0]} is not read ({gate.why}): "
                         "the gate-first order cannot say whether the windows beyond its floor run")  # fmt: skip
    return gate.passed


def gate_of(plan: dict, gate: pd.DataFrame, arm: str, n: int, zero: int = 0) -> GateReading:
    """The plan's gate of ``arm`` at n on the gate readings ``gate``, at the fit level: per gate window the log
    ratio (blog: the task-free profile's flatness at n; fitm: the content-free attention's distance from uniform
    at the calibration's n, which stands for every n), per fit the mean over its gate windows; passed when the
    upper bound of the Student t interval (the gates' level) over the F fit means lies below log(ratio); not read
    while a gate window is missing. The fits that pass on their own (their mean below log(ratio)) are counted
    beside, and the ``zero`` fits that kept B = 0."""
    gates = plan["run"]["gates"]
    calibrated = int(plan["arms"]["fitm"]["calibration"]["n"])
    column, at = ("flatness", n) if arm == "blog" else ("content_free_distance", calibrated)
    what = "task-free profile's flatness" if arm == "blog" else "content-free attention's distance from uniform"
    expected = len(gate_windows(plan, at))
    ratios = gate_ratios(gate, at, arm, column)
    if len(ratios) < expected:
        words = f"{len(ratios)} of its {expected} gate windows"
        return GateReading(arm, at, None, math.nan, math.nan, 0, 0, pd.Series(dtype=float), words)
    means = fit_means(plan, ratios)
    effect = re.t_effect(means, gates["level"])
    margin = math.log(gates["ratio"])
    passed, passing = bool(effect.high < margin), int((means < margin).sum())
    words = (
        f"the {what} with the fix over without, {math.exp(effect.estimate):.3g} (upper bound "
        f"{math.exp(effect.high):.3g}, {gates['level']:.0%} t over {len(means)} fit means of {len(ratios)} windows "
        f"at n = {at}; passes below {gates['ratio']:g}, our margin); {passing} of {len(means)} fits pass on their own"
        + (f"; {zero} kept B = 0" if zero else "")
    )
    return GateReading(arm, at, passed, effect.estimate, effect.high, len(means), passing, means, words)


# --------------------------------------------------------------------------- the outcomes


def non_inferiority_p(units: pd.Series, margin: float) -> float:
    """The one-sided Student t p of H0: mean <= -margin (the units, the fit means of the per-window differences,
    plus the margin against 0)."""
    x = units.to_numpy(np.float64) + margin
    if x.size < 2:
        return 1.0
    if np.all(x == x[0]):
        return 0.0 if x[0] > 0 else 1.0
    return float(stats.ttest_1samp(x, 0.0, alternative="greater").pvalue)


def one_sided_outcome(low: float, high: float, margin: float) -> str:
    """A fix against none (direction increase): study/plan.yaml's four outcomes against our margin; a decided
    interval below 0 named "the other way"."""
    found = ONE_SIDED_WORDS[outcomes.outcome(low, high, "increase", margin)]
    return found + OTHER_WAY if found != outcomes.INCONCLUSIVE and high < 0 else found


def non_inferiority_outcome(low: float, high: float, margin: float) -> str:
    """Accuracy not lowered (direction not_lowered), read as study/plan.yaml's four outcomes of the claim
    "lowered" (``outcomes.outcome``, direction decrease) against our margin: at least it, lowered beyond our margin;
    smaller, lowered by less than it; no effect of its size, not lowered; inconclusive, but "lowered" where the
    upper bound lies below 0 (as where it lies exactly on -margin: not beyond it)."""
    decided = outcomes.outcome(low, high, "decrease", margin)
    if decided == outcomes.INCONCLUSIVE or high == -margin:
        return LOWERED if low <= high < 0 else outcomes.INCONCLUSIVE  # a NaN bound: inconclusive
    return NON_INFERIORITY_WORDS[decided]


RULES = {"increase": one_sided_outcome, "none": outcomes.two_sided_outcome, "not_lowered": non_inferiority_outcome}


# --------------------------------------------------------------------------- the primaries


def primary_units(fix: FixRecord, primary: dict) -> pd.Series:
    """Per held-out window: the plan's paired difference (arms[0] minus arms[1]) of its outcome over its q."""
    first, second = primary["arms"]
    n = int(primary["n"])
    return re.paired_difference(fix.at(first, n), fix.at(second, n), primary["positions"], primary["outcome"])


def primary_effect(fix: FixRecord, primary: dict) -> MeanEffect:
    """The plan's estimator (``retrieval_estimators.fit_cluster_difference``): the fit means of the per-window
    paired differences, Student t over the F fits."""
    first, second = primary["arms"]
    n = int(primary["n"])
    words = " ".join(primary["estimator_words"].split())
    return re.fit_cluster_difference(
        fix.at(first, n), fix.at(second, n), primary["positions"], primary["outcome"], words
    )


def gate_stop(plan: dict, fix: FixRecord, n: int) -> str:
    """Where the gate of the plan's gate-first order failed at n (``fix_plan.gate_first``), the sentence that says
    the run stopped at its floor there; "" otherwise."""
    first = gate_first(plan)
    if first is None or first[0] != n:
        return ""
    gate = gate_reading(plan, fix, first[1], n)
    if gate.passed is not False:
        return ""
    return (
        f"{STOPPED_BY_GATE}: the {first[1]} gate at n = {n} failed ({gate.why}), so the run stopped at the first "
        f"{held_out_count(plan, n, False)} of the plan's {held_out_count(plan, n)} held-out windows there, as the "
        "plan's gate-first order says (run.gate_first: a failed gate at n stops every primary at n)"
    )


def stopped_by(plan: dict, fix: FixRecord, primary: dict, units: pd.Series) -> str:
    """Why a primary makes no decision ("" when it does): the gate-first order's gate failed at its n (``gate_stop``:
    "stopped by the gate"), the plan's held-out windows not all paired (no interim look), or a gate of one of its fix
    arms failed or not read."""
    n, expected = int(primary["n"]), int(plan["run"]["windows_by_n"][int(primary["n"])])
    stop = gate_stop(plan, fix, n)
    if stop:
        return stop
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


def read_fit_cluster(fix: FixRecord, plan: dict, primary: dict) -> Read:
    """A primary read by the plan's estimator (``primary_effect``) and its p (``primary_p``), with the held-out windows
    paired behind it; no decision (Missing, p = 1) where ``stopped_by`` says why."""
    units = primary_units(fix, primary)
    why = stopped_by(plan, fix, primary, units)
    if why:
        return Read(primary, Missing(NO_DECISION, why), windows=len(units))
    effect = primary_effect(fix, primary)
    return Read(primary, effect, primary_p(effect, primary), windows=len(units))


READINGS["lostmid.architectures.retrieval_estimators.fit_cluster_difference"] = read_fit_cluster


def margin(read: Read) -> float:
    """The primary's margin (ours: the plan's ``margin.size``)."""
    return float(read.primary["margin"]["size"])


def outcome_by_rule(read: Read, plan: dict, level: float) -> tuple[float, float, str]:
    """(low, high, outcome) at 1 - ``level``: the outcome by the rule of the primary's direction (``RULES``) against
    its margin; no decision where it has no effect."""
    if not read.decided:
        return reading.interval_outcome(read, plan, level)
    low, high = read.effect.interval(1 - level)
    return low, high, RULES[read.primary["direction"]](low, high, margin(read))


def primary_rows(plan: dict, fix: FixRecord) -> list[Read]:
    """Every primary of the plan (``reading.read_primaries``, each named by its key): Holm's levels over all k of
    them (p = 1 where one makes no decision: it keeps its place in k), each interval at 1 - its level, its outcome by
    its direction's rule."""
    primaries = [{"id": name, **primary} for name, primary in plan["primaries"].items()]
    return reading.read_primaries({**plan, "primaries": primaries}, fix, rule=outcome_by_rule)


def primary_table(rows: list[Read]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(id=r.id, n=int(r.primary["n"]), estimate=r.effect.estimate if r.decided else math.nan, low=r.low)
            | dict(high=r.high, level=r.level, p=r.p if r.decided else math.nan, windows=r.windows)
            | dict(fits=r.effect.n if r.decided else 0, margin=margin(r))
            | dict(outcome=r.outcome, why=r.why)
            for r in rows
        ]
    )


# --------------------------------------------------------------------------- the secondaries


def window_fits(examples: pd.DataFrame, windows) -> np.ndarray:
    """The fit each of ``windows`` (corpus window indices) was evaluated under."""
    return examples.groupby("window").fit.first().loc[list(windows)].to_numpy()


def nested_interval(per_window: pd.Series, fits: np.ndarray, resamples: int, seed: int, level: float) -> tuple:
    """(estimate, low, high): the mean over windows with its percentile interval over two-level bootstrap draws
    (``intervals.nested_draws``: fits, then windows within fits); NaN bounds with fewer than 2 fits."""
    if len(set(fits)) < 2:
        return (per_window.mean() if len(per_window) else math.nan), math.nan, math.nan
    weights = intervals.nested_draws(fits, resamples, seed)
    return bootstrap.percentile_interval(intervals.means(weights, per_window.to_numpy(float)), level)


def contrast_table(fix: FixRecord, resamples: int, seed: int, level: float) -> pd.DataFrame:
    """Exploratory: per n, contrast (``CONTRASTS``), outcome and q (and over every q: ``positions`` "all"), the
    mean paired difference over windows with its percentile interval at ``level`` over two-level bootstrap draws
    (fits, then windows within fits; ``nested_interval``)."""
    fractions = list(fix.settings.fractions)
    found = []
    for n in sorted(fix.examples.n.unique()):
        for first, second in CONTRASTS:
            for column in OUTCOMES:
                for positions in [[q] for q in fractions] + [fractions]:
                    units = re.paired_difference(fix.at(first, n), fix.at(second, n), positions, column)
                    fits = window_fits(fix.at(first, n), units.index)
                    estimate, low, high = nested_interval(units, fits, resamples, seed + int(n), level)
                    found.append(
                        dict(n=int(n), contrast=f"{first} - {second}", outcome=column, windows=len(units))
                        | dict(fits=len(set(fits)), positions=f"q = {positions[0]:g}" if len(positions) == 1 else "all")
                        | dict(estimate=estimate, low=low, high=high)
                    )
    return pd.DataFrame(found)


def position_table(fix: FixRecord, resamples: int, seed: int, level: float) -> pd.DataFrame:
    """Per arm, n and q: the mean over windows of success and of log p(answer) (tasks pooled per window), each with
    its percentile interval over two-level bootstrap draws (fits, then windows within fits; ``nested_interval``,
    the same draws at every q of an arm and n)."""
    found = []
    for (arm, n), part in fix.examples.groupby(["arm", "n"], sort=True):
        for q in fix.settings.fractions:
            row = dict(arm=arm, n=int(n), q=float(q))
            for column in OUTCOMES:
                per_window = re.window_mean(part, [q], column)
                fits = window_fits(part, per_window.index)
                estimate, low, high = nested_interval(per_window, fits, resamples, seed + int(n), level)
                row |= {"windows": len(per_window), "fits": len(set(fits)), column: estimate}
                row |= {f"{column}_lo": low, f"{column}_hi": high}
            found.append(row)
    return pd.DataFrame(found)


def gate_table(plan: dict, fix: FixRecord) -> pd.DataFrame:
    """Exploratory beside the gates: per n, fix arm and reading (flatness; at the calibration's n the content-free
    distance), the mean over the fits of the fit means of the log ratio to none, with its Student t interval over
    the fit means at the gates' level."""
    found = []
    for n in sorted(fix.gate.n.unique()):
        for arm in ARMS:
            for column in ("flatness", "content_free_distance"):
                ratios = gate_ratios(fix.gate, n, arm, column)
                means = fit_means(plan, ratios)
                if len(means) < 2:
                    continue
                effect = re.t_effect(means, plan["run"]["gates"]["level"])
                found.append(
                    dict(n=int(n), arm=arm, reading=column, windows=len(ratios), fits=len(means))
                    | dict(log_ratio=effect.estimate, low=effect.low, high=effect.high)
                )
    columns = ["n", "arm", "reading", "windows", "fits", "log_ratio", "low", "high"]
    return pd.DataFrame(found, columns=columns)


def fit_table(fix: FixRecord) -> pd.DataFrame:
    """Per fit i: its window (the draw's k and the corpus window), the blog fit's loss and none's on it, whether B
    is not 0, the calibration's strength t_i, and each gate's fit mean ratio (blog at every n, fitm at its n)."""
    plan = fix.plan
    rows = []
    for fit, (blog, fitm) in enumerate(zip(fix.fits["blog"], fix.fits["fitm"])):
        rows.append(
            dict(fit=fit, draw=blog["windows"]["draws"][0], corpus_window=blog["windows"]["corpus_windows"][0])
            | dict(loss=blog["loss"], none=blog["none"], fitted=bool(blog["fitted"]), strength=fitm["strength"])
        )
    table = pd.DataFrame(rows)
    gates = [("blog", int(n)) for n in plan["run"]["windows_by_n"]] + [
        ("fitm", int(plan["arms"]["fitm"]["calibration"]["n"]))
    ]
    for arm, n in gates:
        gate = gate_reading(plan, fix, arm, n)
        table[f"{arm}_gate_n{gate.n}"] = np.exp(gate.per_fit.reindex(table.fit).to_numpy(float))
    return table
