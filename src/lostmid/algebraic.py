"""Algebraic controlled simulations of the paper's section 4 (DESIGN.md section 7).

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

The library is pure functions of the settings; it never writes files (the commands do).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from lostmid.errors import ConfigError
from lostmid.metrics import influence_imbalance, normalize, positions, regional_metrics

DTYPE = torch.float64  # closed-form quantities: double precision so E_inf ~ 1e-4 is meaningful
METHODS = ("baseline", "alg1", "alg2", "alg3")
TABLE_COLUMNS = ["method", "left", "middle", "right", "Delta", "SC", "LIM", "E_inf", "Z"]
PROBE_COLUMNS = ["n_probe", "rel_bias", "rel_std", "exact"]


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlgebraicSettings:
    """Every constant of the algebraic simulations; ``config["algebraic"]`` maps onto it 1:1.

    The paper states the Cesàro mixing, the supervised mass 0.15, gamma1 = 0.12, lambda1 = 15,
    delta = 0.2, the probe counts and the 1000 repetitions. The rest (L, M, eps, kappa, d, rho,
    the Algorithm 2 and 3 constants) it leaves unstated; the defaults are the result of a small
    search documented in docs/algebraic.md.
    """

    length: int = 40  # L, number of tokens
    depth: int = 32  # M, number of depth steps
    step: float = 0.03125  # eps, step size (M * eps = 1: depth horizon T = 1)
    mixing: float = 1.9  # kappa: B = I + eps * kappa * (C - I)
    features: int = 5  # d, per-token state dimension
    obs_decay: float = 0.9  # rho: C_out feature map W = diag(1, rho, rho^2, ...)
    uniform_mass: float = 0.15  # mass of the uniformly supervised part of the terminal covector
    delta: float = 0.2  # region scale of the metrics
    gamma1: float = 0.12  # Algorithm 1 ridge on the gains, gamma1 / (2L) ||u||^2
    lambda1: float = 15.0  # Algorithm 1 weight of E_inf
    eps_inf: float = 1e-3  # Algorithm 1 normalizer stabilizer: m_i = I_i / (mean_j I_j + eps_inf)
    alg2_rounds: int = 10  # Algorithm 2 outer rounds
    alg2_eta: float = 1.0  # Algorithm 2 exponent: w <- w * (nu / m)^eta, renormalized
    gamma3: float = 1.0  # Algorithm 3 ridge on the gains
    lambda3: float = 15.0  # Algorithm 3 weight of the trace penalty
    max_iter: int = 2000  # L-BFGS iteration cap (Algorithms 1 and 3)
    tol_grad: float = 1e-7  # L-BFGS stops when max |dJ/du| <= tol_grad ...
    tol_change: float = 1e-15  # ... or when J or the step changes by less than this
    probe_counts: tuple[int, ...] = field(default=(1, 2, 4, 8, 16, 32))
    repetitions: int = 1000  # independent probe batches per probe count
    seed: int = 0  # seeds the Gaussian probes

    @classmethod
    def from_dict(cls, raw: dict | None) -> "AlgebraicSettings":
        """Build and validate settings; every error names the offending ``algebraic.<key>``."""
        raw = dict(raw or {})
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ConfigError(f"algebraic: unknown key(s) {unknown}; allowed: {sorted(known)}")
        values = {}
        for name, value in raw.items():
            default = known[name].default
            if name == "probe_counts":
                if not isinstance(value, (list, tuple)) or not value:
                    raise ConfigError(f"algebraic.probe_counts must be a non-empty list of integers, got {value!r}")
                value = tuple(_as_int(f"probe_counts[{i}]", v) for i, v in enumerate(value))
            elif isinstance(default, int) and not isinstance(default, bool):
                value = _as_int(name, value)
            else:
                value = _as_float(name, value)
            values[name] = value
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        checks = {
            "length": self.length >= 5,
            "depth": self.depth >= 1,
            "step": 0 < self.step <= 1,
            "mixing": self.mixing > 0 and self.step * self.mixing <= 1,
            "features": self.features >= 1,
            "obs_decay": 0 < self.obs_decay <= 1,
            "uniform_mass": 0 <= self.uniform_mass < 1,
            "delta": 0 < self.delta < 0.5,
            "gamma1": self.gamma1 >= 0,
            "lambda1": self.lambda1 > 0,
            "eps_inf": self.eps_inf >= 0,
            "alg2_rounds": self.alg2_rounds >= 0,
            "alg2_eta": self.alg2_eta >= 0,
            "gamma3": self.gamma3 >= 0,
            "lambda3": self.lambda3 > 0,
            "max_iter": self.max_iter >= 1,
            "tol_grad": self.tol_grad > 0,
            "tol_change": self.tol_change > 0,
            "probe_counts": len(self.probe_counts) >= 2 and all(n >= 1 for n in self.probe_counts),
            "repetitions": self.repetitions >= 2,
            "seed": self.seed >= 0,
        }
        why = {
            "mixing": "must be > 0 with step * mixing <= 1 (B must stay a nonnegative, row-stochastic mix)",
            "probe_counts": "needs at least two probe counts, each >= 1 (a slope needs two points)",
        }
        for key, ok in checks.items():
            if not ok:
                raise ConfigError(f"algebraic.{key} = {getattr(self, key)!r} is out of range: {why.get(key, 'see the schema')}")
        # Regions must be non-empty at this L (metrics raises a ValueError; we want a ConfigError).
        p = positions(self.length)
        if not ((p < self.delta).any() and (p >= 1 - self.delta).any() and ((p >= self.delta) & (p < 1 - self.delta)).any()):
            raise ConfigError(f"algebraic.delta = {self.delta} leaves a region empty at algebraic.length = {self.length}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["probe_counts"] = list(self.probe_counts)
        return d


def _as_int(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
        raise ConfigError(f"algebraic.{name} must be an integer, got {value!r}")
    return int(value)


def _as_float(name, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"algebraic.{name} must be a finite number, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------------------------
# The linear causal model
# --------------------------------------------------------------------------------------------
def cesaro_matrix(length: int) -> torch.Tensor:
    """C_ij = 1{j <= i} / i: row i averages tokens 1..i (causal, row-stochastic)."""
    i = torch.arange(1, length + 1, dtype=DTYPE)
    return torch.tril(torch.ones(length, length, dtype=DTYPE)) / i[:, None]


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


def gramian_traces(s: AlgebraicSettings, gains: torch.Tensor) -> torch.Tensor:
    """t_i(u) = tr G_i(u) = e^{2 u_i} tr G_i(0): the scalar surrogate Algorithm 3 balances."""
    return torch.exp(2 * gains) * torch.diagonal(gramians(s, torch.zeros_like(gains)), dim1=-2, dim2=-1).sum(-1)


def condition_numbers(gram: torch.Tensor) -> torch.Tensor:
    """Directional condition numbers kappa(G_i) = lambda_max / lambda_min, per token."""
    ev = torch.linalg.eigvalsh(gram)
    return ev[..., -1] / ev[..., 0]


# --------------------------------------------------------------------------------------------
# Objectives (torch, differentiable)
# --------------------------------------------------------------------------------------------
def _density(energy: torch.Tensor) -> torch.Tensor:
    return energy / energy.mean()


def influence_penalty(s: AlgebraicSettings, gains: torch.Tensor, weights=None) -> torch.Tensor:
    """E_inf(u) = (1/L) sum_i (m_i - 1)^2 against the uniform target."""
    return ((_density(influence_energy(s, gains, weights)) - 1) ** 2).mean()


def trace_penalty(traces: torch.Tensor) -> torch.Tensor:
    """Algorithm 3's normalized trace penalty sum_i (t_i / sum_j t_j - 1/L)^2 (DESIGN.md section 6)."""
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
    energy = influence_energy(s, gains)
    density = energy / (energy.mean() + s.eps_inf)
    return s.gamma1 / (2 * s.length) * (gains**2).sum() + s.lambda1 / 2 * ((density - 1) ** 2).mean()


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


