"""Seed batches: several seeds of one run trained together, one vmapped step for all of them.

Runs that differ only in their seed share every shape, so their parameters can be stacked
along a leading seed axis and ONE forward, backward and update (``torch.func.vmap`` over
``torch.func.grad`` of the objective's ``functional_loss``, and AdamW on the stacked tensors)
trains all of them: a GPU node is not left idle by S small models run one after another.

What stays per seed: the data stream, the remedy's state and generators (``sequence_weights``,
run outside the transform on the seed's own module), the gradient clipping (each seed's own
norm), the checkpoint. Each seed's module parameters are views into the stacked tensors while
the batch trains, so the per-seed modules always hold the current weights.

The arithmetic is batched (bmm, not mm), so a seed trained in a batch matches the same seed
trained alone to float rounding, not bitwise; ``train.seed_batch`` is therefore part of the run
spec. Chained batch segments are bitwise one uninterrupted batch run (tests/test_seed_batch.py).
Objectives that are not functional (Algorithm 3) train their seeds one after another.
"""

from __future__ import annotations

import logging
import time

import pandas as pd
import torch

from lostmid.config import train_value
from lostmid.core import task
from lostmid.core.optim import warmup_lr
from lostmid.training.checkpoint import TrainingState, build_optimizer
from lostmid.training.train import StepLog, peak_memory_mb, train_steps

log = logging.getLogger(__name__)


