"""The residual network at initialization (issue 52, the second study's pilot): how flat can a B make it?

For each form of B (``full``: the blog's one table, every causal entry free; ``layer_head``: one table per
attention step and head), the blog's fit (output Jacobian, every position) on the study's residual network
(config/config.yaml + config/study.yaml, study_fix_res_1's model, L 16, depth 4) with restarts
(lostmid.analysis.bias_fit.fit_restarts), each start run until its best objective falls by less than ``tol``
over ``patience`` iterations or ``max_iter``; then, on the fit's held-out initializations, the gate's measure
log(E_inf with B / E_inf at B = 0) per initialization (its mean and 95% t upper bound; the gate asks for an
upper bound at most -log 1.5) and the readout floor (r - 1)^2 / (L - 1) of docs/remedies.md ("What B can reach").

    python scripts/study2_pilot.py --out runs/study2_pilot

Writes traces.parquet (every start's trace), starts.csv (one row per start) and flatness.csv (one row per form).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lostmid import config as cfg
from lostmid.analysis.bias_fit import Problems, fit_restarts, readout_floor
from lostmid.analysis.settings import HELD_OUT, FitSettings, fit_section
from lostmid.core.model import ModelConfig
from lostmid.tables.summaries import t_half_width

VARIANT = "study_fix_res_1"  # the first study's residual fix: its model and fit recipe


def flatness_row(form: str, config: ModelConfig, settings: FitSettings, fit, cpu_s: float) -> dict:
    """The gate's measure and the readout floor of a form's best B on the held-out initializations."""
    log_ratio = np.log(fit.heldout.imbalance_after / fit.heldout.imbalance_before).to_numpy()
    half = t_half_width(float(log_ratio.std(ddof=1)), log_ratio.size, settings.level)
    held_out = Problems.draw(config, settings, HELD_OUT, settings.heldout)
    L = config.seq_len
    floors = {
        stage: readout_floor(held_out.profiles(b).detach().double()).numpy()
        for stage, b in (("b0", torch.zeros(L, L)), ("fit", fit.bias))
    }
    return {
        "form": form,
        "parameters": int(torch.ones_like(fit.bias).tril().sum()),  # the causal entries of every table
        "restarts": len(fit.starts),
        "E_inf_b0": float(fit.heldout.imbalance_before.mean()),
        "E_inf_fit": float(fit.heldout.imbalance_after.mean()),
        "log_ratio": float(log_ratio.mean()),
        "log_ratio_upper": float(log_ratio.mean() + half),
        "gate": -float(np.log(1.5)),
        "passes": bool(log_ratio.mean() + half <= -np.log(1.5)),
        "floor_b0": float(floors["b0"].mean()),
        "floor_fit": float(floors["fit"].mean()),
        "floor_log_ratio": float(np.log(floors["fit"] / fit.heldout.imbalance_before.to_numpy()).mean()),
        "context_share_b0": float(fit.heldout.context_share_before.mean()),
        "context_share_fit": float(fit.heldout.context_share_after.mean()),
        "cpu_s": cpu_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--forms", nargs="+", default=["full", "layer_head"])
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--max-iter", type=int, default=400)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--patience", type=int, default=50)
    parser.add_argument("--fit-seed", type=int, default=800000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = cfg.load("config/config.yaml", "config/study.yaml")
    block = {**fit_section(config.get("bias_fit"), config["variants"][VARIANT]["remedy"]), "seed": args.fit_seed}
    block |= {"max_iter": args.max_iter, "tol": args.tol, "patience": args.patience}
    settings = cfg.settings_from_section(FitSettings, block, f"variants.{VARIANT}.remedy.fit")
    model = ModelConfig(**cfg.model_spec(config, VARIANT, 16, 4))
    args.out.mkdir(parents=True, exist_ok=True)
    traces, starts, rows = [], [], []
    for form in args.forms:
        started = time.process_time()
        fit = fit_restarts(model, dataclasses.replace(settings, param=form), args.restarts)
        rows.append(flatness_row(form, model, settings, fit, time.process_time() - started))
        traces.append(fit.traces.assign(form=form))
        starts.append(fit.starts.assign(form=form))
        print(pd.DataFrame(rows).iloc[-1].to_string(), flush=True)
    pd.concat(traces, ignore_index=True).to_parquet(args.out / "traces.parquet", index=False)
    pd.concat(starts, ignore_index=True).to_csv(args.out / "starts.csv", index=False)
    pd.DataFrame(rows).to_csv(args.out / "flatness.csv", index=False)


if __name__ == "__main__":
    from lostmid import pin_numerics

    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
