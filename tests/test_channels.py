"""The exact channel split P_0 = P_res + P_cone + P_loc (docs/theory.md §5.1), checked against full Jacobians.

Reference: for one sequence, torch.func.jacrev gives each step's Jacobian DF_k(X_k) as an
(L, d, L, d) array; the true adjoints P_{k+1} come from lostmid.adjoint. The cone part of
step k uses the blocks i > j, the local part the diagonal blocks i = j; blocks i < j vanish
(causality).
"""

import pytest
import torch
from torch.func import jacrev

from lostmid.analysis import channels
from lostmid.core import adjoint
from lostmid.core.model import FlagTransformer

from conftest import model_config


def tiny_model(block="sequential", seed=0, bias=True, scale=0.3, **overrides):
    """A float64 model with weights large enough that every channel matters, and a nonzero
    attention bias (so the split is checked where the bias enters the logits)."""
    torch.manual_seed(seed)
    config = dict(seq_len=6, depth=2, d_model=8, heads=2, mlp_ratio=2, block=block)
    model = FlagTransformer(model_config(**{**config, **overrides})).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, scale)
        if bias:
            model.set_attention_bias(torch.randn(6, 6, dtype=torch.float64))
    return model


def batch(n=3, L=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 3, (n, L), generator=g), torch.randint(0, 2, (n,), generator=g)


def step_jacobian(model, k, state):
    """DF_k at one sequence's state X_k (L, d): an (L, d, L, d) tensor."""
    mask = model.logit_bias()  # explicit attention: jacrev vmaps, and the fused kernel has no batching rule
    return jacrev(lambda x: model.steps[k](x[None], mask, explicit=True)[0])(state)


def reference_split(model, tokens, targets):
    """P_res, P_cone, P_loc of every sequence from full Jacobians and the true adjoints."""
    _, _, P = adjoint.adjoints(model, tokens, targets)  # [P_0, ..., P_M]
    states = channels.channel_split(model, tokens, targets, keep_states=True).states
    L = tokens.shape[1]
    later = torch.ones(L, L, dtype=torch.bool).tril(-1)  # later[i, j]: output i is strictly after input j
    diagonal = torch.eye(L, dtype=torch.bool)
    cone, loc = torch.zeros_like(P[0]), torch.zeros_like(P[0])
    for b in range(tokens.shape[0]):
        for k in range(len(model.steps)):
            J = step_jacobian(model, k, states[k][b])  # J[i, :, j, :] = dF(i) / dX(j)
            earlier = ~later & ~diagonal
            assert J.permute(0, 2, 1, 3)[earlier].abs().max() == 0  # no output depends on a later input
            vjp_blocks = torch.einsum("iajc,ia->ijc", J, P[k + 1][b])  # block (i, j) of DF^T P_{k+1}
            h = model.step_size(k)
            cone[b] += h * (vjp_blocks * later[:, :, None]).sum(0)
            loc[b] += h * (vjp_blocks * diagonal[:, :, None]).sum(0)
    return P[0], P[-1], cone, loc


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_a_step_over_two_equal_copies_is_the_ordinary_step(block):
    model = tiny_model(block)
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    step, mask = model.steps[0], model.logit_bias()
    torch.testing.assert_close(channels.two_copy_step(step, x, x, mask), step(x, mask, explicit=True))


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_the_split_equals_the_full_jacobian_blocks_with_a_nonzero_attention_bias(block):
    model = tiny_model(block)
    assert model.attn_bias.abs().max() > 0
    tokens, targets = batch()
    split = channels.channel_split(model, tokens, targets)
    p0, p_res, cone, loc = reference_split(model, tokens, targets)
    torch.testing.assert_close(split.p0, p0)
    torch.testing.assert_close(split.res, p_res)
    torch.testing.assert_close(split.cone, cone)
    torch.testing.assert_close(split.loc, loc)
    # Every channel carries weight here, so the test could not pass by a channel being zero.
    for part in (split.res, split.cone, split.loc):
        assert part.abs().max() > 1e-3


