"""Training segments: continue a run from one checkpoint for a number of steps.

Batch t of a run is drawn from the run's data generator, whose state travels in the
checkpoint, so a chain of segments performs exactly the arithmetic of one uninterrupted
run: on the CPU the weights are bit-identical (tests/test_training.py checks it).
"""

from __future__ import annotations

import logging
import sys
import time

import pandas as pd
import torch
from tqdm import tqdm

from lostmid import task
from lostmid.checkpoint import TrainingState

log = logging.getLogger(__name__)


def train_steps(state: TrainingState, n_steps: int, device, progress: bool | None = None) -> pd.DataFrame:
    """Advance ``state`` by ``n_steps`` optimizer steps in place; return the per-step log.

    Columns: step, loss, accuracy (of the training batch), seconds_per_step (forward,
    backward and update, measured on the host after the device finished), peak_mem_mb
    (peak memory so far, see ``peak_memory_mb``).
    """
    spec = state.spec
    train = spec["train"]
    L = spec["model"]["seq_len"]
    law = task.flag_law(L, train["flag_law"])
    model = state.model.train()
    optimizer = state.optimizer
    rows = []
    show_bar = sys.stderr.isatty() if progress is None else progress
    every_log = max(1, n_steps // 10)
    first = state.step + 1
    for step in tqdm(range(first, first + n_steps), disable=not show_bar, desc=f"train {spec['variant']} L{L}", unit="step"):
        tokens, targets, flags = task.sample_batch(train["batch_size"], L, law, state.data_generator)
        tokens, targets, flags = tokens.to(device), targets.to(device), flags.to(device)
        start = time.perf_counter()
        loss, logits = state.objective(model, tokens, targets, flags, step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if train["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["grad_clip"], foreach=False)
        optimizer.step()
        loss_value = loss.item()  # synchronizes with the device, so the timing is honest
        seconds = time.perf_counter() - start
        accuracy = (model.predictions(logits.detach()) == targets).float().mean().item()
        rows.append((step, loss_value, accuracy, seconds, peak_memory_mb(device)))
        state.step = step
        if not show_bar and (step - first + 1) % every_log == 0:
            log.info("step %d loss %.4f batch accuracy %.3f (%.1f ms/step)", step, loss_value, accuracy, 1e3 * seconds)
    return pd.DataFrame(rows, columns=["step", "loss", "accuracy", "seconds_per_step", "peak_mem_mb"])


def peak_memory_mb(device) -> float:
    """Peak memory so far (MB): torch.cuda.max_memory_allocated on CUDA, else the process's
    resident high-water mark (getrusage ru_maxrss; interpreter and torch included)."""
    if torch.device(device).type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
