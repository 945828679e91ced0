"""Algebraic controlled simulations of the paper's section 4 (docs/theory.md §7).

A linear causal model whose only trainable parameters are free positionwise input gains u_i.
It is small enough that every quantity has a closed form, so the three remedies of the paper
(Algorithm 1: influence balancing, Algorithm 2: outer-loop reweighting, Algorithm 3: trace
balancing of the observability Gramians) can be checked against exactly what they claim to
control, and the Hutchinson probe estimator of Algorithm 3 against its exact value.

The model (all sizes and constants in :class:`AlgebraicSettings`):

- tokens i = 1..L, each carrying a d-dimensional state; the input of token i is scaled by e^{u_i};
- Cesàro mixing C_ij = 1{j <= i} / i (token i reads the running mean of tokens 1..i);
- one depth step X_{k+1} = B X_k with B = I + eps * kappa * (C - I): an Euler step of size eps
  that mixes the identity (residual path) with C (causal attention); M steps in all;
- output observation C_out: reads the final token through a d x d feature map W = diag(rho^{a});
- terminal covector p_T(i) = a_i W^T 1 with a = (1 - s) e_L + s w / L: a fixed final-token part and
  a uniformly supervised part of mass s = 0.15 (w = 1; Algorithm 2 reweights w, keeping mean(w) = 1);
- input adjoint P_0(i) = e^{u_i} ((B^M)^T p_T)(i); influence energy I(i) = ||P_0(i)||^2; Z = sum_i I(i);
- observability Gramian G_i(u) = e^{2 u_i} sum_{k=0}^{M-1} eps E_i^T (B^k)^T C_out^T C_out B^k E_i.

This module is the model; ``remedies`` runs the three algorithms on it and ``probes`` the probe
study. Everything is a pure function of the settings; nothing writes files (the commands do).
"""

from __future__ import annotations

import torch

from lostmid.algebraic.settings import AlgebraicSettings
from lostmid.analysis.metrics import cesaro_matrix as cesaro

DTYPE = torch.float64  # closed-form quantities: double precision so E_inf ~ 1e-4 is meaningful


def cesaro_matrix(length: int) -> torch.Tensor:
    """C_ij = 1{j <= i} / i: row i averages tokens 1..i (causal, row-stochastic); ``cesaro`` as a tensor."""
    return torch.as_tensor(cesaro(length), dtype=DTYPE)


def propagator(s: AlgebraicSettings) -> torch.Tensor:
    """One depth step B = I + eps * kappa * (C - I) = (1 - eps kappa) I + eps kappa C.

    The identity part is the residual path (it keeps terminal sensitivity where it is, the
    recency channel); the Cesàro part spreads the adjoint towards earlier tokens (primacy).
    """
    eye = torch.eye(s.length, dtype=DTYPE)
    return eye + s.step * s.mixing * (cesaro_matrix(s.length) - eye)


def feature_map(s: AlgebraicSettings) -> torch.Tensor:
    """W = diag(1, rho, rho^2, ...): an anisotropic readout, so the Gramians have condition number > 1."""
    return torch.diag(s.obs_decay ** torch.arange(s.features, dtype=DTYPE))


def observe(s: AlgebraicSettings, state: torch.Tensor) -> torch.Tensor:
    """C_out X = W X(L): the output observation reads the final token. ``state`` is (..., L, d)."""
    return state[..., -1, :] @ feature_map(s).T


def terminal_covector(s: AlgebraicSettings, weights: torch.Tensor | None = None) -> torch.Tensor:
    """p_T (L x d): final-token part of mass 1 - s plus a supervised part s * w_i / L (mean(w) = 1).

    Every supervised token is read through the same feature map, with an all-ones output error,
    so p_T(i) = a_i W^T 1.
    """
    w = torch.ones(s.length, dtype=DTYPE) if weights is None else weights
    a = s.uniform_mass * w / s.length
    a = a + torch.nn.functional.one_hot(torch.tensor(s.length - 1), s.length).to(DTYPE) * (1 - s.uniform_mass)
    readout = feature_map(s).T @ torch.ones(s.features, dtype=DTYPE)
    return a[:, None] * readout[None, :]


def input_adjoint(s: AlgebraicSettings, gains: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """P_0 (L x d): the backward recursion P_k = B^T P_{k+1} from P_M = p_T, then the input gain.

    This is the one reverse pass of the adjoint method (no L separate passes); it is
    differentiable in the gains and the weights, which is what Algorithms 1 and 2 need.
    """
    bt = propagator(s).T
    p = terminal_covector(s, weights)
    for _ in range(s.depth):
        p = bt @ p
    return torch.exp(gains)[:, None] * p


def influence_energy(s: AlgebraicSettings, gains: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """I(i) = ||E_i^* P_0||^2 for every token i."""
    return (input_adjoint(s, gains, weights) ** 2).sum(-1)


def gramians(s: AlgebraicSettings, gains: torch.Tensor) -> torch.Tensor:
    """Observability Gramians G_i(u) (L x d x d), by forward propagation as Algorithm 3 does.

    Inject E_i e_a (every token i, every feature a: the identity basis, batched), propagate it
    forward k = 0..M-1 steps, observe through C_out, and accumulate eps * J^T J. For this linear
    model the forward-mode JVP of a probe xi equals this Gramian's quadratic form xi^T G_i xi.
    """
    L, d = s.length, s.features
    b = propagator(s)
    state = torch.eye(L * d, dtype=DTYPE).reshape(L, d, L, d)  # state[i, a] = E_i e_a
    gram = torch.zeros(L, d, d, dtype=DTYPE)
    for _ in range(s.depth):
        jac = observe(s, state)  # (L, d_in, d_out): C_out B^k E_i
        gram = gram + s.step * jac @ jac.transpose(-1, -2)
        state = torch.einsum("jl,iald->iajd", b, state)
    return torch.exp(2 * gains)[:, None, None] * gram


def traces_of(gram: torch.Tensor) -> torch.Tensor:
    """tr G_i of every token's Gramian, (L, d, d) -> (L,)."""
    return torch.diagonal(gram, dim1=-2, dim2=-1).sum(-1)


def gramian_traces(s: AlgebraicSettings, gains: torch.Tensor) -> torch.Tensor:
    """t_i(u) = tr G_i(u) = e^{2 u_i} tr G_i(0): the scalar surrogate Algorithm 3 balances (differentiable
    in u; the table's ``evaluate`` takes tr G_i(u) of the Gramians it already has)."""
    return torch.exp(2 * gains) * traces_of(gramians(s, torch.zeros_like(gains)))


def condition_numbers(gram: torch.Tensor) -> torch.Tensor:
    """Directional condition numbers kappa(G_i) = lambda_max / lambda_min, per token."""
    ev = torch.linalg.eigvalsh(gram)
    return ev[..., -1] / ev[..., 0]
