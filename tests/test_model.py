"""The model: causal, both layouts, explicit attention equal to fused, the bias and the taps."""

import pytest
import torch

from lostmid.core.model import FlagTransformer

from conftest import model_config


def make(**kw):
    torch.manual_seed(0)
    config = dict(seq_len=8, depth=2, d_model=8, heads=2, mlp_ratio=2)
    config.update(kw)
    return FlagTransformer(model_config(**config)).double()


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_steps_per_block(block):
    model = make(block=block)
    assert len(model.steps) == model.config.n_steps == (4 if block == "sequential" else 2)


@pytest.mark.parametrize("block", ["sequential", "parallel"])
@pytest.mark.parametrize("attention", ["softmax", "uniform"])
@pytest.mark.parametrize("biased", [False, True], ids=["causal-fast-path", "with-bias"])
def test_explicit_attention_equals_fused(block, attention, biased):
    model = make(block=block, attention=attention)
    if biased:
        model.set_attention_bias(torch.randn(8, 8, dtype=torch.float64))
    tokens = torch.randint(0, 3, (5, 8))
    torch.testing.assert_close(model(tokens), model(tokens, explicit=True))


def test_the_model_is_causal():
    model = make(readout="all")
    tokens = torch.randint(0, 3, (1, 8))
    changed = tokens.clone()
    changed[0, 5] = (changed[0, 5] + 1) % 3
    a, b = model(tokens), model(changed)
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_zero_taps_leave_the_output_unchanged():
    model = make()
    tokens = torch.randint(0, 3, (4, 8))
    taps = [torch.zeros(4, 8, 8, dtype=torch.float64) for _ in range(len(model.steps) + 1)]
    torch.testing.assert_close(model(tokens, taps=taps), model(tokens))
    torch.testing.assert_close(model(tokens, taps=taps[:1]), model(tokens))  # a tap on X_0 only


@pytest.mark.parametrize("explicit", [False, True])
def test_a_mask_of_none_is_plain_causal_attention(explicit):
    model = make()
    x = torch.randn(3, 8, 8, dtype=torch.float64)
    step = model.steps[0]
    torch.testing.assert_close(step(x, None, explicit), step(x, model.logit_bias(), explicit))
    assert model.attention_mask(explicit=False) is None  # B = 0: the fused kernel's causal fast path
    torch.testing.assert_close(model.attention_mask(explicit=True), model.logit_bias())


def test_without_residual_each_step_replaces_the_state():
    model = make(residual=False, depth=1)
    x = torch.randn(2, 8, 8, dtype=torch.float64)
    bias = model.logit_bias()
    torch.testing.assert_close(model.advance(0, x, bias), model.steps[0](x, bias))


def test_bias_of_the_wrong_shape_is_an_error():
    with pytest.raises(ValueError, match="8x8"):
        make().set_attention_bias(torch.zeros(4, 4))


@pytest.mark.parametrize("bad, message", [({"block": "diagonal"}, "model.block"), ({"heads": 3}, "divisible")])
def test_bad_model_options_name_the_option(bad, message):
    with pytest.raises(ValueError, match=message):
        model_config(seq_len=8, **{"d_model": 8, **bad})


def test_a_loaded_bias_is_used_by_the_fused_path():
    biased = make()
    biased.set_attention_bias(torch.randn(8, 8, dtype=torch.float64))
    fresh = make()
    fresh.load_state_dict(biased.state_dict())
    assert fresh.has_bias
    tokens = torch.randint(0, 3, (4, 8))
    torch.testing.assert_close(fresh(tokens), biased(tokens))


def test_the_default_init_is_nanogpts_normal_and_the_other_inits_change_only_the_weights_scale():
    torch.manual_seed(0)
    default = FlagTransformer(model_config(seq_len=8, d_model=16, heads=2))
    torch.manual_seed(0)
    fan_in = FlagTransformer(model_config(seq_len=8, d_model=16, heads=2, init="fan_in"))
    torch.manual_seed(0)
    pytorch = FlagTransformer(model_config(seq_len=8, d_model=16, heads=2, init="pytorch"))
    qkv = [m.steps[0].attn.qkv.weight for m in (default, fan_in, pytorch)]
    assert abs(qkv[0].std().item() - 0.02) < 0.003 and abs(qkv[1].std().item() - 16**-0.5) < 0.03
    assert qkv[2].abs().max().item() <= 16**-0.5  # PyTorch's Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert abs(fan_in.token_embedding.weight.std().item() - 1.0) < 0.3
    assert fan_in.steps[0].attn.qkv.bias.abs().max() == 0 and pytorch.steps[0].attn.qkv.bias.abs().max() > 0


def test_layernorm_eps_reaches_every_layernorm():
    model = FlagTransformer(model_config(seq_len=8, d_model=8, heads=2, layernorm_eps=1e-9))
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(m.eps == 1e-9 for m in norms)


def test_an_unknown_init_names_the_option():
    with pytest.raises(ValueError, match="model.init"):
        model_config(seq_len=8, d_model=8, init="xavier")
