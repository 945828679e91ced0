"""The numerics pin (lostmid.numerics): one instruction set and one thread, whatever the caller set.

That two runs under different caller settings give the same tables is checked by the smoke run,
which every session makes with the caller asking for other kernels (conftest.CALLER_NUMERICS), and
its fingerprint (tests/test_fingerprint.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from lostmid import numerics
from lostmid.core import devices
from lostmid.errors import ConfigError

from conftest import REPO

# A fresh process that pins on request, then imports torch: what it computes with.
PROBE = "import json, lostmid; lostmid.pin_numerics(); import torch; from lostmid import numerics; "
PROBE += "print(json.dumps(numerics.active()))"
# The same seen from inside a command of the command line (its console entry pins before the command runs).
COMMAND = (
    "import atexit, json, sys; from lostmid import numerics; "
    "atexit.register(lambda: print(json.dumps(numerics.active()))); "
    "sys.argv = ['lostmid', 'check-config', 'tests/smoke.yaml']; from lostmid.cli.main import run; run()"
)


def probe(code: str = PROBE, **environment) -> dict:
    """What a fresh process running ``code`` computes with."""
    env = {**os.environ, **environment}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_the_pin_wins_over_what_the_caller_set():
    found = probe(ATEN_CPU_CAPABILITY="default", MKL_CBWR="COMPATIBLE", OMP_NUM_THREADS="2", LOSTMID_NUMERICS="")
    assert found["mode"] == "deterministic"
    assert found["MKL_CBWR"] == "AVX2,STRICT" and found["ATEN_CPU_CAPABILITY"] == "avx2"
    assert found["torch_threads"] == "1"
    if found["machine"] == "x86_64":
        assert found["torch_cpu_capability"] == "AVX2"


def test_every_command_pins_and_importing_lostmid_does_not():
    caller = {"MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "2", "LOSTMID_NUMERICS": ""}
    found = probe(COMMAND, **caller)
    assert found["mode"] == "deterministic" and found["MKL_CBWR"] == "AVX2,STRICT" and found["OMP_NUM_THREADS"] == "1"
    imported = probe("import json, os, lostmid; print(json.dumps(dict(os.environ)))", **caller)
    assert imported["MKL_CBWR"] == "COMPATIBLE" and imported["OMP_NUM_THREADS"] == "2"


def numpy_features(names) -> dict:
    """numpy's dispatch groups ``names`` as this process has them enabled (those numpy knows)."""
    from numpy._core._multiarray_umath import __cpu_features__

    return {name: __cpu_features__[name] for name in names if name in __cpu_features__}


def test_a_callers_numpy_feature_list_is_kept_less_its_avx512_groups_in_one_line():
    # numpy refuses NPY_DISABLE_CPU_FEATURES (the pin's) beside NPY_ENABLE_CPU_FEATURES (the caller's): every
    # command died on import. Now the caller's list is kept, less numpy's AVX-512 groups, and one line says so.
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    held = numerics.NUMPY_AVX512.split()
    own = [name for name in __cpu_dispatch__ if __cpu_features__[name] and name not in held][:1]
    if not own:
        pytest.skip("this processor has no numpy dispatch group below AVX-512 to keep")
    # a command that imports numpy (check-config), then numpy's groups as that process has them
    report = "import json; from numpy._core._multiarray_umath import __cpu_features__ as f; "
    report += f"print(json.dumps({{k: f[k] for k in {[*own, *held]!r} if k in f}}))"
    code = COMMAND.replace("lambda: print(json.dumps(numerics.active()))", f"lambda: exec({report!r}, {{}})")
    env = {**os.environ, "NPY_ENABLE_CPU_FEATURES": f"{own[0]} X86_V4", "LOSTMID_NUMERICS": ""}
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("lostmid: numerics")]
    assert notes == [
        f"lostmid: numerics deterministic: NPY_ENABLE_CPU_FEATURES kept as '{own[0]}' (less X86_V4) in place of "
        "NPY_DISABLE_CPU_FEATURES, which numpy refuses beside it"
    ]
    enabled = json.loads(done.stdout.splitlines()[-1])
    assert enabled[own[0]] and not any(enabled[name] for name in held if name in enabled)


def test_a_callers_list_of_avx512_groups_alone_gives_way_to_the_pin():
    variables, note = numerics.composed_environment("X86_V4,AVX512_SKX", "x86_64")
    assert variables["NPY_ENABLE_CPU_FEATURES"] is None
    assert variables["NPY_DISABLE_CPU_FEATURES"] == numerics.NUMPY_AVX512
    assert note == (
        "NPY_ENABLE_CPU_FEATURES='X86_V4,AVX512_SKX' names only AVX-512 groups, which the pin holds off: unset"
    )
    assert numerics.composed_environment(None, "x86_64") == (numerics.pinned_environment("x86_64"), "")


def test_mode_fast_gives_the_caller_back_its_own_settings():
    found = probe(ATEN_CPU_CAPABILITY="default", MKL_CBWR="COMPATIBLE", LOSTMID_NUMERICS="fast")
    assert found["mode"] == "fast" and found["MKL_CBWR"] == "COMPATIBLE"
    assert found["torch_cpu_capability"] == "DEFAULT"


def test_an_unknown_mode_is_one_line_naming_the_key():
    with pytest.raises(ConfigError, match="config key numerics must be one of deterministic, fast, got 'exact'"):
        numerics.mode_of("exact")


def test_a_cuda_device_gets_deterministic_algorithms_and_the_cpu_one_thread(monkeypatch):
    # Choosing the device applies the switches; CUDA is faked, since the switch is only a flag until a kernel runs.
    monkeypatch.setenv(numerics.MODE_VARIABLE, "deterministic")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "a faked GPU")
    try:
        torch.set_num_threads(2)
        assert devices.resolve("cuda").type == "cuda"
        assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
        assert torch.get_num_threads() == 1 and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        monkeypatch.setenv(numerics.MODE_VARIABLE, "fast")
        devices.resolve("cuda")
        assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False


def test_a_cpu_job_never_loads_torch_dynamo_for_the_switch():
    code = "import sys, lostmid; from lostmid.core import devices; devices.resolve('cpu');"
    code += "print('torch._dynamo' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_openblas_is_pinned_on_x86_64_only():
    assert numerics.pinned_environment("x86_64")["OPENBLAS_CORETYPE"] == "Haswell"
    assert "OPENBLAS_CORETYPE" not in numerics.pinned_environment("arm64")


def test_a_process_whose_torch_ran_before_the_pin_is_reported():
    code = "import torch; torch.ones(3).exp(); import lostmid; lostmid.pin_numerics(); lostmid.numerics.check()"
    env = {**os.environ, "LOSTMID_NUMERICS": "deterministic"}
    env.pop("ATEN_CPU_CAPABILITY", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if (
        "AVX512"
        not in subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
            capture_output=True,
            text=True,
            env={k: v for k, v in env.items() if k != "ATEN_CPU_CAPABILITY"},
        ).stdout
    ):
        pytest.skip("this processor has no AVX-512: torch's own choice is the pinned one")
    assert done.returncode != 0 and "torch ran before lostmid was imported" in done.stderr
