"""Seed plan of the length run's trained arms from its pilot (docs/length.md, "Trained").

    python scripts/length_plan.py --failure PILOT/results/failure --config config/config.yaml config/length.yaml \
        runs/pilots/length_pilot.yaml --cap 12 [--write config/length.yaml]

For every pair (bias variant, its reference) of the pilot at each L: the per-seed effects of claims (a)
(the baseline's slope at its mid-training), (e) (the paired slope difference, each at its own
mid-training) and (e)'s model-free reading, and the seeds each needs for its interval's half-width to
fall below the distance from the pilot's estimate to the threshold that decides it
(``scripts/evidence_power.py``'s ``planning_distance``; ``pilot_seed_plan`` with the pilot's sd's upper
80% bound). The plan at an L is the largest of (a)'s and (e)'s conservative numbers, capped at ``--cap``
(the run's time budget); ``--write`` sets the seeds of each L's grid entry of that config file to
``--first`` onwards (the lines ``seeds: [...]`` in grid order, one entry per L).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from evidence_power import planning_distance  # noqa: E402

from lostmid import pin_numerics  # noqa: E402
from lostmid.config import load, settings_from_section  # noqa: E402
from lostmid.evidence.inputs import Inputs, runs_of  # noqa: E402
from lostmid.evidence.readings import late_minus_early_failure_per_seed, mid_training_step, slopes_at  # noqa: E402
from lostmid.evidence.settings import EvidenceSettings  # noqa: E402
from lostmid.stats import planning  # noqa: E402


def needed(values: pd.Series, kind: str, margin: float, ev: EvidenceSettings) -> tuple[str, int]:
    values = values.dropna().to_numpy()
    distance = planning_distance(values.mean(), kind, margin)
    plan = planning.pilot_seed_plan(values, distance, ev.level)
    words = (
        f"mean {values.mean():.3f}, sd {plan.sd:.3f} (upper {plan.sd_upper:.3f}) over {plan.pilot_seeds} seeds, "
        f"distance {distance:.3f} -> {plan.n_seeds} ({plan.n_seeds_conservative} conservative)"
    )
    return words, plan.n_seeds_conservative


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failure", required=True)
    parser.add_argument("--config", nargs="+", required=True)
    parser.add_argument("--cap", type=int, required=True, help="seeds per arm and L at most (the time budget)")
    parser.add_argument("--first", type=int, default=600, help="the run's first seed")
    parser.add_argument("--write", default=None, help="a config file whose grid seeds to set")
    args = parser.parse_args()
    config = load(*args.config)
    ev = settings_from_section(EvidenceSettings, config.get("evidence"), "evidence")
    failure = pd.read_parquet(args.failure)
    inputs = Inputs(variants=config["variants"], model=config["model"], failure=failure)
    plan = {}
    for debiased in inputs.of_kind("bias"):
        baseline = inputs.reference(debiased)
        for L, depth in runs_of(failure, debiased):
            steps = {v: mid_training_step(failure, v, L, depth, ev.mid_accuracy) for v in (baseline, debiased)}
            print(f"L {L}: mid-training steps (best accuracy) {steps}")
            if any(step is None for step, _ in steps.values()):
                print(f"L {L}: an arm never reaches mid-training in the pilot; planning at the cap")
                plan[L] = args.cap
                continue
            at = {v: step for v, (step, _) in steps.items()}
            a = slopes_at(failure, baseline, L, depth, at[baseline])
            e = slopes_at(failure, debiased, L, depth, at[debiased]) - a
            free = late_minus_early_failure_per_seed(
                failure, debiased, L, depth, at[debiased]
            ) - late_minus_early_failure_per_seed(failure, baseline, L, depth, at[baseline])
            counts = []
            for name, values, kind, margin in (
                ("(a)", a, "greater_than_zero", ev.slope_margin),
                ("(e)", e, "less_than_zero", ev.slope_margin),
                ("(e) model-free (not planned on)", free, "less_than_zero", ev.recall_margin),
            ):
                words, n = needed(values, kind, margin, ev)
                print(f"L {L} {name}: {words}")
                if "not planned" not in name:
                    counts.append(n)
            plan[L] = min(max(counts), args.cap)
    print("plan (seeds per arm):", plan)
    if args.write:
        text = Path(args.write).read_text()
        lines = iter(sorted(plan))
        text = re.sub(
            r"seeds: \[[0-9, ]*\]",
            lambda _: f"seeds: {list(range(args.first, args.first + plan[next(lines)]))}",
            text,
            count=len(plan),
        )
        Path(args.write).write_text(text)


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
