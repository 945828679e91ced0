"""The pages a person reads: every generated page is the one its writer writes from the committed run records
(scripts/regenerate_pages.py, one list of pages), no prose line of any page runs over 200 characters, and the
README stays short and links the results pages rather than copying them."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import regenerate_pages  # noqa: E402

# The two pages whose writers recompute a cluster bootstrap (a minute each); the others take a second or two. Each
# is a pytest-xdist group of its own (conftest.py), so the two run on different workers.
HEAVY = {"findings", "retrieval"}
LINE_LIMIT = 200
README_LINES = 150


def marks(page):
    return [pytest.mark.slow, pytest.mark.xdist_group(f"page_{page.name}")] if page.name in HEAVY else []


@pytest.mark.parametrize(
    "page", [pytest.param(page, id=page.name, marks=marks(page)) for page in regenerate_pages.PAGES]
)
def test_every_committed_page_is_the_one_its_writer_writes(page, tmp_path):
    regenerate_pages.write(page, tmp_path)
    for name in page.pages:
        assert (tmp_path / name).read_text() == (REPO / name).read_text(), (
            f"{name} is stale: python scripts/regenerate_pages.py {page.name} (or {page.command})"
        )


def test_the_page_list_names_each_output_once():
    names = [name for page in regenerate_pages.PAGES for name in page.pages]
    assert len(names) == len(set(names)) and all((REPO / name).exists() for name in names)


def long_prose_lines(path, limit=LINE_LIMIT):
    """``(line number, length)`` of each line over ``limit`` characters that is neither a table row, nor code
    (fenced, or indented by four spaces), nor a heading."""
    found, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if fenced or stripped.startswith(("|", "#")) or line.startswith(("    ", "\t")):
            continue
        if len(line) > limit:
            found.append((number, len(line)))
    return found


PAGES_READ = sorted({*REPO.glob("docs/**/*.md"), *REPO.glob("runs/**/*.md"), REPO / "README.md"})


def test_no_prose_line_of_a_page_is_over_200_characters():
    found = [
        f"{path.relative_to(REPO)}:{number} ({length} characters)"
        for path in PAGES_READ
        for number, length in long_prose_lines(path)
    ]
    assert not found, "prose lines over 200 characters (wrap them at ~110):\n" + "\n".join(found)


def test_every_relative_link_of_a_page_names_a_file_of_the_checkout():
    # a page that moves (docs/ is reference, runs/ is record) takes its links with it, and every link to it follows
    broken = [
        f"{path.relative_to(REPO)}: {target}"
        for path in PAGES_READ
        for target in re.findall(r"\]\(<?([^)\s#>]+)", path.read_text())
        if "://" not in target and re.search(r"[./]", target) and not (path.parent / target).exists()
    ]
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_the_line_scan_skips_tables_and_code(tmp_path):
    page = tmp_path / "page.md"
    long = "word " * 50
    page.write_text(f"| {long} |\n\n```\n{long}\n```\n\n    {long}\n\n{long}\n- {long}\n")
    assert [number for number, _ in long_prose_lines(page)] == [9, 10]


def test_the_readme_is_short_and_links_the_results_pages():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES
    for target in ("docs/findings.md", "runs/default/results.md"):
        assert f"({target})" in text, f"the README links {target}"


def test_wrapping_keeps_the_words_and_starts_no_markdown_block():
    from lostmid.io import wrap_prose

    words = [f"w{i}" for i in range(80)]
    words[30:30] = ["-", "1.", "#", "|", "<a>"]
    line = "- **Q?** " + " ".join(words)
    wrapped = wrap_prose(f"before\n{line}\n| {' '.join(words)} |\n").splitlines()
    assert wrapped[0] == "before" and wrapped[-1].startswith("| ") and len(wrapped[-1]) > 200
    body = wrapped[1:-1]
    assert len(body) > 1 and all(len(item) <= 130 for item in body)
    assert all(re.match(r"  [^-1#|<\s]", item) for item in body[1:])  # continuations: indented, no block start
    assert " ".join(item.strip() for item in body) == line