@pytest.mark.parametrize("block", ["sequential", "parallel"])
@pytest.mark.parametrize("readout", ["last", "all"])
def test_the_channels_add_up_to_the_input_adjoint(block, readout):
    model = tiny_model(block, seed=1, readout=readout)
    tokens, targets = batch(n=5, seed=1)
    split = channels.channel_split(model, tokens, targets)
    torch.testing.assert_close(split.res + split.cone + split.loc, adjoint.input_adjoint(model, tokens, targets))
    assert split.split_error() < 1e-12
    # The residual channel is the terminal adjoint: with readout 'last' it lives at position L only.
    if readout == "last":
        assert split.res[:, :-1].abs().max() == 0
    # Nothing comes after the last position, so its cone channel is empty.
    assert split.cone[:, -1].abs().max() == 0


def test_the_split_matches_the_plain_model_in_float32_too():
    model = tiny_model("sequential", seed=2).float()
    tokens, targets = batch(n=4, seed=2)
    split = channels.channel_split(model, tokens, targets)
    torch.testing.assert_close(split.p0, adjoint.input_adjoint(model, tokens, targets))
    assert split.split_error() < 1e-5


def test_an_mlp_only_step_is_purely_local():
    model = tiny_model("sequential", seed=3)
    tokens, targets = batch(seed=3)
    states = channels.channel_split(model, tokens, targets, keep_states=True).states
    J = step_jacobian(model, 1, states[1][0])  # step 1 is the first block's MLP sub-step
    off_diagonal = ~torch.eye(6, dtype=torch.bool)
    assert J.permute(0, 2, 1, 3)[off_diagonal].abs().max() == 0


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_power_iteration_finds_the_spectral_norm_of_each_step_jacobian(block):
    model = tiny_model(block, seed=4)
    tokens, targets = batch(n=2, seed=4)
    split = channels.channel_split(model, tokens, targets, keep_states=True)
    norms = channels.step_operator_norms(model, split.states, 60, torch.Generator().manual_seed(0))
    assert norms.shape == (2, len(model.steps))
    for b in range(2):
        for k in range(len(model.steps)):
            J = step_jacobian(model, k, split.states[k][b]).reshape(48, 48)
            exact = torch.linalg.matrix_norm(J, ord=2)
            # ||DF v|| for a unit v never exceeds the norm, and converges to it.
            assert norms[b, k] <= exact * (1 + 1e-12)
            assert norms[b, k] >= exact * (1 - 1e-3)


def test_the_discrete_gronwall_factor_bounds_the_distance_from_the_terminal_adjoint():
    model = tiny_model("parallel", seed=5, readout="all")
    tokens, targets = batch(n=6, seed=5)
    split = channels.channel_split(model, tokens, targets, keep_states=True)
    norms = channels.step_operator_norms(model, split.states, 60, torch.Generator().manual_seed(0))
    c = channels.gronwall_factor(norms, [model.step_size(k) for k in range(len(model.steps))])
    torch.testing.assert_close(c, torch.prod(1 + norms, dim=1) - 1)  # h_k = 1
    gap = (split.p0 - split.res).flatten(1).norm(dim=1)
    assert (gap <= c * split.res.flatten(1).norm(dim=1)).all()


def test_profiles_average_over_batches_exactly_like_one_batch():
    model = tiny_model("sequential", seed=6)
    tokens, targets = batch(n=7, seed=6)
    whole, _ = channels.channel_profiles(model, tokens, targets, batch_size=7, power_iterations=0, seed=0)
    chunked, diagnostics = channels.channel_profiles(model, tokens, targets, batch_size=3, power_iterations=0, seed=0)
    torch.testing.assert_close(whole.energy, chunked.energy)
    for a in channels.CHANNELS:
        torch.testing.assert_close(whole.channel[a], chunked.channel[a])
    for pair in channels.PAIRS:
        torch.testing.assert_close(whole.cross[pair], chunked.cross[pair])
    assert diagnostics["split_error"] < 1e-12


def test_a_model_without_residual_path_is_refused():
    model = tiny_model("sequential", residual=False)
    tokens, targets = batch()
    with pytest.raises(ValueError, match="residual"):
        channels.channel_split(model, tokens, targets)
