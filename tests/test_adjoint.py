"""One backward pass gives the adjoint at every position: it equals per-position Jacobians."""

import pytest
import torch
from torch.func import jacrev

from lostmid.core import adjoint
from lostmid.core.model import FlagTransformer

from conftest import model_config


@pytest.mark.parametrize("block", ["sequential", "parallel"])
def test_input_adjoint_equals_the_jacobian_of_each_sequence_loss(block):
    torch.manual_seed(0)
    model = FlagTransformer(model_config(seq_len=6, depth=2, d_model=8, heads=2, mlp_ratio=2, block=block)).double()
    tokens = torch.randint(0, 3, (3, 6))
    targets = torch.tensor([0, 1, 1])
    p0 = adjoint.input_adjoint(model, tokens, targets)

    for b in range(3):

        def loss_of_embedding(x0):
            x = x0[None]
            mask = model.logit_bias()
            for k in range(len(model.steps)):  # explicit: jacrev vmaps, and the fused kernel has no batching rule
                x = model.advance(k, x, mask, explicit=True)
            return model.loss(model.read_out(x), targets[b : b + 1])

        expected = jacrev(loss_of_embedding)(model.embed(tokens[b : b + 1])[0].detach())
        torch.testing.assert_close(p0[b], expected)


def test_adjoints_at_every_step_from_one_pass_and_the_terminal_one_lives_at_the_last_position():
    torch.manual_seed(1)
    model = FlagTransformer(model_config(seq_len=6, depth=2, d_model=8, heads=2, mlp_ratio=2)).double()
    tokens = torch.randint(0, 3, (4, 6))
    _, _, states = adjoint.adjoints(model, tokens, torch.zeros(4, dtype=torch.long))
    assert len(states) == len(model.steps) + 1
    terminal = states[-1]
    assert terminal[:, :-1].abs().max() == 0 and terminal[:, -1].abs().max() > 0
    torch.testing.assert_close(states[0], adjoint.input_adjoint(model, tokens, torch.zeros(4, dtype=torch.long)))


def seed_models(n_seeds, dtype=torch.float64, **config):
    models = []
    for seed in range(n_seeds):
        torch.manual_seed(seed)
        models.append(
            FlagTransformer(model_config(seq_len=6, depth=2, d_model=8, heads=2, mlp_ratio=2, **config)).to(dtype)
        )
    return models


@pytest.mark.parametrize("per_model_batches", [False, True])
def test_one_vmapped_pass_gives_every_seeds_input_energy(per_model_batches):
    models = seed_models(3)
    generator = torch.Generator().manual_seed(0)
    shape = (3, 5, 6) if per_model_batches else (5, 6)
    tokens = torch.randint(0, 3, shape, generator=generator)
    targets = torch.randint(0, 2, shape[:-1], generator=generator)

    stacked = adjoint.seed_input_energies(models, tokens, targets)

    looped = torch.stack(
        [
            adjoint.energy(
                adjoint.input_adjoint(
                    m, tokens[s] if per_model_batches else tokens, targets[s] if per_model_batches else targets
                )
            )
            for s, m in enumerate(models)
        ]
    )
    assert stacked.shape == (3, 6)
    torch.testing.assert_close(stacked, looped.detach())
    assert not torch.allclose(stacked[0], stacked[1])  # the seeds' models really differ


def test_the_vmapped_energies_differentiate_through_a_shared_attention_bias():
    models = seed_models(2)
    tokens = torch.randint(0, 3, (4, 6), generator=torch.Generator().manual_seed(1))
    targets = torch.tensor([0, 1, 1, 0])
    theta = torch.randn(6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).tril().requires_grad_()

    (vmapped,) = torch.autograd.grad(
        adjoint.seed_input_energies(models, tokens, targets, bias=theta).square().sum(), theta
    )

    def looped_objective(bias):
        total = 0
        for m in models:
            m.attn_bias = bias  # a buffer swap that keeps the gradient path to theta (explicit attention reads it)
            total = (
                total
                + adjoint.energy(adjoint.input_adjoint(m, tokens, targets, create_graph=True, explicit=True))
                .square()
                .sum()
            )
        return total

    (looped,) = torch.autograd.grad(looped_objective(theta), theta)
    torch.testing.assert_close(vmapped, looped)
    assert looped.abs().max() > 0
