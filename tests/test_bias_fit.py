"""The fitted attention-logit bias: it flattens the influence profile at initialization."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from lostmid.analysis import bias_fit
from lostmid.analysis.settings import FitSettings, check_disjoint_from_training
from lostmid.config import settings_from_section
from lostmid.core.density import density, imbalance
from lostmid.errors import ConfigError
from lostmid.training.checkpoint import TrainingState

from conftest import REPO, model_config, tiny_spec

# A no-residual model (the blog's setting): at init its influence piles up on early tokens.
TINY = model_config(seq_len=8, depth=2, d_model=8, heads=2, mlp_ratio=2, residual=False)
FAST = settings_from_section(
    FitSettings, {"inits": 2, "batch": 16, "max_iter": 40, "lr": 0.1, "positions": "all"}, "bias_fit"
)


@pytest.fixture(scope="module")
def fit():
    torch.set_num_threads(1)
    return bias_fit.fit_bias(TINY, FAST)


def test_the_fit_lowers_e_inf_at_init_on_held_out_inits_and_batches(fit):
    assert fit.iterations["E_inf_fit"].iloc[-1] < 0.5 * fit.iterations["E_inf_fit"].iloc[0]
    assert fit.after < 0.5 * fit.before  # seeds never seen by the fit


def test_the_bias_weights_later_keys_more(fit):
    B = fit.bias
    assert B.shape == (8, 8) and torch.equal(B, B.tril())
    assert B[-1, -1] > B[-1, 0]  # the last query prefers its recent keys
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    row_sums = B.masked_fill(~causal, 0).sum(1)
    assert torch.allclose(row_sums, torch.zeros(8), atol=1e-5)  # gauge: rows have mean zero


def test_tables_are_long_and_profiles_have_both_stages(fit):
    long = bias_fit.bias_long(fit.bias)
    assert len(long) == 8 * 9 // 2 and (long["key"] <= long["query"]).all()
    assert set(fit.profiles["stage"]) == {"before", "after"}
    assert fit.profiles.groupby("stage")["density"].mean().round(6).eq(1).all()
    assert list(fit.iterations.columns) == ["iteration", "objective", "E_inf_fit", "E_inf"]


def test_a_run_can_start_from_the_fitted_bias(fit):
    spec = {**tiny_spec(depth=2, residual=False), "remedy": {"kind": "bias"}}
    state = TrainingState.initial(spec, "cpu", attention_bias=fit.bias)
    assert torch.equal(state.model.attn_bias, fit.bias)


def test_the_fit_never_touches_the_global_rng():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    bias_fit.fit_bias(TINY, settings_from_section(FitSettings, {"inits": 1, "batch": 4, "max_iter": 1}, "bias_fit"))
    assert torch.equal(torch.rand(3), expected)


def test_bad_fit_settings_are_config_errors():
    with pytest.raises(ConfigError, match=r"bias_fit\.positions: 'middle' is not one of"):
        settings_from_section(FitSettings, {"positions": "middle"}, "bias_fit")
    with pytest.raises(ConfigError, match=r"bias_fit\.inits: 0 is less than the minimum of 1"):
        settings_from_section(FitSettings, {"inits": 0}, "bias_fit")
    with pytest.raises(ConfigError, match=r"^config key bias_fit\.itres is unknown$"):
        settings_from_section(FitSettings, {"itres": 3}, "bias_fit")


# The summary columns the evidence stage reads (one row per held-out initialization).
SUMMARY = [
    "heldout_init",
    "imbalance_before",
    "context_share_before",
    "total_before",
    "imbalance_after",
    "context_share_after",
    "total_after",
    "c0",
    "lag_slope",
    "self_attention_init",
    "self_attention_init_b0",
    "accepted",
]


def test_the_summary_has_one_row_per_held_out_init_and_accepts_a_fit_that_flattened(fit):
    assert set(SUMMARY) <= set(fit.summary.columns) and len(fit.summary) == FAST.heldout
    assert fit.accepted and fit.summary.accepted.all() and fit.change[2] < 0
    assert (fit.summary.imbalance_after < fit.summary.imbalance_before).mean() > 0.5
    assert fit.summary.self_attention_init_b0.iloc[0] == pytest.approx(sum(1 / i for i in range(1, 9)) / 8, rel=0.05)


def test_the_blogs_output_jacobian_target_is_flattened_on_the_no_residual_model():
    block = {
        "inits": 2,
        "batch": 8,
        "max_iter": 30,
        "lr": 0.1,
        "positions": "all",
        "param": "full",
        "target": "output_jacobian",
    }
    result = bias_fit.fit_bias(TINY, settings_from_section(FitSettings, block, "bias_fit"))
    assert result.accepted and result.after < 0.5 * result.before
    assert result.summary.lag_slope.iloc[0] < 0  # later keys weighted more


def test_the_output_jacobian_profile_of_the_fit_is_the_init_sweeps_measure():
    from lostmid.analysis.influence import output_jacobian_norms

    settings = settings_from_section(FitSettings, {"inits": 1, "batch": 4, "target": "output_jacobian"}, "bias_fit")
    problems = bias_fit.Problems.draw(TINY, settings, 0, 1)
    fitted = problems.profiles(torch.zeros(8, 8))[0]
    assert torch.allclose(fitted, output_jacobian_norms(problems.models[0], problems.tokens[0]), rtol=1e-5)


def test_the_context_reading_is_penalized_for_silencing_the_context():
    energies = torch.tensor([[1.0, 1.0, 1.0, 7.0], [0.01, 0.01, 0.01, 7.0]])
    floor = bias_fit.context_share(energies[:1])
    penalty = bias_fit.share_penalty(energies, floor)
    assert penalty[0] == 0 and penalty[1] > 10  # flat but silenced: 3/10 -> 0.03/7.03 of the total
    assert bias_fit.fitted_imbalance(energies, slice(0, 3)).eq(0).all()  # what the renormalized context alone sees


def test_c0_and_the_lag_slope_summarize_b_apart_from_the_diagonal():
    L = 6
    lag = (torch.arange(L)[:, None] - torch.arange(L)[None, :]).clamp_min(0).double()
    ramp = bias_fit.gauge_fix(-0.5 * lag + 3.0 * (lag == 0))  # recency ramp over lags >= 1 plus a diagonal spike
    summary = bias_fit.bias_summary(ramp)
    assert summary["lag_slope"] == pytest.approx(-0.5)
    assert summary["c0"] > 3.0  # the spike, and the ramp's recent end
    assert bias_fit.bias_summary(bias_fit.gauge_fix(torch.zeros(L, L))) == {"c0": 0.0, "lag_slope": 0.0}


def test_a_fit_that_does_not_flatten_stops_the_command_with_one_line_naming_the_variant_and_both_numbers(
    tmp_path, capsys
):
    from lostmid.cli.main import main

    outputs = {
        f"--out-{name}": str(tmp_path / f"{name}.parquet") for name in ("matrix", "iterations", "profiles", "summary")
    }
    args = [
        "bias-fit",
        "--variant",
        "debiased_x",
        "--model",
        json.dumps(TINY.to_dict()),
        "--settings",
        json.dumps({"inits": 1, "batch": 4, "max_iter": 0, "heldout": 3}),
        "--out-tensor",
        str(tmp_path / "B.pt"),
        *[x for item in outputs.items() for x in item],
    ]
    assert main(args) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "debiased_x rejected" in lines[0]
    assert re.search(r"imbalance (\S+) at B = 0, \1 with the fitted B", lines[0])  # B stayed 0: both numbers equal
    assert not list(tmp_path.iterdir())  # nothing written


def test_the_fit_refuses_training_seeds():
    settings = settings_from_section(FitSettings, {"inits": 2, "heldout": 2, "seed": 10}, "bias_fit")
    assert set(settings.seeds()) == {10, 11, 510, 511, 1010, 1011, 1510, 1511}
    with pytest.raises(
        ConfigError, match=r"variants\.d\.remedy\.fit\.seed=10: the fit would use training seeds \[11\]"
    ):
        check_disjoint_from_training(settings, [11], "variants.d.remedy.fit")


def test_each_bias_variant_gets_one_fit_job_with_its_own_fit_block_and_fitted_model():
    from lostmid import config as cfg
    from lostmid import jobs

    config = cfg.load(REPO / "config" / "config.yaml")
    fits = {fit.variant: fit for fit in jobs.bias_fits(config, jobs.blocks(config))}
    assert set(fits) == {"debiased", "debiased_literal", "debiased_short"}  # debiased_nores: runs/readings/overlay.yaml
    literal = fits["debiased_literal"]
    assert literal.priority == 24 * 1500 // 100  # that of the chain it starts (jobs.Block.priority)
    assert json.loads(literal.model)["residual"] is True and json.loads(literal.fit_model_spec)["residual"] is False
    settings = json.loads(literal.settings)
    assert (settings["target"], settings["positions"], settings["param"]) == ("output_jacobian", "all", "full")
    assert json.loads(fits["debiased"].settings) == config["bias_fit"] and fits["debiased"].fit_model == "debiased"
    assert literal.training_seeds.split() == [str(seed) for seed in range(24)]
    assert literal.path(jobs.BIAS_TABLES["summary"]) == "results/bias_fit_summary/debiased_literal_L16_M4.parquet"


def test_a_fit_model_that_is_not_a_variant_is_a_config_error():
    from lostmid import config as cfg
    from lostmid import jobs

    config = cfg.load(REPO / "tests" / "smoke.yaml")
    config["variants"]["debiased"] = {"remedy": {"kind": "bias", "fit": {"fit_model": "nores"}}}
    with pytest.raises(
        ConfigError, match=r"^config key variants\.debiased\.remedy\.fit\.fit_model: 'nores' is not a variant"
    ):
        jobs.check(config)


def test_a_fit_block_accepts_only_fit_keys():
    from lostmid import config as cfg

    config = cfg.read_yaml(REPO / "tests" / "smoke.yaml")
    config["variants"]["debiased"] = {"remedy": {"kind": "bias", "fit": {"taget": "loss"}}}
    with pytest.raises(ConfigError, match=r"^config key variants\.debiased\.remedy\.fit\.taget is unknown$"):
        cfg.validate(config)


# Restarts, traces and the richer B (issue 52): a residual model, where the readout's identity path keeps
# the last position's influence out of B's reach.
RESIDUAL = model_config(seq_len=6, depth=2, d_model=8, heads=2, mlp_ratio=2, residual=True)
RESTART = settings_from_section(
    FitSettings,
    {"inits": 1, "heldout": 2, "batch": 4, "max_iter": 6, "tol": 0.0, "target": "output_jacobian"},
    "bias_fit",
)


def test_start_0_of_the_restarts_is_the_fit_from_b_0_and_the_best_start_is_kept():
    torch.set_num_threads(1)
    fit = bias_fit.fit_restarts(RESIDUAL, RESTART, restarts=3)
    alone = bias_fit.fit_bias(RESIDUAL, RESTART)
    first = fit.traces[fit.traces.restart == 0].drop(columns="restart").reset_index(drop=True)
    assert first.equals(alone.iterations)  # the same initializations, the same descent
    assert list(fit.starts.restart) == [0, 1, 2] and (fit.starts.iterations == 6).all()
    assert fit.traces.groupby("restart").size().eq(7).all()  # every start's trace is kept, iteration 0 to 6
    assert fit.starts.objective.min() == pytest.approx(min(fit.traces.groupby("restart").objective.last()))
    assert len(fit.heldout) == 2 and (fit.heldout.imbalance_before > 0).all()


def test_the_plateau_is_the_relative_fall_of_the_best_objective_over_the_last_window():
    assert bias_fit.plateau(np.array([4.0, 2.0, 1.0, 1.0, 1.0]), 2) == 0.0
    assert bias_fit.plateau(np.array([4.0, 2.0, 1.0, 3.0]), 2) == 1.0  # best 2 -> 1: fell by 100% of 1
    assert np.isnan(bias_fit.plateau(np.array([2.0, 1.0]), 2))


def test_the_readout_floor_is_reached_when_the_other_positions_are_equal_and_never_exceeded():
    equal_rest = torch.tensor([[1.0, 1.0, 1.0, 5.0]])
    spread_rest = torch.tensor([[0.5, 1.0, 1.5, 5.0]])
    for energies in (equal_rest, spread_rest):
        assert bias_fit.readout_floor(energies)[0] == pytest.approx((density(energies)[0, -1] - 1) ** 2 / 3)
    assert bias_fit.readout_floor(equal_rest)[0] == pytest.approx(imbalance(density(equal_rest))[0])
    assert bias_fit.readout_floor(spread_rest)[0] < imbalance(density(spread_rest))[0]


def test_a_b_per_attention_step_and_head_equal_to_one_b_gives_that_bs_profile():
    problems = bias_fit.Problems.draw(RESIDUAL, RESTART, 0, 1)
    B = bias_fit.gauge_fix(torch.randn(6, 6, generator=torch.Generator().manual_seed(0)))
    per_step = B.expand(2, 2, 6, 6)  # (depth, heads, L, L)
    assert bias_fit.theta_shape(RESIDUAL, "layer_head") == (2, 2, 6, 6)
    assert torch.allclose(problems.profiles(per_step), problems.profiles(B), rtol=1e-5)
    other = per_step.clone()
    other[1, 0] = 0.0  # the second layer's first head unbiased
    assert not torch.allclose(problems.profiles(other), problems.profiles(B), rtol=1e-3)


# The residual arm's fit (issue 52): one B per attention step and head, from several starts, each start's trace kept.
PER_STEP = settings_from_section(
    FitSettings,
    {
        "inits": 1,
        "heldout": 3,
        "batch": 4,
        "max_iter": 8,
        "tol": 0.0,
        "target": "output_jacobian",
        "param": "layer_head",
        "restarts": 2,
    },
    "bias_fit",
)


def test_the_fit_with_restarts_keeps_the_best_starts_b_and_every_starts_trace():
    torch.set_num_threads(1)
    fit = bias_fit.fit_bias(RESIDUAL, PER_STEP)
    alone = bias_fit.fit_restarts(RESIDUAL, PER_STEP, restarts=2)  # the same starts, no guard
    assert fit.bias.shape == (2, 2, 6, 6) and torch.equal(fit.bias, alone.bias)
    table = fit.trace_table()
    assert list(table.columns) == ["restart", "iteration", "objective", "E_inf_fit", "E_inf", "converged"]
    assert table.groupby("restart").size().eq(9).all()  # iterations 0..8 of both starts
    assert table.drop(columns="converged").equals(alone.traces)
    best = int(fit.starts.objective.idxmin())
    assert fit.starts.objective[best] == pytest.approx(table[table.restart == best].objective.iloc[-1])


def test_one_start_is_the_fit_from_b_0_with_the_iterations_table_as_before():
    settings = settings_from_section(FitSettings, {"inits": 1, "batch": 4, "max_iter": 3}, "bias_fit")
    assert settings.restarts == 1
    table = bias_fit.fit_bias(TINY, settings).trace_table()
    assert list(table.columns) == ["iteration", "objective", "E_inf_fit", "E_inf", "converged"]
    with pytest.raises(ConfigError, match=r"bias_fit\.restarts: 0 is less than the minimum of 1"):
        settings_from_section(FitSettings, {"restarts": 0}, "bias_fit")


def test_a_b_per_step_and_head_is_summarized_by_its_mean_table_and_listed_per_step_and_head():
    tables = bias_fit.gauge_fix(torch.randn(2, 2, 5, 5, generator=torch.Generator().manual_seed(1)))
    assert bias_fit.bias_summary(tables) == pytest.approx(bias_fit.bias_summary(tables.mean((0, 1))))
    long = bias_fit.bias_long(tables)
    assert list(long.columns) == ["attention_step", "head", "query", "key", "bias"] and len(long) == 4 * 15
    row = long[(long.attention_step == 2) & (long["head"] == 1) & (long["query"] == 5) & (long["key"] == 2)]
    assert row.bias.item() == pytest.approx(tables[1, 0, 4, 1].item())


def test_the_fit_command_writes_a_b_per_step_and_head_that_a_run_starts_from(tmp_path):
    from lostmid.cli.main import main
    from lostmid.training.checkpoint import read_attention_bias
    from lostmid.training.seed_batch import train_seed_batch

    torch.set_num_threads(1)
    names = ("matrix", "iterations", "profiles", "summary")
    outputs = {f"--out-{name}": tmp_path / f"{name}.parquet" for name in names}
    block = {field: getattr(PER_STEP, field) for field in ("inits", "heldout", "batch", "max_iter", "tol", "target")}
    args = ["bias-fit", "--variant", "fix", "--model", json.dumps(RESIDUAL.to_dict())]
    args += ["--settings", json.dumps({**block, "param": "layer_head", "restarts": 2})]
    args += ["--out-tensor", str(tmp_path / "B.pt"), *[str(x) for item in outputs.items() for x in item]]
    assert main(args) == 0
    iterations = pd.read_parquet(outputs["--out-iterations"])
    assert sorted(set(iterations.restart)) == [0, 1] and len(iterations) == 2 * 9  # every start's trace
    assert pd.read_parquet(outputs["--out-summary"]).param.eq("layer_head").all()
    bias = read_attention_bias(tmp_path / "B.pt", 6)
    assert bias.shape == (2, 2, 6, 6)
    spec = {**tiny_spec(seq_len=6, depth=2), "remedy": {"kind": "bias"}}
    states = [TrainingState.initial({**spec, "seed": seed}, "cpu", attention_bias=bias) for seed in (0, 1)]
    assert torch.equal(states[0].model.attn_bias, bias)
    logs = train_seed_batch(states, 2, "cpu", progress=False)  # the vmapped step of a seed batch reads it
    assert [len(log) for log in logs] == [2, 2] and all(state.step == 2 for state in states)


def test_a_b_per_step_of_another_models_steps_is_one_line_naming_the_run():
    from lostmid.errors import InputError

    spec = {**tiny_spec(seq_len=6, depth=2), "remedy": {"kind": "bias"}}
    message = r"^run baseline seed 0: attention bias must be 6x6 or 2x2x6x6 .*\(3, 2, 6, 6\)"
    with pytest.raises(InputError, match=message):
        TrainingState.initial(spec, "cpu", attention_bias=torch.zeros(3, 2, 6, 6))
