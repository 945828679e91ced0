"""What the second study's page adds beside its primaries (issue 52): what B can do to the residual network at
initialization (``flatness_section``: the blog's form from the pilot before the plan, the richer form from the
run's own fits, each by the gate's measure), and study/plan2.yaml's exploratory secondaries (``secondary_rows``:
95% intervals, no outcome, no multiplicity correction).

Each secondary id is read by the one function ``SECONDARIES`` names, with the estimators the primaries use
(``lostmid.stats.study2``, ``lostmid.study.estimators``); a secondary the record cannot answer reads
"not in this record" and says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lostmid import records
from lostmid.errors import InputError
from lostmid.evidence.fit_checks import default_settings, fit_flatness
from lostmid.stats import study2
from lostmid.stats.effects import MeanEffect, WelchEffect
from lostmid.study import estimators as est
from lostmid.study import study2_reading as s2
from lostmid.study.reading import number
from lostmid.study.record import RECORD_KEYS, Record

PILOT = Path("runs/study2_pilot/flatness.csv")  # scripts/study2_pilot.py's record, before the plan
PILOT_FORMS = {"full": "the blog's form, one (L, L) B", "layer_head": "one B per attention step and head"}
RESIDUAL_FIX = "fix_res"  # plan2's residual fix arm: one B per attention step and head
NOT_IN_RECORD = "not in this record"
LEVEL = 0.95  # plan2 secondaries: 95%, no multiplicity correction
FIX_READINGS = ("lostmid.stats.study2.fit_cluster_effect", "lostmid.stats.study2.equivalence")
INTERACTION = ("d_speed_noresidual", "d_speed_residual")  # d_residual_by_fix_interaction: without minus with
INFLUENCE = ("influence_beyond_position_residual", "base_nores")  # its primary, read on this arm
# Why the default run's evidence table decides (d) and (e) on the residual network where this section's arm differs.
OTHER_PAGE = (
    "The default run's evidence table (runs/default/results.md) leaves (d) and (e) undecided on the residual network "
    "for `debiased_literal`, the blog's literal reading: one (L, L) B fitted on the no-residual network and trained "
    "in the residual one, which that B does not flatten (its check `bias_fit_flattens_trained_model` there). That is "
    "another intervention than this study's residual arm, whose B is fitted on the residual network and flattens it: "
    "neither row stands for the other."
)


# --------------------------------------------------------------------------- the residual network's flatness


def read_pilot(path) -> pd.DataFrame:
    """The pilot's flatness per form (``PILOT``), indexed by form; one line when it is missing or lacks a form."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no pilot flatness record (scripts/study2_pilot.py writes it)")
    table = pd.read_csv(path).set_index("form")
    if not set(PILOT_FORMS) <= set(table.index):
        raise InputError(f"{path}: the pilot's record lacks a form of {list(PILOT_FORMS)}")
    return table


