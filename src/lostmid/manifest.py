"""A run's manifest: where its tables came from, written by the run itself.

The workflow writes ``results/manifest.json`` when it starts (``start``) and completes it when it
ends (``finish``): the commit and whether the tree had uncommitted changes, each config file as
given and its SHA-256, the recorded files the config names (a pre-registered plan: its hash and the
commit that last changed it), the numerics mode and what the process computes with
(lostmid.numerics), the machine (CPU model, cores), the library versions, and the wall-clock and
CPU seconds of the invocation. A run resumed by a later invocation keeps the earlier ones in
``invocations``; the top-level fields are those of the last. Every generated page is stamped from
a manifest (``stamp``), never from the working directory it is written in.

Torch-free: the Snakefile and the page commands read it without loading torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from lostmid import numerics
from lostmid.errors import InputError

FILE = "manifest.json"
PACKAGES = ("torch", "numpy", "pandas", "pyarrow", "scipy", "statsmodels", "transformers", "snakemake", "lostmid")


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _git(root: Path, *words: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *words], capture_output=True, text=True, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def is_ancestor(root: Path, ancestor: str, commit: str) -> bool:
    """Whether ``ancestor`` is ``commit`` or one of its ancestors in the checkout at ``root``."""
    return _git(root, "merge-base", "--is-ancestor", ancestor, commit) is not None


def source(root: Path) -> dict:
    """The checkout's commit and whether its tracked files differ from it (None: not a git checkout)."""
    commit = _git(root, "rev-parse", "HEAD")
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty) if dirty is not None else None}


