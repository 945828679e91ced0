"""Tables of the retrieval stage from its per-example rows (``retrieval.retrieval_examples``), torch-free so
that the evidence stage reads them too (docs/retrieval.md).

Windows are the unit of resampling: a bootstrap draw takes W of the W windows with replacement (every
example of a drawn window comes with it) and recomputes the statistic; draw 0 is the estimate (every window
once), the interval the percentile interval of draws 1..B (``lostmid.stats.bootstrap.percentile_interval``).

    accuracy_table    per (model, weights, n, task, q): accuracy, mean log p(answer) and the mean influence
                      shares, each with its interval
    predictive_table  per (model, weights, n, task, measure): the AUC of success on the influence share and
                      the Spearman correlation across q of accuracy with the mean influence share
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lostmid.architectures import intervals
from lostmid.stats import bootstrap

KEYS = ["model", "weights", "n", "positions", "share", "task"]
# measure -> its column of the examples (retrieval.MEASURES)
MEASURES = {"task": "influence_task", "free": "influence_free", "bare": "influence_bare"}


def measured(examples: pd.DataFrame) -> dict:
    """The ``MEASURES`` whose column the examples have (a record made before ``bare`` existed lacks its own)."""
    return {measure: column for measure, column in MEASURES.items() if column in examples}


def check_record_hash(path, rows: pd.DataFrame, record_hash: str, advice: str) -> None:
    """One line naming the window record ``path`` where its rows were made under another configuration (their
    ``config_hash`` is not ``record_hash``), ending with ``advice``."""
    from lostmid.errors import ConfigError

    made = set(rows.config_hash) if "config_hash" in rows else {"none"}
    if made != {record_hash}:
        raise ConfigError(
            f"retrieval: the window record {path} was made under another configuration (config hash "
            f"{', '.join(sorted(made))}, this run's {record_hash}); {advice}"
        )


def read_windows(paths, record_hash: str) -> pd.DataFrame:
    """Every window record in ``paths`` (one Parquet per model, n and window) as one table; one line naming a
    record made under another configuration (``check_record_hash``)."""
    found = []
    for path in paths:
        rows = pd.read_parquet(path)
        check_record_hash(path, rows, record_hash, "move it away or run with its config")
        found.append(rows)
    return pd.concat(found, ignore_index=True)


def auc(success: np.ndarray, score: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray | float:
    """P(score of a success > score of a failure) + P(tie) / 2, the Mann-Whitney U / (n1 n0); NaN without both
    outcomes. ``weights`` (D, N): one weighted AUC per row (a bootstrap draw's multiplicities), shape (D,)."""
    success = np.asarray(success, bool)
    single = weights is None
    weights = np.ones((1, len(score))) if single else np.asarray(weights, float)
    values, group = np.unique(np.asarray(score, float), return_inverse=True)  # ties share a group
    onehot = np.zeros((len(score), len(values)))
    onehot[np.arange(len(score)), group] = 1.0
    wins = (weights * success) @ onehot  # (D, U) weight of the successes at each distinct score
    losses = (weights * ~success) @ onehot
    below = np.cumsum(losses, 1) - losses  # failures with a lower score
    total = wins.sum(1) * losses.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(total > 0, (wins * (below + losses / 2)).sum(1) / total, np.nan)
    return float(value[0]) if single else value


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho; NaN where either side is constant."""
    return float(intervals.spearman_rows(np.asarray(x, float)[None], np.asarray(y, float)[None])[0])


def window_weights(windows: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(1 + B, N) multiplicity of each example (its window's index in ``windows``, (N,)): row 0 all ones (the
    estimate), rows 1..B the number of times a bootstrap draw of the distinct windows took its window."""
    distinct, code = np.unique(windows, return_inverse=True)
    counts = intervals.draws(len(distinct), resamples, seed) * len(distinct)  # (1 + B, W) counts
    return counts[:, code]


def auc_draws(rows: pd.DataFrame, column: str, resamples: int, seed: int) -> np.ndarray:
    """(1 + B,) AUC of success on ``column``: the estimate (draw 0), then one per bootstrap draw of the windows."""
    weights = window_weights(rows.window.to_numpy(), resamples, seed)
    return auc(rows.success.to_numpy(), rows[column].to_numpy(), weights)


def auc_interval(rows: pd.DataFrame, column: str, resamples: int, seed: int, level: float) -> tuple:
    """(estimate, lo, hi) of the AUC of success on ``column`` over window draws."""
    return bootstrap.quiet_percentile_interval(auc_draws(rows, column, resamples, seed), level)


def spearman_interval(rows: pd.DataFrame, column: str, resamples: int, seed: int, level: float) -> tuple:
    """(estimate, lo, hi) of Spearman's rho across q of the accuracy at q with the mean of ``column`` at q."""
    weights = window_weights(rows.window.to_numpy(), resamples, seed)  # (D, N)
    q, at = np.unique(rows.q.to_numpy(), return_inverse=True)
    onehot = np.zeros((len(rows), len(q)))
    onehot[np.arange(len(rows)), at] = 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        per_q = weights @ onehot  # (D, Q)
        accuracy = (weights * rows.success.to_numpy(float)) @ onehot / per_q
        influence = (weights * rows[column].to_numpy(float)) @ onehot / per_q
    return bootstrap.quiet_percentile_interval(intervals.spearman_rows(accuracy, influence), level)


def accuracy_table(examples: pd.DataFrame, resamples: int = 1000, level: float = intervals.LEVEL, seed: int = 0):
    """Per (KEYS, q): windows, accuracy, logprob and the influence shares of ``MEASURES`` (means over the windows
    that have the value; NaN where none has), each with its bootstrap interval (_lo, _hi): one example per
    window at each q, so the window weights of ``intervals.draws`` resample them."""
    found = []
    for keys, part in examples.groupby([*KEYS, "q"], sort=True):
        row = dict(zip([*KEYS, "q"], keys), windows=len(part))
        values = {"accuracy": part.success.astype(float), "logprob": part.logprob}
        values |= {column: part[column] for column in measured(examples).values()}
        for name, column in values.items():
            known = column.dropna().to_numpy(float)
            estimate = lo = hi = np.nan
            if len(known):
                weights = intervals.draws(len(known), resamples, seed)
                estimate, lo, hi = bootstrap.percentile_interval(intervals.means(weights, known), level)
            row.update({name: estimate, f"{name}_lo": lo, f"{name}_hi": hi})
        found.append(row)
    return pd.DataFrame(found)


def predictive_rows(rows: pd.DataFrame, column: str, resamples: int, level: float, seed: int) -> dict:
    """AUC and Spearman across q, each with its bootstrap interval over windows, of the examples ``rows``."""
    row = {"examples": len(rows), "windows": rows.window.nunique(), "successes": int(rows.success.sum())}
    for name, statistic in (("auc", auc_interval), ("spearman", spearman_interval)):
        estimate, lo, hi = statistic(rows, column, resamples, seed, level)
        row.update({name: estimate, f"{name}_lo": lo, f"{name}_hi": hi})
    return row


def predictive_table(examples: pd.DataFrame, resamples: int = 1000, level: float = intervals.LEVEL, seed: int = 0):
    """Per (KEYS, measure) where the examples have influence values: examples, windows, successes, auc
    (lo, hi), spearman (lo, hi)."""
    found = []
    for keys, part in examples.groupby(KEYS, sort=True):
        for measure, column in measured(examples).items():
            rows = part[part[column].notna()]
            if rows.empty:
                continue
            found.append(
                {**dict(zip(KEYS, keys)), "measure": measure, **predictive_rows(rows, column, resamples, level, seed)}
            )
    return pd.DataFrame(found)


def with_interval(estimate: float, lo: float, hi: float) -> str:
    return "–" if np.isnan(estimate) else f"{estimate:.2f} [{lo:.2f}, {hi:.2f}]"


def accuracy_markdown(accuracy: pd.DataFrame) -> str:
    """Accuracy by q, one line per (model, weights, n, task): "estimate [lo, hi]" per q, windows beside."""
    from lostmid.architectures.summary import to_markdown

    cells = accuracy.assign(
        cell=[with_interval(*v) for v in accuracy[["accuracy", "accuracy_lo", "accuracy_hi"]].values]
    )
    wide = cells.pivot_table(
        index=["model", "weights", "n", "share", "task", "windows"], columns="q", values="cell", aggfunc="first"
    )
    wide.columns = [f"q = {q:g}" for q in wide.columns]
    return to_markdown(wide.reset_index())


def predictive_markdown(predictive: pd.DataFrame) -> str:
    """AUC and Spearman across q per (model, n, task, measure), each "estimate [lo, hi]"."""
    from lostmid.architectures.summary import to_markdown

    table = predictive.assign(
        auc=[with_interval(*v) for v in predictive[["auc", "auc_lo", "auc_hi"]].values],
        spearman=[with_interval(*v) for v in predictive[["spearman", "spearman_lo", "spearman_hi"]].values],
    )
    columns = ["model", "weights", "n", "task", "measure", "windows", "examples", "successes", "auc", "spearman"]
    return to_markdown(table[columns])


def markdown(results) -> str:
    """The stage's Markdown from a run's ``results/retrieval`` folder: accuracy by q, then the AUC table."""
    folder = results / "retrieval"
    if not (folder / "accuracy.parquet").exists():
        return "Not in this run (`results/retrieval` has no table).\n"
    accuracy = pd.read_parquet(folder / "accuracy.parquet")
    predictive = pd.read_parquet(folder / "predictive.parquet")
    return (
        "Accuracy by needle position q: mean over windows [95% percentile bootstrap interval over windows] "
        "(`results/retrieval/accuracy.parquet`; share: n over the model's positions):\n\n"
        + accuracy_markdown(accuracy)
        + "\n\nAUC of success on the needle's influence share, per example, and Spearman's rho across q of the "
        "accuracy with the mean share (`results/retrieval/predictive.parquet`):\n\n"
        + (predictive_markdown(predictive) if not predictive.empty else "No influence values in this run.")
        + "\n"
    )
