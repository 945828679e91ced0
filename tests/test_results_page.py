"""A run's page (the default run's: runs/default/results.md) is written by one command from the run's tables
(`lostmid results-page`), and the README's headline verdicts are that command's `--headline` block; job names
stay short."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lostmid import jobs, manifest
from lostmid.cli.main import main
from lostmid.pages.evidence import headline, verdict_summary
from lostmid.tables.run_cost import cost_by_stage, job_costs


def test_a_block_is_named_by_its_runs_of_consecutive_seeds():
    assert jobs.seed_ranges(range(24)) == "0-23"
    assert jobs.seed_ranges((0, 1)) == "0-1"
    assert jobs.seed_ranges((99, 0)) == "0_99"
    assert jobs.seed_ranges((0, 1, 2, 7, 9, 10)) == "0-2_7_9-10"


def row(claim, source, setting, estimate, verdict, n_seeds=0, L=16, depth=4, kind="claim"):
    return {
        "claim": claim,
        "kind": kind,
        "method": "t over seeds",
        "status": "decided",
        "verdict_as_first_written": "",
        "deviations": "",
        "source": source,
        "setting": setting,
        "L": L,
        "depth": depth,
        "estimate": estimate,
        "ci_low": estimate - 1,
        "ci_high": estimate + 1,
        "n_seeds": n_seeds,
        "verdict": verdict,
    }


def test_the_summary_gives_each_claim_of_the_blog_in_its_own_setting_every_reading_there_and_counts_the_paper():
    """Claims only in the tallies, the checks apart; every contradicted or not-evaluable row appears, in a table
    (a contradicted row at another setting, a contradicted check); a verdict that differs under the rules as
    first written is named."""
    table = pd.DataFrame(
        [
            row("failure_rises_with_position", "blog (a)", "baseline, L 16", 1.79, "supported", 24),
            row("failure_rises_with_position", "blog (a)", "baseline_short, L 24", 1.62, "inconclusive", 3, L=24),
            {
                **row("debiased_trains_faster", "blog (d)", "debiased vs baseline", math.nan, "inconclusive"),
                "method": "not evaluable: the fit did not flatten",
                "status": "not_evaluable",
            },
            row("debiased_trains_faster", "blog (d)", "debiased_literal vs baseline", 0.01, "inconclusive", 24),
            row(
                "debiased_trains_faster", "blog (d)", "debiased_short vs baseline_short", 0.03, "contradicted", 3, 24, 2
            ),
            {
                **row(
                    "sufficient_conditions_sound",
                    "paper: sufficient conditions",
                    "-",
                    0.0,
                    "supported",
                    L=None,
                    depth=None,
                ),
                "verdict_as_first_written": "inconclusive",
                "deviations": "a_rule",
            },
            row(
                "structural_baseline_matches_closed_form", "paper: closed form", "-", 0.1, "contradicted", kind="check"
            ),
        ]
    )
    assert verdict_summary(table).splitlines() == [
        "- blog (a) `failure_rises_with_position` — baseline, L 16: 1.79 [0.79, 2.79], 24 seeds → **supported** "
        "(and 1 other setting)",
        "- blog (d) `debiased_trains_faster` — debiased vs baseline: – → **inconclusive** (not evaluable)",
        "- blog (d) `debiased_trains_faster` — debiased_literal vs baseline: 0.01 [-0.99, 1.01], 24 seeds → "
        "**inconclusive** (and 1 other setting)",
        "- the paper's 1 claims, 1 rows: 1 supported",
        "- every claim row: 1 contradicted, 3 inconclusive, 2 supported of 6",
        "- the checks of the instrument (not counted above): 1 checks, 1 rows: 1 contradicted",
        "- every contradicted or not-evaluable row not listed above, in the table below",
        "- rows whose verdict differs under the rules as first written (deviations on the record):",
        "  - `sufficient_conditions_sound` — -: **supported**, as first written inconclusive (a_rule)",
        "",
        "| kind | source | claim | setting | estimate [interval] | seeds | verdict |",
        "|---|---|---|---|---|---|---|",
        "| claim | blog (d) | `debiased_trains_faster` | debiased_short vs baseline_short | 0.03 [-0.97, 1.03] | 3 "
        "| contradicted |",
        "| check | paper: closed form | `structural_baseline_matches_closed_form` | - | 0.1 [-0.9, 1.1] | – "
        "| contradicted |",
    ]


def test_the_headline_is_one_line_per_claim_family_naming_its_contradicted_rows_and_counting_the_rest():
    """Claims only, grouped by their family (Claim.family; "" is the paper's claims outside one), then one
    line for the checks; a verdict that differs under the rules as first written is counted on its line."""
    table = pd.DataFrame(
        [
            {
                **row(
                    "failure_rises_with_position", "blog (a)", "baseline, L 16, checkpoint 500", 1.8, "supported", 24
                ),
                "family": "blog",
            },
            {
                **row(
                    "debiased_trains_faster", "blog (d)", "debiased vs baseline, checkpoint 0", math.nan, "inconclusive"
                ),
                "family": "blog",
                "method": "not evaluable: the fit did not flatten",
                "status": "not_evaluable",
            },
            {
                **row("debiased_trains_faster", "blog (d)", "literal vs baseline", 0.03, "contradicted", 24),
                "family": "blog",
            },
            {
                **row("sufficient_conditions_sound", "paper: sufficient conditions", "-", 0.0, "supported", L=None),
                "family": "",
                "verdict_as_first_written": "inconclusive",
            },
            {
                **row("structural_baseline_matches_closed_form", "paper", "-", 0.1, "supported", kind="check"),
                "family": "",
            },
            {
                **row("length_e_inf_grows", "blog", "-", math.nan, "inconclusive"),
                "family": "length",
                "method": "not run",
                "status": "not_run",
            },
        ]
    )
    assert headline(table).splitlines() == [
        "- blog: 3 rows, 1 contradicted, 1 inconclusive, 1 supported; contradicted: `debiased_trains_faster` "
        "(literal vs baseline); 1 not evaluable",
        "- paper: 1 row, 1 supported; 1 verdict differs under the rules as first written",
        "- checks of the instrument (not counted above): 1 rows, 1 supported",
        "- not run on this run's tables: length",
    ]


def test_the_cost_of_a_run_is_read_from_its_job_logs_and_benchmark_records(tmp_path):
    for job, cpu, wall in (("train/baseline/L8_M1_seeds0-1_step10", 4.5, 7.0), ("figures/figures", 2.0, 3.0)):
        log = tmp_path / "logs" / f"{job}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"== rule x ==\nINFO lostmid: job cpu {cpu:.2f} s (user 1 s, system 1 s), peak memory 300 MB\n")
        record = tmp_path / "benchmarks" / f"{job}.tsv"
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(f"s\th:m:s\tmax_rss\n{wall}\t0:00:07\t300\n")
    table = cost_by_stage(job_costs(tmp_path)).set_index("stage")
    assert table.loc["train", ["jobs", "cpu_s", "wall_s", "peak_mb"]].tolist() == [1, 4.5, 7.0, 300.0]
    assert table.loc["all", ["jobs", "cpu_s", "wall_s"]].tolist() == [2, 6.5, 10.0]


def test_a_folder_without_a_manifest_or_an_evidence_table_is_one_line(tmp_path, capsys):
    assert main(["results-page", "--results", str(tmp_path)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith("no manifest: the run was not made by this workflow's version (rerun it)")
    )
    invocation = {"commit": "c", "configs": [], "numerics": {}, "machine": {}}
    manifest.write(tmp_path / "manifest.json", {**invocation, "invocations": [invocation]})
    assert main(["results-page", "--results", str(tmp_path)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith("has no evidence table; is " + str(tmp_path) + " a finished run?")
    )


@pytest.mark.slow
def test_the_page_holds_every_section_of_the_run_stamped_from_its_manifest(smoke_run, tmp_path, capsys):
    workdir, _ = smoke_run
    out = tmp_path / "results.md"
    assert main(["results-page", "--results", str(workdir / "results"), "--out", str(out)]) == 0
    page = out.read_text()
    for section in (
        "## Headline verdicts",
        "## Evidence",
        "## Remedies",
        "## Algebraic simulations",
        "## Real architectures",
        "## What the run cost",
    ):
        assert section in page
    run = manifest.read(workdir / "results")
    # the run's own commit, config and numerics, whatever the working directory; paths as given
    assert f"Run: commit `{run['commit'][:12]}`" in page and "config `config.yaml` (" in page
    assert "numerics deterministic (torch kernels AVX2, 1 thread a job)" in page and "Not in this run" not in page
    # how to redo it (the page wraps its prose lines: a long temp path may break the line)
    assert f"Written by `lostmid results-page --results {workdir / 'results'} --out {out}`" in " ".join(page.split())
    evidence = pd.read_parquet(workdir / "results" / "evidence")
    assert headline(evidence) in page and page.count("| **") >= len(evidence)
    assert main(["results-page", "--results", str(workdir / "results"), "--headline"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"From the run of `config.yaml` at commit `{run['commit'][:12]}` (every table: ")
    assert printed.endswith("\n\n" + headline(evidence))


def test_a_confirmatory_runs_rows_stand_beside_the_default_runs():
    from lostmid.pages.evidence import side_by_side

    confirm = pd.DataFrame([row("debiased_trains_faster", "blog (d)", "literal vs baseline", 0.01, "contradicted", 24)])
    default = pd.DataFrame(
        [
            row("failure_rises_with_position", "blog (a)", "baseline", 1.8, "supported", 24),
            row("debiased_trains_faster", "blog (d)", "literal vs baseline", 0.02, "inconclusive", 24),
        ]
    )
    for table in (confirm, default):
        table["variant"] = "debiased_literal"
    lines = side_by_side({"confirmatory": confirm, "default": default}).splitlines()
    assert lines[0] == "| claim | kind | setting | confirmatory | default |"
    assert "→ **contradicted** | 0.02 [-0.98, 1.02], 24 seeds → **inconclusive** |" in lines[2]
