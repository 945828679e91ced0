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


# A B per attention step and head (attention steps, heads, L, L): the residual arm's fix of issue 52.
@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_a_b_per_step_and_head_of_zeros_is_no_b(block):
    model, plain = make(block=block), make(block=block)
    model.set_attention_bias(torch.zeros(2, 2, 8, 8, dtype=torch.float64))
    assert model.attn_bias.shape == (2, 2, 8, 8) and not model.has_bias
    tokens = torch.randint(0, 3, (5, 8))
    for explicit in (False, True):
        assert torch.equal(model(tokens, explicit=explicit), plain(tokens, explicit=explicit))


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_a_b_per_step_and_head_all_equal_to_one_b_gives_that_bs_logits(block):
    B = torch.randn(8, 8, dtype=torch.float64)
    one, per_step = make(block=block), make(block=block)
    one.set_attention_bias(B)
    per_step.set_attention_bias(B.expand(2, 2, 8, 8))
    tokens = torch.randint(0, 3, (5, 8))
    assert torch.equal(per_step(tokens, explicit=True), one(tokens, explicit=True))
    torch.testing.assert_close(per_step(tokens), one(tokens))  # the fused kernel, broadcasting another mask
    for a, b in zip(per_step.attention_maps(tokens), one.attention_maps(tokens)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_each_attention_step_and_head_reads_its_own_b(block):
    model = make(block=block)
    bias = torch.zeros(2, 2, 8, 8, dtype=torch.float64)
    bias[1, 0] = torch.randn(8, 8, dtype=torch.float64)  # the second attention step's first head only
    model.set_attention_bias(bias)
    tokens = torch.randint(0, 3, (5, 8))
    first, second = model.attention_maps(tokens)
    plain_first, plain_second = make(block=block).attention_maps(tokens)
    assert torch.equal(first, plain_first)  # the first step's B is 0, so the second's input is the plain one's
    assert torch.equal(second[:, 1], plain_second[:, 1])  # its second head: B = 0
    assert not torch.allclose(second[:, 0], plain_second[:, 0])  # its first head: its own B
    torch.testing.assert_close(model(tokens), model(tokens, explicit=True))


def test_a_state_with_a_b_per_step_and_head_loads_into_a_fresh_model():
    model = make()
    model.set_attention_bias(torch.randn(2, 2, 8, 8, dtype=torch.float64))
    fresh = make()
    fresh.load_state_dict(model.state_dict())
    assert fresh.has_bias and torch.equal(fresh.attn_bias, model.attn_bias)
    tokens = torch.randint(0, 3, (5, 8))
    assert torch.equal(fresh(tokens), model(tokens))


def test_a_b_per_step_of_another_models_steps_or_heads_is_an_error():
    with pytest.raises(ValueError, match=r"8x8 or 2x2x8x8 .* got \(3, 2, 8, 8\)"):
        make().set_attention_bias(torch.zeros(3, 2, 8, 8))
