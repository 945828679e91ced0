"""Benchmark: the channel stage's time per batch as a ratio to one training step.

    python benchmarks/bench_channels.py                      # default config's model (L=32, M=2, d=32)
    python benchmarks/bench_channels.py --L 16 --block parallel --dtype float32

One training step = forward, backward, gradient clipping and the AdamW update on a batch of
``--batch`` sequences (as lostmid.training.train does). On the same batch it times
  split      the channel split alone: one forward with the two attention copies and ONE
             backward pass giving P_0, P_res, P_cone, P_loc (lostmid.analysis.channels.channel_split);
  norms      the operator norms Lambda_k of every step by ``--power-iterations`` JVP/VJP pairs;
  stage      what the stage does per batch: split + norms + the per-position statistics.
Each figure is the median of ``--repeats`` timings after one warm-up; the ratio divides by
the median training step. Timings are wall-clock on the host (CUDA is synchronized).
"""

from __future__ import annotations

import argparse

import torch

from lostmid import pin_numerics
from lostmid.analysis import channels
from lostmid.core import task
from lostmid.core.model import FlagTransformer, ModelConfig
from lostmid.training import checkpoint

from timing import median_seconds


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--L", type=int, default=32)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--block", default="sequential", choices=["sequential", "parallel"])
    parser.add_argument(
        "--batch", type=int, default=64, help="sequences per batch (the default config's train.batch_size)"
    )
    parser.add_argument("--power-iterations", type=int, default=10)
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "float64"], help="dtype of the channel analysis"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    return parser.parse_args(argv)


def measure(args):
    """Rows (what, seconds) of one training step and of the channel stage's parts; and the device."""
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    torch.manual_seed(0)
    config = ModelConfig(
        seq_len=args.L,
        depth=args.depth,
        d_model=args.d_model,
        heads=args.heads,
        mlp_ratio=4,
        block=args.block,
        residual=True,
        epsilon=1.0,
        readout="last",
    )
    model = FlagTransformer(config).to(device)
    train = {"lr": 3e-3, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.0}
    optimizer = checkpoint.build_optimizer(model.parameters(), train)
    generator = torch.Generator().manual_seed(0)
    tokens, targets, _ = task.sample_batch(args.batch, args.L, task.flag_law(args.L), generator)
    tokens, targets = tokens.to(device), targets.to(device)

    def training_step():
        loss = model.loss(model(tokens), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
        optimizer.step()
        loss.item()

    train_s = median_seconds(training_step, args.repeats, device)

    analysed = FlagTransformer(config).to(device).to(getattr(torch, args.dtype))
    analysed.load_state_dict(model.state_dict())
    analysed.eval()
    split = channels.channel_split(analysed, tokens, targets, keep_states=True)
    h = [analysed.step_size(k) for k in range(len(analysed.steps))]

    def split_only():
        channels.channel_split(analysed, tokens, targets)

    def norms_only():
        channels.step_operator_norms(analysed, split.states, args.power_iterations, torch.Generator().manual_seed(0))

    def stage():
        channels.channel_profiles(analysed, tokens, targets, args.batch, args.power_iterations, 0)

    rows = [("training step", train_s)]
    rows += [("split (1 fwd + 1 bwd)", median_seconds(split_only, args.repeats, device))]
    rows += [
        (
            f"norms ({args.power_iterations} JVP/VJP pairs x {len(h)} steps)",
            median_seconds(norms_only, args.repeats, device),
        )
    ]
    rows += [("stage per batch (split + norms + statistics)", median_seconds(stage, args.repeats, device))]
    return rows, device


def main(argv=None):
    args = parse_args(argv)
    rows, device = measure(args)
    train_s = rows[0][1]
    print(
        f"L={args.L} depth={args.depth} d={args.d_model} heads={args.heads} block={args.block} batch={args.batch} "
        f"analysis dtype={args.dtype} threads={args.threads} device={device}"
    )
    print(f"{'':48s} {'ms':>9s} {'x train step':>13s}")
    for name, seconds in rows:
        print(f"{name:48s} {1e3 * seconds:9.2f} {seconds / train_s:13.2f}")


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