def seed_batches(seeds: list[int], size: int) -> list[list[int]]:
    """Seeds grouped into the batches that train together: aligned blocks seed // size (0..size-1,
    size..2 size-1, ...), so adding seeds never regroups the seeds of a full block; size 1: one
    seed at a time, in the order given."""
    if size <= 1:
        return [[seed] for seed in seeds]
    batches: dict[int, list[int]] = {}
    for seed in seeds:
        batches.setdefault(seed // size, []).append(seed)
    return list(batches.values())


def check_batch(states: list[TrainingState]) -> None:
    """A batch is runs with one spec apart from the seed, all at the same step."""
    first = {**states[0].spec, "seed": None}
    for state in states[1:]:
        if {**state.spec, "seed": None} != first:
            raise ValueError(
                f"seed {state.spec['seed']} has another spec than seed {states[0].spec['seed']}: "
                "only runs that differ in their seed train as one batch"
            )
        if state.step != states[0].step:
            raise ValueError(
                f"seed {state.spec['seed']} is at step {state.step}, seed {states[0].spec['seed']} at "
                f"{states[0].step}: a seed batch continues from one step"
            )


def train_seed_batch(
    states: list[TrainingState], n_steps: int, device, progress: bool | None = None
) -> list[pd.DataFrame]:
    """Advance every state by ``n_steps`` in place; return each seed's per-step log.

    The log has ``lostmid.training.train.train_steps``'s columns; ``seconds_per_step`` is the batch's
    step time divided by the number of seeds (the cost per run).
    """
    check_batch(states)
    if not states[0].objective.functional:
        log.info(
            "objective %s is not functional: training the seeds one after another", type(states[0].objective).__name__
        )
        return [train_steps(state, n_steps, device, progress) for state in states]
    batch = StackedSeeds(states)
    try:
        return batch.train(n_steps, device, progress)
    finally:
        batch.unstack()


class StackedSeeds:
    """The stacked parameters, buffers and AdamW moments of a seed batch, and its vmapped step."""

    def __init__(self, states: list[TrainingState]):
        self.states = states
        self.model = states[0].model.train()  # the module whose forward every seed runs
        modules = [state.model for state in states]
        self.params, _ = torch.func.stack_module_state(modules)  # leaf tensors (S, ...) that take .grad
        # The buffers (causal mask, fixed attention bias) come from the spec, so the seeds share them.
        self.buffers = dict(self.model.named_buffers())
        for i, module in enumerate(modules):
            for name, p in module.named_parameters():
                p.data = self.params[name].data[i]  # a view: the module follows the stacked update
        train = states[0].spec["train"]
        self.optimizer = build_optimizer(self.params.values(), train)
        self.optimizer.load_state_dict(stack_optimizer_states([state.optimizer.state_dict() for state in states]))
        objective = states[0].objective

        def loss(weights, buffers, tokens, targets, sequence_weights):
            return objective.functional_loss(self.model, weights, buffers, tokens, targets, sequence_weights)

        self.loss_grad = torch.func.grad_and_value(loss, has_aux=True)

    def train(self, n_steps: int, device, progress: bool | None) -> list[pd.DataFrame]:
        spec = self.states[0].spec
        train, L = spec["train"], spec["model"]["seq_len"]
        law = task.flag_law(L, train["flag_law"])
        warmup = train_value(train, "warmup")
        seeds = [state.spec["seed"] for state in self.states]
        logs = [StepLog(n_steps, progress, label=f"seed {seed}: ") for seed in seeds]
        first = self.states[0].step + 1
        steps = StepLog.progress(range(first, first + n_steps), progress, f"train {spec['variant']} L{L} seeds {seeds}")
        for step in steps:
            batches = [task.sample_batch(train["batch_size"], L, law, state.data_generator) for state in self.states]
            tokens, targets, flags = (torch.stack(parts).to(device) for parts in zip(*batches))
            start, cpu_start = time.perf_counter(), time.process_time()
            sequence_weights = [
                state.objective.sequence_weights(state.model, x, f, step)
                for state, x, f in zip(self.states, tokens, flags)
            ]
            sequence_weights = None if sequence_weights[0] is None else torch.stack(sequence_weights)
            # Detached weights: torch.func computes the gradient itself; leaves that require grad would
            # also make autograd record the whole vmapped pass in a graph nobody differentiates (2x the time).
            weights = {name: p.detach() for name, p in self.params.items()}
            in_dims = (0, None, 0, 0, None if sequence_weights is None else 0)
            # functional_loss runs explicit attention: the fused CPU kernel has no vmap batching rule
            # (nor a double backward).
            grads, (loss, logits) = torch.func.vmap(self.loss_grad, in_dims=in_dims)(
                weights, self.buffers, tokens, targets, sequence_weights
            )
            self.clip(grads, train["grad_clip"])
            for name, p in self.params.items():
                p.grad = grads[name]
            self.optimizer.lr = warmup_lr(train["lr"], step, warmup)
            self.optimizer.step()
            losses = loss.tolist()  # synchronizes with the device, so the timing is honest
            seconds = (time.perf_counter() - start) / len(seeds)
            cpu = (time.process_time() - cpu_start) / len(seeds)
            accuracy = (
                (self.model.predictions(logits.flatten(0, 1)) == targets.flatten()).view(len(seeds), -1).float().mean(1)
            )
            memory = peak_memory_mb(device)
            for state, seed_log, seed_loss, seed_accuracy in zip(self.states, logs, losses, accuracy.tolist()):
                state.step = step
                seed_log.add(step, seed_loss, seed_accuracy, seconds, memory, cpu)
        return [seed_log.table() for seed_log in logs]

    @staticmethod
    def clip(grads: dict, max_norm: float) -> None:
        """torch.nn.utils.clip_grad_norm_ on each seed's own gradients (their total 2-norm)."""
        if max_norm <= 0:
            return
        per_tensor = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads.values()])
        coefficient = (max_norm / (torch.linalg.vector_norm(per_tensor, dim=0) + 1e-6)).clamp(max=1.0)
        for g in grads.values():
            g.mul_(coefficient.view(-1, *[1] * (g.dim() - 1)))

    def unstack(self) -> None:
        """Give every seed's module its own copy of its weights and its optimizer its moments."""
        stacked_state = self.optimizer.state_dict()
        for i, state in enumerate(self.states):
            for p in state.model.parameters():
                p.data = p.data.clone()
            state.optimizer.load_state_dict(seed_optimizer_state(stacked_state, i))


def stack_optimizer_states(states: list[dict]) -> dict:
    """AdamW state dicts of the seeds -> the state dict of their stacked parameters."""
    first = states[0]
    stacked = {}
    for index, moments in first["state"].items():
        per_seed = [state["state"][index] for state in states]
        stacked[index] = {
            "step": moments["step"],
            "exp_avg": torch.stack([m["exp_avg"] for m in per_seed]),
            "exp_avg_sq": torch.stack([m["exp_avg_sq"] for m in per_seed]),
        }
    return {"state": stacked, "param_groups": first["param_groups"]}


def seed_optimizer_state(stacked: dict, i: int) -> dict:
    """Seed ``i``'s slice of a stacked AdamW state dict."""
    state = {
        index: {"step": m["step"].clone(), "exp_avg": m["exp_avg"][i].clone(), "exp_avg_sq": m["exp_avg_sq"][i].clone()}
        for index, m in stacked["state"].items()
    }
    return {"state": state, "param_groups": stacked["param_groups"]}
