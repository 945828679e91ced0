#!/usr/bin/env python3
"""Compare every result table of two runs: exact equality, measured columns aside.

    python scripts/compare_results.py REFERENCE/results NEW/results [--alias NEW_TABLE=OLD_TABLE ...]

A *table* is a top folder of ``results/`` holding Parquet files, grouped by column set. Rows are
matched by their keys (every non-float column; in the evidence table the claim, arms, L, depth,
residual, reading and checkpoint kind): the comparison names each row that appears or disappears
and, for a matched row, its first differing column (lostmid.tables.compare). Measured columns and
rows (wall-clock, memory: ``lostmid.tables.keys.MEASURED``) are dropped. ``--alias`` maps a table
folder of the new run to its name in the reference run, for a table that moved. Exit status 0
when every table matches, 1 otherwise; each difference is one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lostmid import pin_numerics
from lostmid.tables.compare import result_tables, table_differences


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("reference", type=Path, help="results folder of the reference run")
    parser.add_argument("new", type=Path, help="results folder of the run to check")
    parser.add_argument("--alias", action="append", default=[], metavar="NEW=OLD", help="a table folder that moved")
    args = parser.parse_args(argv)
    aliases = dict(item.split("=", 1) for item in args.alias)
    for folder in (args.reference, args.new):
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder")
    old_tables = result_tables(args.reference)
    found = table_differences(old_tables, result_tables(args.new, aliases))
    for line in found:
        print(line)
    print(f"{len(old_tables)} tables compared, {len(found)} differences")
    return 1 if found else 0


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    sys.exit(main())
