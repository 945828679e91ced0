"""The fix run's page (`lostmid fix-page`; lostmid.study.fix_reading, lostmid.pages.fix) on small synthetic records
written directly as the run's files: a plan committed in a throwaway checkout (study/fix_plan.yaml with few fits
and windows), the none arm's record, the fits, each fix arm's held-out windows under its fit's stamp, the gates'
readings and the run's manifest. Planted effects must be read as the plan words them; the fits are the unit (the
plan's estimator, its gates and its bootstrap bands read them). Seconds each."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from test_figures import assert_arms_distinct, assert_in_range, assert_no_empty_panel, legend_lines, panels

from lostmid import manifest
from lostmid.architectures import fix_jobs, intervals
from lostmid.architectures import positional_bias as pb
from lostmid.architectures import retrieval_estimators as re
from lostmid.cli.main import main
from lostmid.plots import fix as fix_plots
from lostmid.stats import outcomes
from lostmid.study import fix_reading, reading

from conftest import REPO, git

FITS = 4  # fits per fix arm (the plan's 12, scaled down)
WINDOWS = 12  # held-out windows per n, 3 per fit (the plan's 108 and 144)
GATE = 8  # gate windows per n, 2 per fit (the plan's 24)
FRACTIONS = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]
STRENGTH = [0.5, 0.75, 1.0, 0.5]  # t_i of each calibration


def write_plan(repo, record, none):
    """study/fix_plan.yaml with this record, this none record, FITS fits and WINDOWS held-out windows, committed."""
    plan = yaml.safe_load((REPO / "study" / "fix_plan.yaml").read_text())
    plan["fits"] |= {"count": FITS, "windows": plan["fits"]["windows"][:FITS]}
    plan["run"] |= {"record": str(record), "none_record": str(none), "windows_by_n": {1024: WINDOWS, 4096: WINDOWS}}
    plan["run"]["gates"]["windows_by_n"] = {1024: GATE, 4096: GATE}
    plan["run"] |= {"floor_by_n": {1024: GATE, 4096: GATE}, "gate_first": plan["run"]["gate_first"] | {"floor": GATE}}
    for folder in ("study", "docs"):
        (repo / folder).mkdir(parents=True)
    (repo / "study" / "fix_plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    (repo / "docs" / "performance.md").write_text((REPO / "docs" / "performance.md").read_text())  # the cost
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "plan")
    return fix_reading.read_fix_plan(repo / "study" / "fix_plan.yaml")


def examples(n, k, arm, stamp, rng, gain=0.0, harm=False, base=None):
    """One window's rows: none's success and log p (lowest at q = 1), a fix's the same with ``gain`` nats at q = 1
    (plus noise) and, with ``harm``, every answer at q <= 1/4 lost."""
    rows = []
    for task in ("single", "number"):
        for q in FRACTIONS:
            if base is None:
                success, logprob = bool(rng.random() < 0.9), (-2.0 if q == 1 else -0.6) + rng.normal(0, 0.2)
            else:
                success, logprob = base[(task, q)]
                logprob += (gain + rng.normal(0, 0.15)) if q == 1 else rng.normal(0, 0.02)
                success = success and not (harm and q <= 0.25)
            rows.append(dict(model="smollm2", weights=arm, n=n, window=5000 + k, task=task, q=q, success=success)
                        | dict(logprob=logprob, draw=k, config_hash=stamp))  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(autouse=True)
def quick_manifest(monkeypatch):
    """The manifest's numerics probe (a child process importing torch) answered by this process: not under test."""
    from lostmid import numerics

    monkeypatch.setattr(manifest, "jobs_numerics", numerics.active)


