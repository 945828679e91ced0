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

PROBE = "import json, lostmid, torch; from lostmid import numerics; print(json.dumps(numerics.active()))"


def probe(**environment) -> dict:
    """What a fresh process that imports lostmid, then torch, computes with."""
    env = {**os.environ, **environment}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def test_the_pin_wins_over_what_the_caller_set():
    found = probe(ATEN_CPU_CAPABILITY="default", MKL_CBWR="COMPATIBLE", OMP_NUM_THREADS="2", LOSTMID_NUMERICS="")
    assert found["mode"] == "deterministic"
    assert found["MKL_CBWR"] == "AVX2,STRICT" and found["ATEN_CPU_CAPABILITY"] == "avx2"
    assert found["torch_threads"] == "1"
    if found["machine"] == "x86_64":
        assert found["torch_cpu_capability"] == "AVX2"


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
    code = "import torch; torch.ones(3).exp(); import lostmid; from lostmid import numerics; numerics.check()"
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
