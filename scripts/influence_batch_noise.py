"""How much of a claim's seed-to-seed spread is the influence batch's own sampling (runs/notebook.md).

    python scripts/influence_batch_noise.py /tmp/validation/results --remedy balance_blog --baseline baseline \
        --L 16 --depth 4 --step 500 --seeds 0-15 --per-position 4 32 --draws 6

A paired claim such as ``balance_lowers_e_inf_at_matched_accuracy`` reads, per seed, log(E_inf remedy /
E_inf baseline) of the loss-gradient density of one fixed influence batch (``influence.batch_per_position``
sequences at every flag position, seed ``influence.seed``). Its per-seed spread is the models' own
variation plus the sampling error of that batch. This re-measures the checkpoints of one step on
``--draws`` independent batches (seed ``influence.seed`` + k; k = 0 is the run's own batch where
``--per-position`` is the run's ``influence.batch_per_position``) for each
``--per-position`` and prints, per batch size: the sd over seeds of the run's own reading (draw 0), the
within-seed sd over draws (the batch's sampling error), the sd over seeds of the mean over draws, and the
share of the per-seed variance that is sampling. A diagnostic for planning a measurement, not a claim:
it decides nothing, and a batch size chosen with it applies to fresh seeds.
"""

from __future__ import annotations

import argparse
import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lostmid import pin_numerics
from lostmid.analysis import influence, metrics
from lostmid.config import load
from lostmid.core import task
from lostmid.jobs import CHECKPOINT
from lostmid.training.checkpoint import load_model


def seed_list(text: str) -> list[int]:
    """``0-15`` or ``0,3,7`` -> the seeds."""
    if "-" in text:
        first, last = map(int, text.split("-"))
        return list(range(first, last + 1))
    return [int(part) for part in text.split(",")]


@functools.cache
def influence_batch(L: int, per_position: int, seed: int):
    """The stratified batch (per_position, seed): drawn once, read by every arm and seed."""
    return task.stratified_eval_set(L, per_position, seed)[:2]


def log_e_inf(model, L: int, per_position: int, seed: int, delta: float) -> float:
    """log E_inf of the loss-gradient density of P_0 on the stratified batch (per_position, seed)."""
    tokens, targets = influence_batch(L, per_position, seed)
    energy = influence.energies(model, tokens, targets, all_steps=False)[0]
    return math.log(metrics.influence_metrics(energy.numpy(), delta)["E_inf"])


def measure(results: Path, args, influence_seed: int, delta: float) -> pd.DataFrame:
    """One row per (per_position, draw, seed): the paired log ratio remedy / baseline."""
    rows = []
    for seed in args.seeds:
        models = {}
        for arm in (args.remedy, args.baseline):
            run = {"variant": arm, "L": args.L, "depth": args.depth, "seed": seed, "step": args.step}
            models[arm] = load_model(results.parent / CHECKPOINT.format(**run), None, "cpu")[0]
        for per_position in args.per_position:
            for draw in range(args.draws):
                values = {
                    arm: log_e_inf(model, args.L, per_position, influence_seed + draw, delta)
                    for arm, model in models.items()
                }
                rows.append(
                    {
                        "per_position": per_position,
                        "draw": draw,
                        "seed": seed,
                        "log_ratio": values[args.remedy] - values[args.baseline],
                    }
                )
        print(f"seed {seed} done", flush=True)
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per batch size: sd over seeds of draw 0, within-seed sd over draws, sd over seeds of the draw mean,
    and the sampling share of the per-seed variance (mean within-seed variance / variance of draw 0)."""
    out = []
    for per_position, part in table.groupby("per_position"):
        wide = part.pivot(index="seed", columns="draw", values="log_ratio")
        own = wide[0].std(ddof=1)
        within = math.sqrt(wide.var(axis=1, ddof=1).mean())
        out.append(
            {
                "per_position": per_position,
                "seeds": len(wide),
                "mean_draw0": wide[0].mean(),
                "sd_over_seeds_draw0": own,
                "sd_within_seed": within,
                "sd_over_seeds_of_draw_mean": wide.mean(axis=1).std(ddof=1),
                "sampling_share": within**2 / own**2,
            }
        )
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a run's results folder")
    parser.add_argument("--config", nargs="+", default=["config/config.yaml"], help="the run's config files")
    parser.add_argument("--remedy", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--L", type=int, required=True)
    parser.add_argument("--depth", type=int, required=True)
    parser.add_argument("--step", type=int, required=True, help="the checkpoint step read for every seed")
    parser.add_argument("--seeds", type=seed_list, required=True, help="0-15 or 0,3,7")
    parser.add_argument("--per-position", type=int, nargs="+", default=[4, 32])
    parser.add_argument("--draws", type=int, default=6, help="independent influence batches per size (>= 2)")
    parser.add_argument("--table", type=Path, help="write the per-seed, per-draw log ratios here (Parquet)")
    args = parser.parse_args()
    if args.draws < 2:
        parser.error("--draws must be at least 2 (a within-seed sd needs two batches)")
    torch.set_num_threads(1)
    config = load(*args.config)
    table = measure(args.results, args, config["influence"]["seed"], config["evidence"]["delta"])
    if args.table:
        table.to_parquet(args.table)
    with pd.option_context("display.width", 200, "display.precision", 3):
        print(summary(table).to_string(index=False))
    print(f"(log E_inf ratios {args.remedy} / {args.baseline}, L {args.L}, depth {args.depth}, step {args.step})")


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    np.seterr(all="raise")
    main()
