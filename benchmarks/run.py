"""All performance benchmarks in one process, each ratio next to its target.

    python benchmarks/run.py                       # stage benchmarks + smoke pipeline (~10 min on 2 cores)
    python benchmarks/run.py --default-pipeline    # also the whole default pipeline (~15+ min more)

Writes results/performance/benchmarks.parquet (benchmark, setting, value, target, meets) and
results/performance/summary.md, and prints the summary. Single thread per measurement, as the
workflow's jobs run; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_channels  # noqa: E402
import bench_influence  # noqa: E402
import bench_pipeline  # noqa: E402
import bench_seeds  # noqa: E402

from lostmid import (
    io,  # noqa: E402
    pin_numerics,  # noqa: E402
)

import bench_remedies  # noqa: E402
import bench_training  # noqa: E402

OUT = bench_pipeline.REPO / "results" / "performance"


def row(benchmark, setting, value, target=None, meets=None, unit=""):
    return {
        "benchmark": benchmark,
        "setting": setting,
        "value": float(value),
        "unit": unit,
        "target": target or "",
        "meets": meets,
    }


def training_rows(lengths, steps):
    rows = []
    measured = bench_training.measure(lengths=lengths, steps=steps)
    for m in measured:
        setting = f"L={m['L']}, d=32, depth 2, batch 64"
        rows.append(row("training sequences/s", setting, m["sequences_per_second"], unit="seq/s"))
        rows.append(row("training MFU", setting, m["mfu"], unit="fraction of measured fp32 matmul peak"))
        ratio = m["ratio_to_reference"]
        rows.append(row("training step / reference GPT step", setting, ratio, "<= 1.10", ratio <= 1.10, "x"))
    slope = bench_training.loglog_slope([m["L"] for m in measured], [m["seconds_per_step"] for m in measured])
    rows.append(row("training step cost vs L (log-log slope)", f"L in {list(lengths)}", slope, unit="slope"))
    return rows


def influence_rows(lengths):
    rows, times = [], []
    for L in lengths:
        # An evaluation batch the size of a training batch, so the ratio compares like with like.
        args = argparse.Namespace(
            d_model=32,
            heads=4,
            mlp_ratio=4,
            batch_size=64,
            batch_per_position=max(1, round(64 / (L - 1))),
            flow_batch_per_position=1,
            repeats=10,
        )
        m = bench_influence.bench(L, 2, args)
        setting = f"L={L}, eval batch {m['eval batch']}, train batch 64"
        rows.append(
            row(
                "influence per eval batch / training step",
                setting,
                m["influence / train step"],
                "<= 1.5",
                m["influence / train step"] <= 1.5,
                "x",
            )
        )
        rows.append(
            row("per-position backward loop / influence", setting, m["loop / influence"], f"close to L={L}", None, "x")
        )
        times.append(m["influence ms"])
    rows.append(
        row(
            "influence cost vs L (log-log slope)",
            f"L in {list(lengths)}",
            bench_training.loglog_slope(lengths, times),
            unit="slope",
        )
    )
    return rows


def channel_rows(lengths):
    rows = []
    for L in lengths:
        args = bench_channels.parse_args([f"--L={L}", "--repeats=5"])
        measured, _ = bench_channels.measure(args)
        train_s = measured[0][1]
        split_s, norms_s, stage_s = (seconds for _, seconds in measured[1:])
        setting = f"L={L}, batch 64"
        rows.append(
            row("channel split / training step", setting, split_s / train_s, "<= 3", split_s / train_s <= 3, "x")
        )
        rows.append(
            row("channel stage incl. 10 power iterations / training step", setting, stage_s / train_s, unit="x")
        )
    return rows


def remedy_rows(steps):
    base_args = argparse.Namespace(L=32, depth=2, d_model=32, batch=64, steps=steps, warmup=3, threads=1, device="cpu")
    baseline = bench_remedies.measure_one(base_args, {"kind": "none"})["seconds_per_step"]
    rows = []
    balance = bench_remedies.measure_one(
        base_args, {"kind": "balance", "beta": 0.1, "target": "uniform", "sequences": 16}
    )["seconds_per_step"]
    rows.append(
        row(
            "Algorithm 1 step / baseline step",
            "L=32, beta 0.1, penalty on 16 sequences",
            balance / baseline,
            "<= 3",
            balance / baseline <= 3,
            "x",
        )
    )
    for probes, monitored in [(1, 4), (2, 4), (2, 8), (4, 8), (4, 16)]:
        remedy = {"kind": "observability", "lam": 0.1, "probes": probes, "monitored": monitored}
        t = bench_remedies.measure_one(base_args, remedy)["seconds_per_step"]
        rows.append(
            row(
                "Algorithm 3 step / baseline step",
                f"L=32, R={probes}, monitored S={monitored}, R·S={probes * monitored}",
                t / baseline,
                "linear in R·S",
                None,
                "x",
            )
        )
    return rows


def seed_rows():
    rows = []
    for m in bench_seeds.measure(seeds=(1, 3, 8), d_models=(16, 64)):
        setting = f"S={m['seeds']} inits, d={m['d_model']}, L={m['L']}, batch {m['batch']} each"
        rows.append(row("bias-fit iteration: S inits looped / one vmapped pass", setting, m["speedup"], unit="x"))
    for m in bench_seeds.measure_training(seeds=(1, 3, 8), d_models=(16, 64)):
        setting = f"S={m['seeds']} runs, d={m['d_model']}, L={m['L']}, batch {m['batch']} each"
        rows.append(row("training step: S runs looped / one vmapped seed batch", setting, m["speedup"], unit="x"))
    return rows


def pipeline_rows(default: bool):
    rows = []
    for measured in bench_pipeline.measure(configs=("smoke", "config") if default else ("smoke",)):
        name = measured["pipeline"]
        target = {"smoke": 60, "default": 900}.get(name, 5)
        rows.append(
            row(
                "pipeline wall-clock, --cores all",
                name,
                measured["seconds"],
                f"<= {target} s",
                measured["seconds"] <= target,
                "s",
            )
        )
    return rows


def summary(table: pd.DataFrame) -> str:
    lines = [
        f"Measured on {torch.__version__}, {torch.get_num_threads()} thread(s), CPU, with `python benchmarks/run.py`.",
        "",
        "| benchmark | setting | value | target | meets |",
        "|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        meets = "" if r.meets is None or pd.isna(r.meets) else ("yes" if r.meets else "**no**")
        lines.append(f"| {r.benchmark} | {r.setting} | {r.value:.3g} {r.unit} | {r.target} | {meets} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--default-pipeline", action="store_true", help="also time the whole default pipeline")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024], help="L of the training benchmark")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per setting")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = training_rows(args.lengths, args.steps)
    rows += influence_rows([16, 32, 64])
    rows += channel_rows([16, 32])
    rows += remedy_rows(max(10, args.steps))
    rows += seed_rows()
    rows += pipeline_rows(args.default_pipeline)
    table = pd.DataFrame(rows)
    table["meets"] = table["meets"].astype("boolean")
    io.write_parquet(table, OUT / "benchmarks.parquet")
    text = summary(table)
    io.write_text(text, OUT / "summary.md")
    print(text)


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
