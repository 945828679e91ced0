"""Two runs' tables compared row by row, matched by their keys; and a run's fingerprint.

A *table* is a top folder of ``results/`` holding Parquet files (``results/failure``, ...). Its files
are grouped by their column set, so a folder that mixes tables is compared table by table. Measured
columns and rows (wall-clock, memory: lostmid.tables.keys.MEASURED) are dropped: they differ between
any two runs.

Rows are matched by their *keys*: every column that is not a float (the grid keys, claim, quantity,
position, ...), and, where keys repeat, the n-th occurrence. A comparison therefore names the rows
that appear or disappear and, for a row on both sides, its first differing column; it cannot lose a
row whose key text changed, because nothing is matched by pattern. In the evidence table the keys
are those of :data:`EVIDENCE_KEYS`, with the checkpoint reduced to its kind (a mid-training
checkpoint's step, or "not reached", is where each run locates it, not which row it is).

The *fingerprint* of a run is a digest of every column of every table (SHA-256 of the column's
values in a canonical row order) and of one trained checkpoint's weights. A committed fingerprint of
the smoke run, recomputed by a test on every machine, is what makes "the same tables on every
machine" a checked fact (tests/test_fingerprint.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from lostmid.errors import InputError
from lostmid.tables.keys import without_measurements

EVIDENCE_KEYS = ["claim", "variant", "L", "depth", "residual", "reading", "checkpoint_kind"]
NTH = "nth"  # the occurrence of a repeated key


def checkpoint_kind(checkpoint) -> str:
    """A checkpoint's kind: its text without steps and reached/not reached."""
    if checkpoint is None or (isinstance(checkpoint, float) and np.isnan(checkpoint)) or checkpoint is pd.NA:
        return ""
    text = str(checkpoint)
    if "mid-training" in text:
        return "mid-training"
    return re.sub(r"\bsteps? \d+", "step N", text)


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by every column (NaN last), columns in a fixed order, a fresh index."""
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns), na_position="last", kind="mergesort").reset_index(drop=True)


def result_tables(results: Path, aliases: dict[str, str] | None = None) -> dict[tuple[str, tuple], pd.DataFrame]:
    """(table folder, column set) -> its rows, measured columns and rows dropped, in canonical order.
    ``aliases`` maps a folder of this run to the name it has in another (a table that moved)."""
    aliases = aliases or {}
    groups: dict[tuple[str, tuple], list[pd.DataFrame]] = {}
    for path in sorted(Path(results).rglob("*.parquet")):
        if path.name.startswith("."):
            continue
        folder = path.relative_to(results).parts[0]
        frame = without_measurements(pd.read_parquet(path))
        key = (aliases.get(folder, folder), tuple(sorted(frame.columns)))
        groups.setdefault(key, []).append(frame)
    return {key: canonical(pd.concat(parts, ignore_index=True)) for key, parts in groups.items()}


def key_columns(frame: pd.DataFrame) -> list[str]:
    """The columns that name a row: every column that is not a float (the evidence table: EVIDENCE_KEYS)."""
    if {"claim", "verdict"} <= set(frame.columns):
        return EVIDENCE_KEYS
    return [name for name in frame.columns if not pd.api.types.is_float_dtype(frame[name])]


def keyed(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``frame`` indexed by ``keys`` (as text, missing values as "") and the n-th occurrence."""
    if "checkpoint_kind" in keys and "checkpoint_kind" not in frame:
        frame = frame.assign(checkpoint_kind=[checkpoint_kind(value) for value in frame.get("checkpoint", "")])
    for name in keys:
        if name not in frame:
            frame = frame.assign(**{name: ""})
    text = frame[keys].astype("string").fillna("")
    frame = frame.assign(**{name: text[name] for name in keys})
    frame = frame.assign(**{NTH: frame.groupby(keys, sort=False).cumcount()})
    return frame.set_index([*keys, NTH]).sort_index()


