"""The second study's power, by simulation from the first study's per-seed record (issue 52; study/plan2.yaml).

The first study's record (runs/study/tables) is the pilot: each primary's per-unit effects are computed there
with the second study's estimators (lostmid.stats.study2: Firth's per-seed slope; the fix arms' effects with
seeds nested in fits), and then resampled at the second study's sizes:

- (a), the position slope shared by the seeds (lostmid.stats.study2.common_slope_effect: Firth with one intercept
  per seed, a cluster bootstrap over seeds): its standard error at n seeds is the pilot's bootstrap sd times
  sqrt(48 / n), and each simulated run's estimate is drawn normal around the pilot's;
- a fix arm (seeds nested in fits): per-fit effects u_f ~ N(0, tau^2), tau^2 the pilot's between-fit variance
  component (one-way ANOVA, (MSB - MSW) / 12, at least 0; also at twice tau), each seed's effect the pilot mean
  plus u_f plus a within-fit residual drawn from the pilot's pooled residuals; the fit is the unit (t over fits);
- influence beyond position: whole seeds drawn with replacement, the binomial GEE refitted (lostmid.stats.study2
  .influence_fits, exchangeable); Wald.

Each interval is read at the Holm worst case, level 1 - alpha / k (k = 10 primaries: 0.995; an equivalence test
at alpha / k reads its 1 - 2 alpha / k interval, 0.99). The simulated truth is the pilot's own mean: p_decided is
the share of simulated runs whose outcome (lostmid.stats.outcomes.outcome) is not inconclusive (for an equivalence
primary: the share that shows equivalence). The pilot's readings (each primary's pilot estimate with the new
estimators, and the referee's checks of the first study) are written beside.

    python scripts/study2_power.py --record runs/study/tables --out runs/study2_plan
"""

# ruff: noqa: I001
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from lostmid.stats import study2
from lostmid.study import estimators as est
from lostmid.stats.effects import BootstrapEffect
from lostmid.stats.outcomes import INCONCLUSIVE, outcome

ALPHA, PRIMARIES = 0.05, 10
LEVEL = 1 - ALPHA / PRIMARIES  # the Holm worst case: the last primary's level
EQUIVALENCE_LEVEL = 1 - 2 * ALPHA / PRIMARIES
BASE = {"res": "study_base_res", "nores": "study_base_nores"}
FIXES = {net: [f"study_fix_{net}_{k}" for k in range(1, 5)] for net in BASE}
LOG2 = float(np.log(2))
PREFERENCE_MARGIN = 0.05
INFLUENCE_SIZE = 0.18717113096006247  # log 2 x the population sd of p = f/16, f = 2..16 (study/plan.yaml)


def pilot_units(failure: pd.DataFrame) -> dict[str, pd.Series]:
    """Each primary's per-unit effects in the first study's record: by seed (Firth's per-seed slope, a
    secondary), or by (fit, seed) for a fix arm."""
    units = {}
    for net, base in BASE.items():
        for step in (500, 1500):
            units[f"a_per_seed_{net}_{step}"] = study2.per_seed_firth_slopes(est.arm_rows(failure, [base], step=step))
        blocks = {"d": [], "e_difference": [], "e_fix": []}
        for fix in FIXES[net]:
            blocks["d"].append(est.speed_differences(failure, [fix], [base], 1500))
            blocks["e_difference"].append(est.preference_difference(failure, [fix], [base], 500).units)
            blocks["e_fix"].append(est.late_minus_early(failure, [fix], 500))
        for name, parts in blocks.items():
            units[f"{name}_{net}"] = pd.concat(parts, keys=FIXES[net], names=["fit", "seed"])
    return units


def pilot_slopes(failure: pd.DataFrame, resamples: int) -> dict[str, BootstrapEffect]:
    """(a) in the first study's record: the common slope of each baseline at steps 500 and 1500."""
    return {
        f"a_{net}_{step}": study2.common_slope_effect(est.arm_rows(failure, [base], step=step), resamples, seed=52)
        for net, base in BASE.items()
        for step in (500, 1500)
    }


def components(values: pd.Series) -> tuple[float, float, np.ndarray]:
    """(mean, between-fit sd tau, pooled within-fit residuals) of effects indexed by (fit, seed)."""
    groups = values.groupby(level=0)
    m = groups.size().mean()
    residuals = (values - groups.transform("mean")).to_numpy()
    msw = float((residuals**2).sum() / (values.size - groups.ngroups))
    msb = float(m * ((groups.mean() - values.mean()) ** 2).sum() / (groups.ngroups - 1))
    return float(values.mean()), float(np.sqrt(max(0.0, (msb - msw) / m))), residuals


