"""Benchmark of the retrieval stage: SmolLM2-135M-Instruct (the packaged GGUF, needs the ``pretrained`` extra) on one
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

    python benchmarks/bench_retrieval.py --windows --record runs/smollm2_retrieval   # a window as the stage runs it

With ``--windows``: the CPU seconds of a window as the stage's job runs it (``retrieval.retrieval_examples`` on
the first window at each n, tasks single and number, BOS, prefix reuse), with the share of ``--measure``
(default bare) at the first of ``--lengths`` and accuracy only at the others, and the job's once-per-job
costs (the model, the corpus), which a block of B windows shares (per window: load / B + window). With
``--record``, "same" compares each window with that record's window 0 at n (success equal, log p within
1e-4; the share where both have it), the check that the cheaper window gives today's answers.
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
WINDOW_MARKERS = ("<!-- bench_retrieval windows: begin -->", "<!-- bench_retrieval windows: end -->")


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
            cache = retrieval.window_pass(arch, window, lead)[0]
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


def window_costs(args) -> dict:
    """CPU seconds of the once-per-job loads and of one window at each n, as the stage runs them."""
    import pandas as pd

    load, (arch, tokenizer) = cpu(lambda: models.load_pretrained(models.packaged_file("smollm2")))
    read, stream = cpu(lambda: text.corpus_ids(tokenizer, args.corpus))
    found = {"load": load, "corpus": read, "windows": []}
    for i, n in enumerate(args.lengths):
        measures = (args.measure,) if i == 0 else ()
        seconds, rows = cpu(
            lambda: retrieval.retrieval_examples(
                arch,
                tokenizer,
                stream=stream,
                n=n,
                windows=1,
                gradient_windows=1 if measures else 0,
                measures=measures or ("free",),
                tasks=args.tasks,
                seed=args.seed,
                bos=args.bos,
            )
        )
        same = "–"
        if args.record:
            old = pd.read_parquet(f"{args.record}/windows/pretrained_n{n}_w0.parquet")
            same = bool(
                (old.success.to_numpy() == rows.success.to_numpy()).all()
                and abs(old.logprob.to_numpy() - rows.logprob.to_numpy()).max() < 1e-4
            )
        share = ", ".join(measures) or "none"
        found["windows"].append(dict(n=n, examples=len(rows), share=share, cpu=seconds, same=same))
        print(found["windows"][-1], flush=True)
    return found


def window_markdown(found, blocks=(1, 10)) -> str:
    lines = [
        f"Once per job: the model {found['load']:.1f} CPU s, the corpus {found['corpus']:.1f} CPU s.",
        "",
        "| n | examples | share | window CPU s | per window, jobs of "
        + " / ".join(f"{b} window{'s' * (b > 1)}" for b in blocks)
        + " | same answers as the record |",
        "|---|---|---|---|---|---|",
    ]
    once = found["load"] + found["corpus"]
    for w in found["windows"]:
        per = " / ".join(f"{w['cpu'] + once / b:.1f}" for b in blocks)
        same = w["same"] if w["same"] == "–" else ("yes" if w["same"] else "no")
        lines.append(f"| {w['n']} | {w['examples']} | {w['share']} | {w['cpu']:.1f} | {per} | {same} |")
    return "\n".join(lines)


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
    parser.add_argument("--windows", action="store_true", help="a window as the stage runs it (module docstring)")
    parser.add_argument("--measure", default="bare", choices=retrieval.MEASURES, help="--windows: the share taken")
    parser.add_argument("--record", default=None, help="--windows: compare with this record's window 0 at each n")
    parser.add_argument("--into", default=None, help="also write the table into this page, between its markers")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.windows:
        table, markers = window_markdown(window_costs(args)), WINDOW_MARKERS
    else:
        table, markers = markdown(bench(args), args.tasks), PAGE_MARKERS
    print(table)
    if args.into:
        io.write_between_markers(args.into, *markers, table + "\n")


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
