"""Issue 55's fix plan (study/fix_plan.yaml) as the fix run's jobs and rules read it, torch-free (the workflow
lists its jobs from here): the recipe, the fits, the record's files and the held-out windows of each job.

The fitted bias and the calibration are random draws (their window, their start), so the plan makes F of each
(``fits``: fit i on reserved window ``fits.windows[i]``) and nests the held-out windows in them: held-out window
k is evaluated under fit ``fit_of(plan, k)`` = k mod F, in both fix arms (so blog and fitm pair within a fit).

    read_fix_plan(path)        the plan, checked for the keys the jobs read and for its fits (one line each)
    config_plan(config)        the plan of a config with a ``fix`` block (None without one)
    fit_count, fit_window, fit_of   F, fit i's reserved window, the fit of held-out window k
    block_jobs(plan, size)     (arm, n, b) of every job of ``size`` held-out windows
    block_draws(plan, n, b, size), window_path, selection_path, none_path, bias_path: which windows, which files
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
    ("fits", "count"),
    ("fits", "windows"),
    ("fits", "reserved_from"),
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
    check_fits(plan, path)
    return {**plan, "path": str(path)}


def check_fits(plan: dict, path) -> None:
    """The plan's F fits on F distinct reserved windows (k >= ``fits.reserved_from``, none of ``fits.excluded``:
    the pilot's), and every held-out and gate count at n a multiple of F (each fit the same number of windows);
    one line otherwise."""
    fits = plan["fits"]
    windows, count = [int(k) for k in fits["windows"]], int(fits["count"])
    excluded = {int(k) for k in fits.get("excluded", [])}
    if len(windows) != count or len(set(windows)) != count:
        raise ConfigError(f"fix plan {path}: fits.windows must be {count} distinct windows, one per fit")
    if min(windows) < int(fits["reserved_from"]) or excluded & set(windows):
        raise ConfigError(f"fix plan {path}: fits.windows must be reserved windows (k >= {fits['reserved_from']}, "
                          f"not {sorted(excluded)})")  # fmt: skip
    counts = [*plan["run"]["windows_by_n"].items(), *plan["run"].get("gates", {}).get("windows_by_n", {}).items()]
    for n, windows_at_n in counts:
        if int(windows_at_n) % count:
            raise ConfigError(f"fix plan {path}: {windows_at_n} windows at n = {n} is not a multiple of {count} fits")


def config_plan(config: dict) -> dict | None:
    """The fix plan a config's ``fix`` block runs (its ``plan`` key), None without the block; one line where the
    block has no plan."""
    if config.get("fix") is None:
        return None
    if not config.get("plan"):
        raise ConfigError("config key fix: the fix run needs the plan it answers (config key plan)")
    return read_fix_plan(config["plan"])


def fit_count(plan: dict) -> int:
    """F, the number of fits of each fix arm."""
    return int(plan["fits"]["count"])


def fit_window(plan: dict, fit: int) -> int:
    """The reserved window (the draw's k at the fits' n) of fit ``fit`` (0 .. F - 1); one line beyond F."""
    if not 0 <= fit < fit_count(plan):
        raise ConfigError(f"fix: fit {fit} is beyond the plan's {fit_count(plan)} fits")
    return int(plan["fits"]["windows"][fit])


def fit_of(plan: dict, k: int) -> int:
    """The fit a held-out window k is evaluated under (both fix arms): k mod F."""
    return int(k) % fit_count(plan)


def gate_jobs(plan: dict) -> list[int]:
    """The lengths n of the gates' readings (one job each; none where the plan has no gates)."""
    return [int(n) for n in plan["run"].get("gates", {}).get("windows_by_n", {})]


def record(plan: dict) -> Path:
    """The fix run's record folder (fits/, selection/, windows/, gate/)."""
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


def bias_path(plan: dict, arm: str, fit: int) -> Path:
    """The record's file of a fix arm's fit (its .json beside it: its window, loss or strength, SHA-256)."""
    return record(plan) / "fits" / f"{arm}_{fit}.pt"


def selection_path(plan: dict, fit: int, strength: float) -> Path:
    """The record's file of calibration ``fit`` at ``strength`` on its own window (its strength's choice)."""
    calibration = plan["arms"]["fitm"]["calibration"]
    k = fit_window(plan, fit)
    return record(plan) / "selection" / f"fitm_{fit}_t{strength:g}_n{calibration['n']}_w{k}.parquet"
