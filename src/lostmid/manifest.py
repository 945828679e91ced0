"""A run's manifest: where its tables came from, written by the run itself.

The workflow writes ``results/manifest.json`` when it starts (``start``) and completes it when it
ends (``finish``): the commit and whether the tree had uncommitted changes, each config file as
given and its SHA-256, the recorded files the config names (a pre-registered plan: its hash and the
commit that last changed it), the numerics mode and what the process computes with
(lostmid.numerics), the machine (CPU model, cores), the library versions, and the wall-clock and
CPU seconds of the invocation. A run resumed by a later invocation keeps the earlier ones in
``invocations``; the top-level fields are those of the last. Every generated page is stamped from
a manifest (``stamp``), never from the working directory it is written in, and the stamp reads every
invocation: other numerics than deterministic in any, a last invocation that failed or did not finish,
commits, configs or plans that change between invocations, or a tree with uncommitted changes each put
a warning on its first line (``warnings``). A recorded file (the plan) with uncommitted changes is
refused when the run starts; a manifest without invocations is not a run (``read``).

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


def committed_sha256(root: Path, commit: str, path: str) -> str | None:
    """The SHA-256 of the file ``path`` (relative to the checkout's top) as committed at ``commit``; None when
    the commit does not hold it (or ``root`` is not a git checkout)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{path}"], capture_output=True, check=False)
    except OSError:
        return None
    return hashlib.sha256(done.stdout).hexdigest() if done.returncode == 0 else None


def require_committed(root: Path, path: str) -> None:
    """A recorded file (the plan) as committed: one line when it has uncommitted changes or is not committed
    (a run outside a git checkout records no commit, and its stamp says so)."""
    if _git(root, "rev-parse", "HEAD") is None:
        return
    if committed_sha256(root, "HEAD", path) != sha256(Path(root) / path):
        raise InputError(
            f"manifest: {path} has uncommitted changes (or is not committed): commit it before the run starts, "
            "so that the run records the plan it began under"
        )


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
    for path in records:
        require_committed(root, path)
    previous = read(results / FILE)["invocations"] if (results / FILE).exists() else []
    invocation = {
        **source(root),
        "workdir": str(Path.cwd()),
        "configs": [{"path": str(path), "sha256": sha256(Path(path))} for path in configs],
        "records": [recorded(root, path) for path in records],
        "numerics": jobs_numerics(),
        "machine": machine(),
        "versions": versions(),
        "started": _now(),
        "started_monotonic": time.monotonic(),
        "controller": os.getpid(),  # the process whose ``finish`` completes this invocation
        "finished": None,
        "wall_s": None,
        "cpu_s": None,
    }
    manifest = {**invocation, "invocations": [*previous, invocation]}
    write(results / FILE, manifest)
    return manifest


def finish(results: Path, status: str) -> dict:
    """Complete this process's invocation (``own``): its end, status, wall-clock and the CPU seconds of its jobs
    (the workflow process's children, getrusage) and of the workflow process itself."""
    path = Path(results) / FILE
    manifest = read(path)
    invocations = list(manifest["invocations"])
    index = own(invocations)
    item = dict(invocations[index])
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_use = resource.getrusage(resource.RUSAGE_SELF)
    item.update(
        finished=_now(),
        status=status,
        wall_s=round(time.monotonic() - item.pop("started_monotonic"), 1),
        cpu_s=round(children.ru_utime + children.ru_stime + own_use.ru_utime + own_use.ru_stime, 1),
    )
    invocations[index] = item
    manifest = {**invocations[-1], "invocations": invocations}
    write(path, manifest)
    return manifest


def own(invocations: list[dict]) -> int:
    """The index of this process's invocation: the last unfinished one it started (its ``controller`` pid), so
    that a second workflow process on the same results folder, started later, does not have its invocation
    completed by the first's end; the last invocation where none names this process (a manifest written before
    invocations named their controller). ValueError where that one has finished already."""
    pid = os.getpid()
    for index in range(len(invocations) - 1, -1, -1):
        if invocations[index].get("controller") == pid and invocations[index].get("finished") is None:
            return index
    if invocations[-1].get("finished") is not None:
        raise ValueError("no unfinished invocation of this process in the manifest: it was completed already")
    return len(invocations) - 1


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
    if not manifest["invocations"]:
        raise InputError(f"{path}: the manifest lists no invocation: not a run")
    return manifest


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "no commit (not a git checkout)"


def commits(manifest: dict) -> list[str]:
    """Every commit the run's invocations were made from, in order, once each."""
    return list(dict.fromkeys(_short(item.get("commit")) for item in manifest["invocations"]))


def _changed(manifest: dict, what: str, of) -> str | None:
    """A warning when ``of(invocation)`` is not the same for every invocation: each invocation's value."""
    values = [of(item) for item in manifest["invocations"]]
    if len(set(values)) < 2:
        return None
    return f"resumed with other {what} ({'; '.join(f'{n}: {v}' for n, v in enumerate(values, 1))})"


def _ended(item: dict) -> str:
    return "did not finish" if item.get("finished") is None else f"ended in {item.get('status')}"


def warnings(manifest: dict) -> list[str]:
    """Why the run cannot be reproduced as stamped, read from every invocation (empty when it can)."""
    runs = manifest["invocations"]
    found = []
    if any(item.get("dirty") for item in runs):
        found.append("made from a tree with uncommitted changes")
    if any(item.get("commit") is None for item in runs):
        found.append("made outside a git checkout")
    if len(commits(manifest)) > 1:
        found.append(f"resumed across commits {', '.join(commits(manifest))}")
    for what, of in (
        ("configs", lambda item: ", ".join(c["sha256"][:12] for c in item.get("configs", []))),
        ("plans", lambda item: ", ".join(r["sha256"][:12] for r in item.get("records", []))),
    ):
        if changed := _changed(manifest, what, of):
            found.append(changed)
    modes = numerics_modes(manifest)
    if modes != ["deterministic"]:
        found.append(f"computed with numerics {', '.join(map(str, modes))}: other machines give other numbers")
    if runs[-1].get("finished") is None:
        found.append("not finished")
    elif runs[-1].get("status") != "success":
        found.append(f"{_ended(runs[-1])} (its last invocation)")
    return found


def resumed(manifest: dict) -> list[str]:
    """The earlier invocations that failed or did not finish, each resumed by a later one (shown on the page;
    a warning of ``warnings`` besides where the resume changed commit, configs, plan or numerics)."""
    return [
        f"invocation {n} {_ended(item)}"
        for n, item in enumerate(manifest["invocations"][:-1], 1)
        if item.get("finished") is None or item.get("status") != "success"
    ]


def numerics_modes(manifest: dict) -> list:
    """The numerics modes of the run's invocations, in order, once each."""
    return list(dict.fromkeys(item.get("numerics", {}).get("mode") for item in manifest["invocations"]))


def _hours(seconds) -> str:
    if seconds is None:
        return "?"
    minutes, second = divmod(round(seconds), 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min {second:02d} s"


def shown(path: str, workdir: str | None) -> str:
    """A config file as a reader reruns it: relative to the run's working directory where it lies below
    it (Snakemake hands the workflow absolute paths); else from its checkout's config/ folder on."""
    given = Path(path)
    if not given.is_absolute():
        return path
    if workdir and given.is_relative_to(workdir):
        return str(given.relative_to(workdir))
    parts = given.parts
    return str(Path(*parts[len(parts) - 1 - parts[::-1].index("config") :])) if "config" in parts else given.name


def identity(manifest: dict) -> str:
    """The stamp's line naming the run: its commits and its config files with their hashes (a page holding
    this line was written from this run's record: lostmid.records.write_page)."""
    configs = ", ".join(
        f"`{shown(item['path'], manifest.get('workdir'))}` ({item['sha256'][:12]})" for item in manifest["configs"]
    )
    return f"Run: commit `{', '.join(commits(manifest))}`; config {configs or 'none'};"


def stamp(manifest: dict) -> str:
    """The lines a generated page opens with: where its numbers came from, from the run's manifest.
    A run that cannot be reproduced as stamped says so on the first line."""
    computed = manifest["numerics"]
    machine_line = manifest["machine"]
    timed = [item for item in manifest["invocations"] if item.get("wall_s") is not None]
    wall, cpu = sum(item["wall_s"] for item in timed), sum(item.get("cpu_s") or 0 for item in timed)
    untimed = len(manifest["invocations"]) - len(timed)
    over = f" over the {len(timed)} that finished ({untimed} stopped before their time was stamped)" if untimed else ""
    lines = []
    problems = warnings(manifest)
    if problems:
        lines.append(f"**Not reproducible as stamped: the run was {'; '.join(problems)}.**")
        lines.append("")
    if earlier := resumed(manifest):
        lines += [f"Resumed: {'; '.join(earlier)}, each resumed by a later invocation.", ""]
    lines += [
        identity(manifest),
        f"numerics {', '.join(map(str, numerics_modes(manifest)))} "
        f"(torch kernels {computed.get('torch_cpu_capability', '?')}, "
        f"{computed.get('torch_threads', '?')} thread a job);",
        f"machine {machine_line['cpu']}, {machine_line['cores']} cores, {machine_line['architecture']}; "
        f"torch {manifest['versions'].get('torch')};",
        f"{len(manifest['invocations'])} invocation(s), {_hours(wall)} wall-clock, {_hours(cpu)} CPU{over}.",
    ]
    for item in manifest.get("records", []):
        lines.append(
            f"Plan `{item['path']}` ({item['sha256'][:12]}), last changed at commit `{_short(item['commit'])}`."
        )
    return "\n".join(lines)
