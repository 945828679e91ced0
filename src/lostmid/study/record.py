"""The study's run record (``runs/study``) and whether its endpoints are primary.

The run's manifest (``lostmid.manifest``; ``plan: study/plan.yaml`` in config/study.yaml) records, for every
invocation, the commit it ran from and the plan's SHA-256 and commit. An endpoint is called primary only
when the plan the findings read has the SHA-256 every invocation recorded, that SHA-256 is the plan's as
committed at the invocation's commit (``git show <commit>:<plan>``: a run begun from an edited, uncommitted
plan is not primary), and the plan's commit is an ancestor of (or equal to) every invocation's commit
(``plan_status``). Any plan file inside the repository is checked the same way.

The record is read whole (``read_record``, lostmid.records): the folder, its manifest with at least one
invocation, its overlay with the SHA-256 the manifest records, and every table the findings read
(``RECORD_KEYS``: present, readable, keys unique, measured columns finite); else one line, nothing written.
"""

from __future__ import annotations

import re
from dataclasses import make_dataclass
from pathlib import Path

import pandas as pd
import yaml

from lostmid import io, records
from lostmid import manifest as run_manifest
from lostmid.errors import ConfigError, InputError
from lostmid.tables.keys import read
from lostmid.tables.run_cost import job_costs

# Record name -> (the workflow's folder or file under results/, the per-run table's name for the column check).
RECORD_TABLES = {
    "failure": ("failure", "failure"),
    "influence": ("influence", "influence"),
    "bias_summary": ("bias_fit_summary", None),
    "length_init": ("length/init.parquet", None),
    "length_fit": ("length/fit_profiles.parquet", None),
}


# Record name -> (the columns that make a row, the numeric columns that may be missing). Every other numeric
# column must be finite.
RECORD_KEYS = {
    "failure": (("variant", "L", "depth", "seed", "step", "flag_pos"), ()),
    "influence": (("variant", "L", "depth", "seed", "step", "layer", "position"), ()),
    "bias_summary": (
        ("variant", "L", "depth", "block", "target", "positions", "fit_model", "param", "heldout_init"),
        (),
    ),
    "length_init": (("L", "residual", "depth", "seed", "position"), ()),
    "length_fit": (("L", "depth", "residual", "bias", "heldout_init", "position"), ("fitted_at",)),
    "retrieval": (
        ("model", "weights", "n", "window", "task", "q", "share", "draw"),
        ("influence_task", "influence_free"),
    ),
}


# ``Record(failure=..., ..., manifest=..., overlay=...)``: the run record as read back, its tables (None where the
# record has none), the run's manifest and its overlay as run.
Record = make_dataclass(
    "Record", [(name, "pd.DataFrame | None", None) for name in (*RECORD_KEYS, "manifest", "overlay")]
)


def collected(results, source: str, name: str | None, variants) -> pd.DataFrame | None:
    """One table of the run under ``results``, restricted to ``variants`` (and, for influence, to layer 0: the
    input density the study reads); None when the run has not written it."""

    path = Path(results) / source
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else ([path] if path.is_file() else [])
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


def fit_traces(results, variants) -> pd.DataFrame | None:
    """Every start's convergence trace of every fit of B among ``variants`` (results/bias_fit_iterations/, one file
    per fit), as one table whose rows name their fit (variant, L, depth); None when the run fitted none."""
    parts = []
    for variant in variants:
        for path in sorted((Path(results) / "bias_fit_iterations").glob(f"{variant}_L*_M*.parquet")):
            L, depth = re.fullmatch(rf"{re.escape(variant)}_L(\d+)_M(\d+)\.parquet", path.name).groups()
            parts.append(read([path]).assign(variant=variant, L=int(L), depth=int(depth)))
    return pd.concat(parts, ignore_index=True) if parts else None


def retrieval_examples(record) -> pd.DataFrame:
    """The pretrained model's examples of a retrieval run's record folder (lostmid.architectures.retrieval_record:
    its window records, checked against its overlay's config hash)."""
    from lostmid.architectures.retrieval_record import record_examples, record_settings

    examples = record_examples(Path(record), record_settings(Path(record)))
    return examples[examples.weights == "pretrained"].reset_index(drop=True)


