"""Benchmark of the positional bias (docs/positional_bias.md): what each arm adds per token to SmolLM2-135M-Instruct's
forward pass (the packaged GGUF, needs the ``pretrained`` extra) at n = 1024 and 4096 (run on demand, not a test).

    python benchmarks/bench_positional_bias.py                                  # the table
    python benchmarks/bench_positional_bias.py --into docs/performance.md       # and into the page

Arms, on one window of ``pydoc_data.topics`` with the BOS token first, forward pass only, no key-value cache:
- none: the model as loaded;
- fitted form: a ``PositionalBias`` of the form ``fit_flat`` fits (distance and key, shared by the layers),
  its parameters drawn at random (the cost does not depend on their values; no fit is run here);
- calibration: ``calibrate`` on the window shuffled (``shuffled``), strength 1, one bias per layer, at the
  smallest n and carried to the others as the fix carries it; its one-time cost (the attention maps of the
  content-free window and the least squares) is reported apart.
Median CPU seconds (time.process_time) of --repeats passes after a warm-up, single thread, as the workflow's
jobs run; per token: the pass's seconds / n.

    python benchmarks/bench_positional_bias.py --fit --corpus kjv --out runs/fix_plan/cost.yaml   # issue 55's costs

With ``--fit``, what issue 55's fits and arms cost at n (one context, once each, single thread):
- profile: the task-free influence profile of one context (``profile_flatness``: one forward, one backward);
- fit step: one step of ``fit_flat`` on one context (the double backward; ``fit_flat`` with one step and one
  restart, less the profile it takes first), and the process's peak RSS during it (VmHWM reset before);
- calibration: ``calibrate`` on one shuffled context (its attention maps and least squares);
- window, none / biased: one retrieval window as the fix's evaluation runs it (``retrieval_examples``, tasks
  single and number at the 9 fractions, BOS, prefix reuse, no share; the corpus tokenized once before), without
  and with the fitted form.
``--out`` writes these seconds as YAML (the fix plan's cost record).
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import yaml  # noqa: E402

from lostmid import io  # noqa: E402
from lostmid.architectures import models, retrieval, text  # noqa: E402
from lostmid.architectures import positional_bias as pb  # noqa: E402

from timing import cpu, status_kb  # noqa: E402

PAGE_MARKERS = ("<!-- bench_positional_bias: begin -->", "<!-- bench_positional_bias: end -->")


def forward_seconds(arch, context, repeats: int) -> float:
    """Median CPU seconds of one forward pass of ``context`` (1, n) after a warm-up."""
    with torch.no_grad():
        arch.model(context, use_cache=False)
        return statistics.median(cpu(lambda: arch.model(context, use_cache=False))[0] for _ in range(repeats))


def bench(args) -> list[dict]:
    torch.set_num_threads(1)
    arch, tokenizer = models.load_pretrained(models.packaged_file("smollm2"))
    stream = text.corpus_ids(tokenizer, args.corpus)
    lead = retrieval.leading_ids(tokenizer, True)

    def context(n: int) -> torch.Tensor:
        window = text.windows(stream, n, 1, args.seed + n)[0]
        return torch.cat([torch.tensor(lead), window])[:n][None]

    layers = len(pb.attention_modules(arch.model))
    # the calibration at the smallest n, carried to every n as the fix carries it (its maps at 4096 do not fit)
    once, calibration = cpu(lambda: pb.calibrate(arch, pb.shuffled(context(min(args.n)), args.seed), 1.0))
    rows = []
    for n in args.n:
        fitted = pb.PositionalBias(layers, n, buckets=8, per_layer=False)
        with torch.no_grad():
            for p in fitted.parameters():
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(args.seed)))
        x = context(n)
        none = dict(n=n, arm="none", form="-", seconds=forward_seconds(arch, x, args.repeats), once=0.0)
        rows.append(none)
        for arm, form, bias, setup in (
            ("fitted form", "distance + key, shared", fitted, 0.0),
            ("calibration", "distance + key, per layer", calibration, once),
        ):
            with pb.applied(arch.model, bias):
                rows.append(dict(n=n, arm=arm, form=form, seconds=forward_seconds(arch, x, args.repeats), once=setup))
        for row in rows[-3:]:
            row["per_token_ms"] = 1000 * row["seconds"] / n
            row["added"] = row["seconds"] / none["seconds"] - 1
            print(row, flush=True)
    return rows


def peak_gb(fn):
    """(the process's peak RSS in GB during ``fn()``, its value): VmHWM reset before the call."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    value = fn()
    return status_kb("VmHWM") / 2**20, value


def fit_costs(args) -> dict:
    """CPU seconds of the fix's pieces at n = the first ``args.n`` on one context of ``args.corpus`` (``--fit``)."""
    n = args.n[0]
    torch.set_num_threads(1)
    arch, tokenizer = models.load_pretrained(models.packaged_file("smollm2"))
    stream = text.corpus_ids(tokenizer, args.corpus)
    window = text.windows(stream, n, 1, args.seed + n)[0]
    context = torch.cat([torch.tensor(retrieval.leading_ids(tokenizer, True)), window])[:n][None]
    profile, _ = cpu(lambda: pb.profile_flatness(arch, context))
    fit, (peak, _) = cpu(lambda: peak_gb(lambda: pb.fit_flat(arch, context, steps=1, restarts=1)))
    calibration, bias = cpu(lambda: pb.calibrate(arch, pb.shuffled(context, args.seed), 1.0))

    def window_seconds():
        call = dict(stream=stream, n=n, windows=1, gradient_windows=0, tasks=("single", "number"))
        return cpu(lambda: retrieval.retrieval_examples(arch, tokenizer, **call))[0]

    none = window_seconds()
    with pb.applied(arch.model, bias):
        biased = window_seconds()
    found = {
        "n": n,
        "corpus": args.corpus,
        "threads": 1,
        "profile_cpu_s": round(profile, 1),
        "fit_step_cpu_s": round(fit - profile, 1),
        "fit_step_peak_gb": round(peak, 2),
        "calibration_cpu_s": round(calibration, 1),
        "window_none_cpu_s": round(none, 1),
        "window_biased_cpu_s": round(biased, 1),
    }
    print(found, flush=True)
    return found


def markdown(rows: list[dict]) -> str:
    lines = [
        "| n | arm | form | CPU s per forward pass | CPU ms per token | added | one-time CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        added = "-" if r["arm"] == "none" else f"{100 * r['added']:+.0f}%"
        lines.append(
            f"| {r['n']} | {r['arm']} | {r['form']} | {r['seconds']:.2f} | {r['per_token_ms']:.2f} | {added} "
            f"| {r['once']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1024, 4096], help="--fit: the first only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--corpus", default="pydoc_data.topics")
    parser.add_argument("--seed", type=int, default=7000)
    parser.add_argument("--into", default=None, help="also write the table into this page, between its markers")
    parser.add_argument("--fit", action="store_true", help="the costs of issue 55's fit, calibration and windows")
    parser.add_argument("--out", default=None, help="with --fit: write them here as YAML")
    args = parser.parse_args()
    if args.fit:
        found = fit_costs(args)
        if args.out:
            io.write_text(yaml.safe_dump(found, sort_keys=False), args.out)
        return
    table = markdown(bench(args))
    print(table)
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, table + "\n")


if __name__ == "__main__":
    from lostmid import pin_numerics

    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
