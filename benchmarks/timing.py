"""The benchmarks' clock and memory gauge: median wall-clock of a call after a warm-up, the device synchronized;
CPU time and peak resident memory of one call (Linux: /proc/self)."""

from __future__ import annotations

import statistics
import time

import torch


def cpu(fn):
    """(CPU seconds of the process during ``fn()``, its value)."""
    start = time.process_time()
    value = fn()
    return time.process_time() - start, value


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


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_call(fn) -> tuple[float, float, float, float]:
    """(CPU seconds, peak RSS in GB, peak above the RSS before the call in GB, wall seconds) of one call of ``fn``."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the high-water mark VmHWM to the current RSS
    before = status_kb("VmRSS")
    start, wall = time.process_time(), time.perf_counter()
    fn()
    seconds, wall = time.process_time() - start, time.perf_counter() - wall
    peak = status_kb("VmHWM")
    return seconds, peak / 2**20, (peak - before) / 2**20, wall
