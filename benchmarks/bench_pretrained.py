"""Benchmark of the pretrained measurement: SmolLM2-135M-Instruct (the packaged GGUF, needs the ``pretrained`` extra)
on one window of real text per length, the whole measurement against a plain forward and backward pass
(run on demand, not a test).

    python benchmarks/bench_pretrained.py                                  # n = 256, 1024, 4096
    python benchmarks/bench_pretrained.py --lengths 256 512 1024 2048 4096 --into docs/performance.md

Prints one Markdown row per length (each call --repeats times: the time of the fastest, the memory of the
first; the shortest length is called once before, as a warm-up):
- fwd+bwd: the base model's forward pass (sdpa attention) on the window's embeddings, the top-1
  probability at the last position, and its backward pass into the embeddings (and the weights' graph):
  what any input-gradient method pays;
- measurement: ``bounded.measure_bounded`` on the same window (hooks recording lambda_t and the
  attention inputs, the same forward and backward pass, layers recomputed in the backward pass from
  n >= --checkpoint-from, then the blockwise attention rollout), then the tables with bootstrap
  intervals and the three theories (``pretrained.measurement_tables``, 1000 draws);
- times are the process's CPU seconds (time.process_time: one thread, so the work done, whatever else
  runs on the machine), the wall-clock beside them;
- ratio = measurement / fwd+bwd in CPU seconds (goal <= 1.5); peak RSS of the process during each call (the kernel's
  high-water mark VmHWM, reset before the call through /proc/self/clear_refs), goal <= 8 GB at n = 4096;
- slopes: log-log slope in n of the times and of the peak memory above the RSS before the call,
  between consecutive lengths.
Single thread (torch.set_num_threads(1)), as the workflow's jobs run.
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from lostmid import (
    io,  # noqa: E402
    pin_numerics,  # noqa: E402
)
from lostmid.architectures import bounded, models, pretrained, text  # noqa: E402

from timing import peak_call  # noqa: E402

# The lines of a page between which --into writes the table (docs/performance.md).
PAGE_MARKERS = ("<!-- bench_pretrained: begin -->", "<!-- bench_pretrained: end -->")


def fastest_time_first_memory(calls: list[tuple]) -> tuple:
    """(CPU s, peak GB, peak above baseline GB, wall s): the times of the fastest call, the memory of the first."""
    fastest = min(calls)
    return fastest[0], calls[0][1], calls[0][2], fastest[3]


def bench(args) -> list[dict]:
    start = time.perf_counter()
    arch, tokenizer = models.load_pretrained(models.packaged_file("smollm2"))
    print(f"loaded SmolLM2 in {time.perf_counter() - start:.0f} s")
    stream = text.corpus_ids(tokenizer, args.corpus)
    base, head, embedding = arch.model.base_model, arch.model.get_output_embeddings(), arch.model.get_input_embeddings()
    rows = []
    for i, n in enumerate(args.lengths):
        ids = text.windows(stream, n, 1, seed=args.seed + n)

        def forward_backward():
            x = embedding(ids).detach().requires_grad_(True)
            hidden = base(inputs_embeds=x, use_cache=False).last_hidden_state
            value = head(hidden[:, -1]).softmax(-1).max(-1).values.sum()
            torch.autograd.grad(value, x)

        def measurement():
            result = bounded.measure_bounded(arch, ids, checkpoint=n >= args.checkpoint_from)
            pretrained.measurement_tables(result)

        if i == 0:
            forward_backward(), measurement()  # warm-up: first-call costs are not the steady state
        # Each call --repeats times, the measurement first, alternating. Time: the fastest call (a length's first
        # call also pays for the pages its larger buffers touch for the first time, which later calls reuse).
        # Memory: the first call's, before the other call's larger buffers stay resident and raise the RSS a
        # later call's high-water mark starts from.
        calls = [(peak_call(measurement), peak_call(forward_backward)) for _ in range(args.repeats)]
        measured, plain = (fastest_time_first_memory([call[k] for call in calls]) for k in (0, 1))
        rows.append({"n": n, "plain": plain, "measured": measured})
        print(
            f"n={n}: CPU s fwd+bwd {plain[0]:.1f}, measurement {measured[0]:.1f}; wall s {plain[3]:.1f}, "
            f"{measured[3]:.1f}",
            flush=True,
        )
    return rows


def slope(rows, i: int, value) -> str:
    if i == 0:
        return ""
    a, b = rows[i - 1], rows[i]
    return f"{math.log(value(b) / value(a)) / math.log(b['n'] / a['n']):.2f}"


def markdown(rows, checkpoint_from: int) -> str:
    lines = [
        "| n | checkpointing | fwd+bwd CPU s | measurement CPU s | ratio | peak RSS fwd+bwd GB | peak RSS "
        "measurement GB "
        "| slope time | slope memory above baseline | wall s fwd+bwd, measurement |",
        "|" + "---|" * 10,
    ]
    for i, row in enumerate(rows):
        plain, measured = row["plain"], row["measured"]
        lines.append(
            f"| {row['n']} | {'yes' if row['n'] >= checkpoint_from else 'no'} | {plain[0]:.1f} | {measured[0]:.1f} "
            f"| {measured[0] / plain[0]:.2f} | {plain[1]:.2f} | {measured[1]:.2f} "
            f"| {slope(rows, i, lambda r: r['measured'][0])} "
            f"| {slope(rows, i, lambda r: max(r['measured'][2], 1e-3))} | {plain[3]:.0f}, {measured[3]:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--checkpoint-from", type=int, default=2048, help="as architectures.text.checkpoint_from")
    parser.add_argument("--corpus", default="pydoc_data.topics")
    parser.add_argument("--seed", type=int, default=6000)
    parser.add_argument("--repeats", type=int, default=2, help="calls of each per length; the fastest is reported")
    parser.add_argument(
        "--into", default=None, help=f"also write the table into this page, between its lines {PAGE_MARKERS}"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = markdown(bench(args), args.checkpoint_from)
    print(table)
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, table + "\n")


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
