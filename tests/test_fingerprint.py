"""The same tables on every machine: the smoke run's fingerprint, committed, recomputed here.

The smoke run (conftest.smoke_run) is made with the caller's environment asking for other kernels,
so a match also shows that the numerics pin wins. A mismatch names each table that differs and its
first differing column. If a machine breaks it, find which library call differs and pin it too
(lostmid.numerics); do not loosen this test. After a change that is meant to move numbers:
``python scripts/fingerprint.py RESULTS --write tests/fingerprints/smoke.json`` on a smoke run.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lostmid.errors import InputError
from lostmid.tables.compare import (
    fingerprint,
    fingerprint_mismatches,
    read_fingerprint,
    result_tables,
    table_differences,
)

from conftest import REPO

FINGERPRINT = REPO / "tests" / "fingerprints" / "smoke.json"


@pytest.mark.slow
def test_the_smoke_run_matches_its_committed_fingerprint(smoke_run):
    workdir, _ = smoke_run
    expected = read_fingerprint(FINGERPRINT)
    found = fingerprint(workdir / "results", expected["checkpoint"]["path"])
    assert fingerprint_mismatches(expected, found) == []


def test_a_mismatch_names_the_table_and_its_first_differing_column(tmp_path):
    run = tmp_path / "results"
    (run / "failure").mkdir(parents=True)
    frame = pd.DataFrame({"variant": ["a", "a"], "position": [1, 2], "failure": [0.25, 0.5], "n": [4, 4]})
    frame.to_parquet(run / "failure" / "a.parquet")
    expected = fingerprint(run)
    frame.assign(failure=[0.25, 0.5000001]).to_parquet(run / "failure" / "a.parquet")
    assert fingerprint_mismatches(expected, fingerprint(run)) == ["failure: column failure differs (1 of 4 columns)"]
    frame.iloc[:1].to_parquet(run / "failure" / "a.parquet")
    assert fingerprint_mismatches(expected, fingerprint(run)) == ["failure: 1 rows, the fingerprint has 2"]


def test_a_fingerprint_that_does_not_parse_is_one_line(tmp_path):
    broken = tmp_path / "smoke.json"
    broken.write_text("{ not json")
    with pytest.raises(InputError, match="smoke.json: not a readable fingerprint"):
        read_fingerprint(broken)
    broken.write_text(json.dumps({"rows": 3}))
    with pytest.raises(InputError, match="not a fingerprint"):
        read_fingerprint(broken)


def evidence_row(claim, verdict, estimate, checkpoint="checkpoint step 500 (mid-training)", variant="baseline"):
    return {
        "claim": claim,
        "variant": variant,
        "L": 16,
        "depth": 4,
        "residual": True,
        "reading": None,
        "checkpoint": checkpoint,
        "estimate": estimate,
        "verdict": verdict,
    }


def write(run, rows):
    (run / "evidence").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(run / "evidence" / "evidence.parquet")
    return result_tables(run)


def test_rows_are_matched_by_their_keys_and_none_is_lost(tmp_path):
    reference = write(
        tmp_path / "a",
        [
            evidence_row("slope", "supported", 1.8),
            evidence_row("speed", "supported", -0.1),
            evidence_row("gone", "inconclusive", 0.0),
        ],
    )
    new = write(
        tmp_path / "b",
        [
            # the mid-training checkpoint was not reached on this run: the same row, another verdict
            evidence_row("slope", "inconclusive", float("nan"), checkpoint="mid-training not reached"),
            evidence_row("speed", "supported", -0.1),  # unchanged: not reported
            evidence_row("new", "supported", 0.3),
        ],
    )
    lines = table_differences(reference, new)
    assert len(lines) == 3
    assert any("row (claim=gone" in line and line.endswith("disappeared") for line in lines)
    assert any("row (claim=new" in line and line.endswith("appeared") for line in lines)
    assert any("claim=slope" in line and "estimate 1.8 -> nan" in line for line in lines)
