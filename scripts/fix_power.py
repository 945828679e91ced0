"""Issue 55's power and cost (study/fix_plan.yaml), from the committed records: for each primary, the expected
half-width of its interval at the Holm worst-case level by held-out windows W, with the fits as clusters; the
windows each n takes, what the records say before the plan (the outcomes by q, the worst position), and the run's
CPU cost.

    python scripts/fix_power.py --out runs/fix_plan

Records: the KJV run's windows committed before the plan (runs/smollm2_kjv: the run's corpus and its draw; the
sizing record) and the first retrieval run (runs/smollm2_retrieval, pydoc_data.topics: the stress reading, a
harder corpus, reported beside). The primaries are paired differences over windows nested in F fits (a fix's
per-window mean minus none's, or one fix's minus the other's; per fit the mean over its m = W / F windows; Student
t with F - 1 df over the fit means: ``retrieval_estimators.fit_cluster_difference``). No fix has run, so the
pairing's correlation is unknown: a simulated window's difference is one record window's value minus another's,
drawn independently (correlation 0; a positive correlation between arms, the likely case, only narrows the
interval). The records' between-window sd is first inflated to its one-sided ``--sd-bound`` upper confidence bound
(chi-square, W0 - 1 degrees of freedom, W0 the record's windows at n), so that a record with few windows does not
size the run on a lucky sd. The between-fit sd s_f is unknown before the run: a fit adds N(0, s_f^2) to each of
its windows, s_f at each ``--fit-sd`` share of the primary's margin (0, a quarter, a half); the fit mean's variance
is then s_f^2 + s_w^2 / m. A simulated run draws F fits of m such differences with replacement; its half-width
t_{1 - alpha/(2k), F-1} sd(fit means) / sqrt(F), averaged over ``--sims`` runs (``fit_half_widths``). Windows at
n: the smallest W = F m of the grid, at least the plan's floor and at most the held-out windows the draw has below
every window already used (``held_out_cap``), at which every primary at n has an expected half-width at s_f = 0
on the sizing record at most its margin; where none does, the cap, and the primaries short of their margin are
named (likely undecided at this budget).

Cost (``--cost``: the benchmark's record, ``bench_positional_bias.py --fit``; ``--window-costs``: the retrieval
window's cost record, whose 4096 window is scaled by the bias's measured overhead at 1024): the F fits (restarts x
steps at one window each), the F calibrations and their strength's choice (the grid at n = 1024 on each one's
window), the gate's profiles and the two fix arms' held-out windows (at the plan's gate-first n, those below its
floor and those beyond it apart: the latter run only where its gate passes; a total without them beside).

Writes power.parquet, power.md and power.yaml into --out.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from lostmid import io
from lostmid.architectures import retrieval_estimators as re
from lostmid.architectures import retrieval_record
from lostmid.architectures.summary import to_markdown

SIZING, STRESS = "kjv", "pydoc"
GATED = "blog and fitm held-out windows beyond the gate-first floor"  # the cost the gate-first order can save
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


def fit_half_widths(differences: np.ndarray, fits: int, per_fit, fit_sd: float, level: float, sims: int, rng):
    """{W: the expected half-width at ``level`` of the mean over ``fits`` fit means}: a simulated run draws, per fit,
    m (``per_fit``) window differences from ``differences`` and adds one N(0, ``fit_sd``^2) fit effect to them;
    t with fits - 1 df over the fit means."""
    quantile = stats.t.ppf(1 - (1 - level) / 2, fits - 1)
    found = {}
    for m in per_fit:
        draws = differences[rng.integers(len(differences), size=(sims, fits, m))]
        means = draws.mean(2) + rng.normal(0.0, fit_sd, size=(sims, fits)) if fit_sd else draws.mean(2)
        found[fits * m] = float((quantile * means.std(1, ddof=1) / np.sqrt(fits)).mean())
    return found


def power_table(records: dict, plan: dict, args) -> pd.DataFrame:
    primaries = plan["primaries"]
    fits = int(plan["fits"]["count"])
    level = 1 - plan["alpha"] / len(primaries)  # Holm's worst case: the first primary's level
    rng = np.random.default_rng(args.seed)
    rows = []
    for name, primary in primaries.items():
        for label, examples in records.items():
            part = examples[examples.n == primary["n"]]
            per_window = re.window_mean(part, primary["positions"], primary["outcome"]).to_numpy(float)
            inflation = sd_inflation(len(per_window), args.sd_bound)
            differences = independent_differences(per_window, inflation)
            margin = primary["margin"]["size"]
            for share in args.fit_sd if label == SIZING else [0.0]:  # the stress record beside, at s_f = 0
                widths = fit_half_widths(differences, fits, args.per_fit, share * margin, level, args.sims, rng)
                rows.append(
                    {
                        "primary": name,
                        "record": label,
                        "n": primary["n"],
                        "record_windows": len(per_window),
                        "sd": float(per_window.std(ddof=1)),
                        "inflation": inflation,
                        "margin": margin,
                        "fit_sd_share": share,
                        "fit_sd": share * margin,
                        "fits": fits,
                        "level": level,
                        **{f"W={w}": h for w, h in widths.items()},
                    }
                )
                print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def held_out_cap(plan: dict, sizing: pd.DataFrame) -> dict:
    """{n: the most held-out windows k = 0 .. W - 1, W a multiple of F, below every window the plan fits on and
    every window of the sizing record (which fixed the worst position)}."""
    fits = plan["fits"]
    used = {int(plan["arms"]["blog"]["fit"]["n"]): [int(k) for k in fits["windows"] + fits.get("excluded", [])]}
    found = {}
    for n in plan["run"]["windows_by_n"]:
        first = min([*used.get(int(n), []), *sizing[sizing.n == n].draw])
        found[int(n)] = first // int(fits["count"]) * int(fits["count"])
    return found


def enough(table: pd.DataFrame, n: int, windows: int, share: float = 0.0) -> dict:
    """{primary at n: whether its expected half-width on the sizing record at W = ``windows`` and s_f at ``share``
    of its margin is at most its margin}."""
    rows = table[(table.record == SIZING) & (table.n == n) & np.isclose(table.fit_sd_share, share)]
    return {row.primary: bool(row[f"W={windows}"] <= row.margin) for _, row in rows.iterrows()}


def windows_needed(table: pd.DataFrame, plan: dict, caps: dict) -> dict:
    """{n: windows} by the plan's rule: the smallest W of the grid, at least the floor and at most the cap, at which
    every primary at n reaches its margin at s_f = 0; the cap (the largest W of the grid within it) where none does."""
    grid = sorted(int(c[2:]) for c in table if c.startswith("W="))
    found = {}
    for n, floor in plan["run"]["floor_by_n"].items():
        allowed = [w for w in grid if floor <= w <= caps[int(n)]]
        reached = [w for w in allowed if all(enough(table, n, w).values())]
        found[int(n)] = reached[0] if reached else allowed[-1]
    return found


def check_held_out(plan: dict, caps: dict) -> None:
    """The plan's held-out windows at each n lie below every window already used (``held_out_cap``); one line
    otherwise."""
    for n, count in plan["run"]["windows_by_n"].items():
        if count > caps[int(n)]:
            cap = caps[int(n)]
            raise SystemExit(f"fix plan: {count} held-out windows at n = {n}; at most {cap} lie below the windows used")


def window_costs(path: Path) -> dict:
    """{n: CPU s of one window, accuracy only where the record ran so} from the retrieval window cost record."""
    rows = [ast.literal_eval(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return {row["n"]: row["cpu"] for row in rows if row["share"] == "none"}


def run_cost(plan: dict, cost: dict, windows_4096: float) -> pd.DataFrame:
    """CPU seconds of each piece of the fix run (single thread), from the measured pieces at n = 1024."""
    fit, run, fits = plan["arms"]["blog"]["fit"], plan["run"], int(plan["fits"]["count"])
    calibration = plan["arms"]["fitm"]["calibration"]
    overhead = cost["window_biased_cpu_s"] / cost["window_none_cpu_s"]
    window = {1024: cost["window_biased_cpu_s"], 4096: windows_4096 * overhead}
    profile = {1024: cost["profile_cpu_s"], 4096: cost["profile_cpu_s"] * windows_4096 / cost["window_none_cpu_s"]}
    per_fit = fit["steps"] * fit["restarts"] * cost["fit_step_cpu_s"] + cost["profile_cpu_s"]  # and none's loss
    rows = [
        (f"blog fits ({fits} x {fit['restarts']} restarts x {fit['steps']} steps, one window each)", fits * per_fit),
        (f"fitm calibrations ({fits}, n = 1024)", fits * cost["calibration_cpu_s"]),
        (
            f"fitm strength choice ({fits} x {len(calibration['grid'])} strengths, n = {calibration['n']})",
            fits * len(calibration["grid"]) * window[int(calibration["n"])],
        ),
    ]
    for n in (1024, 4096):
        arms = len(run["gates"]["arms"])
        rows.append((f"gate profiles (n = {n})", arms * run["gates"]["windows_by_n"][n] * profile[n]))
        rows += held_out_cost(plan, n, window[n])
    table = pd.DataFrame(rows, columns=["piece", "cpu_s"])
    gated = table.piece.str.startswith(GATED)
    totals = [("total", table.cpu_s.sum()), ("total where the blog gate fails", table.cpu_s[~gated].sum())]
    return pd.concat([table, pd.DataFrame(totals, columns=table.columns)], ignore_index=True)


def held_out_cost(plan: dict, n: int, window: float) -> list[tuple[str, float]]:
    """The two fix arms' held-out windows at n: at the gate-first n (run.gate_first) the floor's, run in any case,
    and those beyond it, run only where its gate passes (the saving where it fails); elsewhere all of them."""
    count, first = plan["run"]["windows_by_n"][n], plan["run"].get("gate_first", {})
    if first.get("n") != n:
        return [(f"blog and fitm held-out windows (n = {n})", 2 * count * window)]
    floor, beyond = int(first["floor"]), count - int(first["floor"])
    return [
        (f"blog and fitm held-out windows below the gate-first floor (n = {n}: {floor})", 2 * floor * window),
        (f"{GATED} (n = {n}: {beyond}, only where the {first['arm']} gate passes)", 2 * beyond * window),
    ]


def t_quantiles(plan: dict, choices=(6, 8, 12, 24)) -> dict:
    """{F: t's quantile at the Holm worst-case level with F - 1 df}: what the number of fits buys."""
    level = 1 - plan["alpha"] / len(plan["primaries"])
    return {f: round(float(stats.t.ppf(1 - (1 - level) / 2, f - 1)), 3) for f in choices}


def primary_power(table: pd.DataFrame, plan: dict, name: str, primary: dict) -> dict:
    """One primary's power record at the plan's windows: the expected half-width at each s_f share (sizing) and
    the stress reading (s_f = 0), the smallest W of the grid that reaches the margin at s_f = 0."""
    windows = plan["run"]["windows_by_n"][primary["n"]]
    found = table[table.primary == name]
    sizing = found[found.record == SIZING].set_index("fit_sd_share")
    at_zero = sizing.loc[0.0]
    grid = sorted(int(c[2:]) for c in table if c.startswith("W="))
    reaching = [w for w in grid if at_zero[f"W={w}"] <= primary["margin"]["size"]]
    return {
        "n": primary["n"],
        "windows": windows,
        "fits": int(plan["fits"]["count"]),
        "windows_per_fit": windows // int(plan["fits"]["count"]),
        "margin": primary["margin"]["size"],
        "expected_half_width": round(float(at_zero[f"W={windows}"]), 4),
        "half_width_by_fit_sd": {
            float(share): round(float(row[f"W={windows}"]), 4) for share, row in sizing.iterrows()
        },
        "stress_half_width": round(float(found[found.record == STRESS][f"W={windows}"].iloc[0]), 4),
        "windows_for_margin": reaching[0] if reaching else None,
    }


def write(table: pd.DataFrame, observed: pd.DataFrame, cost_table: pd.DataFrame, plan: dict, cost: dict, caps, args):
    out = Path(args.out)
    widths = sorted((c for c in table if c.startswith("W=")), key=lambda c: int(c[2:]))
    needed = windows_needed(table, plan, caps)
    worst = worst_positions(observed)
    declared = {int(n): w for n, w in plan["run"]["windows_by_n"].items()}
    if needed != declared or any(worst[n] not in plan["worst_positions"]["q"] for n in worst):
        print(
            f"fix plan: the rule gives windows {needed} and worst q {worst}; the plan declares {declared} "
            f"and q {plan['worst_positions']['q']}",
            flush=True,
        )
    short = {
        float(share): sorted(
            name for n, w in declared.items() for name, ok in enough(table, n, w, share).items() if not ok
        )
        for share in args.fit_sd
    }
    summary = {
        "fits": int(plan["fits"]["count"]),
        "windows_by_n": needed,
        "held_out_cap_by_n": caps,
        "worst_q_by_n": worst,
        "t_quantile_by_fits": t_quantiles(plan),
        "short_of_margin_by_fit_sd": short,
        "primaries": {name: primary_power(table, plan, name, p) for name, p in plan["primaries"].items()},
    }
    summary["cost"] = {row.piece: round(float(row.cpu_s)) for row in cost_table.itertuples()}
    summary["measured"] = cost
    io.write_text(yaml.safe_dump(summary, sort_keys=False), out / "power.yaml")
    io.write_parquet(table, out / "power.parquet")
    shown = table.assign(**{c: table[c].map(lambda v: f"{v:.3g}") for c in widths})
    columns = ["primary", "record", "n", "record_windows", "sd", "inflation", "margin", "fit_sd", *widths]
    shares = ", ".join(f"{share:g}" for share in args.fit_sd)
    text = (
        "# Issue 55's power and cost (study/fix_plan.yaml)\n\n"
        f"`python scripts/fix_power.py --out {args.out}` (seed {args.seed}, {args.sims} simulated runs per W and "
        f"s_f, sd inflated to its one-sided {args.sd_bound:g} bound; {summary['fits']} fits, W = fits x "
        f"{', '.join(map(str, args.per_fit))} windows per fit; s_f at {shares} x the margin).\n\n"
        "## Before the plan: the KJV run's committed windows (the sizing record)\n\n"
        "Success and log p(answer) by n and q, tasks pooled; worst q by mean log p: "
        + ", ".join(f"n = {n}: q = {q:g}" for n, q in worst.items())
        + ".\n\n"
        + to_markdown(observed)
        + "\n\n## Expected half-width at the Holm worst-case level, by held-out windows W, fits as clusters\n\n"
        "Student t with F - 1 df over the F fit means; the fit mean's variance s_f^2 + s_w^2 / m; fit_sd is s_f "
        "(the stress record at s_f = 0 only). t's quantile at this level by F: "
        + ", ".join(f"{f} fits {q:g}" for f, q in summary["t_quantile_by_fits"].items())
        + ".\n\n"
        + to_markdown(shown[columns])
        + "\n\nWindows by the plan's rule (s_f = 0, at most the cap below the windows already used: "
        + ", ".join(f"n = {n}: {w}" for n, w in caps.items())
        + "): "
        + ", ".join(f"n = {n}: {w}" for n, w in needed.items())
        + "; the plan declares "
        + ", ".join(f"n = {n}: {w}" for n, w in declared.items())
        + ".\n\nPrimaries whose expected half-width at the declared windows exceeds their margin (likely "
        "undecided at this budget), by s_f: "
        + "; ".join(f"s_f = {share:g} x margin: {', '.join(names) or 'none'}" for share, names in short.items())
        + f".\n\n## CPU cost (single thread; measured pieces: {args.cost})\n\n"
        + to_markdown(cost_table.assign(cpu_h=cost_table.cpu_s / 3600))
        + "\n"
    )
    io.write_text(io.wrap_prose(text), out / "power.md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="study/fix_plan.yaml")
    parser.add_argument("--sizing", default="runs/smollm2_kjv", help="the run's own record (the sizing record)")
    parser.add_argument("--stress", default="runs/smollm2_retrieval", help="a harder corpus's record (beside)")
    parser.add_argument("--cost", default="runs/fix_plan/cost.yaml", help="bench_positional_bias.py --fit's record")
    parser.add_argument("--window-costs", default="runs/retrieval_cost/after.txt")
    parser.add_argument("--per-fit", type=int, nargs="+", default=[5, 7, 9, 12, 15, 18, 25], help="m: W = F m")
    parser.add_argument("--fit-sd", type=float, nargs="+", default=[0.0, 0.25, 0.5], help="s_f / margin")
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--sd-bound", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=8550)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    plan = yaml.safe_load(Path(args.plan).read_text())
    records = {SIZING: pretrained(Path(args.sizing)), STRESS: pretrained(Path(args.stress))}
    caps = held_out_cap(plan, records[SIZING])
    check_held_out(plan, caps)
    observed = by_position(records[SIZING])
    cost = yaml.safe_load(Path(args.cost).read_text())
    cost_table = run_cost(plan, cost, window_costs(Path(args.window_costs))[4096])
    write(power_table(records, plan, args), observed, cost_table, plan, cost, caps, args)


if __name__ == "__main__":
    from lostmid import pin_numerics

    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
