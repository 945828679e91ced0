"""Merge the two pilot runs (runs/notebook.md) into one set of tables for ``lostmid evidence``.

    python scripts/evidence_pilot_tables.py /tmp/pilot_res /tmp/pilot_nores /tmp/pilot_evidence

The no-residual pilot's variants ``baseline`` and ``debiased`` become ``baseline_nores`` and
``debiased_nores`` (the names the default config uses), its fitted bias gets ``variant`` and
``residual`` columns; writes <out>/failure.parquet, <out>/bias_matrix.parquet and prints the
``--variants`` JSON that defines the four variants.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def main(residual_dir: str, nores_dir: str, out: str) -> None:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = {"baseline": "baseline_nores", "debiased": "debiased_nores"}
    failure = []
    bias = []
    for folder, residual in ((Path(residual_dir), True), (Path(nores_dir), False)):
        table = pd.read_parquet(folder / "results" / "failure")
        table = table[table.variant.isin(["baseline", "debiased"])].copy()
        if not residual:
            table["variant"] = table.variant.map(names)
        failure.append(table)
        matrix = pd.concat(
            [pd.read_parquet(p) for p in sorted((folder / "results" / "bias_fit" / "matrix").glob("*.parquet"))]
        )
        bias.append(matrix.assign(variant="debiased" if residual else "debiased_nores", residual=residual))
    pd.concat(failure, ignore_index=True).to_parquet(out_dir / "failure.parquet")
    pd.concat(bias, ignore_index=True).to_parquet(out_dir / "bias_matrix.parquet")
    variants = {
        "baseline": {},
        "debiased": {"remedy": {"kind": "bias"}},
        "baseline_nores": {"model": {"residual": False}},
        "debiased_nores": {"model": {"residual": False}, "remedy": {"kind": "bias"}},
    }
    print(json.dumps(variants))


if __name__ == "__main__":
    main(*sys.argv[1:4])
