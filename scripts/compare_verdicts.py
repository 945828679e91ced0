#!/usr/bin/env python3
"""Which verdicts two evidence tables of the same config give differently (docs/validation.md).

    python scripts/compare_verdicts.py REFERENCE NEW

Each side is an evidence table: a Parquet file or folder (``results/evidence``), or a Markdown page
holding one between the lines that ``lostmid evidence --markdown --into`` writes (a docs page, or
``git show COMMIT:docs/validation.md > page.md`` for the table a commit quoted). Rows are matched by
claim and setting (variant, L, depth, checkpoint), the step of a mid-training checkpoint aside (each
run locates its own). Prints the number of rows matched, how many verdicts differ and of which kind
(decided on one side and not on the other, or supported on one side and contradicted on the other),
then each difference with both estimates. A comparison, not a test: exit status 0 whatever it
finds, 1 on unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from lostmid.cli.evidence import PAGE_MARKERS

COLUMNS = ["claim", "setting", "estimate", "verdict"]  # what both kinds of input carry
MID_STEP = r"checkpoint step \d+ \(mid-training\)"


def from_markdown(text: str, source: str) -> pd.DataFrame:
    """The rows of the evidence table between the page's markers (the layout of ``claims.markdown``)."""
    begin, end = PAGE_MARKERS
    lines = [line.rstrip() for line in text.splitlines()]
    if begin not in lines or end not in lines:  # the markers are whole lines (prose may quote them)
        raise ValueError(f"{source}: no evidence table (the lines {begin!r} and {end!r})")
    lines = lines[lines.index(begin) : lines.index(end)]
    headers = [line for line in lines if line.startswith("| # |")]
    if not headers:
        raise ValueError(f"{source}: nothing between its evidence table markers is an evidence table")
    header = headers[0]
    names = [cell.strip() for cell in header.strip("|").split(" | ")]
    rows = []
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("| "):
            break
        cells = dict(zip(names, (cell.strip() for cell in line.strip().strip("|").split(" | "))))
        rows.append(
            {
                "claim": cells["claim"].removesuffix(" (check)"),  # the page marks the checks of the instrument
                "setting": cells["setting"],
                "estimate": cells["estimate [interval]"],
                "verdict": cells["verdict"].strip("*").split(" (")[0],  # "inconclusive (not evaluable)" and the like
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def from_parquet(path: Path) -> pd.DataFrame:
    table = pd.read_parquet(path)
    interval = [
        f"{e:.3g} [{lo:.3g}, {hi:.3g}]" if pd.notna(e) else "–"
        for e, lo, hi in zip(table.estimate, table.ci_low, table.ci_high)
    ]
    return table.assign(estimate=interval)[COLUMNS]


def read(path: Path) -> pd.DataFrame:
    if path.suffix == ".md":
        return from_markdown(path.read_text(), str(path))
    return from_parquet(path)


def kind(reference: str, new: str) -> str:
    decided = {"supported", "contradicted"}
    if reference in decided and new in decided:
        return "supported <-> contradicted"
    if reference in decided or new in decided:
        return "decided <-> not decided"
    return "other"  # e.g. inconclusive <-> not evaluable


def differences(reference: pd.DataFrame, new: pd.DataFrame) -> tuple[int, pd.DataFrame]:
    """(rows matched, the matched rows whose verdicts differ, with the kind of difference)."""
    # A run's mid-training checkpoint is located by its own accuracy curve, so its step is not part of the
    # key; a claim may have several rows of one setting (one per reading): the n-th matches the n-th.
    reference, new = (
        t.assign(key=t.setting.str.replace(MID_STEP, "checkpoint (mid-training)", regex=True)).pipe(
            lambda t: t.assign(nth=t.groupby(["claim", "key"]).cumcount())
        )
        for t in (reference, new)
    )
    both = reference.merge(new, on=["claim", "key", "nth"], suffixes=("_reference", "_new"))
    changed = both[both.verdict_reference != both.verdict_new].copy()
    changed["kind"] = [kind(a, b) for a, b in zip(changed.verdict_reference, changed.verdict_new)]
    return len(both), changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", type=Path, help="evidence table: Parquet file or folder, or a Markdown page")
    parser.add_argument("new", type=Path, help="the same, of the run to compare")
    args = parser.parse_args()
    try:
        reference, new = read(args.reference), read(args.new)
    except (OSError, ValueError, KeyError) as error:
        print(f"compare_verdicts: {error}", file=sys.stderr)
        return 1
    matched, changed = differences(reference, new)
    print(f"{matched} rows matched by claim and setting ({len(reference)} and {len(new)} rows); ", end="")
    kinds = ", ".join(f"{k} {n}" for k, n in changed.kind.value_counts().items())
    print(f"{len(changed)} verdicts differ" + (f": {kinds}" if kinds else ""))
    for row in changed.itertuples():
        print(
            f"- {row.claim} | {row.setting_new} | {row.estimate_reference} {row.verdict_reference} -> "
            f"{row.estimate_new} {row.verdict_new}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
