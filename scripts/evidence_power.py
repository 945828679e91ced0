"""Power (precision) plan of the evidence stage from a pilot's failure tables (docs/evidence.md, "Power").

    python scripts/evidence_power.py --failure /tmp/pilot/results/failure --baseline baseline --debiased debiased \
        [--settings '{"slope_margin": 0.5}'] [--label residual]

Prints, for the baseline (and the bias-corrected variant, if named): the mean evaluation accuracy
over seeds at every checkpoint, the mid-training checkpoint by the config's rule, the per-seed
logistic slopes there, their sd and the seeds needed for an interval half-width of half the slope
margin (``lostmid.evidence.statistics.pilot_seed_plan``: with the pilot sd and with its upper 80%
confidence bound); and the same for the paired difference of the area under the failure curve
against half the speed margin. Half the margin: then claim (a) is decided whatever the estimate
(supported above margin/2, contradicted below), and claim (e) is supported when the true slope is 0.
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from lostmid.evidence import claims
from lostmid.evidence import statistics as st
from lostmid.evidence.settings import EvidenceSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failure", required=True, help="folder (or file) of results/failure Parquet tables")
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--debiased", default=None)
    parser.add_argument("--settings", default="{}", help="the config's evidence block (JSON)")
    args = parser.parse_args()
    ev = EvidenceSettings.from_dict(json.loads(args.settings))
    failure = pd.read_parquet(args.failure)
    accuracy = claims._accuracy_per_seed(failure)
    for (variant, L, depth), part in accuracy.groupby(["variant", "L", "depth"]):
        curve = part.groupby("step").accuracy.agg(["mean", "min", "max", "count"])
        print(f"\n{variant} L {L} depth {depth}: evaluation accuracy over seeds by step\n{curve.round(3).to_string()}")
    for (L, depth), _ in accuracy[accuracy.variant == args.baseline].groupby(["L", "depth"]):
        step, best = claims.mid_training_step(failure, args.baseline, L, depth, ev.mid_accuracy)
        print(f"\nL {L} depth {depth}: mid-training (mean accuracy >= {ev.mid_accuracy}) = step {step} (best {best:.3f})")
        steps = [step] if step is not None else []
        steps += sorted(set(accuracy[(accuracy.variant == args.baseline) & (accuracy.step > 0)].step) - set(steps))
        for s in steps:
            for variant in [args.baseline] + ([args.debiased] if args.debiased else []):
                slopes = claims._slopes_at(failure, variant, L, depth, s)
                plan = st.pilot_seed_plan(slopes.to_numpy(), ev.slope_margin / 2, ev.level)
                ci = st.t_interval(slopes.to_numpy(), ev.level)
                tag = " (mid-training)" if s == step else ""
                print(f"  step {s}{tag} {variant}: slopes {slopes.round(2).tolist()} mean {ci.estimate:.2f} "
                      f"[{ci.low:.2f}, {ci.high:.2f}], sd {plan.sd:.2f} (80% upper {plan.sd_upper:.2f}) -> seeds for "
                      f"half-width {ev.slope_margin / 2:g}: {plan.n_seeds} ({plan.n_seeds_conservative} conservative)")
        if args.debiased:
            horizon = int(accuracy[(accuracy.variant == args.baseline) & (accuracy.L == L) & (accuracy.depth == depth)].step.max())
            a = claims._aufc(failure, args.debiased, L, depth, horizon)
            b = claims._aufc(failure, args.baseline, L, depth, horizon)
            diff = (a - b).dropna()
            plan = st.pilot_seed_plan(diff.to_numpy(), ev.speed_margin / 2, ev.level)
            ci = st.paired_difference(a, b)
            print(f"  AUFC debiased - baseline: {diff.round(3).tolist()} mean {ci.estimate:.3f} [{ci.low:.3f}, {ci.high:.3f}], "
                  f"sd {plan.sd:.3f} -> seeds for half-width {ev.speed_margin / 2:g}: {plan.n_seeds} ({plan.n_seeds_conservative} conservative)")


if __name__ == "__main__":
    main()
