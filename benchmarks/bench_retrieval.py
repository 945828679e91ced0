"""Benchmark of the retrieval stage: SmolLM2-135M (the packaged GGUF, needs the ``pretrained`` extra) on one
window per length, the forward passes with and without prefix reuse, and one example's gradients (run on
demand, not a test).

    python benchmarks/bench_retrieval.py                                       # n = 256, 1024, 4096
    python benchmarks/bench_retrieval.py --into docs/performance.md            # the page's table

Per n, one window, the tasks of --tasks at every fraction of ``retrieval.FRACTIONS``:
- accuracy, with / without reuse: CPU seconds of scoring every example of the window, with the window's
  key-value cache (its forward pass included) and with a full forward pass per example; saving = 1 - with /
  without; "same" says whether both give the same successes and log-probabilities within 1e-4;
- gradients: CPU seconds of the two influence shares of one example (q = 0.5; one forward, two backward
  passes; layers recomputed from n >= --checkpoint-from), and the process's peak RSS during that call
  (VmHWM reset before it), goal <= 8 GB;
- per example: the CPU seconds of one example's accuracy (with reuse) and of its gradients, the numbers the
  configs are sized by.
Single thread (torch.set_num_threads(1)), as the workflow's jobs run; CPU seconds (time.process_time).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from lostmid import (
    io,  # noqa: E402
    pin_numerics,  # noqa: E402
)
from lostmid.architectures import models, retrieval, text  # noqa: E402

from timing import cpu, status_kb  # noqa: E402

PAGE_MARKERS = ("<!-- bench_retrieval: begin -->", "<!-- bench_retrieval: end -->")


def bench(args) -> list[dict]:
    arch, tokenizer = models.load_pretrained(models.packaged_file("smollm2"))
    stream = text.corpus_ids(tokenizer, args.corpus)
    vocabulary = retrieval.single_token_words(tokenizer)
    lead = tuple(retrieval.leading_ids(tokenizer, args.bos))  # the BOS token before the haystack, as the stage
    rows = []
    for n in args.lengths:
        window = text.windows(stream, n, 1, args.seed + n)[0]
        examples = retrieval.window_examples(
            tokenizer, window.numpy(), 0, args.tasks, retrieval.FRACTIONS, 8, 7, args.seed, vocabulary, lead
        )

        def reused():
            cache = retrieval.window_cache(arch, window, lead)
            return [retrieval.score(arch, e, cache) for e in examples]

        def plain():
            return [retrieval.score(arch, e) for e in examples]

        with_reuse, a = cpu(reused)
        without, b = cpu(plain)
        same = all(x[0] == y[0] and abs(x[1] - y[1]) < 1e-4 for x, y in zip(a, b))
        middle = examples[len(retrieval.FRACTIONS) // 2]
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        gradients, _ = cpu(lambda: retrieval.influence_shares(arch, middle, n >= args.checkpoint_from))
        peak = status_kb("VmHWM") / 2**20
        rows.append(
            dict(
                n=n,
                examples=len(examples),
                with_reuse=with_reuse,
                without=without,
                same=same,
                grad=gradients,
                peak=peak,
            )
        )
        print(rows[-1], flush=True)
    return rows


def markdown(rows, tasks) -> str:
    lines = [
        f"| n | examples ({', '.join(tasks)} × 9 q) | accuracy CPU s with reuse | without reuse | saving "
        "| same results "
        "| gradients of one example CPU s | peak RSS GB | per example: accuracy, gradients CPU s |",
        "|" + "---|" * 9,
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['examples']} | {r['with_reuse']:.1f} | {r['without']:.1f} "
            f"| {1 - r['with_reuse'] / r['without']:.0%} | {'yes' if r['same'] else 'no'} | {r['grad']:.1f} "
            f"| {r['peak']:.2f} | {r['with_reuse'] / r['examples']:.2f}, {r['grad']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--tasks", nargs="+", default=["single", "number"], choices=retrieval.TASKS)
    parser.add_argument("--checkpoint-from", type=int, default=2048, help="as retrieval.checkpoint_from")
    parser.add_argument("--corpus", default="pydoc_data.topics")
    parser.add_argument("--seed", type=int, default=7000)
    parser.add_argument(
        "--no-bos", dest="bos", action="store_false", help="no BOS token before the haystack (retrieval.bos false)"
    )
    parser.add_argument("--into", default=None, help=f"also write the table into this page, between {PAGE_MARKERS}")
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = markdown(bench(args), args.tasks)
    print(table)
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, table + "\n")


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