def half_widths(means: np.ndarray, sds: np.ndarray, n: int, level: float) -> np.ndarray:
    return stats.t.ppf(0.5 + level / 2, n - 1) * sds / np.sqrt(n)


def decided(means, half, direction: str, size: float) -> float:
    readings = [outcome(m - h, m + h, direction, size) for m, h in zip(means, half)]
    return float(np.mean([r != INCONCLUSIVE for r in readings]))


def simulate_slope(pilot: BootstrapEffect, n: int, reps: int, rng, direction: str, size: float) -> dict:
    se = float(np.std(pilot.replicates, ddof=1)) * np.sqrt(pilot.n / n)
    means = rng.normal(pilot.estimate, se, size=reps)
    half = np.full(reps, stats.norm.ppf(0.5 + LEVEL / 2) * se)
    return {"half_width": float(half[0]), "p_decided": decided(means, half, direction, size)}


def simulate_fits(values, fits, per_fit, reps, rng, direction, size, tau_scale=1.0, margin=None) -> dict:
    mean, tau, residuals = components(values)
    u = rng.normal(0.0, tau_scale * tau, size=(reps, fits, 1))
    draws = mean + u + rng.choice(residuals, size=(reps, fits, per_fit), replace=True)
    fit_means = draws.mean(2)
    means, sds = fit_means.mean(1), fit_means.std(1, ddof=1)
    if margin is None:
        half = half_widths(means, sds, fits, LEVEL)
        return {"half_width": float(half.mean()), "p_decided": decided(means, half, direction, size), "tau": tau}
    half = half_widths(means, sds, fits, EQUIVALENCE_LEVEL)
    inside = (means - half > -margin) & (means + half < margin)
    return {"half_width": float(half.mean()), "p_decided": float(inside.mean()), "tau": tau}


def simulate_influence(rows: pd.DataFrame, n: int, reps: int, rng) -> dict:
    seeds = rows.seed.unique()
    half, readings = [], []
    for _ in range(reps):
        drawn = rng.choice(seeds, size=n, replace=True)
        sample = pd.concat([rows[rows.seed == s].assign(seed=k) for k, s in enumerate(drawn)], ignore_index=True)
        effect = study2.influence_fits(sample, ["gee_exchangeable"])["gee_exchangeable"]
        low, high = effect.interval(LEVEL)
        half.append((high - low) / 2)
        readings.append(outcome(low, high, "decrease", INFLUENCE_SIZE) != INCONCLUSIVE)
    return {"half_width": float(np.mean(half)), "p_decided": float(np.mean(readings))}


# (primary, the pilot's units, direction, size or equivalence margin, equivalence?)
PRIMARIES_SIMULATED = [
    ("a_position_residual_1500", "a_res_1500", "increase", LOG2, False),
    ("a_position_residual_500", "a_res_500", "increase", LOG2, False),
    ("a_position_noresidual_1500", "a_nores_1500", "increase", LOG2, False),
    ("d_speed_noresidual", "d_nores", "decrease", 0.05, False),
    ("e_difference_noresidual", "e_difference_nores", "decrease", PREFERENCE_MARGIN, False),
    ("e_absence_noresidual", "e_fix_nores", None, PREFERENCE_MARGIN, True),
    ("d_speed_residual", "d_res", "decrease", 0.05, False),
    ("e_difference_residual", "e_difference_res", "decrease", PREFERENCE_MARGIN, False),
    ("e_absence_residual", "e_fix_res", None, PREFERENCE_MARGIN, True),
]


def power_table(units: dict, slopes: dict, influence_rows: pd.DataFrame, args, rng) -> pd.DataFrame:
    rows = []
    for primary, name, direction, size, equivalence in PRIMARIES_SIMULATED:
        if name in slopes:
            for n in args.seeds:
                result = simulate_slope(slopes[name], n, args.reps, rng, direction, size)
                rows.append({"primary": primary, "units": f"{n} seeds", "n_units": n, **result})
            continue
        values = units[name]
        for fits in args.fits:
            for per_fit in args.per_fit:
                for tau_scale in (1.0, 2.0):
                    result = simulate_fits(
                        values, fits, per_fit, args.reps, rng, direction, size, tau_scale, size if equivalence else None
                    )
                    units_words = f"{fits} fits x {per_fit} seeds" + ("" if tau_scale == 1 else ", tau x 2")
                    rows.append({"primary": primary, "units": units_words, "n_units": fits, **result})
    for n in args.seeds:
        result = simulate_influence(influence_rows, n, args.influence_reps, rng)
        rows.append({"primary": "influence_beyond_position_residual", "units": f"{n} seeds", "n_units": n, **result})
    level = {True: EQUIVALENCE_LEVEL, False: LEVEL}
    table = pd.DataFrame(rows)
    equivalence = table.primary.str.startswith("e_absence")
    return table.assign(level=[level[e] for e in equivalence])


