"""The paper's three remedies on the algebraic model, and its Table 1.

Algorithm 1 (influence balancing) and Algorithm 3 (trace balancing) minimize their objectives
over the free gains u with L-BFGS; Algorithm 2 reweights the supervised part of the terminal
covector in an outer loop. ``remedy_table`` evaluates all of them with the regional metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lostmid.algebraic.linear_model import (
    DTYPE,
    condition_numbers,
    gramian_traces,
    gramians,
    influence_energy,
    traces_of,
)
from lostmid.algebraic.settings import AlgebraicSettings
from lostmid.analysis.metrics import influence_metrics, normalize, regional_metrics
from lostmid.core.density import density, imbalance, positions

TABLE_COLUMNS = ["method", "left", "middle", "right", "Delta", "SC", "LIM", "E_inf", "Z"]


def trace_penalty(traces: torch.Tensor) -> torch.Tensor:
    """Algorithm 3's normalized trace penalty sum_i (t_i / sum_j t_j - 1/L)^2 (docs/theory.md §7).

    Mathematically E_inf of the trace density tau = t / mean(t), divided by L; it is kept in the
    paper's form (shares of the sum against 1/L), not computed as ``imbalance(density(t)) / L``,
    because the other rounding would move the L-BFGS minimizer of J_3 and the table's last bits.
    """
    return ((traces / traces.sum() - 1 / traces.shape[-1]) ** 2).sum(-1)


def squared_trace_penalty(traces: torch.Tensor) -> torch.Tensor:
    """Unnormalized squared trace penalty (1/L) sum_i (t_i - mean t)^2, the probe study's target.

    It is quadratic in the trace estimates, so a probe estimate is biased upwards by the
    estimator variance (which falls like 1/N_probe). The normalized observability imbalance is
    this divided by mean(t)^2.
    """
    return ((traces - traces.mean(-1, keepdim=True)) ** 2).mean(-1)


def objective_alg1(s: AlgebraicSettings, gains: torch.Tensor) -> torch.Tensor:
    """J_1(u) = gamma1 / (2L) ||u||^2 + lambda1 / 2 * E_inf(u), E_inf of the stabilized density.

    As in the paper's Algorithm 1 the batch density is normalized by mean_j I_j + eps_inf. The
    stabilizer makes the penalty depend (weakly) on the overall scale: at a flat profile
    E_inf = (eps_inf / (mean I + eps_inf))^2, which only a larger raw energy reduces. Without it
    (eps_inf = 0) E_inf is scale invariant, the ridge forces mean(u) = 0 at any stationary point,
    and Z could only shrink (Z_new = Z * geomean(m) <= Z by AM-GM once the profile is flat).
    """
    e_inf = imbalance(density(influence_energy(s, gains), eps=s.eps_inf))
    return s.gamma1 / (2 * s.length) * (gains**2).sum() + s.lambda1 / 2 * e_inf


def objective_alg3(s: AlgebraicSettings, gains: torch.Tensor, base_traces: torch.Tensor) -> torch.Tensor:
    """J_3(u) = gamma3 / (2L) ||u||^2 + lambda3 / 2 * sum_i (t_i(u) / sum_j t_j(u) - 1/L)^2."""
    traces = torch.exp(2 * gains) * base_traces
    return s.gamma3 / (2 * s.length) * (gains**2).sum() + s.lambda3 / 2 * trace_penalty(traces)


@dataclass
class OptimResult:
    gains: torch.Tensor
    objective: float
    grad_max: float
    iterations: int
    converged: bool


def minimize(s: AlgebraicSettings, objective, length: int) -> OptimResult:
    """Minimize ``objective(u)`` from u = 0 with L-BFGS (strong Wolfe line search).

    Stopping rule: stop when max_i |dJ/du_i| <= tol_grad (converged), or when J or the step
    changes by less than tol_change, or after max_iter iterations. ``converged`` reports whether
    the final gradient meets tol_grad.
    """
    u = torch.zeros(length, dtype=DTYPE, requires_grad=True)
    opt = torch.optim.LBFGS(
        [u],
        lr=1.0,
        max_iter=s.max_iter,
        max_eval=2 * s.max_iter,
        tolerance_grad=s.tol_grad,
        tolerance_change=s.tol_change,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        value = objective(u)
        value.backward()
        return value

    opt.step(closure)
    u_final = u.detach().clone()
    v = u_final.clone().requires_grad_(True)
    value = objective(v)
    (grad,) = torch.autograd.grad(value, v)
    value = value.detach()
    iterations = opt.state[opt._params[0]].get("n_iter", 0)
    grad_max = float(grad.abs().max())
    return OptimResult(u_final, float(value), grad_max, int(iterations), grad_max <= s.tol_grad)


def algorithm1(s: AlgebraicSettings) -> OptimResult:
    """Influence balancing: minimize J_1 over the free gains (second-order through the adjoint)."""
    return minimize(s, lambda u: objective_alg1(s, u), s.length)


def algorithm2(s: AlgebraicSettings) -> torch.Tensor:
    """Outer-loop positional reweighting of the uniformly supervised part (gains stay 0).

    Each round measures the current density m and moves the supervision weights multiplicatively
    towards the under-influenced tokens, w <- w * (nu / m)^eta, renormalized to mean 1 so the
    supervised mass stays s. Only that mass (0.15) is adjustable: the fixed final-token part and
    the propagator dominate the adjoint, which is why the profile moves little.
    """
    gains = torch.zeros(s.length, dtype=DTYPE)
    w = torch.ones(s.length, dtype=DTYPE)
    for _ in range(s.alg2_rounds):
        m = density(influence_energy(s, gains, w))
        w = w * m.reciprocal() ** s.alg2_eta
        w = w / w.mean()
    return w


def algorithm3(s: AlgebraicSettings) -> OptimResult:
    """Observability (trace) balancing: minimize J_3 over the free gains, exact traces."""
    base = gramian_traces(s, torch.zeros(s.length, dtype=DTYPE))
    return minimize(s, lambda u: objective_alg3(s, u, base), s.length)


def evaluate(s: AlgebraicSettings, method: str, gains: torch.Tensor, weights=None) -> tuple[dict, pd.DataFrame]:
    """One table row (influence metrics, Z, trace-density metrics, condition numbers) and the profiles."""
    with torch.no_grad():
        energy = influence_energy(s, gains, weights).numpy()
        gram = gramians(s, gains)
        traces = traces_of(gram).numpy()
        cond = condition_numbers(gram).numpy()
    m = normalize(energy)
    tau = normalize(traces)
    inf = influence_metrics(energy, s.delta)
    obs = regional_metrics(tau, s.delta)
    row = {
        "method": method,
        "left": inf["m_left"],
        "middle": inf["m_middle"],
        "right": inf["m_right"],
        "Delta": inf["Delta"],
        "SC": inf["SC"],
        "LIM": inf["LIM"],
        "E_inf": inf["E_inf"],
        "Z": inf["Z"],
        "trace_left": obs["m_left"],
        "trace_middle": obs["m_middle"],
        "trace_right": obs["m_right"],
        "obs_imbalance": obs["E_inf"],
        "cond_min": float(cond.min()),
        "cond_max": float(cond.max()),
    }
    profile = pd.DataFrame(
        {
            "method": method,
            "position": np.arange(1, s.length + 1),
            "p": positions(s.length),
            "influence_density": m,
            "trace_density": tau,
            "gain": gains.numpy(),
            "weight": np.ones(s.length) if weights is None else weights.numpy(),
        }
    )
    return row, profile


def remedy_table(s: AlgebraicSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paper's Table 1 (rows baseline, alg1, alg2, alg3) and the per-token profiles behind it.

    Extra columns: ``trace_*`` (regional averages of the normalized trace density),
    ``obs_imbalance`` ((1/L) sum (tau_i - 1)^2), ``cond_min/max`` (directional condition numbers
    over tokens), and for the optimized rows the optimizer's ``iterations``, ``grad_max`` and
    ``converged``.
    """
    zeros = torch.zeros(s.length, dtype=DTYPE)
    r1, r3 = algorithm1(s), algorithm3(s)
    runs = {
        "baseline": (zeros, None, None),
        "alg1": (r1.gains, None, r1),
        "alg2": (zeros, algorithm2(s), None),
        "alg3": (r3.gains, None, r3),
    }
    rows, profiles = [], []
    for method, (gains, weights, res) in runs.items():
        row, prof = evaluate(s, method, gains, weights)
        row["iterations"] = res.iterations if res else (s.alg2_rounds if method == "alg2" else 0)
        row["grad_max"] = res.grad_max if res else float("nan")
        row["converged"] = res.converged if res else True
        rows.append(row)
        profiles.append(prof)
    return pd.DataFrame(rows), pd.concat(profiles, ignore_index=True)
