"""Wall-clock of whole Snakemake pipelines: the default config, the smoke config, a no-op rerun.

Each runs in a fresh temp dir with ``--cores all``, exactly as a user would.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_snakemake(workdir: Path, configfile: Path) -> float:
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir)]
    command += ["--configfile", str(configfile), "--cores", "all", "--quiet", "all"]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def measure(configs=("smoke", "config")) -> list[dict]:
    """Rows: pipeline, seconds (a full run of each config, then a no-op rerun of the last)."""
    rows = []
    for name in configs:
        with tempfile.TemporaryDirectory() as tmp:
            configfile = REPO / "config" / f"{name}.yaml"
            label = "default" if name == "config" else name
            rows.append({"pipeline": label, "seconds": run_snakemake(Path(tmp), configfile)})
            rows.append({"pipeline": f"{label} no-op rerun", "seconds": run_snakemake(Path(tmp), configfile)})
    return rows


if __name__ == "__main__":
    for row in measure(configs=("smoke",)):
        print(row)
