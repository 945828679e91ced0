"""Pooled evidence: a claim run on several disjoint seed sets, combined by inverse-variance meta-analysis.

Input: run records (``runs/<name>/``: ``manifest.json``, ``overlay.yaml`` and the evidence table under
``evidence/`` or ``tables/``), and the claim to pool, with the start of its setting where the claim has
several. From each run's evidence table it takes the claim's row: its estimate and t interval over
``n_seeds`` seeds, the interval's level, and its rule (``rule_kind``, ``margin``); the seed set is the one
the run's grid (its overlay, which must have the SHA-256 the run's manifest records) trains for the row's
variants at its L and depth; the evidence table is read whole (readable, one row per claim and setting).
Nothing is typed: every number comes from a record a run wrote. Each run's standard error is its interval's
half-width over the t quantile it was built with.

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

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from lostmid import config as cfg
from lostmid import manifest as run_manifest
from lostmid import records
from lostmid.errors import InputError
from lostmid.evidence import decisions as dec
from lostmid.seed_ledger import words as seed_words
from lostmid.stats.meta import meta_analysis

# Where a run record keeps its evidence table: as the workflow's results folder has it (runs/default) or
# beside the other tables of a record (the tables/ folder of runs/study's layout).
EVIDENCE_TABLES = ("evidence/evidence.parquet", "tables/evidence.parquet")
# The evidence table's columns a pooled run reads.
ROW_COLUMNS = tuple(
    "claim setting L depth checkpoint estimate ci_low ci_high n_seeds rule_kind margin family_size "
    "adjusted_level".split()
)
# What makes two runs' rows the same claim's: pooled together only when these agree.
RULE = ("rule_kind", "margin")
KEYS = ("claim", "setting", *RULE)


def evidence_table(run: Path) -> pd.DataFrame:
    """The run record's evidence table, with the columns a pooled run reads. Errors carry no path: a
    committed record is not moved aside (lostmid.cli.main), it is rerun."""
    found = [run / name for name in EVIDENCE_TABLES if (run / name).is_file()]
    if not found:
        raise InputError(
            f"{run}: no evidence table ({' or '.join(EVIDENCE_TABLES)}): not a run record that can be pooled"
        )
    table = records.read_table(found[0], ("claim", "setting"), finite=False)
    missing = sorted(set(ROW_COLUMNS) - set(table.columns))
    if missing:
        raise InputError(f"{found[0]}: the evidence table lacks the columns {missing}")
    return table


def claim_row(run: Path, table: pd.DataFrame, claim: str, setting: str | None) -> pd.Series:
    """The one row of ``claim`` in the run's table whose setting begins with ``setting`` (any setting: None)."""
    rows = table[table.claim == claim]
    if setting is not None:
        rows = rows[rows.setting.str.startswith(setting)]
    at = f" at a setting beginning {setting!r}" if setting is not None else ""
    if rows.empty:
        raise InputError(f"{run}: the evidence table has no row of claim {claim!r}{at}")
    if len(rows) > 1:
        raise InputError(
            f"{run}: claim {claim!r} has {len(rows)} rows{at} ({'; '.join(rows.setting)}): name one with --setting"
        )
    return rows.iloc[0]


def row_level(row: pd.Series) -> float:
    """The level of the row's interval. The table keeps it as ``adjusted_level``, which in a family of k rows
    is the Bonferroni level 1 - (1 - level) / k (lostmid.evidence.decisions.decide), so it is undone here."""
    return 1 - (1 - float(row.adjusted_level)) * max(int(row.family_size), 1)


def seed_set(run: Path, row: pd.Series) -> frozenset[int]:
    """The seeds the run's grid trains for every variant the row compares (``X vs Y``: the seeds both arms
    share, as the rows pair them by seed) at the row's L and depth. The overlay as run holds the grid: an
    overlay's grid replaces its base's (lists replace), so a record without one does not say its seeds."""
    path = run / records.OVERLAY
    if not path.is_file():
        raise InputError(f"{run}: no overlay.yaml (the config as run): the run's seeds are unknown")
    records.check_overlay(path, run_manifest.read(run))  # an overlay edited after the run says other seeds
    overlay = cfg.read_yaml(path)
    if "grid" not in overlay:
        raise InputError(f"{path}: no grid: the run's seeds are its base config's, which the record does not keep")
    if pd.isna(row.L) or pd.isna(row.depth):
        raise InputError(f"{run}: claim {row.claim!r} at {row.setting!r} was not trained on seeds (no L and depth)")
    arms = row.setting.split(", ")[0].split(" vs ")
    trained = cfg.runs(overlay)
    seeds = frozenset.intersection(
        *(frozenset(r.seed for r in trained if (r.variant, r.L, r.depth) == (arm, row.L, row.depth)) for arm in arms)
    )
    if not seeds:
        raise InputError(f"{path}: the grid trains no seeds of {' and '.join(arms)} at L {row.L}, depth {row.depth}")
    return seeds


