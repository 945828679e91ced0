"""Adjoint states P_k = d loss / d X_k from one backward pass (docs/theory.md §4).

The loss of a batch is the *sum* of the per-sequence losses, so the gradient with respect to
a residual state of sequence b is that sequence's own adjoint: sequences never interact.
Zero-valued taps added to the residual states X_0 .. X_M turn one reverse pass into the
adjoints at every position (and, if asked, every step); never one pass per position.
"""

from __future__ import annotations

import torch


def zero_state(model, tokens) -> torch.Tensor:
    """A zero residual state (batch, L, d) in the model's dtype: the value of every tap."""
    shape = (tokens.shape[0], tokens.shape[1], model.config.d_model)
    return torch.zeros(shape, dtype=model.token_embedding.weight.dtype, device=tokens.device)


def tapped_logits(model, tokens, n_taps: int = 1, explicit: bool = False):
    """(logits, taps): the model's logits with zero taps added to X_0 .. X_{n_taps - 1}.

    The gradient of any batch sum of per-sequence functions of the logits with respect to tap k
    holds, for every sequence and position, the gradient with respect to X_k: the adjoint P_k
    for the loss, a Jacobian row for one logit. ``explicit``: explicit attention matrices.
    """
    taps = [zero_state(model, tokens).requires_grad_() for _ in range(n_taps)]
    return model(tokens, taps=taps, explicit=explicit), taps


def adjoints(model, tokens, targets, create_graph: bool = False, all_steps: bool = True, explicit: bool = False):
    """(mean loss, logits, [P_0, ..., P_M]) of one forward and one backward pass; each P_k (batch, L, d).

    ``all_steps=False`` returns only [P_0]. ``create_graph`` keeps the graph so that functions
    of the adjoints can be differentiated again (influence balancing, with ``explicit``
    attention, which supports a double backward).
    """
    logits, taps = tapped_logits(model, tokens, len(model.steps) + 1 if all_steps else 1, explicit)
    loss = model.loss(logits, targets)
    total = loss * tokens.shape[0]  # the sum over sequences: each sequence's gradient is its own adjoint
    return loss, logits, list(torch.autograd.grad(total, taps, create_graph=create_graph))


def input_adjoint(model, tokens, targets, create_graph: bool = False, explicit: bool = False) -> torch.Tensor:
    """P_0 = d loss / d X_0, the gradient with respect to the input embeddings, (batch, L, d)."""
    return adjoints(model, tokens, targets, create_graph, all_steps=False, explicit=explicit)[2][0]


def energy(adjoint: torch.Tensor) -> torch.Tensor:
    """Influence energy per position: E ||P(i)||^2, the mean over sequences, shape (L,)."""
    return adjoint.square().sum(-1).mean(0)


def output_jacobian_norms(logits: torch.Tensor, tap: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
    """The blog's influence of every input position on the final output, per sequence, (batch, L):
    ||d logits_L / d x_j||, the Frobenius norm (power 1) of the (answers x d) Jacobian block of the
    readout at position L (both answer logits) with respect to x_j, read through ``tap``, a zero tap
    on X_0 of the pass that gave ``logits`` (``tapped_logits``, or ``functional_logits``). Float64.

    One backward pass per output logit (two), never one per position: the sequences are
    independent, so the gradient of the batch sum of logit c holds every sequence's Jacobian row.
    ``create_graph`` keeps the graph, so that the norms can be differentiated again (the bias fit
    descends through them; the pass must then use explicit attention).
    """
    if logits.dim() == 3:  # readout 'all': the final output is the last position's
        logits = logits[:, -1]
    squared = torch.zeros(tap.shape[:2], dtype=torch.float64, device=tap.device)
    for c in range(logits.shape[-1]):
        retain = create_graph or c + 1 < logits.shape[-1]
        (grad,) = torch.autograd.grad(logits[:, c].sum(), tap, retain_graph=retain, create_graph=create_graph)
        squared = squared + grad.double().square().sum(-1)
    return squared.sqrt()


def functional_logits(model, weights: dict, buffers: dict, tokens, taps=()) -> torch.Tensor:
    """The model's logits with its parameters and buffers replaced by ``weights`` and ``buffers``
    (torch.func.functional_call): a pure function of the weights, so grad, jvp and vmap over the
    weights compose with it. Attention is explicit, whose arithmetic every transform supports."""
    return torch.func.functional_call(model, (weights, buffers), (tokens,), {"taps": taps, "explicit": True})


def functional_input_adjoint(model, weights: dict, buffers: dict, tokens, targets):
    """(mean loss, logits, P_0) of one batch as pure functions of the weights.

    P_0 comes from an inner torch.func.grad of the per-sequence loss sum with respect to a zero
    tap on X_0, so an outer transform over the weights (grad, jvp, vmap) differentiates through it.
    """

    def loss_sum(tap):
        logits = functional_logits(model, weights, buffers, tokens, taps=[tap])
        loss = model.loss(logits, targets)
        return loss * tokens.shape[0], (loss, logits)

    p0, (loss, logits) = torch.func.grad(loss_sum, has_aux=True)(zero_state(model, tokens))
    return loss, logits, p0


def functional_input_energy(model, weights: dict, buffers: dict, tokens, targets) -> torch.Tensor:
    """Input-influence energy E||P_0(i)||^2, shape (L,), as a pure function of the weights."""
    return energy(functional_input_adjoint(model, weights, buffers, tokens, targets)[2])


def seed_input_energies(models, tokens, targets, bias=None) -> torch.Tensor:
    """Input-influence energies E||P_0(i)||^2 of several models of one architecture, (S, L).

    The S models differ only in their weights (seeds). Their parameters are stacked
    (torch.func.stack_module_state) and ONE vmapped pass of ``functional_input_energy`` gives
    every model's P_0: S small models share the device in one forward and backward, not S.

    ``tokens``, ``targets``: one batch for every model, (batch, L) and (batch,), or one per
    model, (S, batch, L) and (S, batch). ``bias``: an attention-logit bias used by every model
    in place of its own; it may carry a gradient, and the energies are differentiable with
    respect to it (the bias fit descends through them).
    """
    base = models[0]
    weights, _ = torch.func.stack_module_state(models)
    buffers = dict(base.named_buffers())
    if bias is not None:
        buffers["attn_bias"] = bias
    per_model_data = 0 if tokens.dim() == 3 else None

    def input_energy(model_weights, x, y):
        return functional_input_energy(base, model_weights, buffers, x, y)

    return torch.func.vmap(input_energy, in_dims=(0, per_model_data, per_model_data))(weights, tokens, targets)
