"""Atomic file writes: a temp file beside the target, then a rename.

A killed job leaves no half-written output. Temp names start with '.', which
pyarrow's dataset discovery skips, so ``pd.read_parquet(folder)`` never sees them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temp path in the target's folder; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_parquet(df, path) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def save_torch(obj, path) -> None:
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def save_figure(fig, path, **kwargs) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", **kwargs)


def write_text(text: str, path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
