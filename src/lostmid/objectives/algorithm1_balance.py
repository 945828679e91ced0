"""Algorithm 1, influence balancing: the task loss plus (beta/2) E_inf(nu) of the batch's
normalized input-adjoint energies, differentiated through (second order).

The density m comes from the batch's own input adjoint P_0 (one backward pass with the graph
kept, ``create_graph``), so the penalty's gradient flows through the adjoint into the weights.
m is a ratio of batch means, a consistent but (for small batches) biased estimate of the
population density.
"""

from __future__ import annotations

import torch

from lostmid.core.adjoint import adjoints, energy, functional_input_adjoint, functional_logits
from lostmid.core.density import density, imbalance, positions
from lostmid.errors import ConfigError
from lostmid.objectives.settings import TARGETS, remedy_settings
from lostmid.objectives.task_loss import TaskObjective


def target_density(L: int, name: str = "uniform", dtype=torch.float32, device=None) -> torch.Tensor:
    """Target density nu over the L positions, mean 1.

    ``uniform``: nu = 1. ``late``: nu_i = 2 p_i (linear ramp toward the end, recency).
    ``early``: nu_i = 2 (1 - p_i) (primacy). p_i = (i - 1/2) / L, so both ramps have mean 1.
    """
    p = torch.from_numpy(positions(L))
    if name == "uniform":
        nu = torch.ones(L, dtype=torch.float64)
    elif name == "late":
        nu = 2 * p
    elif name == "early":
        nu = 2 * (1 - p)
    else:
        raise ConfigError(f"config key remedy.target: unknown target density {name!r}; known: {list(TARGETS)}")
    return nu.to(dtype=dtype, device=device)


def input_adjoint_with_logits(model, tokens, targets):
    """(mean loss, logits, P_0) of one forward pass with the graph kept, so functions of P_0 can
    be differentiated (explicit attention, which supports the double backward): the trainer's
    task loss and the penalty share one graph."""
    loss, logits, (p0,) = adjoints(model, tokens, targets, create_graph=True, all_steps=False, explicit=True)
    return loss, logits, p0


class BalanceObjective(TaskObjective):
    """Algorithm 1: loss + (beta/2) E_inf(nu), E_inf from the batch's input adjoint P_0.

    ``sequences`` > 0 computes the penalty on the first ``sequences`` of the batch only (a
    cheaper second-order pass); 0 uses the whole batch in the task loss's own graph.
    """

    def __init__(self, spec: dict):
        super().__init__(spec)
        self.settings = remedy_settings(spec["remedy"], spec["variant"])
        self.nu = target_density(spec["model"]["seq_len"], self.settings.target, dtype=torch.float64)

    def penalized(self, model, tokens, targets, logits_of=None, adjoint_of=input_adjoint_with_logits):
        """(total loss, task loss, E_inf, logits) of one batch.

        E_inf(nu) is that of the density of the batch's input adjoint P_0 (``lostmid.core.density``,
        differentiable). That density is a ratio of batch means, I(i) / mean_j I(j): a consistent
        but (for small batches) biased estimate of the population density (ratio-of-expectations
        bias, docs/theory.md §6.2).

        ``logits_of(tokens)`` and ``adjoint_of(tokens, targets)`` -> (loss, logits, P_0) are the
        model's own forward and ``input_adjoint_with_logits`` unless the functional form passes
        its pure-function counterparts.
        """
        beta, n = self.settings.beta, self.settings.sequences
        if n == 0 or n >= tokens.shape[0]:
            loss, logits, p0 = adjoint_of(model, tokens, targets)
        else:
            logits = (logits_of or model)(tokens)
            loss = model.loss(logits, targets)
            _, _, p0 = adjoint_of(model, tokens[:n], targets[:n])
        e_inf = imbalance(density(energy(p0)), self.nu.to(p0))
        return loss + 0.5 * beta * e_inf, loss, e_inf, logits

    def __call__(self, model, tokens, targets, flags, step: int):
        total, _, _, logits = self.penalized(model, tokens, targets)
        return total, logits

    def functional_loss(self, model, weights, buffers, tokens, targets, sequence_weights=None):
        def logits_of(x):
            return functional_logits(model, weights, buffers, x)

        def adjoint_of(model, x, y):
            return functional_input_adjoint(model, weights, buffers, x, y)

        total, _, _, logits = self.penalized(model, tokens, targets, logits_of, adjoint_of)
        return total, logits