def make_record(tmp_path, blog_gain=1.5, fitm_gain=1.5, harm=False, blog_flatness=(0.5,) * FITS, seed=0):
    """A complete synthetic fix record under tmp_path/"fix" (its plan committed in tmp_path/"repo"): FITS fits of
    each fix arm, held-out window k under fit k mod FITS, fit i's bias flattening its gate windows' profiles by
    ``blog_flatness[i]``."""
    rng = np.random.default_rng(seed)
    record, none, repo = tmp_path / "fix", tmp_path / "none", tmp_path / "repo"
    plan = write_plan(repo, record, none)
    block = yaml.safe_load((REPO / "runs" / "smollm2_kjv" / "overlay.yaml").read_text())["retrieval"]
    (none / "windows").mkdir(parents=True)
    (none / "overlay.yaml").write_text(yaml.safe_dump({"retrieval": block | {"resamples": 200}}))
    settings = fix_jobs.retrieval_settings(plan)
    fits = record / "fits"
    for arm in ("blog", "fitm"):
        for fit in range(FITS):
            bias = pb.PositionalBias(2, 1024, 4, False, ("distance", "key"))
            bias.distance.data.fill_(0.01 * fit)  # each fit its own draw
            fix_jobs.save_bias(bias, fits / f"{arm}_{fit}.pt")
            windows = {"n": 1024, "draws": [900 + fit], "corpus_windows": [11 + fit]}
            said = {"loss": 0.4, "none": 1.0, "fitted": True} if arm == "blog" else {"strength": STRENGTH[fit]}
            said |= {"fit": fit, "windows": windows, "bias_sha256": fix_jobs.sha256(fits / f"{arm}_{fit}.pt")}
            (fits / f"{arm}_{fit}.json").write_text(json.dumps(said))
    (fits / "none_check.json").write_text(json.dumps({"same": True}))
    (record / "windows").mkdir()
    (record / "gate").mkdir()
    for n in (1024, 4096):
        stamps = {
            (arm, fit): fix_jobs.window_hash(settings, arm, *fix_jobs.arm_bias(plan, arm, fit))
            for arm in fix_reading.ARMS
            for fit in range(FITS)
        }
        for k in range(WINDOWS):
            rows = examples(n, k, "pretrained", settings.record_hash(), rng)
            rows.to_parquet(none / "windows" / f"pretrained_n{n}_w{k}.parquet")
            base = {(t, q): (s, lp) for t, q, s, lp in rows[["task", "q", "success", "logprob"]].values}
            for arm, gain in (("blog", blog_gain), ("fitm", fitm_gain)):
                fixed = examples(n, k, arm, stamps[arm, k % FITS], rng, gain, harm and arm == "blog", base)
                fixed.to_parquet(record / "windows" / f"{arm}_n{n}_w{k}.parquet")
        for k in range(GATE):
            flat = rng.lognormal(0, 0.1)
            distance = rng.uniform(0.3, 0.5) if n == 1024 else np.nan
            gate = [("none", flat, distance), ("blog", flat * blog_flatness[k % FITS] * rng.lognormal(0, 0.05), np.nan)]
            gate.append(("fitm", flat * rng.lognormal(0, 0.1), distance * 0.5 if n == 1024 else np.nan))
            table = pd.DataFrame(gate, columns=["arm", "flatness", "content_free_distance"])
            table = table.assign(n=n, draw=k, fit=k % FITS, window=5000 + k)
            table.to_parquet(record / "gate" / f"n{n}_w{k}.parquet")
    (record / "overlay.yaml").write_text("plan: study/fix_plan.yaml\nfix: {block: 10}\n")
    manifest.start(record, repo, [str(record / "overlay.yaml")], records=["study/fix_plan.yaml"])
    manifest.finish(record, "success")
    return record, repo


def page(record, repo):
    assert main(["fix-page", "--record", str(record), "--repo", str(repo)]) == 0
    return " ".join((record / "README.md").read_text().split())  # the page's prose, unwrapped


def read(record, repo):
    fix = fix_reading.read_fix_record(record, repo)
    return {row.id: row for row in fix_reading.primary_rows(fix.plan, fix)}