def _same(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    return bool(a == b)


def row_differences(reference: pd.DataFrame, new: pd.DataFrame, name: str) -> list[str]:
    """One line per row that only one side has and per matched row whose values differ (its first
    three differing columns, both values)."""
    keys = key_columns(reference)
    a, b = keyed(reference, keys), keyed(new, keys)
    lines = []
    for key in a.index.difference(b.index):
        lines.append(f"{name}: row {_label(keys, key)} disappeared")
    for key in b.index.difference(a.index):
        lines.append(f"{name}: row {_label(keys, key)} appeared")
    columns = [c for c in a.columns if c in b.columns]
    for key in a.index.intersection(b.index):
        left, right = a.loc[key], b.loc[key]
        changed = [f"{c} {left[c]} -> {right[c]}" for c in columns if not _same(left[c], right[c])]
        if changed:
            lines.append(
                f"{name}: row {_label(keys, key)}: " + "; ".join(changed[:3]) + ("; ..." if len(changed) > 3 else "")
            )
    return lines


def _label(keys: list[str], key: tuple) -> str:
    """A row's key as text: its non-empty key columns, and its occurrence where the key repeats."""
    named = [f"{name}={value}" for name, value in zip(keys, key) if value != ""]
    return "(" + ", ".join(named + ([f"{NTH}={key[-1]}"] if key[-1] else [])) + ")"


def table_differences(old: dict, new: dict) -> list[str]:
    """Every difference between two runs' ``result_tables``: tables only one side has, then rows."""
    found = []
    for key in sorted(set(old) | set(new)):
        name = f"{key[0]} ({len(key[1])} columns)"
        if key not in new:
            found.append(f"{name}: missing from the new run (columns {list(key[1])})")
        elif key not in old:
            found.append(f"{name}: not in the reference run (columns {list(key[1])})")
        else:
            found += row_differences(old[key], new[key], name)
    return found


def column_digest(values: pd.Series) -> str:
    """SHA-256 of a column's values: the bytes of a numeric column (its dtype named), the text of
    any other (missing values as a marker of their own)."""
    digest = hashlib.sha256(str(values.dtype).encode())
    if pd.api.types.is_numeric_dtype(values) and not values.isna().any():
        digest.update(np.ascontiguousarray(values.to_numpy()).tobytes())
    else:
        digest.update("\x1f".join("\x00NA" if pd.isna(v) else repr(v) for v in values.tolist()).encode())
    return digest.hexdigest()


def checkpoint_digest(path: Path) -> str:
    """SHA-256 of a checkpoint's weights (each tensor's name, dtype, shape and bytes, in name order)."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)
    weights = state.get("model", state) if isinstance(state, dict) else state
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name]
        if isinstance(tensor, torch.Tensor):
            digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}".encode())
            digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def fingerprint(results: Path, checkpoint: str | None = None) -> dict:
    """A run's fingerprint: per table (folder and column set), its row count and each column's
    digest; and the digest of ``checkpoint`` (a path under ``results``), when given."""
    tables = {}
    for (folder, columns), frame in result_tables(results).items():
        tables[f"{folder} | {','.join(columns)}"] = {
            "rows": len(frame),
            "columns": {name: column_digest(frame[name]) for name in columns},
        }
    found = {"tables": tables}
    if checkpoint:
        found["checkpoint"] = {"path": checkpoint, "sha256": checkpoint_digest(Path(results) / checkpoint)}
    return found


def read_fingerprint(path: Path) -> dict:
    """A committed fingerprint; one that does not parse is one line."""
    try:
        found = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not a readable fingerprint ({err})") from None
    if not isinstance(found, dict) or "tables" not in found:
        raise InputError(f"{path}: not a fingerprint (no 'tables')")
    return found


def fingerprint_mismatches(expected: dict, found: dict) -> list[str]:
    """One line per table that differs: missing, extra, another row count, or its first differing
    column; and the checkpoint's weights."""
    lines = []
    for table in sorted(set(expected["tables"]) | set(found["tables"])):
        folder = table.split(" | ")[0]
        if table not in found["tables"]:
            lines.append(f"{folder}: missing from this run (columns {table.split(' | ')[1]})")
            continue
        if table not in expected["tables"]:
            lines.append(f"{folder}: not in the fingerprint (columns {table.split(' | ')[1]})")
            continue
        want, got = expected["tables"][table], found["tables"][table]
        if want["rows"] != got["rows"]:
            lines.append(f"{folder}: {got['rows']} rows, the fingerprint has {want['rows']}")
            continue
        differing = [name for name in want["columns"] if want["columns"][name] != got["columns"].get(name)]
        if differing:
            count = f"{len(differing)} of {len(want['columns'])} columns"
            lines.append(f"{folder}: column {differing[0]} differs ({count})")
    if "checkpoint" in expected and expected["checkpoint"] != found.get("checkpoint"):
        lines.append(f"checkpoint {expected['checkpoint']['path']}: its weights differ")
    return lines
