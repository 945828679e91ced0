"""A run record checked whole before a page is written from it, and a page written only over its own record's.

A page is written from a record folder (``runs/<name>/``: its manifest, its overlay as run, its tables) only
after every part the page reads is checked (``check_overlay``, ``read_table``): the overlay has the SHA-256
the run's manifest recorded for the config it ran, each table is present and readable, its keys are unique and
its measured columns finite. A record that fails a check is one line naming the file and the problem
(InputError without a path: a committed record is rerun, never moved aside), and nothing is written.

A page is written atomically (lostmid.io.write_text), and over a file git tracks only when that file was
written from the same record (``refuse_other``): its text holds the new page's ``Run:`` line (the run's
commits and config hashes, lostmid.manifest.identity). Another record's page replaces it only with ``force``
(the commands' ``--force``), so that a command run from a fresh checkout never rewrites a committed page.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from lostmid import manifest as run_manifest
from lostmid.errors import InputError

OVERLAY = "overlay.yaml"  # a record's config as run


def check_overlay(overlay, manifest: dict) -> None:
    """The overlay ``overlay`` (a record's ``overlay.yaml``) is the config every invocation of the manifest's run
    ran last (the overlay as given; a record of the default config keeps that config itself): the same SHA-256."""
    overlay = Path(overlay)
    if not overlay.is_file():
        raise InputError(f"{overlay}: missing: the record keeps no config as run")
    actual = run_manifest.sha256(overlay)
    for number, item in enumerate(manifest["invocations"], 1):
        if not item.get("configs"):
            raise InputError(f"{overlay}: the manifest's invocation {number} records no config to check it against")
        ran = item["configs"][-1]
        if ran["sha256"] != actual:
            raise InputError(
                f"{overlay}: sha256 {actual[:12]} is not the {ran['sha256'][:12]} the manifest records for "
                f"`{run_manifest.shown(ran['path'], item.get('workdir'))}` (invocation {number}): "
                "the overlay was edited after the run"
            )


def read_table(path, keys=(), nullable=(), finite: bool = True) -> pd.DataFrame:
    """The Parquet table ``path`` (a file or a folder of them) after its checks: readable, with the columns
    ``keys`` unique together, and (``finite``) every numeric column but those in ``nullable`` finite. Each
    failure is one line naming the file."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: missing: the record is incomplete")
    try:
        table = pd.read_parquet(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InputError(f"{path}: unreadable ({reason})") from None
    absent = [key for key in keys if key not in table]
    if absent:
        raise InputError(f"{path}: lacks the key columns {absent}")
    repeated = table[table.duplicated(list(keys), keep=False)] if keys else table.iloc[:0]
    if len(repeated):
        first = repeated.iloc[0]
        at = ", ".join(f"{key} {first[key]}" for key in keys)
        raise InputError(f"{path}: {len(repeated)} rows share their keys ({at}, ...): each must be one row")
    for column in table.columns:
        values = table[column]
        if not finite or column in nullable or values.dtype == bool or not pd.api.types.is_numeric_dtype(values):
            continue
        bad = ~np.isfinite(values.to_numpy(np.float64))
        if bad.any():
            raise InputError(
                f"{path}: column {column} has {int(bad.sum())} missing or infinite values (first at row "
                f"{int(np.argmax(bad))})"
            )
    return table


def tracked(path) -> bool:
    """Whether git tracks the file ``path`` (False outside a checkout)."""
    path = Path(path).resolve()
    if not path.exists():
        return False
    done = subprocess.run(
        ["git", "-C", str(path.parent), "ls-files", "--error-unmatch", path.name], capture_output=True, check=False
    )
    return done.returncode == 0


def same_record(path, identity: str) -> bool:
    """Whether the file ``path`` may be replaced by a page of the record ``identity``: it is not tracked by
    git, or its text holds that record's identity."""
    return not tracked(path) or " ".join(identity.split()) in " ".join(Path(path).read_text().split())


def refuse_other(path, identity: str, force: bool) -> None:
    """One line, unless ``force``, when ``path`` is a committed page written from another record."""
    if not force and not same_record(path, identity):
        raise InputError(
            f"{path} is committed and was written from another record (it lacks this run's line "
            f"'{identity}'): write elsewhere with --out, or pass --force to replace it"
        )