def test_a_planted_improvement_is_decided_as_one_at_holm_levels_over_the_six(tmp_path):
    record, repo = make_record(tmp_path)
    rows = read(record, repo)
    assert len(rows) == 6 and all(row.why == "" for row in rows.values())
    worst = rows["blog_none_worst_1024"]
    assert worst.effect.n == FITS and worst.windows == WINDOWS  # t over the fit means
    assert worst.effect.estimate == pytest.approx(1.5, abs=0.2)
    assert worst.outcome == "at least our margin"
    # Holm over k = 6: the two non-inferiority primaries (every difference 0: p = 0) rank first, then this one
    assert [rows[f"blog_none_overall_{n}"].level for n in (1024, 4096)] == [0.05 / 6, 0.05 / 5]
    rank = 3 if worst.p < rows["blog_none_worst_4096"].p else 4  # then the two worst-position ones, by their p
    assert worst.level == pytest.approx(0.05 / (6 - rank + 1))
    assert rows["blog_fitm_worst_4096"].outcome == "no effect of that size"  # 1.5 against 1.5: inside ±0.5
    assert rows["blog_none_overall_1024"].outcome == "not lowered"
    text = page(record, repo)
    assert "At n = 1024, the blog's bias changes the answer's log-probability at its worst position (q = 1)" in text
    assert "at least our margin (our margin 0.5 nats)" in text and "LOWERS" not in text
    assert "blog at n = 4096 does not lower accuracy overall detectably" in text
    assert "The held-out none arm's own worst position" in text and "q = 1 at n = 1024 (-2." in text
    assert "| fitted form | distance + key, shared |" in text  # the measured cost, quoted with its source
    assert f"Holm interval over {FITS} fits, {WINDOWS} windows)" in text
    assert "Found-in-the-Middle's calibration (4 calibrations, t = 0.5 in 2, t = 0.75 in 1, t = 1 in 1)" in text
    assert "| 3 | 903 | 14 | 0.4 (none 1) | yes | 0.5 |" in text  # fit 3: its window, flatness, B, t_3
    assert "bootstrap, two-level: the fits resampled, then the windows within each drawn fit" in text
    positions = pd.read_parquet(record / "tables" / "positions.parquet")
    assert set(positions.arm) == {"none", "blog", "fitm"} and (positions.windows == WINDOWS).all()
    assert (positions.fits == FITS).all()
    assert (record / "fix_by_position.png").stat().st_size > 0


@pytest.fixture
def unsaved(monkeypatch):
    """The figure drawn but not written (the first test checks the file): a page in seconds."""
    monkeypatch.setattr(fix_plots, "save", lambda fig, path: None)


def test_a_planted_harm_is_said_plainly(tmp_path, unsaved):
    record, repo = make_record(tmp_path, harm=True)
    rows = read(record, repo)
    assert rows["blog_none_overall_1024"].outcome == fix_reading.LOWERED_BEYOND
    assert rows["blog_none_overall_1024"].high < -0.02
    text = page(record, repo)
    assert "it LOWERS accuracy overall" in text and "blog at n = 1024 LOWERS accuracy overall" in text
    assert "fitm at n = 1024 does not lower accuracy overall detectably" in text


def test_a_failed_gate_makes_no_decision_and_says_so_and_at_4096_the_run_stopped_at_the_floor(tmp_path, unsaved):
    record, repo = make_record(tmp_path, blog_flatness=(1.0,) * FITS)  # no fit flattens the held-out profiles
    for arm in fix_reading.ARMS:  # the gate-first order: at 4096 the windows beyond the floor never ran
        for k in range(GATE, WINDOWS):
            (record / "windows" / f"{arm}_n4096_w{k}.parquet").unlink()
    rows = read(record, repo)
    for row in rows.values():  # every primary has the blog as an arm
        assert not row.decided and row.outcome == fix_reading.NO_DECISION
        at_4096 = "stopped by the gate: the blog gate at n = 4096"
        assert row.why.startswith("the fix did not do what it is for" if row.primary["n"] == 1024 else at_4096)
    text = page(record, repo)
    assert "At n = 1024, no decision on any of the three questions: the fix did not do what it is for" in text
    assert "- blog at n = 1024: FAILED" in text and "- fitm at n = 1024: passed" in text
    assert f"n = 4096: none {WINDOWS}, blog {GATE}, fitm {GATE} of {WINDOWS} (stopped by the gate at {GATE})" in text
    assert "At n = 4096, no decision on any of the three questions: stopped by the gate: the blog gate at n = 4096 " \
        "failed (" in text and f"so the run stopped at the first {GATE} of the plan's {WINDOWS} held-out windows " \
        "there, as the plan's gate-first order says" in text  # fmt: skip


def test_too_few_windows_make_no_decision(tmp_path, unsaved):
    record, repo = make_record(tmp_path)
    (record / "windows" / "fitm_n4096_w3.parquet").unlink()
    rows = read(record, repo)
    assert rows["blog_fitm_worst_4096"].outcome == fix_reading.NO_DECISION
    assert rows["blog_fitm_worst_4096"].why == f"{WINDOWS - 1} of the plan's {WINDOWS} held-out windows paired " \
        "in its arms (no interim look)"  # fmt: skip
    assert rows["blog_none_worst_4096"].outcome == "at least our margin"  # its arms are complete
    text = page(record, repo)
    assert "against Found-in-the-Middle's calibration (4 calibrations, t = 0.5 in 2, t = 0.75 in 1, t = 1 in 1) no " \
        f"decision: {WINDOWS - 1} of the plan's {WINDOWS}" in text  # fmt: skip