def cpu_model() -> str:
    """The processor: its model name, family and model numbers, and whether it has AVX-512 (the
    pin's subject), from /proc/cpuinfo on Linux; the platform's word elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    fields = {}
    for line in text.split("\n\n")[0].splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    if "model name" not in fields:
        return platform.processor() or platform.machine()
    avx512 = "AVX-512" if "avx512f" in fields.get("flags", "").split() else "no AVX-512"
    return (
        f"{fields['model name']} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')}, {avx512})"
    )


def machine() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "architecture": platform.machine(),
        "system": platform.platform(),
        "python": platform.python_version(),
    }


def versions() -> dict:
    found = {}
    for package in PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def jobs_numerics() -> dict:
    """What a job of this run computes with: a child process started as jobs are (it inherits this
    process's environment, imports lostmid, then torch) reports lostmid.numerics.active()."""
    probe = "import json, lostmid, torch; from lostmid import numerics; print(json.dumps(numerics.active()))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {**numerics.active(), "probe": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout)


def recorded(root: Path, path: str) -> dict:
    """A recorded file (a plan): its path as given, SHA-256, and the commit that last changed it."""
    full = root / path
    if not full.is_file():
        raise InputError(f"manifest: the recorded file {path} does not exist")
    last = _git(root, "log", "-1", "--format=%H %cI", "--", path) or ""
    commit, _, date = last.partition(" ")
    return {"path": path, "sha256": sha256(full), "commit": commit or None, "committed": date or None}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def start(results: Path, root: Path, configs: list[str], records: list[str] = ()) -> dict:
    """Write the manifest of an invocation that starts now (earlier invocations kept); the numerics
    are those of this process's environment (lostmid.numerics.pin has run)."""
    results, root = Path(results), Path(root)
    previous = read(results / FILE)["invocations"] if (results / FILE).exists() else []
    invocation = {
        **source(root),
        "configs": [{"path": str(path), "sha256": sha256(Path(path))} for path in configs],
        "records": [recorded(root, path) for path in records],
        "numerics": jobs_numerics(),
        "machine": machine(),
        "versions": versions(),
        "started": _now(),
        "started_monotonic": time.monotonic(),
        "finished": None,
        "wall_s": None,
        "cpu_s": None,
    }
    manifest = {**invocation, "invocations": [*previous, invocation]}
    write(results / FILE, manifest)
    return manifest


def finish(results: Path, status: str) -> dict:
    """Complete the last invocation: its end, status, wall-clock and the CPU seconds of its jobs
    (the workflow process's children, getrusage) and of the workflow process itself."""
    path = Path(results) / FILE
    manifest = read(path)
    last = dict(manifest["invocations"][-1])
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    last.update(
        finished=_now(),
        status=status,
        wall_s=round(time.monotonic() - last.pop("started_monotonic"), 1),
        cpu_s=round(children.ru_utime + children.ru_stime + own.ru_utime + own.ru_stime, 1),
    )
    manifest = {**last, "invocations": [*manifest["invocations"][:-1], last]}
    write(path, manifest)
    return manifest


def write(path: Path, manifest: dict) -> None:
    """Write atomically: a reader sees the old manifest or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)


def read(path: Path) -> dict:
    """A manifest file; a missing or unreadable one is one line (InputError without a path: a rerun
    of the run, not a rebuild of the file, cures it)."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE
    if not path.exists():
        raise InputError(f"{path}: no manifest: the run was not made by this workflow's version (rerun it)")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: the manifest does not parse ({err.msg}, line {err.lineno})") from None
    missing = [key for key in ("commit", "configs", "numerics", "machine", "invocations") if key not in manifest]
    if missing:
        raise InputError(f"{path}: the manifest lacks {', '.join(missing)}")
    return manifest


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "no commit (not a git checkout)"


def commits(manifest: dict) -> list[str]:
    """Every commit the run's invocations were made from, in order, once each."""
    return list(dict.fromkeys(_short(item.get("commit")) for item in manifest["invocations"]))


def warnings(manifest: dict) -> list[str]:
    """Why the run cannot be reproduced as stamped (empty when it can)."""
    found = []
    if any(item.get("dirty") for item in manifest["invocations"]):
        found.append("made from a tree with uncommitted changes")
    if any(item.get("commit") is None for item in manifest["invocations"]):
        found.append("made outside a git checkout")
    if len(commits(manifest)) > 1:
        found.append(f"resumed across commits {', '.join(commits(manifest))}")
    if manifest.get("finished") is None:
        found.append("not finished")
    if manifest["numerics"].get("mode") != "deterministic":
        found.append(f"numerics {manifest['numerics'].get('mode')}: other machines give other numbers")
    return found


def _hours(seconds) -> str:
    if seconds is None:
        return "?"
    minutes, second = divmod(round(seconds), 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min {second:02d} s"


def stamp(manifest: dict) -> str:
    """The lines a generated page opens with: where its numbers came from, from the run's manifest.
    A run that cannot be reproduced as stamped says so on the first line."""
    configs = ", ".join(f"`{item['path']}` ({item['sha256'][:12]})" for item in manifest["configs"]) or "none"
    computed = manifest["numerics"]
    machine_line = manifest["machine"]
    wall = sum(item.get("wall_s") or 0 for item in manifest["invocations"])
    cpu = sum(item.get("cpu_s") or 0 for item in manifest["invocations"])
    lines = []
    problems = warnings(manifest)
    if problems:
        lines.append(f"**Not reproducible as stamped: the run was {'; '.join(problems)}.**")
        lines.append("")
    lines += [
        f"Run: commit `{', '.join(commits(manifest))}`; config {configs};",
        f"numerics {computed.get('mode')} (torch kernels {computed.get('torch_cpu_capability', '?')}, "
        f"{computed.get('torch_threads', '?')} thread a job);",
        f"machine {machine_line['cpu']}, {machine_line['cores']} cores, {machine_line['architecture']}; "
        f"torch {manifest['versions'].get('torch')};",
        f"{len(manifest['invocations'])} invocation(s), {_hours(wall)} wall-clock, {_hours(cpu)} CPU.",
    ]
    for item in manifest.get("records", []):
        lines.append(
            f"Plan `{item['path']}` ({item['sha256'][:12]}), last changed at commit `{_short(item['commit'])}`."
        )
    return "\n".join(lines)