def pilot_table(units: dict, slopes: dict, influence_rows: pd.DataFrame) -> pd.DataFrame:
    """Each primary's pilot reading with the second study's estimator (95%): the common slope and the mean of
    per-seed Firth slopes for the baselines, the fit as the unit (4 fits) and the mixed model for the fix arms;
    the influence fits."""
    rows = []
    for name, effect in slopes.items():
        low, high = effect.interval(0.95)
        rows.append(
            {
                "pilot": name,
                "estimator": "common slope (Firth, seed intercepts), cluster bootstrap",
                "estimate": effect.estimate,
                "low": low,
                "high": high,
                "n": effect.n,
                "sigma": float(np.std(effect.replicates, ddof=1)),
            }
        )
    for name, values in units.items():
        if values.index.nlevels == 1:
            effect = est.MeanEffect(values, "per seed")
            rows.append(
                {
                    "pilot": name,
                    "estimator": "mean over seeds, t",
                    "estimate": effect.estimate,
                    "low": effect.interval(0.95)[0],
                    "high": effect.interval(0.95)[1],
                    "n": effect.n,
                }
            )
            continue
        mean, tau, residuals = components(values)
        for estimator, effect in (
            ("fit as the unit, t over fits", study2.fit_cluster_effect(values, name)),
            ("mixed model, random intercept per fit", study2.fit_mixed_effect(values, name)),
            ("seeds as independent, t", est.MeanEffect(values.reset_index(drop=True), name)),
        ):
            low, high = effect.interval(0.95)
            rows.append(
                {
                    "pilot": name,
                    "estimator": estimator,
                    "estimate": effect.estimate,
                    "low": low,
                    "high": high,
                    "n": effect.n,
                    "tau": tau,
                    "sigma": float(residuals.std(ddof=1)),
                }
            )
        if name.startswith("e_fix"):
            tost = study2.equivalence(study2.fit_cluster_effect(values, name), PREFERENCE_MARGIN)
            rows.append(
                {
                    "pilot": name,
                    "estimator": f"TOST +-{PREFERENCE_MARGIN}, fit as the unit (90%)",
                    "estimate": tost.estimate,
                    "low": tost.low,
                    "high": tost.high,
                    "n": 4,
                    "p": tost.p,
                }
            )
    for name, effect in study2.influence_fits(influence_rows).items():
        low, high = effect.interval(0.95)
        rows.append(
            {
                "pilot": "influence_res_500",
                "estimator": name,
                "estimate": effect.estimate,
                "low": low,
                "high": high,
                "n": effect.n,
                "p": effect.p_value,
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, default=Path("runs/study/tables"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[48, 96, 192])
    parser.add_argument("--fits", type=int, nargs="+", default=[12, 24])
    parser.add_argument("--per-fit", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--influence-reps", type=int, default=30)
    parser.add_argument("--slope-resamples", type=int, default=60)
    parser.add_argument("--seed", type=int, default=52)
    args = parser.parse_args()
    failure = pd.read_parquet(args.record / "failure.parquet")
    influence = pd.read_parquet(args.record / "influence.parquet")
    units = pilot_units(failure)
    slopes = pilot_slopes(failure, args.slope_resamples)
    influence_rows = est.influence_and_failure(failure, influence, [BASE["res"]], 500)
    args.out.mkdir(parents=True, exist_ok=True)
    pilot = pilot_table(units, slopes, influence_rows)
    pilot.to_csv(args.out / "pilot.csv", index=False, float_format="%.6g")
    print(pilot.to_string(float_format=lambda x: f"{x:.4g}"), flush=True)
    power = power_table(units, slopes, influence_rows, args, np.random.default_rng(args.seed))
    power.to_csv(args.out / "power.csv", index=False, float_format="%.6g")
    print(power.to_string(float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    from lostmid import pin_numerics

    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
