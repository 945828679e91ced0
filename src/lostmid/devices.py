"""Device choice: CUDA when present and the config says ``auto``, the CPU otherwise."""

from __future__ import annotations

import logging
import os

import torch

from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


def resolve(device: str = "auto") -> torch.device:
    """``auto`` -> cuda if available else cpu; ``cpu``; ``cuda`` (an error when there is none)."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("SLURM_JOB_GPUS"):
            log.warning("a GPU was requested for this job (CUDA_VISIBLE_DEVICES/SLURM_JOB_GPUS set) but torch sees none: running on the CPU")
        return torch.device("cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("config key device is 'cuda' but torch sees no CUDA device; use 'auto' or 'cpu'")
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"config key device must be auto, cpu or cuda, got {device!r}")
    return torch.device(device)
