"""The house rules of the package, checked on its source: layers that import only downward, no
import cycle, no module past 500 lines, a library that never imports Snakemake, and a
repository whose references all resolve inside it."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import import_graph  # noqa: E402

LAYERS = import_graph.LAYERS  # bottom to top: a module imports its own layer and those below
layer = import_graph.layer


def test_the_package_has_no_import_cycle():
    edges = import_graph.graph(REPO / "src")
    assert import_graph.cycles(edges) == []


def test_imports_only_go_down_the_layers():
    edges = import_graph.graph(REPO / "src")
    upward = [f"{a} -> {b}" for a, targets in edges.items() for b in targets if layer(b) > layer(a)]
    assert upward == []


def test_no_module_is_longer_than_500_lines():
    # ~400 before `ruff format` (one argument per line) lengthened every module by about a third.
    long = {
        str(p.relative_to(REPO)): n
        for p in (REPO / "src").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert long == {}


def test_the_library_never_imports_snakemake():
    found = [
        str(p.relative_to(REPO))
        for p in (REPO / "src").rglob("*.py")
        if re.search(r"^\s*(import|from) snakemake", p.read_text(), re.M)
    ]
    assert found == []


def test_nothing_in_the_repository_refers_to_files_outside_it():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    # The team's design notes, cluster notes and shared folder live outside the repository (the
    # names are assembled here so that this file does not name them itself).
    outside = ["DESIGN" + ".md", "SLURM" + "_NOTES", "../" + "shared"]
    found = [
        name
        for name in files
        if (REPO / name).is_file() and any(ref in (REPO / name).read_text(errors="ignore") for ref in outside)
    ]
    assert found == []
