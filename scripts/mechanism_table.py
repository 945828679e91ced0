"""The mechanism run's rows per arm, as Markdown (docs/remedies.md, "Controls for the fix"): for every arm,
its B's shape and its flatness in the trained model at init, (d), (e) model-based and model-free against its
baseline and against the literal reading, and the last checkpoint's accuracy, each as estimate [95% interval]
and verdict (family-wise verdict after the slash where the row is in a family).

    python scripts/mechanism_table.py <run>/results/evidence/evidence.parquet <run>/results/bias_fit_summary
"""

from __future__ import annotations

import sys

import pandas as pd

from lostmid.evidence.inputs import STATUS_WORDS
from lostmid.evidence.report import with_status

COLUMNS = {
    "arm_flattens_trained_model_at_init": "trained model's E_inf at init, log(B / B = 0)",
    "arm_trains_faster": "(d) vs baseline",
    "arm_has_less_position_preference": "(e) slope vs baseline",
    "arm_has_less_late_minus_early_failure": "(e) late − early vs baseline",
    "arm_speed_as_literal": "(d) vs literal",
    "arm_slope_as_literal": "(e) slope vs literal",
    "arm_preference_as_literal": "(e) late − early vs literal",
    "arm_keeps_accuracy": "last accuracy vs baseline",
}


def cell(row) -> str:
    if row.status in ("not_run", "not_evaluable"):
        return STATUS_WORDS[row.status]
    verdict = row.verdict + (f" / {row.adjusted_verdict}" if row.family_size else "")
    return f"{row.estimate:.3g} [{row.ci_low:.3g}, {row.ci_high:.3g}] {verdict}"


def main(evidence_path: str, summary_path: str) -> None:
    table = with_status(pd.read_parquet(evidence_path))
    summary = pd.read_parquet(summary_path)
    shape = summary.groupby("variant")[["c0", "lag_slope", "self_attention_init", "self_attention_init_b0"]].first()
    rows = table[table.claim.isin(COLUMNS)]
    arms = list(dict.fromkeys(rows.variant))
    print("| arm | B: c0, lag slope, self-attention at init | " + " | ".join(COLUMNS.values()) + " |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for arm in arms:
        s = shape.loc[arm] if arm in shape.index else None
        b = f"{s.c0:+.2f}, {s.lag_slope:+.3f}, {s.self_attention_init:.2f}" if s is not None else "–"
        cells = []
        for claim in COLUMNS:
            found = rows[(rows.claim == claim) & (rows.variant == arm)]
            cells.append(cell(found.iloc[0]) if len(found) else "–")
        print(f"| `{arm}` | {b} | " + " | ".join(cells) + " |")
    family = rows[rows.family_size > 0].family_size
    if len(family):
        print(f"\nFamily `mechanism`: {int(family.iloc[0])} rows, Bonferroni level {rows.adjusted_level.max():.4%}.")
    notes = rows[rows.claim.isin(["arm_keeps_accuracy", "arm_has_less_late_minus_early_failure"])]
    for row in notes.itertuples():
        print(f"- {row.claim}, {row.variant}: {row.note}")


if __name__ == "__main__":
    main(*sys.argv[1:])
