"""Pooled evidence: a claim run on several disjoint seed sets, combined by inverse-variance meta-analysis.

Input: one declared data file (docs/data/pooled_runs.csv), one line per run of a claim's row: the seed
set it used, its estimate and t interval over ``n_seeds`` seeds at ``level``, and its rule
("kind:margin key" of the evidence settings). Each run's standard error is its interval's half-width
over the t quantile it was built with.

Runs that repeat a seed set count once: their mean estimate, with the mean of their standard errors
(repeats of one seed set on other machines or commits are strongly correlated, not independent;
averaging the standard errors treats them as perfectly correlated, the conservative choice, so a
repeated run never narrows the pooled interval). Then, over the disjoint seed sets: the fixed-effect
estimate (inverse-variance), the random-effects estimate (DerSimonian-Laird tau^2, truncated at 0;
statsmodels' combine_effects 0.15 leaves it negative when Q < df, so the three formulas are written
out here and checked against it), each with its normal 95% interval, and the heterogeneity:
Cochran's Q with its degrees of freedom and p-value, I^2 and tau^2. The pooled row's
verdict is read off the random-effects interval by the claim's own rule (it allows for real
differences between seed sets and machines; the fixed-effect interval is shown beside it).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pandas as pd
from scipy import stats

from lostmid.errors import InputError
from lostmid.evidence import decisions as dec
from lostmid.evidence.settings import EvidenceSettings

RUN_COLUMNS = ("claim", "setting", "seed_set", "run", "n_seeds", "estimate", "ci_low", "ci_high", "level", "rule")


def read_runs(path) -> pd.DataFrame:
    runs = pd.read_csv(path)
    missing = sorted(set(RUN_COLUMNS) - set(runs.columns))
    if missing:
        raise InputError(f"{path}: the runs file lacks the columns {missing}")
    bad = runs[~((runs.ci_low <= runs.estimate) & (runs.estimate <= runs.ci_high) & (runs.n_seeds >= 2))]
    if len(bad):
        raise InputError(f"{path}: run {bad.iloc[0].run!r} has an estimate outside its interval or fewer than 2 seeds")
    return runs


def standard_error(runs: pd.DataFrame) -> pd.Series:
    """Each run's standard error: the t interval's half-width over t_{(1 + level)/2, n - 1}."""
    quantile = stats.t.ppf(0.5 + runs.level / 2, runs.n_seeds - 1)
    return (runs.ci_high - runs.ci_low) / 2 / quantile


def per_seed_set(runs: pd.DataFrame) -> pd.DataFrame:
    """One line per (claim, setting, seed set): repeated runs count once, their mean estimate and mean SE."""
    return (
        runs.assign(se=standard_error(runs))
        .groupby(["claim", "setting", "seed_set", "rule"], sort=False, as_index=False)
        .agg(runs=("run", "size"), n_seeds=("n_seeds", "first"), estimate=("estimate", "mean"), se=("se", "mean"))
    )


def _rule(words: str, ev: EvidenceSettings) -> dec.DecisionRule:
    kind, _, key = words.partition(":")
    if key not in {f.name for f in fields(EvidenceSettings)}:
        raise InputError(f"the rule {words!r} names no evidence setting {key!r}")
    return dec.Rule(kind, key).build(ev)


def inverse_variance(estimates: np.ndarray, variances: np.ndarray) -> tuple[float, float]:
    """The inverse-variance weighted mean and its standard error."""
    weights = 1 / variances
    return float(np.sum(weights * estimates) / weights.sum()), float(np.sqrt(1 / weights.sum()))


def cochran_q(estimates: np.ndarray, variances: np.ndarray) -> float:
    """Cochran's Q: the weighted squared deviations from the fixed-effect estimate (chi^2 with k - 1 df
    under homogeneity)."""
    fixed, _ = inverse_variance(estimates, variances)
    return float(np.sum((estimates - fixed) ** 2 / variances))


def dersimonian_laird_tau2(estimates: np.ndarray, variances: np.ndarray) -> float:
    """The between-set variance by DerSimonian and Laird's method of moments, truncated at 0."""
    weights = 1 / variances
    excess = cochran_q(estimates, variances) - (len(estimates) - 1)
    return max(0.0, excess / (weights.sum() - np.sum(weights**2) / weights.sum()))


def pooled_rows(runs: pd.DataFrame, ev: EvidenceSettings) -> pd.DataFrame:
    """One pooled row per (claim, setting) run on two or more disjoint seed sets."""
    z = stats.norm.ppf(0.975)
    rows = []
    for (claim, setting, rule_words), sets in per_seed_set(runs).groupby(["claim", "setting", "rule"], sort=False):
        if len(sets) < 2:
            continue
        estimates, variances = sets.estimate.to_numpy(np.float64), sets.se.to_numpy(np.float64) ** 2
        fixed, fixed_se = inverse_variance(estimates, variances)
        q, df = cochran_q(estimates, variances), len(sets) - 1
        tau2 = dersimonian_laird_tau2(estimates, variances)
        random, random_se = inverse_variance(estimates, variances + tau2)
        rule = _rule(rule_words, ev)
        rows.append(
            {
                "claim": claim,
                "setting": setting,
                "seed_sets": "; ".join(
                    f"{s} ({r} run{'s' if r > 1 else ''})" for s, r in zip(sets.seed_set, sets.runs)
                ),
                "n_seeds": int(sets.n_seeds.sum()),
                "fixed": fixed,
                "fixed_low": fixed - z * fixed_se,
                "fixed_high": fixed + z * fixed_se,
                "random": random,
                "random_low": random - z * random_se,
                "random_high": random + z * random_se,
                "Q": q,
                "df": df,
                "p_Q": float(stats.chi2.sf(q, df)),
                "I2": max(0.0, (q - df) / q) if q > df else 0.0,  # Higgins and Thompson's I^2
                "tau2": tau2,
                "verdict": dec.verdict(random - z * random_se, random + z * random_se, rule),
                "rule": f"{rule.kind}, margin {rule.margin:.3g}, on the random-effects interval",
            }
        )
    return pd.DataFrame(rows)


def markdown(runs: pd.DataFrame, pooled: pd.DataFrame) -> str:
    """Each run's row, then the pooled row of its claim, as Markdown."""
    lines = [
        "| claim | setting | seed set | run | seeds | estimate [95% interval] |",
        "|---|---|---|---|---|---|",
    ]
    for r in runs.itertuples():
        lines.append(
            f"| {r.claim} | {r.setting} | {r.seed_set} | {r.run} | {r.n_seeds} | "
            f"{r.estimate:.3g} [{r.ci_low:.3g}, {r.ci_high:.3g}] |"
        )
    lines += [
        "",
        "| claim | seed sets (runs) | seeds | fixed effect [95%] | random effects (DL) [95%] | Q (df, p) | I² | τ² "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pooled.itertuples():
        lines.append(
            f"| {p.claim} | {p.seed_sets} | {p.n_seeds} | {p.fixed:.3g} [{p.fixed_low:.3g}, {p.fixed_high:.3g}] | "
            f"{p.random:.3g} [{p.random_low:.3g}, {p.random_high:.3g}] | {p.Q:.3g} ({p.df}, {p.p_Q:.2g}) | "
            f"{p.I2:.0%} | {p.tau2:.3g} | **{p.verdict}** ({p.rule}) |"
        )
    return "\n".join(lines) + "\n"
