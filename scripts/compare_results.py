#!/usr/bin/env python3
"""Compare every result table of two runs: exact equality, measured columns aside.

    python scripts/compare_results.py REFERENCE/results NEW/results [--alias NEW_TABLE=OLD_TABLE ...]

A *table* is a top folder of ``results/`` holding Parquet files (``results/failure``,
``results/metrics``, ...). Its files are read one by one and grouped by their column set, so a
folder that mixes tables (as ``results/algebraic`` once did) is compared table by table rather
than merged into NaN rows. Rows are sorted by every column before the comparison, so the order of
files and runs does not matter; values, columns and dtypes must be identical.

Measured columns (wall-clock, memory: names matching ``lostmid.tables.keys.MEASURED``) differ between any two runs
and are dropped, as are rows of long tables whose ``quantity`` (or, in the evidence table, ``claim``)
names a measured quantity.
``--alias`` maps a table folder of the new run to its name in the reference run, for a table
that moved (``--alias bias_fit_matrix=bias_fit``). Exit status 0 when every table matches, 1
otherwise; each difference is one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from lostmid.tables.keys import without_measurements


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by every column (NaN last), columns in a fixed order, a fresh index."""
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns), na_position="last", kind="mergesort").reset_index(drop=True)


def tables(results: Path, aliases: dict[str, str]) -> dict[tuple[str, tuple[str, ...]], pd.DataFrame]:
    """(table folder, column set) -> the table's rows, measured columns dropped."""
    groups: dict[tuple[str, tuple[str, ...]], list[pd.DataFrame]] = {}
    for path in sorted(results.rglob("*.parquet")):
        if path.name.startswith("."):
            continue
        folder = path.relative_to(results).parts[0]
        frame = without_measurements(pd.read_parquet(path))
        key = (aliases.get(folder, folder), tuple(sorted(frame.columns)))
        groups.setdefault(key, []).append(frame)
    return {key: canonical(pd.concat(parts, ignore_index=True)) for key, parts in groups.items()}


def differences(old_tables: dict, new_tables: dict) -> list[str]:
    found = []
    for key in sorted(set(old_tables) | set(new_tables)):
        name = f"{key[0]} ({len(key[1])} columns)"
        if key not in new_tables:
            found.append(f"{name}: missing from the new run (columns {list(key[1])})")
            continue
        if key not in old_tables:
            found.append(f"{name}: not in the reference run (columns {list(key[1])})")
            continue
        a, b = old_tables[key], new_tables[key]
        try:
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        except AssertionError as err:
            first = " ".join(str(err).split())[:300]
            found.append(f"{name}: {len(a)} rows in the reference, {len(b)} in the new run: {first}")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path, help="results folder of the reference run")
    parser.add_argument("new", type=Path, help="results folder of the run to check")
    parser.add_argument("--alias", action="append", default=[], metavar="NEW=OLD", help="a table folder that moved")
    args = parser.parse_args(argv)
    aliases = dict(item.split("=", 1) for item in args.alias)
    for folder in (args.reference, args.new):
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder")
    old_tables = tables(args.reference, {})
    found = differences(old_tables, tables(args.new, aliases))
    checked = len(old_tables)
    for line in found:
        print(line)
    print(f"{checked} tables compared, {len(found)} differ")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
