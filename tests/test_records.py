"""Records that cannot mislead (issue 57): each test tampers a copy of a committed run record (runs/study,
runs/default, runs/smollm2_retrieval) the way a careful user could, and expects either the one-line refusal
(exit status 2, nothing written) or the stamp's warning.

The stamp reads every invocation (lostmid.manifest.warnings); the plan check compares the plan with the plan as
committed at the run's commit (lostmid.study.record.plan_status); a record is checked whole before a page is
written from it (lostmid.records); a committed page is replaced only by a page of the same record."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pandas as pd
import pytest

from lostmid import manifest
from lostmid.cli.main import main
from lostmid.errors import InputError

from conftest import REPO, begun_under, copy_record, git, plan_repo, tamper_manifest

# A claim of runs/default's evidence table and the start of its setting: one row, over seeds 0-23.
POOLED = ["--claim", "debiased_has_less_position_preference", "--setting", "debiased_literal vs"]


def one_error_line(capsys) -> str:
    """The command's error: exactly one line on stderr starting 'lostmid', returned."""
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lostmid")]
    assert len(lines) == 1, lines
    return lines[0]


# --------------------------------------------------------------------------- 1. the stamp reads every invocation


def test_the_committed_records_stamp_without_a_warning_and_a_resume_after_an_error_is_shown():
    for name in ("study", "default"):
        assert manifest.warnings(manifest.read(REPO / "runs" / name)) == []
    retrieval = manifest.read(REPO / "runs" / "smollm2_retrieval")
    assert manifest.warnings(retrieval) == []  # resumed at the same commit, configs and numerics
    assert manifest.stamp(retrieval).startswith("Resumed: invocation 1 ended in error, each resumed by a later")


def test_the_time_a_stamp_gives_is_that_of_the_invocations_that_finished_and_it_says_how_many_did_not():
    """A run stopped twice and resumed: the stopped invocations' time was never stamped, so the stamp's wall-clock
    and CPU are the finished one's, and the line says so rather than passing them off as the run's."""
    found = manifest.read(REPO / "runs" / "study2")
    stopped = sum(item["wall_s"] is None for item in found["invocations"])
    assert stopped >= 1
    line = next(line for line in manifest.stamp(found).splitlines() if "invocation(s)" in line)
    assert line.endswith(f"({stopped} stopped before their time was stamped).")
    finished = json.loads(json.dumps(found))
    finished["invocations"] = [item for item in found["invocations"] if item["wall_s"] is not None]
    line = next(line for line in manifest.stamp(finished).splitlines() if "invocation(s)" in line)
    assert "stopped" not in line


def resumed_after(record, change):
    """The record's manifest with a copy of its invocation, changed by ``change``, run before it."""

    def resumed(found):
        first = json.loads(json.dumps(found["invocations"][0]))
        change(first)
        found["invocations"] = [first, *found["invocations"]]

    return tamper_manifest(record, resumed)


@pytest.mark.parametrize(
    "change, warning",
    [
        (lambda first: first["numerics"].update(mode="fast"), "computed with numerics fast, deterministic"),
        (lambda first: first.update(status="error", finished=None, commit="0" * 40), "resumed across commits"),
        (lambda first: first["configs"][0].update(sha256="a" * 64), "resumed with other configs (1: aaaaaaaaaaaa"),
        (lambda first: first.update(dirty=True), "made from a tree with uncommitted changes"),
    ],
    ids=["fast numerics before", "another commit before", "another config before", "dirty before"],
)
def test_an_earlier_invocation_unlike_the_last_is_a_warning(tmp_path, change, warning):
    """A second invocation, deterministic and clean, resumes one made otherwise: the stamp's first line warns."""
    record = copy_record("default", tmp_path)
    resumed_after(record, change)
    first = manifest.stamp(manifest.read(record)).splitlines()[0]
    assert first.startswith("**Not reproducible as stamped") and warning in first


