"""The SmolLM2 retrieval primaries of the study plan (docs/retrieval.md, "Estimators"), torch-free: is there
a middle deficit, and where; does the needle's task-free influence predict retrieval beyond its position?

Windows are the unit of replication. Each estimator is one function named after its formula; where the
formula gives one value per window (the contrasts), it returns them, and ``t_effect`` puts the Student t
interval over windows on them; where it does not (a model fit over every window, an AUC), the interval is
the cluster bootstrap over windows (``cluster_draws``: a draw takes W of the W windows with replacement and
every example of each, a window drawn twice counting as two clusters), checked by ``degenerate``.

    middle_minus_ends            per window: mean success at q in MIDDLE minus at q in ENDS, tasks pooled
    last_minus_first             per window: mean success at q in LAST minus at q in FIRST
    paired_difference            per window: mean at q in a set under one arm minus under another (the fixes)
    fit_cluster_difference       the fix plan's primaries: the paired difference per window, per fit of the bias
                                 the mean over its windows, Student t with F - 1 df over the F fit means
    influence_beyond_position    the coefficient of the standardized log task-free share in the logistic
                                 model success ~ share + factor(q) + factor(task) (GEE, binomial,
                                 exchangeable within windows): log odds per SD of log share; on the
                                 outcome log p(answer), the same linear model (GEE, Gaussian): nats per
                                 SD of log share
    stratified_auc               the AUC of success on the share within each q, averaged over q, minus 0.5
    unadjusted_auc               the AUC over every example, minus 0.5 (position not held fixed)
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from lostmid.architectures import retrieval_summary as rs
from lostmid.stats import bootstrap
from lostmid.stats import statistics as st

TASKS = ("single", "number")  # the tasks the contrasts pool
MIDDLE = (0.25, 0.375, 0.5, 0.625, 0.75)
ENDS = (0.0, 1.0)
LAST = (0.875, 1.0)
FIRST = (0.0, 0.125)
SHARE = "influence_free"  # the paper's diagnostic: the task-free share (with the needle in place)
SHARES = ("influence_free", "influence_bare")  # the task-free shares a record may hold (retrieval.MEASURES)


def at(examples: pd.DataFrame, fractions) -> pd.DataFrame:
    """The examples of ``TASKS`` whose q is one of ``fractions`` (compared to 1e-9)."""
    near = np.isclose(examples.q.to_numpy()[:, None], np.asarray(fractions)[None]).any(1)
    return examples[near & examples.task.isin(TASKS).to_numpy()]


def window_mean(examples: pd.DataFrame, fractions, column: str = "success") -> pd.Series:
    """Per window (index): the mean of ``column`` over the examples at q in ``fractions``, tasks pooled."""
    return at(examples, fractions).groupby("window")[column].mean().astype(float)


def window_contrast(examples: pd.DataFrame, high, low, column: str = "success") -> pd.Series:
    """Per window (index): the mean of ``column`` over the examples at q in ``high`` minus over those at q
    in ``low``, tasks pooled; windows missing either side are left out."""
    return (window_mean(examples, high, column) - window_mean(examples, low, column)).dropna()


def paired_difference(arm: pd.DataFrame, other: pd.DataFrame, fractions, column: str = "success") -> pd.Series:
    """Per window (index): the mean of ``column`` at q in ``fractions`` under ``arm`` minus under ``other``
    (two arms' examples of the same windows, tasks pooled); windows missing in either arm are left out. The
    fix plan's contrasts (study/fix_plan.yaml): a fix against none, or one fix against the other."""
    return (window_mean(arm, fractions, column) - window_mean(other, fractions, column)).dropna()


def fit_cluster_difference(arm: pd.DataFrame, other: pd.DataFrame, fractions, column: str, what: str):
    """The fix plan's primaries' estimator (study/fix_plan.yaml): per window the ``paired_difference`` of
    ``column`` at q in ``fractions`` (``arm`` minus ``other``), per fit the mean over its windows, the mean over
    the fits with its Student t interval (F - 1 df) over the fit means (``stats.study2.fit_cluster_effect``): the
    fitted bias is a random draw, the windows are nested in its fits, the fit is the unit. ``arm``'s examples carry
    the column ``fit`` (the fit its window was evaluated under). A MeanEffect whose units are the fit means."""
    from lostmid.stats.study2 import fit_cluster_effect

    per_window = paired_difference(arm, other, fractions, column)
    fit = arm.groupby("window").fit.first().loc[per_window.index]
    index = pd.MultiIndex.from_arrays([fit.to_numpy(), per_window.index], names=["fit", "window"])
    return fit_cluster_effect(pd.Series(per_window.to_numpy(), index=index), what, "windows")


def middle_minus_ends(examples: pd.DataFrame, column: str = "success") -> pd.Series:
    """Per window: mean at q in {0.25, ..., 0.75} minus at q in {0, 1} (negative: a middle deficit, Liu et
    al.'s U)."""
    return window_contrast(examples, MIDDLE, ENDS, column)


def last_minus_first(examples: pd.DataFrame, column: str = "success") -> pd.Series:
    """Per window: mean at q in {0.875, 1} minus at q in {0, 0.125} (Veseli et al.: distance from the end)."""
    return window_contrast(examples, LAST, FIRST, column)


def t_effect(per_window: pd.Series, level: float) -> st.Interval:
    """The mean of the per-window values with its Student t interval over windows."""
    found = st.t_interval(per_window.to_numpy(float), level)
    return found._replace(method=found.method.replace("seed", "window"))


def standardized_log_share(share: np.ndarray) -> np.ndarray:
    """(log s - mean log s) / sd log s over the examples, the population sd (ddof 0, as the study's plan fixes
    it for its primary smollm2_influence_beyond_position): the coefficient is per SD of log share."""
    logs = np.log(np.asarray(share, float))
    return (logs - logs.mean()) / logs.std(ddof=0)


def informative(rows: pd.DataFrame, outcome: str = "success") -> pd.DataFrame:
    """The rows of the q (then the tasks) whose success is not constant: a stratum where every example
    succeeds (or fails) says nothing about the share with position held fixed (as in the conditional
    likelihood), and its dummy would diverge. A continuous outcome keeps every row."""
    if outcome != "success":
        return rows
    for factor in ("q", "task"):
        _, stratum = np.unique(rows[factor].to_numpy(), return_inverse=True)
        successes = np.bincount(stratum, rows.success.to_numpy(float))[stratum]  # of the row's stratum
        rows = rows[(successes > 0) & (successes < np.bincount(stratum)[stratum])]
    return rows


def design(rows: pd.DataFrame) -> np.ndarray:
    """Columns: intercept, the standardized log share (column ``z``), one dummy per q but the first, one per
    task but the first (the model success ~ share + factor(q) + factor(task))."""
    q, task = (dummies(values) for values in (rows.q.round(9).to_numpy(), rows.task.to_numpy()))
    return np.column_stack([np.ones(len(rows)), rows.z.to_numpy(), q, task])


def dummies(values: np.ndarray) -> np.ndarray:
    """(N, K - 1): one 0/1 column per distinct value of ``values`` but the least, as pandas.get_dummies(values,
    drop_first=True) gives them: sorted, in column-major order (the fit's sums, and so its last digits, depend
    on the layout)."""
    levels = np.unique(values)
    return (values[:, None] == levels[None, 1:]).astype(float, order="F")


def share_fit(rows: pd.DataFrame, outcome: str = "success"):
    """The GEE fit of ``outcome`` on the design (``rows`` with ``z`` and ``cluster``), exchangeable within
    clusters, on the informative strata: logistic for success, linear for log p(answer); None where none is
    left or the fit fails or does not converge."""
    import statsmodels.api as sm

    rows = informative(rows, outcome)
    if rows.empty:
        return None
    family = sm.families.Binomial() if outcome == "success" else sm.families.Gaussian()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and domain warnings: checked below
        try:
            fit = sm.GEE(
                rows[outcome].to_numpy(float),
                design(rows),
                groups=rows.cluster.to_numpy(),
                family=family,
                cov_struct=sm.cov_struct.Exchangeable(),
            ).fit(maxiter=100)
        except (np.linalg.LinAlgError, ValueError, ZeroDivisionError):
            return None
    return fit if np.isfinite(fit.params[1]) and fit.converged else None


def share_coefficient(rows: pd.DataFrame, outcome: str = "success") -> float:
    """The share's coefficient of ``share_fit``; NaN where there is no fit."""
    fit = share_fit(rows, outcome)
    return np.nan if fit is None else float(fit.params[1])


def cluster_draws(windows: np.ndarray, resamples: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Draw 0 (every example once) then ``resamples`` cluster-bootstrap draws, each (indices of the examples
    of W windows drawn with replacement, their cluster: a window drawn twice is two clusters)."""
    distinct, code = np.unique(windows, return_inverse=True)
    members = [np.flatnonzero(code == w) for w in range(len(distinct))]
    rng = np.random.default_rng(seed)
    picks = [np.arange(len(distinct))] + [rng.integers(len(distinct), size=len(distinct)) for _ in range(resamples)]
    return [
        (np.concatenate([members[w] for w in pick]), np.repeat(np.arange(len(pick)), [len(members[w]) for w in pick]))
        for pick in picks
    ]


def share_rows(examples: pd.DataFrame, share: str = SHARE) -> pd.DataFrame:
    """The examples that have the ``share`` column's value, with ``z``, its standardized log."""
    rows = examples[examples[share].notna()].reset_index(drop=True)
    return rows.assign(z=standardized_log_share(rows[share].to_numpy()))


def influence_beyond_position(
    examples: pd.DataFrame, resamples: int, seed: int, share: str = SHARE, outcome: str = "success"
) -> np.ndarray:
    """(1 + B,): the share's coefficient (per SD of log ``share``, position and task held fixed; log odds
    for success, nats for log p) on every window (draw 0) and on each cluster-bootstrap draw."""
    rows = share_rows(examples, share)
    draws = cluster_draws(rows.window.to_numpy(), resamples, seed)
    return np.asarray(
        [share_coefficient(rows.iloc[index].assign(cluster=cluster), outcome) for index, cluster in draws]
    )


def auc_draws(rows: pd.DataFrame, resamples: int, seed: int) -> np.ndarray:
    """(1 + B,): the AUC of success on the share over ``rows``, on every window and on each draw."""
    weights = rs.window_weights(rows.window.to_numpy(), resamples, seed)
    return rs.auc(rows.success.to_numpy(), rows[SHARE].to_numpy(), weights)


def stratified_auc(examples: pd.DataFrame, resamples: int, seed: int) -> np.ndarray:
    """(1 + B,): the mean over q of the AUC within q (q with both outcomes), minus 0.5; the same window
    draws at every q (one seed), so a draw is one resample of windows."""
    rows = examples[examples[SHARE].notna()]
    weights = rs.window_weights(rows.window.to_numpy(), resamples, seed)  # (1 + B, N)
    per_q = []
    for q in np.unique(rows.q):
        mask = np.isclose(rows.q.to_numpy(), q)
        per_q.append(rs.auc(rows.success.to_numpy()[mask], rows[SHARE].to_numpy()[mask], weights[:, mask]))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        return np.nanmean(np.vstack(per_q), 0) - 0.5


def unadjusted_auc(examples: pd.DataFrame, resamples: int, seed: int) -> np.ndarray:
    """(1 + B,): the AUC over every example with a share (position not held fixed), minus 0.5."""
    return auc_draws(examples[examples[SHARE].notna()], resamples, seed) - 0.5


def degenerate(draws: np.ndarray, low: float, high: float, level: float) -> str:
    """Why an interval from ``draws`` (draw 0: the estimate) cannot be trusted, or "" when it can: zero width,
    a bound pinned (at the estimate, or a tail of the draws tied at the bound), or too many failed draws."""
    values = draws[1:]
    valid = values[np.isfinite(values)]
    tail = (1 - level) / 2
    reasons = []
    if len(valid) < 0.95 * len(values):
        reasons.append(f"{len(values) - len(valid)} of {len(values)} draws failed")
    if not high > low:
        reasons.append("zero width")
    elif draws[0] in (low, high):
        reasons.append("a bound at the estimate")
    elif len(valid) and max((valid == low).mean(), (valid == high).mean()) >= tail:
        reasons.append(f"a bound pinned: at least {tail:.1%} of the draws equal it")
    return "; ".join(reasons)


def bootstrap_effect(draws: np.ndarray, level: float, words: str, windows: int) -> tuple[st.Interval, str]:
    """The estimate (draw 0) with its percentile interval over the draws, and ``degenerate``'s verdict."""
    estimate, low, high = bootstrap.quiet_percentile_interval(draws, level)
    method = f"{words}; percentile cluster bootstrap over {windows} windows ({len(draws) - 1} draws)"
    return st.Interval(estimate, low, high, windows, method), degenerate(draws, low, high, level)


def effect_columns(effect: st.Interval) -> dict:
    return dict(estimate=effect.estimate, low=effect.low, high=effect.high, windows=effect.n, method=effect.method)


def primaries(examples: pd.DataFrame, resamples: int, seed: int, level: float) -> pd.DataFrame:
    """One row per (model, n, estimator) of the pretrained model's examples: estimate, low, high, windows,
    method, check ("" or why the interval is degenerate). The contrasts on success (the primaries) and on
    log p(answer) (secondary); the influence rows where the examples have the task-free share."""
    found = []
    for (model, n), part in examples[examples.weights == "pretrained"].groupby(["model", "n"], sort=True):
        key = dict(model=model, n=int(n))
        for name, contrast in (("middle_minus_ends", middle_minus_ends), ("last_minus_first", last_minus_first)):
            for column in ("success", "logprob"):
                effect = t_effect(contrast(part, column), level)
                check = "" if effect.high > effect.low else "zero width" if effect.n > 1 else "one window"
                found.append(dict(key, estimator=name, outcome=column, **effect_columns(effect), check=check))
        if part[SHARE].notna().sum() == 0:
            continue
        windows = part[part[SHARE].notna()].window.nunique()
        for name, statistic, words in (
            ("influence_beyond_position", influence_beyond_position, "GEE logistic coefficient per SD of log share"),
            ("stratified_auc", stratified_auc, "AUC within q, averaged over q, minus 0.5"),
            ("unadjusted_auc", unadjusted_auc, "AUC over every example, minus 0.5"),
        ):
            effect, check = bootstrap_effect(statistic(part, resamples, seed + int(n)), level, words, windows)
            found.append(dict(key, estimator=name, outcome="success", **effect_columns(effect), check=check))
    return pd.DataFrame(found)
