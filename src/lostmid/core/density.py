"""The influence density and its imbalance (docs/theory.md §4.2 and §4.3), each formula once.

    p_i   = (i - 1/2) / L                    relative position of token i (1-based)
    m_i   = I(i) / (mean_j I(j) + eps)       normalized density (mean 1 when eps = 0)
    E_inf = (1/L) sum_i (m_i - nu_i)^2       imbalance against a target density nu (nu = 1 by default)

Every user computes these here: the reported metrics (``lostmid.analysis.metrics``, numpy), the
penalty of Algorithm 1 (``lostmid.objectives.algorithm1_balance``), the attention-bias fit
(``lostmid.analysis.bias_fit``), the density flow and the algebraic remedies (torch, with the
graph kept). The formulas use only what numpy arrays and torch tensors share (arithmetic,
``.mean(-1, keepdims=True)``), so either kind goes in and the same kind comes out, computed with
that library's own arithmetic: a numpy caller gets bit for bit what numpy gave it before, a torch
caller keeps its autograd graph and works under torch.func transforms (vmap, grad, jvp). Checks
that read the data (an energy that is zero everywhere) are left to the numpy wrappers, since a
data-dependent branch cannot run inside a vmap. This module imports neither torch nor anything of
lostmid, so the torch-free tables and figures use it too.
"""

from __future__ import annotations

import numpy as np


def relative_position(i, L):
    """p = (i - 1/2) / L of the 1-based position(s) ``i`` in a sequence of length ``L`` (arrays,
    tensors or table columns alike): the midpoint of token i's cell of (0, 1)."""
    return (i - 0.5) / L


def positions(L: int) -> np.ndarray:
    """p_i = (i - 1/2) / L of the L tokens, float64 (torch callers wrap it with ``torch.from_numpy``)."""
    return relative_position(np.arange(1, L + 1), L)


def density(energy, eps: float = 0.0):
    """m_i = I(i) / (mean_j I(j) + eps) over the last axis (positions); mean 1 when eps = 0.

    ``eps`` > 0 is the stabilized normalizer of the algebraic Algorithm 1 (docs/theory.md §7):
    it makes the density depend weakly on the overall scale, which is the point there. With
    eps = 0 (every other user) nothing is added, so the result is exactly I / mean I.
    """
    scale = energy.mean(-1, keepdims=True)
    if eps:
        scale = scale + eps
    return energy / scale


def imbalance(density, target=1.0):
    """E_inf(nu) = (1/L) sum_i (m_i - nu_i)^2 over the last axis: the distance of a density from the
    target density ``target`` (nu = 1, the flat profile, by default; or an array of the density's shape)."""
    return ((density - target) ** 2).mean(-1)
