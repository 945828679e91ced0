"""Benchmark of the influence stage: time per evaluation batch against one training step and
against a loop of one backward pass per position.

    python benchmarks/bench_influence.py                  # the default config's model, L = 16 and 32
    python benchmarks/bench_influence.py --L 64 --depth 4 --repeats 20

Prints one Markdown row per setting (medians over --repeats, after one warm-up call):
- train step: forward, backward, gradient clipping and AdamW update on a training batch;
- influence: the stage's work per evaluation batch (one forward and one backward pass giving
  P_k at every step and position, energies, densities, metrics, and the conditioned influence of the
  answer, results/answer_influence);
- without answers: the same without the conditioned influence (what the answer table adds);
- per-position loop: the same input energies from L forward/backward passes, one per position
  (what the one-pass taps avoid; layer 0 only, so it understates the cost of all layers);
- density flow: predicted d_s m (forward-over-reverse, float64) and the finite-difference step
  on the smaller flow batch.
Single thread (torch.set_num_threads(1)), as the workflow's jobs run.
"""

from __future__ import annotations

import argparse

import torch

from lostmid import pin_numerics
from lostmid.analysis import density_flow, influence
from lostmid.analysis.settings import FlowSettings, InfluenceSettings
from lostmid.config import settings_from_section
from lostmid.core import task
from lostmid.core.model import ModelConfig
from lostmid.training import checkpoint

from timing import median_seconds


def per_position_loop(model, tokens, targets):
    """Input energies from one backward pass per position: the slow way the stage never takes."""
    L = tokens.shape[1]
    energy = torch.zeros(L)
    for i in range(L):
        x0 = model.embed(tokens).detach()
        row = x0[:, i].clone().requires_grad_(True)
        x = torch.cat([x0[:, :i], row[:, None], x0[:, i + 1 :]], dim=1)
        mask = model.logit_bias()
        for k in range(len(model.steps)):
            x = model.advance(k, x, mask)
        loss = model.loss(model.read_out(x), targets) * tokens.shape[0]
        (grad,) = torch.autograd.grad(loss, row)
        energy[i] = grad.square().sum(-1).mean()
    return energy


def without_answers(model, tokens, targets, deltas):
    """The influence stage's work without the conditioned influence of the answer."""
    energy = influence.energies(model, tokens, targets)
    return influence.profile_table(energy), influence.metrics_table(energy[0], deltas)


def bench(L: int, depth: int, args) -> dict:
    torch.manual_seed(0)
    model_config = ModelConfig(
        seq_len=L,
        depth=depth,
        d_model=args.d_model,
        heads=args.heads,
        mlp_ratio=args.mlp_ratio,
        block="sequential",
        residual=True,
        epsilon=1.0,
        readout="last",
    )
    train = {
        "batch_size": args.batch_size,
        "lr": 3e-3,
        "beta1": 0.9,
        "beta2": 0.99,
        "weight_decay": 0.0,
        "grad_clip": 1.0,
        "flag_law": "uniform",
    }
    spec = {
        "variant": "bench",
        "L": L,
        "depth": depth,
        "seed": 0,
        "model": model_config.to_dict(),
        "train": train,
        "remedy": {"kind": "none"},
    }
    state = checkpoint.TrainingState.initial(spec, "cpu")
    optimizer = state.optimizer
    model = state.model
    law = task.flag_law(L)

    def train_step():
        tokens, targets, flags = task.sample_batch(args.batch_size, L, law, state.data_generator)
        model.train()
        loss, _ = state.objective(model, tokens, targets, flags, 1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
        optimizer.step()

    settings = settings_from_section(InfluenceSettings, {"batch_per_position": args.batch_per_position}, "influence")
    flow = settings_from_section(FlowSettings, {"flow_batch_per_position": args.flow_batch_per_position}, "influence")
    tokens, targets = influence.evaluation_batch(L, settings)
    flow_tokens, flow_targets = influence.evaluation_batch(L, flow)
    model.eval()
    one_pass = influence.energies(model, tokens, targets)[0].float()
    looped = per_position_loop(model, tokens, targets)
    assert torch.allclose(one_pass, looped, rtol=1e-3, atol=1e-10), "the loop and the one-pass taps disagree"

    t_train = median_seconds(train_step, args.repeats)
    t_influence = median_seconds(lambda: influence.analyze(model, tokens, targets, settings.deltas), args.repeats)
    t_without = median_seconds(lambda: without_answers(model, tokens, targets, settings.deltas), args.repeats)
    t_loop = median_seconds(lambda: per_position_loop(model, tokens, targets), max(3, args.repeats // 4))
    t_flow = median_seconds(
        lambda: density_flow.flow_table(model, flow_tokens, flow_targets, 1e-4), max(3, args.repeats // 4)
    )
    return {
        "L": L,
        "depth": depth,
        "eval batch": tokens.shape[0],
        "train batch": args.batch_size,
        "train step ms": 1e3 * t_train,
        "influence ms": 1e3 * t_influence,
        "influence / train step": t_influence / t_train,
        "without answers ms": 1e3 * t_without,
        "answers add": f"{t_influence / t_without - 1:+.1%}",
        "per-position loop ms": 1e3 * t_loop,
        "loop / influence": t_loop / t_influence,
        "flow batch": flow_tokens.shape[0],
        "density flow ms": 1e3 * t_flow,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--L", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--mlp-ratio", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64, help="training batch")
    parser.add_argument("--batch-per-position", type=int, default=8, help="influence batch per flag position")
    parser.add_argument("--flow-batch-per-position", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [bench(L, args.depth, args) for L in args.L]
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    main()
