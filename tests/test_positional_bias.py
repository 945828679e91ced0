"""A positional bias on a tiny random Llama (seconds each; never the real model).

What is checked: a zero bias and a removed bias leave the logits bit for bit; a bias changes layer 0's
attention by exactly B (up to a constant per query), with or without a key-value cache (the retrieval
stage's prefix reuse included); the mask built without gradients is the differentiable one bit for bit;
the gradient reaches its parameters; the blog's fitted bias flattens the influence profile on held-out
windows; Found-in-the-Middle's calibration makes the content-free attention flatter and is undone; bad
input is one line; the docstring example runs.
"""

from __future__ import annotations

import doctest

import pytest
import torch
from test_retrieval import stream, tiny_model, tokenizer

from lostmid.architectures import models, retrieval
from lostmid.architectures import positional_bias as pb
from lostmid.errors import ConfigError


def arch():
    return models.Arch("llama", "rope", tiny_model())


def windows(count, first=0, n=48):
    """``count`` disjoint windows of n tokens, BOS first, from the first+1-th on."""
    data, bos = torch.from_numpy(stream(tokens=4000)), tokenizer().bos_token_id
    return torch.stack(
        [torch.cat([torch.tensor([bos]), data[k * (n - 1) : (k + 1) * (n - 1)]]) for k in range(first, first + count)]
    )


def random_bias(a, seed=0, **kwargs):
    bias = pb.PositionalBias(len(pb.attention_modules(a.model)), 96, **kwargs).double()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in bias.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return bias


def layer0_attention(a, ids):
    with pb.attention_implementation(a.model, "eager"), torch.no_grad():
        return a.model(ids, output_attentions=True).attentions[0][0]  # (heads, m, m)


def test_a_zero_bias_and_a_removed_bias_leave_the_logits_bit_for_bit():
    a, ids = arch(), windows(1)
    with torch.no_grad():
        before = a.model(ids).logits
        with pb.applied(a.model, pb.PositionalBias(2, 96).double()):
            zero = a.model(ids).logits
        with pb.applied(a, random_bias(a)):
            biased = a.model(ids).logits
        after = a.model(ids).logits
    assert torch.equal(zero, before) and torch.equal(after, before) and not torch.allclose(biased, before)
    handle = pb.apply(a.model, random_bias(a))
    handle.remove()
    with torch.no_grad():
        assert torch.equal(a.model(ids).logits, before)


@pytest.mark.parametrize("forms", [("distance",), ("key",), ("distance", "key")])
def test_layer_0_attention_changes_by_exactly_b_up_to_a_constant_per_query(forms):
    a, ids = arch(), windows(1)
    bias = random_bias(a, forms=forms, per_layer=False)
    plain = layer0_attention(a, ids)
    with pb.applied(a.model, bias):
        changed = layer0_attention(a, ids)
    m = ids.shape[1]
    positions = torch.arange(m)
    expected = bias(0, positions, positions)  # (m, m)
    difference = changed.log() - plain.log()  # (heads, m, m), -inf - -inf above the diagonal
    causal = positions[None] <= positions[:, None]
    shifted = difference - difference[..., :1]  # the constant of each query row taken out
    expected = (expected - expected[:, :1])[causal].expand(4, -1)
    torch.testing.assert_close(shifted[:, causal], expected, atol=1e-5, rtol=0)  # eager's softmax: float32
    assert (changed[:, ~causal] == 0).all()


@pytest.mark.parametrize("per_layer", [True, False])
def test_with_a_key_value_cache_the_biased_model_gives_the_same_logits(per_layer):
    a, ids = arch(), windows(1)
    with pb.applied(a.model, random_bias(a, per_layer=per_layer)), torch.no_grad():
        whole = a.model(ids).logits
        past = a.model(ids[:, :30], use_cache=True).past_key_values
        rest = a.model(ids[:, 30:], past_key_values=past, use_cache=True).logits
    torch.testing.assert_close(rest, whole[:, 30:])


def test_the_retrieval_stage_runs_under_a_bias_and_its_prefix_reuse_still_changes_nothing():
    a = arch()

    def rows(reuse):
        return retrieval.retrieval_examples(
            a, tokenizer(), stream=stream(), n=64, windows=2, keys=3, digits=3, prefix_reuse=reuse, gradient_windows=0
        )

    plain = rows(True)
    with pb.applied(a.model, random_bias(a)):
        reused, whole = rows(True), rows(False)
    assert (reused.prefix > 0).any()
    torch.testing.assert_close(torch.tensor(reused.logprob.values), torch.tensor(whole.logprob.values))
    assert not torch.allclose(torch.tensor(reused.logprob.values), torch.tensor(plain.logprob.values))


@pytest.mark.parametrize("forms", [("distance",), ("key",), ("distance", "key")])
@pytest.mark.parametrize("per_layer", [True, False])
def test_without_gradients_the_mask_is_the_differentiable_grids_bit_for_bit(forms, per_layer):
    """Retrieval builds B's mask in two passes over the (q, k) grid (``PositionalBias.causal``); a fit or a
    profile builds it as a differentiable grid. Same values, -inf above the diagonal, sign bits included, with
    and without a cache's past and with the model's own boolean mask."""
    bias = random_bias(arch(), forms=forms, per_layer=per_layer)
    for past, q in ((0, 40), (25, 15), (0, 1), (39, 1)):
        hidden = torch.zeros(1, q, 8, dtype=torch.float64)
        for mask in (None, torch.ones(q, past + q, dtype=torch.bool).tril(past)[None, None]):
            with torch.enable_grad():
                grid = pb.biased_mask(bias, 1, hidden, mask, past)
            with torch.no_grad():
                causal = pb.biased_mask(bias, 1, hidden, mask, past)
            assert grid.requires_grad and not causal.requires_grad
            assert torch.equal(grid, causal) and torch.equal(grid.signbit(), causal.signbit())
            assert torch.isinf(causal[..., :, past + 1 :].diagonal(dim1=-2, dim2=-1)).all()


