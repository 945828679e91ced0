"""docs/architecture.md is generated (scripts/import_graph.py) from the import graph, the declared
lists and the stage files: it fails here when the code has moved on without it."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import import_graph  # noqa: E402


def test_the_architecture_page_is_the_one_the_code_generates():
    page = (REPO / "docs" / "architecture.md").read_text()
    assert page == import_graph.architecture(REPO / "src"), (
        "docs/architecture.md is stale: python scripts/import_graph.py --write docs/architecture.md"
    )


def test_every_declared_list_is_found_where_the_page_says():
    for name, file in import_graph.DECLARED:
        line, _ = import_graph.declaration(name, REPO / file)
        assert (REPO / file).read_text().splitlines()[line - 1].startswith(name)
