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

from lostmid.config import train_value
from lostmid.core import task
from lostmid.core.optim import warmup_lr
from lostmid.training.checkpoint import TrainingState

log = logging.getLogger(__name__)


# cpu_seconds_per_step: the process's CPU time over the step (time.process_time, all its threads), which
# other processes on the machine do not inflate as they do the wall-clock seconds_per_step.
COLUMNS = ["step", "loss", "accuracy", "seconds_per_step", "peak_mem_mb", "cpu_seconds_per_step"]


class StepLog:
    """The per-step log of one run's segment, echoed as ~10 log lines when no bar is shown."""

    def __init__(self, n_steps: int, show: bool | None = None, label: str = ""):
        self.rows, self.label = [], label
        self.quiet = self.show_bar(show)  # the bar says it already
        self.every = max(1, n_steps // 10)

    @staticmethod
    def show_bar(show: bool | None) -> bool:
        return sys.stderr.isatty() if show is None else show

    @classmethod
    def progress(cls, steps, show: bool | None, description: str):
        """``steps`` with a progress bar when attached to a terminal (or when ``show``)."""
        return tqdm(steps, disable=not cls.show_bar(show), desc=description, unit="step")

    def add(self, step: int, loss: float, accuracy: float, seconds: float, memory_mb: float, cpu: float) -> None:
        self.rows.append((step, loss, accuracy, seconds, memory_mb, cpu))
        if not self.quiet and len(self.rows) % self.every == 0:
            log.info(
                "%sstep %d loss %.4f batch accuracy %.3f (%.1f ms/step)",
                self.label,
                step,
                loss,
                accuracy,
                1e3 * seconds,
            )

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)


def train_steps(state: TrainingState, n_steps: int, device, progress: bool | None = None) -> pd.DataFrame:
    """Advance ``state`` by ``n_steps`` optimizer steps in place; return the per-step log.

    Columns: step, loss, accuracy (of the training batch), seconds_per_step (forward,
    backward and update, measured on the host after the device finished), cpu_seconds_per_step
    (the process's CPU time over the same span), peak_mem_mb
    (peak memory so far, see ``peak_memory_mb``).
    """
    spec = state.spec
    train = spec["train"]
    L = spec["model"]["seq_len"]
    law = task.flag_law(L, train["flag_law"])
    warmup = train_value(train, "warmup")
    model = state.model.train()
    optimizer = state.optimizer
    step_log = StepLog(n_steps, progress)
    first = state.step + 1
    for step in StepLog.progress(range(first, first + n_steps), progress, f"train {spec['variant']} L{L}"):
        tokens, targets, flags = task.sample_batch(train["batch_size"], L, law, state.data_generator)
        tokens, targets, flags = tokens.to(device), targets.to(device), flags.to(device)
        start, cpu_start = time.perf_counter(), time.process_time()
        loss, logits = state.objective(model, tokens, targets, flags, step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if train["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["grad_clip"], foreach=False)
        optimizer.lr = warmup_lr(train["lr"], step, warmup)
        optimizer.step()
        loss_value = loss.item()  # synchronizes with the device, so the timing is honest
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        accuracy = (model.predictions(logits.detach()) == targets).float().mean().item()
        step_log.add(step, loss_value, accuracy, seconds, peak_memory_mb(device), cpu)
        state.step = step
    return step_log.table()


def peak_memory_mb(device) -> float:
    """Peak memory so far (MB): torch.cuda.max_memory_allocated on CUDA, else the process's
    resident high-water mark (getrusage ru_maxrss; interpreter and torch included)."""
    if torch.device(device).type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
