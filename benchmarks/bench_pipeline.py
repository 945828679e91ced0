"""Whole Snakemake pipelines: wall-clock, and what orchestration costs.

    python benchmarks/bench_pipeline.py                          # the smoke pipeline in a temp dir
    python benchmarks/bench_pipeline.py --config config          # the default pipeline (~15 min)
    python benchmarks/bench_pipeline.py --results RUN/results    # only the orchestration figures of a finished run

Each pipeline runs in a fresh temp dir with ``--cores all``, exactly as a user would, then once
more (the no-op rerun). For a finished run the orchestration figures are:

    jobs             the jobs that ran (one Snakemake benchmark record each)
    job CPU          their CPU seconds, summed (the last line of every job's log: ``job cpu ... s``,
                     the process's own getrusage; Snakemake's sampled ``cpu_time`` misses most of a
                     job of a few seconds)
    empty process    the CPU of a ``lostmid`` process that only starts: the interpreter, torch,
                     pandas and the command line (what every model job pays before its work)
    start-up share   empty process x jobs / job CPU: the part of the pipeline's CPU that is start-up
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lostmid.tables.run_cost import job_costs

REPO = Path(__file__).resolve().parents[1]
EMPTY_PROCESS = "import torch, pandas, lostmid.cli.main"


def run_snakemake(workdir: Path, configfile: Path) -> float:
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir)]
    command += ["--configfile", str(configfile), "--cores", "all", "--quiet", "all"]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def empty_process_cpu(repeats: int = 3) -> float:
    """CPU seconds (user + system) of a process that imports what a model job imports, then exits;
    the median of ``repeats``."""
    times = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", EMPTY_PROCESS], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return sorted(times)[len(times) // 2]


def orchestration(results: Path, empty: float) -> dict:
    """Jobs, their CPU and the start-up share of a finished run's ``results`` folder."""
    jobs = job_costs(results)
    cpu = float(jobs.cpu_s.sum())
    return {
        "jobs": len(jobs),
        "job_cpu_s": round(cpu, 1),
        "empty_process_cpu_s": round(empty, 2),
        "startup_share": round(empty * len(jobs) / cpu, 3),
    }


def measure(configs=("smoke", "config")) -> list[dict]:
    """Rows: pipeline, seconds and the orchestration figures (a full run of each config, then a no-op rerun)."""
    rows, empty = [], empty_process_cpu()
    for name in configs:
        with tempfile.TemporaryDirectory() as tmp:
            configfile = REPO / "config" / f"{name}.yaml"
            label = "default" if name == "config" else name
            seconds = run_snakemake(Path(tmp), configfile)
            rows.append(
                {"pipeline": label, "seconds": round(seconds, 1), **orchestration(Path(tmp) / "results", empty)}
            )
            rows.append({"pipeline": f"{label} no-op rerun", "seconds": round(run_snakemake(Path(tmp), configfile), 1)})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="smoke", help="config/<name>.yaml to run (smoke or config)")
    parser.add_argument(
        "--results", type=Path, default=None, help="only the orchestration figures of this finished results folder"
    )
    args = parser.parse_args(argv)
    if args.results:
        print(orchestration(args.results, empty_process_cpu()))
    else:
        for row in measure(configs=(args.config,)):
            print(row)


if __name__ == "__main__":
    main()
