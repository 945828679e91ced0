"""Issue 55's power and cost (study/fix_plan.yaml), from the committed records: for each primary, the expected
half-width of its interval at the Holm worst-case level by held-out windows W, the windows each n takes, what
the records say before the plan (the outcomes by q, the worst position), and the run's CPU cost.

    python scripts/fix_power.py --out runs/fix_plan

Records: the KJV run's windows committed before the plan (runs/smollm2_kjv: the run's corpus and its draw; the
sizing record) and the first retrieval run (runs/smollm2_retrieval, pydoc_data.topics: the stress reading, a
harder corpus, reported beside). The primaries are paired differences over windows (a fix's per-window mean
minus none's, or one fix's minus the other's; ``retrieval_estimators.paired_difference``). No fix has run, so
the pairing's correlation is unknown: a simulated window's difference is one record window's value minus
another's, drawn independently (correlation 0; a positive correlation between arms, the likely case, only
narrows the interval). The records' between-window sd is first inflated to its one-sided ``--sd-bound`` upper
confidence bound (chi-square, W0 - 1 degrees of freedom, W0 the record's windows at n), so that a record with
few windows does not size the run on a lucky sd. A simulated run of W windows draws W such differences with
replacement; its half-width t_{1 - alpha/(2k), W-1} sd / sqrt(W), averaged over ``--sims`` runs
(``retrieval_power.contrast_half_widths``). Windows at n: the smallest W of the grid, at least the plan's
floor, at which every primary at n has an expected half-width on the sizing record at most its margin.

Cost (``--cost``: the benchmark's record, ``bench_positional_bias.py --fit``; ``--window-costs``: the retrieval
window's cost record, whose 4096 window is scaled by the bias's measured overhead at 1024): the fit, the
calibration and its strength's choice, the gate's profiles and the two fix arms' held-out windows.

Writes power.parquet, power.md and power.yaml into --out.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from retrieval_power import contrast_half_widths
from scipy import stats

from lostmid import io
from lostmid.architectures import retrieval_estimators as re
from lostmid.architectures import retrieval_record
from lostmid.architectures.summary import to_markdown

SIZING, STRESS = "kjv", "pydoc"
COLUMNS = ("primary", "record", "n", "record_windows", "sd", "inflation", "margin", "windows_for_margin")
FRACTIONS = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)


def pretrained(record: Path) -> pd.DataFrame:
    examples = retrieval_record.record_examples(record, retrieval_record.record_settings(record))
    return examples[examples.weights == "pretrained"]


def sd_inflation(windows: int, bound: float) -> float:
    """sqrt((W0 - 1) / chi2_{1 - bound, W0 - 1}): the sd's one-sided ``bound`` upper confidence bound over the sd."""
    return float(np.sqrt((windows - 1) / stats.chi2.ppf(1 - bound, windows - 1)))


def independent_differences(per_window: np.ndarray, inflation: float) -> np.ndarray:
    """Every difference of two distinct windows' values, their deviations from the mean scaled by ``inflation``."""
    values = per_window.mean() + inflation * (per_window - per_window.mean())
    differences = values[:, None] - values[None]
    return differences[~np.eye(len(values), dtype=bool)]


def by_position(examples: pd.DataFrame) -> pd.DataFrame:
    """Success and log p(answer) by n and q (tasks pooled), with the windows: the observation before the plan."""
    table = (
        re.at(examples, FRACTIONS)
        .groupby(["n", "q"])
        .agg(windows=("window", "nunique"), success=("success", "mean"), logprob=("logprob", "mean"))
    )
    return table.reset_index()


def worst_positions(observed: pd.DataFrame) -> dict:
    """{n: the q with the lowest mean log p(answer)} of the sizing record."""
    return {int(n): float(part.q[part.logprob.idxmin()]) for n, part in observed.groupby("n")}


