"""The primaries' estimators (study/plan.yaml names them): one function each, one effect per replication
unit where there are units, each returning an effect of ``lostmid.stats.effects``.

The flag task's tables are the workflow's per-run tables of the study's arms (``failure``, ``influence``);
an arm is a list of variants (a fix arm: one variant per fit, each on its own block of seeds) whose seeds
are disjoint, so a seed names one run of the arm.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import statsmodels.api as sm
from statsmodels.tools.sm_exceptions import ConvergenceWarning

from lostmid.architectures import retrieval_estimators as retrieval
from lostmid.errors import InputError
from lostmid.evidence import readings
from lostmid.stats import statistics as st
from lostmid.stats.effects import BootstrapEffect, MeanEffect, WaldEffect, WelchEffect
from lostmid.stats.statistics import rank_correlation
from lostmid.tables.length import slopes_per_unit, statistics_table
from lostmid.tables.summaries import accuracy_per_checkpoint


def arm_rows(table: pd.DataFrame, variants, seeds=None, step: int | None = None) -> pd.DataFrame:
    """The rows of an arm's variants (and of ``seeds``, at ``step``); InputError when there are none."""
    part = table[table.variant.isin(list(variants))]
    if seeds is not None:
        part = part[part.seed.isin(list(seeds))]
    if step is not None:
        part = part[part.step == step]
    if part.empty:
        raise InputError(f"no rows of {list(variants)}" + (f" at step {step}" if step is not None else ""))
    if part.groupby(["seed", "step"]).variant.nunique().max() > 1:
        raise InputError(f"the variants {list(variants)} share a seed: an arm's seeds must be disjoint")
    return part


def position_slope(failure: pd.DataFrame, variants, step: int, seeds=None) -> MeanEffect:
    """Claim (a): per seed, the slope of logit(failure) on p at ``step`` (``statistics.logistic_slope``); the
    mean over seeds with its t interval."""
    slopes = st.per_seed_slopes(arm_rows(failure, variants, seeds, step)).set_index("seed").slope
    return MeanEffect(slopes, f"per-seed logistic slope of failure on p at step {step}; Student t over seeds")


def mean_failure_over_training(failure: pd.DataFrame, variants, horizon: int, seeds=None) -> pd.Series:
    """Per seed of the arm: the evidence stage's claim (d) statistic (``readings.mean_failure_over_training``),
    every seed trained to ``horizon`` at least."""
    accuracy = accuracy_per_checkpoint(arm_rows(failure, variants, seeds))
    short = accuracy.groupby("seed").step.max()
    if (short < horizon).any():
        raise InputError(f"{list(variants)}: seeds {list(short[short < horizon].index)} stop before step {horizon}")
    return readings.mean_failure_over_training(accuracy, horizon)


def paired(fix: pd.Series, base: pd.Series) -> pd.Series:
    """fix - base per seed, over the seeds both have (``readings.paired``); InputError when they share none."""
    found = readings.paired(fix, base)
    if found.empty:
        raise InputError("the fix and its baseline share no seed")
    return found


def speed_differences(failure: pd.DataFrame, fix, base, horizon: int, seeds=None) -> pd.Series:
    """Claim (d) per seed: mean failure over training of the fix minus that of the baseline, same seed."""
    return paired(
        mean_failure_over_training(failure, fix, horizon, seeds), mean_failure_over_training(failure, base, horizon)
    )


def speed_difference(failure: pd.DataFrame, fix, base, horizon: int, seeds=None) -> MeanEffect:
    """Claim (d): the mean over seeds of ``speed_differences``, Student t."""
    return MeanEffect(
        speed_differences(failure, fix, base, horizon, seeds),
        f"paired by seed (fix - baseline) of the mean failure over steps 0-{horizon}; Student t over seeds",
    )


def late_minus_early(failure: pd.DataFrame, variants, step: int, seeds=None) -> pd.Series:
    """Per seed of the arm at ``step``: the evidence stage's claim (e) statistic (``readings.late_minus_early``)."""
    return readings.late_minus_early(arm_rows(failure, variants, seeds, step))


def preference_difference(failure: pd.DataFrame, fix, base, step: int, seeds=None) -> MeanEffect:
    """Claim (e): per seed, ``late_minus_early`` of the fix minus the baseline's at ``step``; Student t."""
    return MeanEffect(
        paired(late_minus_early(failure, fix, step, seeds), late_minus_early(failure, base, step)),
        f"paired by seed (fix - baseline) of late minus early failure at step {step}; Student t over seeds",
    )


