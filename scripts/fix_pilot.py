"""The fix plan's pilot (issue 55): the blog's fit on ONE reserved window, its convergence trace, and how much it
flattens the task-free profile of other reserved windows, so that the amended plan (the fit as a random draw:
several fits, one window each) can state its steps, restarts and cost from a measurement, not a guess.

    python scripts/fix_pilot.py --fit 968 --check 960 961 962 963 --out runs/fix_plan/pilot

Only reserved windows of the KJV draw are read (study/smollm2_plan.yaml reserves k >= 900 at n = 1024 for the
fixes; the amended plan's fits take k = 900, 901, ...; this pilot takes the last ones), never a held-out window.
The recipe (form, knots, learning rate, restarts, steps, seed) is study/fix_plan.yaml's blog fit unless changed
by an option. Each fit window writes fit_w<k>.json (its trace, loss, CPU seconds) and flatness_w<k>.csv (the
check windows' flatness without and with the fitted B); a window already written is kept (the script resumes).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lostmid import io
from lostmid.architectures import fix_jobs
from lostmid.architectures import positional_bias as pb
from lostmid.architectures.fix_plan import read_fix_plan


def pilot_fit(plan: dict, loaded, settings, k: int, check: list[int], steps: int, restarts: int, out: Path):
    arch, tokenizer, stream = loaded
    fit = plan["arms"]["blog"]["fit"]
    n = fit["n"]
    context = fix_jobs.reserved_contexts(stream, tokenizer, settings, n, [k])
    start = time.process_time()
    found = fix_jobs.fit_by_recipe(arch, context, fit, fit["seed"], steps=steps, restarts=restarts)
    fit_cpu = time.process_time() - start
    rows = []
    for c in check:
        other = fix_jobs.reserved_contexts(stream, tokenizer, settings, n, [c])
        none = float(pb.profile_flatness(arch, other))
        blog = float(pb.profile_flatness(arch, other, found.bias))
        rows.append({"fit_window": k, "check_window": c, "none": none, "blog": blog})
    table = pd.DataFrame(rows).assign(log_ratio=lambda t: np.log(t.blog / t.none))
    io.write_text(table.to_csv(index=False), out / f"flatness_w{k}.csv")
    record = {
        "fit_window": k,
        "corpus_window": fix_jobs.corpus_windows(stream, settings, n, [k])[0],
        "n": n,
        "steps": steps,
        "restarts": restarts,
        "loss": found.loss,
        "none": found.none,
        "fit_cpu_s": round(fit_cpu, 1),
        "threads": torch.get_num_threads(),
        "trace": [list(t) for t in found.trace],
    }
    io.write_text(json.dumps(record, indent=1) + "\n", out / f"fit_w{k}.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="study/fix_plan.yaml")
    parser.add_argument("--fit", type=int, nargs="+", required=True, help="reserved windows, one fit each")
    parser.add_argument("--check", type=int, nargs="+", required=True, help="reserved windows to read flatness on")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--restarts", type=int, default=None)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    plan = read_fix_plan(args.plan)
    fit = plan["arms"]["blog"]["fit"]
    for k in args.fit + args.check:
        if k < 900:
            raise SystemExit(f"window {k} is not reserved (the pilot reads only k >= 900)")
    torch.set_num_threads(1)
    settings = fix_jobs.retrieval_settings(plan)
    loaded = fix_jobs.loaded(settings, "cpu")
    for k in args.fit:
        if (args.out / f"fit_w{k}.json").exists():
            continue
        steps = args.steps or fit["steps"]
        restarts = args.restarts or fit["restarts"]
        pilot_fit(plan, loaded, settings, k, args.check, steps, restarts, args.out)
        print(f"fit on window {k}: written to {args.out}", flush=True)


if __name__ == "__main__":
    main()
