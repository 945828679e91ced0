"""Atomic file writes: a temp file beside the target, then a rename.

A killed job leaves no half-written output. Temp names start with '.', which
pyarrow's dataset discovery skips, so ``pd.read_parquet(folder)`` never sees them.
Outputs get the permissions of an ordinary new file (0666 less the umask), not the 0600 of
a temp file, so teammates sharing a results folder can read them. A job removes the temp
files that a killed earlier attempt at its own target left behind. A write that fails for
the operating system's reasons (read-only folder, full disk) is an OutputError naming the file.
A damaged input is moved aside (``move_aside``), never deleted, so that the next run rebuilds it.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import re
import tempfile
from pathlib import Path

from lostmid.errors import ConfigError, OutputError


@functools.lru_cache(maxsize=1)
def umask() -> int:
    """The process's umask, read once: from /proc where the kernel reports it (reading it with
    os.umask means setting it, for a moment, for every thread)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def stale_temp_files(path) -> list[Path]:
    """Temp files of ``path`` left by killed writes: ``.{name}.*.tmp`` in its folder."""
    path = Path(path)
    return [Path(p) for p in glob.glob(os.path.join(glob.escape(str(path.parent)), f".{glob.escape(path.name)}.*.tmp"))]


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temp path in the target's folder; rename it onto ``path`` only if the block succeeds.

    Temp files of the same target left by a killed earlier write are removed first: Snakemake
    runs one job per output, so no other writer of this target is alive.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in stale_temp_files(path):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as err:
        raise OutputError(path, err) from err
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(err, OSError) and not isinstance(err, OutputError):
            raise OutputError(path, err) from err
        raise


def damaged_path(path) -> Path:
    """Where a damaged input is moved: ``.{name}.damaged`` beside it, hidden like the temp files, so that
    ``pd.read_parquet(folder)`` never reads it and the workflow sees the file as missing."""
    path = Path(path)
    return path.with_name(f".{path.name}.damaged")


def move_aside(path) -> Path | None:
    """Move the damaged input ``path`` to ``damaged_path`` (replacing an earlier one): kept for a look,
    out of the way of its rebuild. None if it is gone already (another job moved it)."""
    target = damaged_path(path)
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    return target


def write_parquet(df, path) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def save_torch(obj, path) -> None:
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


# No creation date or software version in a figure's file: the same figure is the same bytes, so a page
# regenerated from its record leaves git status clean.
REPRODUCIBLE_METADATA = {
    "png": {"Software": None},
    "pdf": {"CreationDate": None, "Producer": None},
    "svg": {"Date": None},
}


def save_figure(fig, path, **kwargs) -> None:
    kind = Path(path).suffix.lstrip(".") or "png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=kind, metadata=REPRODUCIBLE_METADATA.get(kind), **kwargs)


def write_text(text: str, path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def between_markers(text: str, begin: str, end: str, block: str, name: str) -> str:
    """``text`` with what stands between its lines ``begin`` and ``end`` replaced by ``block`` (verbatim).

    Whole lines only (a page that names a marker in its prose is not cut there); a text without each
    marker exactly once, in this order, is a ConfigError naming ``name``."""
    lines = text.splitlines(keepends=True)
    at = [[i for i, line in enumerate(lines) if line.strip() == marker] for marker in (begin, end)]
    if len(at[0]) != 1 or len(at[1]) != 1 or at[1][0] < at[0][0]:
        raise ConfigError(f"{name} lacks the lines {begin!r} and {end!r} (once each, in this order)")
    return "".join(lines[: at[0][0] + 1]) + block + "".join(lines[at[1][0] :])


def write_between_markers(path, begin: str, end: str, block: str) -> None:
    """The file ``path`` with ``between_markers`` applied (an atomic write)."""
    write_text(between_markers(Path(path).read_text(), begin, end, block, str(path)), path)


# Prose lines of a Markdown page longer than PROSE_LIMIT characters are wrapped at PROSE_WIDTH (wrap_prose);
# tables, code, headings and comments are left as they are (tests/test_pages.py checks every page).
PROSE_LIMIT = 200
PROSE_WIDTH = 110
_LIST_ITEM = re.compile(r"^(\s*)([-*+] |\d+[.)] |> )?")
_BLOCK_START = re.compile(r"^([-*+>#|=]|\d+[.)]|`{3}|<)")


def _wrap_line(line: str, width: int) -> list[str]:
    """One long prose line as several, a list item's continuation indented under its text; no line starts
    with what Markdown would read as a new block (a list marker, a heading, a quote, a table, a fence)."""
    lead, marker = _LIST_ITEM.match(line).groups()
    first = lead + (marker or "")
    indent = lead + " " * len(marker or "") if marker != "> " else lead + "> "
    out, current = [], first
    for word in line[len(first) :].split(" "):
        starts_block = bool(_BLOCK_START.match(word))
        if current not in (first, indent) and len(current) + 1 + len(word) > width and not starts_block:
            out.append(current)
            current = indent + word
        else:
            current += ("" if current in (first, indent) else " ") + word
    out.append(current)
    return out


def wrap_prose(text: str, limit: int = PROSE_LIMIT, width: int = PROSE_WIDTH) -> str:
    """``text`` (Markdown) with each prose line longer than ``limit`` wrapped at ``width``; lines of tables,
    code (fenced or indented by four spaces), headings and HTML comments are kept whole."""
    out, fenced = [], False
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("```"):
            fenced = not fenced
        if (
            fenced
            or len(line) <= limit
            or stripped.startswith(("|", "#", "<!--", "```"))
            or line.startswith(("    ", "\t"))
        ):
            out.append(line)
        else:
            out.extend(_wrap_line(line.rstrip(), width))
    return "\n".join(out)
