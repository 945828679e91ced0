"""config/README.md is generated (scripts/config_readme.py) from the config schema and the files of config/ (that
the committed page is the one it writes, and its line lengths: tests/test_pages.py); config/ stays the reference
(ten files at most)."""

from __future__ import annotations

import sys

import yaml

from conftest import REPO, SCHEMA

sys.path.insert(0, str(REPO / "scripts"))
import config_readme  # noqa: E402

PAGE = REPO / "config" / "README.md"


def test_config_holds_at_most_ten_files_each_described_on_the_page():
    """A run's record (its overlay as run, a pilot, the seed ledger) goes to runs/, a cluster-scale overlay
    beside the Slurm profile, a test's config to tests/: config/ keeps the default and what a reader runs."""
    files = sorted(path.name for path in (REPO / "config").iterdir())
    assert len(files) <= 10, files
    assert set(files) == set(config_readme.FILES), "describe each file of config/ in scripts/config_readme.py FILES"


def test_every_key_of_the_schema_is_on_the_page():
    page = PAGE.read_text()
    for key in yaml.safe_load(SCHEMA.read_text())["properties"]:
        assert f"`{key}`" in page or f"`{key}." in page, key
    assert "`architectures.text.checkpoint_from`" in page and "`variants.<name>.remedy.control.rule`" in page
