"""scripts/compare_verdicts.py: the verdicts two evidence tables of one config give differently."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from lostmid.cli.evidence import PAGE_MARKERS
from lostmid.evidence import claims

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import compare_verdicts  # noqa: E402


def test_a_docs_page_and_the_parquet_table_it_quotes_give_the_same_verdicts(smoke_run, tmp_path):
    workdir, _ = smoke_run
    table = pd.read_parquet(workdir / "results" / "evidence")
    page = tmp_path / "page.md"
    page.write_text(
        f"# A page\n\nProse may quote {PAGE_MARKERS[0]}.\n\n"
        f"{PAGE_MARKERS[0]}\n\n{claims.markdown(table)}\n{PAGE_MARKERS[1]}\n"
    )
    matched, changed = compare_verdicts.differences(
        compare_verdicts.read(page), compare_verdicts.read(workdir / "results" / "evidence")
    )
    assert matched == len(table) and changed.empty


def test_a_verdict_that_differs_is_listed_with_its_kind():
    def table(verdicts, mid_step):
        return pd.DataFrame(
            {
                "claim": ["a", "b", "c"],
                "setting": ["x", f"x, checkpoint step {mid_step} (mid-training)", "x"],
                "estimate": ["1 [0, 2]"] * 3,
                "verdict": verdicts,
            }
        )

    # The mid-training step differs between the runs (each locates its own): the rows still match.
    matched, changed = compare_verdicts.differences(
        table(["supported", "inconclusive", "contradicted"], 500), table(["supported", "supported", "supported"], 750)
    )
    assert matched == 3
    assert dict(zip(changed.claim, changed.kind)) == {"b": "decided <-> not decided", "c": "supported <-> contradicted"}


def test_a_page_without_an_evidence_table_is_one_clear_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"Prose that only quotes {PAGE_MARKERS[0]} and {PAGE_MARKERS[1]}.\n")
    with pytest.raises(ValueError, match="no evidence table"):
        compare_verdicts.read(page)