def flatness_section(record: Record, pilot: pd.DataFrame) -> list[str]:
    """What B can do to the residual network at initialization, by the gate's measure (log(E_inf with B / at
    B = 0) on held-out initializations, mean and 95% upper bound): the pilot's two forms, one fit each, and every
    fit of the residual fix arm in the run, as its fit checks make it (``fit_flatness``), with how many pass the
    arm's gate (``study2_reading.gate``: the flatness bound, the context share kept, the fit's guard)."""
    fits = s2.arm_variants(record.overlay, RESIDUAL_FIX)
    measured = pd.DataFrame(
        {fit: {"log_ratio": i.estimate, "upper": i.high} for fit, i in fit_flatness(record.bias_summary, fits).items()}
    ).T
    bound = -default_settings().log_ratio_margin
    found = s2.gate(record, RESIDUAL_FIX)
    form = " and ".join(PILOT_FORMS.get(f, f) for f in residual_forms(record)) or PILOT_FORMS["layer_head"]
    blog, rich = pilot.loc["full"], pilot.loc["layer_head"]
    out = ["", "## What B can do to the residual network at initialization", ""]
    out.append(
        f"A fit flattens the network when the 95% upper bound of log(E_inf with B / E_inf at B = 0) over its "
        f"held-out initializations is at most {number(bound)} (log(1/1.5)). The blog's form, one (L, L) B, in the "
        f"pilot before the plan ({PILOT.as_posix()}, one fit seed, {int(blog.restarts)} starts): E_inf "
        f"{number(blog.E_inf_b0)} -> {number(blog.E_inf_fit)}, log ratio {number(blog.log_ratio)} (upper bound "
        f"{number(blog.log_ratio_upper)}): it {'passes' if blog.passes else 'fails'}. What it leaves is the readout "
        f"position's own imbalance (its identity path), the floor (r - 1)^2 / (L - 1): {number(blog.floor_b0)} at "
        f"B = 0, {number(blog.floor_fit)} at its best B. One B per attention step and head:"
        f" {number(rich.log_ratio)} (upper bound {number(rich.log_ratio_upper)}) in the pilot; in the run, "
        f"{len(fits)} fits of {RESIDUAL_FIX} ({form}), each on its own fit seed, measured by their fit checks."
    )
    out += ["", OTHER_PAGE]
    out += ["", "| B | record | log ratio | 95% upper bound | passes the gate |", "|---|---|---|---|---|"]
    for tried, row in pilot.loc[list(PILOT_FORMS)].iterrows():
        passes = "yes" if row.passes else "no"
        out.append(
            f"| {PILOT_FORMS[tried]} | pilot, one fit | {number(row.log_ratio)} | {number(row.log_ratio_upper)} | "
            f"{passes} (flatness) |"
        )
    if measured.empty:
        out.append(f"| {PILOT_FORMS['layer_head']} | run: {NOT_IN_RECORD}, no fit check of {RESIDUAL_FIX} | | | |")
        return out
    best = measured.log_ratio.idxmin()
    out += [
        f"| {form} | run, best of {len(measured)} fits (`{best}`) | "
        f"{number(measured.log_ratio[best])} | {number(measured.upper[best])} | "
        f"{'yes' if found.reasons[best] is None else 'no'} |",
        f"| {form} | run, median over {len(measured)} fits | "
        f"{number(float(measured.log_ratio.median()))} | {number(float(measured.upper.median()))} | "
        f"{len(found.passed)} of {len(fits)} |",
    ]
    return out


# --------------------------------------------------------------------------- the secondaries


@dataclass(frozen=True)
class Context:
    """What a secondary's reading reads: the plan, the record, its folder and the (a) bootstrap's resamples."""

    plan: dict
    record: Record
    run: Path
    resamples: int

    def primary(self, name: str) -> dict:
        return next(p for p in self.plan["primaries"] if p["id"] == name)


def interval_row(sid: str, what: str, estimate: float, low: float, high: float, n: int, note: str) -> dict:
    """One row as ``findings.secondaries_table`` prints it: an estimate, its 95% interval, its units, a note."""
    return {"id": sid, "what": what, "estimate": estimate, "low": low, "high": high, "n": n, "note": note}


def row(sid: str, what: str, effect, note: str = "") -> dict:
    """One exploratory row of ``effect``: its estimate and 95% interval, its units, its method (and ``note``)."""
    said = effect.method + (f"; {note}" if note else "")
    return interval_row(sid, what, effect.estimate, *effect.interval(LEVEL), effect.n, said)


def words_row(sid: str, what: str, note: str) -> dict:
    """A row without an estimate: where the page shows it, or why the record cannot give it."""
    return interval_row(sid, what, math.nan, math.nan, math.nan, 0, note)


def a_position_noresidual_500(c: Context) -> list[dict]:
    primary = c.primary("a_position_noresidual_1500")
    read = s2.read_slope(c.record, c.plan, {**primary, "checkpoint": 500}, c.resamples)
    return [row("a_position_noresidual_500", "a_position_noresidual_1500's estimator at step 500", read.effect)]


