#!/usr/bin/env python3
"""The import graph of the lostmid package: modules, arrows, cycles and depth; and the
architecture page generated from it.

    python scripts/import_graph.py [SRC]                         # SRC defaults to src/ of this checkout
    python scripts/import_graph.py --write docs/architecture.md  # the architecture page

An arrow A -> B means module A imports module B (at the top or inside a function: both tie the
two together). Prints the counts, every cycle (strongly connected component of more than one
module) and the number of levels (the longest chain of arrows, plus one). tests/test_layers.py
uses ``graph`` to keep the package free of cycles and its layers in order.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
from pathlib import Path

PACKAGE = "lostmid"
REPO = Path(__file__).resolve().parents[1]

# The layers, bottom to top: a module may import its own layer and the layers below it, never one
# above (tests/test_layers.py checks it).
LAYERS = [
    {
        "lostmid.errors",
        "lostmid.io",
        "lostmid.schema",
        "lostmid.config",
        "lostmid.seed_ledger",
        "lostmid.numerics",
        "lostmid.manifest",
        "lostmid.records",
    },
    {"lostmid.core"},
    {"lostmid.objectives"},
    {"lostmid.tables"},
    # the statistics every stage reads: intervals over seeds, windows and bootstrap draws
    {"lostmid.stats"},
    {"lostmid.training"},
    {"lostmid.analysis"},
    {"lostmid.algebraic", "lostmid.architectures", "lostmid.evidence"},
    # the studies' plans, readings and estimators: the data the plots draw
    {"lostmid.study"},
    {"lostmid.jobs", "lostmid.catalogue"},
    {"lostmid.plots"},
    # the pages (Markdown and the figures they draw), above the rows and plots they call
    {"lostmid.pages", "lostmid.front"},
    {"lostmid.cli"},
    # the public API: the package's own functions (lostmid.api), which import everything they need when called
    {"lostmid", "lostmid.api"},
]

# The lists that are declared once and read everywhere else: (name, the file that declares it).
DECLARED = [
    ("BLOCK_STAGES", "src/lostmid/jobs.py"),
    ("RUN_TABLES", "src/lostmid/jobs.py"),
    ("BIAS_TABLES", "src/lostmid/jobs.py"),
    ("SETTINGS", "src/lostmid/jobs.py"),
    ("EVIDENCE_TABLES", "src/lostmid/jobs.py"),
    ("TABLES", "src/lostmid/evidence/tables.py"),
    ("claims", "src/lostmid/evidence/claims.yaml"),
    ("FIGURES", "src/lostmid/catalogue.py"),
    ("PAGES", "src/lostmid/catalogue.py"),
    ("RUN_TABLE_COLUMNS", "src/lostmid/tables/keys.py"),
    ("MEASURED", "src/lostmid/tables/keys.py"),
    ("OBJECTIVES", "src/lostmid/objectives/registry.py"),
    ("COMMANDS", "src/lostmid/cli/registry.py"),
    ("BLOCK_CHECKS", "workflow/rules/influence.smk"),
    ("LAYERS", "scripts/import_graph.py"),
    ("DECLARED", "scripts/import_graph.py"),
]


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def graph(src: Path) -> dict[str, set[str]]:
    """Module -> the lostmid modules it imports (submodules resolved, packages' own __init__ kept)."""
    files = {module_name(path, src): path for path in sorted((src / PACKAGE).rglob("*.py"))}
    edges: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in files else node.module
                    for alias in node.names
                ]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith(PACKAGE):
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in edges:
        if v not in index:
            visit(v)
    return found


def levels(edges: dict[str, set[str]]) -> int:
    """Length of the longest import chain plus one (the graph must be acyclic)."""
    depth: dict[str, int] = {}

    def level(v):
        if v not in depth:
            depth[v] = 0
            depth[v] = 1 + max((level(w) for w in edges[v]), default=0)
        return depth[v]

    return max(level(v) for v in edges)


def layer(module: str) -> int:
    """The module's layer (LAYERS): its own entry where it has one, else its package's."""
    for name in (module, ".".join(module.split(".")[:2])):
        for level, members in enumerate(LAYERS):
            if name in members:
                return level
    raise KeyError(f"{module} is in no layer of scripts/import_graph.py's LAYERS: give it one")


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    end = re.search(r"\.\s+(?=[A-Z])", text)
    return (text[: end.start() + 1] if end else text).replace("|", "\\|")


