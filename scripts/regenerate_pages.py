#!/usr/bin/env python3
"""Every generated page of the repository, written again from the committed run records (runs/) and the
code: the one command that regenerates them all.

    python scripts/regenerate_pages.py                    # write every page (from the repository root or not)
    python scripts/regenerate_pages.py results findings   # only these (names: --list)
    python scripts/regenerate_pages.py --check            # write them into a temporary folder; name the stale ones
    python scripts/regenerate_pages.py --list             # each page, its outputs and its command

On a clean checkout the first command leaves ``git status`` clean; tests/test_pages.py fails when a committed
page differs from what its writer writes. ``PAGES`` is the one list of generated pages: a new generated page
(or block of a page) gets an entry there. Each entry reads its inputs from the repository (its run record
under runs/, the plan, the source) and writes its outputs under ``out``, a folder laid out like the
repository (the repository itself, or a temporary folder for ``--check`` and the test); ``pages`` are the
Markdown files the test compares, ``artifacts`` the figures and tables written beside them.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))


@dataclass(frozen=True)
class Page:
    name: str
    command: str  # the command that writes it on its own (what the page itself says)
    pages: tuple[str, ...]  # Markdown files it writes (paths relative to the repository)
    write: Callable[[Path], None]  # writes every output under ``out`` (a folder laid out like the repository)
    artifacts: tuple[str, ...] = field(default=())  # figures and tables it writes beside them (globs)


def _results(out: Path) -> None:
    from lostmid import io
    from lostmid.cli.results import page

    target = Path("runs/default/results.md")  # beside the record it is written from
    io.write_text(page(Path("runs/default"), out=target), out / target)


# The second study's record: once committed, the findings page answers both studies
# (lostmid.pages.study2.write_combined).
STUDY2 = "runs/study2"


def _findings(out: Path) -> None:
    from lostmid.pages.findings import write_findings
    from lostmid.pages.study2 import write_combined

    if out != REPO:  # the README's findings block is written into a copy of the README
        shutil.copyfile(REPO / "README.md", out / "README.md")
    page, figures, readme = out / "docs" / "findings.md", out / "docs" / "figures", out / "README.md"
    if (REPO / STUDY2).is_dir():
        write_combined("study/plan.yaml", "runs/study", "study/plan2.yaml", STUDY2, page, figures, ".", readme)
    else:
        write_findings("study/plan.yaml", "runs/study", page, figures, ".", readme)


def _architecture(out: Path) -> None:
    from lostmid import io

    import import_graph

    io.write_text(import_graph.architecture(REPO / "src"), out / "docs" / "architecture.md")


def _retrieval(out: Path) -> None:
    from lostmid.cli.retrieval import write_page

    write_page(Path("runs/smollm2_retrieval"), out / "runs" / "smollm2_retrieval")


def _evidence(out: Path) -> None:
    from lostmid import io
    from lostmid.evidence import registry
    from lostmid.pages import evidence

    page = (REPO / "docs" / "evidence.md").read_text()
    for name, block in (
        ("claims", evidence.declarations(registry.CLAIMS)),
        ("deviations", evidence.deviations_markdown()),
    ):
        page = io.between_markers(page, f"<!-- {name}: begin -->", f"<!-- {name}: end -->", block, "docs/evidence.md")
    io.write_text(page, out / "docs" / "evidence.md")


def _config_readme(out: Path) -> None:
    import config_readme

    from lostmid import io

    io.write_text(config_readme.page(), out / "config" / "README.md")


PAGES = [
    Page(
        "results",
        "lostmid results-page --results runs/default --out runs/default/results.md",
        ("runs/default/results.md",),
        _results,
    ),
    Page(
        "findings",
        "lostmid findings --run runs/study --readme README.md"
        + (f" --study2-run {STUDY2}" if (REPO / STUDY2).is_dir() else ""),
        ("docs/findings.md", "README.md"),
        _findings,
        ("docs/figures/findings_*",),
    ),
    Page(
        "architecture",
        "python scripts/import_graph.py --write docs/architecture.md",
        ("docs/architecture.md",),
        _architecture,
    ),
    Page(
        "retrieval",
        "lostmid retrieval-page --record runs/smollm2_retrieval",
        ("runs/smollm2_retrieval/README.md",),
        _retrieval,
        ("runs/smollm2_retrieval/retrieval.*", "runs/smollm2_retrieval/tables/*"),
    ),
    Page(
        "evidence",
        "lostmid.pages.evidence.declarations() and deviations_markdown() (the page's two blocks)",
        ("docs/evidence.md",),
        _evidence,
    ),
    Page(
        "config",
        "python scripts/config_readme.py --write config/README.md",
        ("config/README.md",),
        _config_readme,
    ),
]


def outputs(page: Page, root: Path) -> list[str]:
    """Every file ``page`` writes, as found under ``root``: its pages and its artifacts' matches."""
    found = {p.relative_to(root).as_posix() for pattern in page.artifacts for p in root.glob(pattern)}
    return [*page.pages, *sorted(found)]


def stale(page: Page, out: Path) -> list[str]:
    """The outputs written under ``out`` that differ from (or are missing in) the repository's."""
    return [
        name
        for name in outputs(page, out)
        if not (REPO / name).exists() or not filecmp.cmp(out / name, REPO / name, shallow=False)
    ]


def write(page: Page, out: Path) -> None:
    """Write ``page``'s outputs under ``out``, reading the repository (the writers take paths relative to it)."""
    for name in page.pages:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
    cwd = Path.cwd()
    os.chdir(REPO)
    try:
        page.write(out)
    finally:
        os.chdir(cwd)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these pages (default: all)")
    parser.add_argument("--check", action="store_true", help="write into a temporary folder; name the stale pages")
    parser.add_argument("--list", action="store_true", help="list the pages, their outputs and commands")
    args = parser.parse_args(argv)
    by_name = {page.name: page for page in PAGES}
    unknown = [name for name in args.names if name not in by_name]
    if unknown:
        print(f"error: no page {', '.join(unknown)} (pages: {', '.join(by_name)})", file=sys.stderr)
        return 2
    chosen = [by_name[name] for name in args.names] if args.names else PAGES
    if args.list:
        for page in chosen:
            print(f"{page.name}: {', '.join([*page.pages, *page.artifacts])}  ({page.command})")
        return 0
    if not args.check:
        for page in chosen:
            write(page, REPO)
            print(f"{page.name}: wrote {', '.join(outputs(page, REPO))}")
        return 0
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        for page in chosen:
            write(page, Path(tmp))
            found += [f"{name} (regenerate: {page.command})" for name in stale(page, Path(tmp))]
    print("\n".join(found) if found else f"every page is current ({', '.join(page.name for page in chosen)})")
    return 1 if found else 0


if __name__ == "__main__":
    from lostmid import pin_numerics

    pin_numerics()  # the jobs' numerics (lostmid.numerics), before anything computes
    sys.exit(main())
