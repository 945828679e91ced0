"""Does the machine's load decide a remedy's time overhead? Wall-clock against process CPU time per step.

Usage (from the repository root; about a minute on a 2-core machine):

    python benchmarks/bench_overhead_load.py [--repeats 6] [--steps 20] [--burners 2]

One process, one torch thread: for each repeat (a fresh initialization seed), the baseline and
Algorithm 1 (balance, beta 0.1, uniform target, 16 sequences: the validation config's arm) train in
turn, ``--steps`` measured steps each after ``--warmup`` steps; the per-repeat ratio (remedy /
baseline) of the median time per step is taken by wall clock and by process CPU time
(``cpu_seconds_per_step``, the trainer's own column). The whole measurement runs twice: on the machine
as it is ("idle"), and with ``--burners`` busy-loop processes (``yes > /dev/null``) competing for the
cores ("loaded"). Per condition and clock: the geometric mean ratio with a Student t 95% interval over
repeats, and, per clock, the loaded-minus-idle difference of the log ratios with a Welch interval: the
clock the load cannot decide is the one whose difference interval contains 0.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_remedies import spec_for  # noqa: E402

BALANCE = {"kind": "balance", "beta": 0.1, "target": "uniform", "sequences": 16}


def median_step_times(args, remedy: dict, seed: int) -> tuple[float, float]:
    from lostmid.training.checkpoint import TrainingState
    from lostmid.training.train import train_steps

    spec = {**spec_for(args, remedy), "seed": seed}
    state = TrainingState.initial(spec, "cpu")
    train_steps(state, args.warmup, "cpu", progress=False)
    log = train_steps(state, args.steps, "cpu", progress=False)
    return float(log.seconds_per_step.median()), float(log.cpu_seconds_per_step.median())


def log_ratios(args) -> dict[str, np.ndarray]:
    """Per repeat, log(remedy / baseline) of the median step time, by wall clock and by CPU time."""
    found = {"wall": [], "cpu": []}
    for seed in range(args.repeats):
        base = median_step_times(args, {"kind": "none"}, seed)
        remedy = median_step_times(args, BALANCE, seed)
        found["wall"].append(math.log(remedy[0] / base[0]))
        found["cpu"].append(math.log(remedy[1] / base[1]))
    return {clock: np.array(values) for clock, values in found.items()}


def t_interval(values: np.ndarray) -> tuple[float, float, float]:
    half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return values.mean(), values.mean() - half, values.mean() + half


def welch_difference(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)) if va + vb > 0 else a.size + b.size - 2
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    return a.mean() - b.mean(), a.mean() - b.mean() - half, a.mean() - b.mean() + half


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--L", type=int, default=16)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=16)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--burners", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    measured = {"idle": log_ratios(args)}
    burners = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(args.burners)]
    try:
        measured["loaded"] = log_ratios(args)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(
        f"Algorithm 1 / baseline, time per step: L {args.L}, depth {args.depth}, d {args.d_model}, batch {args.batch}, "
    )
    print(f"{args.repeats} repeats x {args.steps} steps, 1 torch thread; loaded = {args.burners} busy loops\n")
    print("| condition | clock | ratio [95% t interval over repeats] |\n|---|---|---|")
    for condition, ratios in measured.items():
        for clock, values in ratios.items():
            mean, low, high = (math.exp(v) for v in t_interval(values))
            print(f"| {condition} | {clock} | {mean:.2f} [{low:.2f}, {high:.2f}] |")
    print("\n| clock | loaded / idle ratio of ratios [95% Welch] | the load decides it? |\n|---|---|---|")
    for clock in ("wall", "cpu"):
        mean, low, high = welch_difference(measured["loaded"][clock], measured["idle"][clock])
        print(
            f"| {clock} | {math.exp(mean):.3f} [{math.exp(low):.3f}, {math.exp(high):.3f}] | "
            f"{'no: the interval contains 1' if low <= 0 <= high else 'yes'} |"
        )


if __name__ == "__main__":
    main()
