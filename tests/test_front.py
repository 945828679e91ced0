"""The report's first screen (lostmid.front): the findings' sentences where the run has docs/findings.md,
else the run's headline; the headline figures carried in the page."""

from __future__ import annotations

import base64

import pandas as pd
import pytest

from lostmid.cli import main as cli
from lostmid.front import findings_figures, findings_sentences, front_html

FINDINGS = """# Findings

Generated from runs/study.

## Does the fix remove the position effect?

![the endpoints](figures/q1.png)

The fix removes **most** of the position effect: late-minus-early failure falls from 0.21 to 0.02
(see [the rows](results.md)).

| endpoint | estimate |
|---|---|

## Does influence predict failure?

- a list is not an answer

Not beyond position: the `position-adjusted` estimate is 0.01 [-0.05, 0.07].
"""


def evidence() -> pd.DataFrame:
    row = dict(
        kind="claim",
        family="blog",
        source="blog (a)",
        setting="baseline, L 8",
        method="per-seed slope",
        status="decided",
    )
    return pd.DataFrame([{**row, "claim": "failure_rises", "verdict": "supported"}])


def test_each_question_gets_the_first_paragraph_of_prose_under_it():
    assert findings_sentences(FINDINGS) == [
        (
            "Does the fix remove the position effect?",
            "The fix removes **most** of the position effect: late-minus-early failure falls from 0.21 to 0.02 "
            "(see [the rows](results.md)).",
        ),
        (
            "Does influence predict failure?",
            "Not beyond position: the `position-adjusted` estimate is 0.01 [-0.05, 0.07].",
        ),
    ]


def test_the_findings_come_first_and_the_headline_only_without_them():
    page = front_html(evidence(), FINDINGS)
    assert "<h2>What the study found</h2>" in page
    assert "<dt><b>Does the fix remove the position effect?</b></dt>" in page and "<b>most</b>" in page
    assert "results.md" not in page and "failure_rises" not in page  # link text kept, target dropped
    # this run's own verdicts follow the study's answers, marked as the run's
    assert page.index("</dl>") < page.index("This run's own verdicts") < page.index("<li>blog: 1 row, 1 supported")
    fallback = front_html(evidence(), None)
    assert "docs/findings.md is not in this run" in fallback and "<li>blog: 1 row, 1 supported</li>" in fallback
    assert front_html(evidence(), "# Findings\n\nno questions yet\n") == fallback


def test_the_figures_travel_inside_the_page_and_only_existing_ones_are_named(tmp_path):
    (tmp_path / "figures").mkdir()
    png = tmp_path / "figures" / "q1.png"
    png.write_bytes(b"\x89PNG fake")
    assert findings_figures(FINDINGS, tmp_path) == [png]
    assert findings_figures(FINDINGS, tmp_path / "elsewhere") == []
    page = front_html(evidence(), FINDINGS, stamp="Run: commit `abc`;\nmachine x.", figures=[png])
    assert f'src="data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}"' in page
    assert 'style="width:90%"' in page  # a finding's figure at a page's width
    assert 'style="width:48%"' in front_html(evidence(), None, figures=[png])  # the blog's, two abreast
    assert "Run: commit <code>abc</code>;<br>machine x." in page


def test_the_command_writes_the_fragment(tmp_path):
    table = tmp_path / "evidence.parquet"
    evidence().to_parquet(table)
    out = tmp_path / "front" / "findings.html"
    cli.main(["report-front", "--evidence", str(table), "--out", str(out)])
    assert '<section id="findings"><h2>What this run found</h2>' in out.read_text()


def test_the_first_screen_puts_the_headline_figure_and_the_endpoint_table_beside_the_answers(tmp_path):
    """1280 x 800: the answers on the left; accuracy by position over the endpoints' table on the right."""
    png = tmp_path / "accuracy_by_position.png"
    png.write_bytes(b"\x89PNG headline")
    page = front_html(evidence(), FINDINGS, headline=png)
    answers, side = page.index('<div class="answers">'), page.index('<div class="headline">')
    assert answers < page.index("Does the fix remove") < side  # the answers first, then the side column
    assert side < page.index('alt="accuracy_by_position"') < page.index('<table class="endpoints">')
    assert "<th>endpoint</th><th>estimate</th>" in page
    assert "flex-wrap:wrap" in page  # a narrow viewer stacks the columns rather than cutting them


@pytest.mark.parametrize("text", ["", "## Only a heading\n"])
def test_a_question_without_prose_keeps_its_heading(text):
    assert findings_sentences(text) == ([("Only a heading", "")] if text else [])