def read_run(run, claim: str, setting: str | None = None) -> dict:
    """One run record's line: the claim's row (its setting without the checkpoint, which each run locates
    on its own schedule), its seed set, and the run named by its folder and commits."""
    run = Path(run)
    if not run.is_dir():
        raise InputError(f"{run}: no such run folder")
    row = claim_row(run, evidence_table(run), claim, setting)
    if not (row.n_seeds >= 2 and row.ci_low <= row.estimate <= row.ci_high):
        raise InputError(
            f"{run}: claim {claim!r} has no estimate inside a t interval over 2 or more seeds "
            f"(estimate {row.estimate}, interval [{row.ci_low}, {row.ci_high}], {row.n_seeds} seeds)"
        )
    try:
        dec.stored_rule(row.rule_kind, row.margin)
    except ValueError as err:
        raise InputError(f"{run}: claim {claim!r}'s row has no rule to pool by: {err}") from None
    checkpoint = "" if pd.isna(row.checkpoint) else row.checkpoint
    return {
        "claim": claim,
        "setting": row.setting.removesuffix(f", checkpoint {checkpoint}"),
        "checkpoint": checkpoint,
        "seeds": seed_set(run, row),
        "run": f"{run.name} ({', '.join(run_manifest.commits(run_manifest.read(run)))})",
        "n_seeds": int(row.n_seeds),
        **{key: float(row[key]) for key in ("estimate", "ci_low", "ci_high")},
        "level": row_level(row),
        "rule_kind": row.rule_kind,
        "margin": float(row.margin),
    }


def _agree(runs: pd.DataFrame, columns: list[str], what: str) -> None:
    """One line naming each run's value when the runs' rows differ in ``columns``."""
    if len(runs.drop_duplicates(columns)) > 1:
        each = "; ".join(f"{r['run']}: {', '.join(str(r[c]) for c in columns)}" for _, r in runs.iterrows())
        raise InputError(f"the runs' rows of claim {runs.claim.iloc[0]!r} differ in {what} ({each})")


def _disjoint_or_equal(runs: pd.DataFrame) -> None:
    """Seed sets are either one set repeated or disjoint: a partial overlap is neither a repeat (which counts
    once) nor an independent replicate (which counts on its own), so it cannot be pooled."""
    for first, second in itertools.combinations(dict.fromkeys(runs.seeds), 2):
        if shared := first & second:
            raise InputError(
                f"the seed sets {seed_words(first)} and {seed_words(second)} share seeds {seed_words(shared)} "
                "without being equal: runs to pool repeat a seed set or use disjoint ones"
            )


def read_runs(runs, claim: str, setting: str | None = None) -> pd.DataFrame:
    """One line per run record of ``runs``: the row of ``claim`` (at the setting beginning ``setting``) in
    each, checked to be one claim's row at one setting by one rule, over repeated or disjoint seed sets."""
    lines = pd.DataFrame([read_run(run, claim, setting) for run in runs])
    _agree(lines, ["setting"], "setting")
    _agree(lines, list(RULE), "rule")
    _disjoint_or_equal(lines)
    return lines.assign(seed_set=lines.seeds.map(seed_words)).drop(columns="seeds")


def standard_error(runs: pd.DataFrame) -> pd.Series:
    """Each run's standard error: the t interval's half-width over t_{(1 + level)/2, n - 1}."""
    quantile = stats.t.ppf(0.5 + runs.level / 2, runs.n_seeds - 1)
    return (runs.ci_high - runs.ci_low) / 2 / quantile


def per_seed_set(runs: pd.DataFrame) -> pd.DataFrame:
    """One line per (claim, setting, seed set): repeated runs count once, their mean estimate and mean SE."""
    return (
        runs.assign(se=standard_error(runs))
        .groupby([*KEYS, "seed_set"], sort=False, as_index=False)
        .agg(runs=("run", "size"), n_seeds=("n_seeds", "first"), estimate=("estimate", "mean"), se=("se", "mean"))
    )


def pooled_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One pooled row per (claim, setting, rule) run on two or more disjoint seed sets (``stats.meta``), decided on
    its random-effects interval by the claim's rule."""
    rows = []
    for (claim, setting, kind, margin), sets in per_seed_set(runs).groupby(list(KEYS), sort=False):
        if len(sets) < 2:
            continue
        pooled = meta_analysis(sets.estimate.to_numpy(np.float64), sets.se.to_numpy(np.float64) ** 2)
        rule = dec.stored_rule(kind, margin)
        runs_words = "; ".join(f"{s} ({r} run{'s' if r > 1 else ''})" for s, r in zip(sets.seed_set, sets.runs))
        rows.append(
            {"claim": claim, "setting": setting, "seed_sets": runs_words, "n_seeds": int(sets.n_seeds.sum())}
            | pooled
            | {"verdict": dec.verdict(pooled["random_low"], pooled["random_high"], rule)}
            | {"rule": f"{rule.kind}, margin {rule.margin:.3g}, on the random-effects interval"}
        )
    return pd.DataFrame(rows)
