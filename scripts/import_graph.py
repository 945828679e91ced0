#!/usr/bin/env python3
"""The import graph of the lostmid package: modules, arrows, cycles and depth.

    python scripts/import_graph.py [SRC]        # SRC defaults to src/ of this checkout

An arrow A -> B means module A imports module B (at the top or inside a function: both tie the
two together). Prints the counts, every cycle (strongly connected component of more than one
module) and the number of levels (the longest chain of arrows, plus one). tests/test_layers.py
uses ``graph`` to keep the package free of cycles and its layers in order.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "lostmid"


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


def main(argv=None) -> int:
    src = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "src")
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
