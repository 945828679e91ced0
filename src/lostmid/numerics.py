"""Numerics: the math libraries held to one instruction set and one reduction order.

The same config and seed must give the same tables on every machine. On the CPU the libraries
under torch and numpy choose their kernels by the processor they find: MKL's GEMM, ATen's
vectorized element-wise kernels and reductions (Sleef's exp, tanh, ...), oneDNN, numpy's SIMD
loops and OpenBLAS each take AVX-512 code where the processor has it and AVX2 code where it does
not, and the two round differently. Training is chaotic, so one differing last bit becomes a
different model after a few hundred steps. Thread counts enter too: a reduction split over more
threads adds its parts in another order.

Mode ``deterministic`` (the default; config key ``numerics``) therefore sets, in the process
environment and over whatever the caller set (the pin wins), before torch or numpy computes
anything:

========================  ==========================  =============================================
variable                  value                       what it holds
========================  ==========================  =============================================
MKL_CBWR                  AVX2,STRICT                 MKL's conditional numerical reproducibility:
                                                      its AVX2 code path, results independent of the
                                                      thread count
ATEN_CPU_CAPABILITY       avx2                        ATen's vectorized CPU kernels
ONEDNN_MAX_CPU_ISA        AVX2                        oneDNN's kernels
NPY_DISABLE_CPU_FEATURES  numpy's AVX-512 groups      numpy's SIMD loops (exp, log, sort, ...)
OPENBLAS_CORETYPE         Haswell                     the OpenBLAS of numpy and scipy (AVX2 kernels)
OMP_NUM_THREADS,          1                           one intra-op thread: the workflow's parallelism
MKL_NUM_THREADS,                                      is its jobs (every rule declares one thread)
OPENBLAS_NUM_THREADS
CUBLAS_WORKSPACE_CONFIG   :4096:8                     cuBLAS's reproducible workspace (CUDA)
========================  ==========================  =============================================

and, once torch is loaded and the device chosen (:func:`apply_to_torch`, from
lostmid.core.devices.resolve), one intra-op thread and, on CUDA, ``torch.use_deterministic_algorithms(True)``
(an op without a deterministic kernel then stops with an error that names it; mode ``fast`` is the way
out). Mode ``fast`` leaves every
library to its own choice.

The variables are read lazily by the libraries (ATen on its first kernel, MKL on its first call)
except numpy's, which is read when numpy is imported. Importing ``lostmid`` changes nothing: the
command line (every job) calls :func:`pin` before it imports numpy, the Snakefile pins the config's
mode and exports it (``LOSTMID_NUMERICS``) to every job, and a notebook or script asks for it with
``lostmid.pin_numerics()`` before it imports numpy or torch. :func:`check` reports a process in
which a library loaded before the pin and kept its own choice.

numpy refuses NPY_DISABLE_CPU_FEATURES beside NPY_ENABLE_CPU_FEATURES. Where the caller set the
latter, the pin keeps the caller's list less numpy's AVX-512 groups (the same kernels held off,
the caller's other choices kept) and says so in one line on stderr; a list of AVX-512 groups alone
gives way to the pin's NPY_DISABLE_CPU_FEATURES.

Platforms: the pin makes x86-64 processors with AVX2 (Intel since 2013, AMD since 2015) compute
alike, whether or not they have AVX-512. An arm64 machine (Apple silicon, Graviton) has none of
these kernels: torch there uses its own NEON/SVE code and OpenBLAS or Accelerate, the variables
above are ignored, and its tables agree with each other's but not with x86-64's.
"""

from __future__ import annotations

import os
import platform
import sys

from lostmid.errors import ConfigError

MODES = ("deterministic", "fast")
DEFAULT = "deterministic"
# The variable through which the mode reaches every job (set by the Snakefile from the config).
MODE_VARIABLE = "LOSTMID_NUMERICS"
THREADS = 1  # intra-op threads under the pin
# numpy's dispatch groups above AVX2: the 2.x names, then the 1.x ones (a name numpy lacks is ignored).
NUMPY_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL"

PINNED = {
    "MKL_CBWR": "AVX2,STRICT",
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512,
    "OMP_NUM_THREADS": str(THREADS),
    "MKL_NUM_THREADS": str(THREADS),
    "OPENBLAS_NUM_THREADS": str(THREADS),
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
}
X86_ONLY = {"OPENBLAS_CORETYPE": "Haswell"}  # an unknown core type is an error on arm64's OpenBLAS
# numpy's other variable, which it refuses beside NPY_DISABLE_CPU_FEATURES: only the features it lists.
NUMPY_ENABLE = "NPY_ENABLE_CPU_FEATURES"
# The caller's own values, as this process found them: mode fast restores them.
CALLER = {name: os.environ.get(name) for name in (*PINNED, *X86_ONLY, NUMPY_ENABLE)}