@pytest.mark.parametrize("per_layer", [True, False])
def test_a_biased_forward_pass_gives_the_same_logits_with_and_without_gradients(per_layer, monkeypatch):
    """Without gradients a bias shared by the layers is built once a pass and handed to each layer (a per-layer bias:
    once a layer); with gradients, once a layer. The logits are the same bit for bit."""
    a, ids = arch(), windows(1)
    built, build = [], pb.biased_mask
    monkeypatch.setattr(pb, "biased_mask", lambda *args: built.append(args[1]) or build(*args))
    with pb.applied(a.model, random_bias(a, per_layer=per_layer)):
        with torch.no_grad():
            without = a.model(ids).logits
            assert built == ([0, 1] if per_layer else [0])
            a.model(ids[:, :20])  # another pass, another length: built again
            assert built == ([0, 1, 0, 1] if per_layer else [0, 0])
        with torch.enable_grad():
            with_gradients = a.model(ids).logits.detach()
    assert torch.equal(without, with_gradients)


def test_the_gradient_reaches_every_parameter_of_the_bias():
    a, ids = arch(), windows(1)
    bias = pb.PositionalBias(2, 96, buckets=6).double()
    with pb.applied(a.model, bias), models.frozen(a.model):
        a.model(ids).logits[0, -1].softmax(-1).max().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in bias.parameters())


def planted(a):
    """A positional pattern planted in the tiny model (whose random attention has little): every layer favours
    the first keys and the nearest ones, as a trained model's sink and recency do."""
    bias = pb.PositionalBias(len(pb.attention_modules(a.model)), 96, per_layer=False).double()
    with torch.no_grad():
        bias.key.copy_(torch.linspace(4, 0, bias.grid.numel()))
        bias.distance.copy_(torch.linspace(4, 0, bias.grid.numel()))
    return pb.apply(a.model, bias)


def test_the_fitted_bias_flattens_the_influence_profile_on_held_out_windows(caplog):
    a = arch()
    planted(a)
    fitting, held_out = windows(3), windows(4, first=3)
    with caplog.at_level("INFO", logger=pb.__name__):
        fit = pb.fit_flat(a, fitting, steps=25, restarts=2, lr=0.2)
    assert len(fit.trace) == 2 * 25 and fit.trace[0][2] == pytest.approx(fit.none)  # restart 0 starts at B = 0
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fit: ")]
    assert len(progress) == 2 * 25 and progress[-1].startswith("fit: restart 2 of 2, step 25 of 25, flatness ")
    assert fit.loss < 0.5 * fit.none
    none, fixed = pb.profile_flatness(a, held_out), pb.profile_flatness(a, held_out, fit.bias)
    assert fixed < 0.5 * none, (none, fixed)


def test_the_calibration_flattens_the_content_free_attention_and_is_undone():
    a, contexts = arch(), pb.shuffled(windows(3), seed=0)
    planted(a)
    assert torch.equal(contexts[:, 0], windows(3)[:, 0]) and not torch.equal(contexts, windows(3))
    assert torch.equal(contexts.sort(1).values, windows(3).sort(1).values)  # the same tokens, shuffled

    def spread(attention):
        """Mean over queries of the variance of log(i + 1) A(i, j) over keys j <= i: 0 when uniform."""
        m = attention.shape[-1]
        return torch.stack([(attention[..., i, : i + 1] * (i + 1)).log().var(-1).mean() for i in range(8, m)]).mean()

    plain = layer0_attention(a, contexts[:1])
    half, full = (pb.calibrate(a, contexts, strength) for strength in (0.5, 1.0))
    with pb.applied(a.model, half):
        flatter = layer0_attention(a, contexts[:1])
    with pb.applied(a.model, full):
        flattest = layer0_attention(a, contexts[:1])
    assert spread(flattest) < 0.5 * spread(flatter) < 0.5 * spread(plain), (spread(plain), spread(flatter))
    torch.testing.assert_close(half.distance * 2, full.distance)  # the bias is linear in its strength
    assert torch.equal(layer0_attention(a, contexts[:1]), plain)


def test_bad_input_is_one_line():
    with pytest.raises(ConfigError, match="^positional bias: forms \\['slope'\\]"):
        pb.PositionalBias(2, 96, forms=("slope",))
    with pytest.raises(ConfigError, match="^positional bias: fitted for 3 layers, the model has 2$"):
        pb.apply(arch().model, pb.PositionalBias(3, 96))
    with pytest.raises(ConfigError, match="^positional bias: Linear has no model.layers"):
        pb.apply(torch.nn.Linear(2, 2), pb.PositionalBias(3, 96))


def test_the_docstring_example_runs():
    assert doctest.testmod(pb, raise_on_error=False).failed == 0
