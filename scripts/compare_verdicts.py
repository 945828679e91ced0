#!/usr/bin/env python3
"""Which verdicts two evidence tables of the same config give differently (docs/validation.md).

    python scripts/compare_verdicts.py REFERENCE NEW

Each side is an evidence table: a Parquet file or folder (``results/evidence``), or a Markdown page
holding one (a docs or runs page as committed, or ``git show COMMIT:runs/default/results.md > page.md``):
every table on the page whose header has the evidence table's columns is read, markers or not. Rows
are matched by their keys: claim and setting (arms, L, depth, residual), with the checkpoint reduced
to its kind (lostmid.tables.compare.checkpoint_kind: a mid-training checkpoint's step, or "not
reached", is where each run locates it, not which row it is), and the n-th occurrence where a key
repeats. Prints the number of rows matched, how many verdicts differ and of which kind (decided on
one side and not on the other, or supported on one side and contradicted on the other), each
difference with both estimates, then each row only one side has. A comparison, not a test: exit
status 0 whatever it finds, 1 on unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from lostmid.tables.compare import checkpoint_kind

COLUMNS = ["claim", "setting", "estimate", "verdict"]  # what both kinds of input carry
HEADER = "| # | claim |"  # the evidence table's header (lostmid.pages.evidence.markdown)


def from_markdown(text: str, source: str) -> pd.DataFrame:
    """The rows of every evidence table of the page (the layout of ``lostmid.pages.evidence.markdown``)."""
    lines = [line.rstrip() for line in text.splitlines()]
    headers = [i for i, line in enumerate(lines) if line.startswith(HEADER)]
    if not headers:
        raise ValueError(f"{source}: no evidence table (no line starting {HEADER!r})")
    rows = []
    for at in headers:
        names = [cell.strip() for cell in lines[at].strip("|").split(" | ")]
        for line in lines[at + 2 :]:
            if not line.startswith("| "):
                break
            cells = dict(zip(names, (cell.strip() for cell in line.strip().strip("|").split(" | "))))
            rows.append(
                {
                    "claim": cells["claim"].removesuffix(" (check)"),  # the page marks the checks of the instrument
                    "setting": cells["setting"],
                    "estimate": cells["estimate [interval]"],
                    "verdict": cells["verdict"].strip("*").split(" (")[0],  # "inconclusive (not evaluable)" and alike
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


def setting_key(setting: str) -> str:
    """A setting without its checkpoint's step: arms, L, depth, residual and the checkpoint's kind."""
    head, found, checkpoint = str(setting).partition("checkpoint ")
    return head + (f"checkpoint {checkpoint_kind(checkpoint)}" if found else "")


def keyed(table: pd.DataFrame) -> pd.DataFrame:
    table = table.assign(key=[setting_key(setting) for setting in table.setting])
    return table.assign(nth=table.groupby(["claim", "key"]).cumcount())


def differences(reference: pd.DataFrame, new: pd.DataFrame) -> tuple[int, pd.DataFrame, pd.DataFrame]:
    """(rows matched, the matched rows whose verdicts differ with the kind of difference, the rows only
    one side has with the side that has them)."""
    reference, new = keyed(reference), keyed(new)
    both = reference.merge(
        new, on=["claim", "key", "nth"], suffixes=("_reference", "_new"), how="outer", indicator=True
    )
    matched = both[both._merge == "both"]
    changed = matched[matched.verdict_reference != matched.verdict_new].copy()
    changed["kind"] = [kind(a, b) for a, b in zip(changed.verdict_reference, changed.verdict_new)]
    alone = both[both._merge != "both"].copy()
    alone["side"] = alone._merge.map({"left_only": "reference only", "right_only": "new only"}).astype(str)
    return len(matched), changed, alone


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
    matched, changed, alone = differences(reference, new)
    print(f"{matched} rows matched by claim and setting ({len(reference)} and {len(new)} rows); ", end="")
    kinds = ", ".join(f"{k} {n}" for k, n in changed.kind.value_counts().items())
    print(f"{len(changed)} verdicts differ" + (f": {kinds}" if kinds else "") + f"; {len(alone)} rows on one side only")
    for row in changed.itertuples():
        print(
            f"- {row.claim} | {row.setting_new} | {row.estimate_reference} {row.verdict_reference} -> "
            f"{row.estimate_new} {row.verdict_new}"
        )
    for row in alone.itertuples():
        setting = row.setting_reference if row.side == "reference only" else row.setting_new
        print(f"- {row.side}: {row.claim} | {setting}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
