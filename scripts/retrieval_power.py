"""The SmolLM2 plan's power, by simulation from a retrieval record (a pilot): for each primary of
study/smollm2_plan.yaml, the expected half-width of its interval at the Holm worst-case level (alpha / k),
at each number of windows W of a grid, and the smallest W whose expected half-width is under the margin.

    python scripts/retrieval_power.py --record runs/smollm2_retrieval --out runs/smollm2_plan

Windows are the unit. A simulated run of W windows draws W of the pilot's windows with replacement (every
example of a drawn window comes with it, a window drawn twice counting as two); ``--sims`` runs per W.
- the contrasts (middle_minus_ends, last_minus_first; per window, then a Student t interval over windows):
  the half-width t_{1 - level/2, W-1} sd / sqrt(W) of each simulated run, averaged;
- influence_beyond_position (a GEE coefficient, whose interval in the run is a percentile cluster bootstrap):
  the GEE's robust (sandwich) standard error of each simulated run times z_{1 - level/2}, averaged (the
  bootstrap inside every simulated run would cost hours; the two agree to first order).
The pilot's task-free share is ``influence_free`` (the needle in place); the plan's is ``influence_bare``
(the needle's positions in the window without it): the pilot stands in for its variance, and the plan says so.
Writes power.parquet and power.md (the table) into --out, and power.yaml: for each primary, the windows the
plan's run takes at its n (``run.windows_by_n``) and the expected half-width there, the plan's stated power
(``--from-table``: power.yaml again from an existing power.parquet, no simulation).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from lostmid import io
from lostmid.architectures import retrieval_estimators as re
from lostmid.architectures import retrieval_record
from lostmid.architectures.summary import to_markdown

CONTRASTS = {"middle_minus_ends": re.middle_minus_ends, "last_minus_first": re.last_minus_first}


def simulated_windows(windows: np.ndarray, w: int, rng) -> list:
    return list(rng.choice(windows, size=w, replace=True))


def contrast_half_widths(per_window: np.ndarray, grid, level: float, sims: int, rng) -> dict:
    found = {}
    for w in grid:
        draws = per_window[rng.integers(len(per_window), size=(sims, w))]
        found[w] = float((stats.t.ppf(1 - (1 - level) / 2, w - 1) * draws.std(1, ddof=1) / np.sqrt(w)).mean())
    return found


def influence_half_widths(examples: pd.DataFrame, outcome: str, grid, level: float, sims: int, rng) -> dict:
    rows = re.share_rows(examples, re.SHARE)
    windows = np.unique(rows.window)
    members = {w: rows[rows.window == w] for w in windows}
    z = stats.norm.ppf(1 - (1 - level) / 2)
    found = {}
    for w in grid:
        widths = []
        for _ in range(sims):
            pick = simulated_windows(windows, w, rng)
            run = pd.concat([members[k].assign(cluster=i) for i, k in enumerate(pick)], ignore_index=True)
            fit = re.share_fit(run, outcome)
            if fit is not None:
                widths.append(z * float(fit.bse[1]))
        found[w] = float(np.mean(widths)) if widths else np.nan
    return found


def plan_power(table: pd.DataFrame, plan: dict) -> dict:
    """{primary: {n, windows, expected_half_width, margin, windows_for_margin}} at the plan's run windows."""
    found = {}
    for row in table.itertuples(index=False):
        primary = plan["primaries"][row.primary]
        windows = plan["run"]["windows_by_n"][primary["n"]]
        width = table.set_index("primary").at[row.primary, f"W={windows}"]
        found[row.primary] = {
            "n": primary["n"],
            "windows": windows,
            "expected_half_width": round(float(width), 4),
            "margin": primary["margin"]["size"],
            "windows_for_margin": None if np.isnan(row.windows_for_margin) else int(row.windows_for_margin),
        }
    return found


def write(table: pd.DataFrame, plan: dict, args) -> None:
    """power.parquet, power.md and power.yaml into ``args.out``."""
    out = Path(args.out)
    widths = sorted((c for c in table if c.startswith("W=")), key=lambda c: int(c[2:]))
    table = table[["primary", "pilot", "margin", "level", *widths, "windows_for_margin"]]
    io.write_text(yaml.safe_dump(plan_power(table, plan), sort_keys=False), out / "power.yaml")
    io.write_parquet(table, out / "power.parquet")
    shown = table.assign(**{c: table[c].map(lambda v: f"{v:.3g}") for c in widths})
    level = table.level.iloc[0]
    io.write_text(
        f"Expected half-width at the Holm worst-case level {level:.5g} ({len(table)} primaries), by windows W "
        f"(`python scripts/retrieval_power.py --record {args.record} --out {args.out}`, seed {args.seed}):\n\n"
        + to_markdown(shown)
        + "\n",
        out / "power.md",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", default="runs/smollm2_retrieval", help="the pilot: a retrieval record folder")
    parser.add_argument("--plan", default="study/smollm2_plan.yaml", help="the plan whose primaries are sized")
    parser.add_argument("--grid", type=int, nargs="+", default=[20, 50, 100, 150, 200, 300, 400, 600])
    parser.add_argument("--sims", type=int, default=2000, help="simulated runs per W (the contrasts)")
    parser.add_argument("--gee-sims", type=int, default=40, help="simulated runs per W (the GEE coefficient)")
    parser.add_argument("--seed", type=int, default=8100)
    parser.add_argument("--out", required=True)
    parser.add_argument("--from-table", action="store_true", help="power.yaml from --out's power.parquet alone")
    args = parser.parse_args()
    out = Path(args.out)
    if args.from_table:
        write(pd.read_parquet(out / "power.parquet"), yaml.safe_load(Path(args.plan).read_text()), args)
        return
    plan = yaml.safe_load(Path(args.plan).read_text())
    primaries = plan["primaries"]
    level = 1 - plan["alpha"] / len(primaries)  # Holm's worst case: the first primary's level
    record = Path(args.record)
    examples = retrieval_record.record_examples(record, retrieval_record.record_settings(record))
    examples = examples[examples.weights == "pretrained"]
    rng = np.random.default_rng(args.seed)
    found = []
    for name, primary in primaries.items():
        part = examples[examples.n == primary["n"]]
        if primary["estimator"] in CONTRASTS:
            per_window = CONTRASTS[primary["estimator"]](part, primary["outcome"]).to_numpy(float)
            widths = contrast_half_widths(per_window, args.grid, level, args.sims, rng)
            pilot = f"{per_window.mean():.3g} (sd {per_window.std(ddof=1):.3g}, {len(per_window)} windows)"
        else:
            grid = [w for w in args.grid if w >= 50]
            widths = influence_half_widths(part, primary["outcome"], grid, level, args.gee_sims, rng)
            pilot = f"{part[re.SHARE].notna().groupby(part.window).any().sum()} windows with the share"
        margin = primary["margin"]["size"]
        enough = [w for w, h in sorted(widths.items()) if h <= margin]
        found.append(
            {
                "primary": name,
                "pilot": pilot,
                "margin": margin,
                "level": level,
                **{f"W={w}": h for w, h in widths.items()},
                "windows_for_margin": enough[0] if enough else np.nan,
            }
        )
        print(found[-1], flush=True)
    write(pd.DataFrame(found), plan, args)


if __name__ == "__main__":
    from lostmid import pin_numerics

    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
