"""Cost against sequence length at the blog's setting (docs/performance.md, "Sequence length"): one thread.

    python benchmarks/bench_length.py                                   # L 8-256, print the table
    python benchmarks/bench_length.py --lengths 8 16 32 64 128 256 512 --into docs/performance.md

Per L (d = 16, 4 heads, depth 4, the default model block): a training step (batch 64, forward, backward,
update; ``bench_training.seconds_per_step``), the length study's influence measurement of one model at
init (the loss-gradient energies and the output-Jacobian norms on 2 sequences per flag position:
``lostmid.analysis.length.init_profiles``' work per seed) and one iteration of the literal bias fit (one
initialization, 16 sequences: the output-Jacobian profile and its double backward), each with its peak
resident memory above the process's before the call; the log-log slope of each between consecutive
lengths; and where the attention's L^2 term overtakes the rest: by FLOP count (``model_flops_per_step``'s
attention term 4 L^2 d against the linear layers' 24 L d^2 per block: L = 6 d), and measured, from the
least-squares fit t = a + b L + c L^2 of the training step (L = b / c).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lostmid import (
    io,  # noqa: E402
    pin_numerics,  # noqa: E402
)
from lostmid.analysis import influence  # noqa: E402
from lostmid.analysis.bias_fit import Problems, bias_matrix  # noqa: E402
from lostmid.analysis.length import fit_memory_mb, model_config  # noqa: E402
from lostmid.analysis.settings import FitSettings  # noqa: E402
from lostmid.core import task  # noqa: E402
from lostmid.core.model import FlagTransformer  # noqa: E402

from bench_training import seconds_per_step  # noqa: E402
from timing import median_seconds, peak_call  # noqa: E402

PAGE_MARKERS = ("<!-- bench_length: begin -->", "<!-- bench_length: end -->")
MODEL = {"d_model": 16, "heads": 4, "mlp_ratio": 4, "block": "sequential", "epsilon": 1.0, "readout": "last"}
FIT = FitSettings("output_jacobian", "all", "distance", 1, 2, 16, 1, 0.1, 0.01, 10, 0.95, 100000)


def calls(L: int, depth: int) -> dict:
    """The three measured calls at ``L``, each ready to run."""
    config = model_config(MODEL, L, depth, True)
    torch.manual_seed(0)
    model = FlagTransformer(config)
    tokens, targets, _ = task.stratified_eval_set(L, 2, 0)

    def measurement():
        influence.energies(model, tokens, targets, all_steps=False)
        influence.output_jacobian_norms(model, tokens)

    problems = Problems.draw(model_config(MODEL, L, depth, False), FIT, 0, 1)
    theta = torch.zeros(L, requires_grad=True)

    def fit_iteration():
        problems.profiles(bias_matrix(theta, L, "distance")).sum().backward()

    return {
        "step": lambda: seconds_per_step(model, 64, "cpu", 1, F.cross_entropy),
        "influence": measurement,
        "fit": fit_iteration,
    }


def peak_mb(kind: str, L: int, depth: int) -> float:
    """Peak resident memory of one ``kind`` call above the process's before it, in a fresh process (a
    process that ran shorter lengths first would reuse their freed memory)."""
    out = subprocess.run(
        [sys.executable, __file__, "--memory-of", kind, "--lengths", str(L), "--depth", str(depth)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out.split()[-1])


def measure(L: int, depth: int, repeats: int) -> dict:
    timed, row = calls(L, depth), {"L": L}
    for kind, call in timed.items():
        row[kind] = median_seconds(call, repeats)
        row[f"{kind}_mb"] = peak_mb(kind, L, depth)
    row["fit_mb_estimate"] = fit_memory_mb(L, model_config(MODEL, L, depth, False), FIT.batch)
    return row


def slope(rows: list[dict], i: int, key: str) -> str:
    if i == 0:
        return ""
    a, b = rows[i - 1], rows[i]
    return f"{math.log(b[key] / a[key]) / math.log(b['L'] / a['L']):.2f}"


def crossover(rows: list[dict]) -> float:
    """L = b / c of the least-squares fit t = a + b L + c L^2 of the training step (NaN when c <= 0)."""
    L = np.array([r["L"] for r in rows], dtype=float)
    _, b, c = np.linalg.lstsq(np.c_[np.ones_like(L), L, L**2], np.array([r["step"] for r in rows]), rcond=None)[0]
    return b / c if c > 0 else math.nan


def markdown(rows: list[dict], depth: int) -> str:
    lines = [
        f"`python benchmarks/bench_length.py --lengths {' '.join(str(r['L']) for r in rows)}` (d = 16, 4 heads, "
        f"depth {depth}, one thread; memory: peak resident above the process's before the call)",
        "",
        "| L | train step (ms) | slope | peak MB | influence at init, one model (ms) | slope | peak MB "
        "| fit iteration, one init (ms) | slope | peak MB (estimate) |",
        "|" + "---|" * 10,
    ]
    for i, r in enumerate(rows):
        lines.append(
            f"| {r['L']} | {1e3 * r['step']:.1f} | {slope(rows, i, 'step')} | {r['step_mb']:.0f} "
            f"| {1e3 * r['influence']:.1f} | {slope(rows, i, 'influence')} | {r['influence_mb']:.0f} "
            f"| {1e3 * r['fit']:.1f} | {slope(rows, i, 'fit')} | {r['fit_mb']:.0f} ({r['fit_mb_estimate']:.0f}) |"
        )
    whole = {key: slope([rows[0], rows[-1]], 1, key) for key in ("step", "influence", "fit")}
    lines += [
        "",
        f"Log-log slope from L {rows[0]['L']} to {rows[-1]['L']}: training step {whole['step']}, influence "
        f"{whole['influence']}, fit iteration {whole['fit']}. The attention's L^2 term overtakes the linear layers "
        f"at L = 6 d = {6 * MODEL['d_model']} by FLOP count, and at L = {crossover(rows):.0f} in the measured "
        f"training step (least-squares t = a + b L + c L^2, L = b / c).",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--into", default=None, help=f"also write the table into this page, between its lines {PAGE_MARKERS}"
    )
    parser.add_argument("--memory-of", default=None, help=argparse.SUPPRESS)  # one call's peak (peak_mb)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.memory_of:
        print(peak_call(calls(args.lengths[0], args.depth)[args.memory_of])[2] * 1024)
        return
    rows = []
    for L in args.lengths:
        rows.append(measure(L, args.depth, args.repeats))
        print(f"L {L}: {rows[-1]}", flush=True)
    table = io.wrap_prose(markdown(rows, args.depth))
    print(table)
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, table + "\n")


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
