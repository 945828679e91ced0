"""Training throughput, model FLOP utilization, and the project's step against a plain reference.

The reference is a standard pre-LN GPT block stack with ``scaled_dot_product_attention``
(is_causal=True) of the same sizes, kept here and nowhere else: the project's training path
must not be slower than it by more than 10%.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from lostmid import pin_numerics
from lostmid.core import task
from lostmid.core.model import FlagTransformer, ModelConfig
from lostmid.training.checkpoint import build_optimizer

from timing import synchronize

TRAIN = {"lr": 3e-3, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.0}


class ReferenceBlock(nn.Module):
    def __init__(self, d, heads, mlp_ratio):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, mlp_ratio * d), nn.Linear(mlp_ratio * d, d)

    def forward(self, x):
        b, L, d = x.shape
        q, k, v = (t.view(b, L, self.heads, -1).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(d, 2))
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, L, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class ReferenceGPT(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        d = config.d_model
        self.tok, self.pos = nn.Embedding(task.VOCAB, d), nn.Embedding(config.seq_len, d)
        self.blocks = nn.Sequential(*[ReferenceBlock(d, config.heads, config.mlp_ratio) for _ in range(config.depth)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, task.N_ANSWERS)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        return self.head(self.ln(self.blocks(x)))[:, -1]


def model_flops_per_step(config: ModelConfig, batch: int) -> float:
    """Forward + backward FLOPs (3x forward) of one step, counting matmuls only (full L^2 attention)."""
    L, d, r = config.seq_len, config.d_model, config.mlp_ratio
    per_block = 2 * L * d * 3 * d + 2 * L * d * d + 2 * 2 * L * L * d + 2 * 2 * L * d * r * d
    return 3 * batch * config.depth * per_block


def matmul_peak(device, n: int = 2048, repeats: int = 10) -> float:
    """Measured float32 matmul FLOP/s on ``device``: the denominator of model FLOP utilization."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    a @ b
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def seconds_per_step(model, batch: int, device, steps: int, loss_fn) -> float:
    """Median wall-clock of one optimizer step (forward, backward, update) after warm-up."""
    L = model.pos.num_embeddings if isinstance(model, ReferenceGPT) else model.config.seq_len
    optimizer = build_optimizer(model.parameters(), TRAIN)
    generator = torch.Generator().manual_seed(0)
    law = task.flag_law(L)
    times = []
    for i in range(steps + 3):
        tokens, targets, _ = task.sample_batch(batch, L, law, generator)
        tokens, targets = tokens.to(device), targets.to(device)
        synchronize(device)
        start = time.perf_counter()
        loss = loss_fn(model(tokens), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        synchronize(device)
        if i >= 3:
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def measure(
    lengths=(64, 256, 1024),
    depth: int = 2,
    d_model: int = 32,
    heads: int = 4,
    batch: int = 64,
    steps: int = 10,
    device="cpu",
):
    """Rows: L, seconds per step of the project and of the reference, sequences/s, MFU, ratio."""
    peak = matmul_peak(device)
    rows = []
    for L in lengths:
        config = ModelConfig(
            seq_len=L,
            depth=depth,
            d_model=d_model,
            heads=heads,
            mlp_ratio=4,
            block="sequential",
            residual=True,
            epsilon=1.0,
            readout="last",
        )
        torch.manual_seed(0)
        ours = FlagTransformer(config).to(device)
        torch.manual_seed(0)
        reference = ReferenceGPT(config).to(device)
        t_ours = seconds_per_step(ours, batch, device, steps, ours.loss)
        t_ref = seconds_per_step(reference, batch, device, steps, F.cross_entropy)
        flops = model_flops_per_step(config, batch)
        rows.append(
            {
                "L": L,
                "seconds_per_step": t_ours,
                "reference_seconds_per_step": t_ref,
                "sequences_per_second": batch / t_ours,
                "mfu": flops / t_ours / peak,
                "ratio_to_reference": t_ours / t_ref,
                "peak_flops": peak,
            }
        )
    return rows


def loglog_slope(xs, ys) -> float:
    """Least-squares slope of log y against log x (how a cost grows with L)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    torch.set_num_threads(1)
    for row in measure(lengths=(64, 256)):
        print(row)
