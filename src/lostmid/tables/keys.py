"""Tidy result tables: every table carries the grid keys as its first columns."""

from __future__ import annotations

import pandas as pd

from lostmid.config import GRID_KEYS


def with_keys(df: pd.DataFrame, **keys) -> pd.DataFrame:
    """``df`` with the constant columns ``keys`` first, in the order given (replacing any of the same name)."""
    out = df.drop(columns=[name for name in keys if name in df])
    for position, (name, value) in enumerate(keys.items()):
        out.insert(position, name, value)
    return out


def with_run_keys(df: pd.DataFrame, spec: dict, step: int | None = None) -> pd.DataFrame:
    """Prefix ``df`` with the run's grid keys (variant, L, depth, seed and, if given, step)."""
    keys = {"variant": spec["variant"], "L": spec["L"], "depth": spec["depth"], "seed": spec["seed"]}
    if step is not None:
        keys["step"] = step
    out = with_keys(df, **keys)
    for name in GRID_KEYS[1:]:
        if name in out:
            out[name] = out[name].astype("int64")
    return out


def read(paths) -> pd.DataFrame:
    """Concatenate Parquet files (a list of paths) into one table."""
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