def slope_difference(failure: pd.DataFrame, fix, base, step: int) -> MeanEffect:
    """Claim (e) as slopes: per seed, ``position_slope``'s slope of the fix minus the baseline's at ``step``."""
    return MeanEffect(
        paired(position_slope(failure, fix, step).units, position_slope(failure, base, step).units),
        f"paired by seed (fix - baseline) of the per-seed slope at step {step}; Student t",
    )


def speed_interaction(without: pd.Series, with_: pd.Series) -> WelchEffect:
    """The residual x fix interaction of (d): the mean per-seed (fix - baseline) without the residual path
    minus that with it, two independent seed sets; Welch's t."""
    return WelchEffect(
        without,
        with_,
        "(fix - baseline) without the residual path minus with it, means of per-seed paired differences "
        "over two independent seed sets; Welch t",
    )


def influence_and_failure(failure: pd.DataFrame, influence: pd.DataFrame, variants, step: int) -> pd.DataFrame:
    """(seed, flag_pos, p, failures, n, failures_first_half, influence) at ``step``: the layer-0 input density of
    the answer token j = f - 1 beside the failures at flag position f."""
    fail = arm_rows(failure, variants, step=step)
    dens = arm_rows(influence, variants, step=step)
    dens = dens[(dens.layer == 0)]
    dens = pd.DataFrame({"seed": dens.seed, "flag_pos": dens.position + 1, "influence": dens.density})
    columns = ["seed", "flag_pos", "p", "failures", "n"] + (
        ["failures_first_half"] if "failures_first_half" in fail else []
    )
    joined = fail[columns].merge(dens, on=["seed", "flag_pos"], how="inner", validate="one_to_one")
    if len(joined) != len(fail):
        raise InputError(f"{list(variants)} at step {step}: some flag positions have no influence of their answer")
    if not (joined.influence > 0).all():
        raise InputError(f"{list(variants)} at step {step}: an influence is not positive")
    return joined.sort_values(["seed", "flag_pos"]).reset_index(drop=True)


def influence_beyond_position(
    failure: pd.DataFrame, influence: pd.DataFrame, variants, step: int, position: str = "linear"
) -> WaldEffect:
    """Does influence predict failure beyond position? The coefficient of the standardized log influence of the
    answer token in a binomial GEE logit(failure) = a + beta x + c p over seed x flag position, groups = seeds,
    exchangeable working correlation, robust errors (statsmodels). ``position`` "factor": one term per flag
    position instead of the linear c p (influence then counts only through its spread between seeds)."""
    rows = influence_and_failure(failure, influence, variants, step)
    log_influence = np.log(rows.influence.to_numpy(np.float64))
    x = (log_influence - log_influence.mean()) / log_influence.std()
    if position == "factor":
        trend = pd.get_dummies(rows.flag_pos.astype(str), drop_first=True).to_numpy(np.float64)
    else:
        trend = rows.p.to_numpy(np.float64)[:, None]
    design = np.column_stack([np.ones(len(rows)), x, trend])
    counts = np.column_stack([rows.failures, rows.n - rows.failures]).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = sm.GEE(
            counts[:, 0] / counts.sum(1),
            design,
            groups=rows.seed.to_numpy(),
            family=sm.families.Binomial(),
            cov_struct=sm.cov_struct.Exchangeable(),
            weights=counts.sum(1),
        ).fit()
    return WaldEffect(
        float(fit.params[1]),
        float(fit.bse[1]),
        int(rows.seed.nunique()),
        f"binomial GEE of failure on standardized log influence + {position} position at step {step}, "
        "seeds as clusters, exchangeable, robust errors; Wald",
    )


def split_half_reliability(failure: pd.DataFrame, influence: pd.DataFrame, variants, step: int) -> dict:
    """The ceiling of the per-seed rank correlation of influence with failure: per seed, Spearman's rho across
    flag positions from each half of each position's sequences; r the correlation across seeds of the two
    halves' rho, stepped up to the whole set by Spearman-Brown 2r / (1 + r). Also the mean rho on all of them."""
    rows = influence_and_failure(failure, influence, variants, step)
    if "failures_first_half" not in rows:
        raise InputError("the failure table has no failures_first_half: the split halves were not recorded")
    rows = rows.assign(first=rows.failures_first_half, second=rows.failures - rows.failures_first_half)
    rho = {
        name: pd.Series({int(s): rank_correlation(g.influence, g[column]) for s, g in rows.groupby("seed")})
        for name, column in (("first", "first"), ("second", "second"), ("all", "failures"))
    }
    r = float(np.corrcoef(rho["first"], rho["second"])[0, 1])
    return {
        "mean_rho": float(rho["all"].mean()),
        "split_half_r": r,
        "reliability": 2 * r / (1 + r),
        "seeds": int(rho["all"].size),
    }


