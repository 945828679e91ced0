"""Benchmark of the architectures stage: the influence of one batch against one plain forward and
backward pass of the same model, and how the cost grows with n (run on demand, not a test).

    python benchmarks/bench_architectures.py                          # llama, H = 4, d = 32, n = 64..1024
    python benchmarks/bench_architectures.py --family gpt2 --depth 12 --lengths 256 1024 4096 --device cuda

Prints one Markdown row per length (medians over --repeats, after a warm-up call):
- fwd+bwd: model(inputs_embeds=x), the next-token loss, and loss.backward() into the weights;
- influence: the stage's work on the same batch (``measure.measure_hf`` with the hooks recording
  lambda_t and A_t, one backward pass into the input embeddings, both powers, then the three
  theory profiles and the comparison rows); target ratio influence / fwd+bwd <= 1.5;
- growth: the influence time relative to the shortest length, next to (n / n_min)^2.
Single thread on the CPU (torch.set_num_threads(1)), as the workflow's jobs run.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lostmid import pin_numerics  # noqa: E402
from lostmid.architectures import measure, models, sweep  # noqa: E402

from timing import median_seconds  # noqa: E402


def bench(args) -> list[dict]:
    arch = models.build(
        args.family, args.encoding, args.depth, args.d_model, args.heads, args.vocab, max(args.lengths), seed=0
    )
    arch.model.to(args.device)
    rows, first = [], None
    for n in args.lengths:
        sequences = max(1, args.tokens // n)
        ids = sweep.token_ids(arch.vocab, sequences, n, seed=1, device=args.device)

        def forward_backward():
            arch.model.zero_grad(set_to_none=True)
            logits = arch.model(input_ids=ids, use_cache=False).logits
            F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:]).backward()

        def influence():
            raw, stats = measure.measure_hf(arch, ids, args.target, (1, 2), sequences, 0, models.layers(arch))
            sweep.tables(
                dict(
                    family=arch.family, encoding=arch.encoding, variant="bench", depth=args.depth, n=n, seed=0, step=0
                ),
                {(args.target, p): profile for p, profile in raw.items()},
                stats,
            )

        t_plain = median_seconds(forward_backward, args.repeats, args.device)
        t_influence = median_seconds(influence, args.repeats, args.device)
        first = first or (n, t_influence)
        rows.append(
            {
                "n": n,
                "sequences": sequences,
                "fwd+bwd ms": 1e3 * t_plain,
                "influence ms": 1e3 * t_influence,
                "influence / fwd+bwd": t_influence / t_plain,
                "growth": t_influence / first[1],
                "(n/n_min)^2": (n / first[0]) ** 2,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="llama", choices=models.FAMILIES)
    parser.add_argument("--encoding", default=None, help="default: the family's native encoding")
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--tokens", type=int, default=2048, help="tokens per batch: max(1, tokens // n) sequences")
    parser.add_argument("--target", default="top1", choices=measure.TARGETS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    args.encoding = args.encoding or models.ENCODINGS[args.family][0]
    torch.set_num_threads(1)
    rows = bench(args)
    print(
        f"{args.family}/{args.encoding}, H = {args.depth}, d = {args.d_model}, heads = {args.heads}, "
        f"target {args.target}, {args.device}\n"
    )
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