def test_the_results_page_of_a_run_partly_made_with_fast_numerics_says_so_first(tmp_path):
    record = copy_record("default", tmp_path)
    resumed_after(record, lambda first: first["numerics"].update(mode="fast"))
    out = tmp_path / "results.md"
    assert main(["results-page", "--results", str(record), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[2].startswith("**Not reproducible as stamped: the run was computed with numerics fast, determ")
    assert lines[4].startswith("Run: commit") and lines[5].startswith("numerics fast, deterministic (")


def test_a_page_written_while_a_resume_with_another_config_runs_warns_of_both(tmp_path):
    """The issue's step-40 tables under the step-60 config hash: invocation 1 ran, the config changed, invocation 2
    has not finished."""
    record = copy_record("default", tmp_path)

    def interrupted(found):
        second = json.loads(json.dumps(found["invocations"][0]))
        second["configs"][0]["sha256"] = "b" * 64
        second.update(finished=None, status=None)
        found["invocations"].append(second)
        found.update(second)

    tamper_manifest(record, interrupted)
    first = manifest.stamp(manifest.read(record)).splitlines()[0]
    assert "resumed with other configs" in first and first.endswith("; not finished.**")


def test_a_last_invocation_that_failed_is_a_warning(tmp_path):
    record = copy_record("smollm2_retrieval", tmp_path)
    tamper_manifest(record, lambda found: found["invocations"].reverse())  # the successful one first
    assert manifest.warnings(manifest.read(record)) == ["ended in error (its last invocation)"]


# --------------------------------------------------------------------------- 2. the pre-registration check


def test_a_run_cannot_start_from_an_uncommitted_plan(tmp_path):
    repo = plan_repo(tmp_path)
    (repo / "study" / "plan.yaml").write_text((repo / "study" / "plan.yaml").read_text() + "# edited\n")
    with pytest.raises(InputError, match=r"study/plan.yaml has uncommitted changes .*commit it before the run"):
        manifest.start(repo / "results", repo, [], records=["study/plan.yaml"])
    assert not (repo / "results").exists()


def test_a_record_begun_from_an_uncommitted_plan_is_not_primary(tmp_path):
    """The plan's last commit precedes the run's and its hash is the one the run recorded, but that hash is of an
    edit that was never committed: the plan as committed at the run's commit is another."""
    from lostmid.study.record import plan_status

    repo = plan_repo(tmp_path)
    plan = repo / "study" / "plan.yaml"
    plan.write_text(plan.read_text() + "# edited, never committed\n")
    record = copy_record("study", tmp_path)
    found = begun_under(record, repo)
    primary, why = plan_status(repo, plan, found)
    assert not primary and "began from a plan study/plan.yaml that is not the one committed at its commit" in why


def test_a_manifest_without_invocations_is_not_a_run(tmp_path, capsys):
    record = copy_record("study", tmp_path)
    tamper_manifest(record, lambda found: found.update(invocations=[]))
    out = tmp_path / "findings.md"
    assert main(["findings", "--run", str(record), "--out", str(out), "--figures", str(tmp_path / "f")]) == 2
    assert one_error_line(capsys).endswith("manifest.json: the manifest lists no invocation: not a run")
    assert not out.exists() and not (tmp_path / "f").exists()


def test_a_plan_outside_the_repository_is_one_line(tmp_path, capsys):
    plan = shutil.copy(REPO / "study" / "plan.yaml", tmp_path / "plan.yaml")
    out = tmp_path / "findings.md"
    argv = ["findings", "--run", str(REPO / "runs" / "study"), "--plan", str(plan), "--repo", str(REPO)]
    assert main([*argv, "--out", str(out)]) == 2
    assert "lies outside the repository" in one_error_line(capsys) and not out.exists()


def test_a_changed_plan_makes_every_answer_row_and_readme_line_exploratory(tmp_path):
    repo = plan_repo(tmp_path)
    record = copy_record("study", tmp_path)
    begun_under(record, repo)
    plan = repo / "study" / "plan.yaml"
    plan.write_text(plan.read_text() + "# changed after the run began\n")
    git(repo, "commit", "-qam", "the plan, after the run")
    readme = repo / "README.md"
    readme.write_text("# x\n<!-- findings: lostmid findings --readme README.md -->\nold\n<!-- /findings -->\n")
    out = repo / "docs" / "findings.md"
    argv = ["findings", "--run", str(record), "--plan", str(plan), "--repo", str(repo), "--out", str(out)]
    assert main([*argv, "--figures", str(repo / "docs" / "figures"), "--readme", str(readme)]) == 0
    page = out.read_text()
    assert "**EXPLORATORY: the plan check failed (the plan changed after the run began" in page
    assert "Endpoints: EXPLORATORY" in page
    unwrapped = " ".join(page.split())
    rows = [line for line in page.splitlines() if line.startswith("| `")][:9]  # the primaries' table
    assert len(rows) == 9 and all(row.split(" | ")[-1].startswith("exploratory: ") for row in rows)
    answers = " ".join(readme.read_text().split())  # its lines are wrapped (lostmid.io.wrap_prose)
    assert answers.count(" - **") == 9 and answers.count("** Exploratory, not primary: ") == 9
    assert unwrapped.count("** Exploratory, not primary: ") == 9  # the answers on the page
    assert unwrapped.count("Exploratory, not primary: ") == 2 * 9  # and each question's section


# --------------------------------------------------------------------------- 3. a record checked whole


def damage(tables, name):
    """Damage the record's table ``name`` as named: the line expected back."""
    path = tables / "failure.parquet"
    failure = pd.read_parquet(path)
    if name == "deleted":
        (tables / "influence.parquet").unlink()
        return r"tables/influence.parquet: missing: the record is incomplete"
    if name == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return r"tables/failure.parquet: unreadable \("
    if name == "NaN row":
        failure.loc[5, "p"] = float("nan")
        failure.to_parquet(path)
        return r"tables/failure.parquet: column p has 1 missing or infinite values \(first at row 5\)"
    failure = pd.concat([failure, failure[failure.seed == failure.seed.iloc[0]]])  # a seed's rows twice
    failure.to_parquet(path)
    return r"tables/failure.parquet: \d+ rows share their keys \(variant study_\w+, L 16, .*\): each must be one row"


@pytest.mark.parametrize("name", ["deleted", "truncated", "NaN row", "duplicated seed rows"])
def test_a_damaged_table_is_one_line_naming_it_and_nothing_is_written(tmp_path, capsys, name):
    record = copy_record("study", tmp_path)
    expected = damage(record / "tables", name)
    out, figures = tmp_path / "findings.md", tmp_path / "figures"
    assert main(["findings", "--run", str(record), "--out", str(out), "--figures", str(figures)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"lostmid findings: error: {record}/") and re.search(expected, line)
    assert not out.exists() and not figures.exists()


def test_a_typo_in_the_run_folder_writes_nothing(tmp_path, capsys):
    readme = shutil.copy(REPO / "README.md", tmp_path / "README.md")
    out = tmp_path / "findings.md"
    argv = ["findings", "--run", str(tmp_path / "studdy"), "--out", str(out), "--readme", str(readme)]
    assert main(argv) == 2
    assert one_error_line(capsys).endswith(f"{tmp_path / 'studdy'}: no such run record folder")
    assert not out.exists() and (tmp_path / "README.md").read_text() == (REPO / "README.md").read_text()


def edit_seeds(record):
    """The record's overlay with the seeds 0-23 of its first grid entry made 100-123 (comments kept)."""
    overlay = record / "overlay.yaml"
    text = overlay.read_text()
    seeds = "seeds: [" + ", ".join(map(str, range(24))) + "]"
    assert seeds in text
    overlay.write_text(text.replace(seeds, "seeds: [" + ", ".join(map(str, range(100, 124))) + "]", 1))


def test_pooling_refuses_a_record_whose_overlay_no_longer_matches_its_manifest(tmp_path, capsys):
    first, second = copy_record("default", tmp_path / "a"), copy_record("default", tmp_path / "b")
    assert main(["pooled", "--runs", str(first), str(second), *POOLED]) == 0  # a repeat: counts once
    assert "0-23" in capsys.readouterr().out
    edit_seeds(second)
    argv = ["pooled", "--runs", str(first), str(second), *POOLED, "--out", str(tmp_path / "p")]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert f"{second}/overlay.yaml: sha256 " in line and line.endswith("the overlay was edited after the run")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("name", ["default", "study", "smollm2_retrieval"])
def test_every_page_refuses_a_record_whose_overlay_was_edited(tmp_path, capsys, name):
    record = copy_record(name, tmp_path)
    overlay = record / "overlay.yaml"
    overlay.write_text(overlay.read_text() + "device: cuda\n")
    out = tmp_path / "page.md"
    command = {
        "default": ["results-page", "--results", str(record), "--out", str(out)],
        "study": ["findings", "--run", str(record), "--out", str(out), "--figures", str(tmp_path / "f")],
        "smollm2_retrieval": ["retrieval-page", "--record", str(record)],
    }[name]
    before = (record / "README.md").read_text() if name == "smollm2_retrieval" else None
    assert main(command) == 2
    assert one_error_line(capsys).endswith("the overlay was edited after the run") and not out.exists()
    if before is not None:
        assert (record / "README.md").read_text() == before


# --------------------------------------------------------------------------- 4. no committed page of another record


def committed_page(tmp_path, path):
    """A git checkout holding the committed page at ``path`` (relative to the repository), committed: the page
    as a reader's clone has it."""
    repo = tmp_path / "clone"
    (repo / path).parent.mkdir(parents=True)
    shutil.copy(REPO / path, repo / path)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "pages")
    return repo / path


def test_a_committed_results_page_is_replaced_only_from_its_own_record_or_by_name(tmp_path, capsys):
    page = committed_page(tmp_path, "runs/default/results.md")
    committed = page.read_text()
    other = copy_record("default", tmp_path / "new")
    tamper_manifest(other, lambda found: [item.update(commit="1" * 40) for item in [found, *found["invocations"]]])
    assert main(["results-page", "--results", str(other), "--out", str(page)]) == 2
    assert "is committed and was written from another record" in one_error_line(capsys)
    assert page.read_text() == committed
    assert main(["results-page", "--results", str(copy_record("default", tmp_path)), "--out", str(page)]) == 0
    assert main(["results-page", "--results", str(other), "--out", str(page), "--force"]) == 0
    assert "Run: commit `111111111111`" in page.read_text()


def test_the_readme_answers_are_written_only_beside_the_committed_page_of_the_same_record(tmp_path, capsys):
    readme = committed_page(tmp_path, "docs/findings.md").parents[1] / "README.md"
    readme.write_text((REPO / "README.md").read_text())
    git(readme.parent, "add", "README.md")
    git(readme.parent, "commit", "-qm", "readme")
    out = tmp_path / "elsewhere.md"
    argv = ["findings", "--run", str(REPO / "runs" / "study"), "--plan", str(REPO / "study" / "plan.yaml")]
    assert main([*argv, "--repo", str(REPO), "--out", str(out), "--readme", str(readme)]) == 2
    assert "README.md is committed: its answers are written only beside the committed page" in one_error_line(capsys)
    assert not out.exists() and readme.read_text() == (REPO / "README.md").read_text()


def test_a_committed_study_record_is_not_replaced_by_another_runs_tables(tmp_path, capsys):
    clone = tmp_path / "clone"
    committed = copy_record("study", clone / "runs")
    git(clone, "init", "-q")
    git(clone, "add", ".")
    git(clone, "commit", "-qm", "record")
    results = copy_record("study", tmp_path / "results")  # another run: its manifest, the same overlay
    tamper_manifest(results, lambda found: found["invocations"][0].update(started="2027-01-01T00:00:00+00:00"))
    argv = ["study-record", "--results", str(results), "--overlay", str(results / "overlay.yaml")]
    assert main([*argv, "--out", str(committed)]) == 2
    assert "holds the committed record of another run" in one_error_line(capsys)
    assert subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True).stdout == b""


def test_the_study_record_keeps_every_fit_s_convergence_trace_named_by_its_fit(tmp_path):
    """The second study's referee asked for the fits' traces in the record: every start of every fit of the plan's
    arms, each row named by its fit; a fit of a variant outside the plan is not copied."""
    from lostmid import io

    results = copy_record("study", tmp_path / "results")
    trace = pd.DataFrame({"restart": [0, 0, 1], "iteration": [0, 1, 0], "objective": [1.0, 0.5, 0.9]})
    for variant in ("study_fix_res_1", "study_fix_res_10", "study_fix_nores_2"):  # _10 is no fit of the plan
        io.write_parquet(trace, results / "bias_fit_iterations" / f"{variant}_L16_M4.parquet")
    out = tmp_path / "record"
    argv = ["study-record", "--results", str(results), "--overlay", str(results / "overlay.yaml"), "--out", str(out)]
    assert main(argv) == 0
    kept = pd.read_parquet(out / "tables" / "bias_iterations.parquet")
    assert sorted(kept.variant.unique()) == ["study_fix_nores_2", "study_fix_res_1"]
    assert set(kept.L) == {16} and set(kept.depth) == {4} and len(kept) == 6
    assert kept.groupby("variant").objective.min().tolist() == [0.5, 0.5]


def test_the_study_record_keeps_what_each_job_cost_from_its_own_log(tmp_path):
    """The record holds the run's cost (issue 52: "its cost measured"): one row per job log, its CPU seconds and
    peak memory from the log's last cost line, so a resumed job counts its completed attempt."""
    results = copy_record("study", tmp_path / "results")
    log = results / "logs" / "train" / "study_base_res" / "L16_M4_seeds0-3_step250.log"
    log.parent.mkdir(parents=True)
    killed = "INFO lostmid: training\n"  # an attempt killed before its cost line
    log.write_text(killed + "INFO lostmid: job cpu 12.5 s (user 12.0 s, system 0.5 s), peak memory 300 MB\n")
    out = tmp_path / "record"
    argv = ["study-record", "--results", str(results), "--overlay", str(results / "overlay.yaml"), "--out", str(out)]
    assert main(argv) == 0
    cost = pd.read_parquet(out / "tables" / "job_cost.parquet")
    assert cost[["stage", "cpu_s", "peak_mb"]].values.tolist() == [["train", 12.5, 300.0]]
