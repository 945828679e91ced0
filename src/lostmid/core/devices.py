"""Device choice: CUDA when present and the config says ``auto``, the CPU otherwise.

On a cluster the scheduler says whether a job was given a GPU (Slurm sets ``SLURM_GPUS_ON_NODE``,
``SLURM_JOB_GPUS``/``SLURM_STEP_GPUS`` and ``CUDA_VISIBLE_DEVICES``). A job that was given one
but whose torch sees none (a CPU-only torch build, a missing driver, a node without GPUs) still
runs, on the CPU, and says so in its log: otherwise the only symptom is a slow job.
"""

from __future__ import annotations

import logging
import os

import torch

from lostmid import numerics
from lostmid.errors import ConfigError

log = logging.getLogger(__name__)

# Variables through which a scheduler hands a job its GPUs; values that mean "none".
GPU_REQUEST_VARIABLES = ("SLURM_GPUS_ON_NODE", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")
NO_GPU_VALUES = {"", "0", "-1", "none", "nodevfiles"}


def requested_gpus(environ=None) -> dict[str, str]:
    """The scheduler variables that say this job was given a GPU (empty when none was)."""
    environ = os.environ if environ is None else environ
    found = {name: environ[name] for name in GPU_REQUEST_VARIABLES if name in environ}
    # CUDA_VISIBLE_DEVICES=0 names GPU 0 and SLURM_GPUS_ON_NODE=0 means none: read each by its meaning.
    given = {}
    for name, value in found.items():
        text = value.strip().lower()
        if name == "CUDA_VISIBLE_DEVICES":
            if text not in NO_GPU_VALUES - {"0"}:
                given[name] = value
        elif text not in NO_GPU_VALUES:
            given[name] = value
    return given


def resolve(device: str = "auto") -> torch.device:
    """``auto`` -> cuda if available else cpu; ``cpu``; ``cuda`` (an error when there is none)."""
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"config key device must be auto, cpu or cuda, got {device!r}")
    available = torch.cuda.is_available()
    if device == "cuda" and not available:
        raise ConfigError("config key device is 'cuda' but torch sees no CUDA device; use 'auto' or 'cpu'")
    chosen = torch.device("cuda" if device == "cuda" or (device == "auto" and available) else "cpu")
    numerics.apply_to_torch(numerics.mode_of(os.environ.get(numerics.MODE_VARIABLE)), chosen)
    given = requested_gpus()
    if given and chosen.type == "cpu":
        where = ", ".join(f"{name}={value}" for name, value in given.items())
        if device == "cpu":
            log.warning("this job was given a GPU (%s) but config key device is 'cpu': the GPU stays unused", where)
        else:
            log.warning(
                "this job asked for a GPU and was given one (%s) but torch sees no CUDA device "
                "(torch %s, CUDA build %s): running on the CPU",
                where,
                torch.__version__,
                torch.version.cuda or "none",
            )
    log.info("device: %s", chosen if chosen.type == "cpu" else f"{chosen} ({torch.cuda.get_device_name(chosen)})")
    return chosen
