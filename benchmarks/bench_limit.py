"""The retrieval stage's cost against the machine's limit: the CPU seconds of one forward and one backward
pass of SmolLM2-135M-Instruct (the packaged GGUF, fp32, one thread; needs the ``pretrained`` extra) on a window of n
tokens, beside the floating-point work they do and the fraction of this CPU's measured single-thread
matrix-multiply throughput that it runs at (run on demand, not a test).

    python benchmarks/bench_limit.py                                  # n = 1024, 4096
    python benchmarks/bench_limit.py --into docs/performance.md       # the page's table

Measured, CPU seconds (time.process_time), under the jobs' numerics (``lostmid.numerics.pin``: deterministic,
AVX2 kernels and one thread, unless $LOSTMID_NUMERICS says fast):
- throughput: ``torch.matmul`` of two fp32 (--size, --size) matrices, 2 size^3 FLOPs per call, the best of
  --repeats timed blocks (the machine's dense limit at one thread);
- forward: the base model on one window of n tokens, no gradients (what scoring runs, without prefix reuse);
- backward: the task-free share's backward pass alone (the gradient of the top-1 probability at the last
  position with respect to the input embeddings), timed after its forward pass with gradients.

Counted, FLOPs (a multiply-add is 2), ``flops``: P the parameters of the 30 blocks (embedding and head not
counted: a lookup, and the head runs on one position), L layers, d = heads x head dim, n tokens:
- forward: 2 P n (every linear map) + 2 L n^2 d (Q K^T and the weights times V over the causal half of the
  pairs of positions, n^2 / 2 each: the CPU's fused attention skips the masked blocks; counted over every
  pair, the forward pass at n = 1024 would run above the matmul throughput);
- backward to the inputs (no weight gradients: ``autograd.grad`` with respect to the embeddings only): 2 P n
  (one product per linear map) + 4 L n^2 d (the four products of attention's backward, causal half).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from lostmid import numerics  # noqa: E402

numerics.pin()  # the jobs' kernels (deterministic: AVX2, one thread), before torch loads them

import torch  # noqa: E402

from lostmid import io  # noqa: E402
from lostmid.architectures import measure, models, text  # noqa: E402

from timing import cpu  # noqa: E402

PAGE_MARKERS = ("<!-- bench_limit: begin -->", "<!-- bench_limit: end -->")


def matmul_throughput(size: int, repeats: int, calls: int = 4) -> float:
    """FLOP/s of fp32 ``torch.matmul`` at one thread: the best of ``repeats`` blocks of ``calls`` products."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.matmul(a, b)  # warm-up
    best = min(cpu(lambda: [torch.matmul(a, b) for _ in range(calls)])[0] for _ in range(repeats))
    return 2 * size**3 * calls / best


def flops(arch: models.Arch, n: int) -> dict:
    """The counted FLOPs of one forward and one backward pass (module docstring)."""
    config = arch.model.config
    blocks = sum(p.numel() for p in arch.model.base_model.layers.parameters())
    d, layers = config.num_attention_heads * config.head_dim, config.num_hidden_layers
    linear, attention = 2 * blocks * n, 2 * layers * n**2 * d  # attention: the causal half
    return {"params": blocks, "forward": linear + attention, "backward": linear + 2 * attention, "attention": attention}


def forward_and_backward(arch: models.Arch, ids: torch.Tensor) -> tuple[float, float]:
    """CPU seconds of the forward pass without gradients, and of the backward pass of the task-free share."""
    base, head, embedding = arch.model.base_model, arch.model.get_output_embeddings(), arch.model.get_input_embeddings()
    with torch.no_grad():
        forward, _ = cpu(lambda: base(ids[None], use_cache=False))
    with torch.enable_grad():
        x = embedding(ids[None]).detach().requires_grad_(True)
        hidden = base(inputs_embeds=x, use_cache=False).last_hidden_state
        top1 = measure.target_sum("top1", head(hidden[:, -1]))
        backward, _ = cpu(lambda: torch.autograd.grad(top1, x))
    return forward, backward


def bench(args) -> tuple[float, list[dict]]:
    throughput = matmul_throughput(args.size, args.repeats)
    print(f"matmul {args.size}: {throughput / 1e9:.1f} GFLOP/s", flush=True)
    arch, tokenizer = models.load_pretrained(models.packaged_file("smollm2"))
    stream = text.corpus_ids(tokenizer, args.corpus)
    rows = []
    for n in args.lengths:
        ids = text.windows(stream, n, 1, args.seed + n)[0]
        forward, backward = forward_and_backward(arch, ids)
        rows.append(dict(n=n, forward_s=forward, backward_s=backward, **flops(arch, n)))
        print(rows[-1], flush=True)
    return throughput, rows


def markdown(throughput: float, rows: list[dict]) -> str:
    lines = [
        f"Single-thread fp32 `torch.matmul` throughput: {throughput / 1e9:.1f} GFLOP/s. "
        f"P = {rows[0]['params'] / 1e6:.1f} M parameters in the blocks.",
        "",
        "| n | pass | CPU s | GFLOP counted | of which attention | GFLOP/s | fraction of matmul throughput |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for name, attention in (("forward", r["attention"]), ("backward", 2 * r["attention"])):
            seconds, work = r[f"{name}_s"], r[name]
            lines.append(
                f"| {r['n']} | {name} | {seconds:.1f} | {work / 1e9:.0f} | {attention / work:.0%} "
                f"| {work / seconds / 1e9:.1f} | {work / seconds / throughput:.0%} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--size", type=int, default=1024, help="the matmul benchmark's square size")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--corpus", default="pydoc_data.topics")
    parser.add_argument("--seed", type=int, default=7000)
    parser.add_argument("--into", default=None, help=f"also write the table into this page, between {PAGE_MARKERS}")
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = markdown(*bench(args))
    print(table)
    if args.into:
        io.write_between_markers(args.into, *PAGE_MARKERS, table + "\n")


if __name__ == "__main__":
    main()
