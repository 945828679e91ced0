"""Per-step wall-clock and peak memory of each remedy relative to the baseline.

Usage (from the repository root):

    python benchmarks/bench_remedies.py                         # L=32, depth 2, d=32, batch 64
    python benchmarks/bench_remedies.py --L 16 --steps 30 --remedy balance '{"kind":"balance","beta":1.0}'

Every remedy runs in its own fresh subprocess (one thread), so the CPU peak memory
(resource.getrusage ru_maxrss: the process's high-water mark, interpreter and torch
included) is that remedy's alone; on CUDA the peak is torch.cuda.max_memory_allocated.
The timing is the median of the trainer's own seconds_per_step over the measured steps,
after warm-up steps; the bias fit's wall-clock is measured too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

DEFAULT_REMEDIES = {  # the default config's remedy variants (config/config.yaml), plus two costlier settings
    "debiased": {"kind": "bias"},
    "balance": {"kind": "balance", "beta": 0.1, "target": "uniform", "sequences": 16},
    "balance_full": {"kind": "balance", "beta": 0.1, "target": "uniform", "sequences": 0},
    "reweight": {"kind": "reweight", "eta": 1.0, "every": 25, "probe_per_position": 8},
    "observability": {"kind": "observability", "lam": 0.1, "probes": 2, "monitored": 8},
    "observability_s32": {"kind": "observability", "lam": 0.1, "probes": 2, "monitored": 32},
}


def spec_for(args, remedy: dict) -> dict:
    return {
        "variant": "bench",
        "L": args.L,
        "depth": args.depth,
        "seed": 0,
        "model": {
            "seq_len": args.L,
            "depth": args.depth,
            "d_model": args.d_model,
            "heads": 4,
            "mlp_ratio": 4,
            "block": "sequential",
            "residual": True,
            "epsilon": 1.0,
            "readout": "last",
        },
        "train": {
            "batch_size": args.batch,
            "lr": 0.003,
            "beta1": 0.9,
            "beta2": 0.99,
            "weight_decay": 0.0,
            "grad_clip": 1.0,
            "flag_law": "uniform",
        },
        "remedy": remedy,
    }


def measure_one(args, remedy: dict) -> dict:
    """Run in the child process: warm up, then time ``args.steps`` training steps."""
    import resource

    import torch

    from lostmid.core import devices
    from lostmid.training.checkpoint import TrainingState
    from lostmid.training.train import train_steps

    torch.set_num_threads(args.threads)
    device = devices.resolve(args.device)
    state = TrainingState.initial(spec_for(args, remedy), device)
    train_steps(state, args.warmup, device, progress=False)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    log = train_steps(state, args.steps, device, progress=False)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds_per_step": float(log.seconds_per_step.median()), "peak_mem_mb": peak, "device": device.type}


def measure_bias_fit(args) -> dict:
    import torch

    from lostmid.analysis.bias_fit import fit_bias
    from lostmid.analysis.settings import FitSettings
    from lostmid.config import settings_from_section
    from lostmid.core.model import ModelConfig

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    fit = fit_bias(ModelConfig(**spec_for(args, {})["model"]), settings_from_section(FitSettings, {}, "bias_fit"))
    return {
        "seconds": time.perf_counter() - start,
        "iterations": len(fit.iterations),
        "E_inf_before": fit.before,
        "E_inf_after": fit.after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--L", type=int, default=32)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--remedy", nargs=2, action="append", metavar=("NAME", "JSON"), help="measure only these remedies"
    )
    parser.add_argument("--no-bias-fit", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "bias_fit":
        print(json.dumps(measure_bias_fit(args)))
        return
    if args.child:
        print(json.dumps(measure_one(args, json.loads(args.child))))
        return

    remedies = {name: json.loads(text) for name, text in args.remedy} if args.remedy else DEFAULT_REMEDIES
    forwarded = [
        f"--L={args.L}",
        f"--depth={args.depth}",
        f"--d-model={args.d_model}",
        f"--batch={args.batch}",
        f"--steps={args.steps}",
        f"--warmup={args.warmup}",
        f"--threads={args.threads}",
        f"--device={args.device}",
    ]
    results = {}
    for name, remedy in {"baseline": {"kind": "none"}, **remedies}.items():
        out = subprocess.run(
            [sys.executable, __file__, *forwarded, "--child", json.dumps(remedy)],
            capture_output=True,
            text=True,
            check=True,
        )
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    base = results["baseline"]
    print(
        f"L={args.L} depth={args.depth} d={args.d_model} batch={args.batch} threads={args.threads} "
        f"device={base['device']}"
    )
    print(f"{'remedy':<16}{'ms/step':>10}{'ratio':>8}{'peak MB':>10}{'ratio':>8}")
    for name, r in results.items():
        print(
            f"{name:<16}{1e3 * r['seconds_per_step']:>10.1f}{r['seconds_per_step'] / base['seconds_per_step']:>8.2f}"
            f"{r['peak_mem_mb']:>10.0f}{r['peak_mem_mb'] / base['peak_mem_mb']:>8.2f}"
        )
    if not args.no_bias_fit:
        out = subprocess.run(
            [sys.executable, __file__, *forwarded, "--child", "bias_fit"], capture_output=True, text=True, check=True
        )
        fit = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"bias fit: {fit['seconds']:.1f} s, {fit['iterations']} iterations, "
            f"E_inf {fit['E_inf_before']:.4g} -> {fit['E_inf_after']:.4g}"
        )


if __name__ == "__main__":
    main()
