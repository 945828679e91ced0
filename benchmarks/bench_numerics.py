"""The price of deterministic numerics: two runs of one config, one per numerics mode.

    snakemake --cores 2 --directory DET                                  # deterministic (the default)
    snakemake --cores 2 --directory FAST --config numerics=fast           # the libraries' own choice
    python benchmarks/bench_numerics.py DET/results FAST/results --into docs/performance.md

Reads each run's manifest (lostmid.manifest: mode, commit, machine, the invocation's wall-clock and
CPU seconds) and its job logs (lostmid.tables.run_cost: job CPU seconds, summed); writes one row
per run and the ratio. Both runs must come from one commit and one config on one machine.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lostmid import io, manifest
from lostmid.errors import ConfigError
from lostmid.tables.run_cost import job_costs

PAGE_MARKERS = ("<!-- bench_numerics: begin -->", "<!-- bench_numerics: end -->")


def row(results: Path) -> dict:
    run = manifest.read(results)
    jobs = job_costs(results)
    return {
        "mode": run["numerics"]["mode"],
        "kernels": run["numerics"].get("torch_cpu_capability", "?"),
        "jobs": len(jobs),
        "job_cpu_s": jobs.cpu_s.sum(),
        "wall_s": sum(item.get("wall_s") or 0 for item in run["invocations"]),
        "cpu_s": sum(item.get("cpu_s") or 0 for item in run["invocations"]),
        "run": run,
    }


def table(rows: list[dict]) -> str:
    runs = [r["run"] for r in rows]
    if len({(tuple(manifest.commits(r)), tuple(c["sha256"] for c in r["configs"])) for r in runs}) != 1:
        raise ConfigError("bench_numerics: the runs come from different commits or configs")
    base = next(r for r in rows if r["mode"] == "deterministic")
    first = runs[0]
    lines = [
        f"Commit `{', '.join(manifest.commits(first))}`, config "
        + ", ".join(f"`{c['path']}`" for c in first["configs"])
        + f"; {first['machine']['cpu']}, {first['machine']['cores']} cores. The two runs ran side by side.",
        "",
        "| numerics | torch kernels | jobs | job CPU s | run CPU s | wall-clock s | CPU / deterministic |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['kernels']} | {r['jobs']} | {r['job_cpu_s']:.0f} | {r['cpu_s']:.0f} "
            f"| {r['wall_s']:.0f} | {r['job_cpu_s'] / base['job_cpu_s']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="the runs' results folders (one deterministic)")
    parser.add_argument("--into", default=None, help=f"also write the table into this page, between {PAGE_MARKERS}")
    args = parser.parse_args(argv)
    text = table([row(path) for path in args.results])
    print(text, end="")
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, text)


if __name__ == "__main__":
    main()
