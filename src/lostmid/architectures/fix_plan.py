"""Issue 55's fix plan (study/fix_plan.yaml) as the fix run's jobs and rules read it, torch-free (the workflow
lists its jobs from here): the recipe, the fits, the record's files and the held-out windows of each job.

The fitted bias and the calibration are random draws (their window, their start), so the plan makes F of each
(``fits``: fit i on reserved window ``fits.windows[i]``) and nests the held-out windows in them: held-out window
k is evaluated under fit ``fit_of(plan, k)`` = k mod F, in both fix arms (so blog and fitm pair within a fit).

    read_fix_plan(path)        the plan, checked for the keys the jobs read and for its fits (one line each)
    config_plan(config)        the plan of a config with a ``fix`` block (None without one)
    fit_count, fit_window, fit_of   F, fit i's reserved window, the fit of held-out window k
    gate_first(plan)           (n, arm, floor) of the plan's gate-first order (run.gate_first), None without one
    held_out_count(plan, n, gate_passed)   the held-out windows that run at n (the floor only where the gate failed)
    blocks(plan, n, size)      the held-out windows of each job of ``size`` at n (never across the floor)
    block_jobs(plan, size, gate_passed)    (arm, n, b) of every job that runs
    block_draws(plan, n, b, size), window_path, selection_path, none_path, bias_path: which windows, which files

The gate-first order (``run.gate_first``): at its n the first ``floor`` held-out windows run in any case and the
others only where the gate of its arm at that n passes (a failed gate there stops every primary at n, so they
could decide nothing); the workflow asks the gate (a checkpoint) before it lists them.
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
    first = plan["run"].get("gate_first")
    floor = [(first["n"], first["floor"])] if first else []
    counts = [*plan["run"]["windows_by_n"].items(), *plan["run"].get("gates", {}).get("windows_by_n", {}).items()]
    for n, windows_at_n in counts + floor:
        if int(windows_at_n) % count:
            raise ConfigError(f"fix plan {path}: {windows_at_n} windows at n = {n} is not a multiple of {count} fits")
    if first:
        n, least = int(first["n"]), int(plan["run"].get("floor_by_n", {}).get(first["n"], 0))
        gated = int(plan["run"].get("gates", {}).get("windows_by_n", {}).get(first["n"], 0))
        if not max(least, gated) <= int(first["floor"]) <= int(plan["run"]["windows_by_n"].get(n, -1)):
            raise ConfigError(f"fix plan {path}: run.gate_first.floor {first['floor']} at n = {n} must hold the "
                              f"issue's floor ({least}) and the gate windows ({gated}) and lie within the held-out "
                              "windows")  # fmt: skip


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


def gate_windows(plan: dict, n: int) -> range:
    """The gate windows at n: the first 2F held-out windows (each fit's first two), one job each."""
    return range(int(plan["run"]["gates"]["windows_by_n"][n]))


def record(plan: dict) -> Path:
    """The fix run's record folder (fits/, selection/, windows/, gate/)."""
    return Path(plan["run"]["record"])


def gate_first(plan: dict) -> tuple[int, str, int] | None:
    """(n, arm, floor) of the plan's gate-first order (``run.gate_first``): at n the first ``floor`` held-out
    windows run in any case, the others only where ``arm``'s gate at n passes; None where the plan has none."""
    first = plan["run"].get("gate_first")
    return None if first is None else (int(first["n"]), str(first["arm"]), int(first["floor"]))


def held_out_count(plan: dict, n: int, gate_passed: bool = True) -> int:
    """The held-out windows that run at n: all the plan's, but only the floor at the gate-first n where its gate
    did not pass."""
    first = gate_first(plan)
    if first is not None and first[0] == n and not gate_passed:
        return first[2]
    return int(plan["run"]["windows_by_n"][n])


def blocks(plan: dict, n: int, size: int) -> list[range]:
    """The held-out windows k of each job of ``size`` windows at n, in order: at the gate-first n those below the
    floor and those from it blocked apart, so that the run can stop at the floor."""
    count, first = int(plan["run"]["windows_by_n"][n]), gate_first(plan)
    edges = [0, first[2], count] if first is not None and first[0] == n else [0, count]
    return [range(k, min(k + size, stop)) for start, stop in zip(edges, edges[1:]) for k in range(start, stop, size)]


def block_draws(plan: dict, n: int, block: int, size: int) -> range:
    """The held-out windows k of the ``block``-th job of ``size`` windows at n (``blocks``)."""
    found = blocks(plan, n, size) if n in plan["run"]["windows_by_n"] else []
    if not 0 <= block < len(found):
        raise ConfigError(f"fix: block {block} of {size} windows at n = {n} is beyond the plan's held-out windows")
    return found[block]


def block_jobs(plan: dict, size: int, gate_passed: bool = True) -> list[tuple[str, int, int]]:
    """(arm, n, b) of every fix arm's job at every n of the held-out windows that run (``held_out_count``: at the
    gate-first n the blocks beyond the floor only where ``gate_passed``)."""
    return [
        (arm, n, b)
        for arm in ARMS
        for n in plan["run"]["windows_by_n"]
        for b, draws in enumerate(blocks(plan, n, size))
        if draws.stop <= held_out_count(plan, n, gate_passed)
    ]


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