def mode_of(value: str | None) -> str:
    """The numerics mode named by ``value`` (None: the default); an unknown one is a ConfigError."""
    mode = DEFAULT if value in (None, "") else value
    if mode not in MODES:
        raise ConfigError(f"config key numerics must be one of {', '.join(MODES)}, got {value!r}")
    return mode


def pinned_environment(machine: str | None = None) -> dict[str, str]:
    """The variables the deterministic mode sets on this processor architecture."""
    machine = platform.machine() if machine is None else machine
    x86 = machine.lower() in ("x86_64", "amd64")
    return {**PINNED, **(X86_ONLY if x86 else {})}


def composed_environment(enabled: str | None, machine: str | None = None) -> tuple[dict[str, str | None], str]:
    """The variables the deterministic mode sets (None: unsets) beside the caller's NPY_ENABLE_CPU_FEATURES
    ``enabled``, and the line saying what it did with that list ("" when the caller set none).

    numpy refuses both of its variables at once: a caller's list is kept less numpy's AVX-512 groups, in place
    of the pin's NPY_DISABLE_CPU_FEATURES; a list of AVX-512 groups alone is unset and the pin's variable set."""
    found = pinned_environment(machine)
    names = (enabled or "").replace(",", " ").split()
    if not names:
        return found, ""
    held = set(NUMPY_AVX512.split())
    kept = [name for name in names if name.upper() not in held]
    dropped = [name for name in names if name.upper() in held]
    if not kept:
        note = f"{NUMPY_ENABLE}={enabled!r} names only AVX-512 groups, which the pin holds off: unset"
        return {**found, NUMPY_ENABLE: None}, note
    note = f"{NUMPY_ENABLE} kept as {' '.join(kept)!r}" + (f" (less {' '.join(dropped)})" if dropped else "")
    note += " in place of NPY_DISABLE_CPU_FEATURES, which numpy refuses beside it"
    return {**found, "NPY_DISABLE_CPU_FEATURES": None, NUMPY_ENABLE: " ".join(kept)}, note


def pin(mode: str | None = None) -> str:
    """Hold the math libraries to ``mode`` (default: ``$LOSTMID_NUMERICS``, else deterministic).

    Sets the process environment (children inherit it) and, where torch is already loaded, its
    threads and deterministic switch; call it before numpy is imported (numpy reads its variable
    then). Returns the mode.

    >>> import lostmid
    >>> lostmid.pin_numerics()
    'deterministic'
    """
    mode = mode_of(os.environ.get(MODE_VARIABLE) if mode is None else mode)
    os.environ[MODE_VARIABLE] = mode
    if mode == "deterministic":
        variables, note = composed_environment(os.environ.get(NUMPY_ENABLE))
        for name, value in variables.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if note:
            print(f"lostmid: numerics deterministic: {note}", file=sys.stderr)
    else:
        for name, value in CALLER.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if "torch" in sys.modules:
        apply_to_torch(mode)
    return mode


def apply_to_torch(mode: str, device=None) -> None:
    """torch's own switches of ``mode``: one intra-op thread and, on a CUDA ``device``, deterministic
    algorithms (cuDNN's included). On the CPU the switch is left alone: torch's CPU kernels are
    deterministic at a fixed thread count, and the switch imports torch._dynamo (a second per job)."""
    import torch

    deterministic = mode == "deterministic"
    if deterministic:
        torch.set_num_threads(THREADS)
    if device is not None and torch.device(device).type == "cuda":
        torch.use_deterministic_algorithms(deterministic)
        torch.backends.cudnn.deterministic = deterministic
        torch.backends.cudnn.benchmark = not deterministic


def active(mode: str | None = None) -> dict[str, str]:
    """What this process computes with, for a run's manifest: the mode, torch's CPU capability and
    the pinned variables as the process sees them."""
    mode = mode_of(os.environ.get(MODE_VARIABLE) if mode is None else mode)
    state = {"mode": mode, "machine": platform.machine()}
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        state["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        state["torch_threads"] = str(torch.get_num_threads())
    caller = {NUMPY_ENABLE: os.environ[NUMPY_ENABLE]} if os.environ.get(NUMPY_ENABLE) else {}
    return {**state, **{name: os.environ.get(name, "") for name in pinned_environment()}, **caller}


def check() -> None:
    """Raise a ConfigError when the deterministic pin is not in force in this process: torch ran
    its first kernel before the pin (its capability then stays the processor's own)."""
    if os.environ.get(MODE_VARIABLE) != "deterministic" or "torch" not in sys.modules:
        return
    torch = sys.modules["torch"]
    capability = torch.backends.cpu.get_cpu_capability()
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    if x86 and capability not in ("AVX2", "DEFAULT"):
        raise ConfigError(
            f"numerics: torch computes with {capability} kernels, not the pinned AVX2: torch ran before the numerics "
            "were pinned; call lostmid.pin_numerics() first (or run through the `lostmid` command)"
        )
