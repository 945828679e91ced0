"""Controls for the blog's fix: biases built from a fitted B that keep one of its properties, and the job
that builds them, which refuses a malformed B with one line."""

import json

import pandas as pd
import pytest
import torch

from lostmid.analysis import bias_controls as bc
from lostmid.analysis.bias_fit import bias_summary, gauge_fix
from lostmid.errors import ConfigError, InputError
from lostmid.plots.remedies import bias_heatmap, reading_line

from conftest import REPO, model_config

L = 6


@pytest.fixture()
def source():
    """A causal, gauge-fixed B with recency, a diagonal spike and query-specific noise."""
    generator = torch.Generator().manual_seed(0)
    lag = (torch.arange(L)[:, None] - torch.arange(L)[None, :]).clamp_min(0).float()
    return gauge_fix(-0.3 * lag + 2.0 * torch.eye(L) + 0.5 * torch.randn(L, L, generator=generator))


def same_model(a, b):
    """Equal up to each causal row's shift (softmax ignores it): equal once gauge-fixed."""
    return torch.allclose(gauge_fix(a), gauge_fix(b), atol=1e-6)


def test_the_ramp_keeps_the_lag_means_and_drops_everything_query_specific(source):
    ramp = bc.control_bias(source, "lag_ramp", 0, L)
    c = bc.lag_means(source)
    toeplitz = torch.stack(
        [torch.stack([c[i - j] if j <= i else torch.tensor(0.0) for j in range(L)]) for i in range(L)]
    )
    assert same_model(ramp, toeplitz)  # B_ij = c(i - j), up to each row's shift


def test_the_reversed_ramp_gives_the_first_key_what_the_ramp_gives_the_query_itself(source):
    ramp, reversed_ = (bc.control_bias(source, rule, 0, L) for rule in ("lag_ramp", "reversed_ramp"))
    for i in range(L):  # each row holds the same values, in the opposite key order
        assert torch.allclose(reversed_[i, : i + 1], ramp[i, : i + 1].flip(0), atol=1e-6)
    assert bias_summary(reversed_)["lag_slope"] > 0 > bias_summary(ramp)["lag_slope"]  # primacy against recency


def test_the_shuffle_keeps_each_rows_values_is_seeded_and_moves_them(source):
    shuffled = bc.control_bias(source, "row_shuffle", 1, L)
    for i in range(L):
        assert torch.allclose(shuffled[i, : i + 1].sort().values, source[i, : i + 1].sort().values, atol=1e-6)
    assert torch.equal(shuffled, bc.control_bias(source, "row_shuffle", 1, L))
    assert not torch.equal(shuffled, bc.control_bias(source, "row_shuffle", 2, L))
    assert not torch.allclose(shuffled, source)


def test_the_diagonal_control_keeps_the_self_preference_alone(source):
    diagonal = bc.control_bias(source, "diagonal", 0, L)
    assert bias_summary(diagonal)["c0"] == pytest.approx(bias_summary(source)["c0"], abs=1e-5)
    off = diagonal - torch.diag(torch.diagonal(diagonal))
    for i in range(1, L):  # every older key of a query gets the same bias
        assert torch.allclose(off[i, :i], off[i, :i].mean().expand(i), atol=1e-6)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda B: B[:-1], r"has the wrong shape: \(5, 6\), expected \(6, 6\)"),
        (lambda B: B + torch.triu(torch.ones(L, L), 1), r"is not causal: 15 entries above the diagonal are not zero"),
        (lambda B: B.index_put((torch.tensor(3), torch.tensor(1)), torch.tensor(float("nan"))), r"is not finite: 1 "),
        (lambda B: B.long(), r"is not a floating-point tensor"),
    ],
)
def test_a_malformed_source_is_refused_with_one_line(source, make, words):
    with pytest.raises(InputError, match=r"^the literal B " + words):
        bc.control_bias(make(source), "lag_ramp", 0, L, "the literal B")


def test_the_command_refuses_a_malformed_source_with_one_line_and_writes_nothing(tmp_path, capsys, source):
    from lostmid.cli.main import main

    torch.save(source + torch.triu(torch.ones(L, L), 1), tmp_path / "literal.pt")
    out = tmp_path / "out"
    args = _command(model_config(seq_len=L, depth=1, d_model=8, heads=2, mlp_ratio=2), tmp_path / "literal.pt", out)
    assert main(args) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "is not causal" in lines[0] and "control debiased_ramp" in lines[0]
    assert not out.exists()


