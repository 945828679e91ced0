"""Adjoint states P_k = d loss / d X_k from one backward pass (DESIGN.md section 4).

The loss of a batch is the *sum* of the per-sequence losses, so the gradient with respect to
a residual state of sequence b is that sequence's own adjoint: sequences never interact.
Zero-valued taps added to the residual states X_0 .. X_M turn one reverse pass into the
adjoints at every position (and, if asked, every step); never one pass per position.
"""

from __future__ import annotations

import torch


def adjoints(model, tokens, targets, create_graph: bool = False, weights=None, all_steps: bool = True):
    """The per-sequence loss sum and the adjoints [P_0, ..., P_M], each (batch, L, d).

    ``all_steps=False`` returns only [P_0]. ``create_graph`` keeps the graph so that functions
    of the adjoints can be differentiated again (influence balancing); ``weights`` scales each
    sequence's loss (positional reweighting).
    """
    n_states = len(model.steps) + 1 if all_steps else 1
    shape = (tokens.shape[0], tokens.shape[1], model.config.d_model)
    dtype = model.token_embedding.weight.dtype
    taps = [torch.zeros(shape, dtype=dtype, device=tokens.device, requires_grad=True) for _ in range(n_states)]
    logits = model(tokens, taps=taps + [None] * (len(model.steps) + 1 - n_states))
    loss = model.loss(logits, targets, weights) * tokens.shape[0]  # sum over sequences
    return loss, list(torch.autograd.grad(loss, taps, create_graph=create_graph))


def input_adjoint(model, tokens, targets, create_graph: bool = False, weights=None) -> torch.Tensor:
    """P_0 = d loss / d X_0, the gradient with respect to the input embeddings, (batch, L, d)."""
    return adjoints(model, tokens, targets, create_graph, weights, all_steps=False)[1][0]


def energy(adjoint: torch.Tensor) -> torch.Tensor:
    """Influence energy per position: E ||P(i)||^2, the mean over sequences, shape (L,)."""
    return adjoint.square().sum(-1).mean(0)


def density(energy_profile: torch.Tensor) -> torch.Tensor:
    """Normalized density m_i = I(i) / mean_j I(j) (mean 1); differentiable."""
    return energy_profile / energy_profile.mean(-1, keepdim=True)