def test_a_record_whose_plan_changed_is_refused_and_nothing_is_written(tmp_path, capsys):
    record, repo = make_record(tmp_path)
    plan = repo / "study" / "fix_plan.yaml"
    plan.write_text(plan.read_text().replace("alpha: 0.05", "alpha: 0.1"))
    git(repo, "commit", "-qam", "a looser alpha, after the run")
    assert main(["fix-page", "--record", str(record), "--repo", str(repo)]) == 2
    error = capsys.readouterr().err
    assert "the plan check failed (the plan changed after the run began" in error
    assert not (record / "README.md").exists() and not (record / "tables").exists()


def test_the_outcome_rules_read_intervals_as_the_plan_words_them():
    assert fix_reading.one_sided_outcome(-0.9, -0.6, 0.5) == "no effect of that size (the other way)"
    assert fix_reading.one_sided_outcome(0.1, 0.4, 0.5) == "an effect smaller than our margin"
    assert outcomes.two_sided_outcome(-0.3, -0.1, 0.5) == "an effect (negative)"
    assert outcomes.two_sided_outcome(-0.3, 0.6, 0.5) == reading.INCONCLUSIVE
    assert fix_reading.non_inferiority_outcome(-0.015, -0.005, 0.02) == fix_reading.LOWERED_WITHIN
    assert fix_reading.non_inferiority_outcome(-0.03, 0.01, 0.02) == reading.INCONCLUSIVE
    assert fix_reading.non_inferiority_outcome(-0.05, -0.01, 0.02) == fix_reading.LOWERED  # below 0, size undecided
    assert fix_reading.non_inferiority_outcome(-0.05, -0.02, 0.02) == fix_reading.LOWERED  # on -m: not beyond it
    assert fix_reading.non_inferiority_outcome(-0.05, -0.03, 0.02) == fix_reading.LOWERED_BEYOND
    assert fix_reading.non_inferiority_outcome(-0.01, 0.01, 0.02) == fix_reading.NOT_LOWERED
    assert fix_reading.non_inferiority_outcome(float("nan"), -0.01, 0.02) == reading.INCONCLUSIVE
    units = pd.Series([-0.01, 0.0, 0.01, -0.005])
    assert fix_reading.non_inferiority_p(units, 0.02) < 0.05 < fix_reading.non_inferiority_p(units, 0.0)


def test_the_figure_is_accuracy_and_log_p_by_position_a_line_per_arm_a_column_per_n(tmp_path, monkeypatch):
    from test_figures import assert_printable

    rows = [
        dict(arm=arm, n=n, q=q, windows=5, success=s, success_lo=s - 0.05, success_hi=min(s + 0.05, 1.0))
        | dict(logprob=-1 + i, logprob_lo=-1.2 + i, logprob_hi=-0.8 + i)
        for i, arm in enumerate(("none", "blog", "fitm"))
        for n in (1024, 4096)
        for q, s in zip(FRACTIONS, np.linspace(0.6, 0.9, 9))
    ]
    figures = []
    monkeypatch.setattr(fix_plots, "save", lambda fig, path: figures.append(fig))
    fix_plots.fix_by_position(pd.DataFrame(rows), tmp_path / "f.png")
    fig = figures[0]
    assert_printable(fig)
    axes = panels(fig)
    assert len(axes) == 4 and axes[0].get_title().startswith("n = 1024 (windows: none 5, blog 5, fitm 5)")
    assert [ax.get_ylabel() for ax in axes] == ["accuracy (answer top-1)", "", "log p(answer) (nats)", ""]
    assert_arms_distinct(fig)
    assert_no_empty_panel(fig)
    assert_in_range(fig)
    assert list(legend_lines(fig)) == list(fix_plots.ARM_LABELS.values())


def test_an_incomplete_or_restamped_record_is_one_line_and_nothing_is_written(tmp_path, capsys):
    record, repo = make_record(tmp_path)
    argv = ["fix-page", "--record", str(record), "--repo", str(repo)]
    check = record / "fits" / "none_check.json"
    kept = check.read_text()
    check.unlink()
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().endswith("none_check.json: missing: the record is incomplete")
    check.write_text(kept)
    fitm = json.loads((record / "fits" / "fitm_0.json").read_text())
    (record / "fits" / "fitm_0.json").write_text(json.dumps(fitm | {"strength": 1.0}))
    assert main(argv) == 2  # fit 0's fitm windows were made at another strength than its record now says
    assert "fitm_n1024_w0.parquet was made under another configuration" in capsys.readouterr().err
    assert not (record / "README.md").exists() and not (record / "tables").exists()


