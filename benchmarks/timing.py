"""The benchmarks' clock: median wall-clock of a call after a warm-up, the device synchronized."""

from __future__ import annotations

import statistics
import time

import torch


def synchronize(device) -> None:
    """Wait for queued GPU work, so the host clock measures it (nothing to wait for on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn, repeats: int, device="cpu") -> float:
    fn()  # warm-up: first-call costs (lazy imports, allocator) are not the steady state
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
