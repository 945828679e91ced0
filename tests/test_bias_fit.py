"""The fitted attention-logit bias: it flattens the influence profile at initialization."""

import pytest
import torch

from lostmid.analysis import bias_fit
from lostmid.analysis.settings import FitSettings
from lostmid.config import settings_from_block
from lostmid.training.checkpoint import TrainingState
from lostmid.errors import ConfigError

from conftest import model_config, tiny_spec

# A no-residual model (the blog's setting): at init its influence piles up on early tokens.
TINY = model_config(seq_len=8, depth=2, d_model=8, heads=2, mlp_ratio=2, residual=False)
FAST = settings_from_block(FitSettings, {"inits": 2, "batch": 16, "max_iter": 40, "lr": 0.1, "positions": "all"}, "bias_fit")


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
    assert list(fit.iterations.columns) == ["iteration", "E_inf_fit", "E_inf"]


def test_a_run_can_start_from_the_fitted_bias(fit):
    spec = {**tiny_spec(depth=2, residual=False), "remedy": {"kind": "bias"}}
    state = TrainingState.initial(spec, "cpu", attention_bias=fit.bias)
    assert torch.equal(state.model.attn_bias, fit.bias)


def test_the_fit_never_touches_the_global_rng():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    bias_fit.fit_bias(TINY, settings_from_block(FitSettings, {"inits": 1, "batch": 4, "max_iter": 1}, "bias_fit"))
    assert torch.equal(torch.rand(3), expected)


def test_bad_fit_settings_are_config_errors():
    with pytest.raises(ConfigError, match=r"bias_fit\.positions: 'middle' is not one of"):
        settings_from_block(FitSettings, {"positions": "middle"}, "bias_fit")
    with pytest.raises(ConfigError, match=r"bias_fit\.inits: 0 is less than the minimum of 1"):
        settings_from_block(FitSettings, {"inits": 0}, "bias_fit")
    with pytest.raises(ConfigError, match=r"^config key bias_fit\.itres is unknown$"):
        settings_from_block(FitSettings, {"itres": 3}, "bias_fit")
