"""The second study's reading (study/plan2.yaml) and the one findings page for both studies, on a tiny synthetic
study-2 record written as the study_run target's tables would be: 3 fits per fix arm, 2 seeds per fit, L 16,
the plan's checkpoints; a planted position effect in each baseline, flat fix arms, a gate per fit."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import yaml

from lostmid.study.study2_secondaries import PILOT

from conftest import REPO, SLOW_PRIMARY, begun_under, copy_record, git

STEPS = range(0, 1501, 250)
RESAMPLES = 200  # the (a) primaries' cluster bootstrap (the plan's 2000 take a minute on a tiny record)
FITS, SEEDS_PER_FIT, BASE_SEEDS = 3, 2, 8
PASSING = "study_fix_nores_1"  # study 1's fits: this one flattens its model (the fit checks pass) ...
FAILING = "study_fix_res_1"  # ... and this one does not


def failure_rows(variant: str, seeds, logit, n: int = 2048, seed: int = 0) -> list[dict]:
    """Failure counts per seed, step and flag position f = 2..16 (p = f / 16), failure drawn with log odds
    ``logit(p, step)``."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in seeds:
        for step in STEPS:
            for f in range(2, 17):
                p = f / 16
                failures = int(rng.binomial(n, 1 / (1 + np.exp(-logit(p, step)))))
                rows.append(dict(variant=variant, L=16, depth=4, seed=s, step=step, flag_pos=f, p=p, n=n,
                                 failures=failures, failure_rate=failures / n))  # fmt: skip
    return rows


def synthetic_tables(passing: dict[str, int]) -> tuple[dict, dict]:
    """(overlay, tables): a baseline and a fix arm per residual setting; ``passing[arm]`` fits of the fix arm pass
    their fit checks (study 1's passing fit's rows), the others do not (its failing fit's)."""
    study1 = pd.read_parquet(REPO / "runs" / "study" / "tables" / "bias_summary.parquet")
    grid, rows, summary = [], [], []
    for k, (residual, start) in enumerate(((True, 0), (False, 100))):
        name = "res" if residual else "nores"
        base = list(range(start, start + BASE_SEEDS))
        grid.append({"variants": [f"study2_base_{name}"], "L": [16], "depth": [4], "seeds": base})
        rows += failure_rows(f"study2_base_{name}", base, lambda p, step: -3.5 + 3 * p + 0 * step, seed=k)
        for fit in range(1, FITS + 1):
            variant, seeds = f"study2_fix_{name}_{fit}", base[(fit - 1) * SEEDS_PER_FIT : fit * SEEDS_PER_FIT]
            grid.append({"variants": [variant], "L": [16], "depth": [4], "seeds": seeds})
            rows += failure_rows(variant, seeds, lambda p, step: -2.5 + 0 * p, seed=10 * k + fit)
            template = PASSING if fit <= passing[f"fix_{name}"] else FAILING
            summary.append(study1[study1.variant == template].assign(variant=variant, fit_model=variant))
    failure = pd.DataFrame(rows)
    base = failure[failure.variant.isin(["study2_base_res", "study2_base_nores"])]
    base = base.drop_duplicates(["variant", "seed", "step", "flag_pos"])
    noise = np.random.default_rng(7).standard_normal(len(base))
    influence = pd.DataFrame({"variant": base.variant, "L": 16, "depth": 4, "seed": base.seed,
                              "step": base.step, "layer": 0, "position": base.flag_pos - 1,
                              "p": (base.flag_pos - 1.5) / 16, "energy": 1.0,
                              "density": np.exp(-0.2 * base.flag_pos + 0.3 * noise)})  # fmt: skip
    overlay = {"plan": "study/plan2.yaml", "grid": grid}
    return overlay, {"failure": failure, "influence": influence, "bias_summary": pd.concat(summary)}


def checkout(tmp_path):
    """A git checkout holding both plans, committed: study 2's as it is in the repository, study 1's less its
    slowest primary (as the other findings tests read it)."""
    repo = tmp_path / "repo"
    (repo / "study").mkdir(parents=True)
    shutil.copyfile(REPO / "study" / "plan2.yaml", repo / "study" / "plan2.yaml")
    (repo / PILOT).parent.mkdir(parents=True)
    shutil.copyfile(REPO / PILOT, repo / PILOT)  # the residual pilot's record, which the page reads
    plan = yaml.safe_load((REPO / "study" / "plan.yaml").read_text())
    plan["primaries"] = [p for p in plan["primaries"] if p["id"] != SLOW_PRIMARY]
    (repo / "study" / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "plans")
    return repo