# --------------------------------------------------------------------------------------------
# The remedies
# --------------------------------------------------------------------------------------------
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
        m = _density(influence_energy(s, gains, w))
        w = w * m.reciprocal() ** s.alg2_eta
        w = w / w.mean()
    return w


def algorithm3(s: AlgebraicSettings) -> OptimResult:
    """Observability (trace) balancing: minimize J_3 over the free gains, exact traces."""
    base = gramian_traces(s, torch.zeros(s.length, dtype=DTYPE))
    return minimize(s, lambda u: objective_alg3(s, u, base), s.length)


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------
def evaluate(s: AlgebraicSettings, method: str, gains: torch.Tensor, weights=None) -> tuple[dict, pd.DataFrame]:
    """One table row (influence metrics, Z, trace-density metrics, condition numbers) and the profiles."""
    with torch.no_grad():
        energy = influence_energy(s, gains, weights).numpy()
        gram = gramians(s, gains)
        traces = torch.diagonal(gram, dim1=-2, dim2=-1).sum(-1).numpy()
        cond = condition_numbers(gram).numpy()
    m = normalize(energy)
    tau = normalize(traces)
    inf = regional_metrics(m, s.delta)
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
        "Z": float(energy.sum()),
        "trace_left": obs["m_left"],
        "trace_middle": obs["m_middle"],
        "trace_right": obs["m_right"],
        "obs_imbalance": influence_imbalance(tau),
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


