"""docs/architecture.md is generated (scripts/import_graph.py) from the import graph, the declared
lists and the stage files (tests/test_pages.py checks the committed page); the declared lists are where
the page says."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import import_graph  # noqa: E402


def test_every_declared_list_is_found_where_the_page_says():
    for name, file in import_graph.DECLARED:
        line, _ = import_graph.declaration(name, REPO / file)
        assert (REPO / file).read_text().splitlines()[line - 1].startswith(name)
