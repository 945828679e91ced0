"""Density flow along training (docs/theory.md §4, paper eq. 69), and its finite-difference check.

Along gradient flow theta' = -g, g = grad R (R = mean task loss on a fixed batch), the density
m_i = I(i) / Zbar, Zbar = (1/L) sum_j I(j), moves as

    d_s m_i = -(grad I(i) . g) / Zbar + m_i (1/L) sum_j (grad I(j) . g) / Zbar.

The directional derivatives grad I(i) . g for all i at once are ONE forward-over-reverse
product: torch.func.jvp over the parameters of the map theta -> I_theta, which itself holds
the reverse pass (a vjp) that turns the loss into the input adjoint P_0. Attention runs as
explicit matrices inside it (the fused CPU kernel has no forward-mode AD).

Check: one plain gradient step theta_new = theta - eta g on the same batch gives
(m_new - m_old) / eta = d_s m + O(eta). Everything here runs in float64 on a copy of the
model, so the check measures the O(eta) truncation and not float32 round-off (which would
grow like 1/eta).
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch
from torch.func import grad, jvp

from lostmid.core.adjoint import functional_input_energy, functional_logits
from lostmid.core.density import density, positions

FLOW_COLUMNS = ["position", "p", "eta", "predicted", "finite_difference", "rel_error"]


class _InputEnergy:
    """theta -> I_theta (shape L): the input-influence energy on a fixed batch, as a pure function."""

    def __init__(self, model, tokens, targets):
        self.model = model
        self.tokens = tokens
        self.targets = targets
        self.buffers = dict(model.named_buffers())

    def risk(self, params):
        """R: the mean task loss on the batch."""
        return self.model.loss(functional_logits(self.model, params, self.buffers, self.tokens), self.targets)

    def __call__(self, params):
        return functional_input_energy(self.model, params, self.buffers, self.tokens, self.targets)


def _float64_copy(model):
    model = copy.deepcopy(model).double()
    model.eval()
    return model


def predicted_flow(model, tokens, targets) -> dict:
    """Density, gradient and predicted d_s m at the model's parameters (float64).

    Returns a dict with ``params``, ``g`` (dicts of tensors), ``energy`` I (L,), ``density`` m (L,),
    ``directional`` grad I . g (L,) and ``predicted`` d_s m (L,).
    """
    model = _float64_copy(model)
    energy_of = _InputEnergy(model, tokens, targets)
    params = {name: p.detach() for name, p in model.named_parameters()}
    g = grad(energy_of.risk)(params)
    energy, directional = jvp(energy_of, (params,), (g,))
    zbar = energy.mean()
    m = density(energy)
    predicted = -directional / zbar + m * directional.mean() / zbar
    return {
        "model": model,
        "energy_of": energy_of,
        "params": params,
        "g": g,
        "energy": energy,
        "density": m,
        "directional": directional,
        "predicted": predicted,
    }


def finite_difference(flow: dict, eta: float) -> torch.Tensor:
    """(m(theta - eta g) - m(theta)) / eta on the same batch, from ``predicted_flow``'s output."""
    stepped = {name: p - eta * flow["g"][name] for name, p in flow["params"].items()}
    with torch.no_grad():
        energy = flow["energy_of"](stepped)
    return (density(energy) - flow["density"]) / eta


def relative_error(finite_diff, predicted) -> float:
    """||fd - predicted|| / ||predicted|| over positions."""
    return float(torch.linalg.vector_norm(finite_diff - predicted) / torch.linalg.vector_norm(predicted))


def flow_table(model, tokens, targets, etas) -> pd.DataFrame:
    """One row per (eta, position): p, eta, predicted d_s m, the finite difference of one step of
    size eta, and the run's relative error at that eta.

    ``etas``: one step size or several; the prediction is computed once and checked against a
    gradient step of each size (the error of a first-order difference falls like eta).
    """
    flow = predicted_flow(model, tokens, targets)
    L = tokens.shape[1]
    tables = []
    for eta in np.atleast_1d(etas):
        fd = finite_difference(flow, float(eta))
        tables.append(
            pd.DataFrame(
                {
                    "position": np.arange(1, L + 1),
                    "p": positions(L),
                    "eta": float(eta),
                    "predicted": flow["predicted"].cpu().numpy(),
                    "finite_difference": fd.cpu().numpy(),
                    "rel_error": relative_error(fd, flow["predicted"]),
                },
                columns=FLOW_COLUMNS,
            )
        )
    return pd.concat(tables, ignore_index=True)
