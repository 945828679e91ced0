"""The counterexamples of the paper's section 3.6 (docs/theory.md §5.4): what the theorems do NOT say.

1. A causal mask alone does not give primacy: with W_V = 0 nothing flows back through
   attention, P_cone = 0, and the influence never reaches the early positions.
2. A residual path alone does not give recency: an identity residual network supervised at
   every position (readout 'all') has a flat profile.
3. Channels that are each U-shaped can add up to an inverted U: negative cross terms.
4. Equal observability Gramians do not mean equal influence: the task covector matters.
"""

import numpy as np
import pytest
import torch

from lostmid.analysis import channels, conditions, metrics
from lostmid.analysis.channels import Profiles
from lostmid.analysis.conditions import Regional
from lostmid.core import adjoint
from lostmid.core.model import FlagTransformer

from conftest import model_config


def model_of(seed=0, **overrides):
    torch.manual_seed(seed)
    config = dict(seq_len=8, depth=2, d_model=8, heads=2, mlp_ratio=2)
    model = FlagTransformer(model_config(**{**config, **overrides})).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def batch(n=16, L=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 3, (n, L), generator=g), torch.randint(0, 2, (n,), generator=g)


@pytest.mark.parametrize("block", ["sequential", "parallel"])
@pytest.mark.parametrize("mlp", [False, True])
def test_causal_mask_without_primacy_when_the_value_maps_vanish(block, mlp):
    model = model_of(block=block, mlp=mlp)
    d = model.config.d_model
    with torch.no_grad():
        for step in model.steps:
            if hasattr(step, "attn"):
                step.attn.qkv.weight[2 * d :] = 0  # W_V = 0 (and its bias): attention outputs a constant
                step.attn.qkv.bias[2 * d :] = 0
    tokens, targets = batch()
    split = channels.channel_split(model, tokens, targets)
    assert split.cone.abs().max() == 0  # nothing travels to earlier positions
    if not mlp:
        torch.testing.assert_close(split.p0, split.res, rtol=0, atol=0)  # P_0 = P_M exactly
    # Local paths keep the adjoint where it is: only the read-out position has influence.
    assert split.p0[:, :-1].abs().max() == 0
    profiles = Profiles.from_channels(split.p0, {a: split.channel(a) for a in channels.CHANNELS})
    regional = Regional(profiles, 0.2)
    assert regional.m["left"] == 0 and regional.delta_gap <= 0
    tests = {row["test"]: row for row in regional.tests()}
    assert not tests["cone_primacy"]["conclusion_holds"] and not tests["cone_primacy"]["holds"]
    assert not tests["sufficient_measured"]["holds"] and not tests["sufficient_universal"]["holds"]


def cyclic_shifts(tokens, targets):
    """Every sequence at every cyclic shift (same target): each position sees the same tokens."""
    L = tokens.shape[1]
    shifted = torch.cat([tokens.roll(s, dims=1) for s in range(L)])
    return shifted, targets.repeat(L)


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_identity_residual_network_supervised_everywhere_has_no_recency(block):
    model = model_of(block=block, readout="all")
    with torch.no_grad():
        for step in model.steps:  # F_k = 0: every step is the identity
            for part in ("attn", "mlp"):
                if getattr(step, part, None) is not None:
                    getattr(step, part).proj.weight.zero_()
                    getattr(step, part).proj.bias.zero_()
        model.position_embedding.weight.zero_()  # no positional information either
    tokens, targets = cyclic_shifts(*batch(n=6))
    split = channels.channel_split(model, tokens, targets)
    assert split.cone.abs().max() == 0 and split.loc.abs().max() == 0
    density = metrics.normalize(adjoint.energy(split.p0).numpy())
    np.testing.assert_allclose(density, np.ones(8), rtol=1e-12)  # flat: neither primacy nor recency
    assert metrics.regional_metrics(density)["Delta"] == pytest.approx(0, abs=1e-12)
    # The same network read out at the last position only: all influence sits there (recency
    # comes from the read-out, not from the residual path).
    last = model_of(block=block, readout="last")
    last.load_state_dict(model.state_dict())
    p0 = adjoint.input_adjoint(last, tokens, targets)
    assert p0[:, :-1].abs().max() == 0 and p0[:, -1].abs().max() > 0


def test_negative_cross_terms_turn_two_u_shaped_channels_into_an_inverted_u():
    res = torch.tensor([1.0, 0.5, 1.0], dtype=torch.float64)[None, :, None]  # one sequence, L = 3, d = 1
    cone = torch.tensor([-1.0, 0.5, -1.0], dtype=torch.float64)[None, :, None]
    parts = {"res": res, "cone": cone, "loc": torch.zeros_like(res)}
    regional = Regional(Profiles.from_channels(res + cone, parts), delta=0.3)  # regions: one position each
    zbar = 1 / 3  # P_0 = (0, 1, 0)
    for a in ("res", "cone"):  # each channel alone: energies (1, 1/4, 1), a U
        assert [regional.J[b][a] * zbar for b in conditions.REGIONS] == pytest.approx([1, 0.25, 1])
    assert [regional.m[b] * zbar for b in conditions.REGIONS] == pytest.approx([0, 1, 0])  # the total: (0, 1, 0)
    assert [regional.Xi(b) * zbar for b in conditions.REGIONS] == pytest.approx([-2, 0.5, -2])
    assert regional.rho("left", ("res", "cone")) == pytest.approx(-1) and regional.rho(
        "middle", ("res", "cone")
    ) == pytest.approx(1)
    regional.check_identity()
    tests = {row["test"]: row for row in regional.tests()}
    assert regional.delta_gap < 0
    # The exact comparison sees the cancellation; the sufficient forms, built to survive it, do not fire.
    for name in ("exact_left", "exact_right", "exact", "sufficient_measured", "sufficient_universal"):
        assert not tests[name]["holds"] and not tests[name]["conclusion_holds"], name


def test_equal_observability_gramians_without_equal_influence():
    """Two positions whose propagators are (different) rotations: equal observability Gramians
    G_i = Phi_i^T Phi_i = I, so an observability balance (Algorithm 3) sees nothing to fix, yet
    task covectors 2 e_1 and e_1 give influence energies 4 and 1."""
    g = torch.Generator().manual_seed(0)
    phi = [torch.linalg.qr(torch.randn(2, 2, generator=g, dtype=torch.float64))[0] for _ in range(2)]
    gramians = [p.T @ p for p in phi]
    torch.testing.assert_close(gramians[0], gramians[1])
    traces = torch.stack([G.trace() for G in gramians])
    assert metrics.influence_imbalance((traces / traces.mean()).numpy()) == pytest.approx(0, abs=1e-12)
    covectors = [2 * torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64)]
    p0 = torch.stack([phi[i].T @ covectors[i] for i in range(2)])[None]  # (1, 2 positions, 2 features)
    energy = adjoint.energy(p0)
    torch.testing.assert_close(energy, torch.tensor([4.0, 1.0], dtype=torch.float64))
    assert metrics.influence_imbalance(metrics.normalize(energy.numpy())) == pytest.approx(0.36)  # density (1.6, 0.4)
