"""scripts/compare_verdicts.py: the verdicts two evidence tables of one config give differently."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from lostmid.cli.evidence import PAGE_MARKERS
from lostmid.pages.evidence import markdown

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import compare_verdicts  # noqa: E402


def test_a_docs_page_and_the_parquet_table_it_quotes_give_the_same_verdicts(smoke_run, tmp_path):
    workdir, _ = smoke_run
    table = pd.read_parquet(workdir / "results" / "evidence")
    page = tmp_path / "page.md"
    page.write_text(
        f"# A page\n\nProse may quote {PAGE_MARKERS[0]}.\n\n{PAGE_MARKERS[0]}\n\n{markdown(table)}\n{PAGE_MARKERS[1]}\n"
    )
    matched, changed, alone = compare_verdicts.differences(
        compare_verdicts.read(page), compare_verdicts.read(workdir / "results" / "evidence")
    )
    assert matched == len(table) and changed.empty and alone.empty


def test_a_verdict_that_differs_is_listed_with_its_kind():
    def table(verdicts, mid):
        return pd.DataFrame(
            {
                "claim": ["a", "b", "c", "d"],
                "setting": ["x", f"x, checkpoint {mid}", "x", f"y, checkpoint {mid}"],
                "estimate": ["1 [0, 2]"] * 4,
                "verdict": verdicts,
            }
        )

    # The mid-training step differs between the runs (each locates its own): the rows still match.
    matched, changed, alone = compare_verdicts.differences(
        table(["supported", "inconclusive", "contradicted", "supported"], "step 500 (mid-training)"),
        table(["supported", "supported", "supported", "supported"], "step 750 (mid-training)"),
    )
    assert matched == 4 and alone.empty
    assert dict(zip(changed.claim, changed.kind)) == {"b": "decided <-> not decided", "c": "supported <-> contradicted"}
    # A run that never reaches mid-training keeps its rows: they match, with their verdicts changed.
    matched, changed, _ = compare_verdicts.differences(
        table(["supported"] * 4, "step 500 (mid-training)"), table(["inconclusive"] * 4, "mid-training not reached")
    )
    assert matched == 4 and set(changed.claim) == {"a", "b", "c", "d"}


def test_rows_that_appear_or_disappear_are_listed():
    reference = pd.DataFrame(
        {"claim": ["a", "b"], "setting": ["x", "x"], "estimate": ["1"] * 2, "verdict": ["supported"] * 2}
    )
    new = reference.assign(claim=["a", "e"])
    matched, changed, alone = compare_verdicts.differences(reference, new)
    assert matched == 1 and changed.empty
    assert dict(zip(alone.claim, alone.side)) == {"b": "reference only", "e": "new only"}


def test_the_committed_results_page_is_read_as_it_is():
    page = compare_verdicts.read(REPO / "runs" / "default" / "results.md")
    matched, changed, alone = compare_verdicts.differences(page, page)
    assert matched == len(page) > 0 and changed.empty and alone.empty


def test_a_page_without_an_evidence_table_is_one_clear_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"Prose that only quotes {PAGE_MARKERS[0]} and {PAGE_MARKERS[1]}.\n")
    with pytest.raises(ValueError, match="no evidence table"):
        compare_verdicts.read(page)
