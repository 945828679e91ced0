"""Which flat B: how far apart are the B's that one reading of the bias fit finds from different fit seeds?

Reads fitted B's from results/bias_fit_matrix files (one per fit, e.g. a run's debiased_literal and
debiased_literal_fit2) and, with --fit-seeds, fits the same reading again from further fit seeds (their
initializations and batches: lostmid.analysis.bias_fit.fit_bias, the reading's fit block with only ``seed``
changed), then prints, for every pair, how far apart the two B's are: the largest and the root-mean-square
difference of their causal entries (each B gauge-fixed, so a row's shift, which softmax ignores, does not
count), the correlation of their entries, the last query's first-key entry B(L, 1) of each and the largest
difference of their lag means c(k). Usage (docs/remedies.md, "Controls for the fix"):

    python scripts/compare_bias_fits.py --matrices run/results/bias_fit_matrix/debiased_literal{,_fit2}_L16_M4.parquet \
        --config config/config.yaml config/mechanism.yaml --variant debiased_literal --fit-seeds 300000 400000 \
        --out fits.parquet
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
import pandas as pd
import torch

from lostmid import config as cfg
from lostmid import pin_numerics
from lostmid.analysis.bias_controls import lag_means
from lostmid.analysis.bias_fit import bias_long, fit_bias, gauge_fix
from lostmid.analysis.settings import FitSettings, fit_section
from lostmid.core.model import ModelConfig


def matrix(part: pd.DataFrame) -> torch.Tensor:
    L = int(part["query"].max())
    B = torch.zeros(L, L, dtype=torch.float64)
    B[torch.as_tensor(part["query"].to_numpy() - 1), torch.as_tensor(part["key"].to_numpy() - 1)] = torch.as_tensor(
        part["bias"].to_numpy(np.float64)
    )
    return gauge_fix(B)


def distances(a: torch.Tensor, b: torch.Tensor) -> dict:
    L = a.shape[0]
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    x, y = a[causal], b[causal]
    return {
        "max_abs_diff": float((x - y).abs().max()),
        "rms_diff": float((x - y).square().mean().sqrt()),
        "correlation": float(np.corrcoef(x.numpy(), y.numpy())[0, 1]),
        "first_key_a": float(a[L - 1, 0]),
        "first_key_b": float(b[L - 1, 0]),
        "lag_mean_max_diff": float((lag_means(a) - lag_means(b)).abs().max()),
    }


def refit(config_files: list[str], variant: str, seed: int, L: int, depth: int) -> torch.Tensor:
    config = cfg.load(*config_files)
    remedy = config["variants"][variant]["remedy"]
    fit_model = (remedy.get("fit") or {}).get("fit_model", variant)
    block = {**fit_section(config.get("bias_fit"), remedy), "seed": seed}
    settings = cfg.settings_from_section(FitSettings, block, f"variants.{variant}.remedy.fit")
    result = fit_bias(ModelConfig(**cfg.model_spec(config, fit_model, L, depth)), settings)
    print(
        f"fit seed {seed}: held-out imbalance {result.before:.3g} -> {result.after:.3g}, accepted {result.accepted}",
        flush=True,
    )
    return result.bias.double()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", nargs="*", default=[], help="results/bias_fit_matrix files")
    parser.add_argument("--config", nargs="*", default=[], help="the config files of the reading (for --fit-seeds)")
    parser.add_argument("--variant", default=None, help="the bias variant whose reading is fitted again")
    parser.add_argument("--fit-seeds", type=int, nargs="*", default=[], help="further fit seeds")
    parser.add_argument("--L", type=int, default=16)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--out", default=None, help="Parquet: the pairwise table")
    parser.add_argument(
        "--out-matrices", default=None, help="Parquet: every B compared, long format (readable by --matrices)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    fits = {}
    for path in args.matrices:
        table = pd.read_parquet(path)
        for variant, part in table.groupby("variant"):
            fits[str(variant)] = matrix(part)
    for seed in args.fit_seeds:
        fits[f"{args.variant} (fit seed {seed})"] = refit(args.config, args.variant, seed, args.L, args.depth)
    rows = [{"a": a, "b": b, **distances(fits[a], fits[b])} for a, b in itertools.combinations(fits, 2)]
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    if args.out:
        table.to_parquet(args.out)
    if args.out_matrices:
        pd.concat([bias_long(B.float()).assign(variant=name) for name, B in fits.items()]).to_parquet(args.out_matrices)


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