def write_record(results, plan: dict, out, overlay, retrieval=None, force: bool = False) -> list[str]:
    """Copy what the findings read from a run's ``results`` folder into the record folder ``out``: the manifest,
    the overlay, the tables of the plan's arms (``RECORD_TABLES``), their fits' convergence traces
    (``fit_traces``: tables/bias_iterations.parquet), what each job cost (lostmid.tables.run_cost.job_costs:
    tables/job_cost.parquet) and, where a retrieval run's record folder is given, its pretrained model's
    examples. Everything is read before anything is written, and a committed record of another run (its manifest
    differs) is replaced only with ``force``. Returns what was written."""

    out, results = Path(out), Path(results)
    manifest = run_manifest.read(results / run_manifest.FILE)  # one line when the run has none
    records.check_overlay(overlay, manifest)  # the overlay the run ran
    committed = out / run_manifest.FILE
    if not force and records.tracked(committed) and run_manifest.read(committed) != manifest:
        raise InputError(f"{out} holds the committed record of another run: write elsewhere with --out, or --force")
    variants = [v for arm in plan["run"]["arms"].values() for v in arm["variants"]]
    tables = {
        name: collected(results, source, table_name, variants) for name, (source, table_name) in RECORD_TABLES.items()
    }
    tables["bias_iterations"] = fit_traces(results, variants)
    tables["job_cost"] = job_costs(results) if (results / "logs").is_dir() else None
    if retrieval is not None:
        tables["retrieval"] = retrieval_examples(retrieval)
    run_manifest.write(out / run_manifest.FILE, manifest)
    io.write_text(Path(overlay).read_text(), out / "overlay.yaml")
    written = [run_manifest.FILE, "overlay.yaml"]
    for name, table in tables.items():
        if table is not None:
            io.write_parquet(table, out / "tables" / f"{name}.parquet")
            written.append(f"tables/{name}.parquet")
    return written


def read_record(run, names=tuple(RECORD_KEYS)) -> Record:
    """The record folder ``run`` as written by ``write_record``, checked whole (lostmid.records): one line
    naming the file and the problem when the folder, its manifest, its overlay or a table of ``names`` (every
    table of ``RECORD_KEYS`` unless fewer are named; the others are None) is missing or wrong."""

    run = Path(run)
    if not run.is_dir():
        raise InputError(f"{run}: no such run record folder")
    manifest = run_manifest.read(run / run_manifest.FILE)
    records.check_overlay(run / records.OVERLAY, manifest)
    tables = {name: records.read_table(run / "tables" / f"{name}.parquet", *RECORD_KEYS[name]) for name in names}
    return Record(**tables, manifest=manifest, overlay=yaml.safe_load((run / records.OVERLAY).read_text()))


def plan_status(repo, plan, manifest: dict | None) -> tuple[bool, str]:
    """(whether the endpoints are primary, why): every invocation of the run recorded the plan with the SHA-256
    it has now, which is the plan's as committed at the invocation's commit, and the commit that last changed
    it is an ancestor of (or equal to) every invocation's commit. A plan outside ``repo`` is one line."""
    if manifest is None:
        return False, "the record has no manifest: the plan the run began under is unknown"
    root = Path(repo).resolve()
    try:
        path = Path(plan).resolve().relative_to(root).as_posix()
    except ValueError:
        raise ConfigError(f"plan {plan} lies outside the repository {repo}: give a plan committed in it") from None
    now = run_manifest.recorded(root, path)
    for item in manifest["invocations"]:
        entries = [r for r in item.get("records", []) if r["path"] == path]
        commit = str(item.get("commit"))[:12]
        if not entries:
            return False, f"an invocation of the run (commit {commit}) recorded no plan {path}"
        then = entries[0]["sha256"]
        if then != now["sha256"]:
            return False, f"the plan changed after the run began (sha256 {now['sha256'][:12]} now, {then[:12]} then)"
        if now["commit"] is None or item.get("commit") is None:
            return False, "the plan's or the run's commit is unknown"
        if run_manifest.committed_sha256(root, item["commit"], path) != then:
            return False, (
                f"the run (commit {commit}) began from a plan {path} that is not the one committed at its commit "
                f"(sha256 {then[:12]} recorded)"
            )
        if not run_manifest.is_ancestor(root, now["commit"], item["commit"]):
            ancestor = f"the plan's commit {now['commit'][:12]} is not an ancestor of the run's {item['commit'][:12]}"
            return False, ancestor
    return True, f"plan {now['commit'][:12]} precedes the run's commit; its sha256 unchanged since the run began"


def plan_line(manifest: dict | None) -> str:
    """The plan's commit beside the run's, from the manifest."""
    if manifest is None:
        return "- Plan and run: no run record yet."
    plans = manifest.get("records") or []
    plan = ", ".join(f"`{r['path']}` at commit `{r['commit']}` (sha256 `{r['sha256'][:16]}`)" for r in plans)
    return f"- Plan: {plan or 'none recorded'}.\n- Run: commit(s) `{', '.join(run_manifest.commits(manifest))}`."
