"""The plan a study run began under: the plan file's sha256 and the repository's commit, written by the
run's first job (rule ``study_plan_stamp``) and compared with the plan when the findings are read.

A primary is called primary only if the plan the findings read is the one the run began under (same
sha256) and the plan's commit is an ancestor of (or equal to) the run's commit (docs/study.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from lostmid.errors import ConfigError

log = logging.getLogger(__name__)


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


# The study's run record (runs/study): the stamp, the manifest where the run wrote one, the overlay as run,
# and small tables of the study's arms. Record name -> (the workflow's folder or file under results/, the
# per-run table's name for the column check, or None).
RECORD_TABLES = {
    "failure": ("failure", "failure"),
    "influence": ("influence", "influence"),
    "bias_summary": ("bias_fit_summary", None),
    "length_init": ("length/init.parquet", None),
    "length_fit": ("length/fit_profiles.parquet", None),
}


@dataclass
class Record:
    """The run record as read back: tables (None where the record has none), the stamp and the manifest."""

    failure: pd.DataFrame | None = None
    influence: pd.DataFrame | None = None
    bias_summary: pd.DataFrame | None = None
    length_init: pd.DataFrame | None = None
    length_fit: pd.DataFrame | None = None
    retrieval: pd.DataFrame | None = None
    stamp: dict | None = None
    manifest: dict | None = None


def collected(results, source: str, name: str | None, variants) -> pd.DataFrame | None:
    """One table of the run under ``results``, restricted to ``variants`` (and, for influence, to layer 0: the
    input density the study reads); None when the run has not written it."""
    from lostmid.tables.keys import read

    path = Path(results) / source
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else ([path] if path.is_file() else [])
    if not files:
        return None
    if path.is_dir() and name is None:  # a folder of per-fit tables: only the study's variants' files
        files = [f for f in files if any(f.name.startswith(f"{v}_L") for v in variants)]
        if not files:
            return None
    table = read(files, name)
    if "variant" in table:
        table = table[table.variant.isin(variants)]
    if "layer" in table:
        table = table[table.layer == 0]
    return table.reset_index(drop=True)


def write_record(results, plan: dict, out, overlay, retrieval=None) -> list[str]:
    """Copy what the findings read from a run's ``results`` folder into the record folder ``out``: the stamp,
    the manifest (where there is one), the overlay, the tables of the plan's arms (``RECORD_TABLES``) and the
    retrieval examples (a Parquet file, where given). Returns what was written."""
    from lostmid import io

    out, results = Path(out), Path(results)
    stamp = results / "study" / "plan_stamp.json"
    if not stamp.is_file():
        raise ConfigError(f"{stamp} does not exist: the run did not begin under rule study_plan_stamp")
    variants = [v for arm in plan["run"]["arms"].values() for v in arm["variants"]]
    written = []
    for name, text in (
        ("plan_stamp.json", stamp.read_text()),
        ("overlay.yaml", Path(overlay).read_text()),
        ("manifest.json", (results / "manifest.json").read_text() if (results / "manifest.json").is_file() else None),
    ):
        if text is not None:
            io.write_text(text, out / name)
            written.append(name)
    for name, (source, table_name) in RECORD_TABLES.items():
        table = collected(results, source, table_name, variants)
        if table is not None:
            io.write_parquet(table, out / "tables" / f"{name}.parquet")
            written.append(f"tables/{name}.parquet")
    if retrieval is not None:
        io.write_parquet(pd.read_parquet(retrieval), out / "tables" / "retrieval.parquet")
        written.append("tables/retrieval.parquet")
    return written


def read_record(run) -> Record:
    """The record folder ``run`` as written by ``write_record`` (any part may be missing, the folder too: not yet
    run)."""
    run = Path(run)
    if not run.is_dir():
        log.warning("run record %s does not exist: every endpoint reads 'not yet run'", run)
        return Record()
    tables = {
        name: pd.read_parquet(path)
        for name in (*RECORD_TABLES, "retrieval")
        if (path := run / "tables" / f"{name}.parquet").is_file()
    }
    texts = {
        name: json.loads(path.read_text())
        for name in ("stamp", "manifest")
        if (path := run / ("plan_stamp.json" if name == "stamp" else "manifest.json")).is_file()
    }
    return Record(**tables, **texts)


def plan_status(repo, plan, stamp: dict | None) -> tuple[bool, str]:
    """(whether the endpoints are primary, why): the plan's bytes are those the run began under, and the commit
    that last changed it is the run's commit or an ancestor of it."""
    if stamp is None:
        return False, "the record has no plan stamp: the run's plan is unknown"
    now = sha256(plan)
    if now != stamp["plan_sha256"]:
        return False, f"the plan changed after the run began (sha256 {now[:12]} now, {stamp['plan_sha256'][:12]} then)"
    committed = plan_commit(repo, plan)
    if committed is None or stamp.get("run_commit") is None:
        return False, "the plan's or the run's commit is unknown"
    if committed != stamp["plan_commit"]:
        return (
            False,
            f"the plan was committed again after the run began ({committed[:12]}, then {stamp['plan_commit']})",
        )
    ancestor = git(repo, "merge-base", "--is-ancestor", committed, stamp["run_commit"])
    if ancestor.returncode:
        return False, f"the plan's commit {committed[:12]} is not an ancestor of the run's {stamp['run_commit'][:12]}"
    return True, f"plan {committed[:12]} precedes the run's commit {stamp['run_commit'][:12]}; sha256 unchanged"
