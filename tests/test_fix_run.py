"""Issue 55's fix run (lostmid.architectures.fix_jobs, the `fix-*` commands) end to end on a tiny random Llama saved
with a word-level tokenizer (seconds; never the real model): the none arm's record is made by the retrieval
stage's own job, the fix plan is a small copy of study/fix_plan.yaml's recipe, and every job writes into the
plan's record folder, each file naming the windows it came from."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from test_retrieval import saved_tiny, tokenizer

from lostmid.architectures import fix_jobs, fix_plan, models, positional_bias, retrieval
from lostmid.cli.main import main
from lostmid.errors import ConfigError

from conftest import REPO

N = 48


@pytest.fixture
def plan(tmp_path):
    """A fix plan on a tiny none record: 8 windows of 48 tokens; fitting and calibration on k = 5, 6, the strength
    chosen on k = 7, held-out and gate windows k = 0, 1 (the none record's)."""
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
        "arms": {
            "blog": {
                "fit": dict(n=N, windows=[5, 6], buckets=4, per_layer=False, forms=["distance", "key"], lr=0.1)
                | dict(steps=2, restarts=2, scale=0.5, seed=55)
            },
            "fitm": {
                "calibration": dict(n=N, windows=[5, 6], buckets=4, rows=16, shuffle_seed=55, grid=[0.5, 1.0])
                | dict(selection_windows={N: [7]})
            },
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


def test_the_fits_the_strength_and_the_held_out_windows_are_recorded_with_their_windows(plan):
    record = plan.parent / "fix"
    assert job("fit", plan) == 0 and job("calibrate", plan) == 0
    blog = json.loads((record / "fits" / "blog.json").read_text())
    stream = np.asarray(tokenizer()(plan.with_name("corpus.txt").read_text(), add_special_tokens=False)["input_ids"])
    order = retrieval.window_order(len(stream), N, 7000 + N)  # the none record's draw (retrieval.seed + n)
    assert blog["windows"] == {"n": N, "draws": [5, 6], "corpus_windows": [int(order[5]), int(order[6])]}
    assert len(blog["trace"]) == 2 * 2 and blog["loss"] <= blog["none"]  # steps x restarts; never worse than B = 0
    assert json.loads((record / "fits" / "fitm.json").read_text())["windows"]["draws"] == [5, 6]
    half = fix_jobs.load_bias(record / "fits" / "fitm.pt", 0.5)  # the calibration is linear in its strength
    whole = fix_jobs.load_bias(record / "fits" / "fitm.pt")
    assert torch.allclose(2 * half.distance, whole.distance) and whole.distance.abs().sum() > 0

    assert job("select", plan, "--n", str(N)) == 0 and job("strength", plan) == 0
    strength = json.loads((record / "fits" / "fitm_strength.json").read_text())
    means = {float(t): m for t, m in strength["mean_logprob"][str(N)].items()}
    assert strength["strength"][str(N)] == max(means, key=means.get) and set(means) == {0.5, 1.0}

    assert job("none-check", plan) == 0  # a zero bias: the none record's answers, so the arms pair with it
    assert json.loads((record / "fits" / "none_check.json").read_text())["same"]
    for arm in fix_plan.ARMS:
        assert job("block", plan, "--arm", arm, "--n", str(N), "--block", "0", "--size", "2") == 0
    loaded = fix_plan.read_fix_plan(plan)
    none = pd.concat(pd.read_parquet(fix_plan.none_path(loaded, N, k)) for k in (0, 1))
    blog_rows = pd.concat(pd.read_parquet(fix_plan.window_path(loaded, "blog", N, k)) for k in (0, 1))
    keys = ["window", "task", "q", "start", "stop", "query_start"]
    assert blog_rows[keys].reset_index(drop=True).equals(none[keys].reset_index(drop=True))  # the same examples
    assert (blog_rows.weights == "blog").all() and blog_rows.config_hash.nunique() == 1
    assert blog["fitted"] == any(
        p.abs().sum() > 0 for p in fix_jobs.load_bias(record / "fits" / "blog.pt").parameters()
    )
    arch, tok = models.load_pretrained(plan.with_name("tiny"))  # the fitm window: the examples with its bias on
    with positional_bias.applied(
        arch.model, fix_jobs.load_bias(record / "fits" / "fitm.pt", strength["strength"][str(N)])
    ):
        expected = retrieval.retrieval_examples(
            arch, tok, stream=stream, n=N, windows=1, gradient_windows=0, fractions=[0.0, 0.5, 1.0], tasks=["single"]
        )
    fitm_rows = pd.read_parquet(fix_plan.window_path(loaded, "fitm", N, 0))
    assert fitm_rows.logprob.tolist() == expected.logprob.tolist() and (fitm_rows.weights == "fitm").all()
    assert fitm_rows.config_hash.iloc[0] != blog_rows.config_hash.iloc[0]  # another bias: another stamp
    written = fix_plan.window_path(loaded, "blog", N, 0).stat().st_mtime_ns
    assert job("block", plan, "--arm", "blog", "--n", str(N), "--block", "0", "--size", "2") == 0
    assert fix_plan.window_path(loaded, "blog", N, 0).stat().st_mtime_ns == written  # recorded: skipped

    assert job("gate", plan, "--n", str(N)) == 0
    gate = pd.read_parquet(record / "gate" / f"n{N}_w0.parquet").set_index("arm")
    assert list(gate.index) == ["none", "blog", "fitm"] and (gate.flatness > 0).all()
    context = fix_jobs.reserved_contexts(stream, tok, fix_jobs.retrieval_settings(loaded), N, [0])  # BOS, then text
    dummy = positional_bias.shuffled(context, 56, lead=1)  # the gate's content-free window (shuffle_seed 56)
    maps = positional_bias.attention_maps(arch, dummy)
    assert gate.at["none", "content_free_distance"] == pytest.approx(fix_jobs.content_free_distance(maps, 16))
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
    broken = yaml.safe_load(plan.read_text())
    del broken["run"]["none_record"]
    plan.write_text(yaml.safe_dump(broken))
    assert job("fit", plan) == 2
    assert f"error: fix plan {plan}: lacks run.none_record" in capsys.readouterr().err


def test_the_workflow_lists_two_arms_jobs_over_the_held_out_windows():
    plan = {"run": {"windows_by_n": {1024: 100, 4096: 150}}}
    jobs = fix_plan.block_jobs(plan, 10)
    assert len(jobs) == 2 * (10 + 15) and ("fitm", 4096, 14) in jobs
    assert fix_plan.block_draws(plan, 4096, 14, 10) == range(140, 150)


def test_the_run_overlay_answers_the_committed_plan_and_a_fix_block_needs_one(monkeypatch):
    monkeypatch.chdir(REPO)
    overlay = yaml.safe_load((REPO / "runs" / "fix" / "overlay.yaml").read_text())
    plan = fix_plan.config_plan(overlay)  # the plan names the record, the none arm's record and the windows
    assert overlay["plan"] == "study/fix_plan.yaml" and plan["run"]["record"] == "runs/fix"
    assert len(fix_plan.block_jobs(plan, overlay["fix"]["block"])) == 2 * (100 + 150) // 10
    assert fix_plan.config_plan({"plan": "study/fix_plan.yaml"}) is None  # no fix block: no fix run
    with pytest.raises(ConfigError, match="config key fix: the fix run needs the plan it answers"):
        fix_plan.config_plan({"fix": {"block": 10}})