def paired(per_window, fits):
    """Two arms' examples of the windows 0 .. W - 1 (window w under fit ``fits[w]``, q = 1, one task): the arm's
    log p(answer) ``per_window``, the other's 0, so each window's paired difference is its value."""
    rows = pd.DataFrame({"window": range(len(per_window)), "fit": fits, "task": "single", "q": 1.0})
    return rows.assign(logprob=per_window), rows.assign(logprob=0.0)


def test_the_fit_cluster_estimate_is_the_window_t_with_one_window_a_fit_and_widens_when_fits_differ():
    rng = np.random.default_rng(5)
    values = rng.normal(0.3, 0.2, size=12)
    arm, other = paired(values, np.arange(12))  # one window per fit: the fits are the windows
    clustered = re.fit_cluster_difference(arm, other, [1.0], "logprob", "paired difference")
    naive = re.t_effect(pd.Series(values), 0.95)
    assert clustered.n == 12 and clustered.interval(0.95) == pytest.approx((naive.low, naive.high))
    assert clustered.method.endswith("Student t over 12 fits (windows nested in fits)")

    fits = np.arange(12) % 4  # 4 fits of 3 windows, the same windows' spread
    same = re.fit_cluster_difference(*paired(values, fits), [1.0], "logprob", "paired difference")
    shift = np.array([-0.4, -0.1, 0.1, 0.4])[fits]  # the fits differ: each fit moves its windows together
    differ = re.fit_cluster_difference(*paired(values + shift, fits), [1.0], "logprob", "paired difference")
    assert differ.estimate == pytest.approx(same.estimate)  # the shifts average out over the fits ...
    width = {name: np.diff(effect.interval(0.95))[0] for name, effect in (("same", same), ("differ", differ))}
    assert width["differ"] > 2 * width["same"]  # ... but the interval carries the fits' spread
    over_windows = re.t_effect(pd.Series(values + shift), 0.95)  # what treating the windows as independent says
    assert over_windows.high - over_windows.low < width["differ"]
    assert differ.units.index.name == "fit" and list(differ.units.index) == [0, 1, 2, 3]


def test_the_two_level_bootstrap_draws_whole_fits_then_windows_within_them():
    fits = np.repeat([0, 1, 2], 3)  # 3 fits of 3 windows: every draw takes 3 fits, 3 windows from each
    weights = intervals.nested_draws(fits, 200, seed=1)
    assert weights.shape == (201, 9) and np.allclose(weights[0], 1 / 9)  # draw 0: every window once
    counts = np.round(weights[1:] * 9).astype(int)  # a window's count in the draw
    assert np.allclose(weights[1:] * 9, counts) and (counts.sum(1) == 9).all()
    per_fit = np.stack([counts[:, fits == f].sum(1) for f in range(3)], 1)
    assert (per_fit % 3 == 0).all()  # a fit comes in whole copies (0, 1, 2 or 3 times), its windows drawn within it
    assert (per_fit == 0).any() and ((counts > 0) & (counts != 1)).any()  # fits left out; windows redrawn
    uneven = intervals.nested_draws(np.repeat([0, 1], [2, 5]), 50, seed=2)
    assert np.allclose(uneven.sum(1), 1)  # unequal fits: the weights are each draw's counts over its total


def test_the_gate_reads_the_fit_means_and_counts_the_fits_that_pass_on_their_own(tmp_path, unsaved):
    record, repo = make_record(tmp_path, blog_flatness=(0.4, 0.5, 0.6, 1.0))  # fit 3 does not flatten
    fix = fix_reading.read_fix_record(record, repo)
    gate = fix_reading.gate_reading(fix.plan, fix, "blog", 1024)
    assert gate.fits == FITS and list(gate.per_fit.index) == list(range(FITS)) and gate.passing == 3
    assert gate.per_fit[3] == pytest.approx(0.0, abs=0.15) and gate.per_fit[0] == pytest.approx(np.log(0.4), abs=0.15)
    assert gate.mean == pytest.approx(gate.per_fit.mean())  # the mean over the fits of their gate windows' means
    assert gate.passed is False  # one fit in four that does not flatten: the t bound over 4 fits crosses log 0.75
    assert "3 of 4 fits pass on their own" in gate.why
    table = fix_reading.fit_table(fix)
    assert list(table.draw) == [900, 901, 902, 903] and list(table.strength) == STRENGTH
    assert table.blog_gate_n1024.iloc[3] == pytest.approx(1.0, abs=0.15)
