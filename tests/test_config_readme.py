"""config/README.md is generated (scripts/config_readme.py) from the config schema and the files of config/: it
fails here when the schema or config/ has moved on without it, and config/ stays the reference (ten files at most)."""

from __future__ import annotations

import sys

import yaml

from conftest import REPO, SCHEMA

sys.path.insert(0, str(REPO / "scripts"))
import config_readme  # noqa: E402

PAGE = REPO / "config" / "README.md"


def test_the_config_readme_is_the_one_the_schema_and_config_generate():
    assert PAGE.read_text() == config_readme.page(), (
        "config/README.md is stale: python scripts/config_readme.py --write config/README.md"
    )


def test_config_holds_at_most_ten_files_each_described_on_the_page():
    """A run's record (its overlay as run, a pilot, the seed ledger) goes to runs/, a cluster-scale overlay
    beside the Slurm profile, a test's config to tests/: config/ keeps the default and what a reader runs."""
    files = sorted(path.name for path in (REPO / "config").iterdir())
    assert len(files) <= 10, files
    assert set(files) == set(config_readme.FILES), "describe each file of config/ in scripts/config_readme.py FILES"


def test_every_key_of_the_schema_is_on_the_page_and_no_prose_line_is_long():
    page = PAGE.read_text()
    for key in yaml.safe_load(SCHEMA.read_text())["properties"]:
        assert f"`{key}`" in page or f"`{key}." in page, key
    assert "`architectures.text.checkpoint_from`" in page and "`variants.<name>.remedy.control.rule`" in page
    long = [line for line in config_readme.prose_lines(page) if len(line) > 200]
    assert not long, long
