"""Benchmark of the positional bias (docs/positional_bias.md): what each arm adds per token to SmolLM2-135M-Instruct's
forward pass (the packaged GGUF, needs the ``pretrained`` extra) at n = 1024 (run on demand, not a test).

    python benchmarks/bench_positional_bias.py                                  # the table
    python benchmarks/bench_positional_bias.py --into docs/performance.md       # and into the page

Arms, on one window of ``pydoc_data.topics`` with the BOS token first, forward pass only, no key-value cache:
- none: the model as loaded;
- fitted form: a ``PositionalBias`` of the form ``fit_flat`` fits (distance and key, shared by the layers),
  its parameters drawn at random (the cost does not depend on their values; no fit is run here);
- calibration: ``calibrate`` on the window shuffled (``shuffled``), strength 1, one bias per layer; its
  one-time cost (the attention maps of the content-free window and the least squares) is reported apart.
Median CPU seconds (time.process_time) of --repeats passes after a warm-up, single thread, as the workflow's
jobs run; per token: the pass's seconds / n.
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from lostmid import io  # noqa: E402
from lostmid.architectures import models, retrieval, text  # noqa: E402
from lostmid.architectures import positional_bias as pb  # noqa: E402

from timing import cpu  # noqa: E402

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
    window = text.windows(stream, args.n, 1, args.seed + args.n)[0]
    context = torch.cat([torch.tensor(lead), window])[: args.n][None]
    layers = len(pb.attention_modules(arch.model))
    fitted = pb.PositionalBias(layers, args.n, buckets=8, per_layer=False)
    with torch.no_grad():
        for p in fitted.parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(args.seed)))
    once, calibration = cpu(lambda: pb.calibrate(arch, pb.shuffled(context, args.seed), 1.0))
    rows = [dict(arm="none", form="-", seconds=forward_seconds(arch, context, args.repeats), once=0.0)]
    for arm, form, bias, setup in (
        ("fitted form", "distance + key, shared", fitted, 0.0),
        ("calibration", "distance + key, per layer", calibration, once),
    ):
        with pb.applied(arch.model, bias):
            rows.append(dict(arm=arm, form=form, seconds=forward_seconds(arch, context, args.repeats), once=setup))
    for row in rows:
        row["per_token_ms"] = 1000 * row["seconds"] / args.n
        row["added"] = row["seconds"] / rows[0]["seconds"] - 1
        print(row, flush=True)
    return rows


def markdown(rows: list[dict], n: int) -> str:
    lines = [
        f"| arm | form | CPU s per forward pass (n = {n}) | CPU ms per token | added | one-time CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        added = "-" if r["arm"] == "none" else f"{100 * r['added']:+.0f}%"
        lines.append(
            f"| {r['arm']} | {r['form']} | {r['seconds']:.2f} | {r['per_token_ms']:.2f} | {added} | {r['once']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--corpus", default="pydoc_data.topics")
    parser.add_argument("--seed", type=int, default=7000)
    parser.add_argument("--into", default=None, help="also write the table into this page, between its markers")
    args = parser.parse_args()
    table = markdown(bench(args), args.n)
    print(table)
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, table + "\n")


if __name__ == "__main__":
    from lostmid import pin_numerics

    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
