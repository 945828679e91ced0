"""Tidy result tables: every table carries the grid keys as its first columns."""

from __future__ import annotations

import re

import pandas as pd

from lostmid.config import GRID_KEYS

# Measurements of the machine (seconds_per_step, peak_mem_mb, time_ratio, max_rss_mb, bench_seconds, ...):
# they differ between any two runs, as columns or as rows of the long tables (remedies_summary's
# `quantity`, the evidence table's overhead claims); everything else must not.
MEASURED = re.compile(r"seconds|time|mem|rss|bench")
LONG_FORMAT_NAMES = ("quantity", "claim")


def without_measurements(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without its measured columns and without the measured rows of a long table, with a
    fresh index: what two runs of one config must agree on exactly."""
    for name in LONG_FORMAT_NAMES:
        if name in frame.columns:
            frame = frame[~frame[name].astype(str).str.contains(MEASURED)]
    return frame[[c for c in frame.columns if not MEASURED.search(str(c))]].reset_index(drop=True)


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


# The columns of every per-run table (lostmid.jobs.RUN_TABLES and the training log), each with the
# kind of its values: declared once, checked whenever a table is read (``read``). A kind ending in "?" is a
# column added later that a table written before may lack; its readers say what they do then.
_RUN = {"variant": "string", "L": "integer", "depth": "integer", "seed": "integer", "step": "integer"}
RUN_TABLE_COLUMNS = {
    "train": {
        **_RUN,
        "loss": "float",
        "accuracy": "float",
        "seconds_per_step": "float",
        "peak_mem_mb": "float",
        "cpu_seconds_per_step": "float?",
    },
    "failure": {
        **_RUN,
        "flag_pos": "integer",
        "p": "float",
        "n": "integer",
        "failures": "integer",
        "failure_rate": "float",
        "ci_low": "float",
        "ci_high": "float",
        "loss": "float",
        "failures_first_half": "integer?",
    },
    "influence": {
        **_RUN,
        "layer": "integer",
        "position": "integer",
        "p": "float",
        "energy": "float",
        "density": "float",
    },
    "metrics": {
        **_RUN,
        "delta": "float",
        "m_left": "float",
        "m_middle": "float",
        "m_right": "float",
        "Delta": "float",
        "SC": "float",
        "LIM": "float",
        "E_inf": "float",
        "Z": "float",
    },
    # The conditioned influence of the answer (lostmid.analysis.influence.answer_table), one row per flag position.
    "answer_influence": {
        **_RUN,
        "flag_pos": "integer",
        "position": "integer",
        "sequences": "integer",
        "energy": "float",
        "density": "float",
    },
    "density_flow": {
        **_RUN,
        "position": "integer",
        "p": "float",
        "eta": "float",
        "predicted": "float",
        "finite_difference": "float",
        "rel_error": "float",
    },
    "channels": {**_RUN, "delta": "float", "region": "string", "channel": "string", "J": "float"},
    "cross_terms": {**_RUN, "delta": "float", "region": "string", "pair": "string", "xi": "float", "rho": "float"},
    "conditions": {
        **_RUN,
        "delta": "float",
        "test": "string",
        "holds": "boolean",
        "conclusion_holds": "boolean",
        "lhs": "float",
        "rhs": "float",
        "tolerance": "float?",
        "violation": "boolean?",
    },
    "observability": {
        **_RUN,
        "position": "integer",
        "p": "float",
        "trace": "float",
        "trace_density": "float",
        "output_jacobian": "float",
        "jacobian_density": "float",
    },
}
_KINDS = {
    "string": pd.api.types.is_string_dtype,
    "integer": pd.api.types.is_integer_dtype,
    "float": pd.api.types.is_float_dtype,
    "boolean": pd.api.types.is_bool_dtype,
}


def schema_problems(df: pd.DataFrame, columns: dict[str, str]) -> list[str]:
    """How ``df`` departs from the declared ``columns`` (name -> kind): missing, unexpected and mistyped columns."""
    problems = []
    missing = [name for name, kind in columns.items() if name not in df and not kind.endswith("?")]
    unexpected = [name for name in df if name not in columns]
    if missing:
        problems.append(f"lacks the column(s) {missing}")
    if unexpected:
        problems.append(f"has unexpected column(s) {unexpected}")
    mistyped = [
        f"{name} ({df[name].dtype}, expected {kind.rstrip('?')})"
        for name, kind in columns.items()
        if name in df
        and not (
            _KINDS[kind.rstrip("?")](df[name]) and not (kind == "integer" and pd.api.types.is_bool_dtype(df[name]))
        )
    ]
    if mistyped:
        problems.append("has column(s) of the wrong type: " + ", ".join(mistyped))
    return problems


def read_table(path, name: str | None = None) -> pd.DataFrame:
    """One Parquet file of the table ``name``: a file that is not readable Parquet, or (for a per-run
    table) one without exactly its declared columns and kinds (RUN_TABLE_COLUMNS), is a TableError
    naming the file and what is wrong (and the command moves it aside, so the next run rebuilds it)."""
    import pyarrow

    from lostmid.errors import TableError

    try:
        df = pd.read_parquet(path)
    except (pyarrow.ArrowException, ValueError) as err:  # a truncated or empty file, or not Parquet at all
        raise TableError(f"table {path} is not a readable Parquet file ({type(err).__name__}: {err})", path) from err
    problems = schema_problems(df, RUN_TABLE_COLUMNS[name]) if name in RUN_TABLE_COLUMNS else []
    if problems:
        raise TableError(f"{name} table {path} " + "; ".join(problems), path)
    return df


def read(paths, name: str | None = None) -> pd.DataFrame:
    """Concatenate Parquet files (a list of paths) of the table ``name`` into one table (read_table)."""
    return pd.concat([read_table(p, name) for p in paths], ignore_index=True)