# The SmolLM2 primaries: the retrieval record's examples (lostmid.architectures.retrieval_record), one row per
# example; the estimators are the retrieval stage's (lostmid.architectures.retrieval_estimators, issue 47).
RETRIEVAL_COLUMNS = ("weights", "window", "n", "task", "q", "success", "influence_free")


def retrieval_rows(examples: pd.DataFrame, n: int) -> pd.DataFrame:
    """The pretrained model's examples at length ``n``; InputError when there are none."""
    missing = sorted(set(RETRIEVAL_COLUMNS) - set(examples.columns))
    if missing:
        raise InputError(f"the retrieval examples lack the columns {missing}")
    part = examples[(examples.weights == "pretrained") & (examples.n == n)]
    if part.empty:
        raise InputError(f"no retrieval examples of the pretrained model at n = {n}")
    return part


def middle_minus_ends(examples: pd.DataFrame, n: int = 4096) -> MeanEffect:
    """Liu et al.'s U: per window, mean success at q in {0.25, ..., 0.75} minus at q in {0, 1}, tasks single and
    number pooled (retrieval_estimators.middle_minus_ends); Student t over windows."""
    return MeanEffect(
        retrieval.middle_minus_ends(retrieval_rows(examples, n)),
        f"per window, mean success in the middle (q 0.25-0.75) minus at q 0 and 1, n = {n}; t over windows",
    )


def end_minus_start(examples: pd.DataFrame, n: int) -> MeanEffect:
    """Per window, success at q = 1 minus at q = 0 (retrieval_estimators.window_contrast); t over windows. Study 1's
    secondaries smollm2_last_minus_first_* (their ids frozen in its plan) read this; it is not the retrieval
    stage's ``last_minus_first``, whose ends are two fractions wide ({0.875, 1} minus {0, 0.125})."""
    return MeanEffect(
        retrieval.window_contrast(retrieval_rows(examples, n), (1.0,), (0.0,)),
        f"per window, success at q = 1 minus at q = 0, n = {n}; t over windows",
    )


def share_beyond_position(
    examples: pd.DataFrame, n: int = 1024, resamples: int = 2000, seed: int = 0
) -> BootstrapEffect:
    """Does the task-free share predict retrieval beyond position? The coefficient of the standardized log share in
    success ~ share + factor(q) + factor(task) (retrieval_estimators.influence_beyond_position: GEE, windows as
    clusters) on every window, with its cluster bootstrap over windows (the draws whose fit converged)."""
    rows = retrieval_rows(examples, n)
    draws = retrieval.influence_beyond_position(rows, resamples, seed)
    replicates = draws[1:][np.isfinite(draws[1:])]
    if not np.isfinite(draws[0]) or replicates.size < resamples / 2:
        raise InputError(f"the share's coefficient at n = {n} did not converge on every window or on most draws")
    return BootstrapEffect(
        float(draws[0]),
        replicates,
        int(rows[rows.influence_free.notna()].window.nunique()),
        f"GEE logistic success ~ standardized log task-free share + factor(q) + factor(task), n = {n}; cluster "
        f"bootstrap over windows ({replicates.size} of {resamples} draws converged, percentile)",
    )


def imbalance_growth(profiles: pd.DataFrame, unit: str) -> MeanEffect:
    """The thermodynamic limit: per unit (init seed or held-out initialization), the least-squares slope of
    log10(v_1 / v_L) of the output-Jacobian profile on log2 L, its growth per doubling of L
    (``lostmid.tables.length``); the mean over units, Student t."""
    if profiles.empty or profiles.L.nunique() < 2:
        raise InputError("the length profiles have fewer than two lengths")
    stats = statistics_table(profiles, [unit, "L"], "output_jacobian")
    return MeanEffect(
        slopes_per_unit(stats, unit, "log10_first_last").astype(np.float64),
        f"per {unit}, the slope of log10 first/last on log2 L; Student t",
    )