def test_the_command_writes_the_tables_of_a_fit_with_the_trained_models_flatness(tmp_path, source):
    from lostmid.cli.main import main

    torch.save(source, tmp_path / "literal.pt")
    residual = model_config(seq_len=L, depth=1, d_model=8, heads=2, mlp_ratio=2)
    out = tmp_path / "out"
    assert main(_command(residual, tmp_path / "literal.pt", out)) == 0
    B = torch.load(out / "B.pt")
    assert same_model(B, bc.lag_ramp(source.double()).float())
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == 3 and summary.accepted.all() and (summary.param == "control lag_ramp").all()
    assert summary.inserted_imbalance_after.gt(0).all() and summary.fit_model.eq("nores").all()
    assert len(pd.read_parquet(out / "iterations.parquet")) == 1
    matrix = pd.read_parquet(out / "matrix.parquet")
    assert len(matrix) == L * (L + 1) // 2
    bias_heatmap(matrix, summary, tmp_path / "heatmap.png")  # the figure names a control's rule
    assert reading_line(summary.iloc[0]).startswith("control lag_ramp of a B fitted to the output Jacobian")


def _command(model, source, out):
    nores = model_config(seq_len=L, depth=1, d_model=8, heads=2, mlp_ratio=2, residual=False)
    return [
        "bias-control",
        "--variant",
        "debiased_ramp",
        "--rule",
        "lag_ramp",
        "--source",
        str(source),
        "--model",
        json.dumps(model.to_dict()),
        "--fit-model-spec",
        json.dumps(nores.to_dict()),
        "--fit-model",
        "nores",
        "--settings",
        json.dumps({"target": "output_jacobian", "inits": 1, "batch": 4, "heldout": 3}),
        "--out-tensor",
        str(out / "B.pt"),
        *[
            x
            for name in ("matrix", "iterations", "profiles", "summary")
            for x in (f"--out-{name}", str(out / f"{name}.parquet"))
        ],
    ]


def test_the_schema_and_the_library_name_the_same_rules():
    from lostmid import schema

    remedy = schema.load()["$defs"]["remedy"]["properties"]["control"]["properties"]["rule"]
    assert tuple(remedy["enum"]) == bc.CONTROL_RULES


def test_each_control_gets_one_job_from_its_sources_fit_and_a_control_of_no_fitted_variant_is_refused():
    from lostmid import config as cfg
    from lostmid import jobs

    config = cfg.load(REPO / "tests" / "smoke.yaml")
    config["grid"].append({"variants": ["debiased_ramp"], "L": [8], "depth": [1], "seeds": [0]})
    config["variants"]["debiased_ramp"] = {
        "remedy": {"kind": "bias", "control": {"of": "debiased", "rule": "lag_ramp"}}
    }
    blocks = jobs.blocks(config)
    assert "debiased_ramp" not in {fit.variant for fit in jobs.bias_fits(config, blocks)}
    (control,) = jobs.bias_controls(config, blocks)
    assert control.source_tensor() == "results/bias_tensors/debiased_L8_M1.pt"
    assert control.fit.path(jobs.BIAS_TENSOR) == "results/bias_tensors/debiased_ramp_L8_M1.pt"
    assert control.fit.fit_model == "debiased" and (control.rule, control.seed) == ("lag_ramp", 0)
    config["variants"]["debiased_ramp"]["remedy"]["control"]["of"] = "baseline"
    with pytest.raises(ConfigError, match=r"remedy\.control\.of: 'baseline' is not a fitted bias variant trained"):
        jobs.bias_controls(config, blocks)


def test_a_control_with_a_fit_block_is_refused_by_the_schema():
    from lostmid import config as cfg

    config = cfg.read_yaml(REPO / "tests" / "smoke.yaml")
    config["variants"]["debiased_ramp"] = {
        "remedy": {"kind": "bias", "fit": {"target": "loss"}, "control": {"of": "debiased", "rule": "lag_ramp"}}
    }
    with pytest.raises(ConfigError, match=r"variants\.debiased_ramp\.remedy"):
        cfg.validate(config)


def test_the_fits_comparison_counts_only_what_changes_the_model(source):
    import sys

    sys.path.insert(0, str(REPO / "scripts"))
    import compare_bias_fits

    shifted = source + torch.arange(L, dtype=torch.float32)[:, None] * torch.ones(L, L).tril()  # rows shifted
    same = compare_bias_fits.distances(gauge_fix(source).double(), gauge_fix(shifted).double())
    assert same["max_abs_diff"] < 1e-5 and same["correlation"] == pytest.approx(1.0)
    other = compare_bias_fits.distances(gauge_fix(source).double(), bc.reversed_ramp(source.double()))
    assert other["max_abs_diff"] > 1 and other["first_key_b"] == pytest.approx(
        float(bc.reversed_ramp(source.double())[-1, 0])
    )
    table = bias_long_table(source)
    assert torch.allclose(compare_bias_fits.matrix(table), gauge_fix(source).double(), atol=1e-6)


def bias_long_table(B):
    from lostmid.analysis.bias_fit import bias_long

    return bias_long(B).assign(variant="x")