# --------------------------------------------------------------------------------------------
# Probe study
# --------------------------------------------------------------------------------------------
def probe_traces(gram: torch.Tensor, probes: torch.Tensor) -> torch.Tensor:
    """Hutchinson trace estimates with common probes: t_i = (1/N) sum_r xi_r^T G_i xi_r.

    ``probes`` is (reps, N, d), shared by every token (common probes); returns (reps, L).
    """
    return torch.einsum("rnd,lde,rne->rl", probes, gram, probes) / probes.shape[-2]


def probe_study(s: AlgebraicSettings) -> pd.DataFrame:
    """Relative bias and standard deviation of the probe-estimated squared trace penalty.

    The baseline (u = 0) Gramians are exact; each repetition draws N Gaussian probes common to
    all tokens. Probes are nested across N (the first N of one batch of max(N)), common random
    numbers that make the curves over N smoother without changing any single estimator's law.
    ``rel_bias_theory`` is the exact bias: Var of a one-probe estimate of t_i - mean t, summed,
    over N: E[Omega_hat] - Omega = (2 / (N L)) sum_i tr((G_i - mean G)^2).
    """
    with torch.no_grad():
        gram = gramians(s, torch.zeros(s.length, dtype=DTYPE))
        exact = float(squared_trace_penalty(torch.diagonal(gram, dim1=-2, dim2=-1).sum(-1)))
        centered = gram - gram.mean(0, keepdim=True)
        one_probe_bias = float(2 * (centered @ centered).diagonal(dim1=-2, dim2=-1).sum() / s.length)
        gen = torch.Generator().manual_seed(s.seed)
        probes = torch.randn(s.repetitions, max(s.probe_counts), s.features, generator=gen, dtype=DTYPE)
        rows = []
        for n in sorted(s.probe_counts):
            est = squared_trace_penalty(probe_traces(gram, probes[:, :n]))
            rows.append(
                {
                    "n_probe": n,
                    "rel_bias": float(est.mean() / exact - 1),
                    "rel_std": float(est.std() / exact),
                    "exact": exact,
                    "rel_bias_theory": one_probe_bias / n / exact,
                    "rel_se_bias": float(est.std() / exact / math.sqrt(s.repetitions)),
                    "repetitions": s.repetitions,
                }
            )
    return pd.DataFrame(rows)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (y must be positive)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.any(y <= 0):
        raise ValueError("log-log slope needs positive values")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])