def write_record(path, repo, passing: dict[str, int], plan_sha256: str | None = None):
    """The record folder ``path`` as ``lostmid study-record`` writes it, its run begun at ``repo``'s commit under
    study/plan2.yaml (or a plan of another sha256)."""
    from lostmid import io
    from lostmid import manifest as run_manifest

    overlay, tables = synthetic_tables(passing)
    path.mkdir(parents=True)
    (path / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    for name, table in tables.items():
        io.write_parquet(table.reset_index(drop=True), path / "tables" / f"{name}.parquet")
    recorded = run_manifest.recorded(repo, "study/plan2.yaml")
    if plan_sha256:
        recorded = {**recorded, "sha256": plan_sha256}
    invocation = {
        **run_manifest.source(repo),
        "configs": [{"path": "config/study2.yaml", "sha256": run_manifest.sha256(path / "overlay.yaml")}],
        "records": [recorded],
        "numerics": {"mode": "deterministic"},
        "machine": {"cpu": "test", "cores": 2, "architecture": "x86_64"},
        "versions": {"torch": "test"},
        "finished": None,
    }
    (path / "manifest.json").write_text(json.dumps({**invocation, "invocations": [invocation]}))
    return path


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    """(repo, record): every fix arm passes its gate (3 of 3 fits)."""
    tmp = tmp_path_factory.mktemp("study2")
    repo = checkout(tmp)
    return repo, write_record(tmp / "study2", repo, {"fix_res": 3, "fix_nores": 3})


@pytest.fixture(scope="module")
def read_decided(decided):
    from lostmid.study.plan import read_plan
    from lostmid.study.study2_reading import read_plan2, read_record2

    repo, record = decided
    plan = read_plan(repo / "study" / "plan2.yaml")
    return {r.id: r for r in read_plan2(plan, read_record2(record), True, RESAMPLES)}


def test_a_planted_position_effect_is_decided_with_its_step_in_its_sentence(read_decided):
    for name, step in (("a_position_residual_1500", 1500), ("a_position_residual_500", 500)):
        found = read_decided[name]
        assert found.outcome == "at least the source's size" and found.low > 0.693
        assert found.sentence.startswith(f"At step {step}: Yes, at least as large as our margin: ")
        assert "; our margin 0.693)" in found.sentence


def test_a_fix_arm_that_passes_its_gate_is_read_with_the_fit_as_the_unit(read_decided):
    speed = read_decided["d_speed_residual"]
    assert speed.decided and speed.effect.n == FITS  # the fit the unit: 3 fits, their seeds nested
    assert (
        speed.sentence.startswith("Over steps 0-1500, fix_res minus base_res: ")
        and "over 3 units: fits of B, 3 fits" in speed.sentence
    )
    assert speed.outcome == "at least the source's size"  # the flat fix fails far less than the sloped baseline


def test_a_flat_fix_arm_is_shown_absent_and_a_sloped_one_is_not(read_decided, tmp_path):
    from lostmid.stats.effects import MeanEffect
    from lostmid.study.reading import NOT_SHOWN_ABSENT, SHOWN_ABSENT
    from lostmid.study.study2_reading import read_primary

    absent = read_decided["e_absence_residual"]
    assert absent.outcome == SHOWN_ABSENT and -0.05 < absent.low < absent.high < 0.05
    assert absent.sentence.startswith("At step 500, fix_res alone: shown absent at our margin +-0.05: ")
    assert f"({1 - 2 * absent.level:.4g} interval" in absent.sentence  # two one-sided tests at alpha_i
    sloped = absent.effect.units + 0.2  # the same fits, each with a late-minus-early of 0.2 more
    found = read_primary(replace(absent, effect=MeanEffect(sloped, "shifted"), p=1.0), {"level": 0.95}, 0.005)
    assert found[2] == NOT_SHOWN_ABSENT and found[1] > 0.05


def test_a_failed_gate_gives_exploratory_numbers_and_no_decision(tmp_path):
    from lostmid.study.plan import read_plan
    from lostmid.study.reading import GATED
    from lostmid.study.study2_reading import read_plan2, read_record2

    repo = checkout(tmp_path)
    record = write_record(tmp_path / "study2", repo, {"fix_res": 1, "fix_nores": 3})  # 1 of 3 residual fits pass
    plan = read_plan(repo / "study" / "plan2.yaml")
    found = {r.id: r for r in read_plan2(plan, read_record2(record), True, RESAMPLES)}
    for name in ("d_speed_residual", "e_difference_residual", "e_absence_residual"):
        row = found[name]
        assert row.outcome == GATED and row.p == 1.0 and not row.decided
        assert "undecided, the arm failed its gate (1 of 3 fits of fix_res pass the gate (at least 2)" in row.sentence
        assert "exploratory, over all its fits: " in row.sentence and "(0.95 interval over 3 units" in row.sentence
        assert np.isfinite(row.effect.estimate)  # the trained arm's numbers, never "not yet run"
    assert found["d_speed_noresidual"].decided and found["d_speed_noresidual"].outcome != GATED


def test_the_page_for_both_studies_answers_each_question_once_with_its_step_and_our_margin(decided, tmp_path):
    from lostmid import io
    from lostmid.pages.findings import README_END, README_START
    from lostmid.pages.study2 import SIZES_LINE, write_combined

    repo, record = decided
    started = begun_under(copy_record("study", tmp_path), repo)  # study 1's record, begun under the plans' commit
    out, readme = repo / "docs" / "findings.md", repo / "README.md"
    readme.write_text(f"# x\n{README_START}\nold\n{README_END}\n")
    costs = {"stage": ["bias_fit", "train", "train"], "job": ["f", "t1", "t2"], "cpu_s": [3600.0, 1800.0, 1800.0]}
    io.write_parquet(
        pd.DataFrame({**costs, "peak_mb": [500.0, 900.0, 800.0], "wall_s": [1.0, 1.0, 1.0]}),
        record / "tables" / "job_cost.parquet",
    )
    rows = write_combined(
        repo / "study" / "plan.yaml",
        tmp_path / "study",
        repo / "study" / "plan2.yaml",
        record,
        out,
        repo / "docs" / "figures",
        repo,
        readme,
        resamples=RESAMPLES,
    )
    page = " ".join(out.read_text().split())
    assert " ".join(SIZES_LINE.split()) in page and "the source's size" not in page
    assert page.count("## Does the residual baseline fail more often as the flag moves towards the end") == 1
    assert "At step 1500: Yes, at least as large as our margin" in page and "At step 500: Yes" in page
    assert "(Study 1, revised: At step 500: Yes, at least as large as our margin: 1.73 [" in page  # both, its step
    gated = "Over steps 0-1500, fix_res minus base_res: Undecided: the arm failed its gate (0 of 4 fits of fix_res"
    assert gated in page  # study 1's trained arm, at its steps
    assert "exploratory, over every fit of its trained arm: " in page and "could not be built" not in page
    # a first-study question that study 2 reads again only as an exploratory row: both, under that question
    interaction = page.index("## Does the fix speed up training more without the residual path than with it?")
    again = "Study 2, exploratory (95% interval, no Holm; `d_residual_by_fix_interaction`): "
    assert page.index(again, interaction) < page.index("## ", interaction + 3)
    assert "Asked again because: (a) at the blog's step" in page
    assert "not yet run" not in page and len(rows) == 10
    flat = page.index("## What B can do to the residual network at initialization")
    assert page.count("## What B can do to the residual network") == 1
    residual = page.index("## Does the blog's fix, fitted on the residual network itself")
    assert flat < residual  # before the first question on the residual arm
    assert "**Exploratory rows of study 2**" in page and "| `fix_arms_mixed_model` | `d_speed_residual`" in page
    assert "Cost: 3 jobs, 2.00 CPU hours (bias_fit 1.00, train 1.00), at most 900 MB a job" in page  # its record's
    assert (repo / "docs" / "figures" / "findings_study2_failure.png").is_file()
    assert "](figures/findings_study2_failure.png)" in page
    assert f"`{started['commit'][:12]}`" in page and "Endpoints: primary" in page
    said = " ".join(readme.read_text().split())  # the README quotes the standing answers, not the revised ones
    assert "\nold\n" not in readme.read_text() and "At step 1500: Yes" in said and "Study 1, revised" not in said


def test_the_page_says_how_flat_the_pilot_and_the_runs_fits_make_the_residual_network(tmp_path):
    from lostmid.evidence.fit_checks import fit_flatness
    from lostmid.study.reading import number
    from lostmid.study.study2_reading import read_record2
    from lostmid.study.study2_secondaries import PILOT_FORMS, flatness_section, read_pilot

    repo = checkout(tmp_path)
    record = read_record2(write_record(tmp_path / "study2", repo, {"fix_res": 1, "fix_nores": 3}))
    section = " ".join(" ".join(flatness_section(record, read_pilot(repo / PILOT))).split())
    pilot = pd.read_csv(REPO / PILOT).set_index("form")
    blog = pilot.loc["full"]  # the blog's form: one (L, L) B, which fails the gate
    said = f"E_inf {number(blog.E_inf_b0)} -> {number(blog.E_inf_fit)}, log ratio {number(blog.log_ratio)} "
    assert said + f"(upper bound {number(blog.log_ratio_upper)}): it fails" in section
    assert (
        f"at most {number(blog.gate)} (log(1/1.5))" in section and f"{number(blog.floor_fit)} at its best B" in section
    )
    assert "`debiased_literal`, the blog's literal reading" in section  # why the default run's table differs
    rich = pilot.loc["layer_head"]
    assert f"| pilot, one fit | {number(rich.log_ratio)} | {number(rich.log_ratio_upper)} | yes (flatness) |" in section
    # the run's fits by their own fit checks: fit 1 flattens (study 1's passing rows), fits 2-3 do not
    measured = fit_flatness(record.bias_summary, [f"study2_fix_res_{k}" for k in (1, 2, 3)])
    best = measured["study2_fix_res_1"]
    part = record.bias_summary[record.bias_summary.variant == "study2_fix_res_1"]
    assert best.estimate == pytest.approx(np.log(part.imbalance_after / part.imbalance_before).mean())
    assert best.estimate < min(measured[f"study2_fix_res_{k}"].estimate for k in (2, 3))
    (param,) = record.bias_summary[record.bias_summary.variant.str.startswith("study2_fix_res")].param.unique()
    label = PILOT_FORMS.get(param, param)  # each run row names its fits' form as the record gives it
    assert (
        f"| {label} | run, best of 3 fits (`study2_fix_res_1`) | {number(best.estimate)} | {number(best.high)} | yes |"
        in section
    )
    median = np.median([i.estimate for i in measured.values()])
    assert f"| run, median over 3 fits | {number(median)} |" in section and "| 1 of 3 |" in section


def test_study_2s_secondaries_are_read_from_the_record_or_say_why_not(decided, read_decided, tmp_path):
    from lostmid.study.plan import read_plan
    from lostmid.study.study2_reading import read_record2
    from lostmid.study.study2_secondaries import NOT_IN_RECORD, SECONDARIES, Context, secondary_rows

    repo, run = decided
    plan, record = read_plan(repo / "study" / "plan2.yaml"), read_record2(run)
    rows = secondary_rows(plan, record, run, RESAMPLES)
    by_id = {}
    for row in rows:
        by_id.setdefault(row["id"], []).append(row)
    assert list(by_id) == [s["id"] for s in plan["secondaries"]]  # every secondary, in the plan's order
    counts = {"a_position_noresidual_500": 1, "a_per_seed_slopes": 8, "fix_arms_mixed_model": 6,
              "fix_arms_seeds_as_independent": 6, "d_residual_by_fix_interaction": 1,
              "influence_beyond_position_noresidual": 3}  # fmt: skip
    for name, n in counts.items():
        assert len(by_id[name]) == n and all(
            np.isfinite([r["estimate"], r["low"], r["high"]]).all() for r in by_id[name]
        )
    assert {r["n"] for r in by_id["fix_arms_mixed_model"]} == {FITS}  # fits the units
    assert {r["n"] for r in by_id["fix_arms_seeds_as_independent"]} == {FITS * SEEDS_PER_FIT}  # seeds the units
    speed = {name: read_decided[name].effect.estimate for name in ("d_speed_noresidual", "d_speed_residual")}
    interaction = by_id["d_residual_by_fix_interaction"][0]["estimate"]
    assert interaction == pytest.approx(speed["d_speed_noresidual"] - speed["d_speed_residual"])  # of fit means
    for name in ("thermodynamic_limit", "fit_checks_and_traces"):
        assert by_id[name][0]["note"].startswith(f"{NOT_IN_RECORD}: ")  # the synthetic record holds neither
    blog_form = by_id["residual_fix_blog_form"][0]  # the synthetic residual fits copy study 1's, of the blog's form
    assert np.isfinite(blog_form["estimate"]) and blog_form["note"].startswith("the best of 3 fits")
    per_head = record.bias_summary.assign(param="layer_head")  # a run whose residual fits are of another form
    other = SECONDARIES["residual_fix_blog_form"](Context(plan, replace(record, bias_summary=per_head), run, 1))
    assert other[0]["note"].startswith(f"{NOT_IN_RECORD}: the run's fits of fix_res are of the form one B per")
    assert not any("not yet run" in row["note"] for row in rows)
    (tmp_path / "tables").mkdir()  # a record with study 1's profiles at L = 8..128
    shutil.copyfile(
        REPO / "runs" / "study" / "tables" / "length_init.parquet", tmp_path / "tables" / "length_init.parquet"
    )
    growth = SECONDARIES["thermodynamic_limit"](Context(plan, record, tmp_path, RESAMPLES))
    assert [r["n"] > 0 and np.isfinite(r["estimate"]) and "no interval" in r["note"] for r in growth] == [True] * 2


def test_a_record_whose_plan_hash_differs_is_read_as_exploratory_everywhere(tmp_path):
    from lostmid.study.plan import read_plan
    from lostmid.study.reading import EXPLORATORY
    from lostmid.study.record import plan_status
    from lostmid.study.study2_reading import read_plan2, read_record2

    repo = checkout(tmp_path)
    record = write_record(tmp_path / "study2", repo, {"fix_res": 3, "fix_nores": 3}, plan_sha256="0" * 64)
    read = read_record2(record)
    primary, why = plan_status(repo, repo / "study" / "plan2.yaml", read.manifest)
    assert not primary and why.startswith("the plan changed after the run began")
    found = read_plan2(read_plan(repo / "study" / "plan2.yaml"), read, primary, RESAMPLES)
    assert all(r.outcome.startswith(f"{EXPLORATORY}: ") for r in found)
    assert all(r.sentence.startswith("Exploratory, not primary: ") for r in found)


def test_a_record_of_another_plan_is_refused_in_one_line(decided, tmp_path):
    from lostmid.errors import InputError
    from lostmid.pages.study2 import write_combined

    repo, _ = decided
    with pytest.raises(InputError, match="records no plan study/plan2.yaml: not a run of the second study"):
        write_combined(
            repo / "study" / "plan.yaml",
            REPO / "runs" / "study",
            repo / "study" / "plan2.yaml",
            copy_record("study", tmp_path),
            tmp_path / "f.md",
            tmp_path,
            repo,
        )


def test_the_run_variants_of_each_arm_of_the_second_plan_are_read_from_its_overlay():
    from lostmid.study.plan import read_plan
    from lostmid.study.study2_reading import with_variants

    overlay = yaml.safe_load((REPO / "config" / "study2.yaml").read_text())
    arms = with_variants(read_plan(REPO / "study" / "plan2.yaml"), overlay)["run"]["arms"]
    assert arms["base_res"]["variants"] == ["study2_base_res"]
    assert arms["fix_res"]["variants"] == [f"study2_fix_res_{k}" for k in range(1, 25)]  # one per fit, by k
    assert len(arms["fix_nores"]["variants"]) == 24 and arms["base_nores"]["variants"] == ["study2_base_nores"]


def test_each_primarys_reached_precision_stands_beside_the_half_width_its_plan_simulated(read_decided):
    from lostmid.pages.study2 import precision_table
    from lostmid.study.reading import number

    table = precision_table(list(read_decided.values()))
    assert len(table) == 2 + len(read_decided)  # every primary read has its row
    speed = read_decided["d_speed_residual"]
    power = speed.primary["power"]
    low, high = speed.effect.interval(power["level"])  # the plan's level, not the Holm level
    row = f"| `d_speed_residual` | {power['units']} | {FITS} | {power['level']:.3g} | {number(power['half_width'])} |"
    assert f"{row} {number((high - low) / 2)} |" in table
