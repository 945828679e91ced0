"""`snakemake --report`: one HTML file with every figure of every stage, captioned, by stage.

The figures the report must hold are found generically: every rule output that the workflow
declares with ``report(...)`` (as Snakemake parsed it), so a stage that adds a figure is
covered without touching this file. The report is built from the session's smoke run
(conftest.smoke_run), which the workflow tests share.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_snakemake

pytestmark = pytest.mark.slow

REPORT_DIR = REPO / "workflow" / "report"


def declared_report_outputs(configfile: Path, workdir: Path) -> dict[str, dict]:
    """Path pattern -> {rule, caption, category} of every output the workflow flags report()."""
    from snakemake.api import SnakemakeApi
    from snakemake.io import get_flag_value, is_flagged
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    declared = {}
    cwd = os.getcwd()  # Snakemake moves into the working directory; the tests stay where they are
    with SnakemakeApi(OutputSettings(quiet=True)) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(),
            config_settings=ConfigSettings(configfiles=[configfile]),
            storage_settings=StorageSettings(),
            snakefile=REPO / "Snakefile",
            workdir=workdir,
        )
        for rule in workflow._workflow.rules:  # no public listing of rules' outputs in Snakemake 9
            for output in rule.output:
                if is_flagged(output, "report"):
                    flag = get_flag_value(output, "report")
                    declared[str(output)] = {
                        "rule": rule.name,
                        "caption": Path(flag.caption).resolve(),
                        "category": flag.category,
                    }
    os.chdir(cwd)
    return declared


def embedded(html: str, script_id: str):
    """A JSON object the report keeps in <script id="...">var x = {...};</script>."""
    match = re.search(rf'<script id="{script_id}">\s*var \w+ = (.*?);?\s*</script>', html, re.S)
    assert match, f"the report has no {script_id} data"
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def report(smoke_run):
    workdir, config = smoke_run
    run_snakemake(workdir, "--report", "results/report.html", timeout=300)
    html = (workdir / "results" / "report.html").read_text()
    declared = declared_report_outputs(workdir / "config.yaml", workdir)
    return workdir, config, html, declared


def matches(pattern: str, path: str) -> bool:
    """Does ``path`` match an output pattern with wildcards ({name} or {name,regex})?"""
    parts = re.split(r"(\{[^}]+\})", pattern)
    regex = "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts)
    return re.fullmatch(regex, path) is not None


def test_every_declared_figure_is_in_the_report_with_its_bytes(report):
    workdir, config, html, declared = report
    results = embedded(html, "results")
    assert declared, "the workflow declares no report() outputs"
    if not config["architectures"].get("pretrained"):  # the pretrained models' rule runs only for an entry
        declared = {pattern: item for pattern, item in declared.items() if item["rule"] != "architectures_pretrained"}
    if not config.get("retrieval"):  # the retrieval stage runs only with its block (config/retrieval.yaml)
        declared = {pattern: item for pattern, item in declared.items() if item["rule"] != "retrieval_summary"}
    for pattern, item in declared.items():
        found = [path for path in results if matches(pattern, path)]
        assert found, f"{pattern} (rule {item['rule']}) is missing from the report"
        for path in found:
            data = results[path]["data_uri"].split("base64,", 1)[1]
            assert base64.b64decode(data) == (workdir / path).read_bytes(), f"{path}: the report holds other bytes"
    assert len(results) == sum(1 for path in results if any(matches(p, path) for p in declared))


def test_every_figure_has_its_caption_and_its_stage(report):
    _, _, html, declared = report
    results = embedded(html, "results")
    categories = embedded(html, "categories")
    for pattern, item in declared.items():
        assert item["caption"].parent == REPORT_DIR and item["caption"].exists(), item
        first_words = " ".join(item["caption"].read_text().split()[:4])
        for path in (p for p in results if matches(pattern, p)):
            caption_text = re.sub(r"<[^>]+>", "", results[path]["caption"])
            assert " ".join(caption_text.split()).startswith(first_words), f"{path}: caption {caption_text[:80]!r}"
            in_category = [p for sub in categories.get(item["category"], {}).values() for p in sub]
            assert path in in_category, f"{path} is not under its stage {item['category']!r}"
    # One category per stage, named as the captions' stages; none left over.
    assert set(categories) == {item["category"] for item in declared.values()}


def test_every_caption_file_belongs_to_a_figure(tmp_path):
    """Of the smoke config, with the length study's block (its rules exist only with it)."""
    config = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**config, "length": {"L": [8, 16, 32]}}))
    declared = declared_report_outputs(tmp_path / "config.yaml", tmp_path)
    used = {item["caption"].name for item in declared.values()} | {"workflow.rst"}
    orphans = sorted(p.name for p in REPORT_DIR.glob("*.rst") if p.name not in used)
    assert not orphans, f"caption files no figure uses: {orphans}"


def test_the_front_page_says_what_was_run(report):
    _, config, html, _ = report
    front = re.sub(r"<[^>]+>", "", embedded(html, "workflow-desc"))
    assert "flag-recall" in front and "How to read this report" in front
    # The Jinja template filled in each variant's own schedule, as its run spec has it.
    from lostmid.config import schedule

    words = " ".join(front.split())
    for entry in config["grid"]:
        for variant in entry["variants"]:
            steps, every = schedule(config, variant)
            assert f"{variant}: {steps} steps, a checkpoint every {every}" in words