def a_per_seed_slopes(c: Context) -> list[dict]:
    """(a) as the first study read it, per-seed slopes and a t over seeds: Firth's slope per seed and the +0.5
    correction's (``estimators.position_slope``), at steps 500 and 1500, on each baseline the (a) primaries read."""
    arms = dict.fromkeys(p["arms"][0] for p in c.plan["primaries"] if p["estimator"] == s2.SLOPE)
    found = []
    for arm in arms:
        variants = s2.arm_variants(c.record.overlay, arm)
        for step in (500, 1500):
            rows = est.arm_rows(c.record.failure, variants, step=step)
            firth = MeanEffect(
                study2.per_seed_firth_slopes(rows),
                f"per-seed Firth logistic slope of failure on p at step {step}; Student t over seeds",
            )
            corrected = est.position_slope(c.record.failure, variants, step)
            found += [
                row("a_per_seed_slopes", f"{arm}, step {step}: Firth's slope per seed", firth),
                row("a_per_seed_slopes", f"{arm}, step {step}: +0.5 correction", corrected),
            ]
    return found


def fix_primaries(c: Context) -> list[dict]:
    return [p for p in c.plan["primaries"] if p["estimator"] in FIX_READINGS]


def fix_arms_mixed_model(c: Context) -> list[dict]:
    """Every fix-arm primary's per-seed values (``fix_arm_units``) with a random intercept per fit."""
    found = []
    for primary in fix_primaries(c):
        units, what, gate, _ = s2.fix_arm_units(c.record, c.plan, primary)
        effect = study2.fit_mixed_effect(units, what)
        found.append(row("fix_arms_mixed_model", f"`{primary['id']}`, random intercept per fit", effect, gate.words()))
    return found


def fix_arms_seeds_as_independent(c: Context) -> list[dict]:
    """Every fix-arm primary's per-seed values (``fix_arm_units``) as the first study read them: the seeds as
    independent units, the mean over seeds with its Student t (``estimators.speed_difference``'s reading)."""
    found = []
    for primary in fix_primaries(c):
        units, what, gate, _ = s2.fix_arm_units(c.record, c.plan, primary)
        effect = MeanEffect(units.droplevel("fit"), f"{what}; Student t over {units.size} seeds as independent units")
        found.append(row("fix_arms_seeds_as_independent", f"`{primary['id']}`, seeds as units", effect, gate.words()))
    return found


def d_residual_by_fix_interaction(c: Context) -> list[dict]:
    """(fix - baseline) of (d) without the residual path minus with it: Welch t over the two sets of fit means."""
    means = [s2.fix_arm_units(c.record, c.plan, c.primary(name))[0].groupby(level="fit").mean() for name in INTERACTION]
    method = "(fix - baseline) of the mean failure over training, mean per fit, without minus with the residual path"
    effect = WelchEffect(*means, f"{method}; Welch t over the two sets of fit means")
    return [row("d_residual_by_fix_interaction", f"`{INTERACTION[0]}` minus `{INTERACTION[1]}`", effect)]


def influence_beyond_position_noresidual(c: Context) -> list[dict]:
    name, arm = INFLUENCE
    what = f"`{name}`'s fits on {arm}"
    try:
        read = s2.read_influence(c.record, c.plan, {**c.primary(name), "arms": [arm]})
    except InputError as why:
        return [words_row("influence_beyond_position_noresidual", what, f"{NOT_IN_RECORD}: {why}")]
    return [row("influence_beyond_position_noresidual", f"{what}: {fit}", e) for fit, e in read.fits.items()]


def failure_by_position_curves(c: Context) -> list[dict]:
    return [
        words_row(
            "failure_by_position_curves",
            "each arm's failure by flag position at steps 500 and 1500, 95% bands",
            "the figure after study 2's primaries, from the record's failure table",
        )
    ]


def fit_checks_and_traces(c: Context) -> list[dict]:
    path = c.run / "tables" / "bias_iterations.parquet"
    where = "the gate's measure of every residual fit: the section on what B can do to the residual network"
    if not path.is_file():
        return [words_row("fit_checks_and_traces", where, f"{NOT_IN_RECORD}: no tables/bias_iterations.parquet")]
    traces = pd.read_parquet(path, columns=["variant"])
    note = f"each start's convergence trace: tables/bias_iterations.parquet, {traces.variant.nunique()} fits"
    return [words_row("fit_checks_and_traces", where, note)]


