"""Benchmarks of vmap over seeds: a bias-fit iteration over S random initializations, and a
training step of a seed batch (train.seed_batch) of S runs.

    python benchmarks/bench_seeds.py                        # S = 1, 3, 8; d = 16 and 64; L = 24
    python benchmarks/bench_seeds.py --seeds 3 16 --d-model 64 --device cuda

Training: ``looped`` trains S runs one after another (lostmid.training.train.train_steps, the fused
attention kernel), ``vmapped`` the same S runs as one seed batch (lostmid.training.seed_batch); both per
step and run, batch 64.

The bias fit (lostmid.analysis.bias_fit) descends on the mean influence imbalance of S models that differ
only in their seed, through their input adjoints (second order). ``looped``: one forward,
backward-with-graph per model, then one backward to the bias. ``vmapped``: the S models'
weights stacked and one vmapped pass (lostmid.core.adjoint.seed_input_energies), then the same
backward. Prints median milliseconds of each and the speed-up looped / vmapped (one thread on
the CPU).
"""

from __future__ import annotations

import argparse

import torch

from lostmid import pin_numerics
from lostmid.core import adjoint, task
from lostmid.core.model import ModelConfig, model_at_init
from lostmid.training.checkpoint import TrainingState
from lostmid.training.seed_batch import train_seed_batch
from lostmid.training.train import train_steps

import bench_remedies
from timing import median_seconds


def measure(
    seeds=(1, 3, 8), d_models=(16, 64), L: int = 24, batch: int = 32, repeats: int = 5, device="cpu"
) -> list[dict]:
    device = torch.device(device)
    law = task.flag_law(L, "uniform")
    rows = []
    for d_model in d_models:
        config = ModelConfig(
            seq_len=L,
            depth=2,
            d_model=d_model,
            heads=4,
            mlp_ratio=4,
            block="sequential",
            residual=True,
            epsilon=1.0,
            readout="last",
        )
        for n in seeds:
            models = [model_at_init(config, seed).to(device) for seed in range(n)]
            batches = [task.sample_batch(batch, L, law, torch.Generator().manual_seed(seed))[:2] for seed in range(n)]
            tokens = torch.stack([x for x, _ in batches]).to(device)
            targets = torch.stack([y for _, y in batches]).to(device)
            bias = torch.zeros(L, L, device=device, requires_grad=True)

            def looped():
                total = 0
                for model, x, y in zip(models, tokens, targets):
                    model.attn_bias = bias  # the bias fit's buffer swap: the gradient reaches `bias`
                    total = (
                        total
                        + adjoint.energy(adjoint.input_adjoint(model, x, y, create_graph=True, explicit=True))
                        .square()
                        .sum()
                    )
                total.backward()

            def vmapped():
                adjoint.seed_input_energies(models, tokens, targets, bias).square().sum().backward()

            looped_s = median_seconds(looped, repeats, device)
            vmapped_s = median_seconds(vmapped, repeats, device)
            rows.append(
                {
                    "seeds": n,
                    "d_model": d_model,
                    "L": L,
                    "batch": batch,
                    "looped_s": looped_s,
                    "vmapped_s": vmapped_s,
                    "speedup": looped_s / vmapped_s,
                }
            )
    return rows


def training_spec(d_model: int, L: int, seed_batch: int) -> dict:
    """bench_remedies' baseline run spec (the default config's model and optimizer) at width ``d_model``."""
    spec = bench_remedies.spec_for(argparse.Namespace(L=L, depth=2, d_model=d_model, batch=64), {"kind": "none"})
    spec["train"]["seed_batch"] = seed_batch
    return spec


def measure_training(
    seeds=(1, 3, 8), d_models=(16, 64), L: int = 24, steps: int = 10, repeats: int = 3, device="cpu"
) -> list[dict]:
    """Seconds per training step and run: S runs looped, and the same S as one vmapped seed batch."""
    rows = []
    for d_model in d_models:
        for n in seeds:

            def states(seed_batch):
                return [
                    TrainingState.initial({**training_spec(d_model, L, seed_batch), "seed": seed}, device)
                    for seed in range(n)
                ]

            alone, batch = states(1), states(n + 1)  # seed_batch > 1: the spec of a batched run

            def looped():
                for state in alone:
                    train_steps(state, steps, device, progress=False)

            def vmapped():
                train_seed_batch(batch, steps, device, progress=False)

            per_step = n * steps
            looped_s = median_seconds(looped, repeats, device) / per_step
            vmapped_s = median_seconds(vmapped, repeats, device) / per_step
            rows.append(
                {
                    "seeds": n,
                    "d_model": d_model,
                    "L": L,
                    "batch": 64,
                    "looped_s": looped_s,
                    "vmapped_s": vmapped_s,
                    "speedup": looped_s / vmapped_s,
                }
            )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 3, 8])
    parser.add_argument("--d-model", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--L", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(
        "| inits S | d_model | L | batch | looped ms | vmapped ms | looped / vmapped |\n|---|---|---|---|---|---|---|"
    )
    for r in measure(args.seeds, args.d_model, args.L, repeats=args.repeats, device=args.device):
        print(
            f"| {r['seeds']} | {r['d_model']} | {r['L']} | {r['batch']} | {1e3 * r['looped_s']:.1f} "
            f"| {1e3 * r['vmapped_s']:.1f} | {r['speedup']:.2f} |"
        )
    print(
        "\n| runs S | d_model | L | batch | looped ms/step/run | seed batch ms/step/run | looped / seed batch |"
        "\n|---|---|---|---|---|---|---|"
    )
    for r in measure_training(args.seeds, args.d_model, args.L, device=args.device):
        print(
            f"| {r['seeds']} | {r['d_model']} | {r['L']} | {r['batch']} | {1e3 * r['looped_s']:.2f} "
            f"| {1e3 * r['vmapped_s']:.2f} | {r['speedup']:.2f} |"
        )


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
