"""Issue 55's fix plan (study/fix_plan.yaml) as the fix run's jobs and rules read it, torch-free (the workflow
lists its jobs from here): the recipe, the record's files and the held-out windows of each job.

    read_fix_plan(path)        the plan, checked for the keys the jobs read (one line where one is missing)
    config_plan(config)        the plan of a config with a ``fix`` block (None without one)
    block_jobs(plan, size)     (arm, n, b) of every job of ``size`` held-out windows
    block_draws(plan, n, b, size), window_path, selection_path, none_path: which windows, which files
"""

from __future__ import annotations

from pathlib import Path

import yaml

from lostmid.errors import ConfigError

ARMS = ("blog", "fitm")  # the fix arms the run evaluates (none is read from its own record)
PLAN_KEYS = (
    ("arms", "blog", "fit"),
    ("arms", "fitm", "calibration"),
    ("run", "record"),
    ("run", "none_record"),
    ("run", "windows_by_n"),
)


def read_fix_plan(path) -> dict:
    """The fix plan as a mapping, with ``path`` kept (its file is what the run's manifest records); one line where
    a key the jobs read is missing."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"fix plan {path} does not exist")
    plan = yaml.safe_load(path.read_text())
    for keys in PLAN_KEYS:
        found = plan
        for key in keys:
            found = found.get(key) if isinstance(found, dict) else None
        if found in (None, ""):
            raise ConfigError(f"fix plan {path}: lacks {'.'.join(keys)}")
    return {**plan, "path": str(path)}


def config_plan(config: dict) -> dict | None:
    """The fix plan a config's ``fix`` block runs (its ``plan`` key), None without the block; one line where the
    block has no plan."""
    if config.get("fix") is None:
        return None
    if not config.get("plan"):
        raise ConfigError("config key fix: the fix run needs the plan it answers (config key plan)")
    return read_fix_plan(config["plan"])


def selection_jobs(plan: dict) -> list[int]:
    """The lengths n of the calibration's strength choice (one job each)."""
    return [int(n) for n in plan["arms"]["fitm"]["calibration"]["selection_windows"]]


def gate_jobs(plan: dict) -> list[int]:
    """The lengths n of the gates' readings (one job each; none where the plan has no gates)."""
    return [int(n) for n in plan["run"].get("gates", {}).get("windows_by_n", {})]


def record(plan: dict) -> Path:
    """The fix run's record folder (fits/, selection/, windows/)."""
    return Path(plan["run"]["record"])


def block_draws(plan: dict, n: int, block: int, size: int) -> range:
    """The held-out windows k of the ``block``-th job of ``size`` windows at n."""
    count = plan["run"]["windows_by_n"].get(n)
    if count is None or not 0 <= block * size < count:
        raise ConfigError(f"fix: block {block} of {size} windows at n = {n} is beyond the plan's held-out windows")
    return range(block * size, min((block + 1) * size, count))


def block_jobs(plan: dict, size: int) -> list[tuple[str, int, int]]:
    """(arm, n, b) of every fix arm's job at every n of the held-out windows."""
    counts = plan["run"]["windows_by_n"].items()
    return [(arm, n, b) for arm in ARMS for n, count in counts for b in range(-(-count // size))]


def window_path(plan: dict, arm: str, n: int, k: int) -> Path:
    """The record's file of a fix arm's held-out window k at n."""
    return record(plan) / "windows" / f"{arm}_n{n}_w{k}.parquet"


def none_path(plan: dict, n: int, k: int) -> Path:
    """The none arm's file of window k at n in its own record (the retrieval stage's name)."""
    return Path(plan["run"]["none_record"]) / "windows" / f"pretrained_n{n}_w{k}.parquet"


def selection_path(plan: dict, n: int, strength: float, k: int) -> Path:
    """The record's file of the calibration at ``strength`` on selection window k at n."""
    return record(plan) / "selection" / f"fitm_t{strength:g}_n{n}_w{k}.parquet"