def power_table(records: dict, plan: dict, args) -> pd.DataFrame:
    primaries = plan["primaries"]
    level = 1 - plan["alpha"] / len(primaries)  # Holm's worst case: the first primary's level
    rng = np.random.default_rng(args.seed)
    rows = []
    for name, primary in primaries.items():
        for label, examples in records.items():
            part = examples[examples.n == primary["n"]]
            per_window = re.window_mean(part, primary["positions"], primary["outcome"]).to_numpy(float)
            inflation = sd_inflation(len(per_window), args.sd_bound)
            widths = contrast_half_widths(
                independent_differences(per_window, inflation), args.grid, level, args.sims, rng
            )
            margin = primary["margin"]["size"]
            enough = [w for w, h in sorted(widths.items()) if h <= margin]
            rows.append(
                {
                    "primary": name,
                    "record": label,
                    "n": primary["n"],
                    "record_windows": len(per_window),
                    "sd": float(per_window.std(ddof=1)),
                    "inflation": inflation,
                    "margin": margin,
                    "level": level,
                    **{f"W={w}": h for w, h in widths.items()},
                    "windows_for_margin": enough[0] if enough else np.nan,
                }
            )
            print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def windows_needed(table: pd.DataFrame, plan: dict) -> dict:
    """{n: windows} by the plan's rule: the sizing record's need at n, at least the floor (None: the grid is short)."""
    sizing = table[table.record == SIZING]
    found = {}
    for n, floor in plan["run"]["floor_by_n"].items():
        need = sizing[sizing.n == n].windows_for_margin
        found[int(n)] = None if need.isna().any() else int(max(floor, need.max()))
    return found


def check_held_out(plan: dict, sizing: pd.DataFrame) -> None:
    """The held-out windows k = 0 .. W - 1 at each n lie below every window the plan fits or chooses on and every
    window of the sizing record (which fixed the worst position); one line otherwise."""
    arms = plan["arms"]
    used = {1024: arms["blog"]["fit"]["windows"] + arms["fitm"]["calibration"]["windows"]}
    for n, windows in arms["fitm"]["calibration"]["selection_windows"].items():
        used[n] = used.get(n, []) + windows
    for n, count in plan["run"]["windows_by_n"].items():
        first = min([*used.get(n, []), *sizing[sizing.n == n].draw])
        if count > first:
            raise SystemExit(f"fix plan: {count} held-out windows at n = {n} reach window {first}, already used")


