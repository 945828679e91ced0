"""Power (precision) plan of the evidence stage from a pilot's failure tables (runs/notebook.md).

    python scripts/evidence_power.py --failure /tmp/pilot/results/failure --baseline baseline --debiased debiased \
        [--settings '{"slope_margin": 0.5}']
    # the validation protocol's claims (runs/notebook.md): the pilot's results folder and its config files
    python scripts/evidence_power.py --validation /tmp/validation_pilot/results --config config/config.yaml \
        config/validation.yaml runs/pilots/validation_pilot.yaml
    # the tables that plan reads, as Snakemake targets of the pilot
    python scripts/evidence_power.py --targets --config config/config.yaml config/validation.yaml \
        runs/pilots/validation_pilot.yaml

Prints, for the baseline (and the bias-corrected variant, if named): the mean evaluation accuracy
over seeds at every checkpoint, the mid-training checkpoint by the config's rule, the per-seed
logistic slopes at every checkpoint and, for claims (a), (e) (the paired slope difference, each arm
at its own mid-training) and (d) (paired area under the failure curve; the late-flag failure
against the baseline at its mid-training, which (d)'s row reports), the seeds needed
for the interval's half-width to fall below the distance from the pilot's estimate to the
threshold that decides the claim the way the pilot leans (``planning_distance``;
``lostmid.stats.planning.pilot_seed_plan``, with the pilot sd and with its upper 80%
confidence bound). Plan with the larger, conservative number. The per-seed effects are the
claims' own (``lostmid.evidence.blog_claims``; with ``--validation``, every claim of
``lostmid.evidence.validation_claims`` in every setting the pilot has, and its cost per run).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from lostmid import pin_numerics
from lostmid.config import load, settings_from_section
from lostmid.evidence import readings as claims
from lostmid.evidence.inputs import Setting, rows_of, runs_of
from lostmid.evidence.settings import EvidenceSettings
from lostmid.stats import planning
from lostmid.stats import statistics as st
from lostmid.tables.summaries import accuracy_per_checkpoint


def planning_distance(estimate: float, kind: str, margin: float) -> float:
    """Distance from the pilot estimate to the threshold that decides the claim the way the pilot leans.

    A t interval of half-width below this distance (centred on the pilot's estimate) gives that
    verdict: greater_than_zero leans "supported" above margin/2 (distance to 0) and "contradicted"
    below (distance to the margin); less_than_zero mirrors it; equivalent_to_zero leans
    "supported" inside the margin (distance to the nearer of +-margin) and "contradicted" outside.
    """
    if kind == "greater_than_zero":
        return estimate if estimate > margin / 2 else margin - estimate
    if kind == "less_than_zero":
        return -estimate if estimate < -margin / 2 else margin + estimate
    if kind in ("at_most", "at_least"):
        return abs(margin - estimate)
    return abs(margin - abs(estimate))


def plan(values, kind: str, margin: float, ev: EvidenceSettings) -> str:
    ci = st.t_interval(values, ev.level)
    distance = planning_distance(ci.estimate, kind, margin)
    p = planning.pilot_seed_plan(values, distance, ev.level)
    return (
        f"mean {ci.estimate:.3f} [{ci.low:.3f}, {ci.high:.3f}] over {ci.n} seeds, sd {p.sd:.3f} (80% upper bound "
        f"{p.sd_upper:.3f}); distance to the deciding threshold {distance:.3f} -> seeds {p.n_seeds} "
        f"({p.n_seeds_conservative} with the upper sd)"
    )


VALIDATION_TABLES = ("failure", "metrics", "observability", "train")
# The modules whose readings return one per-seed effect each (``validation_claims.per_seed``): the claims planned.
VALIDATION_READINGS = ("lostmid.evidence.validation_claims",)


def validation_targets(config_files) -> list[str]:
    """The per-run tables the validation plan reads, for every run of the (pilot) config."""
    from lostmid import jobs

    blocks = jobs.blocks(load(*config_files))
    return [path for name in VALIDATION_TABLES for path in jobs.run_tables(blocks, name)]


def validation_plan(results: str, config_files, ev: EvidenceSettings) -> None:
    """For every validation claim and setting of the pilot: the per-seed effect, its interval and the seeds it needs."""
    from lostmid.evidence.claims import CLAIMS, evaluate_claim
    from lostmid.evidence.inputs import Inputs, NotRun
    from lostmid.tables.keys import read

    config = load(*config_files)
    tables = {
        name: read([str(p) for p in sorted(Path(results, name).rglob("*.parquet"))])
        for name in VALIDATION_TABLES
        if Path(results, name).is_dir()
    }
    inputs = Inputs(variants=config["variants"], model=config["model"], **tables)
    train = tables.get("train")
    if train is not None:
        cost = train.groupby(["variant", "L", "depth"]).agg(
            seconds_per_step=("seconds_per_step", "median"), steps=("step", "max"), peak_mem_mb=("peak_mem_mb", "max")
        )
        cost["training_s_per_run"] = cost.seconds_per_step * cost.steps
        print(f"training cost per run (median s/step x steps):\n{cost.round(4).to_string()}")
    validation = [c for c in CLAIMS if getattr(c.compute, "func", c.compute).__module__ in VALIDATION_READINGS]
    for claim in validation:
        try:
            settings = claim.settings(inputs, ev)
        except NotRun as why:
            print(f"\n{claim.name}: not run ({why})")
            continue
        for setting in settings:
            print(f"\n{claim.name}, {setting.words()}")
            try:
                per = claim.compute(inputs, ev, setting)
            except NotRun as why:
                print(f"  not run: {why}")
                continue
            rule = claim.rule.build(ev, per.terms)
            log_scale = claim.estimator == "log_mean"  # the per-seed logs, and the rule read on the log scale
            values = np.log(per.values[0]) if log_scale else per.values[0]
            margin = math.log(rule.margin) if log_scale else rule.margin
            print(
                f"  {per.method}\n  per seed {values.round(3).tolist()}\n  {rule.kind}: "
                f"{plan(values, rule.kind, margin, ev)}" + (f"\n  note: {per.note}" if per.note else "")
            )
    verdicts = pd.concat([pd.DataFrame(evaluate_claim(c, inputs, ev)) for c in validation])
    print(
        "\nthe pilot's rows (not the validation run's verdicts):\n"
        + verdicts[["claim", "setting", "estimate", "ci_low", "ci_high", "n_seeds", "verdict"]].to_string(index=False)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failure", help="folder (or file) of results/failure Parquet tables")
    parser.add_argument("--baseline")
    parser.add_argument("--debiased", default=None)
    parser.add_argument("--settings", default="{}", help="the config's evidence block (JSON)")
    parser.add_argument(
        "--validation", default=None, help="a pilot's results folder: plan the validation claims instead"
    )
    parser.add_argument("--targets", action="store_true", help="print the pilot's tables the validation plan reads")
    parser.add_argument(
        "--config", nargs="+", default=[], help="the pilot's config files (with --validation, --targets)"
    )
    args = parser.parse_args()
    ev = settings_from_section(EvidenceSettings, json.loads(args.settings), "evidence")
    if args.targets:
        print(" ".join(validation_targets(args.config)))
        return
    if args.validation:
        block = json.loads(args.settings) if args.settings != "{}" else load(*args.config)["evidence"]
        validation_plan(args.validation, args.config, settings_from_section(EvidenceSettings, block, "evidence"))
        return
    if not (args.failure and args.baseline):
        parser.error("--failure and --baseline are required (or --validation / --targets)")
    failure = pd.read_parquet(args.failure)
    accuracy = accuracy_per_checkpoint(failure)
    for (variant, L, depth), part in accuracy.groupby(["variant", "L", "depth"]):
        curve = part.groupby("step").accuracy.agg(["mean", "min", "max", "count"])
        print(f"\n{variant} L {L} depth {depth}: evaluation accuracy over seeds by step\n{curve.round(3).to_string()}")
    for L, depth in runs_of(failure, args.baseline):
        step, best = claims.mid_training_step(failure, args.baseline, L, depth, ev.mid_accuracy)
        print(
            f"\nL {L} depth {depth}: mid-training (mean accuracy >= {ev.mid_accuracy}) = step {step} (best {best:.3f})"
        )
        later = rows_of(accuracy, "failure", args.baseline, L, depth).step
        steps = ([step] if step is not None else []) + sorted(set(later[later > 0]) - {step})
        for s in steps:
            for variant in [args.baseline] + ([args.debiased] if args.debiased else []):
                slopes = claims.slopes_at(failure, variant, L, depth, s)
                tag = " (mid-training)" if s == step else ""
                print(f"  step {s}{tag} {variant}: slopes {slopes.round(2).tolist()}")
                if variant == args.baseline:  # claim (a); the debiased arm's slopes enter (e) paired, below
                    print(f"    greater_than_zero: {plan(slopes.to_numpy(), 'greater_than_zero', ev.slope_margin, ev)}")
        if not args.debiased:
            continue
        pair = Setting(args.debiased, L, depth, reference=args.baseline)
        own, best = claims.mid_training_step(failure, args.debiased, L, depth, ev.mid_accuracy)
        print(f"  {args.debiased}'s own mid-training (claim (e)): step {own} (best {best:.3f})")
        if own is not None and step is not None:
            diff = (
                claims.slopes_at(failure, args.debiased, L, depth, own)
                - claims.slopes_at(failure, args.baseline, L, depth, step)
            ).dropna()
            print(
                f"    slope difference debiased (step {own}) - baseline (step {step}), each at its own mid-training:\n"
                f"    less_than_zero: {plan(diff.to_numpy(), 'less_than_zero', ev.slope_margin, ev)}"
            )
        if step is not None:
            late = (
                claims.late_failure_per_seed(failure, args.debiased, L, depth, step)
                - claims.late_failure_per_seed(failure, args.baseline, L, depth, step)
            ).dropna()
            print(
                f"  late-flag failure (p > 1/2) debiased - baseline at step {step} (in claim (d)'s row): "
                f"{late.round(3).tolist()}\n    less_than_zero: "
                f"{plan(late.to_numpy(), 'less_than_zero', ev.recall_margin, ev)}"
            )
        debiased, baseline, horizon = claims.training_speed_per_seed(failure, pair)
        diff = (debiased - baseline).dropna()
        print(
            f"  AUFC debiased - baseline, steps 0-{horizon}: {diff.round(3).tolist()}\n    less_than_zero: "
            f"{plan(diff.to_numpy(), 'less_than_zero', ev.speed_margin, ev)}"
        )


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
