"""The plan a study run began under: the plan file's sha256 and the repository's commit, written by the
run's first job (rule ``study_plan_stamp``) and compared with the plan when the findings are read.

A primary is called primary only if the plan the findings read is the one the run began under (same
sha256) and the plan's commit is an ancestor of (or equal to) the run's commit (docs/study.md).
"""

from __future__ import annotations

import hashlib
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from lostmid.errors import ConfigError


def sha256(path) -> str:
    """The sha256 of a file's bytes, in hex."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"plan file {path} does not exist")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git(repo, *words) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *words], capture_output=True, text=True, timeout=30)


def head_commit(repo) -> tuple[str | None, bool]:
    """(the repository's HEAD commit, whether tracked files differ from it); (None, False) outside git."""
    try:
        head = git(repo, "rev-parse", "HEAD")
        if head.returncode:
            return None, False
        dirty = bool(git(repo, "status", "--porcelain", "--untracked-files=no").stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return None, False
    return head.stdout.strip(), dirty


def plan_commit(repo, plan) -> str | None:
    """The last commit that changed the plan file (None when it was never committed)."""
    relative = Path(plan).resolve().relative_to(Path(repo).resolve())
    try:
        found = git(repo, "log", "-n", "1", "--format=%H", "--", str(relative))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found.stdout.strip() or None


def plan_stamp(repo, plan) -> dict:
    """What a study run records when it begins: the plan's path, sha256 and commit, the run's commit and
    whether its tracked files were clean, and the time (UTC)."""
    commit, dirty = head_commit(repo)
    return {
        "plan": str(Path(plan).resolve().relative_to(Path(repo).resolve())),
        "plan_sha256": sha256(plan),
        "plan_commit": plan_commit(repo, plan),
        "run_commit": commit,
        "run_dirty": dirty,
        "began": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
