"""Issue 55's fix run (lostmid.architectures.fix_jobs, the `fix-*` commands) end to end on a tiny random Llama saved
with a word-level tokenizer (seconds; never the real model): the none arm's record is made by the retrieval
stage's own job, the fix plan is a small copy of study/fix_plan.yaml's recipe (two fits, each on one reserved
window; held-out window k under fit k mod 2), and every job writes into the plan's record folder, each file naming
the windows it came from."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from test_retrieval import saved_tiny, tokenizer

from lostmid.architectures import fix_jobs, fix_plan, models, positional_bias, retrieval, retrieval_estimators
from lostmid.cli.main import main
from lostmid.errors import ConfigError, InputError
from lostmid.study import fix_reading

from conftest import REPO

N = 48


@pytest.fixture
def plan(tmp_path):
    """A fix plan on a tiny none record: windows of 48 tokens; F = 2 fits, fit 0 (blog fit, calibration and its
    strength's choice) on reserved window k = 5, fit 1 on k = 6; held-out and gate windows k = 0 (fit 0) and
    k = 1 (fit 1), the none record's."""
    corpus = saved_tiny(tmp_path)
    block = dict(
        model={"path": str(tmp_path / "tiny"), "name": "tiny"},
        lengths=[N],
        windows=[2],
        gradient_windows=[0],
        twin_windows=[0],
        fractions=[0.0, 0.5, 1.0],
        tasks=["single"],
        corpus=str(corpus),
        block=2,
    )
    none = tmp_path / "none"
    job = ["--n", str(N), "--block", "0", "--record", str(none), "--done", str(tmp_path / "done.json")]
    assert main(["retrieval", "--settings", json.dumps(block), *job]) == 0
    (none / "overlay.yaml").write_text(json.dumps({"retrieval": block}))  # JSON is YAML
    recipe = {
        "fits": {"count": 2, "windows": [5, 6], "reserved_from": 5, "excluded": [7]},
        "arms": {
            "blog": {
                "fit": dict(n=N, buckets=4, per_layer=False, forms=["distance", "key"], lr=0.1)
                | dict(steps=2, restarts=2, scale=0.5, seed=55)
            },
            "fitm": {"calibration": dict(n=N, buckets=4, rows=16, shuffle_seed=55, grid=[0.5, 1.0])},
        },
        "run": {
            "record": str(tmp_path / "fix"),
            "none_record": str(none),
            "windows_by_n": {N: 2},
            "gates": {"windows_by_n": {N: 2}, "shuffle_seed": 56},
        },
    }
    path = tmp_path / "fix_plan.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def job(name, plan, *words):
    return main(["fix", "--job", name, "--plan", str(plan), *words, "--done", str(plan.parent / f"{name}.json")])


def test_each_fit_on_its_window_then_each_held_out_window_under_its_fit_are_recorded(plan):
    record = plan.parent / "fix"
    for fit in ("0", "1"):
        assert job("fit", plan, "--fit", fit) == 0 and job("calibrate", plan, "--fit", fit) == 0
    stream = np.asarray(tokenizer()(plan.with_name("corpus.txt").read_text(), add_special_tokens=False)["input_ids"])
    order = retrieval.window_order(len(stream), N, 7000 + N)  # the none record's draw (retrieval.seed + n)
    blog = [json.loads((record / "fits" / f"blog_{i}.json").read_text()) for i in (0, 1)]
    for i, (fitted, k) in enumerate(zip(blog, (5, 6))):  # fit i: one reserved window, seed 55 + i
        assert fitted["windows"] == {"n": N, "draws": [k], "corpus_windows": [int(order[k])]}
        assert fitted["fit"] == i and fitted["seed"] == 55 + i
        assert len(fitted["trace"]) == 2 * 2 and fitted["loss"] <= fitted["none"]  # steps x restarts; never worse
    fitm = json.loads((record / "fits" / "fitm_1.json").read_text())
    assert fitm["windows"]["draws"] == [6] and fitm["seed"] == 56
    assert fitm["strength"] == float(max(fitm["mean_logprob"], key=fitm["mean_logprob"].get))  # JSON keys: str
    assert set(fitm["mean_logprob"]) == {"0.5", "1.0"}  # the grid, on its own window (the selection files)
    assert (record / "selection" / f"fitm_1_t0.5_n{N}_w6.parquet").exists()
    half = fix_jobs.load_bias(record / "fits" / "fitm_0.pt", 0.5)  # the calibration is linear in its strength
    whole = fix_jobs.load_bias(record / "fits" / "fitm_0.pt")
    assert torch.allclose(2 * half.distance, whole.distance) and whole.distance.abs().sum() > 0
    other = fix_jobs.load_bias(record / "fits" / "fitm_1.pt")
    assert not torch.allclose(other.distance, whole.distance)  # another window: another draw of the calibration

    assert job("none-check", plan) == 0  # a zero bias: the none record's answers, so the arms pair with it
    assert json.loads((record / "fits" / "none_check.json").read_text())["same"]
    for arm in fix_plan.ARMS:
        assert job("block", plan, "--arm", arm, "--n", str(N), "--block", "0", "--size", "2") == 0
    loaded = fix_plan.read_fix_plan(plan)
    none = pd.concat(pd.read_parquet(fix_plan.none_path(loaded, N, k)) for k in (0, 1))
    blog_rows = pd.concat(pd.read_parquet(fix_plan.window_path(loaded, "blog", N, k)) for k in (0, 1))
    keys = ["window", "task", "q", "start", "stop", "query_start"]
    assert blog_rows[keys].reset_index(drop=True).equals(none[keys].reset_index(drop=True))  # the same examples
    assert (blog_rows.weights == "blog").all()
    stamps = blog_rows.groupby("draw").config_hash.first()
    settings = fix_jobs.retrieval_settings(loaded)
    assert stamps[1] == fix_jobs.window_hash(settings, "blog", record / "fits" / "blog_1.pt", 1.0)  # k = 1: fit 1
    assert stamps[0] != stamps[1]
    arch, tok = models.load_pretrained(plan.with_name("tiny"))  # the fitm window 0: fit 0's calibration at its t
    t = json.loads((record / "fits" / "fitm_0.json").read_text())["strength"]
    with positional_bias.applied(arch.model, fix_jobs.load_bias(record / "fits" / "fitm_0.pt", t)):
        expected = retrieval.retrieval_examples(
            arch, tok, stream=stream, n=N, windows=1, gradient_windows=0, fractions=[0.0, 0.5, 1.0], tasks=["single"]
        )
    fitm_rows = pd.read_parquet(fix_plan.window_path(loaded, "fitm", N, 0))
    assert fitm_rows.logprob.tolist() == expected.logprob.tolist() and (fitm_rows.weights == "fitm").all()
    assert fitm_rows.config_hash.iloc[0] != stamps[0]  # another bias: another stamp
    written = fix_plan.window_path(loaded, "blog", N, 0).stat().st_mtime_ns
    assert job("block", plan, "--arm", "blog", "--n", str(N), "--block", "0", "--size", "2") == 0
    assert fix_plan.window_path(loaded, "blog", N, 0).stat().st_mtime_ns == written  # recorded: skipped

    assert job("gate-window", plan, "--n", str(N), "--window", "1") == 0  # one window, as the workflow runs them
    one = (record / "gate" / f"n{N}_w1.parquet").stat().st_mtime_ns
    assert not (record / "gate" / f"n{N}_w0.parquet").exists()
    assert job("gate", plan, "--n", str(N)) == 0  # the gate's job: the windows not yet recorded, window 1 kept
    assert (record / "gate" / f"n{N}_w0.parquet").exists()
    assert (record / "gate" / f"n{N}_w1.parquet").stat().st_mtime_ns == one
    gate = pd.read_parquet(record / "gate" / f"n{N}_w1.parquet").set_index("arm")
    assert list(gate.index) == ["none", "blog", "fitm"] and (gate.flatness > 0).all() and (gate.fit == 1).all()
    context = fix_jobs.reserved_contexts(stream, tok, settings, N, [1])  # BOS, then text
    dummy = positional_bias.shuffled(context, 56, lead=1)  # the gate's content-free window (shuffle_seed 56)
    maps = positional_bias.attention_maps(arch, dummy)
    assert gate.at["none", "content_free_distance"] == pytest.approx(fix_jobs.content_free_distance(maps, 16))
    with positional_bias.applied(arch.model, fix_jobs.load_bias(record / "fits" / "fitm_1.pt", fitm["strength"])):
        calibrated = fix_jobs.content_free_distance(positional_bias.attention_maps(arch, dummy), 16)
    assert gate.at["fitm", "content_free_distance"] == pytest.approx(calibrated)  # window 1 under calibration 1
    assert np.isnan(gate.at["blog", "content_free_distance"])


def test_the_content_free_distance_is_0_for_uniform_attention_and_grows_with_a_sink():
    m = 6
    uniform = torch.tril(torch.ones(m, m)) / torch.arange(1, m + 1)[:, None]
    sink = torch.zeros(m, m)
    sink[:, 0] = 1.0  # every query on key 0: the distance of row i is 1 - 1 / (i + 1)
    assert fix_jobs.content_free_distance(uniform[None], rows=m) == pytest.approx(0.0, abs=1e-6)
    rows = torch.arange(1, m)
    expected = float((1 - 1 / (rows + 1.0)).mean())
    assert fix_jobs.content_free_distance(torch.stack([sink, uniform]), rows=m) == pytest.approx(expected / 2)


def test_bad_plans_and_blocks_are_one_line(plan, capsys):
    assert job("block", plan, "--arm", "blog", "--n", str(N), "--block", "1", "--size", "2") == 2
    assert "error: fix: block 1 of 2 windows at n = 48 is beyond the plan's held-out windows" in capsys.readouterr().err
    assert job("fit", plan, "--fit", "2") == 2
    assert "error: fix: fit 2 is beyond the plan's 2 fits" in capsys.readouterr().err
    assert job("gate-window", plan, "--n", str(N), "--window", "2") == 2
    assert "error: fix gate: window 2 at n = 48; the gate windows there are range(0, 2)" in capsys.readouterr().err
    good = plan.read_text()
    for change, words in (
        ({"windows": [5, 5]}, "fits.windows must be 2 distinct windows, one per fit"),
        ({"windows": [5, 7]}, "fits.windows must be reserved windows (k >= 5, not [7])"),  # the pilot's window
        ({"windows": [4, 6]}, "fits.windows must be reserved windows"),
    ):
        broken = yaml.safe_load(good)
        broken["fits"] |= change
        plan.write_text(yaml.safe_dump(broken))
        assert job("fit", plan, "--fit", "0") == 2
        assert words in capsys.readouterr().err
    broken = yaml.safe_load(good)
    broken["run"]["windows_by_n"] = {N: 3}  # each fit the same number of held-out windows: W a multiple of F
    plan.write_text(yaml.safe_dump(broken))
    assert job("fit", plan, "--fit", "0") == 2
    assert "3 windows at n = 48 is not a multiple of 2 fits" in capsys.readouterr().err
    floors = ((1, "1 windows at n = 48 is not a multiple of 2 fits"), (4, "run.gate_first.floor 4 at n = 48 must"))
    for floor, words in floors:
        broken = yaml.safe_load(good)  # the gate-first floor: whole fits, the gate windows within, W beyond
        broken["run"]["gate_first"] = {"n": N, "arm": "blog", "floor": floor}
        plan.write_text(yaml.safe_dump(broken))
        assert job("fit", plan, "--fit", "0") == 2
        assert words in capsys.readouterr().err
    broken = yaml.safe_load(plan.read_text())
    del broken["run"]["none_record"]
    plan.write_text(yaml.safe_dump(broken))
    assert job("fit", plan, "--fit", "0") == 2
    assert f"error: fix plan {plan}: lacks run.none_record" in capsys.readouterr().err


def test_the_workflow_lists_two_arms_jobs_over_the_held_out_windows_and_a_window_maps_to_its_fit():
    plan = {"run": {"windows_by_n": {1024: 108, 4096: 144}}, "fits": {"count": 12, "windows": list(range(900, 912))}}
    jobs = fix_plan.block_jobs(plan, 10)
    assert len(jobs) == 2 * (11 + 15) and ("fitm", 4096, 14) in jobs
    assert fix_plan.block_draws(plan, 4096, 14, 10) == range(140, 144)  # a block spans several fits
    assert [fix_plan.fit_of(plan, k) for k in (0, 11, 12, 143)] == [0, 11, 0, 11]  # k mod F, in both fix arms
    assert fix_plan.fit_window(plan, 3) == 903


def test_gate_first_lists_the_4096_windows_beyond_the_floor_only_where_the_blog_gate_passes():
    plan = {"run": {"windows_by_n": {1024: 108, 4096: 144}, "gate_first": {"n": 4096, "arm": "blog", "floor": 60}}}
    plan["fits"] = {"count": 12, "windows": list(range(900, 912))}

    def windows(passed, size=10):  # per n, the held-out windows of one arm's jobs that run
        jobs = [(n, b) for arm, n, b in fix_plan.block_jobs(plan, size, passed) if arm == "blog"]
        return {n: sum(len(fix_plan.block_draws(plan, m, b, size)) for m, b in jobs if m == n) for n in (1024, 4096)}

    assert windows(passed=False) == {1024: 108, 4096: 60}  # the floor: 5 a fit, the 24 gate windows among them
    assert windows(passed=True) == {1024: 108, 4096: 144}
    assert windows(passed=False, size=7) == {1024: 108, 4096: 60}  # a block never crosses the floor
    assert [fix_plan.block_draws(plan, 4096, b, 7) for b in (8, 9)] == [range(56, 60), range(60, 67)]
    assert fix_plan.held_out_count(plan, 1024, False) == 108  # the gate-first order stops 4096 alone


@pytest.mark.slow
def test_the_workflow_asks_the_gate_checkpoint_before_it_lists_the_blocks_beyond_the_floor(tmp_path):
    """Dry runs of `snakemake fix` on a plan of 2 fits, 6 held-out windows at n = 48 and a gate-first floor of 2
    (blocks of 1): before the gate has run no block is listed (the checkpoint is asked first); once it has, the
    blocks of the floor alone where the blog gate failed, every block where it passed."""
    from conftest import run_snakemake

    record, none = tmp_path / "fix", tmp_path / "none"
    plan = {
        "fits": {"count": 2, "windows": [5, 6], "reserved_from": 5},
        "arms": {"blog": {"fit": {"n": N}}, "fitm": {"calibration": {"n": N}}},
        "run": {"record": str(record), "none_record": str(none), "windows_by_n": {N: 6}, "floor_by_n": {N: 2}}
        | {"gate_first": {"n": N, "arm": "blog", "floor": 2}}
        | {"gates": {"windows_by_n": {N: 2}, "ratio": 0.75, "level": 0.95}},
    }
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    for k in range(6):  # the none arm's windows the blocks pair with (a dry run asks only that they exist)
        path = fix_plan.none_path(plan, N, k)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    work = tmp_path / "work"
    work.mkdir()
    smoke = yaml.safe_load((REPO / "tests" / "smoke.yaml").read_text())  # it stands alone: the fix block added
    smoke |= {"plan": str(tmp_path / "plan.yaml"), "fix": {"block": 1}}
    (work / "config.yaml").write_text(yaml.safe_dump(smoke))

    def planned():
        out = run_snakemake(work, "--dry-run", "fix").stdout
        return out, sorted({int(b) for b in re.findall(r"blocks/blog_n48_b(\d+)\.json", out)})

    out, blocks = planned()
    assert "checkpoint fix_gate" in out and blocks == []  # the gate first: its reading decides the blocks
    assert len(re.findall(r"gate/n48_w(\d+)\.json", out)) >= 2  # its windows first, one job each
    done = ("fit_0", "fit_1", "calibrate_0", "calibrate_1", f"gate/n{N}_w0", f"gate/n{N}_w1", f"gate_n{N}")
    for name in done:  # the fits, the gate's window jobs and the gate have run, in that order
        (work / "results" / "fix" / "gate").mkdir(parents=True, exist_ok=True)
        (work / "results" / "fix" / f"{name}.json").write_text("[]")
    (record / "gate").mkdir(parents=True)
    with pytest.raises(InputError, match="the blog gate at n = 48 is not read .0 of its 2 gate windows."):
        fix_reading.gate_first_passed(fix_plan.read_fix_plan(tmp_path / "plan.yaml"))  # never the floor unasked
    for flattened, expected in ((1.0, [0, 1]), (0.5, [0, 1, 2, 3, 4, 5])):  # failed: the floor; passed: all
        for k in range(2):
            rows = [("none", 1.0), ("blog", flattened * (1 + 0.01 * k)), ("fitm", 1.0)]
            gate = pd.DataFrame(rows, columns=["arm", "flatness"]).assign(n=N, draw=k, content_free_distance=np.nan)
            gate.to_parquet(record / "gate" / f"n{N}_w{k}.parquet")
        assert fix_reading.gate_first_passed(fix_plan.read_fix_plan(tmp_path / "plan.yaml")) == (flattened < 1)
        assert planned()[1] == expected


def test_the_committed_plan_lists_12_fits_on_distinct_reserved_windows_and_reads_them_as_clusters(monkeypatch):
    from importlib import import_module

    monkeypatch.chdir(REPO)
    plan = fix_plan.read_fix_plan("study/fix_plan.yaml")  # checked: F distinct reserved windows, W a multiple of F
    windows = plan["fits"]["windows"]
    assert fix_plan.fit_count(plan) == 12 and windows == list(range(900, 912))
    assert not set(windows) & set(range(960, 969))  # the lead's pilot's windows are never a fit's
    assert plan["run"]["windows_by_n"] == {1024: 108, 4096: 144} and plan["run"]["gates"]["windows_by_n"] == {
        1024: 24,
        4096: 24,
    }  # 9 and 12 windows per fit; the gate: each fit's first two
    assert "no fix window had run" in plan["amended"]["before_the_run"]
    for primary in plan["primaries"].values():  # every primary read by the fit-cluster estimator
        module, name = primary["estimator_path"].rsplit(".", 1)
        assert getattr(import_module(module), name) is retrieval_estimators.fit_cluster_difference


def test_the_run_overlay_answers_the_committed_plan_and_a_fix_block_needs_one(monkeypatch):
    monkeypatch.chdir(REPO)
    overlay = yaml.safe_load((REPO / "runs" / "fix" / "overlay.yaml").read_text())
    plan = fix_plan.config_plan(overlay)  # the plan names the record, the none arm's record and the windows
    assert overlay["plan"] == "study/fix_plan.yaml" and plan["run"]["record"] == "runs/fix"
    assert len(fix_plan.block_jobs(plan, overlay["fix"]["block"])) == 2 * (11 + 15)  # 108 and 144, blocks of 10
    assert len(fix_plan.block_jobs(plan, overlay["fix"]["block"], False)) == 2 * (11 + 6)  # the blog gate failed
    assert fix_plan.gate_first(plan) == (4096, "blog", 60)
    assert fix_plan.config_plan({"plan": "study/fix_plan.yaml"}) is None  # no fix block: no fix run
    with pytest.raises(ConfigError, match="config key fix: the fix run needs the plan it answers"):
        fix_plan.config_plan({"fix": {"block": 10}})


def test_the_power_takes_the_fits_as_clusters_the_fit_means_variance_s_f2_plus_s_w2_over_m():
    import sys

    from scipy import stats

    sys.path.insert(0, str(REPO / "scripts"))
    from fix_power import fit_half_widths

    rng = np.random.default_rng(0)
    differences = rng.normal(0.0, 1.0, size=4000)  # the window differences' pool, s_w = 1
    level, fits = 0.99, 12
    found = {s_f: fit_half_widths(differences, fits, [1, 9], s_f, level, 3000, rng) for s_f in (0.0, 0.5)}
    quantile = stats.t.ppf(1 - (1 - level) / 2, fits - 1)  # t over the 12 fit means, 11 df, whatever W

    def expected(s_f, m):  # E[sd] is a little below the sd: 3% at 11 df
        return quantile * np.sqrt(s_f**2 + 1 / m) / np.sqrt(fits)

    for s_f, widths in found.items():
        assert set(widths) == {12, 108}  # W = F m
        for m in (1, 9):
            assert widths[fits * m] == pytest.approx(expected(s_f, m), rel=0.05)
    assert found[0.5][108] > 1.5 * found[0.0][108]  # more windows a fit cannot buy back the fits' spread