def window_costs(path: Path) -> dict:
    """{n: CPU s of one window, accuracy only where the record ran so} from the retrieval window cost record."""
    rows = [ast.literal_eval(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return {row["n"]: row["cpu"] for row in rows if row["share"] == "none"}


def run_cost(plan: dict, cost: dict, windows_4096: float) -> pd.DataFrame:
    """CPU seconds of each piece of the fix run (single thread), from the measured pieces at n = 1024."""
    fit, run = plan["arms"]["blog"]["fit"], plan["run"]
    calibration = plan["arms"]["fitm"]["calibration"]
    overhead = cost["window_biased_cpu_s"] / cost["window_none_cpu_s"]
    window = {1024: cost["window_biased_cpu_s"], 4096: windows_4096 * overhead}
    profile = {1024: cost["profile_cpu_s"], 4096: cost["profile_cpu_s"] * windows_4096 / cost["window_none_cpu_s"]}
    per_window = fit["steps"] * fit["restarts"] * cost["fit_step_cpu_s"] + cost["profile_cpu_s"]  # and none's loss
    rows = [
        ("blog fit (n = 1024)", len(fit["windows"]) * per_window),
        ("fitm calibration (n = 1024)", len(calibration["windows"]) * cost["calibration_cpu_s"]),
    ]
    for n, selection in calibration["selection_windows"].items():
        rows.append((f"fitm strength choice (n = {n})", len(calibration["grid"]) * len(selection) * window[n]))
    for n in (1024, 4096):
        arms = len(run["gates"]["arms"])
        rows.append((f"gate profiles (n = {n})", arms * run["gates"]["windows_by_n"][n] * profile[n]))
        rows.append((f"blog and fitm held-out windows (n = {n})", 2 * run["windows_by_n"][n] * window[n]))
    table = pd.DataFrame(rows, columns=["piece", "cpu_s"])
    return pd.concat([table, pd.DataFrame([("total", table.cpu_s.sum())], columns=table.columns)], ignore_index=True)


def write(table: pd.DataFrame, observed: pd.DataFrame, cost_table: pd.DataFrame, plan: dict, cost: dict, args):
    out = Path(args.out)
    widths = sorted((c for c in table if c.startswith("W=")), key=lambda c: int(c[2:]))
    needed = windows_needed(table, plan)
    worst = worst_positions(observed)
    declared = {int(n): w for n, w in plan["run"]["windows_by_n"].items()}
    if needed != declared or any(worst[n] not in plan["worst_positions"]["q"] for n in worst):
        print(
            f"fix plan: the rule gives windows {needed} and worst q {worst}; the plan declares {declared} "
            f"and q {plan['worst_positions']['q']}",
            flush=True,
        )
    summary = {"windows_by_n": needed, "worst_q_by_n": worst, "primaries": {}, "cost": {}}
    for name, primary in plan["primaries"].items():
        windows = plan["run"]["windows_by_n"][primary["n"]]
        found = table[table.primary == name].set_index("record")
        summary["primaries"][name] = {
            "n": primary["n"],
            "windows": windows,
            "expected_half_width": round(float(found.at[SIZING, f"W={windows}"]), 4),
            "stress_half_width": round(float(found.at[STRESS, f"W={windows}"]), 4),
            "margin": primary["margin"]["size"],
            "windows_for_margin": None
            if np.isnan(found.at[SIZING, "windows_for_margin"])
            else int(found.at[SIZING, "windows_for_margin"]),
        }
    summary["cost"] = {row.piece: round(float(row.cpu_s)) for row in cost_table.itertuples()}
    summary["measured"] = cost
    io.write_text(yaml.safe_dump(summary, sort_keys=False), out / "power.yaml")
    io.write_parquet(table, out / "power.parquet")
    shown = table.assign(**{c: table[c].map(lambda v: f"{v:.3g}") for c in widths})
    io.write_text(
        "# Issue 55's power and cost (study/fix_plan.yaml)\n\n"
        f"`python scripts/fix_power.py --out {args.out}` (seed {args.seed}, {args.sims} simulated runs per W, "
        f"sd inflated to its one-sided {args.sd_bound:g} bound).\n\n"
        "## Before the plan: the KJV run's committed windows (the sizing record)\n\n"
        "Success and log p(answer) by n and q, tasks pooled; worst q by mean log p: "
        + ", ".join(f"n = {n}: q = {q:g}" for n, q in worst.items())
        + ".\n\n"
        + to_markdown(observed)
        + "\n\n## Expected half-width at the Holm worst-case level, by held-out windows W\n\n"
        + to_markdown(shown[[*COLUMNS[:7], *widths, COLUMNS[-1]]])
        + "\n\nWindows by the plan's rule: "
        + ", ".join(f"n = {n}: {w}" for n, w in needed.items())
        + "; the plan declares "
        + ", ".join(f"n = {n}: {w}" for n, w in declared.items())
        + f".\n\n## CPU cost (single thread; measured pieces: {args.cost})\n\n"
        + to_markdown(cost_table.assign(cpu_h=cost_table.cpu_s / 3600))
        + "\n",
        out / "power.md",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="study/fix_plan.yaml")
    parser.add_argument("--sizing", default="runs/smollm2_kjv", help="the run's own record (the sizing record)")
    parser.add_argument("--stress", default="runs/smollm2_retrieval", help="a harder corpus's record (beside)")
    parser.add_argument("--cost", default="runs/fix_plan/cost.yaml", help="bench_positional_bias.py --fit's record")
    parser.add_argument("--window-costs", default="runs/retrieval_cost/after.txt")
    parser.add_argument("--grid", type=int, nargs="+", default=[50, 100, 150, 200, 300, 400])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--sd-bound", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=8550)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    plan = yaml.safe_load(Path(args.plan).read_text())
    records = {SIZING: pretrained(Path(args.sizing)), STRESS: pretrained(Path(args.stress))}
    check_held_out(plan, records[SIZING])
    observed = by_position(records[SIZING])
    cost = yaml.safe_load(Path(args.cost).read_text())
    cost_table = run_cost(plan, cost, window_costs(Path(args.window_costs))[4096])
    write(power_table(records, plan, args), observed, cost_table, plan, cost, args)


if __name__ == "__main__":
    from lostmid import pin_numerics

    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
