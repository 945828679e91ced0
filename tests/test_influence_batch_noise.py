"""scripts/influence_batch_noise.py: the influence batch's sampling error beside the seeds' own spread."""

from __future__ import annotations

import argparse
import math
import sys

import pandas as pd
import pytest

from lostmid.config import load

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import influence_batch_noise as noise  # noqa: E402


def test_draw_zero_is_the_runs_own_influence_batch_and_the_other_draws_are_fresh_ones(smoke_run):
    workdir, _ = smoke_run
    config = load(workdir / "config.yaml")  # with the schema's defaults (evidence.delta)
    results = workdir / "results"
    step = config["train"]["steps"]
    args = argparse.Namespace(
        remedy="balance", baseline="baseline", L=8, depth=1, step=step, seeds=[0], per_position=[2], draws=2
    )
    table = noise.measure(results, args, config["influence"]["seed"], config["evidence"]["delta"])

    def logged(variant):
        metrics = pd.read_parquet(results / "metrics" / variant / "L8_M1_seed0.parquet")
        row = metrics[(metrics.step == step) & (metrics.delta == config["evidence"]["delta"])]
        return math.log(row.E_inf.item())

    own = logged("balance") - logged("baseline")
    assert table.loc[table.draw == 0, "log_ratio"].item() == pytest.approx(own, rel=1e-9)
    assert table.loc[table.draw == 1, "log_ratio"].item() != pytest.approx(own, rel=1e-6)


def test_the_sampling_share_is_the_within_seed_variance_over_the_per_seed_variance():
    # Three seeds whose own effects are 0, 1, 2; each measured on two batches that differ by +-0.5.
    rows = [
        {"per_position": 4, "draw": draw, "seed": seed, "log_ratio": seed + (0.5 if draw else -0.5)}
        for seed in range(3)
        for draw in range(2)
    ]
    (summary,) = noise.summary(pd.DataFrame(rows)).to_dict("records")
    assert summary["sd_over_seeds_draw0"] == pytest.approx(1.0)
    assert summary["sd_within_seed"] == pytest.approx(math.sqrt(0.5))  # two values 1 apart: variance 1/2
    assert summary["sd_over_seeds_of_draw_mean"] == pytest.approx(1.0)
    assert summary["sampling_share"] == pytest.approx(0.5)


def test_seeds_are_a_range_or_a_list():
    assert noise.seed_list("0-3") == [0, 1, 2, 3]
    assert noise.seed_list("0,5,7") == [0, 5, 7]