def declaration(name: str, path: Path) -> tuple[int, str]:
    """The line where ``path`` assigns ``name`` at top level, and the comment just above it."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith((f"{name} = ", f"{name}: ")) or line == f"{name}:":
            comment = []
            for above in reversed(lines[:i]):
                if above.startswith(("_", "FIT", "BIAS_TENSOR")):  # the helper names the list is built from
                    continue
                if not above.startswith("#"):
                    break
                comment.insert(0, above.lstrip("# "))
            return i + 1, first_sentence(" ".join(comment))
    raise KeyError(f"{path} declares no {name} at top level (scripts/import_graph.py DECLARED)")


def architecture(src: Path) -> str:
    """docs/architecture.md: packages by layer, where each list is declared, the commands and their rules."""
    sys.path.insert(0, str(src))
    import lostmid.cli.main  # noqa: F401  (registers every command)
    from lostmid.cli.registry import COMMANDS

    edges = graph(src)
    packages: dict[str, list[str]] = {}
    for module in edges:
        packages.setdefault(".".join(module.split(".")[:2]), []).append(module)
    out = [
        "# Architecture",
        "",
        "Generated by `python scripts/import_graph.py --write docs/architecture.md` from the import graph of",
        "`src/lostmid`, the declared lists and the stage files; tests/test_architecture.py fails when it is",
        "stale. Edit the code, then regenerate.",
        "",
        "## Packages by layer",
        "",
        f"{len(edges)} modules, {sum(map(len, edges.values()))} arrows, {len(cycles(edges))} cycles, "
        f"{levels(edges)} levels of imports. A module imports only from its own layer and the layers below "
        "(bottom first).",
        "",
        "| layer | package | modules | lines | imports from | what it owns |",
        "|---|---|---|---|---|---|",
    ]
    for package in sorted(packages, key=lambda name: (layer(name), name)):
        modules = sorted(packages[package])
        path = src / package.replace(".", "/")
        doc_file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if package == PACKAGE:
            modules = [package]
        files = list(path.rglob("*.py")) if path.is_dir() and package != PACKAGE else [doc_file]
        lines = sum(len(file.read_text().splitlines()) for file in files)
        below = sorted({".".join(t.split(".")[:2]) for m in modules for t in edges[m]} - {package})
        doc = first_sentence(ast.get_docstring(ast.parse(doc_file.read_text())) or "")
        shown = ", ".join(m.rpartition(".")[2] for m in modules if m != package) or "-"
        out.append(f"| {layer(package)} | `{package}` | {shown} | {lines} | {', '.join(below) or '-'} | {doc} |")
    out += ["", "## Where each list is declared", "", "| list | declared in | what it says |", "|---|---|---|"]
    for name, file in DECLARED:
        line, comment = declaration(name, REPO / file)
        out.append(f"| `{name}` | {file}:{line} | {comment or '-'} |")
    out += [
        "",
        "The defaults of every config key: src/lostmid/config.schema.yaml.",
        "",
        "## Commands and the stage files whose rules run them",
        "",
        "| command | module | stage file | what it does |",
        "|---|---|---|---|",
    ]
    runs: dict[str, list[str]] = {}
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for command in re.findall(r"\"lostmid ([a-z][a-z-]*)", smk.read_text()):
            runs.setdefault(command, []).append(smk.name)
    for name, (help_text, _, func) in sorted(COMMANDS.items()):
        where = ", ".join(sorted(set(runs.get(name, [])))) or "by hand"
        out.append(f"| `lostmid {name}` | {func.__module__} | {where} | {help_text} |")
    out += ["", "## Stage files", "", "| stage file | rules | what it declares |", "|---|---|---|"]
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        rules = re.findall(r"^\s*rule (\w+):", text, re.M) + re.findall(r"name:\s*\n\s*(f\"[^\"]+\")", text)
        header = [line.lstrip("# ") for line in itertools.takewhile(lambda s: s.startswith("#"), text.splitlines())]
        shown = ", ".join(f"`{rule}`" for rule in rules) or "-"
        out.append(f"| {smk.name} | {shown} | {first_sentence(' '.join(header))} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    argv = list(argv or [])
    if argv[:1] == ["--write"]:
        Path(argv[1]).write_text(architecture(REPO / "src"))
        return 0
    src = Path(argv[0] if argv else REPO / "src")
    edges = graph(src)
    found = cycles(edges)
    print(
        f"{len(edges)} modules, {sum(map(len, edges.values()))} arrows, {len(found)} cycles"
        + ("" if found else f", {levels(edges)} levels")
    )
    for component in found:
        print("cycle:", " <-> ".join(component))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
