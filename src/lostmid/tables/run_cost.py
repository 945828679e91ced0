"""What a finished run cost, read from its own records: every job's log ends with the line
``job cpu X s (user ..., system ...), peak memory Y MB`` (the process's getrusage, written by
``lostmid.cli.main``) and Snakemake's benchmark record of the job (``results/benchmarks/...tsv``)
holds its wall-clock seconds ``s``. Torch-free."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

JOB_COST = re.compile(r"job cpu ([0-9.]+) s .*peak memory ([0-9.]+) MB")


def job_costs(results: Path) -> pd.DataFrame:
    """One row per job log of ``results/logs``: stage (the log's first folder), job CPU seconds and
    peak memory (MB) from the log's last cost line, wall-clock seconds from its benchmark record."""
    rows = []
    for log in sorted((Path(results) / "logs").rglob("*.log")):
        found = JOB_COST.findall(log.read_text(errors="replace"))
        relative = log.relative_to(Path(results) / "logs")
        record = (Path(results) / "benchmarks" / relative).with_suffix(".tsv")
        wall = float(pd.read_csv(record, sep="\t")["s"].iloc[-1]) if record.exists() else float("nan")
        cpu, memory = (float(found[-1][0]), float(found[-1][1])) if found else (float("nan"), float("nan"))
        rows.append({"stage": relative.parts[0], "job": str(relative), "cpu_s": cpu, "peak_mb": memory, "wall_s": wall})
    return pd.DataFrame(rows, columns=["stage", "job", "cpu_s", "peak_mb", "wall_s"])


def cost_by_stage(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per stage: jobs, their summed job CPU and wall-clock seconds, and the largest peak memory; then the total."""
    table = (
        jobs.groupby("stage", sort=True)
        .agg(jobs=("job", "size"), cpu_s=("cpu_s", "sum"), wall_s=("wall_s", "sum"), peak_mb=("peak_mb", "max"))
        .reset_index()
    )
    total = {
        "stage": "all",
        "jobs": len(jobs),
        "cpu_s": jobs.cpu_s.sum(),
        "wall_s": jobs.wall_s.sum(),
        "peak_mb": jobs.peak_mb.max(),
    }
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True)