def residual_fix_blog_form(c: Context) -> list[dict]:
    """The blog's form (one (L, L) B, the fit summary's ``param`` "full") on the residual network, per fit of the
    residual fix arm that has it: the best fit's gate measure (``fit_flatness``) and how many reach the gate's
    bound; where the run's residual fits are of another form, that form, from the record."""
    what = "the blog's form at initialization, per fit"
    forms = residual_forms(c.record)
    blog = forms.get("full", [])
    if not blog:
        named = ", ".join(PILOT_FORMS.get(form, form) for form in forms) or "no fit"
        why = (
            f"the run's fits of {RESIDUAL_FIX} are of the form {named}, none of the blog's one (L, L) B; the pilot's "
            "one fit of that form is in the section on what B can do to the residual network"
        )
        return [words_row("residual_fix_blog_form", what, f"{NOT_IN_RECORD}: {why}")]
    flat = fit_flatness(c.record.bias_summary, blog)
    best = min(flat, key=lambda fit: flat[fit].estimate)
    reached = sum(i.high <= -default_settings().log_ratio_margin for i in flat.values())
    note = f"the best of {len(flat)} fits (`{best}`), its held-out initializations' interval; {reached} reach the bound"
    found = flat[best]
    return [interval_row("residual_fix_blog_form", what, found.estimate, found.low, found.high, found.n, note)]


def residual_forms(record: Record) -> dict[str, list[str]]:
    """The residual fix arm's fits by the form of their B as the record's fit summary names it (``param``)."""
    fits = s2.arm_variants(record.overlay, RESIDUAL_FIX)
    if record.bias_summary is None:
        return {}
    held = record.bias_summary[record.bias_summary.variant.isin(fits)].drop_duplicates("variant")
    return {form: sorted(group.variant, key=fits.index) for form, group in held.groupby("param")}


def thermodynamic_limit(c: Context) -> list[dict]:
    """The growth of log10(m_1 / m_L) per doubling of L at initialization (``estimators.imbalance_growth`` per init
    seed), with and without the residual path: deterministic per seed, so its mean and range, no interval."""
    path = c.run / "tables" / "length_init.parquet"
    what = "growth of log10 first/last per doubling of L at initialization"
    if not path.is_file():
        return [words_row("thermodynamic_limit", what, f"{NOT_IN_RECORD}: no tables/length_init.parquet")]
    profiles = records.read_table(path, *RECORD_KEYS["length_init"])
    found = []
    for residual in (True, False):
        units = est.imbalance_growth(profiles[profiles.residual == residual], "seed").units
        note = f"deterministic per init seed: range [{number(units.min())}, {number(units.max())}], no interval"
        nan = math.nan
        found.append(
            interval_row(
                "thermodynamic_limit", f"{what}, residual {residual}", units.mean(), nan, nan, units.size, note
            )
        )
    return found


# Each plan2 secondary id -> the function that reads it.
SECONDARIES = {
    "a_position_noresidual_500": a_position_noresidual_500,
    "a_per_seed_slopes": a_per_seed_slopes,
    "fix_arms_mixed_model": fix_arms_mixed_model,
    "fix_arms_seeds_as_independent": fix_arms_seeds_as_independent,
    "d_residual_by_fix_interaction": d_residual_by_fix_interaction,
    "influence_beyond_position_noresidual": influence_beyond_position_noresidual,
    "failure_by_position_curves": failure_by_position_curves,
    "fit_checks_and_traces": fit_checks_and_traces,
    "residual_fix_blog_form": residual_fix_blog_form,
    "thermodynamic_limit": thermodynamic_limit,
}


def secondary_rows(plan: dict, record: Record, run, resamples: int = s2.RESAMPLES) -> list[dict]:
    """Every secondary of ``plan``, in its order, read by its function (``SECONDARIES``); rows as
    ``findings.secondaries_table`` prints them. A secondary without a reading is one line."""
    missing = [s["id"] for s in plan["secondaries"] if s["id"] not in SECONDARIES]
    if missing:
        raise InputError(f"plan secondaries without a reading (study2_secondaries.SECONDARIES): {missing}")
    c = Context(plan, record, Path(run), resamples)
    return [found for s in plan["secondaries"] for found in SECONDARIES[s["id"]](c)]
