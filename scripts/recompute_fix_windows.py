"""Recompute recorded held-out windows of the fix run (runs/fix) with this checkout's code and say, window by window,
whether each gives the record's rows bit for bit: the check that a change to the biased forward pass changed no
answer, and that the record repeats here.

    python scripts/recompute_fix_windows.py --n 1024 blog:0 fitm:0

Each ``ARM:K`` is held-out window k of that arm at n, under its fit (k mod F) with its recorded bias file and
strength, computed as the fix's job computes it (``fix_jobs.held_out_window`` under ``positional_bias.applied``,
one thread, the jobs' numerics) and compared with ``runs/fix/windows/<arm>_n<n>_w<k>.parquet`` (every column but
the stamp). Prints one line per window with its CPU seconds; exits 1 if any differs (and shows where).
"""

from __future__ import annotations

import argparse
import sys
import time

from lostmid import pin_numerics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--plan", default="study/fix_plan.yaml")
    parser.add_argument("windows", nargs="+", metavar="ARM:K")
    args = parser.parse_args()
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    import pandas as pd
    import torch

    from lostmid.architectures import fix_jobs, fix_plan
    from lostmid.architectures import positional_bias as pb

    torch.set_num_threads(1)
    plan = fix_plan.read_fix_plan(args.plan)
    settings = fix_jobs.retrieval_settings(plan)
    arch, tokenizer, stream = fix_jobs.loaded(settings, "cpu")
    differ = 0
    for spec in args.windows:
        arm, k = spec.split(":")
        k = int(k)
        bias_file, strength = fix_jobs.arm_bias(plan, arm, fix_plan.fit_of(plan, k))
        start = time.process_time()
        with pb.applied(arch.model, fix_jobs.load_bias(bias_file, strength)):
            new = fix_jobs.held_out_window(arch, tokenizer, stream, settings, args.n, k, arm)
        seconds = time.process_time() - start
        old = pd.read_parquet(fix_plan.window_path(plan, arm, args.n, k)).drop(columns=["draw", "config_hash"])
        old, new = old.reset_index(drop=True), new[old.columns].reset_index(drop=True)
        same = old.equals(new)
        differ += not same
        print(f"{arm} n={args.n} window {k}: {'the record, bit for bit' if same else 'DIFFERS'} ({seconds:.1f} CPU s)")
        if not same:
            print(old.compare(new).head(), flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
