"""Tidy result tables: every table carries the grid keys as its first columns."""

from __future__ import annotations

import pandas as pd

from lostmid.config import GRID_KEYS


def with_run_keys(df: pd.DataFrame, spec: dict, step: int | None = None) -> pd.DataFrame:
    """Prefix ``df`` with the run's grid keys (variant, L, depth, seed and, if given, step)."""
    keys = {"variant": spec["variant"], "L": spec["L"], "depth": spec["depth"], "seed": spec["seed"]}
    if step is not None:
        keys["step"] = step
    out = df.copy()
    for position, (name, value) in enumerate(keys.items()):
        if name in out:
            out = out.drop(columns=name)
        out.insert(position, name, value)
    for name in GRID_KEYS[1:]:
        if name in out:
            out[name] = out[name].astype("int64")
    return out


def read(paths) -> pd.DataFrame:
    """Concatenate Parquet files (a list of paths) into one table."""
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
