"""The results/remedies table: one row per run and checkpoint with the remedy's parameters,
accuracy, influence metrics and overhead against the baseline; and its summary over seeds.
Pure table work: no torch."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lostmid.errors import ConfigError
from lostmid.objectives.settings import STRENGTH, remedy_settings
from lostmid.tables.summaries import accuracy_per_checkpoint, seed_half_width

REMEDY_COLUMNS = ("remedy", "strength", "target", "every", "probe_per_position", "probes", "monitored")


@dataclass(frozen=True)
class RemedyTableSettings:
    """The config's ``remedies`` block as the table reads it (``plot_steps`` is the figures')."""

    baseline: str  # the variant the overhead ratios are taken against (same L, depth, seed)
    delta: float  # region scale of the influence metrics reported
    threshold: float  # accuracy of steps_to_99 ...
    window: int  # ... reached by the rolling mean of the training accuracy over this many steps


def remedy_columns(variants: dict) -> pd.DataFrame:
    """One row per variant: its remedy kind and parameters (NaN / None where not applicable)."""

    rows = []
    for name, remedy in variants.items():
        settings = remedy_settings(remedy or {"kind": "none"}, name)
        kind = settings.kind
        rows.append(
            {
                "variant": name,
                "remedy": kind,
                "strength": float(getattr(settings, STRENGTH[kind])) if kind in STRENGTH else float("nan"),
                "target": getattr(settings, "target", None),
                "every": getattr(settings, "every", None),
                "probe_per_position": getattr(settings, "probe_per_position", None),
                "probes": getattr(settings, "probes", None),
                "monitored": str(settings.monitored) if hasattr(settings, "monitored") else None,
            }
        )
    return pd.DataFrame(rows, columns=["variant", *REMEDY_COLUMNS]).astype(
        {"every": "Int64", "probe_per_position": "Int64", "probes": "Int64"}
    )


def steps_to_threshold(train: pd.DataFrame, threshold: float, window: int) -> pd.DataFrame:
    """First step at which the rolling mean (``window`` steps) of the batch accuracy reaches
    ``threshold``, per run; NaN if it never does."""

    keys = ["variant", "L", "depth", "seed"]
    out = []
    for run, group in train.sort_values([*keys, "step"]).groupby(keys, sort=False):
        rolling = group["accuracy"].rolling(window, min_periods=window).mean()
        hit = group["step"][rolling >= threshold]
        out.append((*run, float(hit.iloc[0]) if len(hit) else float("nan")))
    return pd.DataFrame(out, columns=[*keys, "steps_to_99"])


def losses_per_checkpoint(failure: pd.DataFrame, train: pd.DataFrame, window: int) -> pd.DataFrame:
    """Per run and checkpoint: ``val_loss``, the held-out cross-entropy of the evaluation set (the
    failure table's ``loss``, pooled over flag positions; NaN for tables written before it had one),
    and ``train_loss``, the mean training-batch loss over the ``window`` steps up to the checkpoint
    (NaN at step 0)."""
    keys = ["variant", "L", "depth", "seed"]
    if "loss" in failure:
        pooled = (
            failure.assign(total=failure["loss"] * failure["n"])
            .groupby([*keys, "step"], as_index=False)[["total", "n"]]
            .sum()
        )
        out = pooled.assign(val_loss=pooled.total / pooled.n)[[*keys, "step", "val_loss"]]
    else:
        out = failure[[*keys, "step"]].drop_duplicates().assign(val_loss=np.nan)
    rolling = (
        train.sort_values([*keys, "step"])
        .groupby(keys)["loss"]
        .transform(lambda x: x.rolling(window, min_periods=1).mean())
    )
    return out.merge(train[[*keys, "step"]].assign(train_loss=rolling), on=[*keys, "step"], how="left")


# <variant>/L<L>_M<depth>_seed<seed>_step<step>.tsv of one run, or ..._seeds<s1>-<s2>-..._step<step>.tsv
# of a seed batch (train.seed_batch), whose one process trained all of those seeds.
BENCH_PATH = (
    r"(?P<variant>[A-Za-z][A-Za-z0-9_-]*)/L(?P<L>\d+)_M(?P<depth>\d+)"
    r"_(?:seed(?P<seed>\d+)|seeds(?P<seeds>\d+(?:-\d+)*))_step(?P<step>\d+)\.tsv$"
)


def read_benchmarks(paths) -> pd.DataFrame:
    """Snakemake's benchmark records of the training segments: seconds and max_rss (MB) per run
    (a seed batch's record stands for each of its seeds)."""

    rows = []
    for path in paths:
        match = re.search(BENCH_PATH, str(path))
        if not match:
            raise ConfigError(f"benchmark file {path} does not follow results/benchmarks/train/<run>_step<step>.tsv")
        record = pd.read_csv(path, sep="\t").iloc[-1]
        keys = match.groupdict()
        seeds = [keys["seed"]] if keys["seed"] is not None else keys["seeds"].split("-")
        for seed in seeds:
            rows.append(
                {
                    "variant": keys["variant"],
                    "L": int(keys["L"]),
                    "depth": int(keys["depth"]),
                    "seed": int(seed),
                    "step": int(keys["step"]),
                    "bench_seconds": float(record["s"]),
                    "max_rss_mb": pd.to_numeric(record["max_rss"], errors="coerce"),
                }
            )
    return pd.DataFrame(rows)


def remedy_table(metrics, failure, train, benchmarks, variants: dict, settings: RemedyTableSettings) -> pd.DataFrame:
    """The results/remedies table: one row per run and checkpoint.

    Columns: grid keys; remedy parameters; accuracy (stratified evaluation set), val_loss and
    train_loss (``losses_per_checkpoint``) and final_accuracy; steps_to_99 (training-batch accuracy, rolling
    mean); Delta, LIM, E_inf, Z at
    the checkpoint (influence metrics at scale ``delta``); seconds_per_step (median of the
    trainer's per-step timing), peak_mem_mb (the library's per-run peak when the training log
    has it, else NaN), max_rss_mb (Snakemake benchmark, max over segments); and the overhead
    ratios against the ``baseline`` variant of the same (L, depth, seed).
    """
    baseline, delta, threshold, window = settings.baseline, settings.delta, settings.threshold, settings.window
    keys = ["variant", "L", "depth", "seed"]
    at_delta = metrics[np.isclose(metrics["delta"], delta)]
    if at_delta.empty:
        raise ConfigError(
            f"config key remedies.delta: the influence metrics have no rows at delta={delta} "
            f"(found {sorted(metrics['delta'].unique())})"
        )
    table = at_delta[[*keys, "step", "Delta", "SC", "LIM", "E_inf", "Z"]]
    accuracy = accuracy_per_checkpoint(failure).merge(
        losses_per_checkpoint(failure, train, window), on=[*keys, "step"], how="left"
    )
    table = table.merge(
        accuracy[[*keys, "step", "accuracy", "val_loss", "train_loss"]], on=[*keys, "step"], how="outer"
    )
    last = table.groupby(keys)["step"].transform("max")
    final = table[table.step == last][[*keys, "accuracy"]].rename(columns={"accuracy": "final_accuracy"})
    per_run = final.merge(steps_to_threshold(train, threshold, window), on=keys, how="left")
    timing = train.groupby(keys).agg(seconds_per_step=("seconds_per_step", "median"))
    if "peak_mem_mb" in train:
        timing["peak_mem_mb"] = train.groupby(keys)["peak_mem_mb"].max()
    else:
        timing["peak_mem_mb"] = np.nan
    if len(benchmarks):
        timing = timing.join(benchmarks.groupby(keys).agg(max_rss_mb=("max_rss_mb", "max")))
    else:
        timing["max_rss_mb"] = np.nan
    per_run = per_run.merge(timing.reset_index(), on=keys, how="left")
    base = per_run[per_run.variant == baseline].drop(columns=["variant", "final_accuracy", "steps_to_99"])
    base = base.rename(columns={c: f"_base_{c}" for c in ("seconds_per_step", "peak_mem_mb", "max_rss_mb")})
    per_run = per_run.merge(base, on=["L", "depth", "seed"], how="left")
    for column, ratio in (
        ("seconds_per_step", "time_ratio"),
        ("peak_mem_mb", "peak_mem_ratio"),
        ("max_rss_mb", "max_rss_ratio"),
    ):
        per_run[ratio] = per_run[column] / per_run[f"_base_{column}"]
    per_run = per_run.drop(columns=[c for c in per_run if c.startswith("_base_")])
    table = table.merge(per_run, on=keys, how="left").merge(remedy_columns(variants), on="variant", how="left")
    ordered = [
        *keys,
        "step",
        *REMEDY_COLUMNS,
        "accuracy",
        "val_loss",
        "train_loss",
        "final_accuracy",
        "steps_to_99",
        "Delta",
        "SC",
        "LIM",
        "E_inf",
        "Z",
        "seconds_per_step",
        "peak_mem_mb",
        "max_rss_mb",
        "time_ratio",
        "peak_mem_ratio",
        "max_rss_ratio",
    ]
    return table[ordered].sort_values([*keys, "step"]).reset_index(drop=True)


def seed_summary(
    table: pd.DataFrame,
    values=(
        "accuracy",
        "val_loss",
        "train_loss",
        "final_accuracy",
        "steps_to_99",
        "Delta",
        "LIM",
        "E_inf",
        "Z",
        "seconds_per_step",
        "time_ratio",
        "peak_mem_mb",
        "max_rss_mb",
    ),
) -> pd.DataFrame:
    """Mean over seeds with a 95% t-interval, per (variant, L, depth, step) and quantity (long format)."""
    long = table.melt(
        id_vars=["variant", "L", "depth", "seed", "step"], value_vars=list(values), var_name="quantity"
    ).dropna(subset=["value"])
    rows = []
    for key, group in long.groupby(["variant", "L", "depth", "step", "quantity"]):
        x = group["value"].to_numpy(dtype=float)
        mean, half = float(x.mean()), seed_half_width(x)
        rows.append((*key, len(x), mean, mean - half, mean + half))
    return pd.DataFrame(
        rows, columns=["variant", "L", "depth", "step", "quantity", "n_seeds", "mean", "ci_low", "ci_high"]
    )
